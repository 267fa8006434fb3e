//! `Image`: a 2-D source drawn as a grid of pixels, through contrast limits and a colormap.

use std::fmt;

use sluice_core::{LevelPolicy, SharedSource};

use super::display::display_methods;
use super::{debug_visual, DisplaySettings, IntoSource, Token};
use crate::colormap::Colormap;
use crate::error::RenderError;

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
///
/// A clone is a new visual with the same sources and settings.
#[derive(Clone)]
pub struct Image {
    pub(crate) token: Token,
    display: DisplaySettings,
    source: SharedSource,
    nan_color: [f32; 4],
    slice: Option<Slice>,
    level_policy: LevelPolicy,
}

impl Image {
    display_methods!("Image");

    /// An image of `source` with default settings: contrast limits from the element type
    /// (full integer range, `[0, 1]` for floats), gamma 1, gray colormap, nearest sampling.
    pub fn new(source: impl IntoSource) -> Self {
        Image {
            token: Token::new(),
            display: DisplaySettings::new(Colormap::Gray, Interpolation::Nearest),
            source: source.into_source(),
            nan_color: [0.0; 4],
            slice: None,
            level_policy: LevelPolicy::default(),
        }
    }

    level_policy_methods!("Image", "a quarter");

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

    /// Sets the colour of NaN samples (RGBA in `[0, 1]`). Fails, naming the colour, if a
    /// component is outside `[0, 1]`.
    pub fn with_nan_color(mut self, rgba: [f32; 4]) -> Result<Self, RenderError> {
        self.set_nan_color(rgba)?;
        Ok(self)
    }

    /// Sets the colour of NaN samples; on a bad colour returns the error and keeps the old
    /// one.
    pub fn set_nan_color(&mut self, rgba: [f32; 4]) -> Result<(), RenderError> {
        if !rgba.iter().all(|c| (0.0..=1.0).contains(c)) {
            return Err(RenderError::InvalidParameter {
                visual: "Image",
                parameter: "nan_color",
                value: format!("{rgba:?}"),
                expected: "RGBA components in [0, 1]",
            });
        }
        self.nan_color = rgba;
        Ok(())
    }

    /// The element type's range: the contrast limits when none are set.
    fn default_clim(&self) -> [f64; 2] {
        self.source.layout().element().default_range()
    }

    /// Shows another source. The old source's texture is freed once no visual shows it.
    pub fn set_source(&mut self, source: impl IntoSource) {
        self.source = source.into_source();
    }

    /// The source shown.
    pub fn source(&self) -> &SharedSource {
        &self.source
    }

    /// The colour of NaN samples.
    pub fn nan_color(&self) -> [f32; 4] {
        self.nan_color
    }
}

/// The level bias and lock methods of a visual of a possibly multiscale source (a
/// `level_policy: LevelPolicy` field and a `source: SharedSource` field): `$visual` names it in
/// errors, `$share` is the share of bytes a bias of +1 fetches.
macro_rules! level_policy_methods {
    ($visual:literal, $share:literal) => {
        #[doc = concat!(
            "Draws `bias` levels coarser than the view needs (negative: finer), for slow links: a\n",
            "bias of +1 fetches about ", $share, " of the bytes. Clamped to the source's levels. Only\n",
            "multiscale sources (drawn through the virtual texture) have levels to choose from."
        )]
        #[must_use]
        pub fn with_level_bias(mut self, bias: i32) -> Self {
            self.level_policy = sluice_core::LevelPolicy { bias, lock: None };
            self
        }

        /// Draws level `level` whatever the view. Fails, naming both numbers, if the source
        /// has no such level (a source shown later with fewer levels fails at its frame
        /// instead).
        pub fn with_level_lock(mut self, level: usize) -> Result<Self, RenderError> {
            self.set_level_policy(sluice_core::LevelPolicy {
                bias: 0,
                lock: Some(level),
            })?;
            Ok(self)
        }

        /// Sets the level bias or lock; uploads nothing itself (the next frame requests the
        /// pages of the new level). On a lock past the source's levels returns the error and
        /// keeps the old policy.
        pub fn set_level_policy(
            &mut self,
            policy: sluice_core::LevelPolicy,
        ) -> Result<(), RenderError> {
            $crate::visual::check_level_policy(
                $visual,
                policy,
                self.source.layout().levels().len(),
            )?;
            self.level_policy = policy;
            Ok(())
        }

        /// The level bias or lock (by default none: the level the view needs).
        pub fn level_policy(&self) -> sluice_core::LevelPolicy {
            self.level_policy
        }
    };
}
pub(crate) use level_policy_methods;

/// A lock must name one of the source's `levels` levels.
pub(crate) fn check_level_policy(
    visual: &'static str,
    policy: LevelPolicy,
    levels: usize,
) -> Result<(), RenderError> {
    match policy.lock {
        Some(lock) if lock >= levels => Err(RenderError::InvalidParameter {
            visual,
            parameter: "level lock",
            value: format!(
                "level {lock}, but the source has {levels} level{} (0..={})",
                if levels == 1 { "" } else { "s" },
                levels.saturating_sub(1)
            ),
            expected: "one of the source's levels",
        }),
        _ => Ok(()),
    }
}

impl fmt::Debug for Image {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        debug_visual(
            f,
            "Image",
            &self.source,
            &self.display,
            &[("slice", &self.slice), ("level_policy", &self.level_policy)],
        )
    }
}
