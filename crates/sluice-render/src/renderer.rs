//! `Renderer`: one GPU device, the proxies of every source it shows, and frames.

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Weak};
use std::task::{Wake, Waker};

use sluice_core::SharedSource;

use crate::camera::Camera;
use crate::colormap::{Colormap, ColormapKey};
use crate::counters::{Counters, FrameStats};
use crate::device_upload::DeviceUpload;
use crate::error::RenderError;
use crate::format::SampleKind;
use crate::image_pipeline::{ImageParams, ImagePipelines};
use crate::options::RendererOptions;
use crate::proxy::{SourceKey, TextureProxy, UploadContext};
use crate::scene::Scene;
use crate::staging::StagingRing;
use crate::target::RenderTarget;
use crate::visual::{Image, Visual, VisualToken};

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

struct BindState {
    group: wgpu::BindGroup,
    kind: SampleKind,
    generation: u64,
    colormap: ColormapKey,
}

/// GPU state of one visual: its uniforms and bind group, and which proxy it uses.
struct VisualGpu {
    token: Weak<VisualToken>,
    source: SourceKey,
    uniform: wgpu::Buffer,
    params: Option<ImageParams>,
    bind: Option<BindState>,
}

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
    colormaps: HashMap<ColormapKey, ColormapGpu>,
    proxies: HashMap<SourceKey, TextureProxy>,
    visuals: HashMap<u64, VisualGpu>,
    staging: StagingRing,
    counters: Counters,
    upload_budget: Option<u64>,
    scratch: Vec<u8>,
    redraw: Arc<RedrawFlag>,
    waker: Waker,
    device_upload: Option<Arc<dyn DeviceUpload>>,
}

impl Renderer {
    /// A renderer on the best adapter, honouring `SLUICE_BACKEND` and `SLUICE_ADAPTER`.
    pub fn new() -> Result<Self, RenderError> {
        Renderer::with_options(RendererOptions::from_env()?)
    }

    /// A renderer set up by `options`.
    ///
    /// Picks, among the adapters of the requested backends whose name matches, a discrete
    /// GPU over an integrated one over a virtual one over a CPU one, and Vulkan, Metal or DX12
    /// over GL.
    pub fn with_options(options: RendererOptions) -> Result<Self, RenderError> {
        let adapter = options.choose_adapter()?;
        let info = adapter.get_info();
        let (device, queue) = pollster::block_on(adapter.request_device(&wgpu::DeviceDescriptor {
            label: Some("sluice"),
            required_features: wgpu::Features::empty(),
            required_limits: adapter.limits(),
            experimental_features: wgpu::ExperimentalFeatures::disabled(),
            memory_hints: wgpu::MemoryHints::Performance,
            trace: wgpu::Trace::Off,
        }))
        .map_err(|e| RenderError::RequestDevice {
            adapter: info.name.clone(),
            reason: e.to_string(),
        })?;
        Ok(Renderer::from_device(
            adapter,
            device,
            queue,
            options.upload_budget,
        ))
    }

    /// A renderer on a device the caller opened (for example with extra extensions).
    pub fn from_device(
        adapter: wgpu::Adapter,
        device: wgpu::Device,
        queue: wgpu::Queue,
        upload_budget: Option<u64>,
    ) -> Self {
        let info = adapter.get_info();
        let images = ImagePipelines::new(&device);
        let max_buffer = device.limits().max_buffer_size.min(1 << 30);
        let redraw = Arc::new(RedrawFlag::default());
        let waker = Waker::from(redraw.clone());
        let mut renderer = Renderer {
            adapter,
            device,
            queue,
            info,
            images,
            colormaps: HashMap::new(),
            proxies: HashMap::new(),
            visuals: HashMap::new(),
            staging: StagingRing::new(max_buffer),
            counters: Counters::default(),
            upload_budget,
            scratch: Vec::new(),
            redraw,
            waker,
            device_upload: None,
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
        RenderTarget::new(&self.device, width, height)
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
                self.release_proxy_user(v.source);
            }
        }
        self.colormaps.retain(|_, c| {
            c.custom
                .as_ref()
                .is_none_or(|entries| Arc::strong_count(entries) > 1)
        });
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
    /// is uploaded, within the upload budget). On error nothing is drawn; sources, visuals and
    /// the renderer stay usable.
    pub fn render(
        &mut self,
        scene: &Scene,
        camera: &dyn Camera,
        target: &RenderTarget,
    ) -> Result<FrameStats, RenderError> {
        // Run map callbacks of staging chunks the GPU has finished with; errors surface on the
        // error scope below.
        let _ = self.device.poll(wgpu::PollType::Poll);
        self.collect_garbage();
        let view_projection = camera.view_projection(target.size());
        let draws = scene.draw_list();

        let scope = self.device.push_error_scope(wgpu::ErrorFilter::Validation);
        let mut images: Vec<(&Image, glam::Mat4)> = Vec::with_capacity(draws.len());
        for (visual, world) in &draws {
            match visual {
                Visual::Image(image) => {
                    self.prepare_image(image)?;
                    images.push((image, view_projection * *world));
                }
            }
        }

        let mut encoder = self
            .device
            .create_command_encoder(&wgpu::CommandEncoderDescriptor {
                label: Some("sluice frame"),
            });
        let before = self.counters;
        let upload = self.upload_sources(&images, &mut encoder);
        let drawn = match upload {
            Ok(_) => self.record_draws(scene, &images, target, &mut encoder),
            Err(_) => Ok(0),
        };
        // Copies already recorded are real: submit them even if the frame failed, so proxies
        // and the GPU agree on what was uploaded.
        self.staging.finish();
        self.queue.submit([encoder.finish()]);
        self.staging.recall();
        if let Some(upload) = &self.device_upload {
            upload.frame_submitted(&self.queue);
        }
        if let Some(error) = pollster::block_on(scope.pop()) {
            return Err(RenderError::Gpu(error.to_string()));
        }
        let uploads_pending = upload?;
        let visuals_drawn = drawn?;
        Ok(FrameStats {
            bytes_uploaded: self.counters.bytes_uploaded - before.bytes_uploaded,
            copies_issued: self.counters.copies_issued - before.copies_issued,
            visuals_drawn,
            uploads_pending,
        })
    }

    /// Checks an image and makes sure its proxy and GPU state exist.
    fn prepare_image(&mut self, image: &Image) -> Result<(), RenderError> {
        check_image_parameters(image)?;
        let source = image.source();
        let layout = source.layout();
        if layout.shape().ndim() > 2 {
            return Err(RenderError::UnsupportedSource {
                visual: "Image",
                source_label: source.label(),
                reason: format!(
                    "it is {}-D with shape {}; an Image shows 1-D or 2-D data (show a plane of a volume with CropSource::plane)",
                    layout.shape().ndim(),
                    layout.shape()
                ),
            });
        }
        let key = self.ensure_proxy(source)?;
        let id = image.token.id;
        match self.visuals.get_mut(&id) {
            Some(v) if v.source == key => {}
            Some(v) => {
                let old = std::mem::replace(&mut v.source, key);
                v.bind = None;
                self.proxy_mut(key).users += 1;
                self.release_proxy_user(old);
            }
            None => {
                let uniform = self.device.create_buffer(&wgpu::BufferDescriptor {
                    label: Some("sluice image params"),
                    size: size_of::<ImageParams>() as u64,
                    usage: wgpu::BufferUsages::UNIFORM | wgpu::BufferUsages::COPY_DST,
                    mapped_at_creation: false,
                });
                self.visuals.insert(
                    id,
                    VisualGpu {
                        token: Arc::downgrade(&image.token),
                        source: key,
                        uniform,
                        params: None,
                        bind: None,
                    },
                );
                self.proxy_mut(key).users += 1;
            }
        }
        self.colormap_gpu(image.colormap());
        Ok(())
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
            )?;
            self.proxies.insert(key, proxy);
        }
        Ok(key)
    }

    /// Uploads what changed in every source drawn this frame, each once. Returns whether
    /// uploads remain for later frames.
    fn upload_sources(
        &mut self,
        images: &[(&Image, glam::Mat4)],
        encoder: &mut wgpu::CommandEncoder,
    ) -> Result<bool, RenderError> {
        let mut seen = Vec::new();
        let mut pending = false;
        let frame_start_bytes = self.counters.bytes_uploaded;
        for (image, _) in images {
            let key = SourceKey::of(image.source());
            if seen.contains(&key) {
                continue;
            }
            seen.push(key);
            let proxy = self.proxies.get_mut(&key).expect("prepared");
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
            };
            pending |= proxy.upload(&mut ctx)?;
        }
        Ok(pending)
    }

    fn record_draws(
        &mut self,
        scene: &Scene,
        images: &[(&Image, glam::Mat4)],
        target: &RenderTarget,
        encoder: &mut wgpu::CommandEncoder,
    ) -> Result<u32, RenderError> {
        for (image, transform) in images {
            self.update_image_gpu(image, *transform);
        }
        let [r, g, b, a] = scene.background().map(f64::from);
        let mut pass = encoder.begin_render_pass(&wgpu::RenderPassDescriptor {
            label: Some("sluice scene"),
            color_attachments: &[Some(wgpu::RenderPassColorAttachment {
                view: &target.view,
                depth_slice: None,
                resolve_target: None,
                ops: wgpu::Operations {
                    load: wgpu::LoadOp::Clear(wgpu::Color { r, g, b, a }),
                    store: wgpu::StoreOp::Store,
                },
            })],
            depth_stencil_attachment: None,
            timestamp_writes: None,
            occlusion_query_set: None,
            multiview_mask: None,
        });
        let mut drawn = 0;
        for (image, _) in images {
            let v = &self.visuals[&image.token.id];
            let bind = v.bind.as_ref().expect("bound in update_image_gpu");
            pass.set_pipeline(self.images.pipeline(bind.kind));
            pass.set_bind_group(0, &bind.group, &[]);
            pass.draw(0..6, 0..1);
            drawn += 1;
        }
        Ok(drawn)
    }

    /// Writes the image's uniforms if they changed and (re)builds its bind group if its
    /// texture or colormap changed.
    fn update_image_gpu(&mut self, image: &Image, transform: glam::Mat4) {
        let colormap_key = image.colormap().key();
        let colormap = &self.colormaps[&colormap_key];
        let v = self.visuals.get_mut(&image.token.id).expect("prepared");
        let proxy = &self.proxies[&v.source];
        let params = ImageParams::new(image, proxy.layout(), transform, colormap.entries);
        if v.params != Some(params) {
            self.queue
                .write_buffer(&v.uniform, 0, bytemuck::bytes_of(&params));
            v.params = Some(params);
        }
        let stale = v.bind.as_ref().is_none_or(|b| {
            b.generation != proxy.generation()
                || b.colormap != colormap_key
                || b.kind != proxy.sample_kind()
        });
        if stale {
            let kind = proxy.sample_kind();
            let group = self.device.create_bind_group(&wgpu::BindGroupDescriptor {
                label: Some("sluice image"),
                layout: self.images.layout(kind),
                entries: &[
                    wgpu::BindGroupEntry {
                        binding: 0,
                        resource: v.uniform.as_entire_binding(),
                    },
                    wgpu::BindGroupEntry {
                        binding: 1,
                        resource: wgpu::BindingResource::TextureView(proxy.view()),
                    },
                    wgpu::BindGroupEntry {
                        binding: 2,
                        resource: wgpu::BindingResource::TextureView(&colormap.view),
                    },
                ],
            });
            v.bind = Some(BindState {
                group,
                kind,
                generation: proxy.generation(),
                colormap: colormap_key,
            });
        }
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

fn check_image_parameters(image: &Image) -> Result<(), RenderError> {
    let invalid = |parameter, value: String, expected| RenderError::InvalidParameter {
        visual: "Image",
        parameter,
        value,
        expected,
    };
    let [lo, hi] = image.effective_clim();
    if !lo.is_finite() || !hi.is_finite() {
        return Err(invalid(
            "clim",
            format!("[{lo}, {hi}]"),
            "both limits must be finite",
        ));
    }
    let gamma = image.gamma();
    if !(gamma.is_finite() && gamma > 0.0) {
        return Err(invalid("gamma", gamma.to_string(), "a finite number > 0"));
    }
    let opacity = image.opacity();
    if !(0.0..=1.0).contains(&opacity) {
        return Err(invalid(
            "opacity",
            opacity.to_string(),
            "a number in [0, 1]",
        ));
    }
    if image.nan_color().iter().any(|c| !(0.0..=1.0).contains(c)) {
        return Err(invalid(
            "nan_color",
            format!("{:?}", image.nan_color()),
            "RGBA components in [0, 1]",
        ));
    }
    Ok(())
}

pub(crate) fn choose_adapter(
    backends: wgpu::Backends,
    filter: Option<&str>,
) -> Result<wgpu::Adapter, RenderError> {
    let describe = |a: &wgpu::Adapter| {
        let i = a.get_info();
        format!("{} ({:?}, {:?})", i.name, i.backend, i.device_type)
    };
    let matches = |a: &wgpu::Adapter| {
        filter.is_none_or(|w| a.get_info().name.to_lowercase().contains(&w.to_lowercase()))
    };
    let score = |a: &wgpu::Adapter| {
        let i = a.get_info();
        let device = match i.device_type {
            wgpu::DeviceType::DiscreteGpu => 4,
            wgpu::DeviceType::IntegratedGpu => 3,
            wgpu::DeviceType::VirtualGpu => 2,
            wgpu::DeviceType::Cpu => 1,
            wgpu::DeviceType::Other => 0,
        };
        let backend = match i.backend {
            wgpu::Backend::Vulkan | wgpu::Backend::Metal | wgpu::Backend::Dx12 => 2,
            wgpu::Backend::Gl => 1,
            _ => 0,
        };
        device * 10 + backend
    };
    // Native backends first, GL only if they have no match: merely creating a GL instance
    // probes EGL, which is slow and noisy where Vulkan already works.
    let primary = backends & wgpu::Backends::PRIMARY;
    let mut seen = Vec::new();
    for group in [primary, backends - primary] {
        if group.is_empty() {
            continue;
        }
        let mut desc = wgpu::InstanceDescriptor::new_without_display_handle();
        desc.backends = group;
        let instance = wgpu::Instance::new(desc);
        let adapters = pollster::block_on(instance.enumerate_adapters(group));
        seen.extend(adapters.iter().map(describe));
        if let Some(best) = adapters
            .into_iter()
            .filter(|a| matches(a))
            .max_by_key(score)
        {
            return Ok(best);
        }
    }
    Err(RenderError::NoAdapter {
        backends: format!("{backends:?}"),
        filter: filter.map(str::to_string),
        seen,
    })
}
