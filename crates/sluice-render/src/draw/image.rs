//! Drawing an [`Image`]: a textured rectangle (a plane of the source's 2-D or 3-D texture)
//! in the opaque pass.

use crate::error::RenderError;
use crate::image_pipeline::{slice_geometry, ImageParams};
use crate::pipeline::{gamma_curve, ImageVariant, PassKind, PipelineKey, TexDim, COLORMAP_GROUP};
use crate::redraw::flat_depth;
use crate::visual::Image;
use wgpu::RenderPass;

use super::{Draw, DrawVisual, PassNeed, Resources};

impl DrawVisual for Image {
    fn id(&self) -> u64 {
        self.token.id
    }

    fn prepare(&self, res: &mut Resources) -> Result<(), RenderError> {
        if super::paged_slice::prepare(self, res)? || super::paged_image::prepare(self, res)? {
            return Ok(());
        }
        let image = self;
        let source = image.source();
        slice_geometry(image.slice(), &source.layout().shape()).map_err(|reason| {
            RenderError::InvalidSlice {
                source_label: source.label(),
                reason,
            }
        })?;
        res.bind_visual(&image.token, Some(source), &[], size_of::<ImageParams>())?;
        res.colormap_gpu(image.colormap());
        Ok(())
    }

    fn update(&self, res: &mut Resources, draw: &Draw<'_>) -> Result<(), RenderError> {
        if super::paged_slice::is_paged(self, res) {
            super::paged_slice::update(self, res, draw);
            return Ok(());
        }
        if super::paged_image::is_paged(self, res) {
            super::paged_image::update(self, res, draw);
            return Ok(());
        }
        let key = uniforms(self, res, draw.mvp);
        res.update_bind_group(self.token.id, key);
        Ok(())
    }

    fn pass_need(&self, res: &Resources) -> PassNeed {
        if super::paged_slice::is_paged(self, res) {
            return super::paged_slice::pass_need(self, res);
        }
        if super::paged_image::is_paged(self, res) {
            return super::paged_image::pass_need(self, res);
        }
        PassNeed::Flat(res.visuals[&self.token.id].flat_depth)
    }

    fn translucent(&self) -> bool {
        self.opacity() < 1.0
    }

    fn ensure_pipelines(&self, res: &mut Resources, pass: PassKind) {
        if super::paged_slice::is_paged(self, res) {
            return super::paged_slice::ensure_pipelines(self, res, pass);
        }
        if super::paged_image::is_paged(self, res) {
            return super::paged_image::ensure_pipelines(self, res, pass);
        }
        let Some(bind) = res.visuals[&self.token.id].bind.as_ref() else {
            return;
        };
        if let PipelineKey::Image(kind, dim, one_brick, variant) = bind.key {
            res.images.ensure_pass(
                &res.device,
                (kind, dim, one_brick, variant),
                pass,
                self.opacity(),
            );
        }
    }

    fn record_opaque(&self, res: &Resources, pass: &mut RenderPass<'_>, mode: PassKind) -> bool {
        if super::paged_slice::is_paged(self, res) {
            return super::paged_slice::record_opaque(self, res, pass, mode);
        }
        if super::paged_image::is_paged(self, res) {
            return super::paged_image::record_opaque(self, res, pass, mode);
        }
        let bind = res.visuals[&self.token.id].bind.as_ref().expect("bound");
        let PipelineKey::Image(kind, dim, one_brick, variant) = bind.key else {
            return false;
        };
        pass.set_pipeline(res.images.pipeline(
            (kind, dim, one_brick, variant),
            mode,
            self.opacity(),
        ));
        pass.set_bind_group(0, &bind.group, &[]);
        pass.set_bind_group(COLORMAP_GROUP, res.colormap_group(self.colormap()), &[]);
        pass.draw(0..6, 0..1);
        true
    }

    fn redraws_partially(&self) -> bool {
        true
    }
}

/// Image uniforms for this frame; returns the pipeline the image needs.
fn uniforms(image: &Image, res: &mut Resources, mvp: glam::Mat4) -> PipelineKey {
    let entries = res.colormaps[&image.colormap().key()].entries;
    let proxy = &res.proxies[&res.texture_of(image.token.id)];
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
    let one_brick = proxy.bricking().count == [1; 3];
    let variant = ImageVariant {
        mode: params.mode,
        linear: params.linear == 1,
        gamma: gamma_curve(image.gamma()),
    };
    let key = PipelineKey::Image(proxy.sample_kind(), dim, one_brick, variant);
    res.images
        .ensure(&res.device, (proxy.sample_kind(), dim, one_brick, variant));
    res.write_params(image.token.id, bytemuck::bytes_of(&params));
    let v = res.visuals.get_mut(&image.token.id).expect("prepared");
    v.flat_depth = flat_depth(mvp, geometry.size);
    key
}
