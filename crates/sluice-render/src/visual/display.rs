//! `DisplaySettings`: how a visual's values become colours, the same for every kind of visual.

use crate::colormap::Colormap;
use crate::error::RenderError;
use crate::visual::Interpolation;

/// How values become colours: contrast limits, gamma, colormap, interpolation between samples
/// and opacity. Every visual has one ([`crate::Image::display`], [`crate::Volume::display`],
/// [`crate::Mesh::display`]) and the same setters for it; the values held are always valid
/// (a setter given a bad value returns the error and keeps the old one). Changing them uploads
/// nothing.
///
/// With `lo, hi = clim`, a value `v` maps to `t = clamp((v - lo) / (hi - lo), 0, 1) ^ gamma`
/// and the colour is the colormap's entry for `t`; `opacity` multiplies alpha.
#[derive(Clone, Debug, PartialEq)]
pub struct DisplaySettings {
    clim: Option<[f64; 2]>,
    gamma: f32,
    colormap: Colormap,
    interpolation: Interpolation,
    opacity: f32,
}

impl DisplaySettings {
    /// Contrast limits from the element type, gamma 1, opacity 1, and this colormap and
    /// interpolation.
    pub fn new(colormap: Colormap, interpolation: Interpolation) -> Self {
        DisplaySettings {
            clim: None,
            gamma: 1.0,
            colormap,
            interpolation,
            opacity: 1.0,
        }
    }

    /// Sets the contrast limits: `lo` maps to the bottom of the colormap, `hi` to the top.
    /// Both must be finite (`lo > hi` inverts the colormap; `lo == hi` is a step at `lo`).
    pub fn set_clim(&mut self, lo: f64, hi: f64) -> Result<(), RenderError> {
        if !lo.is_finite() || !hi.is_finite() {
            return Err(invalid(
                "clim",
                format!("[{lo}, {hi}]"),
                "both limits must be finite",
            ));
        }
        self.clim = Some([lo, hi]);
        Ok(())
    }

    /// Goes back to contrast limits from the element type.
    pub fn reset_clim(&mut self) {
        self.clim = None;
    }

    /// Sets gamma (`t ^ gamma` after normalization): a finite number above 0.
    pub fn set_gamma(&mut self, gamma: f32) -> Result<(), RenderError> {
        if !(gamma.is_finite() && gamma > 0.0) {
            return Err(invalid("gamma", gamma.to_string(), "a finite number > 0"));
        }
        self.gamma = gamma;
        Ok(())
    }

    /// Sets the colormap.
    pub fn set_colormap(&mut self, colormap: Colormap) {
        self.colormap = colormap;
    }

    /// Sets the interpolation between samples.
    pub fn set_interpolation(&mut self, interpolation: Interpolation) {
        self.interpolation = interpolation;
    }

    /// Sets the opacity (multiplies alpha): a number in `[0, 1]`.
    pub fn set_opacity(&mut self, opacity: f32) -> Result<(), RenderError> {
        if !(0.0..=1.0).contains(&opacity) {
            return Err(invalid(
                "opacity",
                opacity.to_string(),
                "a number in [0, 1]",
            ));
        }
        self.opacity = opacity;
        Ok(())
    }

    /// The contrast limits set, or `None` for the element type's range.
    pub fn clim(&self) -> Option<[f64; 2]> {
        self.clim
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

    /// The opacity.
    pub fn opacity(&self) -> f32 {
        self.opacity
    }
}

fn invalid(parameter: &'static str, value: String, expected: &'static str) -> RenderError {
    RenderError::InvalidParameter {
        visual: "DisplaySettings",
        parameter,
        value,
        expected,
    }
}

/// The display setters and getters of a visual kind, forwarding to its `display` field, with
/// the visual's name in their errors. One definition for the three kinds keeps them alike.
macro_rules! display_methods {
    ($visual:literal) => {
        /// The display settings (contrast limits, gamma, colormap, interpolation, opacity).
        pub fn display(&self) -> &$crate::visual::DisplaySettings {
            &self.display
        }

        /// Replaces all display settings at once (they are valid by construction).
        pub fn set_display(&mut self, display: $crate::visual::DisplaySettings) {
            self.display = display;
        }

        /// Sets the contrast limits: `lo` maps to the bottom of the colormap, `hi` to the top.
        /// Fails, naming the values, unless both are finite.
        pub fn with_clim(mut self, lo: f64, hi: f64) -> Result<Self, $crate::RenderError> {
            self.set_clim(lo, hi)?;
            Ok(self)
        }

        /// Sets gamma (`t ^ gamma` after normalization). Fails unless finite and above 0.
        pub fn with_gamma(mut self, gamma: f32) -> Result<Self, $crate::RenderError> {
            self.set_gamma(gamma)?;
            Ok(self)
        }

        /// Sets the colormap.
        #[must_use]
        pub fn with_colormap(mut self, colormap: $crate::Colormap) -> Self {
            self.set_colormap(colormap);
            self
        }

        /// Sets the interpolation between samples.
        #[must_use]
        pub fn with_interpolation(mut self, interpolation: $crate::Interpolation) -> Self {
            self.set_interpolation(interpolation);
            self
        }

        /// Sets the opacity (multiplies alpha). Fails unless in `[0, 1]`.
        pub fn with_opacity(mut self, opacity: f32) -> Result<Self, $crate::RenderError> {
            self.set_opacity(opacity)?;
            Ok(self)
        }

        /// Sets the contrast limits; on a bad value returns the error and keeps the old ones.
        pub fn set_clim(&mut self, lo: f64, hi: f64) -> Result<(), $crate::RenderError> {
            self.display
                .set_clim(lo, hi)
                .map_err(|e| $crate::visual::display::on_visual(e, $visual))
        }

        /// Goes back to contrast limits from the element type.
        pub fn reset_clim(&mut self) {
            self.display.reset_clim();
        }

        /// Sets gamma; on a bad value returns the error and keeps the old one.
        pub fn set_gamma(&mut self, gamma: f32) -> Result<(), $crate::RenderError> {
            self.display
                .set_gamma(gamma)
                .map_err(|e| $crate::visual::display::on_visual(e, $visual))
        }

        /// Sets the colormap.
        pub fn set_colormap(&mut self, colormap: $crate::Colormap) {
            self.display.set_colormap(colormap);
        }

        /// Sets the interpolation between samples.
        pub fn set_interpolation(&mut self, interpolation: $crate::Interpolation) {
            self.display.set_interpolation(interpolation);
        }

        /// Sets the opacity; on a bad value returns the error and keeps the old one.
        pub fn set_opacity(&mut self, opacity: f32) -> Result<(), $crate::RenderError> {
            self.display
                .set_opacity(opacity)
                .map_err(|e| $crate::visual::display::on_visual(e, $visual))
        }

        /// The contrast limits set, or `None` for the element type's range.
        pub fn clim(&self) -> Option<[f64; 2]> {
            self.display.clim()
        }

        /// The contrast limits in effect: those set, or the element type's range.
        pub fn effective_clim(&self) -> [f64; 2] {
            self.display.clim().unwrap_or_else(|| self.default_clim())
        }

        /// Gamma.
        pub fn gamma(&self) -> f32 {
            self.display.gamma()
        }

        /// The colormap.
        pub fn colormap(&self) -> &$crate::Colormap {
            self.display.colormap()
        }

        /// The interpolation between samples.
        pub fn interpolation(&self) -> $crate::Interpolation {
            self.display.interpolation()
        }

        /// The opacity.
        pub fn opacity(&self) -> f32 {
            self.display.opacity()
        }
    };
}

pub(crate) use display_methods;

/// `error` with the visual kind that was being set named in it.
pub(crate) fn on_visual(error: RenderError, visual: &'static str) -> RenderError {
    match error {
        RenderError::InvalidParameter {
            parameter,
            value,
            expected,
            ..
        } => RenderError::InvalidParameter {
            visual,
            parameter,
            value,
            expected,
        },
        other => other,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bad_values_are_refused_where_set_and_the_old_ones_kept() {
        let mut d = DisplaySettings::new(Colormap::Gray, Interpolation::Nearest);
        d.set_clim(1.0, 2.0).unwrap();
        let e = d.set_clim(f64::NAN, 2.0).unwrap_err().to_string();
        assert!(e.contains("clim [NaN, 2]"), "{e}");
        assert_eq!(d.clim(), Some([1.0, 2.0]));
        for bad in [0.0, -1.0, f32::INFINITY, f32::NAN] {
            assert!(d.set_gamma(bad).is_err(), "gamma {bad}");
        }
        assert_eq!(d.gamma(), 1.0);
        for bad in [-0.1, 1.5, f32::NAN] {
            assert!(d.set_opacity(bad).is_err(), "opacity {bad}");
        }
        assert_eq!(d.opacity(), 1.0);
        d.set_gamma(0.5).unwrap();
        d.set_opacity(0.25).unwrap();
        d.reset_clim();
        assert_eq!((d.gamma(), d.opacity(), d.clim()), (0.5, 0.25, None));
    }

    #[test]
    fn each_visual_names_itself_in_the_error() {
        let e = on_visual(
            DisplaySettings::new(Colormap::Gray, Interpolation::Linear)
                .set_gamma(-2.0)
                .unwrap_err(),
            "Volume",
        );
        assert!(e.to_string().contains("gamma -2 on Volume"), "{e}");
    }
}
