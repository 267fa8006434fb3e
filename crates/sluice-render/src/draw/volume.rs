//! Drawing a [`Volume`]: rays marched through the source's 3-D texture in a compute pass
//! after the opaque pass (stopping at the depth it left), then blended over the target.

use crate::error::RenderError;
use crate::pipeline::{PipelineKey, COLORMAP_GROUP};
use crate::target::RenderTarget;
use crate::visual::{Interpolation, Volume};
use crate::volume_grid::GridUpdate;
use crate::volume_pipeline::{
    MarchVariant, VolumeParams, MARCH_TILE, MARCH_WORKGROUP, TARGET_GROUP,
};
use wgpu::CommandEncoder;

use super::{Draw, DrawVisual, PassNeed, Resources};

impl DrawVisual for Volume {
    fn id(&self) -> u64 {
        self.token.id
    }

    fn prepare(&self, res: &mut Resources) -> Result<(), RenderError> {
        let volume = self;
        check_volume(volume)?;
        if super::paged_volume::prepare(volume, res)? {
            return Ok(());
        }
        res.bind_visual(
            &volume.token,
            Some(volume.source()),
            &[],
            size_of::<VolumeParams>(),
        )?;
        res.colormap_gpu(volume.colormap());
        if volume.interpolation() == Interpolation::Linear {
            // Before the upload, so that a whole one writes the paired copy from the host.
            let key = res.texture_of(volume.token.id);
            res.volumes
                .pairs
                .make_ready(&res.device, &res.proxies[&key]);
        }
        Ok(())
    }

    fn update(&self, res: &mut Resources, draw: &Draw<'_>) -> Result<(), RenderError> {
        if super::paged_volume::is_paged(self, res) {
            super::paged_volume::update(self, res, draw);
            return Ok(());
        }
        let key = uniforms(self, res, draw.mvp, draw.viewport);
        res.update_bind_group(self.token.id, key);
        Ok(())
    }

    fn pass_need(&self, _res: &Resources) -> PassNeed {
        PassNeed::DepthColor
    }

    fn record_after(&self, res: &Resources, enc: &mut CommandEncoder, out: &RenderTarget) -> bool {
        if super::paged_volume::is_paged(self, res) {
            return super::paged_volume::record_after(self, res, enc, out);
        }
        let [w, h] = out.size();
        let bind = res.visuals[&self.token.id].bind.as_ref().expect("bound");
        let PipelineKey::Volume(kind, one_brick) = bind.key else {
            return false;
        };
        let proxy = &res.proxies[&res.texture_of(self.token.id)];
        let serial = proxy.serial();
        res.volumes.grids.record_build(serial, enc);
        let variant = MarchVariant::of(
            self,
            res.volumes.grids.get(serial),
            res.volumes.pairs.view(proxy).1.is_some(),
        );
        if variant.paired {
            res.volumes.pairs.record_build(serial, enc);
        }
        {
            let mut pass = enc.begin_compute_pass(&wgpu::ComputePassDescriptor {
                label: Some("sluice volume march"),
                timestamp_writes: None,
            });
            pass.set_pipeline(res.volumes.pipeline((kind, one_brick), variant));
            pass.set_bind_group(0, &bind.group, &[]);
            pass.set_bind_group(COLORMAP_GROUP, res.colormap_group(self.colormap()), &[]);
            pass.set_bind_group(TARGET_GROUP, &out.volume_group, &[]);
            // A dispatch row per row of tiles (`cs_main`). Targets are bounded by the device's
            // texture limit, so `groups[0] * MARCH_TILE` is far below the dispatch limit.
            let groups = [w.div_ceil(MARCH_WORKGROUP), h.div_ceil(MARCH_WORKGROUP)];
            pass.dispatch_workgroups(groups[0] * MARCH_TILE, groups[1].div_ceil(MARCH_TILE), 1);
        }
        composite(res, enc, out);
        true
    }
}

/// Blends the marched texture over the target (the dense and paged marchers' last step).
pub(super) fn composite(res: &Resources, enc: &mut CommandEncoder, out: &RenderTarget) {
    {
        let mut pass = enc.begin_render_pass(&wgpu::RenderPassDescriptor {
            label: Some("sluice volume composite"),
            color_attachments: &[Some(wgpu::RenderPassColorAttachment {
                view: &out.view,
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
        pass.set_pipeline(res.volumes.composite());
        pass.set_bind_group(0, &out.composite_group, &[]);
        pass.draw(0..3, 0..1);
    }
}

/// Volume uniforms for this frame; returns the pipeline the volume needs.
fn uniforms(
    volume: &Volume,
    res: &mut Resources,
    mvp: glam::Mat4,
    viewport: [u32; 2],
) -> PipelineKey {
    let entries = res.colormaps[&volume.colormap().key()].entries;
    let key = res.texture_of(volume.token.id);
    let linear = volume.interpolation() == Interpolation::Linear;
    let (host_grid, host_pairs) = {
        let proxy = res.proxies.get_mut(&key).expect("prepared");
        // The host-written pairs are for the linear volumes of the source to take.
        let pairs = if linear {
            proxy.take_host_pairs()
        } else {
            None
        };
        (proxy.take_host_grid(), pairs)
    };
    let proxy = &res.proxies[&key];
    let update = res
        .volumes
        .grids
        .ensure(&res.device, &res.queue, proxy, host_grid);
    match update {
        GridUpdate::Unchanged => {}
        GridUpdate::Build => res.counters.volume_grids_built += 1,
        GridUpdate::Written => res.counters.volume_grids_written += 1,
    }
    let paired = if linear {
        let update = res.volumes.pairs.ensure(&res.device, proxy, host_pairs);
        match update {
            Some(GridUpdate::Build) => res.counters.volume_pairs_built += 1,
            Some(GridUpdate::Written) => res.counters.volume_pairs_written += 1,
            _ => {}
        }
        update.is_some()
    } else {
        false
    };
    let proxies = &res.proxies;
    res.volumes
        .grids
        .retain(|serial| proxies.values().any(|p| p.serial() == serial));
    res.volumes
        .pairs
        .retain(|serial| proxies.values().any(|p| p.serial() == serial));
    let params = VolumeParams::new(
        volume,
        proxy.layout(),
        mvp,
        viewport,
        entries,
        proxy.bricking(),
        res.volumes.grids.get(proxy.serial()),
    );
    let one_brick = proxy.bricking().count == [1; 3];
    let key = PipelineKey::Volume(proxy.sample_kind(), one_brick);
    let variant = MarchVariant::of(volume, res.volumes.grids.get(proxy.serial()), paired);
    if !variant.grid {
        res.counters.volume_marches_without_grid += 1;
    }
    if variant.paired {
        res.counters.volume_marches_paired += 1;
    }
    res.volumes
        .ensure_marcher(&res.device, (proxy.sample_kind(), one_brick), variant);
    res.write_params(volume.token.id, bytemuck::bytes_of(&params));
    key
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
