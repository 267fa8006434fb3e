//! Lazy pyramids: the levels of a 2x-per-axis mean pyramid, and the mean of a chunk computed
//! from the level before.

use crate::conversion::read_element;
use crate::element::ElementType;
use crate::error::SourceError;
use crate::layout::{ChunkGrid, Layout, Level};
use crate::region::{Region, Shape};

/// Samples of the level before per sample, per axis (numpy order, padded): 2 on spatial axes.
pub(crate) fn factor(ndim: usize) -> [usize; 3] {
    match ndim {
        1 => [1, 1, 2],
        2 => [1, 2, 2],
        _ => [2, 2, 2],
    }
}

/// The coarser levels (1 to `levels - 1`) of a pyramid over `base`'s level 0, each in chunks of
/// level 0's chunk size.
pub(crate) fn levels(base: &Layout, levels: usize) -> Result<Vec<Level>, SourceError> {
    let shape0 = base.shape();
    let f = factor(shape0.ndim());
    let mut out = Vec::new();
    let mut dims = shape0.padded();
    let mut downsample = [1.0f64; 3];
    for level in 1..levels.max(1) {
        if (0..3).all(|a| f[a] == 1 || dims[a] == 1) {
            return Err(SourceError::InvalidLevel {
                level,
                reason: format!(
                    "a pyramid of {levels} levels over shape {shape0} is too deep: level {} is already one sample per axis",
                    level - 1
                ),
            });
        }
        for a in 0..3 {
            dims[a] = dims[a].div_ceil(f[a]);
            downsample[a] *= f[a] as f64;
        }
        let shape = Shape::new(&dims[3 - shape0.ndim()..])?;
        let chunk = base.chunks().chunk_size();
        let grid = ChunkGrid::new(&chunk[3 - shape0.ndim()..])?;
        out.push(Level::new(shape, downsample).with_chunks(grid));
    }
    if levels == 0 {
        return Err(SourceError::InvalidLevel {
            level: 0,
            reason: format!("a pyramid over shape {shape0} needs at least 1 level, 0 asked"),
        });
    }
    Ok(out)
}

/// The samples of the level before that `region` covers, clipped to that level's shape.
pub(crate) fn finer_region(region: &Region, factor: [usize; 3], finer: &Shape) -> Region {
    let d = finer.padded();
    let mut r = Region::default();
    for a in 0..3 {
        let lo = (region.origin[a] * factor[a]).min(d[a]);
        let hi = ((region.origin[a] + region.size[a]) * factor[a]).min(d[a]);
        r.origin[a] = lo;
        r.size[a] = hi - lo;
    }
    r
}

/// Sums and counts of the finer samples each coarse sample covers.
pub(crate) struct Accumulator {
    region: Region,
    element: ElementType,
    channels: usize,
    sums: Vec<f64>,
    counts: Vec<u32>,
}

impl Accumulator {
    /// An accumulator for the coarse `region`.
    pub(crate) fn new(region: Region, element: ElementType, channels: usize) -> Self {
        Accumulator {
            region,
            element,
            channels,
            sums: vec![0.0; region.len() * channels],
            counts: vec![0; region.len()],
        }
    }

    fn coarse_index(&self, at: [usize; 3], factor: [usize; 3]) -> usize {
        let r = &self.region;
        let c = [
            at[0] / factor[0] - r.origin[0],
            at[1] / factor[1] - r.origin[1],
            at[2] / factor[2] - r.origin[2],
        ];
        (c[0] * r.size[1] + c[1]) * r.size[2] + c[2]
    }

    /// Adds the samples of `part` (finer coordinates) of a chunk holding `chunk_region`.
    pub(crate) fn add(
        &mut self,
        bytes: &[u8],
        chunk_region: &Region,
        part: &Region,
        factor: [usize; 3],
    ) {
        let es = self.element.size();
        let sb = es * self.channels;
        self.for_each(part, factor, |acc, at, i| {
            let rel = [
                at[0] - chunk_region.origin[0],
                at[1] - chunk_region.origin[1],
                at[2] - chunk_region.origin[2],
            ];
            let s = ((rel[0] * chunk_region.size[1] + rel[1]) * chunk_region.size[2] + rel[2]) * sb;
            for c in 0..acc.channels {
                acc.sums[i * acc.channels + c] += read_element(acc.element, &bytes[s + c * es..]);
            }
        });
    }

    /// Adds `part` (finer coordinates) as samples of the value `fill`.
    pub(crate) fn add_fill(&mut self, fill: &[u8], part: &Region, factor: [usize; 3]) {
        let es = self.element.size();
        let values: Vec<f64> = (0..self.channels)
            .map(|c| read_element(self.element, &fill[c * es..]))
            .collect();
        self.for_each(part, factor, |acc, _, i| {
            for (c, v) in values.iter().enumerate() {
                acc.sums[i * acc.channels + c] += v;
            }
        });
    }

    fn for_each(
        &mut self,
        part: &Region,
        factor: [usize; 3],
        mut f: impl FnMut(&mut Self, [usize; 3], usize),
    ) {
        for z in part.origin[0]..part.origin[0] + part.size[0] {
            for y in part.origin[1]..part.origin[1] + part.size[1] {
                for x in part.origin[2]..part.origin[2] + part.size[2] {
                    let i = self.coarse_index([z, y, x], factor);
                    self.counts[i] += 1;
                    f(self, [z, y, x], i);
                }
            }
        }
    }

    /// Writes the means, tightly packed, into `dst`.
    pub(crate) fn write(&self, dst: &mut [u8]) {
        let es = self.element.size();
        for (i, count) in self.counts.iter().enumerate() {
            for c in 0..self.channels {
                let j = i * self.channels + c;
                let mean = self.sums[j] / f64::from((*count).max(1));
                write_element(self.element, mean, &mut dst[j * es..(j + 1) * es]);
            }
        }
    }
}

/// Stores `v` as one little-endian element, integers rounded and clamped to their range.
pub(crate) fn write_element(element: ElementType, v: f64, out: &mut [u8]) {
    fn int(v: f64, lo: f64, hi: f64) -> f64 {
        v.round().clamp(lo, hi)
    }
    match element {
        ElementType::U8 => out[0] = int(v, 0.0, 255.0) as u8,
        ElementType::I8 => out[0] = int(v, -128.0, 127.0) as i8 as u8,
        ElementType::U16 => out.copy_from_slice(&(int(v, 0.0, 65535.0) as u16).to_le_bytes()),
        ElementType::I16 => out.copy_from_slice(&(int(v, -32768.0, 32767.0) as i16).to_le_bytes()),
        ElementType::U32 => {
            out.copy_from_slice(&(int(v, 0.0, u32::MAX as f64) as u32).to_le_bytes())
        }
        ElementType::I32 => {
            out.copy_from_slice(&(int(v, i32::MIN as f64, i32::MAX as f64) as i32).to_le_bytes())
        }
        ElementType::F16 => out.copy_from_slice(&half::f16::from_f64(v).to_le_bytes()),
        ElementType::F32 => out.copy_from_slice(&(v as f32).to_le_bytes()),
        ElementType::F64 => out.copy_from_slice(&v.to_le_bytes()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn levels_halve_until_one_sample() {
        let base = Layout::new(Shape::d2(5, 8).unwrap(), ElementType::U8, 1)
            .unwrap()
            .with_chunks(ChunkGrid::new(&[2, 2]).unwrap());
        let l = levels(&base, 4).unwrap();
        let shapes: Vec<_> = l.iter().map(|l| l.shape.padded()).collect();
        assert_eq!(shapes, vec![[1, 3, 4], [1, 2, 2], [1, 1, 1]]);
        assert_eq!(l[2].downsample, [1.0, 8.0, 8.0]);
        let e = levels(&base, 5).unwrap_err().to_string();
        assert!(e.contains("(5, 8)") && e.contains("level 3"), "{e}");
        assert!(levels(&base, 0).is_err());
    }

    #[test]
    fn elements_round_and_clamp() {
        let mut b = [0u8; 2];
        write_element(ElementType::U8, 2.5, &mut b[..1]);
        assert_eq!(b[0], 3);
        write_element(ElementType::I16, -1e9, &mut b);
        assert_eq!(i16::from_le_bytes(b), i16::MIN);
        write_element(ElementType::F16, 0.5, &mut b);
        assert_eq!(half::f16::from_le_bytes(b).to_f32(), 0.5);
    }
}
