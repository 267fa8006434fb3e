//! `Volume`: a 3-D source ray-marched through a colormap.

use std::fmt;
use std::sync::Arc;

use sluice_core::SharedSource;

use super::{IntoSource, VisualToken};
use crate::colormap::Colormap;
use crate::visual::Interpolation;

/// How a [`Volume`] turns the samples along a ray into a colour.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum VolumeMode {
    /// Maximum intensity projection: the colour of the largest value on the ray.
    Mip,
    /// Translucent: front-to-back compositing of the colormap's colours. Each sample of
    /// normalized value `t` whose colormap entry has alpha `a` is opaque by
    /// `1 - exp(-attenuation * a * t * step)` (`step` in voxels), so low values are clear
    /// and results do not depend on the step size to first order.
    Translucent {
        /// Opacity per voxel of distance at `t = 1` and colormap alpha 1.
        attenuation: f32,
    },
    /// The surface where the data first reaches `threshold` (in data units) along the ray,
    /// coloured by the colormap at the threshold and shaded by the data's gradient with a
    /// light at the eye.
    Iso {
        /// The surface value, in data units.
        threshold: f64,
    },
}

/// A 3-D source shown by ray marching.
///
/// In its local coordinates voxel `(z, y, x)` covers `[x, x+1] x [y, y+1] x [z, z+1]`; the
/// node's transform places it in the world (non-uniform scales give anisotropic voxels).
/// Values go through contrast limits, gamma and a colormap as in [`crate::Image`]; NaN samples
/// are skipped. The volume shares its source's 3-D texture with every other visual of that
/// source (slices, other volumes), and changing any setting here uploads nothing.
pub struct Volume {
    pub(crate) token: Arc<VisualToken>,
    source: SharedSource,
    clim: Option<[f64; 2]>,
    gamma: f32,
    colormap: Colormap,
    mode: VolumeMode,
    step: f32,
    interpolation: Interpolation,
    opacity: f32,
}

impl Volume {
    /// A maximum intensity projection of `source` with the element type's contrast limits, a
    /// gray colormap, trilinear sampling and half-voxel steps.
    pub fn new(source: impl IntoSource) -> Self {
        Volume {
            token: VisualToken::new(),
            source: source.into_source(),
            clim: None,
            gamma: 1.0,
            colormap: Colormap::Gray,
            mode: VolumeMode::Mip,
            step: 0.5,
            interpolation: Interpolation::Linear,
            opacity: 1.0,
        }
    }

    /// Sets the rendering mode.
    #[must_use]
    pub fn with_mode(mut self, mode: VolumeMode) -> Self {
        self.mode = mode;
        self
    }

    /// Sets the contrast limits.
    #[must_use]
    pub fn with_clim(mut self, lo: f64, hi: f64) -> Self {
        self.clim = Some([lo, hi]);
        self
    }

    /// Sets gamma.
    #[must_use]
    pub fn with_gamma(mut self, gamma: f32) -> Self {
        self.gamma = gamma;
        self
    }

    /// Sets the colormap.
    #[must_use]
    pub fn with_colormap(mut self, colormap: Colormap) -> Self {
        self.colormap = colormap;
        self
    }

    /// Sets the distance between samples along a ray, in voxels (smaller: finer and slower).
    #[must_use]
    pub fn with_step(mut self, step: f32) -> Self {
        self.step = step;
        self
    }

    /// Sets the interpolation between voxels.
    #[must_use]
    pub fn with_interpolation(mut self, interpolation: Interpolation) -> Self {
        self.interpolation = interpolation;
        self
    }

    /// Sets the opacity.
    #[must_use]
    pub fn with_opacity(mut self, opacity: f32) -> Self {
        self.opacity = opacity;
        self
    }

    /// Sets the rendering mode.
    pub fn set_mode(&mut self, mode: VolumeMode) {
        self.mode = mode;
    }

    /// Sets the contrast limits.
    pub fn set_clim(&mut self, lo: f64, hi: f64) {
        self.clim = Some([lo, hi]);
    }

    /// Sets the colormap.
    pub fn set_colormap(&mut self, colormap: Colormap) {
        self.colormap = colormap;
    }

    /// Sets the step, in voxels.
    pub fn set_step(&mut self, step: f32) {
        self.step = step;
    }

    /// Shows another source.
    pub fn set_source(&mut self, source: impl IntoSource) {
        self.source = source.into_source();
    }

    /// The source shown.
    pub fn source(&self) -> &SharedSource {
        &self.source
    }

    /// The contrast limits in effect.
    pub fn effective_clim(&self) -> [f64; 2] {
        self.clim
            .unwrap_or_else(|| self.source.layout().element().default_range())
    }

    /// Gamma.
    pub fn gamma(&self) -> f32 {
        self.gamma
    }

    /// The colormap.
    pub fn colormap(&self) -> &Colormap {
        &self.colormap
    }

    /// The rendering mode.
    pub fn mode(&self) -> VolumeMode {
        self.mode
    }

    /// The step, in voxels.
    pub fn step(&self) -> f32 {
        self.step
    }

    /// The interpolation.
    pub fn interpolation(&self) -> Interpolation {
        self.interpolation
    }

    /// The opacity.
    pub fn opacity(&self) -> f32 {
        self.opacity
    }
}

/// A clone is a new visual showing the same source with the same settings.
impl Clone for Volume {
    fn clone(&self) -> Self {
        Volume {
            token: VisualToken::new(),
            source: self.source.clone(),
            clim: self.clim,
            gamma: self.gamma,
            colormap: self.colormap.clone(),
            mode: self.mode,
            step: self.step,
            interpolation: self.interpolation,
            opacity: self.opacity,
        }
    }
}

impl fmt::Debug for Volume {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Volume")
            .field("source", &self.source.label())
            .field("mode", &self.mode)
            .field("clim", &self.clim)
            .field("colormap", &self.colormap.name())
            .field("step", &self.step)
            .finish()
    }
}
