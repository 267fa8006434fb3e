//! Which sides of a page need their border this frame.
//!
//! A page's 1-sample border is what lets the hardware filter exactly up to the page's edge.
//! It comes from the neighbouring page's storage chunks. A linear sample at a point gives the
//! border sample a weight only where the point lies within half a sample of the edge (a
//! nearest sample never reads it). Where no view's sampled points (its pixels' centres) come
//! that near, the page is uploaded without that side's border (the shader clamps inside the
//! interior on a *clamped* side) and the chunks are not fetched: a view then costs its own
//! chunks, not a ring of chunks around it, also when its edges lie on page edges. Once a view
//! comes near such an edge, the page is uploaded again with its border.

use std::collections::HashMap;

use sluice_core::{ChunkKey, ChunkWant, Layout, PageGrid, PageKey, PageWant, PagingError, Region};

/// Clamped sides, as bits: rows before, rows after, columns before, columns after.
pub(crate) const ROW_LO: u8 = 1;
pub(crate) const ROW_HI: u8 = 2;
pub(crate) const COL_LO: u8 = 4;
pub(crate) const COL_HI: u8 = 8;

/// The level-0 rectangles this frame's views of one source cover: `(x0, y0, x1, y1)`.
#[derive(Clone, Debug, Default)]
pub(crate) struct ViewRects(pub Vec<[f64; 4]>);

impl ViewRects {
    /// The sides of `key` to upload without a border: those whose neighbour page exists but
    /// whose edge lies half a sample of the level or more from every view's sampled points
    /// (the rectangles hold the pixels' centres).
    pub fn clamped(&self, grid: &PageGrid, layout: &Layout, key: PageKey) -> u8 {
        let Ok((lo, hi)) = grid.level0_box(layout, key) else {
            return 0;
        };
        let Some(level) = layout.levels().get(key.level) else {
            return 0;
        };
        let g = grid.grid_size(&level.shape);
        let (dy, dx) = (0.5 * level.downsample[1], 0.5 * level.downsample[2]);
        // Whether any view (grown by half a sample: the reach of a linear sample's weights)
        // meets the band beyond a side.
        let near = |band: [f64; 4]| {
            self.0.iter().any(|r| {
                r[0] - dx < band[2]
                    && band[0] < r[2] + dx
                    && r[1] - dy < band[3]
                    && band[1] < r[3] + dy
            })
        };
        let mut mask = 0;
        if key.index[1] > 0 && !near([lo[2], lo[1] - dy, hi[2], lo[1]]) {
            mask |= ROW_LO;
        }
        if key.index[1] + 1 < g[1] && !near([lo[2], hi[1], hi[2], hi[1] + dy]) {
            mask |= ROW_HI;
        }
        if key.index[2] > 0 && !near([lo[2] - dx, lo[1], lo[2], hi[1]]) {
            mask |= COL_LO;
        }
        if key.index[2] + 1 < g[2] && !near([hi[2], lo[1], hi[2] + dx, hi[1]]) {
            mask |= COL_HI;
        }
        mask
    }
}

/// The samples to upload for `key` with the `clamped` sides left out: its sample region with
/// those sides cut back to the interior.
pub(crate) fn upload_region(
    grid: &PageGrid,
    layout: &Layout,
    key: PageKey,
    clamped: u8,
) -> Result<Region, PagingError> {
    let inner = grid.interior(layout, key)?;
    let mut r = grid.sample_region(layout, key)?;
    let mut cut = |axis: usize, lo_bit: u8, hi_bit: u8| {
        let end = r.origin[axis] + r.size[axis];
        let (mut o, mut e) = (r.origin[axis], end);
        if clamped & lo_bit != 0 {
            o = inner.origin[axis];
        }
        if clamped & hi_bit != 0 {
            e = inner.origin[axis] + inner.size[axis];
        }
        r.origin[axis] = o;
        r.size[axis] = e - o;
    };
    cut(1, ROW_LO, ROW_HI);
    cut(2, COL_LO, COL_HI);
    Ok(r)
}

/// The storage chunks the upload region of `key` touches.
pub(crate) fn chunks_for(
    grid: &PageGrid,
    layout: &Layout,
    key: PageKey,
    clamped: u8,
) -> Result<Vec<ChunkKey>, PagingError> {
    let region = upload_region(grid, layout, key, clamped)?;
    let level = &layout.levels()[key.level];
    let (lo, hi) = level.chunks.chunks_touched(&region);
    let mut out = Vec::new();
    for p in lo[0]..hi[0] {
        for r in lo[1]..hi[1] {
            for c in lo[2]..hi[2] {
                out.push(ChunkKey::new(key.level, [p, r, c]));
            }
        }
    }
    Ok(out)
}

/// The storage chunks `pages` need with their clamped sides left out, each once with its most
/// urgent want, in load order (what `sluice_core::chunk_wants` gives for full borders).
pub(crate) fn chunk_wants(
    grid: &PageGrid,
    layout: &Layout,
    pages: &[PageWant],
    rects: &ViewRects,
) -> Result<Vec<ChunkWant>, PagingError> {
    let mut out: HashMap<ChunkKey, (usize, ChunkWant)> = HashMap::new();
    for w in pages {
        let clamped = rects.clamped(grid, layout, w.key);
        for key in chunks_for(grid, layout, w.key, clamped)? {
            let want = ChunkWant {
                key,
                tier: w.tier,
                distance: w.distance,
            };
            let n = out.len();
            out.entry(key)
                .and_modify(|(_, e)| *e = e.more_urgent(want))
                .or_insert((n, want));
        }
    }
    let mut v: Vec<(usize, ChunkWant)> = out.into_values().collect();
    v.sort_by(|a, b| a.1.load_order(&b.1).then(a.0.cmp(&b.0)));
    Ok(v.into_iter().map(|(_, w)| w).collect())
}
