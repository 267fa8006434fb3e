//! GPU texture formats for upload formats, and how shaders read them.
//!
//! Host data keeps its bytes on the way to the GPU; the texture format only decides how the
//! shader sees them. Where a format the hardware can filter holds the data exactly, it is
//! used, so that interpolation is one hardware sample instead of 4 (bilinear) or 8
//! (trilinear) loads:
//!
//! - u8 as `*8Unorm` (the shader multiplies by 255: the same integers);
//! - u16 as `*16Unorm` where the device has `TEXTURE_FORMAT_16BIT_NORM` (times 65535);
//! - f16 as `*16Float` (always filterable);
//! - f32 (and f64, converted to f32) as `*32Float`, filterable where the device has
//!   `FLOAT32_FILTERABLE`.
//!
//! Everything else (i8, i16, u32, i32, u16 without the feature, f32 without it), and every
//! device-resident source (whose producers write the integer formats), is an integer or
//! unfiltered float texture read with `textureLoad` and interpolated by hand in the shader.

use sluice_core::{ElementType, UploadFormat};

/// How a shader reads a texture: the WGSL sampled type, and whether the hardware can
/// interpolate it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub(crate) enum SampleKind {
    /// 32-bit floats the device cannot filter: loaded and interpolated by hand.
    Float,
    /// Floats the device filters (f16; f32 with `FLOAT32_FILTERABLE`); samples may be NaN.
    FilterFloat,
    /// u8 as unsigned normalized: the shader reads value / 255; never NaN.
    Unorm8,
    /// u16 as unsigned normalized: the shader reads value / 65535; never NaN.
    Unorm16,
    Uint,
    Sint,
}

impl SampleKind {
    /// Every kind, for tests that build each shader variant.
    #[cfg(test)]
    pub const ALL: [SampleKind; 6] = [
        SampleKind::Float,
        SampleKind::FilterFloat,
        SampleKind::Unorm8,
        SampleKind::Unorm16,
        SampleKind::Uint,
        SampleKind::Sint,
    ];

    pub fn wgsl(self) -> &'static str {
        match self {
            SampleKind::Float
            | SampleKind::FilterFloat
            | SampleKind::Unorm8
            | SampleKind::Unorm16 => "f32",
            SampleKind::Uint => "u32",
            SampleKind::Sint => "i32",
        }
    }

    pub fn texture_sample_type(self) -> wgpu::TextureSampleType {
        match self {
            SampleKind::Float => wgpu::TextureSampleType::Float { filterable: false },
            SampleKind::FilterFloat | SampleKind::Unorm8 | SampleKind::Unorm16 => {
                wgpu::TextureSampleType::Float { filterable: true }
            }
            SampleKind::Uint => wgpu::TextureSampleType::Uint,
            SampleKind::Sint => wgpu::TextureSampleType::Sint,
        }
    }

    /// Whether a linear sampler may read it.
    pub fn filterable(self) -> bool {
        matches!(
            self,
            SampleKind::FilterFloat | SampleKind::Unorm8 | SampleKind::Unorm16
        )
    }

    /// What a texel read from the shader is multiplied by to give the data's value.
    pub fn value_scale(self) -> f32 {
        match self {
            SampleKind::Unorm8 => u8::MAX as f32,
            SampleKind::Unorm16 => u16::MAX as f32,
            _ => 1.0,
        }
    }

    /// Whether texels can be NaN (float textures).
    pub fn may_be_nan(self) -> bool {
        matches!(self, SampleKind::Float | SampleKind::FilterFloat)
    }
}

/// The texture format holding `format`, and how it is sampled. `host`: the source's data is
/// in host memory or in host pages the device imported (other device-resident sources keep
/// the integer formats their producers write);
/// `features`: the device's, which decide whether 16-bit normalized and filterable 32-bit
/// float textures are used.
pub(crate) fn texture_format(
    format: &UploadFormat,
    host: bool,
    features: wgpu::Features,
) -> (wgpu::TextureFormat, SampleKind) {
    use wgpu::TextureFormat as F;
    use ElementType as E;
    let pick = |one: F, two: F, four: F| match format.channels {
        1 => one,
        2 => two,
        _ => four,
    };
    match format.element {
        E::U8 if host => (
            pick(F::R8Unorm, F::Rg8Unorm, F::Rgba8Unorm),
            SampleKind::Unorm8,
        ),
        E::U8 => (pick(F::R8Uint, F::Rg8Uint, F::Rgba8Uint), SampleKind::Uint),
        E::I8 => (pick(F::R8Sint, F::Rg8Sint, F::Rgba8Sint), SampleKind::Sint),
        E::U16 if host && features.contains(wgpu::Features::TEXTURE_FORMAT_16BIT_NORM) => (
            pick(F::R16Unorm, F::Rg16Unorm, F::Rgba16Unorm),
            SampleKind::Unorm16,
        ),
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
            SampleKind::FilterFloat,
        ),
        E::F32 | E::F64 => {
            let kind = if features.contains(wgpu::Features::FLOAT32_FILTERABLE) {
                SampleKind::FilterFloat
            } else {
                SampleKind::Float
            };
            (pick(F::R32Float, F::Rg32Float, F::Rgba32Float), kind)
        }
    }
}

/// The device features sluice asks for where the adapter has them: filtering of 32-bit
/// float textures and 16-bit normalized textures, so that f32 and u16 data are sampled by
/// the hardware.
pub(crate) fn sampling_features(adapter: wgpu::Features) -> wgpu::Features {
    adapter & (wgpu::Features::FLOAT32_FILTERABLE | wgpu::Features::TEXTURE_FORMAT_16BIT_NORM)
}

#[cfg(test)]
mod tests {
    use super::*;
    use sluice_core::{ElementType, Layout, Shape, UploadFormat};

    fn upload(element: ElementType, channels: usize) -> UploadFormat {
        let shape = Shape::new(&[4, 4]).expect("valid shape");
        UploadFormat::for_layout(&Layout::new(shape, element, channels).expect("valid layout"))
    }

    #[test]
    fn host_u8_is_unorm_and_device_u8_stays_integer() {
        let f = wgpu::Features::empty();
        assert_eq!(
            texture_format(&upload(ElementType::U8, 1), true, f),
            (wgpu::TextureFormat::R8Unorm, SampleKind::Unorm8)
        );
        assert_eq!(
            texture_format(&upload(ElementType::U8, 4), false, f),
            (wgpu::TextureFormat::Rgba8Uint, SampleKind::Uint)
        );
    }

    #[test]
    fn f32_and_u16_filter_only_with_the_features() {
        let none = wgpu::Features::empty();
        let all = sampling_features(wgpu::Features::all());
        assert_eq!(
            texture_format(&upload(ElementType::F32, 1), true, none).1,
            SampleKind::Float
        );
        assert_eq!(
            texture_format(&upload(ElementType::F32, 1), true, all).1,
            SampleKind::FilterFloat
        );
        assert_eq!(
            texture_format(&upload(ElementType::U16, 1), true, none).1,
            SampleKind::Uint
        );
        assert_eq!(
            texture_format(&upload(ElementType::U16, 2), true, all),
            (wgpu::TextureFormat::Rg16Unorm, SampleKind::Unorm16)
        );
        assert!(!SampleKind::Unorm8.may_be_nan() && SampleKind::FilterFloat.may_be_nan());
    }
}
