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
use crate::image_pipeline::{
    brick_binding, slice_geometry, ImageParams, ImagePipelines, TexDim, BRICK_SLOTS,
};
use crate::options::RendererOptions;
use crate::proxy::{SourceKey, TextureLimits, TextureProxy, UploadContext};
use crate::scene::Scene;
use crate::staging::StagingRing;
use crate::target::RenderTarget;
use crate::visual::{Image, Visual, VisualToken, Volume, VolumeMode};
use crate::volume_pipeline::{VolumeParams, VolumePipelines};

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

/// Which pipeline draws a visual.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum PipelineKey {
    Image(SampleKind, TexDim),
    Volume(SampleKind),
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
    source: SourceKey,
    uniform: wgpu::Buffer,
    /// The uniform bytes last written.
    params: Vec<u8>,
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
    volumes: VolumePipelines,
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
    texture_limits: TextureLimits,
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
        let backends = options.backends.unwrap_or(wgpu::Backends::all());
        let adapter = choose_adapter(backends, options.adapter_name.as_deref())?;
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
        let mut renderer = Renderer {
            adapter,
            device,
            queue,
            info,
            images,
            volumes,
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
        RenderTarget::new(&self.device, width, height, self.volumes.depth_layout())
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
    /// is uploaded, within the upload budget). Images (and later meshes) are drawn first with
    /// depth; volumes then march their rays up to that depth. On error nothing is drawn;
    /// sources, visuals and the renderer stay usable.
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
        let draws: Vec<(&Visual, glam::Mat4)> = scene
            .draw_list()
            .into_iter()
            .map(|(visual, world)| (visual, view_projection * world))
            .collect();

        let scope = self.device.push_error_scope(wgpu::ErrorFilter::Validation);
        for (visual, _) in &draws {
            self.prepare_visual(visual)?;
        }
        let mut encoder = self
            .device
            .create_command_encoder(&wgpu::CommandEncoderDescriptor {
                label: Some("sluice frame"),
            });
        let before = self.counters;
        let upload = self.upload_sources(&draws, &mut encoder);
        let drawn = match upload {
            Ok(_) => self.record_draws(scene, &draws, target, &mut encoder),
            Err(_) => 0,
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
        Ok(FrameStats {
            bytes_uploaded: self.counters.bytes_uploaded - before.bytes_uploaded,
            copies_issued: self.counters.copies_issued - before.copies_issued,
            visuals_drawn: drawn,
            uploads_pending,
        })
    }

    /// Checks a visual and makes sure its proxies and GPU state exist.
    fn prepare_visual(&mut self, visual: &Visual) -> Result<(), RenderError> {
        match visual {
            Visual::Image(image) => {
                check_display(
                    "Image",
                    image.effective_clim(),
                    image.gamma(),
                    image.opacity(),
                )?;
                check_nan_color(image.nan_color())?;
                let source = image.source();
                slice_geometry(image.slice(), &source.layout().shape()).map_err(|reason| {
                    RenderError::InvalidSlice {
                        source_label: source.label(),
                        reason,
                    }
                })?;
                self.bind_visual(&image.token, source, size_of::<ImageParams>())?;
                self.colormap_gpu(image.colormap());
            }
            Visual::Volume(volume) => {
                check_display(
                    "Volume",
                    volume.effective_clim(),
                    volume.gamma(),
                    volume.opacity(),
                )?;
                check_volume(volume)?;
                self.bind_visual(&volume.token, volume.source(), size_of::<VolumeParams>())?;
                self.colormap_gpu(volume.colormap());
            }
        }
        Ok(())
    }

    /// Makes sure the visual's GPU state exists and uses `source`'s proxy (creating the proxy
    /// on first use, moving the visual from its old proxy after `set_source`).
    fn bind_visual(
        &mut self,
        token: &Arc<VisualToken>,
        source: &SharedSource,
        uniform_size: usize,
    ) -> Result<(), RenderError> {
        let key = self.ensure_proxy(source)?;
        match self.visuals.get_mut(&token.id) {
            Some(v) if v.source == key => {}
            Some(v) => {
                let old = std::mem::replace(&mut v.source, key);
                v.bind = None;
                self.proxy_mut(key).users += 1;
                self.release_proxy_user(old);
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
                        source: key,
                        uniform,
                        params: Vec::new(),
                        bind: None,
                    },
                );
                self.proxy_mut(key).users += 1;
            }
        }
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
        draws: &[(&Visual, glam::Mat4)],
        encoder: &mut wgpu::CommandEncoder,
    ) -> Result<bool, RenderError> {
        let mut seen = Vec::new();
        let mut pending = false;
        let frame_start_bytes = self.counters.bytes_uploaded;
        for (visual, _) in draws {
            let key = self.visuals[&visual_id(visual)].source;
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

    /// Records the opaque pass (images, with depth) and the volume pass. Returns the number
    /// of visuals drawn.
    fn record_draws(
        &mut self,
        scene: &Scene,
        draws: &[(&Visual, glam::Mat4)],
        target: &RenderTarget,
        encoder: &mut wgpu::CommandEncoder,
    ) -> u32 {
        for (visual, mvp) in draws {
            let key = match visual {
                Visual::Image(image) => self.update_image_gpu(image, *mvp),
                Visual::Volume(volume) => self.update_volume_gpu(volume, *mvp, target.size()),
            };
            self.update_bind_group(visual_id(visual), key);
        }
        let [r, g, b, a] = scene.background().map(f64::from);
        let mut drawn = 0;
        {
            let mut pass = encoder.begin_render_pass(&wgpu::RenderPassDescriptor {
                label: Some("sluice opaque"),
                color_attachments: &[Some(wgpu::RenderPassColorAttachment {
                    view: &target.view,
                    depth_slice: None,
                    resolve_target: None,
                    ops: wgpu::Operations {
                        load: wgpu::LoadOp::Clear(wgpu::Color { r, g, b, a }),
                        store: wgpu::StoreOp::Store,
                    },
                })],
                depth_stencil_attachment: Some(wgpu::RenderPassDepthStencilAttachment {
                    view: &target.depth_view,
                    depth_ops: Some(wgpu::Operations {
                        load: wgpu::LoadOp::Clear(1.0),
                        store: wgpu::StoreOp::Store,
                    }),
                    stencil_ops: None,
                }),
                timestamp_writes: None,
                occlusion_query_set: None,
                multiview_mask: None,
            });
            for (visual, _) in draws {
                if let Visual::Image(image) = visual {
                    let bind = self.visuals[&image.token.id].bind.as_ref().expect("bound");
                    pass.set_pipeline(self.pipeline(bind.key));
                    pass.set_bind_group(0, &bind.group, &[]);
                    pass.draw(0..6, 0..1);
                    drawn += 1;
                }
            }
        }
        if draws.iter().any(|(v, _)| matches!(v, Visual::Volume(_))) {
            let mut pass = encoder.begin_render_pass(&wgpu::RenderPassDescriptor {
                label: Some("sluice volumes"),
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
            pass.set_bind_group(1, &target.depth_group, &[]);
            for (visual, _) in draws {
                if let Visual::Volume(volume) = visual {
                    let bind = self.visuals[&volume.token.id].bind.as_ref().expect("bound");
                    pass.set_pipeline(self.pipeline(bind.key));
                    pass.set_bind_group(0, &bind.group, &[]);
                    pass.draw(0..3, 0..1);
                    drawn += 1;
                }
            }
        }
        drawn
    }

    fn pipeline(&self, key: PipelineKey) -> &wgpu::RenderPipeline {
        match key {
            PipelineKey::Image(kind, dim) => self.images.pipeline(kind, dim),
            PipelineKey::Volume(kind) => self.volumes.pipeline(kind),
        }
    }

    fn bind_group_layout(&self, key: PipelineKey) -> &wgpu::BindGroupLayout {
        match key {
            PipelineKey::Image(kind, dim) => self.images.layout(kind, dim),
            PipelineKey::Volume(kind) => self.volumes.layout(kind),
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
        let proxy = &self.proxies[&self.visuals[&image.token.id].source];
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
        let proxy = &self.proxies[&self.visuals[&volume.token.id].source];
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

    /// (Re)builds a visual's bind group when its texture, colormap or pipeline changed.
    fn update_bind_group(&mut self, id: u64, (key, colormap_key): (PipelineKey, ColormapKey)) {
        let v = &self.visuals[&id];
        let proxy = &self.proxies[&v.source];
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

fn visual_id(visual: &Visual) -> u64 {
    match visual {
        Visual::Image(image) => image.token.id,
        Visual::Volume(volume) => volume.token.id,
    }
}

fn check_display(
    visual: &'static str,
    clim: [f64; 2],
    gamma: f32,
    opacity: f32,
) -> Result<(), RenderError> {
    let invalid = |parameter, value: String, expected| RenderError::InvalidParameter {
        visual,
        parameter,
        value,
        expected,
    };
    let [lo, hi] = clim;
    if !lo.is_finite() || !hi.is_finite() {
        return Err(invalid(
            "clim",
            format!("[{lo}, {hi}]"),
            "both limits must be finite",
        ));
    }
    if !(gamma.is_finite() && gamma > 0.0) {
        return Err(invalid("gamma", gamma.to_string(), "a finite number > 0"));
    }
    if !(0.0..=1.0).contains(&opacity) {
        return Err(invalid(
            "opacity",
            opacity.to_string(),
            "a number in [0, 1]",
        ));
    }
    Ok(())
}

fn check_nan_color(rgba: [f32; 4]) -> Result<(), RenderError> {
    if rgba.iter().all(|c| (0.0..=1.0).contains(c)) {
        return Ok(());
    }
    Err(RenderError::InvalidParameter {
        visual: "Image",
        parameter: "nan_color",
        value: format!("{rgba:?}"),
        expected: "RGBA components in [0, 1]",
    })
}

fn check_volume(volume: &Volume) -> Result<(), RenderError> {
    let invalid = |parameter, value: String, expected| RenderError::InvalidParameter {
        visual: "Volume",
        parameter,
        value,
        expected,
    };
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
    let step = volume.step();
    if !(step.is_finite() && step >= 0.01) {
        return Err(invalid(
            "step",
            step.to_string(),
            "a finite number of voxels >= 0.01",
        ));
    }
    match volume.mode() {
        VolumeMode::Translucent { attenuation }
            if !(attenuation.is_finite() && attenuation >= 0.0) =>
        {
            Err(invalid(
                "attenuation",
                attenuation.to_string(),
                "a finite number >= 0",
            ))
        }
        VolumeMode::Iso { threshold } if !threshold.is_finite() => Err(invalid(
            "threshold",
            threshold.to_string(),
            "a finite number",
        )),
        _ => Ok(()),
    }
}

fn choose_adapter(
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
