//! Conversion on the way to the GPU: what sample format is uploaded for a layout, and how a
//! row of source samples becomes a row of uploaded samples.
//!
//! GPUs have no 3-channel formats and few 64-bit ones: RGB is padded to RGBA (alpha at the
//! type's maximum, or 1.0 for floats) and `f64` is narrowed to `f32` (values beyond `f32`'s
//! range become infinities, NaN stays NaN). Everything else is uploaded as stored. Conversion
//! writes into the upload buffer only; the source's bytes are never modified.

use crate::element::ElementType;
use crate::layout::Layout;

/// The sample format uploaded for a source layout.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct UploadFormat {
    /// Element type after conversion.
    pub element: ElementType,
    /// Channels after padding: 1, 2 or 4.
    pub channels: usize,
    source_element: ElementType,
    source_channels: usize,
}

impl UploadFormat {
    /// The upload format of `layout`.
    pub fn for_layout(layout: &Layout) -> Self {
        let element = match layout.element() {
            ElementType::F64 => ElementType::F32,
            e => e,
        };
        let channels = if layout.channels() == 3 {
            4
        } else {
            layout.channels()
        };
        UploadFormat {
            element,
            channels,
            source_element: layout.element(),
            source_channels: layout.channels(),
        }
    }

    /// Bytes of one uploaded sample.
    pub fn sample_bytes(&self) -> usize {
        self.element.size() * self.channels
    }

    /// Whether rows must be converted (otherwise they are copied as they are).
    pub fn converts(&self) -> bool {
        self.element != self.source_element || self.channels != self.source_channels
    }

    /// Converts one row of `samples` source samples from `src` into `dst`.
    ///
    /// `src` holds `samples` samples of the source layout, `dst` room for as many uploaded
    /// samples.
    pub fn convert_row(&self, src: &[u8], dst: &mut [u8], samples: usize) {
        let sc = self.source_channels;
        let dc = self.channels;
        match self.source_element {
            ElementType::F64 => {
                let src = &src[..samples * sc * 8];
                let dst = &mut dst[..samples * dc * 4];
                for (s, d) in src.chunks_exact(sc * 8).zip(dst.chunks_exact_mut(dc * 4)) {
                    for c in 0..dc {
                        let v = if c < sc {
                            let b: [u8; 8] = s[c * 8..c * 8 + 8].try_into().unwrap_or_default();
                            f64::from_le_bytes(b) as f32
                        } else {
                            1.0
                        };
                        d[c * 4..c * 4 + 4].copy_from_slice(&v.to_le_bytes());
                    }
                }
            }
            element => {
                let es = element.size();
                let alpha = opaque_alpha(element);
                let src = &src[..samples * sc * es];
                let dst = &mut dst[..samples * dc * es];
                for (s, d) in src.chunks_exact(sc * es).zip(dst.chunks_exact_mut(dc * es)) {
                    d[..sc * es].copy_from_slice(s);
                    for c in sc..dc {
                        d[c * es..(c + 1) * es].copy_from_slice(&alpha[..es]);
                    }
                }
            }
        }
    }
}

/// Little-endian bytes of an opaque alpha value for `element`.
fn opaque_alpha(element: ElementType) -> [u8; 8] {
    let mut out = [0u8; 8];
    match element {
        ElementType::U8 => out[0] = u8::MAX,
        ElementType::I8 => out[0] = i8::MAX as u8,
        ElementType::U16 => out[..2].copy_from_slice(&u16::MAX.to_le_bytes()),
        ElementType::I16 => out[..2].copy_from_slice(&i16::MAX.to_le_bytes()),
        ElementType::U32 => out[..4].copy_from_slice(&u32::MAX.to_le_bytes()),
        ElementType::I32 => out[..4].copy_from_slice(&i32::MAX.to_le_bytes()),
        ElementType::F16 => out[..2].copy_from_slice(&half::f16::ONE.to_le_bytes()),
        ElementType::F32 => out[..4].copy_from_slice(&1.0f32.to_le_bytes()),
        ElementType::F64 => out.copy_from_slice(&1.0f64.to_le_bytes()),
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::region::Shape;

    fn layout(element: ElementType, channels: usize) -> Layout {
        Layout::new(Shape::d2(1, 2).unwrap(), element, channels).unwrap()
    }

    #[test]
    fn rgb_is_padded_with_opaque_alpha() {
        let f = UploadFormat::for_layout(&layout(ElementType::U8, 3));
        assert_eq!((f.channels, f.converts()), (4, true));
        let mut dst = [0u8; 8];
        f.convert_row(&[1, 2, 3, 4, 5, 6], &mut dst, 2);
        assert_eq!(dst, [1, 2, 3, 255, 4, 5, 6, 255]);

        let f = UploadFormat::for_layout(&layout(ElementType::I16, 3));
        let src: Vec<u8> = [-1i16, 2, 3].iter().flat_map(|v| v.to_le_bytes()).collect();
        let mut dst = [0u8; 8];
        f.convert_row(&src, &mut dst, 1);
        let out: Vec<i16> = dst
            .chunks(2)
            .map(|b| i16::from_le_bytes([b[0], b[1]]))
            .collect();
        assert_eq!(out, vec![-1, 2, 3, i16::MAX]);
    }

    #[test]
    fn f64_narrows_to_f32_keeping_nan_and_inf() {
        let f = UploadFormat::for_layout(&layout(ElementType::F64, 1));
        assert_eq!(f.element, ElementType::F32);
        let vals = [0.25f64, f64::NAN, 1e300, -f64::INFINITY];
        let src: Vec<u8> = vals.iter().flat_map(|v| v.to_le_bytes()).collect();
        let mut dst = [0u8; 16];
        f.convert_row(&src, &mut dst, 4);
        let out: Vec<f32> = dst
            .chunks(4)
            .map(|b| f32::from_le_bytes(b.try_into().unwrap()))
            .collect();
        assert_eq!(out[0], 0.25);
        assert!(out[1].is_nan());
        assert_eq!(out[2], f32::INFINITY);
        assert_eq!(out[3], f32::NEG_INFINITY);
    }

    #[test]
    fn native_formats_pass_through() {
        for (e, c) in [
            (ElementType::U8, 4),
            (ElementType::F32, 1),
            (ElementType::U16, 2),
        ] {
            assert!(!UploadFormat::for_layout(&layout(e, c)).converts());
        }
    }
}
