//! `Renderer`: one GPU device, the proxies of every source it shows, and frames.

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Weak};
use std::task::{Wake, Waker};

use sluice_core::pieces::{pixel_rect, plan_damage, Damage};
use sluice_core::{BufferFormat, SharedSource, Version};

use crate::bricking::{brick_binding, TextureLimits, BRICK_SLOTS};
use crate::buffer_proxy::{BufferKey, BufferProxy};
use crate::camera::Camera;
use crate::colormap::{Colormap, ColormapKey};
use crate::counters::{Counters, FrameStats};
use crate::device::shared_device;
use crate::device_upload::DeviceUpload;
use crate::error::RenderError;
use crate::format::SampleKind;
use crate::image_pipeline::{slice_geometry, ImageParams, ImagePipelines};
use crate::mesh_pipeline::{
    vertex_normals, wireframe_edges, MeshParams, MeshPipelines, MeshTexture, HAS_COLORS,
    HAS_NORMALS, HAS_SCALARS, HAS_TEXTURE,
};
use crate::options::RendererOptions;
use crate::pipeline::{PassKind, PipelineKey, TexDim};
use crate::proxy::{SourceKey, TextureProxy, UploadContext};
use crate::redraw::{
    flat_depth, screen_rect, ClearRect, DrawSignature, DrawnFrame, FrameSignature,
};
use crate::scene::Scene;
use crate::staging::StagingRing;
use crate::target::RenderTarget;
use crate::unpack::Unpacker;
use crate::visual::{Image, Mesh, Shading, Visual, VisualToken, Volume};
use crate::volume_pipeline::{VolumeParams, VolumePipelines, MARCH_WORKGROUP};

// A renderer may move to another thread (sources are written from any thread anyway).
const _: () = {
    const fn assert_send<T: Send>() {}
    assert_send::<Renderer>();
};

/// Set by sources' wakers when data that was not ready becomes ready.
#[derive(Default)]
struct RedrawFlag(AtomicBool);

impl Wake for RedrawFlag {
    fn wake(self: Arc<Self>) {
        self.0.store(true, Ordering::Release);
    }
}

struct ColormapGpu {
    view: wgpu::TextureView,
    entries: usize,
    /// Keeps a custom table's identity alive while cached.
    custom: Option<Arc<[[u8; 4]]>>,
}

/// Slots of a mesh's buffers in `VisualGpu::buffers`.
const MESH_POSITIONS: usize = 0;
const MESH_INDICES: usize = 1;
const MESH_NORMALS: usize = 2;
const MESH_COLORS: usize = 3;
const MESH_SCALARS: usize = 4;
const MESH_TEXCOORDS: usize = 5;

/// GPU data a mesh visual derives from its sources, with the versions it was derived from.
#[derive(Default)]
struct MeshDerived {
    normals: Option<(wgpu::Buffer, Version, Version)>,
    edges: Option<(wgpu::Buffer, u32, Version, usize)>,
}

/// One visual to draw this frame.
struct Draw<'a> {
    visual: &'a Visual,
    /// Local to world.
    world: glam::Mat4,
    /// Local to clip space.
    mvp: glam::Mat4,
}

struct BindState {
    group: wgpu::BindGroup,
    key: PipelineKey,
    generation: u64,
    colormap: ColormapKey,
}

/// GPU state of one visual: its uniforms and bind group, and which proxy it uses.
struct VisualGpu {
    token: Weak<VisualToken>,
    /// The texture proxy the visual reads (images, volumes, textured meshes).
    texture: Option<SourceKey>,
    /// The buffer proxies it reads (meshes), indexed by the `MESH_*` slots.
    buffers: Vec<Option<BufferKey>>,
    /// Data derived from a mesh's sources (normals, wireframe edges).
    derived: MeshDerived,
    uniform: wgpu::Buffer,
    /// The uniform bytes last written.
    params: Vec<u8>,
    bind: Option<BindState>,
    /// Images: the depth of the whole rectangle this frame when it is the same everywhere on
    /// it (a plane facing the camera), which lets a frame of such images skip the depth
    /// buffer.
    flat_depth: Option<f32>,
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
    device: wgpu::Device,
    queue: wgpu::Queue,
    info: wgpu::AdapterInfo,
    images: ImagePipelines,
    volumes: VolumePipelines,
    colormaps: HashMap<ColormapKey, ColormapGpu>,
    proxies: HashMap<SourceKey, TextureProxy>,
    buffers: HashMap<BufferKey, BufferProxy>,
    meshes: MeshPipelines,
    /// Bound in place of absent mesh attributes and textures.
    dummy_storage: wgpu::Buffer,
    dummy_textures: HashMap<SampleKind, wgpu::TextureView>,
    visuals: HashMap<u64, VisualGpu>,
    staging: StagingRing,
    counters: Counters,
    upload_budget: Option<u64>,
    scratch: Vec<u8>,
    redraw: Arc<RedrawFlag>,
    waker: Waker,
    device_upload: Option<Arc<dyn DeviceUpload>>,
    /// Compute pipelines for device-resident copies into textures.
    unpack: Unpacker,
    /// Unique among renderers (what a target remembers drawing is per renderer).
    id: u64,
    /// Built on the first partial redraw.
    clear_rect: Option<ClearRect>,
    texture_limits: TextureLimits,
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
        let images = ImagePipelines::new();
        let volumes = VolumePipelines::new(&device);
        let max_buffer = device.limits().max_buffer_size.min(1 << 30);
        let redraw = Arc::new(RedrawFlag::default());
        let waker = Waker::from(redraw.clone());
        let dummy_storage = device.create_buffer(&wgpu::BufferDescriptor {
            label: Some("sluice absent attribute"),
            size: 16,
            usage: wgpu::BufferUsages::STORAGE,
            mapped_at_creation: false,
        });
        let mut renderer = Renderer {
            adapter,
            device,
            queue,
            info,
            images,
            volumes,
            colormaps: HashMap::new(),
            proxies: HashMap::new(),
            buffers: HashMap::new(),
            meshes: MeshPipelines::new(),
            dummy_storage,
            dummy_textures: HashMap::new(),
            visuals: HashMap::new(),
            staging: StagingRing::new(max_buffer),
            counters: Counters::default(),
            upload_budget,
            scratch: Vec::new(),
            redraw,
            waker,
            device_upload: None,
            unpack: Unpacker::new(),
            id: NEXT_RENDERER_ID.fetch_add(1, std::sync::atomic::Ordering::Relaxed),
            clear_rect: None,
            texture_limits,
        };
        for colormap in Colormap::builtins() {
            renderer.colormap_gpu(&colormap);
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

    /// The wgpu device, for callers that add their own GPU work.
    pub fn device(&self) -> &wgpu::Device {
        &self.device
    }

    /// The wgpu queue, for callers that add their own GPU work.
    pub fn queue(&self) -> &wgpu::Queue {
        &self.queue
    }

    /// The largest width or height of a 2-D source or target on this device.
    pub fn max_texture_dimension_2d(&self) -> u32 {
        self.device.limits().max_texture_dimension_2d
    }

    /// Gives the renderer a GPU-side upload path for device-resident sources (CUDA memory,
    /// Vulkan external memory); `sluice-interop` provides one.
    pub fn set_device_upload(&mut self, upload: Arc<dyn DeviceUpload>) {
        self.device_upload = Some(upload);
    }

    /// Sets the most bytes of source data uploaded per frame (`None`: no limit).
    pub fn set_upload_budget(&mut self, bytes: Option<u64>) {
        self.upload_budget = bytes;
    }

    /// Whether a source woke the renderer (data that was not ready is ready) since the last
    /// call: render again to show it.
    pub fn take_redraw_request(&self) -> bool {
        self.redraw.0.swap(false, Ordering::AcqRel)
    }

    /// Creates an offscreen target of `width` x `height` pixels.
    pub fn create_target(&self, width: u32, height: u32) -> Result<RenderTarget, RenderError> {
        RenderTarget::new(
            &self.device,
            width,
            height,
            self.volumes.target_layout(),
            self.volumes.composite_layout(),
        )
    }

    /// Reads a target back into host memory, waiting for the GPU to finish drawing it.
    pub fn read_image(&self, target: &RenderTarget) -> Result<image::RgbaImage, RenderError> {
        target.read(&self.device, &self.queue)
    }

    /// Waits until the GPU has finished all submitted work.
    pub fn wait_idle(&self) -> Result<(), RenderError> {
        self.device
            .poll(wgpu::PollType::wait_indefinitely())
            .map(|_| ())
            .map_err(|e| RenderError::Gpu(e.to_string()))
    }

    /// The proxy layer's counters, after freeing what dropped visuals held.
    pub fn counters(&mut self) -> Counters {
        self.collect_garbage();
        Counters {
            staging_buffers_created: self.staging.created,
            staging_bytes: self.staging.held_bytes,
            compute_copies: self.unpack.recorded(),
            device_pools: self
                .device_upload
                .as_ref()
                .map_or_else(Default::default, |u| u.pool_counters()),
            ..self.counters
        }
    }

    /// Frees the GPU state of dropped visuals, and the textures of sources no visual shows
    /// any more. Runs at the start of every frame and when counters are read.
    pub fn collect_garbage(&mut self) {
        let dead: Vec<u64> = self
            .visuals
            .iter()
            .filter(|(_, v)| v.token.strong_count() == 0)
            .map(|(&id, _)| id)
            .collect();
        for id in dead {
            if let Some(v) = self.visuals.remove(&id) {
                self.release_users(v.texture, &v.buffers);
            }
        }
        self.colormaps.retain(|_, c| {
            c.custom
                .as_ref()
                .is_none_or(|entries| Arc::strong_count(entries) > 1)
        });
    }

    fn release_users(&mut self, texture: Option<SourceKey>, buffers: &[Option<BufferKey>]) {
        if let Some(key) = texture {
            self.release_proxy_user(key);
        }
        for key in buffers.iter().flatten() {
            let Some(proxy) = self.buffers.get_mut(key) else {
                continue;
            };
            proxy.users -= 1;
            if proxy.users == 0 {
                if let Some(proxy) = self.buffers.remove(key) {
                    proxy.retire(&mut self.counters);
                }
            }
        }
    }

    fn add_users(&mut self, texture: Option<SourceKey>, buffers: &[Option<BufferKey>]) {
        if let Some(key) = texture {
            self.proxy_mut(key).users += 1;
        }
        for key in buffers.iter().flatten() {
            self.buffers.get_mut(key).expect("created before use").users += 1;
        }
    }

    fn release_proxy_user(&mut self, key: SourceKey) {
        let Some(proxy) = self.proxies.get_mut(&key) else {
            return;
        };
        proxy.users -= 1;
        if proxy.users == 0 {
            if let Some(proxy) = self.proxies.remove(&key) {
                proxy.retire(&mut self.counters);
            }
        }
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
        self.frame(scene, view_projection, Some(target))
    }

    /// Brings every source `scene` shows up to date on the GPU without drawing: the uploads
    /// of [`Renderer::render`] alone (within the upload budget), submitted now. For loading
    /// ahead of showing, and to measure upload cost apart from drawing.
    pub fn upload(&mut self, scene: &Scene) -> Result<FrameStats, RenderError> {
        self.frame(scene, glam::Mat4::IDENTITY, None)
    }

    /// One frame: prepare the visuals, upload what changed, draw into `target` if any.
    fn frame(
        &mut self,
        scene: &Scene,
        view_projection: glam::Mat4,
        target: Option<&RenderTarget>,
    ) -> Result<FrameStats, RenderError> {
        // The staging ring polls the device when it needs a chunk back (see `StagingRing`).
        self.collect_garbage();
        let draws: Vec<Draw<'_>> = scene
            .draw_list()
            .into_iter()
            .map(|(visual, world)| Draw {
                visual,
                world,
                mvp: view_projection * world,
            })
            .collect();

        let scope = self.device.push_error_scope(wgpu::ErrorFilter::Validation);
        for draw in &draws {
            self.prepare_visual(draw.visual)?;
        }
        let mut encoder = self
            .device
            .create_command_encoder(&wgpu::CommandEncoderDescriptor {
                label: Some("sluice frame"),
            });
        let before = self.counters;
        let upload = self.upload_sources(&draws, &mut encoder);
        let drawn = match (&upload, target) {
            (Ok(_), Some(target)) => self.record_draws(scene, &draws, target, &mut encoder),
            _ => Ok((0, 0)),
        };
        // Copies already recorded are real: submit them even if the frame failed, so proxies
        // and the GPU agree on what was uploaded.
        self.staging.finish();
        self.queue.submit([encoder.finish()]);
        self.staging.recall();
        self.unpack.frame_submitted();
        if let Some(upload) = &self.device_upload {
            upload.frame_submitted(&self.queue);
        }
        let error = pollster::block_on(scope.pop());
        if let (Some(target), true) = (target, error.is_some() || drawn.is_err()) {
            // What the target holds is not known: the next frame redraws all of it.
            target.invalidate();
        }
        if let Some(error) = error {
            return Err(RenderError::Gpu(error.to_string()));
        }
        let uploads_pending = upload?;
        let (visuals_drawn, pixels_drawn) = drawn?;
        Ok(FrameStats {
            bytes_uploaded: self.counters.bytes_uploaded - before.bytes_uploaded,
            copies_issued: self.counters.copies_issued - before.copies_issued,
            visuals_drawn,
            pixels_drawn,
            uploads_pending,
        })
    }

    /// Checks a visual and makes sure its proxies and GPU state exist.
    fn prepare_visual(&mut self, visual: &Visual) -> Result<(), RenderError> {
        match visual {
            Visual::Image(image) => {
                let source = image.source();
                slice_geometry(image.slice(), &source.layout().shape()).map_err(|reason| {
                    RenderError::InvalidSlice {
                        source_label: source.label(),
                        reason,
                    }
                })?;
                self.bind_visual(&image.token, Some(source), &[], size_of::<ImageParams>())?;
                self.colormap_gpu(image.colormap());
            }
            Visual::Volume(volume) => {
                check_volume(volume)?;
                self.bind_visual(
                    &volume.token,
                    Some(volume.source()),
                    &[],
                    size_of::<VolumeParams>(),
                )?;
                self.colormap_gpu(volume.colormap());
            }
            Visual::Mesh(mesh) => {
                let (buffers, vertices) = mesh_buffers(mesh)?;
                let texture = mesh.texture().map(|(_, image)| image);
                if let Some(image) = texture {
                    if image.layout().shape().ndim() > 2 {
                        return Err(RenderError::InvalidMeshData {
                            source_label: image.label(),
                            reason: format!(
                                "a mesh texture is a 1-D or 2-D image; this source has shape {}",
                                image.layout().shape()
                            ),
                        });
                    }
                }
                self.bind_visual(&mesh.token, texture, &buffers, size_of::<MeshParams>())?;
                let indices = self.visuals[&mesh.token.id].buffers[MESH_INDICES];
                if let Some(key) = indices {
                    let limit = u32::try_from(vertices).unwrap_or(u32::MAX);
                    self.buffers
                        .get_mut(&key)
                        .expect("bound")
                        .set_index_limit(limit);
                }
                self.colormap_gpu(mesh.colormap());
            }
        }
        Ok(())
    }

    /// Makes sure the visual's GPU state exists and uses the proxies of `texture` and
    /// `buffers` (creating proxies on first use, moving the visual off the old ones after a
    /// source changed).
    fn bind_visual(
        &mut self,
        token: &Arc<VisualToken>,
        texture: Option<&SharedSource>,
        buffers: &[Option<(&SharedSource, BufferFormat)>],
        uniform_size: usize,
    ) -> Result<(), RenderError> {
        let texture = texture.map(|s| self.ensure_proxy(s)).transpose()?;
        let buffers = buffers
            .iter()
            .map(|b| b.map(|(s, f)| self.ensure_buffer(s, f)).transpose())
            .collect::<Result<Vec<_>, _>>()?;
        match self.visuals.get_mut(&token.id) {
            Some(v) if v.texture == texture && v.buffers == buffers => {}
            Some(v) => {
                let old_texture = std::mem::replace(&mut v.texture, texture);
                let old_buffers = std::mem::replace(&mut v.buffers, buffers.clone());
                v.bind = None;
                v.derived = MeshDerived::default();
                self.add_users(texture, &buffers);
                self.release_users(old_texture, &old_buffers);
            }
            None => {
                let uniform = self.device.create_buffer(&wgpu::BufferDescriptor {
                    label: Some("sluice visual params"),
                    size: uniform_size as u64,
                    usage: wgpu::BufferUsages::UNIFORM | wgpu::BufferUsages::COPY_DST,
                    mapped_at_creation: false,
                });
                self.visuals.insert(
                    token.id,
                    VisualGpu {
                        token: Arc::downgrade(token),
                        texture,
                        buffers: buffers.clone(),
                        derived: MeshDerived::default(),
                        uniform,
                        params: Vec::new(),
                        bind: None,
                        flat_depth: None,
                    },
                );
                self.add_users(texture, &buffers);
            }
        }
        Ok(())
    }

    fn ensure_buffer(
        &mut self,
        source: &SharedSource,
        format: BufferFormat,
    ) -> Result<BufferKey, RenderError> {
        let key = BufferKey {
            source: SourceKey::of(source),
            format,
        };
        if !self.buffers.contains_key(&key) {
            let proxy = BufferProxy::new(&self.device, source.clone(), format, &mut self.counters)?;
            self.buffers.insert(key, proxy);
        }
        Ok(key)
    }

    fn proxy_mut(&mut self, key: SourceKey) -> &mut TextureProxy {
        self.proxies
            .get_mut(&key)
            .expect("proxy exists for a prepared visual")
    }

    fn ensure_proxy(&mut self, source: &SharedSource) -> Result<SourceKey, RenderError> {
        let key = SourceKey::of(source);
        if !self.proxies.contains_key(&key) {
            let proxy = TextureProxy::new(
                &self.device,
                source.clone(),
                &mut self.counters,
                self.device_upload.as_deref(),
                self.texture_limits,
            )?;
            self.proxies.insert(key, proxy);
        }
        Ok(key)
    }

    /// Uploads what changed in every source drawn this frame, each once. Returns whether
    /// uploads remain for later frames.
    fn upload_sources(
        &mut self,
        draws: &[Draw<'_>],
        encoder: &mut wgpu::CommandEncoder,
    ) -> Result<bool, RenderError> {
        // Each source once, buffers before textures, in draw order.
        let mut buffer_keys: Vec<BufferKey> = Vec::new();
        let mut texture_keys: Vec<SourceKey> = Vec::new();
        for draw in draws {
            let v = &self.visuals[&visual_id(draw.visual)];
            for key in v.buffers.iter().flatten() {
                if !buffer_keys.contains(key) {
                    buffer_keys.push(*key);
                }
            }
            if let Some(key) = v.texture.filter(|k| !texture_keys.contains(k)) {
                texture_keys.push(key);
            }
        }
        let frame_start_bytes = self.counters.bytes_uploaded;
        let mut ctx = UploadContext {
            device: &self.device,
            queue: &self.queue,
            device_upload: self.device_upload.as_deref(),
            encoder,
            staging: &mut self.staging,
            counters: &mut self.counters,
            budget: self.upload_budget,
            frame_start_bytes,
            waker: &self.waker,
            scratch: &mut self.scratch,
            unpack: &self.unpack,
        };
        let mut pending = false;
        for key in &buffer_keys {
            let proxy = self.buffers.get_mut(key).expect("prepared");
            pending |= proxy.upload(&mut ctx)?;
        }
        for key in &texture_keys {
            let proxy = self.proxies.get_mut(key).expect("prepared");
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
            let key = match draw.visual {
                Visual::Image(image) => self.update_image_gpu(image, draw.mvp),
                Visual::Volume(volume) => self.update_volume_gpu(volume, draw.mvp, target.size()),
                Visual::Mesh(mesh) => {
                    self.update_mesh_gpu(mesh, draw.world, draw.mvp)?;
                    continue;
                }
            };
            self.update_bind_group(visual_id(draw.visual), key);
        }
        let pass_kind = self.pass_kind(draws);
        self.ensure_pass_pipelines(draws, pass_kind);
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
        if let Damage::Rects(_) = redraw {
            self.ensure_clear_rect(scene.background());
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
            let translucent = |v: &Visual| match v {
                Visual::Image(image) => image.opacity() < 1.0,
                Visual::Mesh(mesh) => mesh.opacity() < 1.0,
                Visual::Volume(_) => false,
            };
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
                    match draw.visual {
                        Visual::Image(image) => {
                            let bind = self.visuals[&image.token.id].bind.as_ref().expect("bound");
                            let PipelineKey::Image(kind, dim) = bind.key else {
                                continue;
                            };
                            pass.set_pipeline(self.images.pipeline(
                                (kind, dim),
                                pass_kind,
                                image.opacity(),
                            ));
                            pass.set_bind_group(0, &bind.group, &[]);
                            pass.draw(0..6, 0..1);
                        }
                        Visual::Mesh(mesh) => self.draw_mesh(&mut pass, mesh, pass_kind),
                        Visual::Volume(_) => continue,
                    }
                    if i == 0 {
                        drawn += 1;
                    }
                }
            }
        }
        // Volumes, one at a time: march every pixel's ray in a compute pass (rays stop at the
        // depth the opaque pass left), then blend the result over the target.
        let [w, h] = target.size();
        for draw in draws {
            let Visual::Volume(volume) = draw.visual else {
                continue;
            };
            let bind = self.visuals[&volume.token.id].bind.as_ref().expect("bound");
            let PipelineKey::Volume(kind) = bind.key else {
                continue;
            };
            {
                let mut pass = encoder.begin_compute_pass(&wgpu::ComputePassDescriptor {
                    label: Some("sluice volume march"),
                    timestamp_writes: None,
                });
                pass.set_pipeline(self.volumes.pipeline(kind));
                pass.set_bind_group(0, &bind.group, &[]);
                pass.set_bind_group(1, &target.volume_group, &[]);
                pass.dispatch_workgroups(
                    w.div_ceil(MARCH_WORKGROUP),
                    h.div_ceil(MARCH_WORKGROUP),
                    1,
                );
            }
            let mut pass = encoder.begin_render_pass(&wgpu::RenderPassDescriptor {
                label: Some("sluice volume composite"),
                color_attachments: &[Some(wgpu::RenderPassColorAttachment {
                    view: &target.view,
                    depth_slice: None,
                    resolve_target: None,
                    ops: wgpu::Operations {
                        load: wgpu::LoadOp::Load,
                        store: wgpu::StoreOp::Store,
                    },
                })],
                depth_stencil_attachment: None,
                timestamp_writes: None,
                occlusion_query_set: None,
                multiview_mask: None,
            });
            pass.set_pipeline(self.volumes.composite());
            pass.set_bind_group(0, &target.composite_group, &[]);
            pass.draw(0..3, 0..1);
            drawn += 1;
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
        for draw in draws {
            let id = visual_id(draw.visual);
            let v = &self.visuals[&id];
            let bind = v.bind.as_ref().expect("bound");
            let proxy = v.texture.map(|key| &self.proxies[&key]);
            signature.draws.push(DrawSignature {
                visual: id,
                params: v.params.clone(),
                proxy: proxy.map_or(0, TextureProxy::serial),
                generation: bind.generation,
                colormap: bind.colormap,
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
            let Visual::Image(image) = draw.visual else {
                return (Damage::Full, memory);
            };
            let Some(key) = self.visuals[&image.token.id].texture else {
                continue;
            };
            let proxy = &self.proxies[&key];
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
            self.clear_rect = Some(ClearRect::new(&self.device));
        }
        let clear = self.clear_rect.as_mut().expect("just made");
        if clear.color != background {
            self.queue
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
            match draw.visual {
                Visual::Volume(_) => return PassKind::DepthColor,
                Visual::Mesh(_) => flat = false,
                Visual::Image(image) => match (self.visuals[&image.token.id].flat_depth, depth) {
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

    /// Builds the pipelines the visuals of a `pass` draw with, where missing.
    fn ensure_pass_pipelines(&mut self, draws: &[Draw<'_>], pass: PassKind) {
        for draw in draws {
            let Some(bind) = self.visuals[&visual_id(draw.visual)].bind.as_ref() else {
                continue;
            };
            match (draw.visual, bind.key) {
                (Visual::Image(image), PipelineKey::Image(kind, dim)) => {
                    self.images
                        .ensure_pass(&self.device, (kind, dim), pass, image.opacity());
                }
                (Visual::Mesh(mesh), PipelineKey::Mesh(kind)) => {
                    self.meshes.ensure_pass(&self.device, kind, false, pass);
                    if mesh.wireframe().is_some() {
                        self.meshes.ensure_pass(&self.device, kind, true, pass);
                    }
                }
                _ => {}
            }
        }
    }

    fn draw_mesh(&self, pass: &mut wgpu::RenderPass<'_>, mesh: &Mesh, pass_kind: PassKind) {
        let v = &self.visuals[&mesh.token.id];
        let bind = v.bind.as_ref().expect("bound");
        let PipelineKey::Mesh(kind) = bind.key else {
            return;
        };
        pass.set_pipeline(self.meshes.pipeline(kind, false, pass_kind));
        pass.set_bind_group(0, &bind.group, &[]);
        match v.buffers[MESH_INDICES] {
            Some(key) => {
                let indices = &self.buffers[&key];
                pass.set_index_buffer(indices.buffer().slice(..), wgpu::IndexFormat::Uint32);
                pass.draw_indexed(0..indices.len() as u32, 0, 0..1);
            }
            None => {
                let vertices = self.buffers[&v.buffers[MESH_POSITIONS].expect("positions")].len();
                pass.draw(0..vertices as u32, 0..1);
            }
        }
        if let (Some(_), Some((edges, count, _, _))) = (mesh.wireframe(), &v.derived.edges) {
            pass.set_pipeline(self.meshes.pipeline(kind, true, pass_kind));
            pass.set_index_buffer(edges.slice(..), wgpu::IndexFormat::Uint32);
            pass.draw_indexed(0..*count, 0, 0..1);
        }
    }

    fn bind_group_layout(&self, key: PipelineKey) -> &wgpu::BindGroupLayout {
        match key {
            PipelineKey::Image(kind, dim) => self.images.layout(kind, dim),
            PipelineKey::Volume(kind) => self.volumes.layout(kind),
            PipelineKey::Mesh(kind) => self.meshes.layout(kind),
        }
    }

    /// Writes a visual's uniforms if they changed.
    fn write_params(&mut self, id: u64, params: &[u8]) {
        let v = self.visuals.get_mut(&id).expect("prepared");
        if v.params != params {
            self.queue.write_buffer(&v.uniform, 0, params);
            v.params = params.to_vec();
        }
    }

    /// Image uniforms for this frame; returns the pipeline and colormap the image needs.
    fn update_image_gpu(&mut self, image: &Image, mvp: glam::Mat4) -> (PipelineKey, ColormapKey) {
        let colormap_key = image.colormap().key();
        let entries = self.colormaps[&colormap_key].entries;
        let proxy = &self.proxies[&self.texture_of(image.token.id)];
        let shape = proxy.layout().shape();
        // Checked in prepare_visual against the source's layout; a layout change since (a
        // replaced source) may make the slice invalid: fall back to the default plane.
        let geometry = slice_geometry(image.slice(), &shape)
            .or_else(|_| slice_geometry(None, &shape))
            .expect("the default slice fits every shape");
        let params = ImageParams::new(
            image,
            proxy.layout(),
            &geometry,
            mvp,
            entries,
            proxy.bricking(),
        );
        let dim = if shape.ndim() == 3 {
            TexDim::D3
        } else {
            TexDim::D2
        };
        let key = PipelineKey::Image(proxy.sample_kind(), dim);
        self.images.ensure(&self.device, proxy.sample_kind(), dim);
        self.write_params(image.token.id, bytemuck::bytes_of(&params));
        let v = self.visuals.get_mut(&image.token.id).expect("prepared");
        v.flat_depth = flat_depth(mvp, geometry.size);
        (key, colormap_key)
    }

    /// Volume uniforms for this frame; returns the pipeline and colormap the volume needs.
    fn update_volume_gpu(
        &mut self,
        volume: &Volume,
        mvp: glam::Mat4,
        viewport: [u32; 2],
    ) -> (PipelineKey, ColormapKey) {
        let colormap_key = volume.colormap().key();
        let entries = self.colormaps[&colormap_key].entries;
        let proxy = &self.proxies[&self.texture_of(volume.token.id)];
        let params = VolumeParams::new(
            volume,
            proxy.layout(),
            mvp,
            viewport,
            entries,
            proxy.bricking(),
        );
        let key = PipelineKey::Volume(proxy.sample_kind());
        self.volumes.ensure(&self.device, proxy.sample_kind());
        self.write_params(volume.token.id, bytemuck::bytes_of(&params));
        (key, colormap_key)
    }

    fn texture_of(&self, id: u64) -> SourceKey {
        self.visuals[&id]
            .texture
            .expect("images and volumes have a texture")
    }

    /// (Re)builds an image's or volume's bind group when its texture, colormap or pipeline
    /// changed.
    fn update_bind_group(&mut self, id: u64, (key, colormap_key): (PipelineKey, ColormapKey)) {
        let v = &self.visuals[&id];
        let proxy = &self.proxies[&self.texture_of(id)];
        let fresh = v.bind.as_ref().is_some_and(|b| {
            b.generation == proxy.generation() && b.colormap == colormap_key && b.key == key
        });
        if fresh {
            return;
        }
        let slots = match key {
            PipelineKey::Image(_, TexDim::D2) => 1,
            _ => BRICK_SLOTS,
        };
        let mut entries = vec![
            wgpu::BindGroupEntry {
                binding: 0,
                resource: v.uniform.as_entire_binding(),
            },
            wgpu::BindGroupEntry {
                binding: 2,
                resource: wgpu::BindingResource::TextureView(&self.colormaps[&colormap_key].view),
            },
        ];
        entries.extend((0..slots).map(|slot| wgpu::BindGroupEntry {
            binding: brick_binding(slot),
            resource: wgpu::BindingResource::TextureView(proxy.brick_view(slot)),
        }));
        let group = self.device.create_bind_group(&wgpu::BindGroupDescriptor {
            label: Some("sluice visual"),
            layout: self.bind_group_layout(key),
            entries: &entries,
        });
        let generation = proxy.generation();
        self.visuals.get_mut(&id).expect("prepared").bind = Some(BindState {
            group,
            key,
            generation,
            colormap: colormap_key,
        });
    }

    /// A 1 x 1 texture of `kind`, bound where a mesh has no texture.
    fn dummy_texture(&mut self, kind: SampleKind) -> &wgpu::TextureView {
        self.dummy_textures.entry(kind).or_insert_with(|| {
            let format = match kind {
                SampleKind::Float => wgpu::TextureFormat::R32Float,
                SampleKind::Uint => wgpu::TextureFormat::R32Uint,
                SampleKind::Sint => wgpu::TextureFormat::R32Sint,
            };
            self.device
                .create_texture(&wgpu::TextureDescriptor {
                    label: Some("sluice absent texture"),
                    size: wgpu::Extent3d {
                        width: 1,
                        height: 1,
                        depth_or_array_layers: 1,
                    },
                    mip_level_count: 1,
                    sample_count: 1,
                    dimension: wgpu::TextureDimension::D2,
                    format,
                    usage: wgpu::TextureUsages::TEXTURE_BINDING,
                    view_formats: &[],
                })
                .create_view(&wgpu::TextureViewDescriptor::default())
        })
    }

    /// Host data of a whole source in `format` (for data derived on the CPU); `None` if the
    /// source is not ready or not in host memory.
    fn read_converted(
        &self,
        source: &SharedSource,
        format: BufferFormat,
    ) -> Result<Option<Vec<u8>>, RenderError> {
        if !matches!(source.residency(), sluice_core::Residency::Host) {
            return Ok(None);
        }
        let layout = source.layout();
        let region = layout.shape().full_region();
        let mut packed = vec![0u8; layout.region_bytes(&region)];
        let err = |error| RenderError::Source {
            source_label: source.label(),
            error,
        };
        let request = sluice_core::ReadRequest::new(region, &self.waker);
        if source.read(&request, &mut packed).map_err(err)? == sluice_core::ReadStatus::Pending {
            return Ok(None);
        }
        let elements = match format {
            BufferFormat::U32 => layout.shape().len() * layout.channels(),
            _ => layout.shape().len(),
        };
        let mut out = vec![0u8; elements * format.element_bytes()];
        format
            .convert_row(&layout, &packed, &mut out, layout.shape().len())
            .map_err(|reason| RenderError::InvalidMeshData {
                source_label: source.label(),
                reason,
            })?;
        Ok(Some(out))
    }

    /// Mesh uniforms, derived data (normals when smooth shading has none, wireframe edges)
    /// and bind group for this frame.
    fn update_mesh_gpu(
        &mut self,
        mesh: &Mesh,
        world: glam::Mat4,
        mvp: glam::Mat4,
    ) -> Result<(), RenderError> {
        let id = mesh.token.id;
        let colormap_key = mesh.colormap().key();
        let entries = self.colormaps[&colormap_key].entries;
        let keys = self.visuals[&id].buffers.clone();
        let positions = &self.buffers[&keys[MESH_POSITIONS].expect("positions")];
        let vertex_count = positions.len();
        let positions_source = positions.source().clone();
        let indices_source = keys[MESH_INDICES].map(|k| self.buffers[&k].source().clone());

        // Smooth shading without normals: derive them on the CPU from host positions.
        let mut flags = 0;
        if keys[MESH_NORMALS].is_some() {
            flags |= HAS_NORMALS;
        } else if mesh.shading() == Shading::Smooth {
            let versions = (
                positions_source.version(),
                indices_source
                    .as_ref()
                    .map_or(Version::NEVER, |s| s.version()),
            );
            let stale = self.visuals[&id]
                .derived
                .normals
                .as_ref()
                .is_none_or(|(_, p, i)| (*p, *i) != versions);
            if stale {
                let pos =
                    self.read_converted(&positions_source, BufferFormat::F32 { channels: 3 })?;
                let idx = match &indices_source {
                    Some(s) => self.read_converted(s, BufferFormat::U32)?,
                    None => Some(Vec::new()),
                };
                if let (Some(pos), Some(idx)) = (pos, idx) {
                    let idx: Vec<u32> = bytemuck::pod_collect_to_vec(&idx);
                    let pos: Vec<f32> = bytemuck::pod_collect_to_vec(&pos);
                    let normals =
                        vertex_normals(&pos, indices_source.as_ref().map(|_| idx.as_slice()));
                    let buffer = self.device.create_buffer(&wgpu::BufferDescriptor {
                        label: Some("sluice derived normals"),
                        size: (normals.len() * 4).max(16) as u64,
                        usage: wgpu::BufferUsages::STORAGE | wgpu::BufferUsages::COPY_DST,
                        mapped_at_creation: false,
                    });
                    self.queue
                        .write_buffer(&buffer, 0, bytemuck::cast_slice(&normals));
                    self.counters.derived_bytes_uploaded += normals.len() as u64 * 4;
                    let v = self.visuals.get_mut(&id).expect("prepared");
                    v.derived.normals = Some((buffer, versions.0, versions.1));
                    v.bind = None;
                }
            }
            if self.visuals[&id].derived.normals.is_some() {
                flags |= HAS_NORMALS;
            }
        }
        if keys[MESH_COLORS].is_some() {
            flags |= HAS_COLORS;
        }
        if keys[MESH_SCALARS].is_some() {
            flags |= HAS_SCALARS;
        }
        let texture = match self.visuals[&id].texture {
            Some(key) => {
                flags |= HAS_TEXTURE;
                let layout = self.proxies[&key].layout();
                let [_, h, w] = layout.shape().padded();
                Some(MeshTexture {
                    size: [h, w],
                    channels: layout.channels(),
                    element: layout.element(),
                })
            }
            None => None,
        };

        // Wireframe edges, derived from the indices when they change.
        if mesh.wireframe().is_some() {
            let version = indices_source
                .as_ref()
                .map_or(Version::NEVER, |s| s.version());
            let stale = self.visuals[&id]
                .derived
                .edges
                .as_ref()
                .is_none_or(|(_, _, v, n)| *v != version || *n != vertex_count);
            if stale {
                let idx = match &indices_source {
                    Some(s) => self.read_converted(s, BufferFormat::U32)?,
                    None => Some(Vec::new()),
                };
                if let Some(idx) = idx {
                    let idx: Vec<u32> = bytemuck::pod_collect_to_vec(&idx);
                    let edges = wireframe_edges(
                        indices_source.as_ref().map(|_| idx.as_slice()),
                        vertex_count,
                    );
                    let buffer = self.device.create_buffer(&wgpu::BufferDescriptor {
                        label: Some("sluice wireframe edges"),
                        size: (edges.len() * 4).max(16) as u64,
                        usage: wgpu::BufferUsages::INDEX | wgpu::BufferUsages::COPY_DST,
                        mapped_at_creation: false,
                    });
                    self.queue
                        .write_buffer(&buffer, 0, bytemuck::cast_slice(&edges));
                    self.counters.derived_bytes_uploaded += edges.len() as u64 * 4;
                    self.visuals.get_mut(&id).expect("prepared").derived.edges =
                        Some((buffer, edges.len() as u32, version, vertex_count));
                }
            }
        }

        let params = MeshParams::new(
            mesh,
            world,
            mvp,
            flags,
            vertex_count,
            entries,
            texture.as_ref(),
        );
        self.write_params(id, bytemuck::bytes_of(&params));
        let kind = self.visuals[&id]
            .texture
            .map_or(SampleKind::Float, |k| self.proxies[&k].sample_kind());
        self.meshes.ensure(&self.device, kind);
        let key = PipelineKey::Mesh(kind);

        // The bind group follows every buffer's and the texture's generation.
        let generation = keys
            .iter()
            .flatten()
            .map(|k| self.buffers[k].generation())
            .chain(
                self.visuals[&id]
                    .texture
                    .map(|k| self.proxies[&k].generation()),
            )
            .fold(0u64, |acc, g| acc.wrapping_mul(31).wrapping_add(g + 1));
        let fresh = self.visuals[&id].bind.as_ref().is_some_and(|b| {
            b.generation == generation && b.colormap == colormap_key && b.key == key
        });
        if fresh {
            return Ok(());
        }
        if self.visuals[&id].texture.is_none() {
            self.dummy_texture(kind);
        }
        let v = &self.visuals[&id];
        let texture_view = match v.texture {
            Some(k) => self.proxies[&k].brick_view(0),
            None => &self.dummy_textures[&kind],
        };
        let buffer_at = |slot: usize| -> &wgpu::Buffer {
            match keys[slot] {
                Some(k) => self.buffers[&k].buffer(),
                None if slot == MESH_NORMALS => v
                    .derived
                    .normals
                    .as_ref()
                    .map_or(&self.dummy_storage, |(b, _, _)| b),
                None => &self.dummy_storage,
            }
        };
        let group = self.device.create_bind_group(&wgpu::BindGroupDescriptor {
            label: Some("sluice mesh"),
            layout: self.meshes.layout(kind),
            entries: &[
                wgpu::BindGroupEntry {
                    binding: 0,
                    resource: v.uniform.as_entire_binding(),
                },
                wgpu::BindGroupEntry {
                    binding: 1,
                    resource: wgpu::BindingResource::TextureView(texture_view),
                },
                wgpu::BindGroupEntry {
                    binding: 2,
                    resource: wgpu::BindingResource::TextureView(
                        &self.colormaps[&colormap_key].view,
                    ),
                },
                wgpu::BindGroupEntry {
                    binding: 3,
                    resource: buffer_at(MESH_POSITIONS).as_entire_binding(),
                },
                wgpu::BindGroupEntry {
                    binding: 4,
                    resource: buffer_at(MESH_NORMALS).as_entire_binding(),
                },
                wgpu::BindGroupEntry {
                    binding: 5,
                    resource: buffer_at(MESH_COLORS).as_entire_binding(),
                },
                wgpu::BindGroupEntry {
                    binding: 6,
                    resource: buffer_at(MESH_SCALARS).as_entire_binding(),
                },
                wgpu::BindGroupEntry {
                    binding: 7,
                    resource: buffer_at(MESH_TEXCOORDS).as_entire_binding(),
                },
            ],
        });
        self.visuals.get_mut(&id).expect("prepared").bind = Some(BindState {
            group,
            key,
            generation,
            colormap: colormap_key,
        });
        Ok(())
    }

    /// The GPU table of a colormap, uploaded on first use.
    fn colormap_gpu(&mut self, colormap: &Colormap) -> &ColormapGpu {
        let key = colormap.key();
        self.colormaps.entry(key).or_insert_with(|| {
            let entries = colormap.entries();
            let size = wgpu::Extent3d {
                width: entries.len() as u32,
                height: 1,
                depth_or_array_layers: 1,
            };
            let texture = self.device.create_texture(&wgpu::TextureDescriptor {
                label: Some("sluice colormap"),
                size,
                mip_level_count: 1,
                sample_count: 1,
                dimension: wgpu::TextureDimension::D2,
                format: wgpu::TextureFormat::Rgba8Unorm,
                usage: wgpu::TextureUsages::TEXTURE_BINDING | wgpu::TextureUsages::COPY_DST,
                view_formats: &[],
            });
            self.queue.write_texture(
                texture.as_image_copy(),
                bytemuck::cast_slice(entries),
                wgpu::TexelCopyBufferLayout {
                    offset: 0,
                    bytes_per_row: Some(entries.len() as u32 * 4),
                    rows_per_image: None,
                },
                size,
            );
            ColormapGpu {
                view: texture.create_view(&wgpu::TextureViewDescriptor::default()),
                entries: entries.len(),
                custom: colormap.custom_handle(),
            }
        })
    }
}

/// A renderer going away lets go of its sources: each learns that this consumer is gone (so a
/// release-after-upload policy no longer waits for it).
impl Drop for Renderer {
    fn drop(&mut self) {
        let mut counters = self.counters;
        for (_, proxy) in self.proxies.drain() {
            proxy.retire(&mut counters);
        }
        for (_, proxy) in self.buffers.drain() {
            proxy.retire(&mut counters);
        }
    }
}

fn visual_id(visual: &Visual) -> u64 {
    match visual {
        Visual::Image(image) => image.token.id,
        Visual::Volume(volume) => volume.token.id,
        Visual::Mesh(mesh) => mesh.token.id,
    }
}

/// A mesh's buffer sources in `MESH_*` slot order with their GPU formats, and its vertex
/// count; refuses meshes that cannot be drawn, naming the numbers.
#[allow(clippy::type_complexity)]
fn mesh_buffers(
    mesh: &Mesh,
) -> Result<(Vec<Option<(&SharedSource, BufferFormat)>>, usize), RenderError> {
    let invalid = |source: &SharedSource, reason: String| RenderError::InvalidMeshData {
        source_label: source.label(),
        reason,
    };
    let positions = mesh.positions();
    let layout = positions.layout();
    let vertices = layout.shape().len();
    if layout.shape().ndim() != 1 || !(2..=3).contains(&layout.channels()) {
        return Err(invalid(
            positions,
            format!(
                "positions are 1-D with 2 or 3 channels (x, y[, z]); this source has shape {} with {} channel(s)",
                layout.shape(),
                layout.channels()
            ),
        ));
    }
    let attribute = |source: Option<&SharedSource>,
                     name: &str,
                     channels: &[usize]|
     -> Result<(), RenderError> {
        let Some(source) = source else {
            return Ok(());
        };
        let l = source.layout();
        if l.shape().ndim() != 1 || l.shape().len() != vertices {
            return Err(invalid(
                source,
                format!("{name} have shape {} but positions have {vertices} vertices: attribute lengths must agree", l.shape()),
            ));
        }
        if !channels.contains(&l.channels()) {
            return Err(invalid(
                source,
                format!(
                    "{name} have {} channel(s); {channels:?} allowed",
                    l.channels()
                ),
            ));
        }
        Ok(())
    };
    attribute(mesh.normals(), "normals", &[3])?;
    attribute(mesh.vertex_colors(), "colours", &[3, 4])?;
    attribute(mesh.scalars(), "scalars", &[1])?;
    attribute(
        mesh.texture().map(|(uv, _)| uv),
        "texture coordinates",
        &[2],
    )?;
    match mesh.indices() {
        Some(indices) => {
            let l = indices.layout();
            let count = l.shape().len() * l.channels();
            if count % 3 != 0 {
                return Err(invalid(
                    indices,
                    format!("{count} indices is not a whole number of triangles (a multiple of 3)"),
                ));
            }
        }
        None if vertices < 3 || !vertices.is_multiple_of(3) => {
            return Err(invalid(
                positions,
                format!("{vertices} vertices without indices: consecutive vertices make triangles, so the count must be a non-zero multiple of 3"),
            ));
        }
        None => {}
    }
    let f32s = |channels| BufferFormat::F32 { channels };
    Ok((
        vec![
            Some((positions, f32s(3))),
            mesh.indices().map(|s| (s, BufferFormat::U32)),
            mesh.normals().map(|s| (s, f32s(3))),
            mesh.vertex_colors().map(|s| (s, BufferFormat::Rgba8)),
            mesh.scalars().map(|s| (s, f32s(1))),
            mesh.texture().map(|(uv, _)| (uv, f32s(2))),
        ],
        vertices,
    ))
}

/// A volume shows 3-D scalar data (its step and mode were checked when set).
fn check_volume(volume: &Volume) -> Result<(), RenderError> {
    let shape = volume.source().layout().shape();
    if shape.ndim() != 3 {
        return Err(RenderError::UnsupportedSource {
            visual: "Volume",
            source_label: volume.source().label(),
            reason: format!(
                "it has shape {shape} ({}-D); a volume needs 3-D data",
                shape.ndim()
            ),
        });
    }
    let channels = volume.source().layout().channels();
    if channels != 1 {
        return Err(RenderError::UnsupportedSource {
            visual: "Volume",
            source_label: volume.source().label(),
            reason: format!("it has {channels} channels per voxel; a volume shows scalar data"),
        });
    }
    Ok(())
}
