//! Drawing an [`Image`]: a textured rectangle (a plane of the source's 2-D or 3-D texture)
//! in the opaque pass.

use crate::error::RenderError;
use crate::image_pipeline::{slice_geometry, Blend, FrameParams, ImageParams};
use crate::pipeline::{gamma_curve, ImageVariant, PassKind, PipelineKey, TexDim, COLORMAP_GROUP};
use crate::redraw::flat_depth;
use crate::visual::Image;
use wgpu::{CommandEncoder, RenderPass};

use super::{ComputeFrame, Draw, DrawVisual, PassNeed, Resources};

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
                blend_of(self, variant.mode),
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
            blend_of(self, variant.mode),
        ));
        pass.set_bind_group(0, &bind.group, &[]);
        pass.set_bind_group(COLORMAP_GROUP, res.colormap_group(self.colormap()), &[]);
        pass.draw(0..6, 0..1);
        true
    }

    fn ensure_compute(&self, res: &mut Resources) -> bool {
        if super::paged_slice::is_paged(self, res) || super::paged_image::is_paged(self, res) {
            return false;
        }
        let Some(bind) = res.visuals[&self.token.id].bind.as_ref() else {
            return false;
        };
        let PipelineKey::Image(kind, dim, one_brick, variant) = bind.key else {
            return false;
        };
        res.images
            .ensure_compute(&res.device, (kind, dim, one_brick, variant));
        true
    }

    fn record_compute(
        &self,
        res: &Resources,
        enc: &mut CommandEncoder,
        draw: &Draw<'_>,
        frame: ComputeFrame<'_>,
    ) {
        let out = frame.out;
        // `ensure_compute` found the bind group and an image pipeline key.
        let bind = res.visuals[&self.token.id].bind.as_ref().expect("bound");
        let PipelineKey::Image(kind, dim, one_brick, variant) = bind.key else {
            unreachable!("ensure_compute checked the key")
        };
        let params = FrameParams::new(
            draw.mvp,
            frame.target.size(),
            frame.background,
            frame.rects,
            blend_of(self, variant.mode) == Blend::Alpha,
        );
        res.queue
            .write_buffer(&out.buffer, 0, bytemuck::bytes_of(&params));
        let mut pass = enc.begin_compute_pass(&wgpu::ComputePassDescriptor {
            label: Some("sluice image compute"),
            timestamp_writes: None,
        });
        pass.set_pipeline(res.images.compute_pipeline((kind, dim, one_brick, variant)));
        pass.set_bind_group(0, &bind.group, &[]);
        pass.set_bind_group(COLORMAP_GROUP, res.colormap_group(self.colormap()), &[]);
        pass.set_bind_group(2, &out.group, &[]);
        let [x, y, z] = params.workgroups();
        pass.dispatch_workgroups(x, y, z);
    }

    fn redraws_partially(&self) -> bool {
        true
    }
}

/// How `image`, whose samples take channel mode `mode` (`ImageParams::mode`), is blended:
/// [`Blend::Replace`] where every fragment it keeps is opaque ([`writes_opaque`]).
fn blend_of(image: &Image, mode: u32) -> Blend {
    if writes_opaque(image, mode) {
        Blend::Replace
    } else {
        Blend::Alpha
    }
}

/// Whether every fragment `image` keeps has an alpha of exactly 1 (`image_color` in
/// `shaders/common.wgsl`, times the opacity; fragments of alpha 0 are discarded): opacity 1,
/// a NaN colour of alpha 0 or 1, and samples that are opaque whatever their value: one
/// channel through a colormap whose every entry is opaque (mode 0), or RGB (mode 2). Value
/// and alpha (1) and RGBA (3) carry their own alpha.
pub(crate) fn writes_opaque(image: &Image, mode: u32) -> bool {
    let nan_alpha = image.nan_color()[3];
    image.opacity() >= 1.0
        && (nan_alpha == 0.0 || nan_alpha >= 1.0)
        && match mode {
            0 => image.colormap().entries().iter().all(|e| e[3] == u8::MAX),
            2 => true,
            _ => false,
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
        clip: geometry.clip,
    };
    let key = PipelineKey::Image(proxy.sample_kind(), dim, one_brick, variant);
    res.images
        .ensure(&res.device, (proxy.sample_kind(), dim, one_brick, variant));
    res.write_params(image.token.id, bytemuck::bytes_of(&params));
    let v = res.visuals.get_mut(&image.token.id).expect("prepared");
    v.flat_depth = flat_depth(mvp, geometry.size);
    key
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use sluice_core::ndarray::Array2;
    use sluice_core::ArraySource;

    use super::writes_opaque;
    use crate::colormap::Colormap;
    use crate::visual::Image;

    fn image() -> Image {
        Image::new(Arc::new(
            ArraySource::new(Array2::<u8>::zeros((2, 2))).unwrap(),
        ))
    }

    /// Only images whose every kept fragment has alpha 1 replace what is under them: the
    /// others blend as before.
    #[test]
    fn only_images_with_no_alpha_below_one_skip_the_blend() {
        // One channel through a built-in (opaque) colormap, NaN discarded: opaque.
        assert!(writes_opaque(&image(), 0));
        assert!(writes_opaque(&image().with_colormap(Colormap::Viridis), 0));
        // RGB: opaque; value + alpha and RGBA carry their own alpha.
        assert!(writes_opaque(&image(), 2));
        assert!(!writes_opaque(&image(), 1));
        assert!(!writes_opaque(&image(), 3));
        // Opacity below 1.
        assert!(!writes_opaque(&image().with_opacity(0.5).unwrap(), 0));
        assert!(!writes_opaque(&image().with_opacity(0.999).unwrap(), 2));
        // A NaN colour of alpha 1 is opaque, one between 0 and 1 is not.
        assert!(writes_opaque(
            &image().with_nan_color([1.0, 0.0, 0.0, 1.0]).unwrap(),
            0
        ));
        assert!(!writes_opaque(
            &image().with_nan_color([1.0, 0.0, 0.0, 0.5]).unwrap(),
            2
        ));
        // A colormap with one entry below full alpha.
        let mut entries = vec![[10, 20, 30, 255]; 16];
        entries[7][3] = 254;
        let partly = Colormap::custom("partly clear", entries).unwrap();
        assert!(!writes_opaque(&image().with_colormap(partly), 0));
        let clear_low = Colormap::from_fn("clear low", 8, |t| [t, t, t, t]).unwrap();
        assert!(!writes_opaque(&image().with_colormap(clear_low), 0));
    }
}
