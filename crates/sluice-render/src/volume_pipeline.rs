//! The GPU side of [`crate::Volume`]: uniform block and pipelines.

use std::collections::HashMap;

use glam::Mat4;
use sluice_core::Layout;

use crate::bricking::{BrickParams, Bricking};
use crate::colormap::Colormap;
use crate::format::SampleKind;
use crate::host_grid::GridSummary;
use crate::pipeline::{
    data_texture_entries, float_texture_entry, gamma_constants, gamma_curve, render_pipeline,
    sampled_shader_source, uniform_entry, DisplayParams, PipelineSpec, TexDim,
};
use crate::sampling::{hardware_filtered, linear_sampler, sampler_entry};
use crate::target_format::{MARCHED_FORMAT, TARGET_FORMAT};
use crate::visual::{Interpolation, Volume, VolumeMode};
use crate::volume_grid::{grid_entry, MinMaxGrid, MinMaxGrids, GRID_BINDING, GRID_CELL};
use crate::volume_pairs::{pairs_entry, ZPairsSet};

const SHADER: &str = include_str!("shaders/volume.wgsl");
const COMPOSITE: &str = include_str!("shaders/volume_composite.wgsl");

/// Upper bound of samples along one ray (a 4096-voxel diagonal at half-voxel steps).
const MAX_STEPS: u32 = 16384;

/// The uniform block of `shaders/volume.wgsl` (`Params`), 256 bytes.
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, bytemuck::Pod, bytemuck::Zeroable)]
pub(crate) struct VolumeParams {
    mvp: [[f32; 4]; 4],
    inv_mvp: [[f32; 4]; 4],
    display: DisplayParams,
    data_size: [i32; 3],
    mode: u32,
    viewport: [f32; 2],
    step: f32,
    linear: u32,
    attenuation: f32,
    threshold: f32,
    opacity: f32,
    max_steps: u32,
    bricks: BrickParams,
    grid_count: [i32; 3],
    grid_cell: i32,
    zero_alpha_below: f32,
    mip_stop: f32,
    pad: [u32; 2],
}

impl VolumeParams {
    pub fn new(
        volume: &Volume,
        layout: &Layout,
        mvp: Mat4,
        viewport: [u32; 2],
        lut_size: usize,
        bricking: Bricking,
        grid: &MinMaxGrid,
    ) -> Self {
        let [d, h, w] = layout.shape().padded();
        let clim = volume.effective_clim();
        let clim = [clim[0] as f32, clim[1] as f32];
        let (mode, attenuation, threshold) = match volume.mode() {
            VolumeMode::Mip => (0, 0.0, 0.0),
            VolumeMode::Translucent { attenuation } => (1, attenuation, 0.0),
            VolumeMode::Iso { threshold } => (2, 0.0, threshold as f32),
        };
        VolumeParams {
            mvp: mvp.to_cols_array_2d(),
            inv_mvp: mvp.inverse().to_cols_array_2d(),
            display: DisplayParams {
                clim,
                gamma: volume.gamma(),
                lut_size: lut_size as u32,
            },
            data_size: [w as i32, h as i32, d as i32],
            mode,
            viewport: [viewport[0] as f32, viewport[1] as f32],
            step: volume.shader_step(),
            linear: u32::from(volume.interpolation() == Interpolation::Linear),
            attenuation,
            threshold,
            opacity: volume.opacity(),
            max_steps: MAX_STEPS,
            bricks: bricking.into(),
            grid_count: grid.count().map(|c| c as i32),
            grid_cell: GRID_CELL as i32,
            zero_alpha_below: zero_alpha_below(volume.colormap()),
            // No sample exceeds the data's largest value (a linear sample is a weighted
            // mean of voxels), so rays may stop there as well as at the higher contrast
            // limit, past which every value takes the same colormap end (the high one, or
            // the low one where the limits are inverted to invert the colormap).
            mip_stop: {
                let top = clim[0].max(clim[1]);
                grid.summary().map_or(top, |s| top.min(s.highest))
            },
            pad: [0; 2],
        }
    }
}

/// The normalized value below which `colormap`'s entries all have alpha 0 (0 when the first
/// has some alpha): translucent rays skip cells whose values all lie below it. Half an
/// entry short of the first entry with alpha, so rounding in the shader's index cannot
/// skip that entry.
fn zero_alpha_below(colormap: &Colormap) -> f32 {
    let entries = colormap.entries();
    let clear = entries.iter().take_while(|e| e[3] == 0).count();
    if clear == entries.len() {
        // Nothing has alpha: every value is clear.
        2.0
    } else if clear == 0 {
        0.0
    } else {
        (clear as f32 - 0.5) / entries.len() as f32
    }
}

/// Whether the min/max grid can spare `volume`'s rays any sample, given what the grid says
/// about the data (`summary`, known where the grid was computed on the host: CPU devices
/// after a whole upload). It cannot where no cell can be skipped in the volume's mode: for a
/// maximum intensity projection, where every cell's maximum is the data's maximum (rays
/// then stop at it, `VolumeParams::mip_stop`, as the grid would skip the rest) and none
/// lies below the low contrast limit; translucent, where no cell maps wholly to colormap
/// entries of alpha 0; an isosurface, where every cell reaches the threshold; and in no
/// mode where a cell holds only NaN. Uniform noise is such data (lavapipe's march of the
/// peers' 256^3 noise without the lookups, in alternated runs: docs/measurements.md).
/// Either marcher gives the same pixels: a skipped cell's samples could not change the
/// ray's colour.
pub(crate) fn grid_may_skip(volume: &Volume, summary: Option<GridSummary>) -> bool {
    let Some(s) = summary else {
        return true;
    };
    if s.any_empty {
        return true;
    }
    let clim = volume.effective_clim();
    let [lo, hi] = [clim[0] as f32, clim[1] as f32];
    match volume.mode() {
        VolumeMode::Mip => s.lowest_high < s.highest || s.lowest_high < lo.min(hi),
        // Inverted limits (`lo > hi`) map a cell's low end to its highest colormap entry,
        // which the summary does not bound: the grid marcher, whose skips are exact.
        VolumeMode::Translucent { .. } if lo > hi => true,
        VolumeMode::Translucent { .. } => {
            // The normalized value of the lowest cell maximum, as `normalize_value` gives
            // it before the gamma curve (which keeps 0 at 0 and is increasing).
            let span = hi - lo;
            let top = if span == 0.0 {
                if s.lowest_high >= hi {
                    1.0
                } else {
                    0.0
                }
            } else {
                ((s.lowest_high - lo) / span).clamp(0.0, 1.0)
            };
            let top = if gamma_curve(volume.gamma()) && top > 0.0 {
                top.powf(volume.gamma())
            } else {
                top
            };
            top == 0.0 || top < zero_alpha_below(volume.colormap())
        }
        VolumeMode::Iso { threshold } => s.lowest_high < threshold as f32,
    }
}

/// Which marcher layout: texture kind, and whether the data is in one texture (not in
/// bricks).
pub(crate) type VolumeKey = (SampleKind, bool);

/// What a marcher is compiled for besides its texture: the mode (`VolumeParams::mode`) and
/// the interpolation, given to the shader as the constants `MODE` and `LINEAR`. On CPU
/// devices (lavapipe) both sides of a branch run for every invocation whatever a uniform
/// says, so a marcher that chose by uniform paid for all three modes' loops and for a nearest
/// fetch beside every linear sample (2.5x the time of the specialised one, with the chunked
/// grid lookups, on the peers' 256^3 MIP). On GPUs a uniform branch is cheap; the constants
/// cost a pipeline per variant in use, built the first time a volume needs it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub(crate) struct MarchVariant {
    /// 0: maximum intensity; 1: translucent; 2: isosurface.
    pub mode: u32,
    /// Trilinear (not nearest).
    pub linear: bool,
    /// Whether the gamma curve applies ([`gamma_curve`]; the translucent march normalizes
    /// every sample).
    pub gamma: bool,
    /// Whether rays look the min/max grid up to skip cells ([`grid_may_skip`]); without it
    /// they take every sample, in chunks of a fixed length with no grid reads.
    pub grid: bool,
    /// Whether linear samples come from the data's z-paired copy (`volume_pairs`).
    pub paired: bool,
}

impl MarchVariant {
    /// The variant drawing `volume` over `grid`, its data's min/max grid; `paired`: the data
    /// has a z-paired copy.
    pub fn of(volume: &Volume, grid: &MinMaxGrid, paired: bool) -> Self {
        let linear = volume.interpolation() == Interpolation::Linear;
        MarchVariant {
            grid: grid_may_skip(volume, grid.summary()),
            paired: paired && linear,
            mode: match volume.mode() {
                VolumeMode::Mip => 0,
                VolumeMode::Translucent { .. } => 1,
                VolumeMode::Iso { .. } => 2,
            },
            linear,
            gamma: gamma_curve(volume.gamma()),
        }
    }

    /// The pipeline-overridable constants this variant sets.
    pub fn constants(self) -> [(&'static str, f64); 1] {
        gamma_constants(self.gamma)
    }
}

/// The marchers' group of the target (its depth, their output), after the visual's group 0
/// and the colormap's group 1.
pub(crate) const TARGET_GROUP: u32 = 2;

/// The marchers of one texture kind: their bind group layout and a pipeline per variant,
/// built on first use.
struct Marchers {
    layout: wgpu::BindGroupLayout,
    pipeline_layout: wgpu::PipelineLayout,
    /// The shader source without the variant's constants.
    source: String,
    by_variant: HashMap<MarchVariant, wgpu::ComputePipeline>,
}

/// Volume pipelines: the compute ray marchers per texture kind and variant, and the composite
/// that blends their result over the target.
pub(crate) struct VolumePipelines {
    by_kind: HashMap<VolumeKey, Marchers>,
    /// Bound where the hardware interpolates (`sampling::hardware_filtered`).
    sampler: Option<wgpu::Sampler>,
    /// The min/max grids of the sources volumes show.
    pub grids: MinMaxGrids,
    /// The z-paired copies of 8-bit volumes on CPU devices.
    pub pairs: ZPairsSet,
    /// Group 1 of the marcher (`pipeline::colormap_layout`).
    colormap_layout: wgpu::BindGroupLayout,
    /// Group 2 of the marcher ([`TARGET_GROUP`]): the target's depth and its marched texture.
    target_layout: wgpu::BindGroupLayout,
    /// Group 0 of the composite: the marched texture.
    composite_layout: wgpu::BindGroupLayout,
    composite: Option<wgpu::RenderPipeline>,
}

impl VolumePipelines {
    /// Layouts only: pipelines are built on first use. `pair`: march 8-bit volumes through
    /// z-paired copies (CPU devices, `RendererOptions::volume_pairs`).
    pub fn new(device: &wgpu::Device, colormap_layout: wgpu::BindGroupLayout, pair: bool) -> Self {
        VolumePipelines {
            by_kind: HashMap::new(),
            sampler: None,
            grids: MinMaxGrids::default(),
            pairs: ZPairsSet::new(device, pair),
            colormap_layout,
            target_layout: target_layout(device),
            composite_layout: composite_layout(device),
            composite: None,
        }
    }

    /// The layout of a target's marcher bind group ([`TARGET_GROUP`]).
    pub fn target_layout(&self) -> &wgpu::BindGroupLayout {
        &self.target_layout
    }

    /// The layout of a target's composite bind group.
    pub fn composite_layout(&self) -> &wgpu::BindGroupLayout {
        &self.composite_layout
    }

    /// Builds the marchers' layout for `key` (and the composite) if they do not exist yet.
    pub fn ensure(&mut self, device: &wgpu::Device, key: VolumeKey) {
        if hardware_filtered(key.0, key.1) && self.sampler.is_none() {
            self.sampler = Some(linear_sampler(device));
        }
        if !self.by_kind.contains_key(&key) {
            let built = Self::build(device, key, &self.colormap_layout, &self.target_layout);
            self.by_kind.insert(key, built);
        }
        if self.composite.is_none() {
            self.composite = Some(build_composite(device, &self.composite_layout));
        }
    }

    /// Builds the marcher for `key` and `variant` (and what [`VolumePipelines::ensure`]
    /// builds) if it does not exist yet.
    pub fn ensure_marcher(&mut self, device: &wgpu::Device, key: VolumeKey, variant: MarchVariant) {
        self.ensure(device, key);
        let marchers = self.by_kind.get_mut(&key).expect("ensured");
        if marchers.by_variant.contains_key(&variant) {
            return;
        }
        let source = variant_source(&marchers.source, variant);
        let module = device.create_shader_module(wgpu::ShaderModuleDescriptor {
            label: Some("sluice volume"),
            source: wgpu::ShaderSource::Wgsl(source.into()),
        });
        let _serial = crate::pipeline::pipeline_creation_lock();
        let pipeline = device.create_compute_pipeline(&wgpu::ComputePipelineDescriptor {
            label: Some("sluice volume"),
            layout: Some(&marchers.pipeline_layout),
            module: &module,
            entry_point: Some("cs_main"),
            compilation_options: wgpu::PipelineCompilationOptions {
                constants: &variant.constants(),
                ..Default::default()
            },
            cache: crate::pipeline_cache::for_pipeline(device).as_ref(),
        });
        marchers.by_variant.insert(variant, pipeline);
    }

    /// The linear sampler (after [`VolumePipelines::ensure`] of a filtered key).
    pub fn sampler(&self) -> &wgpu::Sampler {
        self.sampler
            .as_ref()
            .expect("made with the first filtered marcher")
    }

    fn build(
        device: &wgpu::Device,
        (kind, one_brick): VolumeKey,
        colormap_layout: &wgpu::BindGroupLayout,
        target_layout: &wgpu::BindGroupLayout,
    ) -> Marchers {
        let mut entries = vec![uniform_entry(
            size_of::<VolumeParams>(),
            wgpu::ShaderStages::COMPUTE,
        )];
        entries.extend(data_texture_entries(
            kind,
            TexDim::D3,
            one_brick,
            wgpu::ShaderStages::COMPUTE,
        ));
        if hardware_filtered(kind, one_brick) {
            entries.push(sampler_entry(wgpu::ShaderStages::COMPUTE));
        }
        entries.push(grid_entry(GRID_BINDING));
        entries.push(pairs_entry());
        let source = marcher_shader_source(kind, one_brick);
        let layout = device.create_bind_group_layout(&wgpu::BindGroupLayoutDescriptor {
            label: Some("sluice volume"),
            entries: &entries,
        });
        let pipeline_layout = device.create_pipeline_layout(&wgpu::PipelineLayoutDescriptor {
            label: Some("sluice volume"),
            bind_group_layouts: &[Some(&layout), Some(colormap_layout), Some(target_layout)],
            immediate_size: 0,
        });
        Marchers {
            layout,
            pipeline_layout,
            source,
            by_variant: HashMap::new(),
        }
    }

    pub fn layout(&self, key: VolumeKey) -> &wgpu::BindGroupLayout {
        &self.by_kind[&key].layout
    }

    /// The marcher for `key` and `variant` (after [`VolumePipelines::ensure_marcher`]).
    pub fn pipeline(&self, key: VolumeKey, variant: MarchVariant) -> &wgpu::ComputePipeline {
        &self.by_kind[&key].by_variant[&variant]
    }

    pub fn composite(&self) -> &wgpu::RenderPipeline {
        self.composite
            .as_ref()
            .expect("built with the first marcher")
    }
}

/// The marcher's shader for data of `kind` (in one texture or bricks), before its variant's
/// constants: the sampled shader and the paired texture's declaration and sample.
fn marcher_shader_source(kind: SampleKind, one_brick: bool) -> String {
    let mut source = sampled_shader_source(SHADER, kind, TexDim::D3, one_brick, true);
    source += &crate::volume_pairs::marcher_source(hardware_filtered(kind, one_brick));
    source
}

/// The marcher's source for `variant`: `source` (the sampled shader) after the constants it
/// reads the variant from (`MODE`, `LINEAR`, `USE_GRID`, `PAIRED`).
fn variant_source(source: &str, variant: MarchVariant) -> String {
    format!(
        "const MODE: u32 = {}u;\nconst LINEAR: bool = {};\nconst USE_GRID: bool = {};\nconst PAIRED: bool = {};\n{source}",
        variant.mode, variant.linear, variant.grid, variant.paired
    )
}

/// Workgroup size of the marcher (`@workgroup_size(8, 8)` in `shaders/volume.wgsl`).
pub(crate) const MARCH_WORKGROUP: u32 = 8;

/// Workgroups per side of the dense marcher's tiles, dispatched one row of tiles per dispatch
/// row (the `8u` of `cs_main` in `shaders/volume.wgsl`).
pub(crate) const MARCH_TILE: u32 = 8;

fn build_composite(device: &wgpu::Device, layout: &wgpu::BindGroupLayout) -> wgpu::RenderPipeline {
    let module = device.create_shader_module(wgpu::ShaderModuleDescriptor {
        label: Some("sluice volume composite"),
        source: wgpu::ShaderSource::Wgsl(COMPOSITE.into()),
    });
    let pipeline_layout = device.create_pipeline_layout(&wgpu::PipelineLayoutDescriptor {
        label: Some("sluice volume composite"),
        bind_group_layouts: &[Some(layout)],
        immediate_size: 0,
    });
    render_pipeline(
        device,
        PipelineSpec {
            label: "sluice volume composite",
            constants: &[],
            layout: &pipeline_layout,
            module: &module,
            topology: wgpu::PrimitiveTopology::TriangleList,
            depth: None,
            fragment_entry: "fs_main",
            targets: &[Some(wgpu::ColorTargetState {
                format: TARGET_FORMAT,
                blend: Some(wgpu::BlendState::ALPHA_BLENDING),
                write_mask: wgpu::ColorWrites::ALL,
            })],
        },
    )
}

/// Group 1 of the marcher: the opaque pass's depth (rays stop there) and the texture the
/// marched colours go to.
fn target_layout(device: &wgpu::Device) -> wgpu::BindGroupLayout {
    device.create_bind_group_layout(&wgpu::BindGroupLayoutDescriptor {
        label: Some("sluice volume target"),
        entries: &[
            float_texture_entry(0, wgpu::ShaderStages::COMPUTE),
            wgpu::BindGroupLayoutEntry {
                binding: 1,
                visibility: wgpu::ShaderStages::COMPUTE,
                ty: wgpu::BindingType::StorageTexture {
                    access: wgpu::StorageTextureAccess::WriteOnly,
                    format: MARCHED_FORMAT,
                    view_dimension: wgpu::TextureViewDimension::D2,
                },
                count: None,
            },
        ],
    })
}

/// Group 0 of the composite: the marched texture, read with `textureLoad`.
fn composite_layout(device: &wgpu::Device) -> wgpu::BindGroupLayout {
    device.create_bind_group_layout(&wgpu::BindGroupLayoutDescriptor {
        label: Some("sluice volume composite"),
        entries: &[float_texture_entry(0, wgpu::ShaderStages::FRAGMENT)],
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every marcher variant (mode, interpolation, with and without the gamma curve) is valid
    /// WGSL for every texture kind, in one texture and in bricks, before and after its
    /// constants are put in (naga, no GPU needed).
    #[test]
    fn every_marcher_variant_compiles() {
        for kind in SampleKind::ALL {
            for one_brick in [true, false] {
                let sampled = marcher_shader_source(kind, one_brick);
                for mode in 0..3 {
                    for linear in [false, true] {
                        for gamma in [false, true] {
                            for (grid, paired) in
                                [(false, false), (true, false), (false, true), (true, true)]
                            {
                                let variant = MarchVariant {
                                    mode,
                                    linear,
                                    gamma,
                                    grid,
                                    paired,
                                };
                                let what = format!("{kind:?}, one brick {one_brick}, {variant:?}");
                                crate::pipeline::assert_valid_with_constants(
                                    &variant_source(&sampled, variant),
                                    &variant.constants(),
                                    &[(wgpu::naga::ShaderStage::Compute, "cs_main")],
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
