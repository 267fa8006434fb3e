//! `Image`: a 2-D source drawn as a grid of pixels, through contrast limits and a colormap.

use std::fmt;
use std::sync::Arc;

use sluice_core::SharedSource;

use super::{IntoSource, VisualToken};
use crate::colormap::Colormap;

/// How values between sample centres are computed.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum Interpolation {
    /// The nearest sample: each data pixel is a flat square.
    #[default]
    Nearest,
    /// Bilinear between the four nearest sample centres (clamped at the edges). NaN samples
    /// are left out and the remaining weights renormalized.
    Linear,
}

/// Which plane of a 3-D source an [`Image`] shows. Voxel coordinates: x = column (axis 2),
/// y = row (axis 1), z = plane (axis 0); voxel `(z, y, x)` covers `[x, x+1] x [y, y+1] x [z, z+1]`.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Slice {
    /// Plane `index` along axis 0: image x = column, image y = row.
    Z(usize),
    /// Plane `index` along axis 1: image x = column, image y = plane.
    Y(usize),
    /// Plane `index` along axis 2: image x = row, image y = plane.
    X(usize),
    /// Any plane: image point `(a, b)` (in image units, `0..extent`) shows voxel position
    /// `origin + a * u + b * v`. Points outside the volume are transparent.
    Oblique {
        /// Voxel position of the image's corner (0, 0).
        origin: [f32; 3],
        /// Voxel step per image unit along image x.
        u: [f32; 3],
        /// Voxel step per image unit along image y.
        v: [f32; 3],
        /// Image size in its units (width, height).
        extent: [f32; 2],
    },
}

/// A 2-D image of a source: one channel through contrast limits, gamma and a colormap, or
/// RGB(A) through contrast limits per channel.
///
/// In its local coordinates, sample (row `r`, column `c`) covers the unit square
/// `[c, c + 1] x [r, r + 1]`: x runs along columns, y along rows. The node's transform places
/// it in the world.
///
/// A 3-D source is shown a plane at a time ([`Slice`], by default the middle plane along axis
/// 0): the image samples the source's 3-D texture, which volumes and other slices of the same
/// source share, so moving the plane uploads nothing.
///
/// Display parameters are per visual: any number of images may show one source with
/// different settings, and changing them uploads nothing.
///
/// Values map to colours as follows (with `lo, hi = clim`):
/// `t = clamp((v - lo) / (hi - lo), 0, 1) ^ gamma`; the colour is the colormap's entry for
/// `t`. `+inf` maps to the top of the colormap, `-inf` to the bottom, and NaN to
/// [`Image::nan_color`] (transparent by default, so the background shows through). For RGB(A)
/// sources each colour channel goes through the same `t` formula and alpha is scaled by the
/// element type's maximum (1.0 for floats).
pub struct Image {
    pub(crate) token: Arc<VisualToken>,
    source: SharedSource,
    clim: Option<[f64; 2]>,
    gamma: f32,
    colormap: Colormap,
    interpolation: Interpolation,
    nan_color: [f32; 4],
    opacity: f32,
    slice: Option<Slice>,
}

impl Image {
    /// An image of `source` with default settings: contrast limits from the element type
    /// (full integer range, `[0, 1]` for floats), gamma 1, gray colormap, nearest sampling.
    pub fn new(source: impl IntoSource) -> Self {
        Image {
            token: VisualToken::new(),
            source: source.into_source(),
            clim: None,
            gamma: 1.0,
            colormap: Colormap::Gray,
            interpolation: Interpolation::Nearest,
            nan_color: [0.0; 4],
            opacity: 1.0,
            slice: None,
        }
    }

    /// Shows plane `slice` of a 3-D source.
    #[must_use]
    pub fn with_slice(mut self, slice: Slice) -> Self {
        self.slice = Some(slice);
        self
    }

    /// Shows plane `slice` of a 3-D source; uploads nothing.
    pub fn set_slice(&mut self, slice: Slice) {
        self.slice = Some(slice);
    }

    /// The plane set for a 3-D source (`None`: the middle plane along axis 0).
    pub fn slice(&self) -> Option<Slice> {
        self.slice
    }

    /// Sets the contrast limits: `lo` maps to the bottom of the colormap, `hi` to the top.
    #[must_use]
    pub fn with_clim(mut self, lo: f64, hi: f64) -> Self {
        self.set_clim(lo, hi);
        self
    }

    /// Sets gamma (`t ^ gamma` after normalization; must be positive).
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

    /// Sets the interpolation.
    #[must_use]
    pub fn with_interpolation(mut self, interpolation: Interpolation) -> Self {
        self.interpolation = interpolation;
        self
    }

    /// Sets the colour of NaN samples (RGBA in `[0, 1]`).
    #[must_use]
    pub fn with_nan_color(mut self, rgba: [f32; 4]) -> Self {
        self.nan_color = rgba;
        self
    }

    /// Sets the opacity (multiplies alpha; `[0, 1]`).
    #[must_use]
    pub fn with_opacity(mut self, opacity: f32) -> Self {
        self.opacity = opacity;
        self
    }

    /// Sets the contrast limits.
    pub fn set_clim(&mut self, lo: f64, hi: f64) {
        self.clim = Some([lo, hi]);
    }

    /// Goes back to contrast limits from the element type.
    pub fn reset_clim(&mut self) {
        self.clim = None;
    }

    /// Sets gamma.
    pub fn set_gamma(&mut self, gamma: f32) {
        self.gamma = gamma;
    }

    /// Sets the colormap.
    pub fn set_colormap(&mut self, colormap: Colormap) {
        self.colormap = colormap;
    }

    /// Sets the interpolation.
    pub fn set_interpolation(&mut self, interpolation: Interpolation) {
        self.interpolation = interpolation;
    }

    /// Sets the colour of NaN samples.
    pub fn set_nan_color(&mut self, rgba: [f32; 4]) {
        self.nan_color = rgba;
    }

    /// Sets the opacity.
    pub fn set_opacity(&mut self, opacity: f32) {
        self.opacity = opacity;
    }

    /// Shows another source. The old source's texture is freed once no visual shows it.
    pub fn set_source(&mut self, source: impl IntoSource) {
        self.source = source.into_source();
    }

    /// The source shown.
    pub fn source(&self) -> &SharedSource {
        &self.source
    }

    /// The contrast limits set, or `None` for the element type's range.
    pub fn clim(&self) -> Option<[f64; 2]> {
        self.clim
    }

    /// The contrast limits in effect: those set, or the element type's range.
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

    /// The interpolation.
    pub fn interpolation(&self) -> Interpolation {
        self.interpolation
    }

    /// The colour of NaN samples.
    pub fn nan_color(&self) -> [f32; 4] {
        self.nan_color
    }

    /// The opacity.
    pub fn opacity(&self) -> f32 {
        self.opacity
    }
}

/// A clone is a new visual showing the same source with the same settings.
impl Clone for Image {
    fn clone(&self) -> Self {
        Image {
            token: VisualToken::new(),
            source: self.source.clone(),
            clim: self.clim,
            gamma: self.gamma,
            colormap: self.colormap.clone(),
            interpolation: self.interpolation,
            nan_color: self.nan_color,
            opacity: self.opacity,
            slice: self.slice,
        }
    }
}

impl fmt::Debug for Image {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Image")
            .field("source", &self.source.label())
            .field("clim", &self.clim)
            .field("gamma", &self.gamma)
            .field("colormap", &self.colormap.name())
            .field("interpolation", &self.interpolation)
            .field("slice", &self.slice)
            .finish()
    }
}
