//! The GPU side of [`crate::Image`]: uniform block, bind group layouts and pipelines.

use std::collections::HashMap;

use glam::{Mat4, Vec3, Vec4};
use sluice_core::{Layout, Shape};

use crate::bricking::{BrickParams, Bricking};
use crate::format::SampleKind;
use crate::pipeline::{
    alpha_scale, data_texture_entries, image_mode, render_pipeline, sampled_shader_source,
    uniform_entry, DisplayParams, ImageVariant, PassKind, PipelineSpec, ShaderParts, TexDim,
};
use crate::sampling::{hardware_filtered, linear_sampler, sampler_entry};
use crate::target_format::TARGET_FORMAT;
use crate::visual::{Image, Interpolation, Slice};
use sluice_core::pieces::MAX_DAMAGE_RECTS;
const SHADER: &str = include_str!("shaders/image.wgsl");

/// The uniform block of `shaders/image.wgsl` (`Params`), 240 bytes.
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, bytemuck::Pod, bytemuck::Zeroable)]
pub(crate) struct ImageParams {
    transform: [[f32; 4]; 4],
    plane: [[f32; 4]; 4],
    nan_color: [f32; 4],
    display: DisplayParams,
    size: [f32; 2],
    pub(crate) mode: u32,
    pub(crate) linear: u32,
    data_size: [i32; 3],
    alpha_scale: f32,
    opacity: f32,
    pad: [u32; 3],
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
            mode: image_mode(layout.channels()),
            linear: u32::from(image.interpolation() == Interpolation::Linear),
            data_size: [w as i32, h as i32, d as i32],
            alpha_scale: alpha_scale(layout.element()),
            opacity: image.opacity(),
            pad: [0; 3],
            bricks: bricking.into(),
        }
    }
}

/// The image pipelines of one texture kind, dimension and arrangement: the shader, and a pipeline per
/// pass kind, translucency and blending, each built the first time a frame needs it. Opaque
/// images write depth; images with opacity below 1 only test it, so what is behind them
/// stays visible.
struct ImagePipeline {
    layout: wgpu::BindGroupLayout,
    pipeline_layout: wgpu::PipelineLayout,
    module: wgpu::ShaderModule,
    pipelines: HashMap<(PassKind, bool, Blend), wgpu::RenderPipeline>,
    /// The compute path's pipeline ([`crate::ImageDraw::Compute`]), built on first use.
    compute: Option<wgpu::ComputePipeline>,
}

/// Whether an image's colour is blended over what is under it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub(crate) enum Blend {
    /// Alpha blending: the colour may have an alpha below 1.
    Alpha,
    /// Every fragment the image keeps is opaque (`draw::image::writes_opaque`): its colour
    /// replaces what is under it, which is what the blend gives for an alpha of 1. A CPU
    /// device then skips reading the target back for every fragment (lavapipe: 4.85 against
    /// 5.50 ms for a 1024^2 image draw).
    Replace,
}

/// Which image shader: texture kind, dimension, whether the data is in one texture, and the
/// channel mode, interpolation and gamma curve compiled in.
pub(crate) type ImageKey = (SampleKind, TexDim, bool, ImageVariant);

pub(crate) struct ImagePipelines {
    by_kind: HashMap<ImageKey, ImagePipeline>,
    /// The group 0 and pipeline layouts, one per texture kind, dimension and arrangement,
    /// shared by the variants: a visual's bind group serves every variant it switches to.
    layouts: HashMap<(SampleKind, TexDim, bool), (wgpu::BindGroupLayout, wgpu::PipelineLayout)>,
    /// Group 1 of every image pipeline (`pipeline::colormap_layout`).
    colormap_layout: wgpu::BindGroupLayout,
    /// Group 2 of the compute path: the frame's parameters and the target as storage
    /// ([`FrameParams`]).
    frame_layout: wgpu::BindGroupLayout,
    /// Bound where the hardware interpolates (`sampling::hardware_filtered`).
    sampler: Option<wgpu::Sampler>,
}

impl ImagePipelines {
    /// No pipeline yet: each is built on first use (shader compilation is slow on some
    /// drivers, and most programs use few of them).
    pub fn new(device: &wgpu::Device, colormap_layout: wgpu::BindGroupLayout) -> Self {
        let frame_layout = device.create_bind_group_layout(&wgpu::BindGroupLayoutDescriptor {
            label: Some("sluice image frame"),
            entries: &[
                uniform_entry(size_of::<FrameParams>(), wgpu::ShaderStages::COMPUTE),
                wgpu::BindGroupLayoutEntry {
                    binding: 1,
                    visibility: wgpu::ShaderStages::COMPUTE,
                    ty: wgpu::BindingType::StorageTexture {
                        access: wgpu::StorageTextureAccess::WriteOnly,
                        format: TARGET_FORMAT,
                        view_dimension: wgpu::TextureViewDimension::D2,
                    },
                    count: None,
                },
            ],
        });
        ImagePipelines {
            by_kind: HashMap::new(),
            layouts: HashMap::new(),
            colormap_layout,
            frame_layout,
            sampler: None,
        }
    }

    /// Group 2 of the compute path, for targets to make their bind group with.
    pub fn frame_layout(&self) -> &wgpu::BindGroupLayout {
        &self.frame_layout
    }

    /// Builds the bind group layout and shader for `key` if they do not exist yet.
    pub fn ensure(&mut self, device: &wgpu::Device, key: ImageKey) {
        if hardware_filtered(key.0, key.2) && self.sampler.is_none() {
            self.sampler = Some(linear_sampler(device));
        }
        if self.by_kind.contains_key(&key) {
            return;
        }
        let built = self.build(device, key);
        self.by_kind.insert(key, built);
    }

    /// The linear sampler (after [`ImagePipelines::ensure`] of a filtered key).
    pub fn sampler(&self) -> &wgpu::Sampler {
        self.sampler
            .as_ref()
            .expect("made with the first filtered pipeline")
    }

    fn build(
        &mut self,
        device: &wgpu::Device,
        (kind, dim, one_brick, variant): ImageKey,
    ) -> ImagePipeline {
        // Visible to compute too: the compute path binds the same group.
        let shading = wgpu::ShaderStages::FRAGMENT | wgpu::ShaderStages::COMPUTE;
        let mut entries = vec![uniform_entry(
            size_of::<ImageParams>(),
            wgpu::ShaderStages::VERTEX | shading,
        )];
        entries.extend(data_texture_entries(kind, dim, one_brick, shading));
        if hardware_filtered(kind, one_brick) {
            entries.push(sampler_entry(shading));
        }
        let source = variant_source(
            &sampled_shader_source(SHADER, kind, dim, one_brick, true),
            variant,
        );
        if let Some((layout, pipeline_layout)) = self.layouts.get(&(kind, dim, one_brick)) {
            return ImagePipeline {
                layout: layout.clone(),
                pipeline_layout: pipeline_layout.clone(),
                module: device.create_shader_module(wgpu::ShaderModuleDescriptor {
                    label: Some("sluice image"),
                    source: wgpu::ShaderSource::Wgsl(source.into()),
                }),
                pipelines: HashMap::new(),
                compute: None,
            };
        }
        let parts = ShaderParts::new(
            device,
            "sluice image",
            &entries,
            source,
            &[&self.colormap_layout],
        );
        self.layouts.insert(
            (kind, dim, one_brick),
            (parts.layout.clone(), parts.pipeline_layout.clone()),
        );
        ImagePipeline {
            layout: parts.layout,
            pipeline_layout: parts.pipeline_layout,
            module: parts.module,
            pipelines: HashMap::new(),
            compute: None,
        }
    }

    pub fn layout(&self, key: ImageKey) -> &wgpu::BindGroupLayout {
        &self.by_kind[&key].layout
    }

    /// Builds the pipeline for an image of `opacity` in a `pass`, blended by `blend`, if it
    /// does not exist yet (after [`ImagePipelines::ensure`]).
    pub fn ensure_pass(
        &mut self,
        device: &wgpu::Device,
        key: ImageKey,
        pass: PassKind,
        opacity: f32,
        blend: Blend,
    ) {
        let p = self.by_kind.get_mut(&key).expect("ensured");
        let depth_write = opacity >= 1.0;
        p.pipelines
            .entry((pass, depth_write, blend))
            .or_insert_with(|| {
                let mut targets = pass.targets(depth_write);
                if blend == Blend::Replace {
                    if let Some(color) = targets[0].as_mut() {
                        color.blend = None;
                    }
                }
                render_pipeline(
                    device,
                    PipelineSpec {
                        label: "sluice image",
                        constants: &key.3.constants(),
                        layout: &p.pipeline_layout,
                        module: &p.module,
                        topology: wgpu::PrimitiveTopology::TriangleList,
                        depth: pass.depth(depth_write),
                        fragment_entry: "fs_main",
                        targets: &targets,
                    },
                )
            });
    }

    /// The pipeline for an image of `opacity` in a `pass`, blended by `blend` (after
    /// [`ImagePipelines::ensure_pass`]).
    pub fn pipeline(
        &self,
        key: ImageKey,
        pass: PassKind,
        opacity: f32,
        blend: Blend,
    ) -> &wgpu::RenderPipeline {
        &self.by_kind[&key].pipelines[&(pass, opacity >= 1.0, blend)]
    }

    /// Builds the compute path's pipeline for `key` if it does not exist yet (after
    /// [`ImagePipelines::ensure`]).
    pub fn ensure_compute(&mut self, device: &wgpu::Device, key: ImageKey) {
        let p = self.by_kind.get_mut(&key).expect("ensured");
        if p.compute.is_some() {
            return;
        }
        let layout = device.create_pipeline_layout(&wgpu::PipelineLayoutDescriptor {
            label: Some("sluice image compute"),
            bind_group_layouts: &[
                Some(&p.layout),
                Some(&self.colormap_layout),
                Some(&self.frame_layout),
            ],
            immediate_size: 0,
        });
        let _serial = crate::pipeline::pipeline_creation_lock();
        p.compute = Some(
            device.create_compute_pipeline(&wgpu::ComputePipelineDescriptor {
                label: Some("sluice image compute"),
                layout: Some(&layout),
                module: &p.module,
                entry_point: Some("cs_main"),
                compilation_options: wgpu::PipelineCompilationOptions {
                    constants: &key.3.constants(),
                    ..Default::default()
                },
                cache: crate::pipeline_cache::for_pipeline(device).as_ref(),
            }),
        );
    }

    /// The compute path's pipeline for `key` (after [`ImagePipelines::ensure_compute`]).
    pub fn compute_pipeline(&self, key: ImageKey) -> &wgpu::ComputePipeline {
        self.by_kind[&key].compute.as_ref().expect("ensured")
    }
}

/// The image shader `sampled` with `variant`'s constants declared.
fn variant_source(sampled: &str, variant: ImageVariant) -> String {
    format!(
        "const IMAGE_MODE: u32 = {}u;\nconst IMAGE_LINEAR: bool = {};\nconst IMAGE_CLIP: bool = {};\nconst MAX_RECTS: u32 = {MAX_DAMAGE_RECTS}u;\n{sampled}",
        variant.mode, variant.linear, variant.clip
    )
}

/// The uniform block of the compute path (`Frame` in `shaders/image.wgsl`), 176 bytes: where
/// the image lies on the target and which pixels to draw.
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, bytemuck::Pod, bytemuck::Zeroable)]
pub(crate) struct FrameParams {
    to_local: [[f32; 4]; 3],
    clip_z: [f32; 4],
    clip_w: [f32; 4],
    background: [f32; 4],
    rects: [[u32; 4]; MAX_DAMAGE_RECTS],
    target_size: [f32; 2],
    count: u32,
    blend: u32,
}

impl FrameParams {
    /// The parameters of drawing an image whose local coordinates `transform` takes to clip
    /// space onto a target of `size` pixels over `background`, in `rects` (at most
    /// [`MAX_DAMAGE_RECTS`], `[x, y, width, height]`); `blend`: alpha blending. Where the
    /// image's plane is seen edge-on it covers no pixel: `to_local` is then zero, which the
    /// shader takes for "background only".
    pub fn new(
        transform: Mat4,
        size: [u32; 2],
        background: [f32; 4],
        rects: &[[u32; 4]],
        blend: bool,
    ) -> Self {
        // A local point (x, y, 0, 1) lands at clip (X, Y, Z, W) = x c0 + y c1 + c3, so
        // (X, Y, W) = A (x, y, 1) with A the rows x, y, w of columns 0, 1 and 3; its
        // inverse takes (ndc x, ndc y, 1) back to the local point, homogeneous. In f64: a
        // fitted image's inverse is then exact wherever the forward map is.
        let m = transform.as_dmat4();
        let a = glam::DMat3::from_cols(
            glam::DVec3::new(m.x_axis.x, m.x_axis.y, m.x_axis.w),
            glam::DVec3::new(m.y_axis.x, m.y_axis.y, m.y_axis.w),
            glam::DVec3::new(m.w_axis.x, m.w_axis.y, m.w_axis.w),
        );
        let det = a.determinant();
        let inv = if det != 0.0 && det.is_finite() {
            a.inverse().as_mat3()
        } else {
            glam::Mat3::ZERO
        };
        let row = |i: usize| {
            let r = transform.row(i);
            [r.x, r.y, r.z, r.w]
        };
        let mut packed = [[0u32; 4]; MAX_DAMAGE_RECTS];
        for (to, from) in packed.iter_mut().zip(rects) {
            *to = *from;
        }
        FrameParams {
            to_local: [inv.x_axis, inv.y_axis, inv.z_axis].map(|c| [c.x, c.y, c.z, 0.0]),
            clip_z: row(2),
            clip_w: row(3),
            background,
            rects: packed,
            target_size: size.map(|v| v as f32),
            count: rects.len().min(MAX_DAMAGE_RECTS) as u32,
            blend: u32::from(blend),
        }
    }

    /// Workgroups (8 x 8 pixels) covering the largest rectangle, one layer per rectangle.
    pub fn workgroups(&self) -> [u32; 3] {
        let rects = &self.rects[..self.count as usize];
        let w = rects.iter().map(|r| r[2]).max().unwrap_or(0);
        let h = rects.iter().map(|r| r[3]).max().unwrap_or(0);
        [w.div_ceil(8), h.div_ceil(8), self.count]
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The uniform blocks are the sizes `shaders/image.wgsl` gives `Params` and `Frame` under
    /// WGSL's uniform layout (a mismatch would only show when a pipeline is made).
    #[test]
    fn uniform_blocks_have_the_shader_sizes() {
        assert_eq!(size_of::<ImageParams>(), 240);
        assert_eq!(size_of::<FrameParams>(), 176);
        let module = wgpu::naga::front::wgsl::parse_str(&variant_source(
            &sampled_shader_source(SHADER, SampleKind::Float, TexDim::D2, true, true),
            ImageVariant {
                mode: 0,
                linear: false,
                gamma: false,
                clip: false,
            },
        ))
        .unwrap();
        let mut layouter = wgpu::naga::proc::Layouter::default();
        layouter.update(module.to_ctx()).unwrap();
        for (name, rust) in [
            ("Params", size_of::<ImageParams>()),
            ("Frame", size_of::<FrameParams>()),
        ] {
            let (handle, _) = module
                .types
                .iter()
                .find(|(_, t)| t.name.as_deref() == Some(name))
                .unwrap_or_else(|| panic!("no struct {name} in image.wgsl"));
            assert_eq!(layouter[handle].size as usize, rust, "{name}");
        }
    }

    /// Every image shader variant (sample kinds, 2-D and 3-D, one texture or bricks, channel
    /// modes, nearest and linear, with and without the gamma curve and the clip to the data)
    /// parses and validates
    /// (naga, no GPU needed).
    #[test]
    fn every_image_variant_compiles() {
        for kind in SampleKind::ALL {
            for dim in [TexDim::D2, TexDim::D3] {
                for one_brick in [true, false] {
                    let sampled = sampled_shader_source(SHADER, kind, dim, one_brick, true);
                    for mode in 0..4 {
                        for linear in [false, true] {
                            for (gamma, clip) in
                                [(false, false), (true, false), (false, true), (true, true)]
                            {
                                let variant = ImageVariant {
                                    mode,
                                    linear,
                                    gamma,
                                    clip,
                                };
                                let what = format!(
                                    "{kind:?}, {dim:?}, one brick {one_brick}, {variant:?}"
                                );
                                crate::pipeline::assert_valid_with_constants(
                                    &variant_source(&sampled, variant),
                                    &variant.constants(),
                                    &[
                                        (wgpu::naga::ShaderStage::Vertex, "vs_main"),
                                        (wgpu::naga::ShaderStage::Fragment, "fs_main"),
                                        (wgpu::naga::ShaderStage::Compute, "cs_main"),
                                    ],
                                    &what,
                                );
                            }
                        }
                    }
                }
            }
        }
    }
}
