//! The GPU side of [`crate::Image`]: uniform block, bind group layouts and pipelines.

use std::collections::HashMap;

use glam::{Mat4, Vec3, Vec4};
use sluice_core::{ElementType, Layout, Shape};

use crate::format::SampleKind;
use crate::proxy::Bricking;
use crate::target::{DEPTH_COLOR_FORMAT, DEPTH_FORMAT, TARGET_FORMAT};
use crate::visual::{Image, Interpolation, Slice};

const COMMON: &str = include_str!("shaders/common.wgsl");
const SHADER: &str = include_str!("shaders/image.wgsl");

/// `Display` in `shaders/common.wgsl`: how values become colours.
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, bytemuck::Pod, bytemuck::Zeroable)]
pub(crate) struct DisplayParams {
    pub clim: [f32; 2],
    pub gamma: f32,
    pub lut_size: u32,
}

/// The uniform block of `shaders/image.wgsl` (`Params`), 240 bytes.
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, bytemuck::Pod, bytemuck::Zeroable)]
pub(crate) struct ImageParams {
    transform: [[f32; 4]; 4],
    plane: [[f32; 4]; 4],
    nan_color: [f32; 4],
    display: DisplayParams,
    size: [f32; 2],
    mode: u32,
    linear: u32,
    data_size: [i32; 3],
    alpha_scale: f32,
    opacity: f32,
    clip: u32,
    pad: [u32; 2],
    bricks: BrickParams,
}

/// Where an image lies in its data: its extent in local units, the map from local to voxel
/// coordinates, and whether points outside the data are transparent.
pub(crate) struct SliceGeometry {
    pub size: [f32; 2],
    pub plane: Mat4,
    pub clip: bool,
}

/// The geometry of `slice` (default: middle plane along axis 0) in data of `shape` (2-D data
/// is one plane deep).
pub(crate) fn slice_geometry(slice: Option<Slice>, shape: &Shape) -> Result<SliceGeometry, String> {
    let [d, h, w] = shape.padded();
    let slice = slice.unwrap_or(Slice::Z(d / 2));
    let axis_plane = |index: usize, extent: usize, name: &str| {
        if index < extent {
            Ok(index as f32 + 0.5)
        } else {
            Err(format!(
                "{name}({index}) is outside shape {shape}: 0 to {} allowed",
                extent - 1
            ))
        }
    };
    let (size, plane, clip) = match slice {
        Slice::Z(k) => {
            let z = axis_plane(k, d, "Z")?;
            (
                [w, h].map(|v| v as f32),
                Mat4::from_translation(Vec3::new(0.0, 0.0, z)),
                false,
            )
        }
        Slice::Y(j) => {
            let y = axis_plane(j, h, "Y")?;
            let m = Mat4::from_cols(Vec4::X, Vec4::Z, Vec4::ZERO, Vec4::new(0.0, y, 0.0, 1.0));
            ([w, d].map(|v| v as f32), m, false)
        }
        Slice::X(i) => {
            let x = axis_plane(i, w, "X")?;
            let m = Mat4::from_cols(Vec4::Y, Vec4::Z, Vec4::ZERO, Vec4::new(x, 0.0, 0.0, 1.0));
            ([h, d].map(|v| v as f32), m, false)
        }
        Slice::Oblique {
            origin,
            u,
            v,
            extent,
        } => {
            let finite = origin
                .iter()
                .chain(&u)
                .chain(&v)
                .chain(&extent)
                .all(|x| x.is_finite());
            if !finite || extent[0] <= 0.0 || extent[1] <= 0.0 {
                return Err(format!(
                    "oblique plane origin {origin:?}, u {u:?}, v {v:?}, extent {extent:?}: values must be finite and the extent positive"
                ));
            }
            let m = Mat4::from_cols(
                Vec3::from(u).extend(0.0),
                Vec3::from(v).extend(0.0),
                Vec4::ZERO,
                Vec3::from(origin).extend(1.0),
            );
            (extent, m, true)
        }
    };
    Ok(SliceGeometry { size, plane, clip })
}

impl ImageParams {
    /// Parameters for drawing `image`, whose texture holds `layout`, placed by `geometry`,
    /// with `transform` from its local coordinates to clip space.
    pub fn new(
        image: &Image,
        layout: &Layout,
        geometry: &SliceGeometry,
        transform: Mat4,
        lut_size: usize,
        bricking: Bricking,
    ) -> Self {
        let [d, h, w] = layout.shape().padded();
        let clim = image.effective_clim();
        ImageParams {
            transform: transform.to_cols_array_2d(),
            plane: geometry.plane.to_cols_array_2d(),
            nan_color: image.nan_color(),
            display: DisplayParams {
                clim: [clim[0] as f32, clim[1] as f32],
                gamma: image.gamma(),
                lut_size: lut_size as u32,
            },
            size: geometry.size,
            mode: match layout.channels() {
                1 => 0,
                2 => 1,
                3 => 2,
                _ => 3,
            },
            linear: u32::from(image.interpolation() == Interpolation::Linear),
            data_size: [w as i32, h as i32, d as i32],
            alpha_scale: alpha_scale(layout.element()),
            opacity: image.opacity(),
            clip: u32::from(geometry.clip),
            pad: [0; 2],
            bricks: bricking.into(),
        }
    }
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

    /// WGSL `fetch` of one texel at voxel coordinates. 3-D data may be split into up to 8
    /// bricks in any grid (8 x 1 x 1 to 2 x 2 x 2): `data` is brick slot 0 and
    /// `brick1`..`brick7` the others, slot `x + cx (y + cy z)` for brick coordinates
    /// (x, y, z) in a grid of (cx, cy, cz); `params.bricks` gives brick size and count. Each texel is loaded from the one brick that holds it, so bricks need no overlap
    /// and interpolation across their borders is seamless.
    fn fetch_wgsl(self, kind: SampleKind) -> String {
        match self {
            TexDim::D2 => "const DATA_3D: bool = false;\nfn fetch(p: vec3<i32>) -> vec4<f32> { return vec4<f32>(textureLoad(data, p.xy, 0)); }\n".into(),
            TexDim::D3 => {
                let mut out = String::from("const DATA_3D: bool = true;\n");
                for slot in 1..BRICK_SLOTS {
                    out += &format!(
                        "@group(0) @binding({}) var brick{slot}: texture_3d<{}>;\n",
                        brick_binding(slot),
                        kind.wgsl()
                    );
                }
                out += "fn fetch(p: vec3<i32>) -> vec4<f32> {\n";
                out += "    let b = min(p / params.bricks.size, params.bricks.count - vec3<i32>(1));\n";
                out += "    let q = p - b * params.bricks.size;\n";
                out += "    let c = params.bricks.count;\n";
                out += "    switch (b.x + c.x * (b.y + c.y * b.z)) {\n";
                out += "        case 0: { return vec4<f32>(textureLoad(data, q, 0)); }\n";
                for slot in 1..BRICK_SLOTS - 1 {
                    out += &format!("        case {slot}: {{ return vec4<f32>(textureLoad(brick{slot}, q, 0)); }}\n");
                }
                out += &format!(
                    "        default: {{ return vec4<f32>(textureLoad(brick{}, q, 0)); }}\n",
                    BRICK_SLOTS - 1
                );
                out += "    }\n}\n";
                out
            }
        }
    }
}

/// Brick slots of 3-D textures in a bind group (8 bricks in any grid).
pub(crate) const BRICK_SLOTS: usize = 8;

/// The binding of brick slot `slot` (slot 0 is binding 1, the others follow the colormap).
pub(crate) fn brick_binding(slot: usize) -> u32 {
    if slot == 0 {
        1
    } else {
        2 + slot as u32
    }
}

/// The colormap's layout entry (binding 2).
pub(crate) fn lut_entry() -> wgpu::BindGroupLayoutEntry {
    wgpu::BindGroupLayoutEntry {
        binding: 2,
        visibility: wgpu::ShaderStages::FRAGMENT,
        ty: wgpu::BindingType::Texture {
            sample_type: wgpu::TextureSampleType::Float { filterable: false },
            view_dimension: wgpu::TextureViewDimension::D2,
            multisampled: false,
        },
        count: None,
    }
}

/// Layout entries of the data textures: one 2-D texture, or the 3-D brick slots.
pub(crate) fn data_texture_entries(
    kind: SampleKind,
    dim: TexDim,
    visibility: wgpu::ShaderStages,
) -> Vec<wgpu::BindGroupLayoutEntry> {
    let slots = match dim {
        TexDim::D2 => 1,
        TexDim::D3 => BRICK_SLOTS,
    };
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

/// `Bricks` in the shaders: brick size and count per axis, `[x, y, z]`.
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, bytemuck::Pod, bytemuck::Zeroable)]
pub(crate) struct BrickParams {
    size: [i32; 3],
    pad0: u32,
    count: [i32; 3],
    pad1: u32,
}

impl From<Bricking> for BrickParams {
    fn from(b: Bricking) -> Self {
        BrickParams {
            size: b.size.map(|v| v as i32),
            pad0: 0,
            count: b.count.map(|v| v as i32),
            pad1: 0,
        }
    }
}

/// Full WGSL source of a visual's shader for one texture kind and dimension.
pub(crate) fn shader_source(body: &str, kind: SampleKind, dim: TexDim) -> String {
    let texture = match dim {
        TexDim::D2 => "texture_2d",
        TexDim::D3 => "texture_3d",
    };
    let body = body
        .replace("TEXTURE_DIM", texture)
        .replace("SAMPLE_T", kind.wgsl());
    format!("{COMMON}\n{}\n{body}", dim.fetch_wgsl(kind))
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
}

/// Held while a pipeline is created: renderers on other threads share the device, and
/// NVIDIA's Vulkan driver 580 was seen to crash (once, in its shader compiler library) while
/// several threads created pipelines on one device at the same time. Pipelines are created
/// once each, so the lock costs nothing in steady state.
pub(crate) fn pipeline_creation_lock() -> parking_lot::MutexGuard<'static, ()> {
    static LOCK: parking_lot::Mutex<()> = parking_lot::Mutex::new(());
    LOCK.lock()
}

/// Builds a render pipeline from `spec`.
pub(crate) fn render_pipeline(
    device: &wgpu::Device,
    spec: PipelineSpec<'_>,
) -> wgpu::RenderPipeline {
    let _serial = pipeline_creation_lock();
    device.create_render_pipeline(&wgpu::RenderPipelineDescriptor {
        label: Some(spec.label),
        layout: Some(spec.layout),
        vertex: wgpu::VertexState {
            module: spec.module,
            entry_point: Some("vs_main"),
            compilation_options: Default::default(),
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
            compilation_options: Default::default(),
            targets: spec.targets,
        }),
        multiview_mask: None,
        cache: None,
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

/// The image pipelines of one texture kind and dimension: the shader, and a pipeline per
/// pass kind and translucency, each built the first time a frame needs it. Opaque images
/// write depth; images with opacity below 1 only test it, so what is behind them stays
/// visible.
struct ImagePipeline {
    layout: wgpu::BindGroupLayout,
    pipeline_layout: wgpu::PipelineLayout,
    module: wgpu::ShaderModule,
    pipelines: HashMap<(PassKind, bool), wgpu::RenderPipeline>,
}

pub(crate) struct ImagePipelines {
    by_kind: HashMap<(SampleKind, TexDim), ImagePipeline>,
}

impl ImagePipelines {
    /// No pipeline yet: each is built on first use (shader compilation is slow on some
    /// drivers, and most programs use few of them).
    pub fn new() -> Self {
        ImagePipelines {
            by_kind: HashMap::new(),
        }
    }

    /// Builds the bind group layout and shader for `kind` and `dim` if they do not exist yet.
    pub fn ensure(&mut self, device: &wgpu::Device, kind: SampleKind, dim: TexDim) {
        self.by_kind
            .entry((kind, dim))
            .or_insert_with(|| Self::build(device, kind, dim));
    }

    fn build(device: &wgpu::Device, kind: SampleKind, dim: TexDim) -> ImagePipeline {
        let mut entries = vec![
            wgpu::BindGroupLayoutEntry {
                binding: 0,
                visibility: wgpu::ShaderStages::VERTEX_FRAGMENT,
                ty: wgpu::BindingType::Buffer {
                    ty: wgpu::BufferBindingType::Uniform,
                    has_dynamic_offset: false,
                    min_binding_size: wgpu::BufferSize::new(size_of::<ImageParams>() as u64),
                },
                count: None,
            },
            lut_entry(),
        ];
        entries.extend(data_texture_entries(
            kind,
            dim,
            wgpu::ShaderStages::FRAGMENT,
        ));
        let layout = device.create_bind_group_layout(&wgpu::BindGroupLayoutDescriptor {
            label: Some("sluice image"),
            entries: &entries,
        });
        let module = device.create_shader_module(wgpu::ShaderModuleDescriptor {
            label: Some("sluice image shader"),
            source: wgpu::ShaderSource::Wgsl(shader_source(SHADER, kind, dim).into()),
        });
        let pipeline_layout = device.create_pipeline_layout(&wgpu::PipelineLayoutDescriptor {
            label: Some("sluice image"),
            bind_group_layouts: &[Some(&layout)],
            immediate_size: 0,
        });
        ImagePipeline {
            layout,
            pipeline_layout,
            module,
            pipelines: HashMap::new(),
        }
    }

    pub fn layout(&self, kind: SampleKind, dim: TexDim) -> &wgpu::BindGroupLayout {
        &self.by_kind[&(kind, dim)].layout
    }

    /// Builds the pipeline for an image of `opacity` in a `pass` if it does not exist yet
    /// (after [`ImagePipelines::ensure`]).
    pub fn ensure_pass(
        &mut self,
        device: &wgpu::Device,
        (kind, dim): (SampleKind, TexDim),
        pass: PassKind,
        opacity: f32,
    ) {
        let p = self.by_kind.get_mut(&(kind, dim)).expect("ensured");
        let depth_write = opacity >= 1.0;
        p.pipelines.entry((pass, depth_write)).or_insert_with(|| {
            render_pipeline(
                device,
                PipelineSpec {
                    label: "sluice image",
                    layout: &p.pipeline_layout,
                    module: &p.module,
                    topology: wgpu::PrimitiveTopology::TriangleList,
                    depth: pass.depth(depth_write),
                    fragment_entry: "fs_main",
                    targets: &pass.targets(depth_write),
                },
            )
        });
    }

    /// The pipeline for an image of `opacity` in a `pass` (after
    /// [`ImagePipelines::ensure_pass`]).
    pub fn pipeline(
        &self,
        (kind, dim): (SampleKind, TexDim),
        pass: PassKind,
        opacity: f32,
    ) -> &wgpu::RenderPipeline {
        &self.by_kind[&(kind, dim)].pipelines[&(pass, opacity >= 1.0)]
    }
}
