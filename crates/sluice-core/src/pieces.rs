//! Upload and redraw decisions as plain functions: how a source is cut into bricks, how a
//! copy is split to fit a frame's byte budget, how copies are cut into pieces that fit one
//! staging buffer, which texels a frame's copies changed, and how changed screen rectangles
//! merge into the few a partial redraw draws.
//!
//! No GPU type appears here: the proxies in `sluice-render` execute these plans. The order a
//! frame applies them in is: the draw list names sources; (the visibility pass of chunked
//! sources will choose, per source, the chunks the view needs, here); [`crate::plan_chunked`]
//! turns changes into copies; [`split_for_budget`] keeps the frame within its budget;
//! [`cut_pieces`] fits the copies into staging buffers, per brick.

use crate::region::Region;

/// How a source is cut into bricks: brick size and brick count per axis, numpy order
/// (`[planes, rows, columns]`). Every brick has `size` samples but the last on each axis,
/// which holds the rest.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct BrickGrid {
    /// Samples per brick along each axis.
    pub size: [usize; 3],
    /// Bricks along each axis.
    pub count: [usize; 3],
}

impl BrickGrid {
    /// The bricks in slot order (axis 2 fastest), each clipped to `shape`.
    pub fn regions(&self, shape: [usize; 3]) -> Vec<Region> {
        let whole = Region {
            origin: [0; 3],
            size: shape,
        };
        let mut out = Vec::with_capacity(self.count.iter().product());
        for z in 0..self.count[0] {
            for y in 0..self.count[1] {
                for x in 0..self.count[2] {
                    let cell = Region {
                        origin: [z * self.size[0], y * self.size[1], x * self.size[2]],
                        size: self.size,
                    };
                    if let Some(region) = cell.intersection(&whole) {
                        out.push(region);
                    }
                }
            }
        }
        out
    }
}

/// The bricking rule: an axis longer than `limit` is cut into the fewest equal bricks that
/// fit (`ceil(len / ceil(len / limit))` samples each). `None` if that takes more than
/// `max_bricks` bricks in all.
pub fn plan_bricks(shape: [usize; 3], limit: usize, max_bricks: usize) -> Option<BrickGrid> {
    let mut size = [0; 3];
    let mut count = [0; 3];
    for a in 0..3 {
        count[a] = shape[a].div_ceil(limit.max(1));
        size[a] = shape[a].div_ceil(count[a].max(1));
    }
    if count.iter().product::<usize>() > max_bricks {
        return None;
    }
    Some(BrickGrid { size, count })
}

/// Cuts `region` so that its first part fits in `allowed` bytes (at `sample_bytes` a
/// sample), along its slowest axis and at boundaries of chunks of `chunk` samples (so each
/// chunk is still uploaded by one copy, showing one version). With `must_progress`, at
/// least one chunk row (or plane) goes even over the budget. Returns (what goes now, what
/// waits); `(None, Some(region))` when nothing fits.
pub fn split_for_budget(
    region: Region,
    chunk: [usize; 3],
    sample_bytes: usize,
    allowed: u64,
    must_progress: bool,
) -> (Option<Region>, Option<Region>) {
    let bytes = (region.len() * sample_bytes) as u64;
    if bytes <= allowed {
        return (Some(region), None);
    }
    let axis = if region.size[0] > 1 { 0 } else { 1 };
    let chunk = chunk[axis].max(1);
    let slice_bytes = (bytes / region.size[axis] as u64).max(1);
    // Chunk-aligned end of the head, counted from the region's origin.
    let first_boundary = (region.origin[axis] / chunk + 1) * chunk - region.origin[axis];
    let fits = usize::try_from(allowed / slice_bytes).unwrap_or(usize::MAX);
    let head_len = if fits >= first_boundary {
        first_boundary + (fits - first_boundary) / chunk * chunk
    } else if must_progress {
        first_boundary
    } else {
        return (None, Some(region));
    };
    let head_len = head_len.min(region.size[axis]);
    if head_len == region.size[axis] {
        return (Some(region), None);
    }
    let mut head = region;
    head.size[axis] = head_len;
    let mut tail = region;
    tail.origin[axis] += head_len;
    tail.size[axis] -= head_len;
    (Some(head), Some(tail))
}

/// A part of a copy that goes through one staging buffer into one brick.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Piece {
    /// Index of the brick it lands in.
    pub brick: usize,
    /// The samples, in source coordinates.
    pub region: Region,
    /// Bytes of one row in staging memory (rows are padded to the staging alignment).
    pub padded_row: u64,
}

/// The parts of `regions` that lie in each of `bricks`, cut into pieces that fit `max_stage`
/// bytes of staging memory whose rows are padded to `row_alignment` bytes (`texel` bytes a
/// sample): whole planes when a plane fits, else row bands of one plane (a single row
/// larger than `max_stage` still makes one piece).
pub fn cut_pieces(
    regions: &[Region],
    bricks: &[Region],
    texel: usize,
    row_alignment: u64,
    max_stage: u64,
) -> Vec<Piece> {
    let mut pieces = Vec::new();
    for region in regions {
        for (brick, b) in bricks.iter().enumerate() {
            let Some(part) = region.intersection(b) else {
                continue;
            };
            let padded_row = ((part.size[2] * texel) as u64).next_multiple_of(row_alignment.max(1));
            let rows = part.size[1];
            let plane_bytes = padded_row * rows as u64;
            let mut push = |region| {
                pieces.push(Piece {
                    brick,
                    region,
                    padded_row,
                })
            };
            if plane_bytes <= max_stage {
                let per_piece = usize::try_from(max_stage / plane_bytes.max(1))
                    .unwrap_or(usize::MAX)
                    .max(1);
                let mut p = 0;
                while p < part.size[0] {
                    let n = per_piece.min(part.size[0] - p);
                    push(Region {
                        origin: [part.origin[0] + p, part.origin[1], part.origin[2]],
                        size: [n, rows, part.size[2]],
                    });
                    p += n;
                }
            } else {
                let per_piece = usize::try_from(max_stage / padded_row.max(1))
                    .unwrap_or(usize::MAX)
                    .max(1);
                for p in 0..part.size[0] {
                    let mut r = 0;
                    while r < rows {
                        let n = per_piece.min(rows - r);
                        push(Region {
                            origin: [part.origin[0] + p, part.origin[1] + r, part.origin[2]],
                            size: [1, n, part.size[2]],
                        });
                        r += n;
                    }
                }
            }
        }
    }
    pieces
}

/// The texels `copies` changed: their parts inside the `changed` regions (or the copies
/// whole, when the changes are none or many: more than 64).
pub fn damage_of(copies: &[Region], changed: &[Region]) -> Vec<Region> {
    if changed.is_empty() || changed.len() > 64 {
        return copies.to_vec();
    }
    copies
        .iter()
        .flat_map(|c| changed.iter().filter_map(|e| c.intersection(e)))
        .collect()
}

/// Most rectangles a partial redraw draws separately (each draws every visual again).
pub const MAX_DAMAGE_RECTS: usize = 4;

/// A screen rectangle `[x0, y0, x1, y1]` in pixels (y down, ends exclusive).
pub type ScreenRect = [u32; 4];

/// Whole pixels covering `[x0, y0, x1, y1]` (fractional pixels, y down) with one pixel of
/// margin, clipped to a `[width, height]` target; `None` if nothing of it is inside.
pub fn pixel_rect(rect: [f32; 4], [w, h]: [u32; 2]) -> Option<ScreenRect> {
    let [x0, y0, x1, y1] = rect;
    let x0 = (x0.floor() - 1.0).clamp(0.0, w as f32) as u32;
    let y0 = (y0.floor() - 1.0).clamp(0.0, h as f32) as u32;
    let x1 = (x1.ceil() + 1.0).clamp(0.0, w as f32) as u32;
    let y1 = (y1.ceil() + 1.0).clamp(0.0, h as f32) as u32;
    (x1 > x0 && y1 > y0).then_some([x0, y0, x1, y1])
}

/// Merges screen rectangles that overlap or touch until none do; more than
/// [`MAX_DAMAGE_RECTS`] left become their bounding box.
pub fn merge_rects(mut rects: Vec<ScreenRect>) -> Vec<ScreenRect> {
    let union = |a: ScreenRect, b: ScreenRect| {
        [
            a[0].min(b[0]),
            a[1].min(b[1]),
            a[2].max(b[2]),
            a[3].max(b[3]),
        ]
    };
    if rects.len() > 16 * MAX_DAMAGE_RECTS {
        // Many small edits: one box, without the quadratic merging below.
        return rects.into_iter().reduce(union).into_iter().collect();
    }
    let touch = |a: &ScreenRect, b: &ScreenRect| {
        a[0] <= b[2] && b[0] <= a[2] && a[1] <= b[3] && b[1] <= a[3]
    };
    'again: loop {
        for i in 0..rects.len() {
            for j in i + 1..rects.len() {
                if touch(&rects[i], &rects[j]) {
                    let b = rects.swap_remove(j);
                    rects[i] = union(rects[i], b);
                    continue 'again;
                }
            }
        }
        break;
    }
    if rects.len() > MAX_DAMAGE_RECTS {
        let all = rects.iter().copied().reduce(union).expect("not empty");
        return vec![all];
    }
    rects
}

/// What a partial redraw of a `[width, height]` target draws, given the damaged rectangles.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Damage {
    /// Nothing changed on screen.
    Nothing,
    /// These rectangles, `[x, y, width, height]` in pixels, disjoint, at most
    /// [`MAX_DAMAGE_RECTS`].
    Rects(Vec<[u32; 4]>),
    /// The damage covers as many pixels as the target: draw it all.
    Full,
}

/// Merges `rects` ([`merge_rects`]) and decides between drawing them and drawing the whole
/// `[width, height]` target (when their area reaches the target's).
pub fn plan_damage(rects: Vec<ScreenRect>, [w, h]: [u32; 2]) -> Damage {
    let rects = merge_rects(rects);
    if rects.is_empty() {
        return Damage::Nothing;
    }
    let area: u64 = rects
        .iter()
        .map(|[x0, y0, x1, y1]| u64::from(x1 - x0) * u64::from(y1 - y0))
        .sum();
    if area >= u64::from(w) * u64::from(h) {
        return Damage::Full;
    }
    Damage::Rects(
        rects
            .into_iter()
            .map(|[x0, y0, x1, y1]| [x0, y0, x1 - x0, y1 - y0])
            .collect(),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A small deterministic generator for the property tests (xorshift64*).
    struct Rng(u64);

    impl Rng {
        fn below(&mut self, n: usize) -> usize {
            self.0 ^= self.0 >> 12;
            self.0 ^= self.0 << 25;
            self.0 ^= self.0 >> 27;
            (self.0.wrapping_mul(0x2545_f491_4f6c_dd1d) >> 33) as usize % n.max(1)
        }

        fn region_in(&mut self, shape: [usize; 3]) -> Region {
            let mut origin = [0; 3];
            let mut size = [0; 3];
            for a in 0..3 {
                origin[a] = self.below(shape[a]);
                size[a] = 1 + self.below(shape[a] - origin[a]);
            }
            Region { origin, size }
        }
    }

    fn covers_exactly(parts: &[Region], whole: &Region) -> bool {
        let total: usize = parts.iter().map(Region::len).sum();
        let inside = parts.iter().all(|p| whole.contains(p));
        let disjoint = parts.iter().enumerate().all(|(i, a)| {
            parts[i + 1..]
                .iter()
                .all(|b| a.intersection(b).is_none_or(|r| r.is_empty()))
        });
        total == whole.len() && inside && disjoint
    }

    #[test]
    fn bricks_split_long_axes_evenly() {
        let grid = |shape, limit| plan_bricks(shape, limit, 8).map(|g| (g.size, g.count));
        assert_eq!(
            grid([100, 200, 300], 2048),
            Some(([100, 200, 300], [1, 1, 1]))
        );
        assert_eq!(grid([40, 40, 10], 24), Some(([20, 20, 10], [2, 2, 1])));
        // Any grid of up to 8 bricks: 2 x 1 x 3, 8 x 1 x 1.
        assert_eq!(
            grid([3000, 10, 4097], 2048),
            Some(([1500, 10, 1366], [2, 1, 3]))
        );
        assert_eq!(
            grid([8 * 2048, 64, 64], 2048),
            Some(([2048, 64, 64], [8, 1, 1]))
        );
        // Nine or more bricks are refused.
        assert_eq!(grid([8 * 2048 + 1, 64, 64], 2048), None);
        assert_eq!(grid([4097, 4097, 2049], 2048), None);
        assert_eq!(
            grid([4096, 1, 2049], 2048),
            Some(([2048, 1, 1025], [2, 1, 2]))
        );
    }

    #[test]
    fn bricks_tile_the_shape_within_the_limit() {
        let mut rng = Rng(7);
        for _ in 0..500 {
            let shape = [1 + rng.below(300), 1 + rng.below(300), 1 + rng.below(300)];
            let limit = 1 + rng.below(200);
            let Some(grid) = plan_bricks(shape, limit, 8) else {
                let needed: usize = shape.iter().map(|d| d.div_ceil(limit)).product();
                assert!(
                    needed > 8,
                    "{shape:?} at {limit} refused with {needed} bricks"
                );
                continue;
            };
            let regions = grid.regions(shape);
            assert_eq!(regions.len(), grid.count.iter().product::<usize>());
            assert!(regions.iter().all(|r| r.size.iter().all(|&s| s <= limit)));
            let whole = Region {
                origin: [0; 3],
                size: shape,
            };
            assert!(covers_exactly(&regions, &whole), "{shape:?} at {limit}");
        }
    }

    #[test]
    fn budget_splits_at_chunk_boundaries_and_loses_nothing() {
        let mut rng = Rng(11);
        for _ in 0..2000 {
            let shape = [1 + rng.below(40), 1 + rng.below(40), 1 + rng.below(40)];
            let region = rng.region_in(shape);
            let chunk = [1 + rng.below(8), 1 + rng.below(8), 1 + rng.below(8)];
            let sample = 1 + rng.below(8);
            let allowed = rng.below(region.len() * sample * 2) as u64;
            let progress = rng.below(2) == 1;
            let (head, tail) = split_for_budget(region, chunk, sample, allowed, progress);
            let parts: Vec<Region> = head.into_iter().chain(tail).collect();
            assert!(covers_exactly(&parts, &region), "{region:?} {chunk:?}");
            let Some(head) = head else {
                assert!(!progress, "must progress yet nothing went: {region:?}");
                continue;
            };
            if tail.is_some() {
                let axis = if region.size[0] > 1 { 0 } else { 1 };
                // The cut lies on a chunk boundary of the source.
                assert_eq!(head.end()[axis] % chunk[axis], 0, "{region:?} {chunk:?}");
                let head_bytes = (head.len() * sample) as u64;
                let first_chunk = {
                    let mut r = region;
                    r.size[axis] =
                        (region.origin[axis] / chunk[axis] + 1) * chunk[axis] - region.origin[axis];
                    (r.len() * sample) as u64
                };
                // Within the budget, or the one chunk row that progress forces.
                assert!(head_bytes <= allowed || (progress && head_bytes == first_chunk));
            } else {
                assert!((region.len() * sample) as u64 <= allowed || progress);
            }
        }
    }

    #[test]
    fn pieces_fit_staging_and_cover_the_copies() {
        let mut rng = Rng(13);
        for _ in 0..500 {
            let shape = [1 + rng.below(30), 1 + rng.below(30), 1 + rng.below(30)];
            let grid = plan_bricks(shape, 1 + rng.below(30), 8).unwrap_or(BrickGrid {
                size: shape,
                count: [1; 3],
            });
            let bricks = grid.regions(shape);
            let region = rng.region_in(shape);
            let texel = [1, 2, 4, 8, 16][rng.below(5)];
            let max_stage = 1 + rng.below(4096) as u64;
            let pieces = cut_pieces(&[region], &bricks, texel, 256, max_stage);
            let regions: Vec<Region> = pieces.iter().map(|p| p.region).collect();
            assert!(covers_exactly(&regions, &region));
            for p in &pieces {
                assert!(bricks[p.brick].contains(&p.region));
                assert_eq!(p.padded_row % 256, 0);
                assert!(p.padded_row >= (p.region.size[2] * texel) as u64);
                let bytes = p.padded_row * (p.region.size[0] * p.region.size[1]) as u64;
                // Over the staging size only when one row alone is larger.
                assert!(bytes <= max_stage || p.region.size[0] * p.region.size[1] == 1);
            }
        }
    }

    #[test]
    fn damage_is_the_changed_part_of_each_copy() {
        let copy = Region::d2(0, 0, 8, 8);
        let edit = Region::d2(2, 3, 1, 1);
        assert_eq!(damage_of(&[copy], &[edit]), vec![edit]);
        assert_eq!(damage_of(&[copy], &[]), vec![copy]);
        let many: Vec<Region> = (0..65).map(|i| Region::d2(0, i % 8, 1, 1)).collect();
        assert_eq!(damage_of(&[copy], &many), vec![copy]);
    }

    #[test]
    fn damage_rectangles_merge_when_they_touch_and_collapse_past_the_limit() {
        let apart = merge_rects(vec![[0, 0, 10, 10], [20, 0, 30, 10]]);
        assert_eq!(apart.len(), 2);
        assert_eq!(
            merge_rects(vec![[0, 0, 10, 10], [10, 5, 20, 15], [19, 14, 25, 30]]),
            vec![[0, 0, 25, 30]]
        );
        let many: Vec<ScreenRect> = (0..5).map(|i| [i * 20, 0, i * 20 + 5, 5]).collect();
        assert_eq!(merge_rects(many), vec![[0, 0, 85, 5]]);
        assert!(merge_rects(Vec::new()).is_empty());
    }

    #[test]
    fn merged_rectangles_are_few_apart_and_cover_every_input() {
        let mut rng = Rng(17);
        for _ in 0..1000 {
            let n = rng.below(80);
            let rects: Vec<ScreenRect> = (0..n)
                .map(|_| {
                    let (x, y) = (rng.below(200) as u32, rng.below(200) as u32);
                    let (w, h) = (1 + rng.below(30) as u32, 1 + rng.below(30) as u32);
                    [x, y, x + w, y + h]
                })
                .collect();
            let merged = merge_rects(rects.clone());
            assert!(merged.len() <= MAX_DAMAGE_RECTS);
            assert_eq!(merged.is_empty(), rects.is_empty());
            for r in &rects {
                assert!(merged
                    .iter()
                    .any(|m| m[0] <= r[0] && m[1] <= r[1] && m[2] >= r[2] && m[3] >= r[3]));
            }
            if merged.len() > 1 {
                for (i, a) in merged.iter().enumerate() {
                    for b in &merged[i + 1..] {
                        let touch = a[0] <= b[2] && b[0] <= a[2] && a[1] <= b[3] && b[1] <= a[3];
                        assert!(!touch, "{a:?} and {b:?} touch");
                    }
                }
            }
        }
    }

    #[test]
    fn damage_plans_nothing_rectangles_or_everything() {
        assert_eq!(plan_damage(Vec::new(), [100, 100]), Damage::Nothing);
        assert_eq!(
            plan_damage(vec![[10, 10, 20, 30]], [100, 100]),
            Damage::Rects(vec![[10, 10, 10, 20]])
        );
        assert_eq!(
            plan_damage(vec![[0, 0, 100, 100]], [100, 100]),
            Damage::Full
        );
        assert_eq!(
            pixel_rect([10.2, 5.0, 12.5, 7.0], [100, 100]),
            Some([9, 4, 14, 8])
        );
        assert_eq!(pixel_rect([-50.0, -50.0, -10.0, -10.0], [100, 100]), None);
        assert_eq!(
            pixel_rect([0.0, 0.0, 500.0, 500.0], [100, 100]),
            Some([0, 0, 100, 100])
        );
    }
}
