//! GPU pages: the unit in which a virtual texture holds a level on the device, independent of
//! the storage chunks a loader reads.
//!
//! A [`PageGrid`] cuts every level of a [`Layout`] into pages of the same size in that level's
//! samples (256 x 256 for images, 64^3 for volumes by default). Each page owns an *interior*
//! region; its atlas slot also holds a border of samples from its neighbours (1 sample for
//! linear filtering), clipped at the level's edges, so that the hardware filters exactly
//! inside a page. [`PageGrid::chunks_needed`] says which storage chunks of the level a page's
//! samples (border included) come from: a store chunked (8, 3840) is as good as any.

use std::fmt;

use crate::chunk::{ChunkFailure, ChunkKey, ChunkStatus};
use crate::layout::{Layout, Level};
use crate::region::{Region, Shape};
use crate::source::DataSource;

/// Where one page stands on the host, from the statuses of the chunks it needs.
#[derive(Clone, Debug)]
pub enum PageState {
    /// Every chunk is ready or empty: the page can be staged and uploaded now.
    Ready,
    /// Some chunk is queued, loading or not requested yet.
    Pending,
    /// A chunk failed after its last retry: the page shows the source's fill.
    Failed(ChunkKey, ChunkFailure),
}

impl PageState {
    /// Whether a read of the page's samples is served now: ready, or failed (failed chunks
    /// read as the source's fill value, so the page shows the fill where they lie).
    pub fn is_readable(&self) -> bool {
        matches!(self, PageState::Ready | PageState::Failed(..))
    }
}

/// A planning error of the paging layer: names the page, level, sizes or budgets involved.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[non_exhaustive]
pub enum PagingError {
    /// A page size that is zero on some axis, or has the wrong number of axes.
    #[error(
        "page size {page:?} is invalid for {ndim}-D data: give {ndim} axes, each at least 1 sample"
    )]
    InvalidPageSize {
        /// The page size as given.
        page: Vec<usize>,
        /// The data's number of axes.
        ndim: usize,
    },
    /// A level index beyond the layout's levels.
    #[error("level {level} requested; the source has {levels} level(s)")]
    NoSuchLevel {
        /// The requested level.
        level: usize,
        /// How many levels there are.
        levels: usize,
    },
    /// A page index outside a level's page grid.
    #[error("page {key} does not exist: level {} has a grid of {grid:?} pages", key.level)]
    NoSuchPage {
        /// The requested page.
        key: PageKey,
        /// Pages per axis of that level (numpy order, padded).
        grid: [usize; 3],
    },
    /// A view that cannot be used: a singular or non-finite matrix, an empty viewport, the data
    /// plane seen edge-on.
    #[error("unusable view: {reason}")]
    InvalidView {
        /// What is wrong, with the numbers.
        reason: String,
    },
    /// Even the coarsest level's visible pages need more bytes than the budget.
    #[error("the coarsest level's {pages} visible page(s) need {bytes} bytes, more than the budget of {budget} bytes")]
    OverBudget {
        /// Pages of the coarsest level in view.
        pages: usize,
        /// Their bytes.
        bytes: usize,
        /// The budget.
        budget: usize,
    },
    /// One page is bigger than a budget it must fit in.
    #[error(
        "one page of {label} needs {page_bytes} bytes, more than the {what} of {budget} bytes"
    )]
    PageOverBudget {
        /// The source's label.
        label: String,
        /// Bytes of one atlas slot of the source.
        page_bytes: usize,
        /// Which budget ("GPU budget", "per-frame upload budget").
        what: &'static str,
        /// The budget.
        budget: usize,
    },
    /// A source id the atlas allocator does not know.
    #[error("source {id} is not registered with this atlas allocator ({registered} registered)")]
    UnknownSource {
        /// The id given.
        id: usize,
        /// How many sources are registered.
        registered: usize,
    },
    /// A size that overflows `usize`.
    #[error("{what} overflows: {detail}")]
    Overflow {
        /// Which size.
        what: &'static str,
        /// The numbers that overflow.
        detail: String,
    },
}

/// One GPU page: a level and the page's coordinates in that level's page grid (numpy order,
/// padded to three axes).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct PageKey {
    /// The multiscale level (0 = finest).
    pub level: usize,
    /// Page coordinates in the level's page grid, `[plane, row, column]`.
    pub index: [usize; 3],
}

impl PageKey {
    /// Page `index` of `level`.
    pub fn new(level: usize, index: [usize; 3]) -> Self {
        PageKey { level, index }
    }
}

impl fmt::Display for PageKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let [p, r, c] = self.index;
        write!(f, "level {} page [{p}, {r}, {c}]", self.level)
    }
}

/// The default page edge for images (256 x 256 samples).
pub const DEFAULT_PAGE_2D: usize = 256;
/// The default page edge for volumes (64^3 samples).
pub const DEFAULT_PAGE_3D: usize = 64;

/// How every level of a source is cut into GPU pages: the interior size of a page (in the
/// level's samples) and the border each atlas slot carries around it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct PageGrid {
    ndim: usize,
    page: [usize; 3],
    border: usize,
}

impl PageGrid {
    /// Pages of `page` samples per axis (numpy order, `ndim` axes: `[rows, cols]` for images,
    /// `[planes, rows, cols]` for volumes) with `border` samples of neighbours around each in
    /// its atlas slot.
    ///
    /// Fails with [`PagingError::InvalidPageSize`] if `page` has another number of axes than
    /// `ndim` (1 to 3), or a zero axis, and with [`PagingError::Overflow`] if a page and its
    /// border overflow `usize`.
    pub fn new(ndim: usize, page: &[usize], border: usize) -> Result<Self, PagingError> {
        if !(1..=3).contains(&ndim) || page.len() != ndim || page.contains(&0) {
            return Err(PagingError::InvalidPageSize {
                page: page.to_vec(),
                ndim,
            });
        }
        let mut padded = [1; 3];
        padded[3 - ndim..].copy_from_slice(page);
        if page.iter().any(|&p| {
            border
                .checked_mul(2)
                .and_then(|b| p.checked_add(b))
                .is_none()
        }) {
            return Err(PagingError::Overflow {
                what: "page slot extent",
                detail: format!("pages of {page:?} samples with a border of {border}"),
            });
        }
        Ok(PageGrid {
            ndim,
            page: padded,
            border,
        })
    }

    /// The default grid for `layout`: 256 x 256 pages for images, 64^3 for volumes, 65,536-sample
    /// runs for 1-D data, each with a 1-sample border (what linear filtering needs).
    pub fn default_for(layout: &Layout) -> Self {
        let ndim = layout.shape().ndim();
        let page = match ndim {
            1 => [1, 1, 65_536],
            2 => [1, DEFAULT_PAGE_2D, DEFAULT_PAGE_2D],
            _ => [DEFAULT_PAGE_3D; 3],
        };
        PageGrid {
            ndim: ndim.clamp(1, 3),
            page,
            border: 1,
        }
    }

    /// Interior samples per page per axis (numpy order, padded with 1s).
    pub fn page_size(&self) -> [usize; 3] {
        self.page
    }

    /// Border samples on each side of a page's interior.
    pub fn border(&self) -> usize {
        self.border
    }

    /// The data's number of axes.
    pub fn ndim(&self) -> usize {
        self.ndim
    }

    /// Samples per axis of one atlas slot: the interior plus a border on both sides of every
    /// data axis (padded axes stay 1).
    pub fn slot_extent(&self) -> [usize; 3] {
        let mut e = self.page;
        for extent in e.iter_mut().skip(3 - self.ndim) {
            *extent += 2 * self.border;
        }
        e
    }

    /// Bytes of one atlas slot for `layout`'s samples.
    ///
    /// Fails with [`PagingError::Overflow`] if the product overflows.
    pub fn slot_bytes(&self, layout: &Layout) -> Result<usize, PagingError> {
        let e = self.slot_extent();
        e.iter()
            .try_fold(layout.sample_bytes(), |acc, &n| acc.checked_mul(n))
            .ok_or_else(|| PagingError::Overflow {
                what: "page slot bytes",
                detail: format!("{e:?} samples of {} bytes", layout.sample_bytes()),
            })
    }

    /// Pages of every level of `layout` together, or `None` if the count overflows.
    pub fn page_count(&self, layout: &Layout) -> Option<u64> {
        layout.levels().iter().try_fold(0u64, |sum, l| {
            let g = self.grid_size(&l.shape);
            sum.checked_add(
                (g[0] as u64)
                    .checked_mul(g[1] as u64)?
                    .checked_mul(g[2] as u64)?,
            )
        })
    }

    /// Pages per axis covering `shape`.
    pub fn grid_size(&self, shape: &Shape) -> [usize; 3] {
        let d = shape.padded();
        [
            d[0].div_ceil(self.page[0]),
            d[1].div_ceil(self.page[1]),
            d[2].div_ceil(self.page[2]),
        ]
    }

    /// Fails with [`PagingError::InvalidPageSize`] unless this grid has `layout`'s number of
    /// axes, and `ndim` if given (2 for image views, 3 for volume views).
    pub(crate) fn check_ndim(
        &self,
        layout: &Layout,
        ndim: Option<usize>,
    ) -> Result<(), PagingError> {
        let data = layout.shape().ndim();
        if self.ndim != data || ndim.is_some_and(|n| n != data) {
            return Err(PagingError::InvalidPageSize {
                page: self.page[3 - self.ndim..].to_vec(),
                ndim: ndim.unwrap_or(data),
            });
        }
        Ok(())
    }

    /// The level of `layout` a key names, or [`PagingError::NoSuchLevel`].
    pub(crate) fn level(layout: &Layout, level: usize) -> Result<&Level, PagingError> {
        let levels = layout.levels();
        levels.get(level).ok_or(PagingError::NoSuchLevel {
            level,
            levels: levels.len(),
        })
    }

    fn check(&self, layout: &Layout, key: PageKey) -> Result<Shape, PagingError> {
        let shape = Self::level(layout, key.level)?.shape;
        let grid = self.grid_size(&shape);
        if (0..3).any(|a| key.index[a] >= grid[a]) {
            return Err(PagingError::NoSuchPage { key, grid });
        }
        Ok(shape)
    }

    /// The samples page `key` owns, in its level's coordinates (clipped to the level's shape).
    ///
    /// Fails with [`PagingError::NoSuchLevel`] or [`PagingError::NoSuchPage`].
    pub fn interior(&self, layout: &Layout, key: PageKey) -> Result<Region, PagingError> {
        let d = self.check(layout, key)?.padded();
        let mut r = Region::default();
        for (a, &extent) in d.iter().enumerate() {
            r.origin[a] = key.index[a] * self.page[a];
            r.size[a] = self.page[a].min(extent - r.origin[a]);
        }
        Ok(r)
    }

    /// The samples page `key`'s atlas slot holds: its interior grown by the border on every
    /// data axis, clipped at the level's edges. A page at a level's edge has no border there:
    /// the shader clamps its coordinate to the level's samples, since the atlas's own clamping
    /// only knows the atlas's edges, not the page's.
    pub fn sample_region(&self, layout: &Layout, key: PageKey) -> Result<Region, PagingError> {
        let d = self.check(layout, key)?.padded();
        let inner = self.interior(layout, key)?;
        let mut r = inner;
        for (a, &extent) in d.iter().enumerate().skip(3 - self.ndim) {
            let lo = inner.origin[a].saturating_sub(self.border);
            let hi = (inner.origin[a] + inner.size[a])
                .saturating_add(self.border)
                .min(extent);
            r.origin[a] = lo;
            r.size[a] = hi - lo;
        }
        Ok(r)
    }

    /// Where in its atlas slot the sample region starts, per axis: 0 where the page has its
    /// border, `border` where the level's edge clipped it away. So the interior always starts
    /// `border` samples into the slot; the render side copies the sample region to
    /// `slot origin + offset_in_slot`.
    pub fn offset_in_slot(&self, layout: &Layout, key: PageKey) -> Result<[usize; 3], PagingError> {
        let inner = self.interior(layout, key)?;
        let outer = self.sample_region(layout, key)?;
        let mut off = [0; 3];
        for (a, o) in off.iter_mut().enumerate().skip(3 - self.ndim) {
            *o = self.border - (inner.origin[a] - outer.origin[a]);
        }
        Ok(off)
    }

    /// The storage chunks of the level that page `key`'s sample region (border included)
    /// overlaps, in grid order.
    pub fn chunks_needed(
        &self,
        layout: &Layout,
        key: PageKey,
    ) -> Result<Vec<ChunkKey>, PagingError> {
        let region = self.sample_region(layout, key)?;
        let level = Self::level(layout, key.level)?;
        let (lo, hi) = level.chunks.chunks_touched(&region);
        let mut out = Vec::with_capacity((0..3).map(|a| hi[a] - lo[a]).product());
        for p in lo[0]..hi[0] {
            for r in lo[1]..hi[1] {
                for c in lo[2]..hi[2] {
                    out.push(ChunkKey::new(key.level, [p, r, c]));
                }
            }
        }
        Ok(out)
    }

    /// Where page `key` of `source` (whose layout is `layout`) stands: ready when every chunk
    /// of [`PageGrid::chunks_needed`] is ready or empty, failed when one failed (the first in
    /// grid order), pending otherwise. Asks [`DataSource::chunk_status`] once per chunk.
    pub fn page_state(
        &self,
        layout: &Layout,
        source: &dyn DataSource,
        key: PageKey,
    ) -> Result<PageState, PagingError> {
        let mut pending = false;
        for chunk in self.chunks_needed(layout, key)? {
            match source.chunk_status(chunk) {
                ChunkStatus::Ready | ChunkStatus::Empty => {}
                ChunkStatus::Failed(f) => return Ok(PageState::Failed(chunk, f)),
                _ => pending = true,
            }
        }
        Ok(if pending {
            PageState::Pending
        } else {
            PageState::Ready
        })
    }

    /// The box page `key`'s interior covers, in level-0 sample coordinates (numpy order,
    /// padded): `(low corner, high corner)`, from the level's offset and downsample.
    pub fn level0_box(
        &self,
        layout: &Layout,
        key: PageKey,
    ) -> Result<([f64; 3], [f64; 3]), PagingError> {
        let level = Self::level(layout, key.level)?;
        let inner = self.interior(layout, key)?;
        let mut lo = [0.0; 3];
        let mut hi = [0.0; 3];
        for a in 0..3 {
            lo[a] = level.offset[a] + inner.origin[a] as f64 * level.downsample[a];
            hi[a] =
                level.offset[a] + (inner.origin[a] + inner.size[a]) as f64 * level.downsample[a];
        }
        Ok((lo, hi))
    }

    /// The page of `level` whose interior holds the level-0 point `p` (numpy order, padded),
    /// or `None` if `p` lies outside the level.
    pub fn page_at(&self, layout: &Layout, level: usize, p: [f64; 3]) -> Option<PageKey> {
        let lv = Self::level(layout, level).ok()?;
        let d = lv.shape.padded();
        let mut index = [0; 3];
        for a in 0..3 {
            let s = (p[a] - lv.offset[a]) / lv.downsample[a];
            if !s.is_finite() || s < 0.0 || s >= d[a] as f64 {
                return None;
            }
            index[a] = (s as usize).min(d[a] - 1) / self.page[a];
        }
        Some(PageKey::new(level, index))
    }

    /// The range of page coordinates (`start`, `end` exclusive per axis) of `level` whose
    /// interiors meet the level-0 box `[lo, hi)` (numpy order, padded); empty ranges where the
    /// box misses the level.
    pub fn pages_in_box(
        &self,
        layout: &Layout,
        level: usize,
        lo: [f64; 3],
        hi: [f64; 3],
    ) -> Result<([usize; 3], [usize; 3]), PagingError> {
        let lv = Self::level(layout, level)?;
        let d = lv.shape.padded();
        let grid = self.grid_size(&lv.shape);
        let mut start = [0; 3];
        let mut end = [0; 3];
        for a in 0..3 {
            let s0 = ((lo[a] - lv.offset[a]) / lv.downsample[a]).floor();
            let s1 = ((hi[a] - lv.offset[a]) / lv.downsample[a]).ceil();
            if !(s0.is_finite() && s1.is_finite()) || s1 <= 0.0 || s0 >= d[a] as f64 || s1 <= s0 {
                return Ok(([0; 3], [0; 3]));
            }
            let s0 = s0.max(0.0) as usize;
            let s1 = (s1 as usize).min(d[a]);
            start[a] = s0 / self.page[a];
            end[a] = s1.div_ceil(self.page[a]).min(grid[a]);
        }
        Ok((start, end))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::element::ElementType;
    use crate::layout::ChunkGrid;

    fn image(h: usize, w: usize, chunk: [usize; 2]) -> Layout {
        Layout::new(Shape::d2(h, w).unwrap(), ElementType::U8, 1)
            .unwrap()
            .with_chunks(ChunkGrid::new(&chunk).unwrap())
    }

    #[test]
    fn bad_page_sizes_are_named() {
        let e = PageGrid::new(2, &[usize::MAX, 4], 1).unwrap_err();
        assert!(matches!(e, PagingError::Overflow { .. }), "{e}");
        let e = PageGrid::new(2, &[4, 4], usize::MAX).unwrap_err();
        assert!(e.to_string().contains("border of"), "{e}");
        let e = PageGrid::new(2, &[256, 0], 1).unwrap_err();
        assert!(e.to_string().contains("[256, 0]"), "{e}");
        assert!(PageGrid::new(3, &[64, 64], 1).is_err());
        assert!(PageGrid::new(4, &[1, 1, 1, 1], 1).is_err());
    }

    #[test]
    fn border_is_clipped_at_the_level_edges() {
        let layout = image(600, 1000, [64, 64]);
        let g = PageGrid::new(2, &[256, 256], 1).unwrap();
        assert_eq!(g.grid_size(&layout.shape()), [1, 3, 4]);
        assert_eq!(g.slot_extent(), [1, 258, 258]);
        assert_eq!(g.slot_bytes(&layout).unwrap(), 258 * 258);
        // Corner page: no border above or left.
        let k = PageKey::new(0, [0, 0, 0]);
        assert_eq!(g.interior(&layout, k).unwrap(), Region::d2(0, 0, 256, 256));
        assert_eq!(
            g.sample_region(&layout, k).unwrap(),
            Region::d2(0, 0, 257, 257)
        );
        assert_eq!(g.offset_in_slot(&layout, k).unwrap(), [0, 1, 1]);
        // Middle page: border on every side.
        let k = PageKey::new(0, [0, 1, 1]);
        assert_eq!(
            g.sample_region(&layout, k).unwrap(),
            Region::d2(255, 255, 258, 258)
        );
        assert_eq!(g.offset_in_slot(&layout, k).unwrap(), [0, 0, 0]);
        // Last page: clipped interior (600 - 512 = 88 rows, 1000 - 768 = 232 cols).
        let k = PageKey::new(0, [0, 2, 3]);
        assert_eq!(
            g.interior(&layout, k).unwrap(),
            Region::d2(512, 768, 88, 232)
        );
        assert_eq!(
            g.sample_region(&layout, k).unwrap(),
            Region::d2(511, 767, 89, 233)
        );
        let e = g.interior(&layout, PageKey::new(0, [0, 3, 0])).unwrap_err();
        assert!(e.to_string().contains("[1, 3, 4]"), "{e}");
        let e = g.interior(&layout, PageKey::new(1, [0, 0, 0])).unwrap_err();
        assert_eq!(
            e,
            PagingError::NoSuchLevel {
                level: 1,
                levels: 1
            }
        );
    }

    #[test]
    fn pages_need_the_chunks_they_overlap_even_for_strip_chunks() {
        // A store chunked (8, 3840): a 256^2 page with its border needs 34 or 35 strips.
        let layout = image(2048, 7680, [8, 3840]);
        let g = PageGrid::new(2, &[256, 256], 1).unwrap();
        let chunks = g
            .chunks_needed(&layout, PageKey::new(0, [0, 1, 14]))
            .unwrap();
        // Rows 255..513 -> strips 31..=64 (34 strips); cols 3583..3841 -> chunk columns 0 and 1.
        assert_eq!(chunks.len(), 34 * 2);
        assert_eq!(chunks[0], ChunkKey::new(0, [0, 31, 0]));
        assert_eq!(*chunks.last().unwrap(), ChunkKey::new(0, [0, 64, 1]));
        // Every sample of the page's region lies in one of the chunks, and every chunk is needed.
        let region = g
            .sample_region(&layout, PageKey::new(0, [0, 1, 14]))
            .unwrap();
        for c in &chunks {
            assert!(c.region(&layout).unwrap().intersection(&region).is_some());
        }
        let covered: usize = chunks
            .iter()
            .map(|c| {
                c.region(&layout)
                    .unwrap()
                    .intersection(&region)
                    .unwrap()
                    .len()
            })
            .sum();
        assert_eq!(covered, region.len());
    }

    #[test]
    fn page_state_follows_the_chunks_of_a_lazy_source() {
        use crate::loader::{ChunkFill, ProceduralLoader};
        use crate::source::{noop_waker, ConsumerId};
        use crate::visibility::{chunk_wants, PageWant};
        use crate::{error::SourceError, LazySource, Tier};
        // Strips of 8 rows; strip 40 (rows 320..328) cannot be decoded.
        let layout = image(600, 1000, [8, 1000]);
        let loader = ProceduralLoader::new(layout.clone(), |key, _region, dst| {
            if key.index[1] == 40 {
                return Err(SourceError::Decode {
                    url_or_key: format!("{key}"),
                    reason: "bad bytes".into(),
                });
            }
            dst.fill(7);
            Ok(ChunkFill::Filled)
        });
        let source = LazySource::new(loader).unwrap();
        let g = PageGrid::new(2, &[256, 256], 1).unwrap();
        let (good, bad) = (PageKey::new(0, [0, 0, 0]), PageKey::new(0, [0, 1, 0]));
        assert!(matches!(
            g.page_state(&layout, &source, good).unwrap(),
            PageState::Pending
        ));
        let pages = [
            PageWant {
                key: good,
                tier: Tier::Visible,
                distance: 0.0,
            },
            PageWant {
                key: bad,
                tier: Tier::Visible,
                distance: 1.0,
            },
        ];
        let wants = chunk_wants(&layout, &g, &pages).unwrap();
        source
            .request_chunks(ConsumerId::next(), &wants, noop_waker())
            .unwrap();
        let start = std::time::Instant::now();
        loop {
            let a = g.page_state(&layout, &source, good).unwrap();
            let b = g.page_state(&layout, &source, bad).unwrap();
            if let (PageState::Ready, PageState::Failed(key, f)) = (&a, &b) {
                assert_eq!(*key, ChunkKey::new(0, [0, 40, 0]));
                assert!(f.error.to_string().contains("bad bytes"));
                break;
            }
            assert!(start.elapsed().as_secs() < 30, "{a:?} {b:?}");
            std::thread::sleep(std::time::Duration::from_millis(5));
        }
    }

    #[test]
    fn level_boxes_follow_downsample_and_offset() {
        let layout = image(1000, 1000, [64, 64])
            .with_levels([
                crate::layout::Level::new(Shape::d2(500, 500).unwrap(), [1.0, 2.0, 2.0])
                    .with_offset([0.0, 0.5, 0.5]),
            ])
            .unwrap();
        let g = PageGrid::new(2, &[256, 256], 1).unwrap();
        let (lo, hi) = g.level0_box(&layout, PageKey::new(1, [0, 1, 0])).unwrap();
        assert_eq!(lo, [0.0, 512.5, 0.5]);
        assert_eq!(hi, [1.0, 1000.5, 512.5]);
        assert_eq!(
            g.page_at(&layout, 1, [0.0, 512.5, 0.5]),
            Some(PageKey::new(1, [0, 1, 0]))
        );
        assert_eq!(g.page_at(&layout, 1, [0.0, 0.0, 0.0]), None);
        let (s, e) = g
            .pages_in_box(&layout, 1, [0.0, 0.0, 0.0], [1.0, 600.0, 100.0])
            .unwrap();
        assert_eq!((s, e), ([0, 0, 0], [1, 2, 1]));
        let (s, e) = g
            .pages_in_box(&layout, 0, [0.0, 2000.0, 0.0], [1.0, 3000.0, 10.0])
            .unwrap();
        assert_eq!(s, e);
    }
}
