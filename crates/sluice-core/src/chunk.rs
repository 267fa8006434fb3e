//! The chunk vocabulary: which chunk, how much it is wanted, and where it stands.
//!
//! A consumer (one renderer's view of a source) states, every frame, the whole set of chunks it
//! wants with [`DataSource::request_chunks`](crate::DataSource::request_chunks): each a
//! [`ChunkWant`] of a [`ChunkKey`], a [`Tier`] and a distance from the view centre. The new set
//! replaces the consumer's previous one; chunks that left it and have not started loading are
//! dropped (that is the cancellation). [`ChunkStatus`] says where one chunk stands, and
//! [`ChunkProgress`] sums a consumer's wanted set up.

use std::cmp::Ordering;
use std::fmt;
use std::sync::Arc;

use crate::error::SourceError;
use crate::layout::Layout;
use crate::region::Region;

/// One chunk of one level: the level and the chunk's coordinates in that level's
/// [`ChunkGrid`](crate::ChunkGrid) (numpy order, padded to three axes).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct ChunkKey {
    /// The multiscale level (0 = finest).
    pub level: usize,
    /// Chunk coordinates in the level's grid, `[plane, row, column]`.
    pub index: [usize; 3],
}

impl ChunkKey {
    /// Chunk `index` of `level`.
    pub fn new(level: usize, index: [usize; 3]) -> Self {
        ChunkKey { level, index }
    }

    /// The samples of this chunk in its level's coordinates (the last chunk on an axis is
    /// clipped to the level's shape).
    ///
    /// Fails with [`SourceError::NoSuchLevel`] or [`SourceError::NoSuchChunk`] naming the
    /// level's grid if the key lies outside `layout`.
    pub fn region(&self, layout: &Layout) -> Result<Region, SourceError> {
        let levels = layout.levels();
        let level = levels.get(self.level).ok_or(SourceError::NoSuchLevel {
            level: self.level,
            levels: levels.len(),
        })?;
        let grid = level.chunks.grid_size(&level.shape);
        if (0..3).any(|a| self.index[a] >= grid[a]) {
            return Err(SourceError::NoSuchChunk { key: *self, grid });
        }
        Ok(level.chunks.chunk_region(self.index, &level.shape))
    }
}

impl fmt::Display for ChunkKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let [p, r, c] = self.index;
        write!(f, "level {} chunk [{p}, {r}, {c}]", self.level)
    }
}

/// How urgently a chunk is wanted. Every visible chunk loads before any prefetch chunk.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Tier {
    /// Needed to draw the current view.
    Visible,
    /// Likely needed soon (a ring around the view, the next level down).
    Prefetch,
}

/// One wanted chunk of a consumer's set.
///
/// Loading order: [`Tier::Visible`] before [`Tier::Prefetch`]; within a tier, coarser levels
/// (higher `level`) before finer ones, so that the whole view is covered at some level early;
/// within a level, smaller `distance` first. Equal wants load in the order they were stated.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct ChunkWant {
    /// The chunk.
    pub key: ChunkKey,
    /// How urgently.
    pub tier: Tier,
    /// How far the chunk is from the view centre, in any unit the consumer likes (screen pixels,
    /// level-0 samples); nearer chunks load first. NaN counts as farthest.
    pub distance: f64,
}

impl ChunkWant {
    /// A visible chunk at `distance` from the view centre.
    pub fn visible(key: ChunkKey, distance: f64) -> Self {
        ChunkWant {
            key,
            tier: Tier::Visible,
            distance,
        }
    }

    /// A prefetch chunk at `distance` from the view centre.
    pub fn prefetch(key: ChunkKey, distance: f64) -> Self {
        ChunkWant {
            key,
            tier: Tier::Prefetch,
            distance,
        }
    }

    /// The loading order of two wants: `Less` loads first (see the type's documentation).
    pub fn load_order(&self, other: &ChunkWant) -> Ordering {
        self.tier
            .cmp(&other.tier)
            .then(other.key.level.cmp(&self.key.level))
            .then(total_distance(self.distance).total_cmp(&total_distance(other.distance)))
    }

    /// The more urgent of two wants of the same chunk (several consumers may want it).
    pub fn more_urgent(self, other: ChunkWant) -> ChunkWant {
        if other.load_order(&self) == Ordering::Less {
            other
        } else {
            self
        }
    }
}

/// NaN sorts last.
fn total_distance(d: f64) -> f64 {
    if d.is_nan() {
        f64::INFINITY
    } else {
        d
    }
}

/// Why a chunk failed: the last error and how many times it was tried.
#[derive(Clone, Debug)]
pub struct ChunkFailure {
    /// The error of the last attempt.
    pub error: Arc<SourceError>,
    /// Attempts made (1 for a final error on the first try).
    pub attempts: u32,
}

/// Where one chunk stands in a source.
#[derive(Clone, Debug)]
pub enum ChunkStatus {
    /// In host memory: `read` and `lend` serve it now.
    Ready,
    /// Absent on purpose (never written to the store): reads give the source's fill value.
    /// Not an error.
    Empty,
    /// Waiting for a loader thread (also while waiting out a retry's backoff).
    Queued,
    /// A loader thread is loading it.
    Loading,
    /// Every attempt failed. Reads give the fill value; nothing is fetched again until
    /// [`DataSource::retry_failed`](crate::DataSource::retry_failed).
    Failed(ChunkFailure),
    /// Not in memory and not wanted (never requested, dropped from every wanted set, or
    /// evicted from the host cache).
    Unrequested,
}

impl ChunkStatus {
    /// Ready or empty: a read serves it without waiting.
    pub fn is_resident(&self) -> bool {
        matches!(self, ChunkStatus::Ready | ChunkStatus::Empty)
    }

    /// Queued or loading.
    pub fn is_pending(&self) -> bool {
        matches!(self, ChunkStatus::Queued | ChunkStatus::Loading)
    }
}

/// A consumer's wanted set summed up (see
/// [`DataSource::chunk_progress`](crate::DataSource::chunk_progress)).
#[derive(Clone, Debug, Default)]
pub struct ChunkProgress {
    /// Visible chunks wanted.
    pub visible_wanted: usize,
    /// Of those, ready or empty.
    pub visible_resident: usize,
    /// Prefetch chunks wanted.
    pub prefetch_wanted: usize,
    /// Of those, ready or empty.
    pub prefetch_resident: usize,
    /// Wanted chunks waiting for a loader thread.
    pub queued: usize,
    /// Wanted chunks being loaded.
    pub loading: usize,
    /// Wanted chunks that failed, with their errors.
    pub failed: Vec<(ChunkKey, ChunkFailure)>,
}

impl ChunkProgress {
    /// Whether every visible chunk is ready or empty (failed ones count as not complete).
    pub fn visible_complete(&self) -> bool {
        self.visible_resident == self.visible_wanted
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::element::ElementType;
    use crate::layout::ChunkGrid;
    use crate::region::Shape;

    #[test]
    fn keys_outside_the_grid_name_the_grid() {
        let layout = Layout::new(Shape::d2(100, 130).unwrap(), ElementType::U8, 1)
            .unwrap()
            .with_chunks(ChunkGrid::new(&[64, 64]).unwrap());
        let edge = ChunkKey::new(0, [0, 1, 2]).region(&layout).unwrap();
        assert_eq!(edge, Region::d2(64, 128, 36, 2));
        let e = ChunkKey::new(0, [0, 2, 0]).region(&layout).unwrap_err();
        assert!(e.to_string().contains("[1, 2, 3]"), "{e}");
        let e = ChunkKey::new(3, [0, 0, 0]).region(&layout).unwrap_err();
        assert!(e.to_string().contains("level 3"), "{e}");
    }
}
