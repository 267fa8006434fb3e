//! The atlas format of a paged source: filterable where the device allows it, so that the
//! hardware's linear sampler does the interpolation inside a page.

use sluice_core::{ElementType, UploadFormat};

use crate::format::{texture_format, SampleKind};

/// How a paged source's atlas stores its samples.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub(crate) struct AtlasFormat {
    pub format: wgpu::TextureFormat,
    pub kind: SampleKind,
    /// Whether the hardware linear sampler may filter it (the shader then uses
    /// `textureSampleLevel`; otherwise it takes four taps inside the page's slot).
    pub filterable: bool,
    /// Data units per texel value read (255 for u8 data in a unorm texture, else 1), as bits.
    value_scale_bits: u32,
}

impl AtlasFormat {
    /// The atlas format for samples uploaded as `upload` on a device with `features`:
    /// - `u8` in a unorm texture (filterable; the shader multiplies by 255, exact);
    /// - `f16` in a float texture (filterable);
    /// - `f32` (and `f64`, narrowed) in a float texture, filterable with `FLOAT32_FILTERABLE`;
    /// - everything else as the dense path stores it (integer textures, four taps).
    pub fn for_upload(upload: &UploadFormat, features: wgpu::Features) -> Self {
        use wgpu::TextureFormat as F;
        let pick = |one: F, two: F, four: F| match upload.channels {
            1 => one,
            2 => two,
            _ => four,
        };
        let (format, kind, filterable, scale) = match upload.element {
            ElementType::U8 => (
                pick(F::R8Unorm, F::Rg8Unorm, F::Rgba8Unorm),
                SampleKind::Float,
                true,
                255.0,
            ),
            ElementType::F16 => (
                pick(F::R16Float, F::Rg16Float, F::Rgba16Float),
                SampleKind::Float,
                true,
                1.0,
            ),
            ElementType::F32 | ElementType::F64 => (
                pick(F::R32Float, F::Rg32Float, F::Rgba32Float),
                SampleKind::Float,
                features.contains(wgpu::Features::FLOAT32_FILTERABLE),
                1.0,
            ),
            _ => {
                let (format, kind) = texture_format(upload);
                (format, kind, false, 1.0)
            }
        };
        AtlasFormat {
            format,
            kind,
            filterable,
            value_scale_bits: f32::to_bits(scale),
        }
    }

    /// Data units per texel value read.
    pub fn value_scale(&self) -> f32 {
        f32::from_bits(self.value_scale_bits)
    }
}
