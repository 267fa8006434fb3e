//! Partial redraws: what a target last showed, and which screen rectangles of a flat frame
//! changed since.

use crate::colormap::ColormapKey;
use crate::pipeline::PipelineKey;

/// The screen rectangle `[x0, y0, x1, y1]` (pixels, y down) of the part of a 2-D image that
/// `region`'s texels can affect under `mvp`: the region widened by one texel on each side
/// (linear interpolation reads neighbours). `None` if a corner is behind the camera.
pub(crate) fn screen_rect(
    mvp: glam::Mat4,
    region: &sluice_core::Region,
    [w, h]: [u32; 2],
) -> Option<[f32; 4]> {
    let [_, y, x] = region.origin.map(|v| v as f32);
    let [_, rh, rw] = region.size.map(|v| v as f32);
    let (lx0, ly0, lx1, ly1) = (x - 1.0, y - 1.0, x + rw + 1.0, y + rh + 1.0);
    let mut out = [
        f32::INFINITY,
        f32::INFINITY,
        f32::NEG_INFINITY,
        f32::NEG_INFINITY,
    ];
    for (lx, ly) in [(lx0, ly0), (lx1, ly0), (lx0, ly1), (lx1, ly1)] {
        let clip = mvp * glam::Vec4::new(lx, ly, 0.0, 1.0);
        if clip.w <= 0.0 || !clip.w.is_finite() {
            return None;
        }
        let sx = (clip.x / clip.w + 1.0) * 0.5 * w as f32;
        let sy = (1.0 - clip.y / clip.w) * 0.5 * h as f32;
        if !sx.is_finite() || !sy.is_finite() {
            return None;
        }
        out = [
            out[0].min(sx),
            out[1].min(sy),
            out[2].max(sx),
            out[3].max(sy),
        ];
    }
    Some(out)
}

/// Everything that decides a flat frame's pixels besides texture contents.
#[derive(Debug, PartialEq)]
pub(crate) struct FrameSignature {
    pub renderer: u64,
    pub background: [u32; 4],
    pub draws: Vec<DrawSignature>,
}

#[derive(Debug, PartialEq)]
pub(crate) struct DrawSignature {
    pub visual: u64,
    /// The uniform block (transform, display settings, slice).
    pub params: Vec<u8>,
    pub proxy: u64,
    pub generation: u64,
    pub colormap: ColormapKey,
    pub pipeline: PipelineKey,
}

/// What a target last showed: the frame's signature and the content value of each texture.
#[derive(Debug)]
pub(crate) struct DrawnFrame {
    pub signature: FrameSignature,
    pub contents: Vec<(u64, u64)>,
}

/// A scissored draw of the background colour, for partial redraws.
pub(crate) struct ClearRect {
    pub pipeline: wgpu::RenderPipeline,
    pub uniform: wgpu::Buffer,
    pub group: wgpu::BindGroup,
    pub color: [f32; 4],
}

impl ClearRect {
    pub fn new(device: &wgpu::Device) -> Self {
        let module = device.create_shader_module(wgpu::ShaderModuleDescriptor {
            label: Some("sluice clear rect"),
            source: wgpu::ShaderSource::Wgsl(
                "@group(0) @binding(0) var<uniform> color: vec4<f32>;
@vertex fn vs(@builtin(vertex_index) i: u32) -> @builtin(position) vec4<f32> {
    let p = vec2<f32>(f32((i << 1u) & 2u), f32(i & 2u));
    return vec4<f32>(p * 2.0 - 1.0, 0.0, 1.0);
}
@fragment fn fs() -> @location(0) vec4<f32> { return color; }
"
                .into(),
            ),
        });
        let serial = crate::pipeline::pipeline_creation_lock();
        let pipeline = device.create_render_pipeline(&wgpu::RenderPipelineDescriptor {
            label: Some("sluice clear rect"),
            layout: None,
            vertex: wgpu::VertexState {
                module: &module,
                entry_point: Some("vs"),
                compilation_options: Default::default(),
                buffers: &[],
            },
            primitive: wgpu::PrimitiveState::default(),
            depth_stencil: None,
            multisample: wgpu::MultisampleState::default(),
            fragment: Some(wgpu::FragmentState {
                module: &module,
                entry_point: Some("fs"),
                compilation_options: Default::default(),
                // The flat pass's attachments: the colour target, no depth as colour.
                targets: &[Some(crate::target_format::TARGET_FORMAT.into()), None],
            }),
            multiview_mask: None,
            cache: None,
        });
        drop(serial);
        let uniform = device.create_buffer(&wgpu::BufferDescriptor {
            label: Some("sluice clear rect colour"),
            size: 16,
            usage: wgpu::BufferUsages::UNIFORM | wgpu::BufferUsages::COPY_DST,
            mapped_at_creation: false,
        });
        let group = device.create_bind_group(&wgpu::BindGroupDescriptor {
            label: Some("sluice clear rect"),
            layout: &pipeline.get_bind_group_layout(0),
            entries: &[wgpu::BindGroupEntry {
                binding: 0,
                resource: uniform.as_entire_binding(),
            }],
        });
        ClearRect {
            pipeline,
            uniform,
            group,
            // Never a background (NaN): the first use writes the colour.
            color: [f32::NAN; 4],
        }
    }
}

/// The depth (z / w in clip space) of the rectangle `[0, size]` in the plane z = 0 under
/// `mvp` when it is the same at all four corners and in front of the camera: then it is the
/// same everywhere on the rectangle.
pub(crate) fn flat_depth(mvp: glam::Mat4, size: [f32; 2]) -> Option<f32> {
    let [w, h] = size;
    let mut depth = None;
    for (x, y) in [(0.0, 0.0), (w, 0.0), (0.0, h), (w, h)] {
        let clip = mvp * glam::Vec4::new(x, y, 0.0, 1.0);
        if clip.w <= 0.0 || !clip.w.is_finite() {
            return None;
        }
        let z = clip.z / clip.w;
        match depth {
            None => depth = Some(z),
            Some(d) if d == z => {}
            Some(_) => return None,
        }
    }
    depth
}
