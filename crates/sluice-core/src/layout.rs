//! Layouts: everything the GPU side must know about a source's data before reading a byte.

use crate::element::ElementType;
use crate::error::SourceError;
use crate::region::{Region, Shape};

/// The most channels a sample may have (RGBA).
pub const MAX_CHANNELS: usize = 4;

/// The unit of change tracking and of lazy loading: the shape is cut into chunks of this size
/// (the last chunk on an axis may be smaller). Writes mark whole chunks dirty; the proxy merges
/// dirty chunks into few copies.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct ChunkGrid {
    chunk: [usize; 3],
}

impl ChunkGrid {
    /// A grid of chunks of `chunk` samples per axis (numpy order, padded like [`Region`]).
    ///
    /// Fails if any axis is zero.
    pub fn new(chunk: &[usize]) -> Result<Self, SourceError> {
        let padded = Shape::new(chunk)?.padded();
        Ok(ChunkGrid { chunk: padded })
    }

    /// The chunking sluice picks for host data of `shape`: 64 x 64 tiles for images, 32^3
    /// bricks for volumes, 1024-element runs for 1-D data. Small enough that a local edit
    /// uploads little, large enough that a 4096 x 4096 image has a few thousand chunks.
    pub fn default_for(shape: &Shape) -> Self {
        let want = match shape.ndim() {
            1 => [1, 1, 1024],
            2 => [1, 64, 64],
            _ => [32, 32, 32],
        };
        let dims = shape.padded();
        ChunkGrid {
            chunk: [
                want[0].min(dims[0]),
                want[1].min(dims[1]),
                want[2].min(dims[2]),
            ],
        }
    }

    /// Chunk size per axis, padded to three axes.
    pub fn chunk_size(&self) -> [usize; 3] {
        self.chunk
    }

    /// Number of chunks per axis covering `shape`.
    pub fn grid_size(&self, shape: &Shape) -> [usize; 3] {
        let d = shape.padded();
        [
            d[0].div_ceil(self.chunk[0]),
            d[1].div_ceil(self.chunk[1]),
            d[2].div_ceil(self.chunk[2]),
        ]
    }

    /// The samples of chunk `index` (chunk coordinates), clipped to `shape`.
    pub fn chunk_region(&self, index: [usize; 3], shape: &Shape) -> Region {
        let d = shape.padded();
        let mut r = Region::default();
        for a in 0..3 {
            r.origin[a] = index[a] * self.chunk[a];
            r.size[a] = self.chunk[a].min(d[a] - r.origin[a]);
        }
        r
    }

    /// The range of chunk coordinates (`start`, `end` exclusive per axis) that `region` touches.
    pub fn chunks_touched(&self, region: &Region) -> ([usize; 3], [usize; 3]) {
        let e = region.end();
        let mut lo = [0; 3];
        let mut hi = [0; 3];
        for a in 0..3 {
            lo[a] = region.origin[a] / self.chunk[a];
            hi[a] = e[a].div_ceil(self.chunk[a]);
        }
        (lo, hi)
    }
}

/// One level of a multiscale pyramid: its shape, how many level-0 samples one of its samples
/// spans on each axis, where it starts, and its own chunk grid.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Level {
    /// The level's shape.
    pub shape: Shape,
    /// Level-0 samples per sample of this level, per axis (numpy order, padded to three).
    pub downsample: [f64; 3],
    /// The level's chunk grid: the unit in which a lazy source loads and caches this level
    /// (a store's own chunking), and the unit of [`crate::ChunkKey`]s of this level.
    pub chunks: ChunkGrid,
    /// Where the corner of this level's first sample lies, in level-0 samples, per axis (numpy
    /// order, padded): OME-Zarr's `translation` divided by level 0's scale. Zero for a level
    /// aligned with level 0's corner.
    pub offset: [f64; 3],
}

impl Level {
    /// A level of `shape` whose samples span `downsample` level-0 samples per axis (numpy
    /// order, padded to three axes), with sluice's default chunk grid and no offset.
    pub fn new(shape: Shape, downsample: [f64; 3]) -> Self {
        Level {
            shape,
            downsample,
            chunks: ChunkGrid::default_for(&shape),
            offset: [0.0; 3],
        }
    }

    /// The same level with another chunk grid.
    pub fn with_chunks(mut self, chunks: ChunkGrid) -> Self {
        self.chunks = chunks;
        self
    }

    /// The same level starting at `offset` level-0 samples (numpy order, padded).
    pub fn with_offset(mut self, offset: [f64; 3]) -> Self {
        self.offset = offset;
        self
    }
}

/// What a source's data looks like: shape, element type, channels, chunk grid and levels.
#[derive(Clone, Debug, PartialEq)]
pub struct Layout {
    shape: Shape,
    element: ElementType,
    channels: usize,
    chunks: ChunkGrid,
    levels: Vec<Level>,
}

impl Layout {
    /// A single-level layout with sluice's default chunk grid.
    ///
    /// Fails if `channels` is not 1 to 4.
    pub fn new(shape: Shape, element: ElementType, channels: usize) -> Result<Self, SourceError> {
        if channels == 0 || channels > MAX_CHANNELS {
            return Err(SourceError::UnsupportedChannels { channels });
        }
        Ok(Layout {
            shape,
            element,
            channels,
            chunks: ChunkGrid::default_for(&shape),
            levels: vec![Level::new(shape, [1.0; 3])],
        })
    }

    /// The same layout with another chunk grid (level 0's too).
    pub fn with_chunks(mut self, chunks: ChunkGrid) -> Self {
        self.chunks = chunks;
        self.levels[0].chunks = chunks;
        self
    }

    /// The same layout with coarser levels after level 0 (finest first). Level 0 stays the
    /// layout's own shape.
    ///
    /// Fails with [`SourceError::InvalidLevel`] naming both shapes if a level is finer than
    /// the one before on any axis (more samples, or a smaller downsample), has another number
    /// of axes than level 0, or has a downsample or offset that is not finite (or a downsample
    /// below 1).
    pub fn with_levels(
        mut self,
        coarser: impl IntoIterator<Item = Level>,
    ) -> Result<Self, SourceError> {
        self.levels.truncate(1);
        for level in coarser {
            let index = self.levels.len();
            let previous = self.levels[index - 1];
            check_level(index, &level, &previous)?;
            self.levels.push(level);
        }
        Ok(self)
    }

    /// The shape of level 0.
    pub fn shape(&self) -> Shape {
        self.shape
    }

    /// The element type.
    pub fn element(&self) -> ElementType {
        self.element
    }

    /// Channels per sample, 1 to 4 (1 = scalar, 3 = RGB, 4 = RGBA).
    pub fn channels(&self) -> usize {
        self.channels
    }

    /// The chunk grid of level 0.
    pub fn chunks(&self) -> ChunkGrid {
        self.chunks
    }

    /// The multiscale levels, level 0 first (always at least one).
    pub fn levels(&self) -> &[Level] {
        &self.levels
    }

    /// Bytes per sample (element size times channels).
    pub fn sample_bytes(&self) -> usize {
        self.element.size() * self.channels
    }

    /// Bytes of one tightly packed row of the fastest axis.
    pub fn row_bytes(&self) -> usize {
        self.shape.width() * self.sample_bytes()
    }

    /// Bytes of the whole level-0 data, tightly packed.
    pub fn total_bytes(&self) -> usize {
        self.shape.len() * self.sample_bytes()
    }

    /// Bytes of `region` tightly packed.
    pub fn region_bytes(&self, region: &Region) -> usize {
        region.len() * self.sample_bytes()
    }
}

/// Checks that `level` (number `index`) is no finer than `previous` and is well formed.
fn check_level(index: usize, level: &Level, previous: &Level) -> Result<(), SourceError> {
    let invalid = |reason: String| SourceError::InvalidLevel {
        level: index,
        reason,
    };
    if level.shape.ndim() != previous.shape.ndim() {
        return Err(invalid(format!(
            "shape {} has {} axes but level {} (shape {}) has {}",
            level.shape,
            level.shape.ndim(),
            index - 1,
            previous.shape,
            previous.shape.ndim()
        )));
    }
    let (s, p) = (level.shape.padded(), previous.shape.padded());
    let finer_shape = (0..3).any(|a| s[a] > p[a]);
    let finer_scale = (0..3).any(|a| level.downsample[a] < previous.downsample[a]);
    if finer_shape || finer_scale {
        return Err(invalid(format!(
            "shape {} (downsample {:?}) is finer than level {}'s shape {} (downsample {:?}); levels must get no finer from one to the next",
            level.shape,
            level.downsample,
            index - 1,
            previous.shape,
            previous.downsample
        )));
    }
    if level.downsample.iter().any(|d| !d.is_finite() || *d < 1.0)
        || level.offset.iter().any(|o| !o.is_finite())
    {
        return Err(invalid(format!(
            "shape {}: downsample {:?} must be finite and at least 1, offset {:?} finite",
            level.shape, level.downsample, level.offset
        )));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn default_chunks_clip_to_small_shapes() {
        let s = Shape::d2(10, 300).unwrap();
        let g = ChunkGrid::default_for(&s);
        assert_eq!(g.chunk_size(), [1, 10, 64]);
        assert_eq!(g.grid_size(&s), [1, 1, 5]);
        assert_eq!(g.chunk_region([0, 0, 4], &s), Region::d2(0, 256, 10, 44));
    }

    #[test]
    fn chunks_touched_rounds_outwards() {
        let g = ChunkGrid::new(&[64, 64]).unwrap();
        let (lo, hi) = g.chunks_touched(&Region::d2(63, 64, 2, 64));
        assert_eq!((lo, hi), ([0, 0, 1], [1, 2, 2]));
    }

    #[test]
    fn layout_rejects_channel_counts() {
        let s = Shape::d2(2, 2).unwrap();
        for c in [0, 5] {
            let e = Layout::new(s, ElementType::U8, c).unwrap_err();
            assert!(e.to_string().contains(&c.to_string()), "{e}");
        }
        assert_eq!(Layout::new(s, ElementType::F32, 3).unwrap().row_bytes(), 24);
    }

    #[test]
    fn levels_finer_than_the_one_before_are_refused_naming_both_shapes() {
        let base = Layout::new(Shape::d2(100, 200).unwrap(), ElementType::U8, 1).unwrap();
        let half = Level::new(Shape::d2(50, 100).unwrap(), [1.0, 2.0, 2.0]);
        let ok = base.clone().with_levels([half]).unwrap();
        assert_eq!(ok.levels().len(), 2);
        let wider = Level::new(Shape::d2(50, 300).unwrap(), [1.0, 2.0, 2.0]);
        let e = base.clone().with_levels([wider]).unwrap_err().to_string();
        assert!(e.contains("(50, 300)") && e.contains("(100, 200)"), "{e}");
        let quarter = Level::new(Shape::d2(25, 50).unwrap(), [1.0, 4.0, 4.0]);
        let e = base
            .clone()
            .with_levels([quarter, half])
            .unwrap_err()
            .to_string();
        assert!(e.contains("level 2") && e.contains("(25, 50)"), "{e}");
        let nan = Level::new(Shape::d2(50, 100).unwrap(), [1.0, f64::NAN, 2.0]);
        assert!(base.clone().with_levels([nan]).is_err());
        let volume = Level::new(Shape::new(&[1, 50, 100]).unwrap(), [1.0, 2.0, 2.0]);
        assert!(base.with_levels([volume]).is_err());
    }
}
