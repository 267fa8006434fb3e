//! Drawing an [`Image`] that shows a plane of a paged volume source (lazy, multiscale or over
//! the dense path's limits): the slice's rectangle, sampled through the source's 3-D page
//! table and atlas (`paged/volume.rs`), which it shares with every volume of that source. The
//! volume pass wants the pages the plane's visible part crosses
//! (`sluice_core::visible_pages_plane`). `draw/image.rs` hands an image here when its source
//! is a paged 3-D source.

use std::collections::HashMap;

use crate::error::RenderError;
use crate::image_pipeline::slice_geometry;
use crate::paged::{wants_paging_3d, ShaderKey, SlicePlane, MAX_LEVELS_3D};
use crate::pipeline::{
    alpha_scale, image_mode, render_pipeline, DisplayParams, PassKind, PipelineSpec, ShaderParts,
    COLORMAP_GROUP,
};
use crate::redraw::flat_depth;
use crate::visual::{Image, Interpolation};
use wgpu::RenderPass;

use super::paged_volume::{
    atlas_sampler, paged3d_bind_group, paged3d_entries, paged3d_source, LevelParams3d,
};
use super::{Draw, PassNeed, Resources};

const SHADER: &str = include_str!("../shaders/paged_slice.wgsl");

/// The slice's uniform block (`Params` in `shaders/paged_slice.wgsl`).
#[repr(C)]
#[derive(Clone, Copy, Debug, bytemuck::Pod, bytemuck::Zeroable)]
struct SliceParams {
    transform: [[f32; 4]; 4],
    plane: [[f32; 4]; 4],
    nan_color: [f32; 4],
    display: DisplayParams,
    size: [f32; 2],
    levels: u32,
    linear: u32,
    atlas_size: [f32; 3],
    pad_atlas: u32,
    slot_per: [u32; 2],
    slot_side: u32,
    window: u32,
    page: f32,
    border: f32,
    value_scale: f32,
    opacity: f32,
    data_size: [f32; 3],
    clip: u32,
    level_bias: i32,
    level_lock: u32,
    mode: u32,
    alpha_scale: f32,
    lv: [LevelParams3d; MAX_LEVELS_3D],
}

struct SliceShader {
    layout: wgpu::BindGroupLayout,
    pipeline_layout: wgpu::PipelineLayout,
    module: wgpu::ShaderModule,
    sampler: wgpu::Sampler,
    pipelines: HashMap<(PassKind, bool), wgpu::RenderPipeline>,
}

/// The paged slice pipelines, by the atlas's sample kind and filterability, each built on
/// first use.
#[derive(Default)]
pub(crate) struct PagedSlicePipelines {
    by_key: HashMap<ShaderKey, SliceShader>,
}

/// Prepares `image` if its source is a paged 3-D source and returns true; otherwise drops any
/// paged slice state it had and returns false.
pub(super) fn prepare(image: &Image, res: &mut Resources) -> Result<bool, RenderError> {
    let id = image.token.id;
    let source = image.source();
    let layout = source.layout();
    if layout.shape().ndim() != 3
        || !wants_paging_3d(source, res.texture_limits, res.paged.volumes.always)
    {
        if res
            .paged
            .volumes
            .visuals
            .get(&id)
            .is_some_and(|v| v.slice.is_some())
        {
            res.paged.remove_volume(id);
        }
        return Ok(false);
    }
    let geometry = slice_geometry(image.slice(), &layout.shape()).map_err(|reason| {
        RenderError::InvalidSlice {
            source_label: source.label(),
            reason,
        }
    })?;
    crate::visual::check_level_policy("Image", image.level_policy(), layout.levels().len())?;
    if let Some(v) = res.visuals.remove(&id) {
        res.release_users(v.texture, &v.buffers);
    }
    let slice = SlicePlane {
        plane: geometry.plane,
        size: geometry.size,
        clip: geometry.clip,
    };
    res.paged.bind_volume(
        &res.device,
        &image.token,
        source,
        Some(slice),
        size_of::<SliceParams>() as u64,
    )?;
    res.paged.set_volume_policy(id, image.level_policy(), None);
    res.colormap_gpu(image.colormap());
    Ok(true)
}

/// Whether `image` is drawn here this frame (after [`prepare`]).
pub(super) fn is_paged(image: &Image, res: &Resources) -> bool {
    res.paged
        .volumes
        .visuals
        .get(&image.token.id)
        .is_some_and(|v| v.slice.is_some())
}

pub(super) fn update(image: &Image, res: &mut Resources, draw: &Draw<'_>) {
    let id = image.token.id;
    let lut_size = res.colormaps[&image.colormap().key()].entries as u32;
    let v = &res.paged.volumes.visuals[&id];
    let slice = v.slice.expect("a slice visual");
    let s = &res.paged.volumes.sources[&v.source];
    let key = ShaderKey::of(&s.atlas.format);
    let generation = s.atlas.generation;
    let [d, h, w] = s.layout.shape().padded();
    let levels = s.layout.levels().len().min(MAX_LEVELS_3D);
    let policy = image.level_policy();
    let clim = image.effective_clim();
    let [ax, ay, az] = s.atlas.size();
    let params = SliceParams {
        transform: draw.mvp.to_cols_array_2d(),
        plane: slice.plane.to_cols_array_2d(),
        nan_color: image.nan_color(),
        display: DisplayParams {
            clim: [clim[0] as f32, clim[1] as f32],
            gamma: image.gamma(),
            lut_size,
        },
        size: slice.size,
        levels: levels as u32,
        linear: u32::from(image.interpolation() == Interpolation::Linear),
        atlas_size: [ax as f32, ay as f32, az as f32],
        pad_atlas: 0,
        slot_per: s.atlas.per,
        slot_side: s.atlas.side,
        window: s.window,
        page: s.grid.page_size()[0] as f32,
        border: s.grid.border() as f32,
        value_scale: s.atlas.format.value_scale(),
        opacity: image.opacity(),
        data_size: [w as f32, h as f32, d as f32],
        clip: u32::from(slice.clip),
        level_bias: policy.bias,
        level_lock: policy
            .lock
            .map_or(u32::MAX, |l| l.min(levels.saturating_sub(1)) as u32),
        mode: image_mode(s.layout.channels()),
        alpha_scale: alpha_scale(s.layout.element()),
        lv: super::paged_volume::level_params(s),
    };
    let (device, colormap_layout) = (&res.device, &res.colormap_layout);
    let shader = res
        .paged
        .volumes
        .slice_pipelines
        .by_key
        .entry(key)
        .or_insert_with(|| build(device, colormap_layout, key));
    let fresh = v.bind.as_ref().is_some_and(|(_, g)| *g == generation);
    if !fresh {
        res.counters.bind_groups_created += 1;
        let group = paged3d_bind_group(
            &res.device,
            "sluice paged slice",
            &shader.layout,
            &v.uniform,
            s,
            &shader.sampler,
            false,
        );
        res.paged
            .volumes
            .visuals
            .get_mut(&id)
            .expect("prepared")
            .bind = Some((group, generation));
    }
    let v = res.paged.volumes.visuals.get_mut(&id).expect("prepared");
    v.flat_depth = flat_depth(draw.mvp, slice.size);
    res.queue
        .write_buffer(&v.uniform, 0, bytemuck::bytes_of(&params));
}

pub(super) fn pass_need(image: &Image, res: &Resources) -> PassNeed {
    PassNeed::Flat(res.paged.volumes.visuals[&image.token.id].flat_depth)
}

pub(super) fn ensure_pipelines(image: &Image, res: &mut Resources, pass: PassKind) {
    let v = &res.paged.volumes.visuals[&image.token.id];
    let key = ShaderKey::of(&res.paged.volumes.sources[&v.source].atlas.format);
    let (device, colormap_layout) = (&res.device, &res.colormap_layout);
    let shader = res
        .paged
        .volumes
        .slice_pipelines
        .by_key
        .entry(key)
        .or_insert_with(|| build(device, colormap_layout, key));
    let depth_write = image.opacity() >= 1.0;
    shader
        .pipelines
        .entry((pass, depth_write))
        .or_insert_with(|| {
            render_pipeline(
                device,
                PipelineSpec {
                    label: "sluice paged slice",
                    constants: &[],
                    layout: &shader.pipeline_layout,
                    module: &shader.module,
                    topology: wgpu::PrimitiveTopology::TriangleList,
                    depth: pass.depth(depth_write),
                    fragment_entry: "fs_main",
                    targets: &pass.targets(depth_write),
                },
            )
        });
}

pub(super) fn record_opaque(
    image: &Image,
    res: &Resources,
    pass: &mut RenderPass<'_>,
    mode: PassKind,
) -> bool {
    let v = &res.paged.volumes.visuals[&image.token.id];
    let Some((group, _)) = &v.bind else {
        return false;
    };
    let key = ShaderKey::of(&res.paged.volumes.sources[&v.source].atlas.format);
    let Some(pipeline) = res
        .paged
        .volumes
        .slice_pipelines
        .by_key
        .get(&key)
        .and_then(|s| s.pipelines.get(&(mode, image.opacity() >= 1.0)))
    else {
        return false;
    };
    pass.set_pipeline(pipeline);
    pass.set_bind_group(0, group, &[]);
    pass.set_bind_group(COLORMAP_GROUP, res.colormap_group(image.colormap()), &[]);
    pass.draw(0..6, 0..1);
    true
}

fn build(
    device: &wgpu::Device,
    colormap_layout: &wgpu::BindGroupLayout,
    key: ShaderKey,
) -> SliceShader {
    let entries = paged3d_entries(
        size_of::<SliceParams>(),
        wgpu::ShaderStages::VERTEX_FRAGMENT,
        wgpu::ShaderStages::FRAGMENT,
        key,
    );
    let source = paged3d_source(SHADER, key);
    let parts = ShaderParts::new(
        device,
        "sluice paged slice",
        &entries,
        source,
        &[colormap_layout],
    );
    let sampler = atlas_sampler(device, key.filterable);
    SliceShader {
        layout: parts.layout,
        pipeline_layout: parts.pipeline_layout,
        module: parts.module,
        sampler,
        pipelines: HashMap::new(),
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn the_paged_slice_compiles_for_every_atlas_kind() {
        super::super::paged_volume::assert_valid_for_every_atlas(super::SHADER, "paged slice");
    }
}
