//! The atlas format of a paged source: filterable where the device allows it, so that the
//! hardware's linear sampler does the interpolation inside a page.

use sluice_core::UploadFormat;

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
    /// The atlas format for samples uploaded as `upload` on a device with `features`: the
    /// dense path's choice for host data (`crate::format::texture_format`), so both paths
    /// filter the same formats in hardware:
    /// - `u8` in a unorm texture (the shader multiplies by 255, exact);
    /// - `u16` in a unorm texture where the device has `TEXTURE_FORMAT_16BIT_NORM`;
    /// - `f16` in a float texture;
    /// - `f32` (and `f64`, narrowed) in a float texture, filterable with `FLOAT32_FILTERABLE`;
    /// - everything else in integer textures, interpolated by four taps inside the slot.
    pub fn for_upload(upload: &UploadFormat, features: wgpu::Features) -> Self {
        let (format, kind) = texture_format(upload, true, features);
        AtlasFormat {
            format,
            kind,
            filterable: kind.filterable(),
            value_scale_bits: f32::to_bits(kind.value_scale()),
        }
    }

    /// Data units per texel value read.
    pub fn value_scale(&self) -> f32 {
        f32::from_bits(self.value_scale_bits)
    }
}
