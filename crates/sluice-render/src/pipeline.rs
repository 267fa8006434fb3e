//! What sluice's pipelines share: the display uniform, texture kinds and dimensions,
//! common layout entries and shader assembly, pipeline creation, and the opaque pass's
//! attachment kinds.

use sluice_core::ElementType;

use crate::bricking::{brick_binding, BRICK_SLOTS};
use crate::format::SampleKind;
use crate::sampling::prelude;
use crate::target_format::{DEPTH_COLOR_FORMAT, DEPTH_FORMAT, TARGET_FORMAT};

const COMMON: &str = include_str!("shaders/common.wgsl");

/// `Display` in `shaders/common.wgsl`: how values become colours.
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, bytemuck::Pod, bytemuck::Zeroable)]
pub(crate) struct DisplayParams {
    pub clim: [f32; 2],
    pub gamma: f32,
    pub lut_size: u32,
}

/// 1 / the value of an opaque alpha for `element`.
pub(crate) fn alpha_scale(element: ElementType) -> f32 {
    match element {
        ElementType::U8 => 1.0 / u8::MAX as f32,
        ElementType::I8 => 1.0 / i8::MAX as f32,
        ElementType::U16 => 1.0 / u16::MAX as f32,
        ElementType::I16 => 1.0 / i16::MAX as f32,
        ElementType::U32 => 1.0 / u32::MAX as f32,
        ElementType::I32 => 1.0 / i32::MAX as f32,
        ElementType::F16 | ElementType::F32 | ElementType::F64 => 1.0,
    }
}

/// The image shader's `mode` for data of `channels` (`image_color` in `shaders/common.wgsl`):
/// 0 one channel through the colormap, 1 value and alpha, 2 RGB, 3 RGBA.
pub(crate) fn image_mode(channels: usize) -> u32 {
    match channels {
        1 => 0,
        2 => 1,
        3 => 2,
        _ => 3,
    }
}

/// Whether a texture is 2-D or 3-D.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub(crate) enum TexDim {
    D2,
    D3,
}

impl TexDim {
    pub fn view_dimension(self) -> wgpu::TextureViewDimension {
        match self {
            TexDim::D2 => wgpu::TextureViewDimension::D2,
            TexDim::D3 => wgpu::TextureViewDimension::D3,
        }
    }
}

/// The bind group every visual's pipeline reads its colormap table from (`lut` in
/// `shaders/common.wgsl`); group 0 is the visual's own.
pub(crate) const COLORMAP_GROUP: u32 = 1;

/// The layout of a colormap table's bind group ([`COLORMAP_GROUP`]): the table at binding 0,
/// visible to every stage that may look a colour up. One layout per device, shared by all
/// the pipelines, so that one group per table serves every visual.
pub(crate) fn colormap_layout(device: &wgpu::Device) -> wgpu::BindGroupLayout {
    device.create_bind_group_layout(&wgpu::BindGroupLayoutDescriptor {
        label: Some("sluice colormap"),
        entries: &[float_texture_entry(
            0,
            wgpu::ShaderStages::VERTEX_FRAGMENT | wgpu::ShaderStages::COMPUTE,
        )],
    })
}

/// A layout entry for a 2-D float texture read with `textureLoad` (colormaps, depth as a
/// colour, marched volumes).
pub(crate) fn float_texture_entry(
    binding: u32,
    visibility: wgpu::ShaderStages,
) -> wgpu::BindGroupLayoutEntry {
    wgpu::BindGroupLayoutEntry {
        binding,
        visibility,
        ty: wgpu::BindingType::Texture {
            sample_type: wgpu::TextureSampleType::Float { filterable: false },
            view_dimension: wgpu::TextureViewDimension::D2,
            multisampled: false,
        },
        count: None,
    }
}

/// How many data textures a visual binds: one, or the 3-D brick slots.
pub(crate) fn data_slots(dim: TexDim, one_brick: bool) -> usize {
    if dim == TexDim::D3 && !one_brick {
        BRICK_SLOTS
    } else {
        1
    }
}

/// Layout entries of the data textures: one texture, or the 3-D brick slots.
pub(crate) fn data_texture_entries(
    kind: SampleKind,
    dim: TexDim,
    one_brick: bool,
    visibility: wgpu::ShaderStages,
) -> Vec<wgpu::BindGroupLayoutEntry> {
    let slots = data_slots(dim, one_brick);
    (0..slots)
        .map(|slot| wgpu::BindGroupLayoutEntry {
            binding: brick_binding(slot),
            visibility,
            ty: wgpu::BindingType::Texture {
                sample_type: kind.texture_sample_type(),
                view_dimension: dim.view_dimension(),
                multisampled: false,
            },
            count: None,
        })
        .collect()
}

/// Full WGSL source of a visual's shader for one texture kind and dimension, in one texture
/// (2-D data always is) and interpolated by hand.
pub(crate) fn shader_source(body: &str, kind: SampleKind, dim: TexDim) -> String {
    sampled_shader_source(body, kind, dim, true, false)
}

/// Full WGSL source of a visual's shader for data of `kind` and `dim` in one texture or in
/// brick slots; `allow_filter`: the hardware interpolates where the data allows it (the
/// layout then has the sampler, see `sampling`).
pub(crate) fn sampled_shader_source(
    body: &str,
    kind: SampleKind,
    dim: TexDim,
    one_brick: bool,
    allow_filter: bool,
) -> String {
    let texture = match dim {
        TexDim::D2 => "texture_2d",
        TexDim::D3 => "texture_3d",
    };
    let body = body
        .replace("TEXTURE_DIM", texture)
        .replace("SAMPLE_T", kind.wgsl());
    format!(
        "{COMMON}\n{}\n{body}",
        prelude(kind, dim, one_brick, allow_filter)
    )
}

/// What differs between sluice's render pipelines; everything else (`vs_main`, no vertex
/// buffers, no multisampling) is common.
pub(crate) struct PipelineSpec<'a> {
    pub label: &'a str,
    pub layout: &'a wgpu::PipelineLayout,
    pub module: &'a wgpu::ShaderModule,
    pub topology: wgpu::PrimitiveTopology,
    pub depth: Option<wgpu::DepthStencilState>,
    pub fragment_entry: &'a str,
    pub targets: &'a [Option<wgpu::ColorTargetState>],
    /// Values of the module's pipeline-overridable constants (`override` in WGSL), by name.
    pub constants: &'a [(&'a str, f64)],
}

/// Held while a pipeline is created: renderers on other threads share the device, and
/// NVIDIA's Vulkan driver 580 was seen to crash (once, in its shader compiler library) while
/// several threads created pipelines on one device at the same time. Pipelines are created
/// once each, so the lock costs nothing in steady state.
pub(crate) fn pipeline_creation_lock() -> parking_lot::MutexGuard<'static, ()> {
    static LOCK: parking_lot::Mutex<()> = parking_lot::Mutex::new(());
    LOCK.lock()
}

/// A compute pipeline of one bind group (`layout`) running `entry` of `module`, through the
/// device's pipeline cache where it has one.
pub(crate) fn compute_pipeline(
    device: &wgpu::Device,
    label: &str,
    layout: &wgpu::BindGroupLayout,
    module: &wgpu::ShaderModule,
    entry: &str,
) -> wgpu::ComputePipeline {
    let pipeline_layout = device.create_pipeline_layout(&wgpu::PipelineLayoutDescriptor {
        label: Some(label),
        bind_group_layouts: &[Some(layout)],
        immediate_size: 0,
    });
    let _serial = pipeline_creation_lock();
    device.create_compute_pipeline(&wgpu::ComputePipelineDescriptor {
        label: Some(label),
        layout: Some(&pipeline_layout),
        module,
        entry_point: Some(entry),
        compilation_options: Default::default(),
        cache: crate::pipeline_cache::for_pipeline(device).as_ref(),
    })
}

/// A uniform buffer holding `items`, each at its own offset `stride` bytes apart (the
/// device's uniform offset alignment), to bind one at a time with a dynamic offset of
/// `i * stride`. Returns the buffer and the stride.
pub(crate) fn dynamic_uniforms<T: bytemuck::Pod>(
    device: &wgpu::Device,
    label: &str,
    items: &[T],
) -> (wgpu::Buffer, u32) {
    let align = device.limits().min_uniform_buffer_offset_alignment;
    let stride = (size_of::<T>() as u32).next_multiple_of(align);
    let mut bytes = vec![0u8; stride as usize * items.len()];
    for (item, at) in items.iter().zip(bytes.chunks_mut(stride as usize)) {
        at[..size_of::<T>()].copy_from_slice(bytemuck::bytes_of(item));
    }
    let buffer = wgpu::util::DeviceExt::create_buffer_init(
        device,
        &wgpu::util::BufferInitDescriptor {
            label: Some(label),
            contents: &bytes,
            usage: wgpu::BufferUsages::UNIFORM,
        },
    );
    (buffer, stride)
}

/// Builds a render pipeline from `spec`.
pub(crate) fn render_pipeline(
    device: &wgpu::Device,
    spec: PipelineSpec<'_>,
) -> wgpu::RenderPipeline {
    render_pipeline_from(device, spec, "vs_main")
}

/// Builds a render pipeline from `spec` whose vertex shader is `vertex_entry`.
pub(crate) fn render_pipeline_from(
    device: &wgpu::Device,
    spec: PipelineSpec<'_>,
    vertex_entry: &str,
) -> wgpu::RenderPipeline {
    let _serial = pipeline_creation_lock();
    let cache = crate::pipeline_cache::for_pipeline(device);
    device.create_render_pipeline(&wgpu::RenderPipelineDescriptor {
        label: Some(spec.label),
        layout: Some(spec.layout),
        vertex: wgpu::VertexState {
            module: spec.module,
            entry_point: Some(vertex_entry),
            compilation_options: wgpu::PipelineCompilationOptions {
                constants: spec.constants,
                ..Default::default()
            },
            buffers: &[],
        },
        primitive: wgpu::PrimitiveState {
            topology: spec.topology,
            ..Default::default()
        },
        depth_stencil: spec.depth,
        multisample: wgpu::MultisampleState::default(),
        fragment: Some(wgpu::FragmentState {
            module: spec.module,
            entry_point: Some(spec.fragment_entry),
            compilation_options: wgpu::PipelineCompilationOptions {
                constants: spec.constants,
                ..Default::default()
            },
            targets: spec.targets,
        }),
        multiview_mask: None,
        cache: cache.as_ref(),
    })
}

/// The attachments of a frame's opaque pass, chosen per frame from what it draws: every
/// attachment costs a clear and its writes, which on GPUs with few graphics units (an H200
/// clears 1024 x 1024 RGBA8 in about 0.08 ms) are a large part of a small frame.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub(crate) enum PassKind {
    /// Images that all lie at one depth, and nothing else: the colour target alone. Without
    /// a depth buffer later draws cover earlier ones, which is what the depth test
    /// (`LessEqual`) gives when every fragment has the same depth.
    Flat,
    /// Colour and depth: meshes, or images at different depths.
    Depth,
    /// Colour, depth, and the depth again as a colour for the volume marcher.
    DepthColor,
}

impl PassKind {
    /// The colour targets: the image, blended; and, in a pass with volumes, the depth as a
    /// colour, written only by visuals that write depth. The second slot is empty otherwise.
    pub fn targets(self, depth_write: bool) -> [Option<wgpu::ColorTargetState>; 2] {
        let color = wgpu::ColorTargetState {
            format: TARGET_FORMAT,
            blend: Some(wgpu::BlendState::ALPHA_BLENDING),
            write_mask: wgpu::ColorWrites::ALL,
        };
        let depth_color = (self == PassKind::DepthColor).then_some(wgpu::ColorTargetState {
            format: DEPTH_COLOR_FORMAT,
            blend: None,
            write_mask: if depth_write {
                wgpu::ColorWrites::ALL
            } else {
                wgpu::ColorWrites::empty()
            },
        });
        [Some(color), depth_color]
    }

    /// Depth state: test (later draws win ties) and write when `depth_write`; none in a flat
    /// pass.
    pub fn depth(self, depth_write: bool) -> Option<wgpu::DepthStencilState> {
        (self != PassKind::Flat).then_some(wgpu::DepthStencilState {
            format: DEPTH_FORMAT,
            depth_write_enabled: Some(depth_write),
            depth_compare: Some(wgpu::CompareFunction::LessEqual),
            stencil: wgpu::StencilState::default(),
            bias: wgpu::DepthBiasState::default(),
        })
    }
}

/// Whether a visual of `gamma` needs the gamma curve: `GAMMA_CURVE` in `shaders/common.wgsl`,
/// a pipeline-overridable constant that compiles the curve out for gamma 1.
pub(crate) fn gamma_curve(gamma: f32) -> bool {
    gamma != 1.0
}

/// The pipeline-overridable constants of a pipeline with or without the gamma curve.
pub(crate) fn gamma_constants(curve: bool) -> [(&'static str, f64); 1] {
    [("GAMMA_CURVE", if curve { 1.0 } else { 0.0 })]
}

/// What an image shader is compiled for beyond its texture: the channel mode
/// ([`image_mode`]), linear interpolation and the clip to the data, as constants of the
/// module, and the gamma curve,
/// a constant of the pipeline (CPU devices such as lavapipe run both sides of a branch on a
/// uniform; a constant leaves one).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub(crate) struct ImageVariant {
    pub mode: u32,
    pub linear: bool,
    /// Whether the gamma curve applies ([`gamma_curve`]).
    pub gamma: bool,
    /// Whether samples outside the data are transparent (oblique planes) instead of clamped
    /// to the edge, a constant of the module.
    pub clip: bool,
}

impl ImageVariant {
    /// The pipeline-overridable constants this variant sets.
    pub fn constants(self) -> [(&'static str, f64); 1] {
        gamma_constants(self.gamma)
    }
}

/// Which pipeline draws a visual; the `bool`s: the data is in one texture (not in bricks).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum PipelineKey {
    Image(SampleKind, TexDim, bool, ImageVariant),
    Volume(SampleKind, bool),
    Mesh(SampleKind),
}

impl PipelineKey {
    /// Whether both pipelines have the same group 0 layout, so that one bind group serves
    /// both: an image's variants share theirs.
    pub fn same_layout(self, other: PipelineKey) -> bool {
        match (self, other) {
            (PipelineKey::Image(k, d, b, _), PipelineKey::Image(k2, d2, b2, _)) => {
                (k, d, b) == (k2, d2, b2)
            }
            (a, b) => a == b,
        }
    }
}

/// A layout entry for a storage buffer of a compute pass (the z-paired copy's build, the mesh
/// cull).
pub(crate) fn compute_storage_entry(binding: u32, read_only: bool) -> wgpu::BindGroupLayoutEntry {
    wgpu::BindGroupLayoutEntry {
        binding,
        visibility: wgpu::ShaderStages::COMPUTE,
        ty: wgpu::BindingType::Buffer {
            ty: wgpu::BufferBindingType::Storage { read_only },
            has_dynamic_offset: false,
            min_binding_size: None,
        },
        count: None,
    }
}

/// The uniform block's layout entry (binding 0) for a block of `size` bytes.
pub(crate) fn uniform_entry(
    size: usize,
    visibility: wgpu::ShaderStages,
) -> wgpu::BindGroupLayoutEntry {
    wgpu::BindGroupLayoutEntry {
        binding: 0,
        visibility,
        ty: wgpu::BindingType::Buffer {
            ty: wgpu::BufferBindingType::Uniform,
            has_dynamic_offset: false,
            min_binding_size: wgpu::BufferSize::new(size as u64),
        },
        count: None,
    }
}

/// A visual's group 0 layout with `entries`, its shader module from `source`, and the
/// pipeline layout of group 0 followed by `more` groups (the colormap's first, at
/// [`COLORMAP_GROUP`], for the shaders that look colours up).
pub(crate) struct ShaderParts {
    pub layout: wgpu::BindGroupLayout,
    pub module: wgpu::ShaderModule,
    pub pipeline_layout: wgpu::PipelineLayout,
}

impl ShaderParts {
    pub fn new(
        device: &wgpu::Device,
        label: &str,
        entries: &[wgpu::BindGroupLayoutEntry],
        source: String,
        more: &[&wgpu::BindGroupLayout],
    ) -> Self {
        let layout = device.create_bind_group_layout(&wgpu::BindGroupLayoutDescriptor {
            label: Some(label),
            entries,
        });
        let module = device.create_shader_module(wgpu::ShaderModuleDescriptor {
            label: Some(label),
            source: wgpu::ShaderSource::Wgsl(source.into()),
        });
        let groups: Vec<Option<&wgpu::BindGroupLayout>> = std::iter::once(&layout)
            .chain(more.iter().copied())
            .map(Some)
            .collect();
        let pipeline_layout = device.create_pipeline_layout(&wgpu::PipelineLayoutDescriptor {
            label: Some(label),
            bind_group_layouts: &groups,
            immediate_size: 0,
        });
        ShaderParts {
            layout,
            module,
            pipeline_layout,
        }
    }
}

/// `source` parses and validates, and so does each entry point's module once `constants`
/// (its pipeline-overridable constants) are put in, as wgpu does when it makes a pipeline.
#[cfg(test)]
pub(crate) fn assert_valid_with_constants(
    source: &str,
    constants: &[(&str, f64)],
    entries: &[(wgpu::naga::ShaderStage, &str)],
    what: &str,
) {
    use wgpu::naga;
    let module = naga::front::wgsl::parse_str(source)
        .unwrap_or_else(|e| panic!("{what}: {}", e.emit_to_string(source)));
    let validate = |module: &naga::Module| {
        naga::valid::Validator::new(
            naga::valid::ValidationFlags::all(),
            naga::valid::Capabilities::all(),
        )
        .validate(module)
        .unwrap_or_else(|e| panic!("{what}: {e:?}"))
    };
    let info = validate(&module);
    let constants = naga::back::PipelineConstants::from_iter(
        constants
            .iter()
            .map(|&(name, value)| (name.to_string(), value)),
    );
    for &(stage, entry) in entries {
        let (processed, _) = naga::back::pipeline_constants::process_overrides(
            &module,
            &info,
            Some((stage, entry)),
            &constants,
        )
        .unwrap_or_else(|e| panic!("{what}, {entry} with {constants:?}: {e:?}"));
        validate(&processed);
    }
}
