//! Element types: what one channel of one sample is stored as.

use std::fmt;

/// The scalar type of one channel of one sample, as stored by a source.
///
/// Every source stores elements little-endian and tightly packed; channels are interleaved
/// (`RGBRGB...`). The proxy layer converts to what the GPU can sample where needed.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum ElementType {
    /// Unsigned 8-bit integer.
    U8,
    /// Signed 8-bit integer.
    I8,
    /// Unsigned 16-bit integer.
    U16,
    /// Signed 16-bit integer.
    I16,
    /// Unsigned 32-bit integer.
    U32,
    /// Signed 32-bit integer.
    I32,
    /// IEEE half-precision float.
    F16,
    /// IEEE single-precision float.
    F32,
    /// IEEE double-precision float (converted to `f32` on upload).
    F64,
}

impl ElementType {
    /// Size of one element in bytes.
    pub const fn size(self) -> usize {
        match self {
            ElementType::U8 | ElementType::I8 => 1,
            ElementType::U16 | ElementType::I16 | ElementType::F16 => 2,
            ElementType::U32 | ElementType::I32 | ElementType::F32 => 4,
            ElementType::F64 => 8,
        }
    }

    /// Whether the type is a floating-point type (and so may hold NaN or infinities).
    pub const fn is_float(self) -> bool {
        matches!(self, ElementType::F16 | ElementType::F32 | ElementType::F64)
    }

    /// The numpy type string (`"<u2"`, `"|u1"`, ...) of this type, little-endian.
    pub const fn numpy_descr(self) -> &'static str {
        match self {
            ElementType::U8 => "|u1",
            ElementType::I8 => "|i1",
            ElementType::U16 => "<u2",
            ElementType::I16 => "<i2",
            ElementType::U32 => "<u4",
            ElementType::I32 => "<i4",
            ElementType::F16 => "<f2",
            ElementType::F32 => "<f4",
            ElementType::F64 => "<f8",
        }
    }

    /// The natural value range used as default contrast limits: the type's full range for
    /// integers, `[0, 1]` for floats.
    pub fn default_range(self) -> [f64; 2] {
        match self {
            ElementType::U8 => [0.0, u8::MAX as f64],
            ElementType::I8 => [i8::MIN as f64, i8::MAX as f64],
            ElementType::U16 => [0.0, u16::MAX as f64],
            ElementType::I16 => [i16::MIN as f64, i16::MAX as f64],
            ElementType::U32 => [0.0, u32::MAX as f64],
            ElementType::I32 => [i32::MIN as f64, i32::MAX as f64],
            ElementType::F16 | ElementType::F32 | ElementType::F64 => [0.0, 1.0],
        }
    }
}

impl fmt::Display for ElementType {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let name = match self {
            ElementType::U8 => "u8",
            ElementType::I8 => "i8",
            ElementType::U16 => "u16",
            ElementType::I16 => "i16",
            ElementType::U32 => "u32",
            ElementType::I32 => "i32",
            ElementType::F16 => "f16",
            ElementType::F32 => "f32",
            ElementType::F64 => "f64",
        };
        f.write_str(name)
    }
}

/// A Rust type that sources can store: one of the [`ElementType`]s.
///
/// Implemented for `u8`, `i8`, `u16`, `i16`, `u32`, `i32`, [`half::f16`], `f32` and `f64`.
/// Sealed: the GPU side only knows how to show these.
pub trait Element: bytemuck::Pod + Send + Sync + 'static + sealed::Sealed {
    /// The element type tag of `Self`.
    const TYPE: ElementType;
}

mod sealed {
    pub trait Sealed {}
}

macro_rules! impl_element {
    ($($t:ty => $e:ident),* $(,)?) => {$(
        impl sealed::Sealed for $t {}
        impl Element for $t {
            const TYPE: ElementType = ElementType::$e;
        }
    )*};
}

impl_element!(
    u8 => U8, i8 => I8, u16 => U16, i16 => I16, u32 => U32, i32 => I32,
    half::f16 => F16, f32 => F32, f64 => F64,
);
