//! GPU texture formats for upload formats.
//!
//! Every source is uploaded at its own precision into an unfiltered integer or float texture
//! and read with `textureLoad`; shaders interpolate and map values themselves. This keeps one
//! path for every element type (8- and 16-bit integers need no normalized-format features,
//! 32-bit floats no filterable-float feature) and makes results exact enough to test against
//! CPU arithmetic.

use sluice_core::{ElementType, UploadFormat};

/// How a shader reads a texture: the WGSL sampled type.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub(crate) enum SampleKind {
    Float,
    Uint,
    Sint,
}

impl SampleKind {
    pub fn wgsl(self) -> &'static str {
        match self {
            SampleKind::Float => "f32",
            SampleKind::Uint => "u32",
            SampleKind::Sint => "i32",
        }
    }

    pub fn texture_sample_type(self) -> wgpu::TextureSampleType {
        match self {
            SampleKind::Float => wgpu::TextureSampleType::Float { filterable: false },
            SampleKind::Uint => wgpu::TextureSampleType::Uint,
            SampleKind::Sint => wgpu::TextureSampleType::Sint,
        }
    }
}

/// The texture format holding `format`, and how it is sampled.
pub(crate) fn texture_format(format: &UploadFormat) -> (wgpu::TextureFormat, SampleKind) {
    use wgpu::TextureFormat as F;
    use ElementType as E;
    let pick = |one: F, two: F, four: F| match format.channels {
        1 => one,
        2 => two,
        _ => four,
    };
    match format.element {
        E::U8 => (pick(F::R8Uint, F::Rg8Uint, F::Rgba8Uint), SampleKind::Uint),
        E::I8 => (pick(F::R8Sint, F::Rg8Sint, F::Rgba8Sint), SampleKind::Sint),
        E::U16 => (
            pick(F::R16Uint, F::Rg16Uint, F::Rgba16Uint),
            SampleKind::Uint,
        ),
        E::I16 => (
            pick(F::R16Sint, F::Rg16Sint, F::Rgba16Sint),
            SampleKind::Sint,
        ),
        E::U32 => (
            pick(F::R32Uint, F::Rg32Uint, F::Rgba32Uint),
            SampleKind::Uint,
        ),
        E::I32 => (
            pick(F::R32Sint, F::Rg32Sint, F::Rgba32Sint),
            SampleKind::Sint,
        ),
        E::F16 => (
            pick(F::R16Float, F::Rg16Float, F::Rgba16Float),
            SampleKind::Float,
        ),
        E::F32 | E::F64 => (
            pick(F::R32Float, F::Rg32Float, F::Rgba32Float),
            SampleKind::Float,
        ),
    }
}
