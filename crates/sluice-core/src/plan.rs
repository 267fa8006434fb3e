//! Upload planning: from changed regions to few copies, by chunk.
//!
//! Plain functions with no GPU: the proxy layer feeds them a source's changes and issues one
//! GPU copy per planned region.

use crate::layout::ChunkGrid;
use crate::region::{Region, Shape};

/// What to upload for a set of changes.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct UploadPlan {
    /// Regions to copy, in order; disjoint unless the plan is exact.
    pub copies: Vec<Region>,
    /// Whether the plan is one copy of the whole shape.
    pub full: bool,
}

/// Plans the copies that bring a GPU copy of `shape` up to date after `changes`.
///
/// Changes are snapped outwards to the chunk grid (the chunk is the unit of dirtiness); dirty
/// chunks are merged into boxes: runs along the fastest axis first, then runs of equal rows,
/// then of equal planes. When more than `full_fraction` of the chunks are dirty, the plan is one
/// copy of the dirty chunks' bounding box (the whole shape when all of it changed), since one
/// large copy beats many medium ones.
pub fn plan_chunked(
    shape: &Shape,
    grid: &ChunkGrid,
    changes: &[Region],
    full_fraction: f64,
) -> UploadPlan {
    let whole = shape.full_region();
    if changes.iter().any(|c| c.contains(&whole)) {
        // All of it changed (every frame of a device-resident or animated source): no need
        // to walk the chunk grid.
        return UploadPlan {
            copies: vec![whole],
            full: true,
        };
    }
    let g = grid.grid_size(shape);
    let total = g[0] * g[1] * g[2];
    let mut dirty = vec![false; total];
    let mut count = 0usize;
    for change in changes {
        let Some(clipped) = change.intersection(&whole) else {
            continue;
        };
        let (lo, hi) = grid.chunks_touched(&clipped);
        for z in lo[0]..hi[0] {
            for y in lo[1]..hi[1] {
                for x in lo[2]..hi[2] {
                    let i = (z * g[1] + y) * g[2] + x;
                    if !dirty[i] {
                        dirty[i] = true;
                        count += 1;
                    }
                }
            }
        }
    }
    if count == 0 {
        return UploadPlan {
            copies: Vec::new(),
            full: false,
        };
    }
    if count == total || count as f64 > full_fraction * total as f64 {
        let mut lo = g;
        let mut hi = [0; 3];
        for z in 0..g[0] {
            for y in 0..g[1] {
                for x in 0..g[2] {
                    if dirty[(z * g[1] + y) * g[2] + x] {
                        lo = [lo[0].min(z), lo[1].min(y), lo[2].min(x)];
                        hi = [hi[0].max(z + 1), hi[1].max(y + 1), hi[2].max(x + 1)];
                    }
                }
            }
        }
        let first = grid.chunk_region(lo, shape);
        let last = grid.chunk_region([hi[0] - 1, hi[1] - 1, hi[2] - 1], shape);
        let bounds = first.bounding_union(&last);
        return UploadPlan {
            copies: vec![bounds],
            full: bounds == whole,
        };
    }

    // Boxes in chunk coordinates: [origin, end) per axis.
    let mut boxes: Vec<([usize; 3], [usize; 3])> = Vec::new();
    for z in 0..g[0] {
        // Boxes of this plane still open for extension by the next row.
        let mut open: Vec<usize> = Vec::new();
        for y in 0..g[1] {
            let mut next_open = Vec::new();
            let mut x = 0;
            while x < g[2] {
                let row = (z * g[1] + y) * g[2];
                if !dirty[row + x] {
                    x += 1;
                    continue;
                }
                let x0 = x;
                while x < g[2] && dirty[row + x] {
                    x += 1;
                }
                let extend = open.iter().copied().find(|&b| {
                    let (o, e) = boxes[b];
                    o[2] == x0 && e[2] == x && e[1] == y
                });
                match extend {
                    Some(b) => {
                        boxes[b].1[1] = y + 1;
                        next_open.push(b);
                    }
                    None => {
                        boxes.push(([z, y, x0], [z + 1, y + 1, x]));
                        next_open.push(boxes.len() - 1);
                    }
                }
            }
            open = next_open;
        }
    }
    // Merge equal boxes of consecutive planes.
    let mut merged: Vec<([usize; 3], [usize; 3])> = Vec::new();
    for (o, e) in boxes {
        let prev = merged.iter_mut().find(|(po, pe)| {
            pe[0] == o[0] && po[1] == o[1] && pe[1] == e[1] && po[2] == o[2] && pe[2] == e[2]
        });
        match prev {
            Some(p) => p.1[0] = e[0],
            None => merged.push((o, e)),
        }
    }
    let copies = merged
        .into_iter()
        .map(|(o, e)| {
            let first = grid.chunk_region(o, shape);
            let last = grid.chunk_region([e[0] - 1, e[1] - 1, e[2] - 1], shape);
            first.bounding_union(&last)
        })
        .collect();
    UploadPlan {
        copies,
        full: false,
    }
}

/// Plans copies of exactly the changed regions, for sources that can serve nothing else
/// (see `Readable::ChangedRegionsOnly`): repeated regions are copied once, at their last
/// position, so later writes still land over earlier overlapping ones.
pub fn plan_exact(changes: &[Region]) -> UploadPlan {
    let mut copies: Vec<Region> = Vec::with_capacity(changes.len());
    for (i, r) in changes.iter().enumerate() {
        if !r.is_empty() && !changes[i + 1..].contains(r) {
            copies.push(*r);
        }
    }
    UploadPlan {
        copies,
        full: false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn plan(changes: &[Region]) -> UploadPlan {
        let shape = Shape::d2(256, 256).unwrap();
        let grid = ChunkGrid::new(&[64, 64]).unwrap();
        plan_chunked(&shape, &grid, changes, 0.5)
    }

    #[test]
    fn one_pixel_uploads_its_chunk() {
        let p = plan(&[Region::d2(70, 130, 1, 1)]);
        assert_eq!(p.copies, vec![Region::d2(64, 128, 64, 64)]);
        assert!(!p.full);
    }

    #[test]
    fn adjacent_chunks_merge_into_one_box() {
        let p = plan(&[Region::d2(0, 0, 100, 100)]);
        assert_eq!(p.copies, vec![Region::d2(0, 0, 128, 128)]);
        let p = plan(&[
            Region::d2(0, 0, 10, 10),
            Region::d2(0, 64, 10, 10),
            Region::d2(64, 0, 1, 1),
        ]);
        assert_eq!(
            p.copies,
            vec![Region::d2(0, 0, 64, 128), Region::d2(64, 0, 64, 64)]
        );
    }

    #[test]
    fn mostly_dirty_becomes_full() {
        let p = plan(&[Region::d2(0, 0, 192, 192)]);
        assert!(!p.full);
        assert_eq!(p.copies, vec![Region::d2(0, 0, 192, 192)]);
        let p = plan(&[Region::d2(0, 0, 192, 192), Region::d2(250, 250, 1, 1)]);
        assert!(p.full);
        assert_eq!(p.copies, vec![Region::d2(0, 0, 256, 256)]);
        assert!(plan(&[]).copies.is_empty());
        let outside = plan(&[Region::d2(300, 300, 5, 5)]);
        assert!(outside.copies.is_empty());
    }

    #[test]
    fn planes_merge_in_volumes() {
        let shape = Shape::new(&[64, 64, 64]).unwrap();
        let grid = ChunkGrid::new(&[16, 16, 16]).unwrap();
        let p = plan_chunked(
            &shape,
            &grid,
            &[Region::new(&[0, 0, 0], &[40, 20, 5]).unwrap()],
            0.5,
        );
        assert_eq!(
            p.copies,
            vec![Region::new(&[0, 0, 0], &[48, 32, 16]).unwrap()]
        );
    }

    #[test]
    fn planned_copies_cover_every_change_and_stay_disjoint() {
        let shape = Shape::d2(300, 500).unwrap();
        let grid = ChunkGrid::new(&[32, 48]).unwrap();
        let changes: Vec<Region> = (0..40)
            .map(|i| Region::d2((i * 37) % 290, (i * 91) % 480, 1 + i % 9, 1 + (i * 7) % 23))
            .collect();
        let p = plan_chunked(&shape, &grid, &changes, 0.9);
        assert!(!p.full);
        for c in &changes {
            for y in c.origin[1]..c.end()[1] {
                for x in c.origin[2]..c.end()[2] {
                    let px = Region::d2(y, x, 1, 1);
                    let n = p.copies.iter().filter(|r| r.contains(&px)).count();
                    assert_eq!(n, 1, "pixel {px} covered {n} times");
                }
            }
        }
    }

    #[test]
    fn exact_plan_keeps_last_occurrence_order() {
        let a = Region::d1(0, 4);
        let b = Region::d1(2, 4);
        assert_eq!(plan_exact(&[a, b, a]).copies, vec![b, a]);
    }
}
