//! Drawing an [`Image`] of a paged source (lazy, multiscale or over the texture limit):
//! the virtual texture's rectangle, sampled through the page table (see `crate::paged`).
//! `draw/image.rs` hands an image here when its source is paged.

use crate::error::RenderError;
use crate::paged::wants_paging;
use crate::pipeline::{PassKind, COLORMAP_GROUP};
use crate::redraw::flat_depth;
use crate::visual::{Image, Interpolation, Slice};
use wgpu::RenderPass;

use super::{Draw, PassNeed, Resources};

/// Prepares `image` if its source is paged and returns true; otherwise drops any paged state
/// it had (its source was replaced by a dense one) and returns false.
pub(super) fn prepare(image: &Image, res: &mut Resources) -> Result<bool, RenderError> {
    let id = image.token.id;
    let source = image.source();
    // A lock set before the source was replaced by one with fewer levels fails here.
    crate::visual::check_level_policy(
        "Image",
        image.level_policy(),
        source.layout().levels().len(),
    )?;
    if !wants_paging(source, res.texture_limits, res.paged.always) {
        res.paged.remove_visual(id);
        return Ok(false);
    }
    if !matches!(image.slice(), None | Some(Slice::Z(0))) {
        return Err(RenderError::UnsupportedSource {
            visual: "Image",
            source_label: source.label(),
            reason: format!(
                "it is drawn through the virtual texture (lazy, multiscale or over the texture limit), which shows the whole 2-D plane: slice {:?} is not supported there",
                image.slice()
            ),
        });
    }
    if let Some(v) = res.visuals.remove(&id) {
        res.release_users(v.texture, &v.buffers);
    }
    res.paged.bind_visual(&res.device, &image.token, source)?;
    res.paged.set_policy(id, image.level_policy());
    res.colormap_gpu(image.colormap());
    Ok(true)
}

/// Whether `image` is drawn here this frame (after [`prepare`]).
pub(super) fn is_paged(image: &Image, res: &Resources) -> bool {
    res.paged.has_visual(image.token.id)
}

pub(super) fn update(image: &Image, res: &mut Resources, draw: &Draw<'_>) {
    let id = image.token.id;
    let lut_size = res.colormaps[&image.colormap().key()].entries as u32;
    let mut params = res.paged.params(id);
    let clim = image.effective_clim();
    params.nan_color = image.nan_color();
    params.display = crate::pipeline::DisplayParams {
        clim: [clim[0] as f32, clim[1] as f32],
        gamma: image.gamma(),
        lut_size,
    };
    params.linear = u32::from(image.interpolation() == Interpolation::Linear);
    params.opacity = image.opacity();
    let (_, _, _, generation, shader) = res.paged.bind_parts(id);
    let fresh = res.paged.visuals[&id]
        .bind
        .as_ref()
        .is_some_and(|(_, g, k)| *g == generation && *k == shader);
    if !fresh {
        res.paged
            .pipelines
            .ensure_shader(&res.device, &res.colormap_layout, shader);
        res.counters.bind_groups_created += 1;
        let (atlas, table, sampler, _, _) = res.paged.bind_parts(id);
        let group = res.device.create_bind_group(&wgpu::BindGroupDescriptor {
            label: Some("sluice paged image"),
            layout: res.paged.pipelines.layout(shader),
            entries: &[
                wgpu::BindGroupEntry {
                    binding: 0,
                    resource: res.paged.visuals[&id].uniform.as_entire_binding(),
                },
                wgpu::BindGroupEntry {
                    binding: 1,
                    resource: wgpu::BindingResource::TextureView(atlas),
                },
                wgpu::BindGroupEntry {
                    binding: 3,
                    resource: wgpu::BindingResource::TextureView(table),
                },
                wgpu::BindGroupEntry {
                    binding: 4,
                    resource: wgpu::BindingResource::Sampler(sampler),
                },
            ],
        });
        res.paged.visuals.get_mut(&id).expect("prepared").bind = Some((group, generation, shader));
    }
    let [_, h, w] = image.source().layout().shape().padded();
    let v = res.paged.visuals.get_mut(&id).expect("prepared");
    v.flat_depth = flat_depth(draw.mvp, [w as f32, h as f32]);
    res.queue
        .write_buffer(&v.uniform, 0, bytemuck::bytes_of(&params));
}

pub(super) fn pass_need(image: &Image, res: &Resources) -> PassNeed {
    PassNeed::Flat(res.paged.visuals[&image.token.id].flat_depth)
}

pub(super) fn ensure_pipelines(image: &Image, res: &mut Resources, pass: PassKind) {
    let Some((_, _, shader)) = res.paged.visuals[&image.token.id].bind else {
        return;
    };
    res.paged.pipelines.ensure_pass(
        &res.device,
        &res.colormap_layout,
        shader,
        (pass, image.opacity(), image.gamma()),
    );
}

pub(super) fn record_opaque(
    image: &Image,
    res: &Resources,
    pass: &mut RenderPass<'_>,
    mode: PassKind,
) -> bool {
    let v = &res.paged.visuals[&image.token.id];
    let (Some((group, _, shader)), Some(frame)) = (&v.bind, &v.frame) else {
        return false;
    };
    if frame.rect[0] >= frame.rect[2] || frame.rect[1] >= frame.rect[3] {
        return false;
    }
    let Some(pipeline) =
        res.paged
            .pipelines
            .pipeline(*shader, mode, image.opacity(), image.gamma())
    else {
        return false;
    };
    pass.set_pipeline(pipeline);
    pass.set_bind_group(0, group, &[]);
    pass.set_bind_group(COLORMAP_GROUP, res.colormap_group(image.colormap()), &[]);
    pass.draw(0..6, 0..1);
    true
}
