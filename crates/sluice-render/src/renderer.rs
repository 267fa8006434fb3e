//! `Renderer`: one GPU device, the proxies of every source it shows, and frames.

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::task::{Wake, Waker};

use sluice_core::pieces::{pixel_rect, plan_damage, Damage};

use crate::bricking::TextureLimits;
use crate::buffer_proxy::BufferKey;
use crate::camera::Camera;
use crate::colormap::Colormap;
use crate::counters::{Counters, FrameStats};
use crate::device::shared_device;
use crate::device_upload::DeviceUpload;
use crate::draw::{kind, ComputeFrame, Draw, PassNeed, Resources};
use crate::error::RenderError;
use crate::image_pipeline::ImagePipelines;
use crate::mesh_pipeline::MeshPipelines;
use crate::options::{ImageDraw, RendererOptions};
use crate::paged::{Completion, PagedTextures, Progress, DEFAULT_GPU_BUDGET};
use crate::pipeline::PassKind;
use crate::proxy::{SourceKey, TextureProxy, UploadContext};
use crate::redraw::{screen_rect, ClearRect, DrawSignature, DrawnFrame, FrameSignature};
use crate::scene::Scene;
use crate::staging::StagingRing;
use crate::target::{RenderTarget, TargetLayouts};
use crate::unpack::Unpacker;
use crate::visual::Visual;
use crate::volume_pipeline::VolumePipelines;

// A renderer may move to another thread (sources are written from any thread anyway).
const _: () = {
    const fn assert_send<T: Send>() {}
    assert_send::<Renderer>();
};

/// Set by sources' wakers when data that was not ready becomes ready; the notify hook (a
/// window's event loop) hears of it at once.
#[derive(Default)]
struct RedrawFlag(
    AtomicBool,
    parking_lot::Mutex<Option<RedrawNotify>>,
    // Wakes a render_until_complete waiting for chunks.
    (parking_lot::Mutex<()>, parking_lot::Condvar),
);

/// Called from any thread when a source wakes the renderer (see
/// [`Renderer::set_redraw_notify`]).
pub type RedrawNotify = Arc<dyn Fn() + Send + Sync>;

impl Wake for RedrawFlag {
    fn wake(self: Arc<Self>) {
        self.0.store(true, Ordering::Release);
        {
            let _guard = self.2 .0.lock();
            self.2 .1.notify_all();
        }
        let notify = self.1.lock().clone();
        if let Some(notify) = notify {
            notify();
        }
    }
}

static NEXT_RENDERER_ID: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(1);

/// Draws scenes on one GPU and owns the GPU copies of every source they show.
///
/// One texture per source however many visuals show it, created on the first frame that
/// draws the source and freed when the last visual showing it is dropped. Each frame uploads
/// only what changed since the last (see the proxy layer in `docs/architecture.md`).
///
/// Headless by default: render into a [`RenderTarget`] and read it back with
/// [`Renderer::read_image`].
pub struct Renderer {
    adapter: wgpu::Adapter,
    info: wgpu::AdapterInfo,
    /// What the visuals draw with: device, proxies, pipelines, colormaps, visuals' GPU state.
    res: Resources,
    staging: StagingRing,
    upload_budget: Option<u64>,
    scratch: Vec<u8>,
    redraw: Arc<RedrawFlag>,
    /// Compute pipelines for device-resident copies into textures.
    unpack: Unpacker,
    /// Unique among renderers (what a target remembers drawing is per renderer).
    id: u64,
    /// Built on the first partial redraw.
    clear_rect: Option<ClearRect>,
    /// How frames of one dense image are drawn ([`ImageDraw::resolve`]d: never `Auto`).
    image_draw: ImageDraw,
    /// Set when a frame unwound (a panic) before its commands were submitted, or its
    /// commands had a validation error: the copies it recorded never ran, so the next frame
    /// uploads again what they were to bring ([`LostFrameGuard`]).
    lost_frame: Arc<AtomicBool>,
    /// The device's pipeline cache on disk, held while this renderer lives (see
    /// `pipeline_cache`).
    _pipeline_cache: Option<crate::pipeline_cache::CacheHold>,
    /// Tests: the next frame records an invalid command after its copies.
    #[cfg(test)]
    gpu_error_next_frame: bool,
}

/// Marks a frame lost if it unwinds before its submission: its encoder, and the copies the
/// proxies recorded into it and count as done, are dropped. (A frame whose commands had a
/// validation error is marked lost the same way after its submission.) The next frame then
/// has every proxy that began an upload in it upload again what changed since its last
/// upload before the lost one (the sources were not yet told of the lost versions, so
/// release-after-upload data is still there), remakes what is
/// derived from the textures (volume grids, z-paired copies; mesh culls see to themselves),
/// and the target, whose record of what it shows was written for a frame that never ran, is
/// redrawn whole. Armed only if the thread was not unwinding already when the frame began.
struct LostFrameGuard<'t> {
    lost: Arc<AtomicBool>,
    target: Option<&'t RenderTarget>,
    armed: bool,
}

impl Drop for LostFrameGuard<'_> {
    fn drop(&mut self) {
        if self.armed && std::thread::panicking() {
            self.lost.store(true, Ordering::Release);
            if let Some(target) = self.target {
                target.invalidate();
            }
        }
    }
}

#[cfg(test)]
impl Renderer {
    /// Makes the paged marchers built from now on look each sample's page up (see
    /// `PagedVolumes::per_sample_spans`).
    pub(crate) fn set_per_sample_spans(&mut self, on: bool) {
        self.res.paged.volumes.per_sample_spans = on;
    }
}

impl Renderer {
    /// A renderer on the best adapter with default options. Reads no environment variable:
    /// `Renderer::with_options(RendererOptions::from_env()?)` honours `SLUICE_BACKEND` and
    /// `SLUICE_ADAPTER`.
    pub fn new() -> Result<Self, RenderError> {
        Renderer::with_options(RendererOptions::default())
    }

    /// A renderer set up by `options`.
    ///
    /// Picks, among the adapters of the requested backends whose name matches, a discrete
    /// GPU over an integrated one over a virtual one over a CPU one, and Vulkan, Metal or DX12
    /// over GL. Renderers on the same adapter share one device (see "Devices and instances" in
    /// `docs/architecture.md`).
    pub fn with_options(options: RendererOptions) -> Result<Self, RenderError> {
        let adapter = options.choose_adapter()?;
        if let Some(side) = options.page_size_2d {
            // A slot is the page and a border sample on each side, and must fit a texture.
            let limit = adapter.limits().max_texture_dimension_2d as usize;
            if side == 0 || side.checked_add(2).is_none_or(|slot| slot > limit) {
                return Err(RenderError::InvalidOption {
                    name: "page_size_2d",
                    value: format!("{side} (the adapter's 2-D texture limit is {limit})"),
                    expected: "a page side of at least 1 that with its two border samples fits the 2-D texture limit",
                });
            }
        }
        let (device, queue) = shared_device(&adapter)?;
        Ok(Renderer::from_device(adapter, device, queue, &options))
    }

    /// A renderer on a device the caller opened (for example with extra extensions);
    /// `options.backends` and `options.adapter_name` are not used.
    pub fn from_device(
        adapter: wgpu::Adapter,
        device: wgpu::Device,
        queue: wgpu::Queue,
        options: &RendererOptions,
    ) -> Self {
        let info = adapter.get_info();
        let cpu = info.device_type == wgpu::DeviceType::Cpu;
        // Compute shaders are there on every backend but downlevel GL; without them lone
        // images stay with the rasterizer, whatever was asked.
        let image_draw = if adapter
            .get_downlevel_capabilities()
            .flags
            .contains(wgpu::DownlevelFlags::COMPUTE_SHADERS)
        {
            options.image_draw.resolve(&info)
        } else {
            ImageDraw::Raster
        };
        let cull_margin = options
            .mesh_cull
            .then(|| crate::mesh_cull::margin(&adapter, &device))
            .flatten();
        let pipeline_cache =
            crate::pipeline_cache::attach(&info, &device, options.pipeline_cache_dir.as_deref());
        let limits = device.limits();
        let texture_limits = TextureLimits {
            d2: limits.max_texture_dimension_2d,
            d3: options
                .max_texture_dimension_3d
                .map_or(limits.max_texture_dimension_3d, |l| {
                    l.clamp(1, limits.max_texture_dimension_3d)
                }),
        };
        let upload_budget = options.upload_budget;
        let colormap_layout = crate::pipeline::colormap_layout(&device);
        let images = ImagePipelines::new(&device, colormap_layout.clone());
        let volumes = VolumePipelines::new(
            &device,
            colormap_layout.clone(),
            options.volume_pairs && info.device_type == wgpu::DeviceType::Cpu,
        );
        let max_buffer = device.limits().max_buffer_size.min(1 << 30);
        let redraw = Arc::new(RedrawFlag::default());
        let waker = Waker::from(redraw.clone());
        let mut paged = PagedTextures::new(
            &device,
            options.gpu_budget.unwrap_or(DEFAULT_GPU_BUDGET),
            upload_budget,
            // Checked by `with_options`; a device opened elsewhere gets the nearest side that
            // fits (a slot adds two border samples).
            options
                .page_size_2d
                .unwrap_or(sluice_core::DEFAULT_PAGE_2D)
                .clamp(
                    1,
                    (limits.max_texture_dimension_2d as usize)
                        .saturating_sub(2)
                        .max(1),
                ),
            options.always_page_2d,
        );
        paged.volumes.always = options.always_page_3d;
        let dummy_storage = device.create_buffer(&wgpu::BufferDescriptor {
            label: Some("sluice absent attribute"),
            size: 16,
            usage: wgpu::BufferUsages::STORAGE,
            mapped_at_creation: false,
        });
        let mut renderer = Renderer {
            adapter,
            info,
            res: Resources {
                device,
                queue,
                images,
                volumes,
                meshes: MeshPipelines::new(colormap_layout.clone()),
                colormap_layout,
                colormaps: HashMap::new(),
                proxies: HashMap::new(),
                buffers: HashMap::new(),
                dummy_storage,
                dummy_textures: HashMap::new(),
                visuals: HashMap::new(),
                counters: Counters::default(),
                waker,
                device_upload: None,
                texture_limits,
                paged,
                reorder_triangles: options.mesh_reorder && cpu,
                cull_margin,
                cull_pipelines: None,
            },
            staging: StagingRing::new(max_buffer),
            upload_budget,
            scratch: Vec::new(),
            redraw,
            unpack: Unpacker::new(),
            id: NEXT_RENDERER_ID.fetch_add(1, std::sync::atomic::Ordering::Relaxed),
            clear_rect: None,
            image_draw,
            lost_frame: Arc::new(AtomicBool::new(false)),
            _pipeline_cache: pipeline_cache,
            #[cfg(test)]
            gpu_error_next_frame: false,
        };
        for colormap in Colormap::builtins() {
            renderer.res.colormap_gpu(&colormap);
        }
        renderer
    }

    /// The adapter in use.
    pub fn adapter_info(&self) -> &wgpu::AdapterInfo {
        &self.info
    }

    /// The wgpu adapter, for callers that add their own GPU work.
    pub fn adapter(&self) -> &wgpu::Adapter {
        &self.adapter
    }

    /// The GPU resources, for the crate's tests to look at derived data.
    #[cfg(test)]
    pub(crate) fn resources(&self) -> &Resources {
        &self.res
    }

    /// The wgpu device, for callers that add their own GPU work.
    pub fn device(&self) -> &wgpu::Device {
        &self.res.device
    }

    /// The wgpu queue, for callers that add their own GPU work.
    pub fn queue(&self) -> &wgpu::Queue {
        &self.res.queue
    }

    /// The device's pipeline cache on disk and what it was seeded with, if it has one (see
    /// [`crate::PipelineCacheLoader`]).
    pub fn pipeline_cache(&self) -> Option<crate::PipelineCacheInfo> {
        crate::pipeline_cache::info(&self.res.device)
    }

    /// The largest width or height of a 2-D source or target on this device.
    pub fn max_texture_dimension_2d(&self) -> u32 {
        self.res.device.limits().max_texture_dimension_2d
    }

    /// Gives the renderer a GPU-side upload path for device-resident sources (CUDA memory,
    /// Vulkan external memory); `sluice-interop` provides one.
    pub fn set_device_upload(&mut self, upload: Arc<dyn DeviceUpload>) {
        self.res.device_upload = Some(upload);
    }

    /// Sets the most bytes of source data uploaded per frame (`None`: no limit).
    pub fn set_upload_budget(&mut self, bytes: Option<u64>) {
        self.upload_budget = bytes;
        self.res.paged.set_upload_budget(bytes);
    }

    /// Sets the most time one frame spends uploading pages of paged sources (`None`, the
    /// default: no limit), on top of the byte budget. At least one page uploads per frame; the
    /// rest wait for later frames (`FrameStats::uploads_pending`).
    pub fn set_page_upload_time_budget(&mut self, budget: Option<std::time::Duration>) {
        self.res.paged.set_upload_time_budget(budget);
    }

    /// Whether a source woke the renderer (data that was not ready is ready) since the last
    /// call: render again to show it.
    pub fn take_redraw_request(&self) -> bool {
        self.redraw.0.swap(false, Ordering::AcqRel)
    }

    /// Calls `notify` (from the waking thread) whenever a source wakes the renderer, so an
    /// event loop that sleeps until something happens can schedule a frame; `None` removes
    /// it. [`Renderer::take_redraw_request`] still reports the wake.
    pub fn set_redraw_notify(&self, notify: Option<RedrawNotify>) {
        *self.redraw.1.lock() = notify;
    }

    /// Creates an offscreen target of `width` x `height` pixels.
    pub fn create_target(&self, width: u32, height: u32) -> Result<RenderTarget, RenderError> {
        RenderTarget::new(&self.res.device, width, height, None, self.target_layouts())
    }

    /// How frames whose only visual is one dense image are drawn on this renderer's adapter
    /// ([`RendererOptions::image_draw`], resolved: never [`ImageDraw::Auto`], and
    /// [`ImageDraw::Raster`] on an adapter without compute shaders).
    pub fn image_draw(&self) -> ImageDraw {
        self.image_draw
    }

    fn target_layouts(&self) -> TargetLayouts<'_> {
        TargetLayouts {
            volume: self.res.volumes.target_layout(),
            composite: self.res.volumes.composite_layout(),
            storage: self.image_draw == ImageDraw::Compute,
        }
    }

    /// A target drawing into `texture`, a colour texture made elsewhere on this renderer's
    /// device (for example in memory the host reads directly: `sluice_interop::HostTarget`),
    /// with the depth and volume planes of its size made here. The texture must be one 2-D
    /// layer of [`TARGET_FORMAT`](crate::TARGET_FORMAT) with one mip level and one sample,
    /// usable at least as [`TARGET_USAGE`](crate::TARGET_USAGE); otherwise
    /// [`RenderError::TargetTexture`] names what differs, and a size outside the device's
    /// limit is [`RenderError::TargetSize`].
    pub fn target_on_texture(&self, texture: wgpu::Texture) -> Result<RenderTarget, RenderError> {
        RenderTarget::check_color(&texture)?;
        RenderTarget::new(
            &self.res.device,
            texture.width(),
            texture.height(),
            Some(texture),
            self.target_layouts(),
        )
    }

    /// Reads a target back into host memory, waiting for the GPU to finish drawing it.
    pub fn read_image(&self, target: &RenderTarget) -> Result<image::RgbaImage, RenderError> {
        target.read(&self.res.device, &self.res.queue)
    }

    /// Reads a target back into `out`, the caller's buffer of exactly `width * height * 4`
    /// bytes (RGBA8 rows, top row first, no padding), waiting for the GPU to finish drawing
    /// it. For frames read one after another into one buffer: the pixels are copied once from
    /// the mapped readback buffer, into memory that is already the caller's (a new image from
    /// [`Renderer::read_image`] costs its allocation's first touch as well). A buffer of another
    /// length is refused with [`RenderError::ReadbackSize`], and left as it was.
    pub fn read_into(&self, target: &RenderTarget, out: &mut [u8]) -> Result<(), RenderError> {
        target.read_into(&self.res.device, &self.res.queue, out)
    }

    /// Waits until the GPU has finished all submitted work.
    pub fn wait_idle(&self) -> Result<(), RenderError> {
        self.res
            .device
            .poll(wgpu::PollType::wait_indefinitely())
            .map(|_| ())
            .map_err(|e| RenderError::Gpu(e.to_string()))
    }

    /// The proxy layer's counters, after freeing what dropped visuals held.
    pub fn counters(&mut self) -> Counters {
        self.collect_garbage();
        let paged = &self.res.paged;
        Counters {
            resident_bytes: self.res.counters.resident_bytes + paged.texture_bytes(),
            textures_alive: self.res.counters.textures_alive + paged.textures_alive(),
            pages_resident: paged.resident_pages(),
            page_bytes_resident: paged.resident_page_bytes(),
            peak_page_bytes: paged.counters.peak_page_bytes,
            gpu_budget: paged.budget(),
            pages_uploaded: paged.counters.pages_uploaded,
            pages_evicted: paged.counters.pages_evicted,
            page_table_bytes_written: paged.counters.table_bytes_written,
            atlases_shrunk: paged.counters.atlases_shrunk,
            staging_buffers_created: self.staging.created,
            staging_bytes: self.staging.held_bytes,
            compute_copies: self.unpack.recorded(),
            device_pools: self
                .res
                .device_upload
                .as_ref()
                .map_or_else(Default::default, |u| u.pool_counters()),
            ..self.res.counters
        }
    }

    /// Frees the GPU state of dropped visuals, and the textures of sources no visual shows
    /// any more. Runs at the start of every frame and when counters are read.
    pub fn collect_garbage(&mut self) {
        self.res.collect_garbage();
    }

    /// Draws `scene` as seen by `camera` into `target`.
    ///
    /// Before drawing, every source shown is brought up to date on the GPU (only what changed
    /// is uploaded, within the upload budget). Images and meshes are drawn first with depth;
    /// volumes then march their rays up to that depth. On error nothing is drawn; sources,
    /// visuals and the renderer stay usable.
    pub fn render(
        &mut self,
        scene: &Scene,
        camera: &dyn Camera,
        target: &RenderTarget,
    ) -> Result<FrameStats, RenderError> {
        let view_projection = camera.view_projection(target.size());
        self.frame(scene, view_projection, target.size(), Some(target))
    }

    /// Brings every source `scene` shows up to date on the GPU without drawing: the uploads
    /// of [`Renderer::render`] alone (within the upload budget), submitted now. For loading
    /// ahead of showing, and to measure upload cost apart from drawing.
    pub fn upload(&mut self, scene: &Scene) -> Result<FrameStats, RenderError> {
        self.frame(scene, glam::Mat4::IDENTITY, [0, 0], None)
    }

    /// How far `visual`'s view is from complete, as of the last frame; `None` unless it is an
    /// image of a paged (lazy, multiscale or over-limit) source this renderer drew.
    pub fn progress(&self, visual: &Visual) -> Option<Progress> {
        self.res.paged.progress_of(&[kind(visual).id()]).pop()
    }

    /// Forgets the failed chunks of every paged source, so that they load again (failed chunks
    /// are otherwise never fetched twice; see `docs/chunked.md`).
    pub fn retry_failed(&mut self) {
        self.res.paged.retry_failed();
    }

    /// Renders `scene` into `target` once every paged visual's view is complete (all its
    /// visible pages on the GPU) and no upload waits, or once `timeout` has passed; for
    /// offscreen use. Until then it runs the frame's visibility pass and uploads for the view
    /// without drawing (and without a prefetch ring, which would only compete with the view's
    /// own chunks), waiting between them for chunks to arrive (the sources' wakes), never
    /// longer than the time left; then it draws once. The answer says whether the view
    /// completed and, if not, what is missing. A scene with no paged visual draws at once.
    pub fn render_until_complete(
        &mut self,
        scene: &Scene,
        camera: &dyn Camera,
        target: &RenderTarget,
        timeout: std::time::Duration,
    ) -> Result<Completion, RenderError> {
        let deadline = std::time::Instant::now() + timeout;
        let view_projection = camera.view_projection(target.size());
        let ids: Vec<u64> = scene
            .draw_list()
            .into_iter()
            .map(|(v, _)| kind(v).id())
            .collect();
        let mut frames = 0;
        // Prefetching around the view only competes with the view's own chunks here.
        let ring = std::mem::replace(&mut self.res.paged.prefetch_ring, 0);
        // The ring comes back however the run ends, a panic in a frame included.
        let run = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            let result = loop {
                self.take_redraw_request();
                let stats = match self.frame(scene, view_projection, target.size(), None) {
                    Ok(stats) => stats,
                    Err(e) => break Err(e),
                };
                frames += 1;
                let progress = self.res.paged.progress_of(&ids);
                let complete = !stats.uploads_pending && progress.iter().all(Progress::is_complete);
                let now = std::time::Instant::now();
                if complete || now >= deadline {
                    break Ok(Completion {
                        complete,
                        frames,
                        progress,
                    });
                }
                // Something arrived and was uploaded: look again at once. Otherwise what is
                // missing is loading: sleep until a source wakes the renderer.
                if stats.bytes_uploaded > 0 {
                    continue;
                }
                let (lock, condvar) = &self.redraw.2;
                let mut guard = lock.lock();
                if !self.redraw.0.load(Ordering::Acquire) {
                    condvar.wait_for(&mut guard, deadline - now);
                }
            };
            // The one draw keeps the ring off too: an offscreen run would fetch chunks around
            // the view that it never shows.
            result.and_then(|completion| {
                self.render(scene, camera, target)?;
                Ok(completion)
            })
        }));
        self.res.paged.prefetch_ring = ring;
        run.unwrap_or_else(|panic| std::panic::resume_unwind(panic))
    }

    /// One frame: prepare the visuals, upload what changed, draw into `target` if any.
    fn frame(
        &mut self,
        scene: &Scene,
        view_projection: glam::Mat4,
        viewport: [u32; 2],
        target: Option<&RenderTarget>,
    ) -> Result<FrameStats, RenderError> {
        if self.lost_frame.swap(false, Ordering::Acquire) {
            for proxy in self.res.proxies.values_mut() {
                proxy.forget_lost_frame();
            }
            for proxy in self.res.buffers.values_mut() {
                proxy.forget_lost_frame();
            }
        }
        // The staging ring polls the device when it needs a chunk back (see `StagingRing`).
        self.collect_garbage();
        for v in self.res.visuals.values() {
            if let Some(cull) = &v.derived.cull {
                cull.begin_frame();
            }
        }
        self.res.volumes.pairs.begin_render();
        let draws: Vec<Draw<'_>> = scene
            .draw_list()
            .into_iter()
            .map(|(visual, world)| Draw {
                visual,
                world,
                mvp: view_projection * world,
                viewport,
            })
            .collect();

        let scope = self
            .res
            .device
            .push_error_scope(wgpu::ErrorFilter::Validation);
        for draw in &draws {
            kind(draw.visual).prepare(&mut self.res)?;
        }
        let mut encoder = self
            .res
            .device
            .create_command_encoder(&wgpu::CommandEncoderDescriptor {
                label: Some("sluice frame"),
            });
        // From here on commands are recorded into the encoder: an unwind drops them.
        let mut lost_guard = LostFrameGuard {
            lost: self.lost_frame.clone(),
            target,
            armed: !std::thread::panicking(),
        };
        let before = self.res.counters;
        // From the first upload on, the device upload path may count this frame against data
        // it reads (host pages drawn in place): it is told the frame was submitted even if
        // something panics before the submit, so that no count is left for a writer to wait on.
        let submitted = SubmittedGuard {
            upload: self.res.device_upload.clone(),
            queue: self.res.queue.clone(),
        };
        let list = self.upload_list(&draws);
        let paged_pending = self.visibility_pass(&draws);
        let upload = self
            .upload_sources(&list, &mut encoder)
            .and_then(|pending| Ok(pending | paged_pending?));
        let drawn = match (&upload, target) {
            (Ok(_), Some(target)) => self.record_draws(scene, &draws, target, &mut encoder),
            _ => Ok((0, 0)),
        };
        #[cfg(test)]
        if std::mem::take(&mut self.gpu_error_next_frame) {
            // A clear at an offset that is not a multiple of 4: a validation error.
            let buffer = self.res.device.create_buffer(&wgpu::BufferDescriptor {
                label: Some("invalid clear"),
                size: 16,
                usage: wgpu::BufferUsages::COPY_DST,
                mapped_at_creation: false,
            });
            encoder.clear_buffer(&buffer, 1, None);
        }
        // Copies already recorded are real: submit them even if the frame failed, so proxies
        // and the GPU agree on what was uploaded.
        self.staging.finish();
        self.res.queue.submit([encoder.finish()]);
        lost_guard.armed = false;
        let error = pollster::block_on(scope.pop());
        if error.is_some() {
            // wgpu runs none of a command buffer recorded with an error (nor, from an error
            // before it was recorded, can the copies be trusted): they are lost as a panicked
            // frame's are, and the sources are not told of the versions they brought.
            self.lost_frame.store(true, Ordering::Release);
        } else {
            for key in &list.0 {
                if let Some(proxy) = self.res.buffers.get_mut(key) {
                    proxy.submitted();
                }
            }
            for key in &list.1 {
                if let Some(proxy) = self.res.proxies.get_mut(key) {
                    proxy.submitted();
                }
            }
        }
        self.staging.recall();
        self.unpack.frame_submitted();
        crate::pipeline_cache::save_if_changed(&self.res.device);
        drop(submitted);
        if let (Some(target), true) = (target, error.is_some() || drawn.is_err()) {
            // What the target holds is not known: the next frame redraws all of it.
            target.invalidate();
        }
        // What the mesh culls recorded in this frame computed is known only where its
        // commands had no error; otherwise they run again.
        for v in self.res.visuals.values() {
            if let Some(cull) = &v.derived.cull {
                cull.settle(error.is_none());
            }
        }
        if let Some(error) = error {
            return Err(RenderError::Gpu(error.to_string()));
        }
        let uploads_pending = upload?;
        let (visuals_drawn, pixels_drawn) = drawn?;
        Ok(FrameStats {
            bytes_uploaded: self.res.counters.bytes_uploaded - before.bytes_uploaded,
            copies_issued: self.res.counters.copies_issued - before.copies_issued,
            visuals_drawn,
            pixels_drawn,
            uploads_pending,
        })
    }

    /// The frame's upload list: every source the draw list shows, once each, buffers before
    /// textures, in draw order.
    ///
    /// The visibility pass of chunked sources goes here, between the draw list and the
    /// uploads: it will choose, per source, the chunks (and levels) the view needs, and the
    /// proxies then upload those alone.
    fn upload_list(&self, draws: &[Draw<'_>]) -> (Vec<BufferKey>, Vec<SourceKey>) {
        let mut buffer_keys: Vec<BufferKey> = Vec::new();
        let mut texture_keys: Vec<SourceKey> = Vec::new();
        for draw in draws {
            let Some(v) = self.res.visuals.get(&kind(draw.visual).id()) else {
                continue; // paged: the visibility pass takes care of it
            };
            for key in v.buffers.iter().flatten() {
                if !buffer_keys.contains(key) {
                    buffer_keys.push(*key);
                }
            }
            if let Some(key) = v.texture.filter(|k| !texture_keys.contains(k)) {
                texture_keys.push(key);
            }
        }
        (buffer_keys, texture_keys)
    }

    /// The visibility pass of paged sources (see `crate::paged`): per draw of a paged image,
    /// the pages its view needs are requested, and those on the host uploaded within the
    /// frame's upload budget. Never waits on a read. Returns whether uploads wait for a later
    /// frame: ready pages over the budget, or visible pages whose chunks are still loading
    /// (as a dense source's data that is not ready yet; failed chunks show the fill and do
    /// not count).
    fn visibility_pass(&mut self, draws: &[Draw<'_>]) -> Result<bool, RenderError> {
        let paged: Vec<(u64, glam::Mat4, [u32; 2])> = draws
            .iter()
            .map(|d| (kind(d.visual).id(), d.mvp, d.viewport))
            .filter(|(id, _, _)| self.res.paged.has_visual(*id))
            .collect();
        if paged.is_empty() {
            return Ok(false);
        }
        let res = &mut self.res;
        let ready_left = res.paged.visibility_pass(
            &res.queue,
            &res.device,
            &res.waker,
            &mut res.counters,
            &paged,
        )?;
        // Paged volumes (3-D pages, `paged/volume.rs`): the same draws, their own pass.
        let volumes = res.paged.volume_pass(
            &res.queue,
            &res.device,
            &res.waker,
            &mut res.counters,
            &paged,
        )?;
        let ids: Vec<u64> = paged.iter().map(|&(id, _, _)| id).collect();
        let incomplete = res.paged.progress_of(&ids).iter().any(|p| !p.is_complete());
        Ok(ready_left || volumes || incomplete)
    }

    /// Uploads what changed in the sources of `list` ([`Renderer::upload_list`]). Returns
    /// whether uploads remain for later frames.
    fn upload_sources(
        &mut self,
        (buffer_keys, texture_keys): &(Vec<BufferKey>, Vec<SourceKey>),
        encoder: &mut wgpu::CommandEncoder,
    ) -> Result<bool, RenderError> {
        let frame_start_bytes = self.res.counters.bytes_uploaded;
        let mut ctx = UploadContext {
            device: &self.res.device,
            queue: &self.res.queue,
            device_upload: self.res.device_upload.as_deref(),
            encoder,
            staging: &mut self.staging,
            counters: &mut self.res.counters,
            budget: self.upload_budget,
            frame_start_bytes,
            waker: &self.res.waker,
            scratch: &mut self.scratch,
            unpack: &self.unpack,
            host_summaries: self.info.device_type == wgpu::DeviceType::Cpu,
            volume_pairs: &self.res.volumes.pairs,
        };
        let mut pending = false;
        for key in buffer_keys {
            let proxy = self.res.buffers.get_mut(key).expect("prepared");
            pending |= proxy.upload(&mut ctx)?;
        }
        for key in texture_keys {
            let proxy = self.res.proxies.get_mut(key).expect("prepared");
            pending |= proxy.upload(&mut ctx)?;
        }
        Ok(pending)
    }

    /// Records the opaque pass (images, with depth) and the volume pass. Returns the number
    /// of visuals drawn.
    fn record_draws(
        &mut self,
        scene: &Scene,
        draws: &[Draw<'_>],
        target: &RenderTarget,
        encoder: &mut wgpu::CommandEncoder,
    ) -> Result<(u32, u64), RenderError> {
        for draw in draws {
            kind(draw.visual).update(&mut self.res, draw)?;
        }
        let pass_kind = self.pass_kind(draws);
        // A frame of one dense image (nothing for a depth test to sort) on a renderer that
        // draws those by compute, into a target it can write as storage: one compute pass
        // instead of the opaque pass.
        let by_compute = match draws {
            [draw] => {
                self.image_draw == ImageDraw::Compute
                    && target.takes_compute()
                    && kind(draw.visual).ensure_compute(&mut self.res)
            }
            _ => false,
        };
        if !by_compute {
            for draw in draws {
                kind(draw.visual).ensure_pipelines(&mut self.res, pass_kind);
            }
        }
        let (redraw, memory) = if pass_kind == PassKind::Flat {
            let (redraw, memory) = self.plan_redraw(scene, draws, target);
            (redraw, Some(memory))
        } else {
            (Damage::Full, None)
        };
        // Stored before recording: a frame that fails afterwards invalidates the target.
        *target.drawn.lock() = memory;
        let [w, h] = target.size();
        let pixels = match &redraw {
            Damage::Nothing => return Ok((0, 0)),
            Damage::Full => u64::from(w) * u64::from(h),
            Damage::Rects(rects) => rects
                .iter()
                .map(|[_, _, rw, rh]| u64::from(*rw) * u64::from(*rh))
                .sum(),
        };
        if by_compute {
            let rects = match &redraw {
                Damage::Rects(rects) => rects.clone(),
                _ => vec![[0, 0, w, h]],
            };
            let out = target.image_frame(&self.res.device, self.res.images.frame_layout(), self.id);
            let frame = ComputeFrame {
                target,
                out: &out,
                background: scene.background(),
                rects: &rects,
            };
            kind(draws[0].visual).record_compute(&self.res, encoder, &draws[0], frame);
            self.res.counters.image_draws_by_compute += 1;
            return Ok((1, pixels));
        }
        if let Damage::Rects(_) = redraw {
            self.ensure_clear_rect(scene.background());
        }
        // Passes visuals record before the opaque one (dense meshes find their triangles that
        // cover no pixel centre).
        for draw in draws {
            kind(draw.visual).record_before(&self.res, encoder);
        }
        let [r, g, b, a] = scene.background().map(f64::from);
        let mut drawn = 0;
        {
            let with_depth = pass_kind != PassKind::Flat;
            let load = match redraw {
                Damage::Rects(_) => wgpu::LoadOp::Load,
                _ => wgpu::LoadOp::Clear(wgpu::Color { r, g, b, a }),
            };
            let mut pass = encoder.begin_render_pass(&wgpu::RenderPassDescriptor {
                label: Some("sluice opaque"),
                color_attachments: &[
                    Some(wgpu::RenderPassColorAttachment {
                        view: &target.view,
                        depth_slice: None,
                        resolve_target: None,
                        ops: wgpu::Operations {
                            load,
                            store: wgpu::StoreOp::Store,
                        },
                    }),
                    (pass_kind == PassKind::DepthColor).then_some(
                        wgpu::RenderPassColorAttachment {
                            view: &target.depth_color_view,
                            depth_slice: None,
                            resolve_target: None,
                            ops: wgpu::Operations {
                                load: wgpu::LoadOp::Clear(wgpu::Color::WHITE),
                                store: wgpu::StoreOp::Store,
                            },
                        },
                    ),
                ],
                depth_stencil_attachment: with_depth.then_some(
                    wgpu::RenderPassDepthStencilAttachment {
                        view: &target.depth_view,
                        depth_ops: Some(wgpu::Operations {
                            load: wgpu::LoadOp::Clear(1.0),
                            store: wgpu::StoreOp::Store,
                        }),
                        stencil_ops: None,
                    },
                ),
                timestamp_writes: None,
                occlusion_query_set: None,
                multiview_mask: None,
            });
            // A whole frame draws once; a partial one once per damaged rectangle: restore the
            // background there, then draw everything over it as a whole frame would. The rest
            // of the target keeps the last frame.
            let scissors: Vec<Option<[u32; 4]>> = match &redraw {
                Damage::Rects(rects) => rects.iter().copied().map(Some).collect(),
                _ => vec![None],
            };
            // Opaque visuals first, then those with opacity below 1, each group in scene order
            // (translucent images test depth without writing it; translucent meshes write it).
            let translucent = |v: &Visual| kind(v).translucent();
            for (i, scissor) in scissors.into_iter().enumerate() {
                if let Some([x, y, rw, rh]) = scissor {
                    pass.set_scissor_rect(x, y, rw, rh);
                    let clear = self.clear_rect.as_ref().expect("ensured above");
                    pass.set_pipeline(&clear.pipeline);
                    pass.set_bind_group(0, &clear.group, &[]);
                    pass.draw(0..3, 0..1);
                }
                let ordered = draws
                    .iter()
                    .filter(|d| !translucent(d.visual))
                    .chain(draws.iter().filter(|d| translucent(d.visual)));
                for draw in ordered {
                    let drew = kind(draw.visual).record_opaque(&self.res, &mut pass, pass_kind);
                    if drew && i == 0 {
                        drawn += 1;
                    }
                }
            }
        }
        // Then the passes visuals record after the opaque one (volumes, one at a time: march
        // every pixel's ray in a compute pass, stopping at the depth the opaque pass left, then
        // blend the result over the target).
        for draw in draws {
            if kind(draw.visual).record_after(&self.res, encoder, target) {
                drawn += 1;
            }
        }
        Ok((drawn, pixels))
    }

    /// What a flat frame must redraw in `target`, and what to remember of it: nothing when
    /// the scene, camera and textures are as the target last showed them; the screen
    /// rectangle covering the texels copied since (a partial redraw); or everything.
    fn plan_redraw(
        &self,
        scene: &Scene,
        draws: &[Draw<'_>],
        target: &RenderTarget,
    ) -> (Damage, DrawnFrame) {
        let mut signature = FrameSignature {
            renderer: self.id,
            background: scene.background().map(f32::to_bits),
            draws: Vec::with_capacity(draws.len()),
        };
        let mut contents = Vec::new();
        if draws
            .iter()
            .any(|d| self.res.paged.has_visual(kind(d.visual).id()))
        {
            // Paged images redraw whole: a signature no later frame matches.
            signature.renderer = u64::MAX;
            let memory = DrawnFrame {
                signature,
                contents,
            };
            return (Damage::Full, memory);
        }
        for draw in draws {
            let id = kind(draw.visual).id();
            let v = &self.res.visuals[&id];
            let bind = v.bind.as_ref().expect("bound");
            let proxy = v.texture.map(|key| &self.res.proxies[&key]);
            signature.draws.push(DrawSignature {
                visual: id,
                params: v.params.clone(),
                proxy: proxy.map_or(0, TextureProxy::serial),
                generation: bind.generation,
                colormap: draw.visual.colormap().key(),
                pipeline: bind.key,
            });
            if let Some(proxy) = proxy {
                contents.push((proxy.serial(), proxy.content()));
            }
        }
        let memory = DrawnFrame {
            signature,
            contents,
        };
        let last = target.drawn.lock();
        let Some(last) = last.as_ref().filter(|l| l.signature == memory.signature) else {
            return (Damage::Full, memory);
        };
        let [w, h] = target.size();
        let mut rects: Vec<[u32; 4]> = Vec::new();
        for draw in draws {
            let visual = kind(draw.visual);
            if !visual.redraws_partially() {
                return (Damage::Full, memory);
            }
            let Some(key) = self.res.visuals[&visual.id()].texture else {
                continue;
            };
            let proxy = &self.res.proxies[&key];
            let Some(&(_, since)) = last.contents.iter().find(|(s, _)| *s == proxy.serial()) else {
                return (Damage::Full, memory);
            };
            if since == proxy.content() {
                continue;
            }
            let Some(regions) = proxy.damage_since(since) else {
                return (Damage::Full, memory);
            };
            if proxy.layout().shape().ndim() == 3 {
                return (Damage::Full, memory);
            }
            for region in regions {
                let Some(rect) = screen_rect(draw.mvp, &region, [w, h]) else {
                    return (Damage::Full, memory);
                };
                rects.extend(pixel_rect(rect, [w, h]));
            }
        }
        (plan_damage(rects, [w, h]), memory)
    }

    /// The pipeline and colour that restore the background inside a partial redraw.
    fn ensure_clear_rect(&mut self, background: [f32; 4]) {
        if self.clear_rect.is_none() {
            self.clear_rect = Some(ClearRect::new(&self.res.device));
        }
        let clear = self.clear_rect.as_mut().expect("just made");
        if clear.color != background {
            self.res
                .queue
                .write_buffer(&clear.uniform, 0, bytemuck::cast_slice(&background));
            clear.color = background;
        }
    }

    /// The attachments this frame's opaque pass needs: the depth as a colour only with a
    /// volume to march, depth only with meshes or images at different depths.
    fn pass_kind(&self, draws: &[Draw<'_>]) -> PassKind {
        let mut depth = None;
        let mut flat = true;
        for draw in draws {
            match kind(draw.visual).pass_need(&self.res) {
                PassNeed::DepthColor => return PassKind::DepthColor,
                PassNeed::Depth => flat = false,
                PassNeed::Flat(z) => match (z, depth) {
                    (Some(z), None) => depth = Some(z),
                    (Some(z), Some(d)) if z == d => {}
                    _ => flat = false,
                },
            }
        }
        if flat {
            PassKind::Flat
        } else {
            PassKind::Depth
        }
    }
}

/// A renderer going away lets go of its sources: each learns that this consumer is gone (so a
/// release-after-upload policy no longer waits for it).
impl Drop for Renderer {
    fn drop(&mut self) {
        self.res.paged.retire_all();
        let mut counters = self.res.counters;
        for (_, proxy) in self.res.proxies.drain() {
            proxy.retire(&mut counters);
        }
        for (_, proxy) in self.res.buffers.drain() {
            proxy.retire(&mut counters);
        }
    }
}

/// Calls the device upload path's `frame_submitted` when dropped: after the frame's submit, or
/// while unwinding from a panic before it (see `Renderer::frame`).
struct SubmittedGuard {
    upload: Option<Arc<dyn DeviceUpload>>,
    queue: wgpu::Queue,
}

impl Drop for SubmittedGuard {
    fn drop(&mut self) {
        if let Some(upload) = &self.upload {
            upload.frame_submitted(&self.queue);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use sluice_core::{ArraySource, HostCopyPolicy};

    /// A frame whose commands have a validation error runs none of them (wgpu drops a command
    /// buffer recorded with an error): its copies are lost as a panicked frame's are. The
    /// source is not told of the version (a release-after-upload one keeps its host copy),
    /// and the next frame uploads again and draws the data.
    #[test]
    fn a_frame_with_a_gpu_error_loses_no_upload() {
        let source = Arc::new(
            ArraySource::new(sluice_core::ndarray::Array2::<u8>::from_elem((4, 4), 120))
                .unwrap()
                .with_policy(HostCopyPolicy::ReleaseAfterUpload),
        );
        let mut r = Renderer::new().expect("a device (lavapipe in CI)");
        let target = r.create_target(4, 4).unwrap();
        let camera = crate::PanZoomCamera::new(glam::Vec2::new(2.0, 2.0), 1.0);
        let mut scene = crate::Scene::new();
        scene.add(crate::Image::new(source.clone()));
        r.gpu_error_next_frame = true;
        let e = r.render(&scene, &camera, &target).unwrap_err();
        assert!(matches!(e, RenderError::Gpu(_)), "{e:?}");
        assert!(
            !source.is_released(),
            "the source was told of copies that never ran"
        );
        r.render(&scene, &camera, &target).unwrap();
        assert!(source.is_released());
        let image = r.read_image(&target).unwrap();
        for p in image.pixels() {
            assert_eq!(p.0, [120, 120, 120, 255]);
        }
    }
}
