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

/// What a vertex attribute is stored as on the GPU (in storage buffers read by the vertex
/// shader): 32-bit floats with 1 to 4 channels, packed RGBA8 colours, or 32-bit indices.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum BufferFormat {
    /// `channels` f32 per element; integer and f16/f64 sources are converted (values cast).
    F32 {
        /// Channels per element, 1 to 4.
        channels: usize,
    },
    /// One u32 per element holding RGBA8 (R in the low byte): u8 sources as they are (alpha
    /// 255 when absent), float sources scaled by 255 and clamped.
    Rgba8,
    /// One u32 per element: an index. Unsigned and non-negative signed integers only.
    U32,
}

impl BufferFormat {
    /// Bytes per element on the GPU.
    pub fn element_bytes(&self) -> usize {
        match self {
            BufferFormat::F32 { channels } => 4 * channels,
            BufferFormat::Rgba8 | BufferFormat::U32 => 4,
        }
    }

    /// Converts `samples` elements of `layout`'s type from `src` into `dst` in this format.
    ///
    /// Fails for an index that is negative or not an integer type.
    pub fn convert_row(
        &self,
        layout: &Layout,
        src: &[u8],
        dst: &mut [u8],
        samples: usize,
    ) -> Result<(), String> {
        let sc = layout.channels();
        let element = layout.element();
        let es = element.size();
        let value = |s: &[u8], c: usize| -> f64 { read_element(element, &s[c * es..(c + 1) * es]) };
        match *self {
            BufferFormat::F32 { channels } => {
                for (s, d) in src
                    .chunks_exact(sc * es)
                    .zip(dst.chunks_exact_mut(channels * 4))
                    .take(samples)
                {
                    for c in 0..channels {
                        let v = if c < sc { value(s, c) as f32 } else { 0.0 };
                        d[c * 4..c * 4 + 4].copy_from_slice(&v.to_le_bytes());
                    }
                }
            }
            BufferFormat::Rgba8 => {
                for (s, d) in src
                    .chunks_exact(sc * es)
                    .zip(dst.chunks_exact_mut(4))
                    .take(samples)
                {
                    for c in 0..4 {
                        d[c] = if c < sc {
                            match element {
                                ElementType::U8 => s[c],
                                e if e.is_float() => {
                                    (value(s, c) * 255.0).round().clamp(0.0, 255.0) as u8
                                }
                                _ => value(s, c).clamp(0.0, 255.0) as u8,
                            }
                        } else {
                            255
                        };
                    }
                }
            }
            BufferFormat::U32 => {
                if element.is_float() {
                    return Err(format!("indices must be integers, not {element}"));
                }
                for (s, d) in src
                    .chunks_exact(es)
                    .zip(dst.chunks_exact_mut(4))
                    .take(samples * sc)
                {
                    let v = read_element(element, s);
                    if v < 0.0 {
                        return Err(format!("index {v} is negative"));
                    }
                    d.copy_from_slice(&(v as u32).to_le_bytes());
                }
            }
        }
        Ok(())
    }
}

/// One little-endian element as f64.
pub fn read_element(element: ElementType, b: &[u8]) -> f64 {
    match element {
        ElementType::U8 => b[0] as f64,
        ElementType::I8 => b[0] as i8 as f64,
        ElementType::U16 => u16::from_le_bytes([b[0], b[1]]) as f64,
        ElementType::I16 => i16::from_le_bytes([b[0], b[1]]) as f64,
        ElementType::U32 => u32::from_le_bytes([b[0], b[1], b[2], b[3]]) as f64,
        ElementType::I32 => i32::from_le_bytes([b[0], b[1], b[2], b[3]]) as f64,
        ElementType::F16 => half::f16::from_le_bytes([b[0], b[1]]).to_f64(),
        ElementType::F32 => f32::from_le_bytes([b[0], b[1], b[2], b[3]]) as f64,
        ElementType::F64 => f64::from_le_bytes([b[0], b[1], b[2], b[3], b[4], b[5], b[6], b[7]]),
    }
}

#[cfg(test)]
mod buffer_tests {
    use super::*;
    use crate::region::Shape;

    fn layout(element: ElementType, channels: usize, n: usize) -> Layout {
        Layout::new(Shape::new(&[n]).unwrap(), element, channels).unwrap()
    }

    #[test]
    fn attributes_become_f32_and_rgba8() {
        let l = layout(ElementType::F64, 3, 1);
        let src: Vec<u8> = [1.5f64, -2.0, 3.25]
            .iter()
            .flat_map(|v| v.to_le_bytes())
            .collect();
        let mut dst = [0u8; 12];
        BufferFormat::F32 { channels: 3 }
            .convert_row(&l, &src, &mut dst, 1)
            .unwrap();
        let out: Vec<f32> = dst
            .chunks(4)
            .map(|b| f32::from_le_bytes(b.try_into().unwrap()))
            .collect();
        assert_eq!(out, vec![1.5, -2.0, 3.25]);

        let rgb = layout(ElementType::U8, 3, 2);
        let mut dst = [0u8; 8];
        BufferFormat::Rgba8
            .convert_row(&rgb, &[1, 2, 3, 4, 5, 6], &mut dst, 2)
            .unwrap();
        assert_eq!(dst, [1, 2, 3, 255, 4, 5, 6, 255]);
        let rgbf = layout(ElementType::F32, 4, 1);
        let src: Vec<u8> = [0.5f32, 1.5, -1.0, 1.0]
            .iter()
            .flat_map(|v| v.to_le_bytes())
            .collect();
        let mut dst = [0u8; 4];
        BufferFormat::Rgba8
            .convert_row(&rgbf, &src, &mut dst, 1)
            .unwrap();
        assert_eq!(dst, [128, 255, 0, 255]);
    }

    #[test]
    fn indices_must_be_non_negative_integers() {
        let i = layout(ElementType::I32, 1, 2);
        let src: Vec<u8> = [3i32, -1].iter().flat_map(|v| v.to_le_bytes()).collect();
        let mut dst = [0u8; 8];
        let e = BufferFormat::U32
            .convert_row(&i, &src, &mut dst, 2)
            .unwrap_err();
        assert!(e.contains("-1"), "{e}");
        let f = layout(ElementType::F32, 1, 1);
        assert!(BufferFormat::U32
            .convert_row(&f, &[0; 4], &mut dst, 1)
            .is_err());
        let u16s = layout(ElementType::U16, 3, 1);
        let src: Vec<u8> = [7u16, 8, 9].iter().flat_map(|v| v.to_le_bytes()).collect();
        let mut dst = [0u8; 12];
        BufferFormat::U32
            .convert_row(&u16s, &src, &mut dst, 1)
            .unwrap();
        assert_eq!(dst[8], 9);
    }
}
