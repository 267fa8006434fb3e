//! `Volume`: a 3-D source ray-marched through a colormap.

use std::fmt;

use sluice_core::{LevelPolicy, SharedSource};

use super::display::display_methods;
use super::image::level_policy_methods;
use super::{debug_visual, DisplaySettings, IntoSource, Token};
use crate::colormap::Colormap;
use crate::error::RenderError;
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
///
/// A clone is a new visual with the same sources and settings.
#[derive(Clone)]
pub struct Volume {
    pub(crate) token: Token,
    display: DisplaySettings,
    source: SharedSource,
    mode: VolumeMode,
    /// `None`: chosen per ray (see [`Volume::set_auto_step`]).
    step: Option<f32>,
    level_policy: LevelPolicy,
    depth_samples: Option<u32>,
}

/// The depth-sample target a [`Volume`] starts with: rays through a multiscale or lazy source
/// take about this many samples at most ([`Volume::set_depth_samples`]).
pub const DEFAULT_DEPTH_SAMPLES: u32 = 256;

impl Volume {
    display_methods!("Volume");

    /// A maximum intensity projection of `source` with the element type's contrast limits, a
    /// gray colormap, trilinear sampling and the step chosen per ray
    /// ([`Volume::set_auto_step`]).
    pub fn new(source: impl IntoSource) -> Self {
        Volume {
            token: Token::new(),
            display: DisplaySettings::new(Colormap::Gray, Interpolation::Linear),
            source: source.into_source(),
            mode: VolumeMode::Mip,
            step: None,
            level_policy: LevelPolicy::default(),
            depth_samples: Some(DEFAULT_DEPTH_SAMPLES),
        }
    }

    /// Sets how many samples a ray through a paged source (lazy, multiscale, or over the
    /// dense path's limits) takes at most, which chooses the level it is drawn from: each
    /// page comes from the coarsest level whose samples are no longer than a pixel at its
    /// distance or the volume's depth over `samples`, whichever is longer. So a volume far
    /// finer than the screen costs what about `samples` samples along each ray cost, whatever
    /// its size (the cost follows the view), and more samples draw finer levels. `None`: one
    /// sample per pixel at every distance (finest, most data). Fails, naming the value, for 0.
    /// Dense sources (one level, in the dense path's textures) are always drawn at their
    /// level; the ray step ([`Volume::set_step`]) is in units of the level sampled.
    pub fn set_depth_samples(&mut self, samples: Option<u32>) -> Result<(), RenderError> {
        if samples == Some(0) {
            return Err(invalid("depth samples", "0".into(), "at least 1, or None"));
        }
        self.depth_samples = samples;
        Ok(())
    }

    /// [`Volume::set_depth_samples`], builder style.
    pub fn with_depth_samples(mut self, samples: Option<u32>) -> Result<Self, RenderError> {
        self.set_depth_samples(samples)?;
        Ok(self)
    }

    /// The depth-sample target (by default [`DEFAULT_DEPTH_SAMPLES`]); `None`: one sample
    /// per pixel.
    pub fn depth_samples(&self) -> Option<u32> {
        self.depth_samples
    }

    level_policy_methods!("Volume", "an eighth");

    /// Sets the rendering mode. Fails, naming the value, for a negative or non-finite
    /// attenuation or a non-finite threshold.
    pub fn with_mode(mut self, mode: VolumeMode) -> Result<Self, RenderError> {
        self.set_mode(mode)?;
        Ok(self)
    }

    /// Sets the rendering mode; on a bad value returns the error and keeps the old mode.
    pub fn set_mode(&mut self, mode: VolumeMode) -> Result<(), RenderError> {
        match mode {
            VolumeMode::Translucent { attenuation }
                if !(attenuation.is_finite() && attenuation >= 0.0) =>
            {
                return Err(invalid(
                    "attenuation",
                    attenuation.to_string(),
                    "a finite number >= 0",
                ));
            }
            VolumeMode::Iso { threshold } if !threshold.is_finite() => {
                return Err(invalid(
                    "threshold",
                    threshold.to_string(),
                    "a finite number",
                ));
            }
            _ => {}
        }
        self.mode = mode;
        Ok(())
    }

    /// The rendering mode.
    pub fn mode(&self) -> VolumeMode {
        self.mode
    }

    /// Sets the distance between samples along a ray, in voxels (smaller: finer and slower).
    /// Fails unless finite and at least 0.01.
    pub fn with_step(mut self, step: f32) -> Result<Self, RenderError> {
        self.set_step(step)?;
        Ok(self)
    }

    /// Sets the step, in voxels; on a bad value returns the error and keeps the old step.
    pub fn set_step(&mut self, step: f32) -> Result<(), RenderError> {
        if !(step.is_finite() && step >= 0.01) {
            return Err(invalid(
                "step",
                step.to_string(),
                "a finite number of voxels >= 0.01",
            ));
        }
        self.step = Some(step);
        Ok(())
    }

    /// Goes back to the default step, chosen per ray from the data and the view: one sample
    /// per voxel along the axis of the volume's voxel grid the ray moves fastest on
    /// (`1 / max(|dx|, |dy|, |dz|)` voxels for a unit direction `d` in voxel coordinates), so
    /// each plane of voxels across that axis is sampled once: a ray along an axis samples
    /// every voxel centre it passes, an oblique ray takes longer steps than one voxel.
    pub fn set_auto_step(&mut self) {
        self.step = None;
    }

    /// [`Volume::set_auto_step`], builder style.
    pub fn with_auto_step(mut self) -> Self {
        self.set_auto_step();
        self
    }

    /// Whether the step is chosen per ray (the default) rather than set.
    pub fn is_auto_step(&self) -> bool {
        self.step.is_none()
    }

    /// The step, in voxels: the one set, or with the default, the step of a ray along an
    /// axis (1 voxel; see [`Volume::set_auto_step`] for oblique rays).
    pub fn step(&self) -> f32 {
        self.step.unwrap_or(1.0)
    }

    /// The step the marcher is given: the one set, or 0 (chosen per ray).
    pub(crate) fn shader_step(&self) -> f32 {
        self.step.unwrap_or(0.0)
    }

    /// Shows another source.
    pub fn set_source(&mut self, source: impl IntoSource) {
        self.source = source.into_source();
    }

    /// The source shown.
    pub fn source(&self) -> &SharedSource {
        &self.source
    }

    /// The element type's range: the contrast limits when none are set.
    fn default_clim(&self) -> [f64; 2] {
        self.source.layout().element().default_range()
    }
}

fn invalid(parameter: &'static str, value: String, expected: &'static str) -> RenderError {
    RenderError::InvalidParameter {
        visual: "Volume",
        parameter,
        value,
        expected,
    }
}

impl fmt::Debug for Volume {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let more: [(&str, &dyn fmt::Debug); 4] = [
            ("mode", &self.mode),
            ("step", &self.step),
            ("level_policy", &self.level_policy),
            ("depth_samples", &self.depth_samples),
        ];
        debug_visual(f, "Volume", &self.source, &self.display, &more)
    }
}
