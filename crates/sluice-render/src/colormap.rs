//! Colormaps: lookup tables from normalized values to colours, applied in the shader.

use std::sync::Arc;

use crate::colormap_data;
use crate::error::RenderError;

/// Most entries a user lookup table may have (one texture row on every device).
pub const MAX_COLORMAP_ENTRIES: usize = 2048;

/// Maps a normalized value `t` in `[0, 1]` to a colour.
///
/// A table of `N` RGBA8 entries maps `t` to entry `min(floor(t * N), N - 1)` (the
/// matplotlib convention): entry `i` covers `[i / N, (i + 1) / N)`. Built-in maps have 256
/// entries. Changing a visual's colormap uploads no data: built-in tables live on the GPU from
/// the renderer's start, a custom table is uploaded once (a few KiB) the first time it is used.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum Colormap {
    /// Black to white.
    Gray,
    /// Perceptually uniform, dark blue to yellow (matplotlib's default).
    Viridis,
    /// Perceptually uniform, black to light yellow through magenta.
    Magma,
    /// Perceptually uniform, black to pale yellow through red.
    Inferno,
    /// Perceptually uniform, blue to yellow through magenta.
    Plasma,
    /// Perceptually uniform and colour-vision-deficiency friendly, blue to yellow.
    Cividis,
    /// A user lookup table.
    Custom(CustomColormap),
}

/// A user lookup table; build it with [`Colormap::custom`].
#[derive(Clone, Debug)]
pub struct CustomColormap {
    name: Arc<str>,
    entries: Arc<[[u8; 4]]>,
}

impl PartialEq for CustomColormap {
    fn eq(&self, other: &Self) -> bool {
        Arc::ptr_eq(&self.entries, &other.entries)
            || (self.name == other.name && self.entries == other.entries)
    }
}

impl Eq for CustomColormap {}

impl Colormap {
    /// A user lookup table of 1 to [`MAX_COLORMAP_ENTRIES`] RGBA8 entries, low values first.
    pub fn custom(
        name: impl Into<String>,
        entries: impl Into<Vec<[u8; 4]>>,
    ) -> Result<Self, RenderError> {
        let name = name.into();
        let entries = entries.into();
        if entries.is_empty() || entries.len() > MAX_COLORMAP_ENTRIES {
            return Err(RenderError::ColormapSize {
                name,
                entries: entries.len(),
                limit: MAX_COLORMAP_ENTRIES,
            });
        }
        Ok(Colormap::Custom(CustomColormap {
            name: name.into(),
            entries: entries.into(),
        }))
    }

    /// A user lookup table of `n` entries from a function of `t` in `[0, 1]` returning RGBA in
    /// `[0, 1]` (clamped), evaluated at each entry's centre.
    pub fn from_fn(
        name: impl Into<String>,
        n: usize,
        f: impl Fn(f32) -> [f32; 4],
    ) -> Result<Self, RenderError> {
        let entries: Vec<[u8; 4]> = (0..n)
            .map(|i| {
                let c = f((i as f32 + 0.5) / n as f32);
                c.map(|v| (v.clamp(0.0, 1.0) * 255.0).round() as u8)
            })
            .collect();
        Colormap::custom(name, entries)
    }

    /// The colormap's name.
    pub fn name(&self) -> &str {
        match self {
            Colormap::Gray => "gray",
            Colormap::Viridis => "viridis",
            Colormap::Magma => "magma",
            Colormap::Inferno => "inferno",
            Colormap::Plasma => "plasma",
            Colormap::Cividis => "cividis",
            Colormap::Custom(c) => &c.name,
        }
    }

    /// The lookup table, low values first.
    pub fn entries(&self) -> &[[u8; 4]] {
        match self {
            Colormap::Gray => &GRAY,
            Colormap::Viridis => &colormap_data::VIRIDIS,
            Colormap::Magma => &colormap_data::MAGMA,
            Colormap::Inferno => &colormap_data::INFERNO,
            Colormap::Plasma => &colormap_data::PLASMA,
            Colormap::Cividis => &colormap_data::CIVIDIS,
            Colormap::Custom(c) => &c.entries,
        }
    }

    /// The built-in colormaps.
    pub fn builtins() -> [Colormap; 6] {
        [
            Colormap::Gray,
            Colormap::Viridis,
            Colormap::Magma,
            Colormap::Inferno,
            Colormap::Plasma,
            Colormap::Cividis,
        ]
    }

    /// Identity of the table for caching on the GPU.
    pub(crate) fn key(&self) -> ColormapKey {
        match self {
            Colormap::Custom(c) => {
                ColormapKey::Custom(Arc::as_ptr(&c.entries) as *const () as usize)
            }
            Colormap::Gray => ColormapKey::Builtin("gray"),
            Colormap::Viridis => ColormapKey::Builtin("viridis"),
            Colormap::Magma => ColormapKey::Builtin("magma"),
            Colormap::Inferno => ColormapKey::Builtin("inferno"),
            Colormap::Plasma => ColormapKey::Builtin("plasma"),
            Colormap::Cividis => ColormapKey::Builtin("cividis"),
        }
    }

    /// Keeps a custom table's memory alive as long as the GPU cache refers to it.
    pub(crate) fn custom_handle(&self) -> Option<Arc<[[u8; 4]]>> {
        match self {
            Colormap::Custom(c) => Some(c.entries.clone()),
            _ => None,
        }
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub(crate) enum ColormapKey {
    Builtin(&'static str),
    Custom(usize),
}

const GRAY: [[u8; 4]; 256] = {
    let mut t = [[0u8; 4]; 256];
    let mut i = 0;
    while i < 256 {
        t[i] = [i as u8, i as u8, i as u8, 255];
        i += 1;
    }
    t
};

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn builtins_have_256_opaque_entries() {
        for cm in Colormap::builtins() {
            assert_eq!(cm.entries().len(), 256, "{}", cm.name());
            assert!(cm.entries().iter().all(|e| e[3] == 255));
        }
        assert_eq!(Colormap::Viridis.entries()[0], [68, 1, 84, 255]);
        assert_eq!(Colormap::Gray.entries()[200], [200, 200, 200, 255]);
    }

    #[test]
    fn custom_tables_are_checked() {
        let e = Colormap::custom("empty", Vec::new()).unwrap_err();
        assert!(e.to_string().contains("has 0 entries; 1 to 2048"), "{e}");
        let e = Colormap::custom("big", vec![[0; 4]; 5000]).unwrap_err();
        assert!(e.to_string().contains("5000"), "{e}");
        let two = Colormap::custom("two", vec![[255, 0, 0, 255], [0, 0, 255, 255]]).unwrap();
        assert_eq!(two.entries().len(), 2);
        let ramp = Colormap::from_fn("ramp", 4, |t| [t, 0.0, 0.0, 1.0]).unwrap();
        assert_eq!(ramp.entries()[0], [32, 0, 0, 255]);
    }
}
