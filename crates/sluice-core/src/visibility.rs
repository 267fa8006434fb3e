//! Which pages a view needs: level choice and visibility, for 2-D views of images and 3-D
//! views of volumes, as plain functions of matrices (no GPU, no maths crate).
//!
//! Matrices are `[[f64; 4]; 4]` in **column-major** order (`m[column][row]`, what glam's
//! `DMat4::to_cols_array_2d` gives) and map **level-0 sample coordinates** `(x, y, z, 1)` (x = column,
//! y = row, z = plane; the corner of sample `(r, c)` is at `(c, r)`) to clip space, with wgpu's
//! depth range 0..1. Every function returns [`PageWant`]s: a page, a [`Tier`] and a distance,
//! ordered as the loader pool orders chunks (visible first, coarser first within a tier,
//! nearer the view centre first). [`chunk_wants`] turns them into the storage-chunk set to
//! give [`DataSource::request_chunks`](crate::DataSource::request_chunks).

use std::cmp::Ordering;
use std::collections::{HashMap, HashSet};

use crate::chunk::{ChunkKey, ChunkWant, Tier};
use crate::layout::{Layout, Level};
use crate::pages::{PageGrid, PageKey, PagingError};

/// A column-major 4 x 4 matrix (`m[column][row]`).
pub type ClipMatrix = [[f64; 4]; 4];

/// A per-visual adjustment of the level choice.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct LevelPolicy {
    /// Levels to add to the computed choice: positive draws coarser (less data, for slow
    /// links), negative finer. The result is clamped to the source's levels.
    pub bias: i32,
    /// Draw this level whatever the zoom (clamped to the coarsest level); the bias is ignored.
    pub lock: Option<usize>,
}

impl LevelPolicy {
    /// Apply the bias or lock to `computed`, for a source of `levels` levels.
    pub fn apply(&self, computed: usize, levels: usize) -> usize {
        let last = levels.saturating_sub(1);
        match self.lock {
            Some(l) => l.min(last),
            None => (computed as i64 + self.bias as i64).clamp(0, last as i64) as usize,
        }
    }
}

/// The spacing of one level's samples on the given axes (numpy order, padded), in level-0
/// samples: the largest downsample of those axes.
fn spacing(level: &Level, axes: std::ops::Range<usize>) -> f64 {
    axes.map(|a| level.downsample[a]).fold(0.0, f64::max)
}

/// The coarsest level whose samples are no larger than `footprint` level-0 samples (what one
/// screen pixel, or one ray step, spans), i.e. at least one data sample per pixel; level 0 when
/// even it is coarser. `ndim` is 2 for images (row and column spacing) or 3 for volumes.
/// The policy then biases or locks the choice.
pub fn choose_level(levels: &[Level], footprint: f64, ndim: usize, policy: LevelPolicy) -> usize {
    let axes = 3 - ndim.clamp(1, 3)..3;
    let mut chosen = 0;
    for (i, level) in levels.iter().enumerate() {
        if spacing(level, axes.clone()) <= footprint * (1.0 + 1e-9) {
            chosen = i;
        }
    }
    policy.apply(chosen, levels.len())
}

/// One wanted page of a view.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct PageWant {
    /// The page.
    pub key: PageKey,
    /// Visible now, or prefetched.
    pub tier: Tier,
    /// Distance of the page from the view centre (2-D) or the camera (3-D), in level-0
    /// samples.
    pub distance: f64,
}

impl PageWant {
    /// The order in which pages should arrive: `Less` first. Visible before prefetch, coarser
    /// levels before finer within a tier, then nearer first (NaN last).
    pub fn load_order(&self, other: &PageWant) -> Ordering {
        let d = |x: f64| if x.is_nan() { f64::INFINITY } else { x };
        self.tier
            .cmp(&other.tier)
            .then(other.key.level.cmp(&self.key.level))
            .then(d(self.distance).total_cmp(&d(other.distance)))
            .then(self.key.cmp(&other.key))
    }
}

/// What a view needs from one source.
#[derive(Clone, Debug, PartialEq)]
pub struct ViewPages {
    /// The level chosen for the view (2-D) or the finest level any page uses (3-D).
    pub level: usize,
    /// Level-0 samples one screen pixel spans at the view centre (2-D; the smaller of the two
    /// screen axes), or the footprint scale the budget forced (3-D, 1 = none).
    pub footprint: f64,
    /// The wanted pages in load order, each once.
    pub wants: Vec<PageWant>,
}

impl ViewPages {
    /// Bytes of all wanted pages' atlas slots.
    pub fn bytes(&self, grid: &PageGrid, layout: &Layout) -> Result<usize, PagingError> {
        let slot = grid.slot_bytes(layout)?;
        slot.checked_mul(self.wants.len())
            .ok_or(PagingError::Overflow {
                what: "wanted bytes",
                detail: format!("{} pages of {slot} bytes", self.wants.len()),
            })
    }
}

/// A 2-D view of an image: the matrix from level-0 sample coordinates to clip space and the
/// viewport in pixels.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct View2d {
    /// Level-0 `(x = column, y = row, 0, 1)` to clip space, column-major.
    pub matrix: ClipMatrix,
    /// Viewport width and height in pixels.
    pub viewport: [f64; 2],
}

/// Options of [`visible_pages_2d`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ViewOptions2d {
    /// The level bias or lock.
    pub policy: LevelPolicy,
    /// Pages of prefetch around the visible ones, per side.
    pub prefetch_ring: usize,
}

impl Default for ViewOptions2d {
    /// No bias, a prefetch ring of 1 page.
    fn default() -> Self {
        ViewOptions2d {
            policy: LevelPolicy::default(),
            prefetch_ring: 1,
        }
    }
}

fn check_matrix(m: &ClipMatrix) -> Result<(), PagingError> {
    if m.iter().flatten().all(|v| v.is_finite()) {
        Ok(())
    } else {
        Err(PagingError::InvalidView {
            reason: format!("the matrix has a non-finite entry: {m:?}"),
        })
    }
}

/// `m * (x, y, z, 1)`.
fn transform(m: &ClipMatrix, p: [f64; 3]) -> [f64; 4] {
    let mut out = [0.0; 4];
    for (r, o) in out.iter_mut().enumerate() {
        *o = m[0][r] * p[0] + m[1][r] * p[1] + m[2][r] * p[2] + m[3][r];
    }
    out
}

/// Whether a convex set with these clip-space corners may meet the view: false only if all
/// corners lie outside one clip plane (a conservative test: it never drops a visible page).
fn may_be_visible(corners: &[[f64; 4]], depth: bool) -> bool {
    let planes: [fn(&[f64; 4]) -> bool; 6] = [
        |c| c[0] < -c[3],
        |c| c[0] > c[3],
        |c| c[1] < -c[3],
        |c| c[1] > c[3],
        |c| c[2] < 0.0,
        |c| c[2] > c[3],
    ];
    let n = if depth { 6 } else { 4 };
    !planes[..n].iter().any(|out| corners.iter().all(out))
}

fn inverse3(h: [[f64; 3]; 3]) -> Option<[[f64; 3]; 3]> {
    let [[a, b, c], [d, e, f], [g, i, j]] = h;
    let det = a * (e * j - f * i) - b * (d * j - f * g) + c * (d * i - e * g);
    if !det.is_finite() || det.abs() < 1e-300 {
        return None;
    }
    let inv = [
        [e * j - f * i, c * i - b * j, b * f - c * e],
        [f * g - d * j, a * j - c * g, c * d - a * f],
        [d * i - e * g, b * g - a * i, a * e - b * d],
    ];
    Some(inv.map(|row| row.map(|v| v / det)))
}

fn mul3(m: &[[f64; 3]; 3], v: [f64; 3]) -> [f64; 3] {
    [0, 1, 2].map(|r| m[r][0] * v[0] + m[r][1] * v[1] + m[r][2] * v[2])
}

/// The pages of `layout` that a 2-D view needs: those of the chosen level that meet the view,
/// a prefetch ring of `options.prefetch_ring` pages around them, and the coarsest level's
/// visible pages (so that nothing is ever a hole once those are resident), in load order.
///
/// Fails with [`PagingError::InvalidView`] for a non-finite or singular matrix, an empty
/// viewport, or a view whose centre does not see the data plane, and with
/// [`PagingError::InvalidPageSize`] unless the data and the grid are 2-D.
pub fn visible_pages_2d(
    layout: &Layout,
    grid: &PageGrid,
    view: &View2d,
    options: ViewOptions2d,
) -> Result<ViewPages, PagingError> {
    grid.check_ndim(layout, Some(2))?;
    check_matrix(&view.matrix)?;
    let [vw, vh] = view.viewport;
    if !(vw.is_finite() && vh.is_finite() && vw >= 1.0 && vh >= 1.0) {
        return Err(PagingError::InvalidView {
            reason: format!("viewport {vw} x {vh} pixels; both sides must be at least 1"),
        });
    }
    let m = &view.matrix;
    // The homography of the plane z = 0: (x, y, 1) -> (X, Y, W).
    let h = [
        [m[0][0], m[1][0], m[3][0]],
        [m[0][1], m[1][1], m[3][1]],
        [m[0][3], m[1][3], m[3][3]],
    ];
    let hinv = inverse3(h).ok_or_else(|| PagingError::InvalidView {
        reason: format!("the matrix maps the image plane to a line or a point: {m:?}"),
    })?;
    // Data point under the NDC point (u, v), if in front of the camera.
    let unproject = |u: f64, v: f64| -> Option<[f64; 2]> {
        let q = mul3(&hinv, [u, v, 1.0]);
        if q[2].abs() < 1e-300 {
            return None;
        }
        let p = [q[0] / q[2], q[1] / q[2]];
        let w = transform(m, [p[0], p[1], 0.0])[3];
        (w > 0.0 && p[0].is_finite() && p[1].is_finite()).then_some(p)
    };
    let centre = unproject(0.0, 0.0).ok_or_else(|| PagingError::InvalidView {
        reason: "the view centre does not look at the image plane".into(),
    })?;
    let to_pixel = |p: [f64; 2]| {
        let c = transform(m, [p[0], p[1], 0.0]);
        [
            (c[0] / c[3] + 1.0) * 0.5 * vw,
            (1.0 - c[1] / c[3]) * 0.5 * vh,
        ]
    };
    let p0 = to_pixel(centre);
    let px = to_pixel([centre[0] + 1.0, centre[1]]);
    let py = to_pixel([centre[0], centre[1] + 1.0]);
    // Pixels per level-0 sample (columns: along data x, data y); its inverse gives samples per
    // pixel along the screen axes.
    let (a, b, c, d) = (px[0] - p0[0], py[0] - p0[0], px[1] - p0[1], py[1] - p0[1]);
    let det = a * d - b * c;
    if !det.is_finite() || det.abs() < 1e-300 {
        return Err(PagingError::InvalidView {
            reason: "the image plane is seen edge-on".into(),
        });
    }
    let along_x = (d * d + c * c).sqrt() / det.abs();
    let along_y = (b * b + a * a).sqrt() / det.abs();
    let footprint = along_x.min(along_y);
    let levels = layout.levels();
    let level = choose_level(levels, footprint, 2, options.policy);

    // Level-0 bounding box of the view (the whole image if a corner sees no plane).
    let corners: Vec<_> = [(-1.0, -1.0), (1.0, -1.0), (-1.0, 1.0), (1.0, 1.0)]
        .iter()
        .map(|&(u, v)| unproject(u, v))
        .collect();
    let (lo, hi) = if corners.iter().all(Option::is_some) {
        let pts: Vec<[f64; 2]> = corners.into_iter().flatten().collect();
        let min = |i: usize| pts.iter().map(|p| p[i]).fold(f64::INFINITY, f64::min);
        let max = |i: usize| pts.iter().map(|p| p[i]).fold(f64::NEG_INFINITY, f64::max);
        ([0.0, min(1), min(0)], [1.0, max(1), max(0)])
    } else {
        ([f64::NEG_INFINITY; 3], [f64::INFINITY; 3])
    };
    let (lo, hi) = (lo.map(|v| v.max(-1e300)), hi.map(|v| v.min(1e300)));

    let mut wants = Vec::new();
    let mut seen = HashSet::new();
    let mut add_level =
        |lv: usize, ring: usize, wants: &mut Vec<PageWant>| -> Result<(), PagingError> {
            let (start, end) = grid.pages_in_box(layout, lv, lo, hi)?;
            if (0..3).any(|a| start[a] >= end[a]) {
                return Ok(());
            }
            let g = grid.grid_size(&levels[lv].shape);
            let rs = [start[1].saturating_sub(ring), start[2].saturating_sub(ring)];
            let re = [
                end[1].saturating_add(ring).min(g[1]),
                end[2].saturating_add(ring).min(g[2]),
            ];
            for r in rs[0]..re[0] {
                for c in rs[1]..re[1] {
                    let key = PageKey::new(lv, [0, r, c]);
                    let (blo, bhi) = grid.level0_box(layout, key)?;
                    let clip: Vec<[f64; 4]> = [
                        (blo[2], blo[1]),
                        (bhi[2], blo[1]),
                        (blo[2], bhi[1]),
                        (bhi[2], bhi[1]),
                    ]
                    .iter()
                    .map(|&(x, y)| transform(m, [x, y, 0.0]))
                    .collect();
                    let in_range =
                        (start[1]..end[1]).contains(&r) && (start[2]..end[2]).contains(&c);
                    let tier = if in_range && may_be_visible(&clip, false) {
                        Tier::Visible
                    } else {
                        Tier::Prefetch
                    };
                    if tier == Tier::Prefetch && ring == 0 {
                        continue;
                    }
                    if !seen.insert(key) {
                        continue;
                    }
                    let mid = [
                        (blo[2] + bhi[2]) * 0.5 - centre[0],
                        (blo[1] + bhi[1]) * 0.5 - centre[1],
                    ];
                    wants.push(PageWant {
                        key,
                        tier,
                        distance: (mid[0] * mid[0] + mid[1] * mid[1]).sqrt(),
                    });
                }
            }
            Ok(())
        };
    add_level(level, options.prefetch_ring, &mut wants)?;
    add_level(levels.len() - 1, 0, &mut wants)?;
    wants.sort_by(PageWant::load_order);
    Ok(ViewPages {
        level,
        footprint,
        wants,
    })
}

/// A camera looking at a volume.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct View3d {
    /// Level-0 `(x = column, y = row, z = plane, 1)` to clip space, column-major, depth 0..1.
    pub view_proj: ClipMatrix,
    /// The eye in level-0 `(x, y, z)` coordinates (for orthographic cameras: any point on the
    /// near plane; distances only order pages then).
    pub eye: [f64; 3],
    /// Level-0 samples one pixel spans at distance 0 (orthographic cameras: all of it).
    pub pixel_size: f64,
    /// Level-0 samples one pixel spans per level-0 sample of distance (perspective cameras:
    /// `2 tan(fovy / 2) / viewport_height`; 0 for orthographic).
    pub pixel_spread: f64,
}

impl View3d {
    /// A perspective camera of vertical field of view `fovy` (radians) over a viewport
    /// `viewport_height` pixels high.
    pub fn perspective(
        view_proj: ClipMatrix,
        eye: [f64; 3],
        fovy: f64,
        viewport_height: f64,
    ) -> Self {
        View3d {
            view_proj,
            eye,
            pixel_size: 0.0,
            pixel_spread: 2.0 * (fovy * 0.5).tan() / viewport_height,
        }
    }

    /// Level-0 samples one pixel (one ray step) spans at `distance` from the eye.
    pub fn footprint(&self, distance: f64) -> f64 {
        self.pixel_size + self.pixel_spread * distance
    }
}

fn box_distance(eye: [f64; 3], lo: [f64; 3], hi: [f64; 3]) -> f64 {
    // lo / hi are numpy order (plane, row, col); eye is (x, y, z).
    let e = [eye[2], eye[1], eye[0]];
    (0..3)
        .map(|a| {
            let d = (lo[a] - e[a]).max(0.0).max(e[a] - hi[a]);
            d * d
        })
        .sum::<f64>()
        .sqrt()
}

fn box_visible(m: &ClipMatrix, lo: [f64; 3], hi: [f64; 3]) -> bool {
    let mut corners = [[0.0; 4]; 8];
    for (i, c) in corners.iter_mut().enumerate() {
        let pick = |a: usize, bit: usize| if i & bit == 0 { lo[a] } else { hi[a] };
        *c = transform(m, [pick(2, 1), pick(1, 2), pick(0, 4)]);
    }
    may_be_visible(&corners, true)
}

/// The pages of a volume that a camera needs within `budget` bytes: every page is drawn at the
/// coarsest level whose samples are no larger than a pixel at the page's distance from the
/// eye (one sample per ray step), frustum-culled against the pages' boxes; the coarsest level's
/// visible pages are always in. If the set would need more than `budget` bytes, the footprint
/// is doubled (coarser levels everywhere) until it fits, so the result never exceeds the
/// budget.
///
/// The wanted set holds every page the walk visited: a refined page stays wanted next to its
/// finer pages (it is what they fall back to while they load). A level lock or bias that keeps
/// the set over the budget however coarse the footprint gives way to the budget: only the
/// coarsest level's pages are then wanted.
///
/// Fails with [`PagingError::OverBudget`] if even the coarsest level's visible pages exceed the
/// budget, [`PagingError::InvalidView`] for a non-finite matrix or footprint, and
/// [`PagingError::InvalidPageSize`] unless the data and the grid are 3-D.
pub fn visible_pages_3d(
    layout: &Layout,
    grid: &PageGrid,
    camera: &View3d,
    policy: LevelPolicy,
    budget: usize,
) -> Result<ViewPages, PagingError> {
    grid.check_ndim(layout, Some(3))?;
    check_matrix(&camera.view_proj)?;
    if !(camera.pixel_size.is_finite()
        && camera.pixel_spread.is_finite()
        && camera.pixel_size >= 0.0
        && camera.pixel_spread >= 0.0
        && camera.eye.iter().all(|v| v.is_finite()))
    {
        return Err(PagingError::InvalidView {
            reason: format!(
                "pixel size {} and spread {} must be finite and non-negative, eye {:?} finite",
                camera.pixel_size, camera.pixel_spread, camera.eye
            ),
        });
    }
    let levels = layout.levels();
    let coarsest = levels.len() - 1;
    let slot = grid.slot_bytes(layout)?;
    let max_pages = budget / slot.max(1);
    let m = &camera.view_proj;

    // The coarsest level's pages in view (the base that leaves no holes).
    let g = grid.grid_size(&levels[coarsest].shape);
    let mut base = Vec::new();
    for p in 0..g[0] {
        for r in 0..g[1] {
            for c in 0..g[2] {
                let key = PageKey::new(coarsest, [p, r, c]);
                let (lo, hi) = grid.level0_box(layout, key)?;
                if box_visible(m, lo, hi) {
                    base.push(PageWant {
                        key,
                        tier: Tier::Visible,
                        distance: box_distance(camera.eye, lo, hi),
                    });
                }
            }
        }
    }
    if base.len() > max_pages {
        return Err(PagingError::OverBudget {
            pages: base.len(),
            bytes: base.len().saturating_mul(slot),
            budget,
        });
    }

    // A lock or a negative bias may keep pages fine whatever the footprint: after this many
    // doublings the budget wins and only the coarsest level is drawn.
    const MAX_DOUBLINGS: u32 = 64;
    let mut scale = 1.0_f64;
    for _ in 0..=MAX_DOUBLINGS {
        let mut wanted: HashMap<PageKey, PageWant> = base.iter().map(|w| (w.key, *w)).collect();
        let mut stack: Vec<PageWant> = base.clone();
        let mut finest = coarsest;
        let mut over = false;
        while let Some(w) = stack.pop() {
            let target = choose_level(levels, camera.footprint(w.distance) * scale, 3, policy);
            if target >= w.key.level {
                continue;
            }
            // Refine: the next finer level's pages inside this page's box.
            let (lo, hi) = grid.level0_box(layout, w.key)?;
            let eps = 1e-6;
            let (lo_in, hi_in) = (lo.map(|v| v + eps), hi.map(|v| v - eps));
            let child = w.key.level - 1;
            let (s, e) = grid.pages_in_box(layout, child, lo_in, hi_in)?;
            for p in s[0]..e[0] {
                for r in s[1]..e[1] {
                    for c in s[2]..e[2] {
                        let key = PageKey::new(child, [p, r, c]);
                        if wanted.contains_key(&key) {
                            continue;
                        }
                        let (clo, chi) = grid.level0_box(layout, key)?;
                        if !box_visible(m, clo, chi) {
                            continue;
                        }
                        let cw = PageWant {
                            key,
                            tier: Tier::Visible,
                            distance: box_distance(camera.eye, clo, chi),
                        };
                        wanted.insert(key, cw);
                        finest = finest.min(child);
                        stack.push(cw);
                    }
                }
            }
            if wanted.len() > max_pages {
                over = true;
                break;
            }
        }
        if !over {
            let mut wants: Vec<PageWant> = wanted.into_values().collect();
            wants.sort_by(PageWant::load_order);
            return Ok(ViewPages {
                level: finest,
                footprint: scale,
                wants,
            });
        }
        scale *= 2.0;
    }
    let mut wants = base;
    wants.sort_by(PageWant::load_order);
    Ok(ViewPages {
        level: coarsest,
        footprint: f64::INFINITY,
        wants,
    })
}

/// The storage chunks a set of pages needs, each once with its most urgent want (a chunk
/// shared by a visible and a prefetch page is visible), distances carried over from the pages,
/// in load order: the set to give
/// [`DataSource::request_chunks`](crate::DataSource::request_chunks) every frame.
pub fn chunk_wants(
    layout: &Layout,
    grid: &PageGrid,
    pages: &[PageWant],
) -> Result<Vec<ChunkWant>, PagingError> {
    let mut out: HashMap<ChunkKey, (usize, ChunkWant)> = HashMap::new();
    for w in pages {
        for key in grid.chunks_needed(layout, w.key)? {
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::element::ElementType;
    use crate::region::Shape;

    /// A pyramid image of `n` levels halving each time.
    fn pyramid(h: usize, w: usize, n: usize) -> Layout {
        let base = Layout::new(Shape::d2(h, w).unwrap(), ElementType::U8, 1).unwrap();
        let levels = (1..n).map(|i| {
            let f = 1usize << i;
            Level::new(
                Shape::d2(h.div_ceil(f), w.div_ceil(f)).unwrap(),
                [1.0, f as f64, f as f64],
            )
        });
        base.with_levels(levels).unwrap()
    }

    /// Orthographic view: the level-0 point (cx, cy) at the viewport centre, `zoom` pixels per
    /// level-0 sample.
    fn ortho(cx: f64, cy: f64, zoom: f64, vw: f64, vh: f64) -> View2d {
        let sx = 2.0 * zoom / vw;
        let sy = -2.0 * zoom / vh;
        View2d {
            matrix: [
                [sx, 0.0, 0.0, 0.0],
                [0.0, sy, 0.0, 0.0],
                [0.0, 0.0, 1.0, 0.0],
                [-sx * cx, -sy * cy, 0.0, 1.0],
            ],
            viewport: [vw, vh],
        }
    }

    #[test]
    fn level_choice_gives_at_least_one_sample_per_pixel() {
        let layout = pyramid(100_000, 100_000, 8);
        let levels = layout.levels();
        let p = LevelPolicy::default();
        assert_eq!(choose_level(levels, 1.0, 2, p), 0);
        assert_eq!(choose_level(levels, 0.25, 2, p), 0);
        assert_eq!(choose_level(levels, 1.9, 2, p), 0);
        assert_eq!(choose_level(levels, 2.0, 2, p), 1);
        assert_eq!(choose_level(levels, 5.0, 2, p), 2);
        assert_eq!(choose_level(levels, 1e9, 2, p), 7);
        let bias = LevelPolicy {
            bias: 1,
            lock: None,
        };
        assert_eq!(choose_level(levels, 5.0, 2, bias), 3);
        assert_eq!(choose_level(levels, 1e9, 2, bias), 7);
        let neg = LevelPolicy {
            bias: -5,
            lock: None,
        };
        assert_eq!(choose_level(levels, 5.0, 2, neg), 0);
        let lock = LevelPolicy {
            bias: 3,
            lock: Some(4),
        };
        assert_eq!(choose_level(levels, 1.0, 2, lock), 4);
        assert_eq!(
            choose_level(
                levels,
                1.0,
                2,
                LevelPolicy {
                    bias: 0,
                    lock: Some(99)
                }
            ),
            7
        );
    }

    #[test]
    fn a_2d_view_wants_its_pages_a_ring_and_the_coarsest_level() {
        let layout = pyramid(100_000, 100_000, 10);
        let grid = PageGrid::new(2, &[256, 256], 1).unwrap();
        // 1024 x 1024 pixels at 1/4 pixel per sample (4 samples per pixel): level 2, whose
        // samples are 4 level-0 samples. The view spans 4096 level-0 samples = 1024 level-2
        // samples = 4 pages per axis when aligned to pages.
        let c = 4.0 * 256.0 * 10.0 + 2048.0; // page-aligned left edge at level-2 page 10
        let view = ortho(c, c, 0.25, 1024.0, 1024.0);
        let v = visible_pages_2d(&layout, &grid, &view, ViewOptions2d::default()).unwrap();
        assert_eq!(v.level, 2);
        assert!((v.footprint - 4.0).abs() < 1e-9);
        let vis: Vec<_> = v
            .wants
            .iter()
            .filter(|w| w.tier == Tier::Visible && w.key.level == 2)
            .collect();
        let pre: Vec<_> = v
            .wants
            .iter()
            .filter(|w| w.tier == Tier::Prefetch)
            .collect();
        // The view touches pages 10..14 on both axes (its edges fall on page borders, which the
        // conservative test keeps): at most 5 x 5, at least 4 x 4.
        assert!((16..=25).contains(&vis.len()), "{}", vis.len());
        for w in &vis {
            assert!((10..=14).contains(&w.key.index[1]) && (10..=14).contains(&w.key.index[2]));
        }
        assert!(pre.iter().all(|w| w.key.level == 2));
        assert!(!pre.is_empty());
        // The coarsest level (9: 196 x 196 samples = 1 page) is in, visible, first.
        assert_eq!(v.wants[0].key, PageKey::new(9, [0, 0, 0]));
        assert_eq!(v.wants[0].tier, Tier::Visible);
        // Ordered: visible before prefetch, coarser first, nearer first.
        for pair in v.wants.windows(2) {
            assert_ne!(pair[0].load_order(&pair[1]), Ordering::Greater);
        }
        let nearest = vis.iter().map(|w| w.distance).fold(f64::INFINITY, f64::min);
        let key = vis.iter().find(|w| w.distance == nearest).unwrap().key;
        assert!((11..=13).contains(&key.index[1]));
        // No duplicates.
        let set: HashSet<_> = v.wants.iter().map(|w| w.key).collect();
        assert_eq!(set.len(), v.wants.len());
    }

    #[test]
    fn every_pixel_of_a_2d_view_is_covered_by_a_visible_page() {
        // Seeded random views: sample points of the viewport, unproject, check a visible page
        // of the chosen level holds each point that lies inside the image.
        let layout = pyramid(5000, 7000, 6);
        let grid = PageGrid::new(2, &[128, 64], 1).unwrap();
        let mut rng = 0x9e3779b97f4a7c15_u64;
        let mut next = || {
            rng ^= rng << 13;
            rng ^= rng >> 7;
            rng ^= rng << 17;
            (rng >> 11) as f64 / (1u64 << 53) as f64
        };
        for _ in 0..200 {
            let zoom = 2f64.powf(next() * 10.0 - 6.0);
            let (cx, cy) = (next() * 8000.0 - 500.0, next() * 6000.0 - 500.0);
            let view = ortho(cx, cy, zoom, 300.0 + next() * 500.0, 200.0 + next() * 400.0);
            let v = visible_pages_2d(&layout, &grid, &view, ViewOptions2d::default()).unwrap();
            let visible: HashSet<_> = v
                .wants
                .iter()
                .filter(|w| w.tier == Tier::Visible)
                .map(|w| w.key)
                .collect();
            for i in 0..=10 {
                for j in 0..=10 {
                    let px = view.viewport[0] * i as f64 / 10.0;
                    let py = view.viewport[1] * j as f64 / 10.0;
                    let x = cx + (px - view.viewport[0] / 2.0) / zoom;
                    let y = cy + (py - view.viewport[1] / 2.0) / zoom;
                    if let Some(k) = grid.page_at(&layout, v.level, [0.0, y, x]) {
                        assert!(
                            visible.contains(&k),
                            "{k} at ({x}, {y}) missing, zoom {zoom}"
                        );
                    }
                }
            }
            // The level has at least one sample per pixel and the next coarser does not.
            let ds = layout.levels()[v.level].downsample[2];
            assert!(ds <= 1.0 / zoom * (1.0 + 1e-9) || v.level == 0);
            if v.level + 1 < layout.levels().len() {
                assert!(layout.levels()[v.level + 1].downsample[2] > 1.0 / zoom);
            }
        }
    }

    #[test]
    fn the_footprint_ignores_rotation_and_takes_the_finer_screen_axis() {
        let layout = pyramid(10_000, 10_000, 6);
        let grid = PageGrid::new(2, &[256, 256], 1).unwrap();
        // Rotated by 30 degrees at 1/4 pixel per sample: 4 samples per pixel on both axes (a
        // square viewport, so that a rotation in clip space is one in pixels).
        let (c, s) = (30f64.to_radians().cos(), 30f64.to_radians().sin());
        let mut view = ortho(5000.0, 5000.0, 0.25, 800.0, 800.0);
        let m = view.matrix;
        let rot = |x: [f64; 4]| [c * x[0] - s * x[1], s * x[0] + c * x[1], x[2], x[3]];
        view.matrix = [rot(m[0]), rot(m[1]), m[2], rot(m[3])];
        let v = visible_pages_2d(&layout, &grid, &view, ViewOptions2d::default()).unwrap();
        assert!((v.footprint - 4.0).abs() < 1e-9, "{}", v.footprint);
        assert_eq!(v.level, 2);
        // Anisotropic: 4 samples per pixel across, 2 down: the finer (2) decides.
        let mut view = ortho(5000.0, 5000.0, 0.25, 800.0, 600.0);
        view.matrix[1][1] *= 2.0;
        view.matrix[3][1] *= 2.0;
        let v = visible_pages_2d(&layout, &grid, &view, ViewOptions2d::default()).unwrap();
        assert!((v.footprint - 2.0).abs() < 1e-9, "{}", v.footprint);
        assert_eq!(v.level, 1);
    }

    #[test]
    fn bad_views_are_named() {
        let layout = pyramid(100, 100, 1);
        let grid = PageGrid::new(2, &[64, 64], 1).unwrap();
        let mut view = ortho(0.0, 0.0, 1.0, 100.0, 100.0);
        view.viewport = [0.0, 100.0];
        let e = visible_pages_2d(&layout, &grid, &view, ViewOptions2d::default()).unwrap_err();
        assert!(e.to_string().contains("viewport 0 x 100"), "{e}");
        let mut view = ortho(0.0, 0.0, 1.0, 100.0, 100.0);
        view.matrix[0][0] = f64::NAN;
        assert!(visible_pages_2d(&layout, &grid, &view, ViewOptions2d::default()).is_err());
        let mut view = ortho(0.0, 0.0, 1.0, 100.0, 100.0);
        view.matrix[0] = [0.0; 4];
        assert!(visible_pages_2d(&layout, &grid, &view, ViewOptions2d::default()).is_err());
        // A volume's grid on an image, and an image given to the 3-D planner.
        let grid3 = PageGrid::new(3, &[64, 64, 64], 1).unwrap();
        let view = ortho(0.0, 0.0, 1.0, 100.0, 100.0);
        let e = visible_pages_2d(&layout, &grid3, &view, ViewOptions2d::default()).unwrap_err();
        assert!(e.to_string().contains("[64, 64, 64]"), "{e}");
        let cam = View3d::perspective(view.matrix, [0.0; 3], 1.0, 100.0);
        let e =
            visible_pages_3d(&layout, &grid, &cam, LevelPolicy::default(), 1 << 30).unwrap_err();
        assert!(e.to_string().contains("3-D"), "{e}");
    }

    #[test]
    fn chunk_wants_are_the_union_with_the_most_urgent_tier() {
        let layout =
            pyramid(1000, 1000, 1).with_chunks(crate::layout::ChunkGrid::new(&[8, 3840]).unwrap());
        let grid = PageGrid::new(2, &[256, 256], 1).unwrap();
        let pages = [
            PageWant {
                key: PageKey::new(0, [0, 0, 0]),
                tier: Tier::Prefetch,
                distance: 1.0,
            },
            PageWant {
                key: PageKey::new(0, [0, 0, 1]),
                tier: Tier::Visible,
                distance: 5.0,
            },
        ];
        let chunks = chunk_wants(&layout, &grid, &pages).unwrap();
        // Rows 0..257 -> strips 0..=32 for both pages: 33 chunks, all visible.
        assert_eq!(chunks.len(), 33);
        assert!(chunks
            .iter()
            .all(|c| c.tier == Tier::Visible && c.distance == 5.0));
    }

    /// A volume pyramid and a perspective camera on the z axis looking down -z.
    fn volume(n: usize, levels: usize) -> Layout {
        let base = Layout::new(Shape::new(&[n, n, n]).unwrap(), ElementType::U16, 1).unwrap();
        base.with_levels((1..levels).map(|i| {
            let f = 1usize << i;
            Level::new(Shape::new(&[n.div_ceil(f); 3]).unwrap(), [f as f64; 3])
        }))
        .unwrap()
    }

    fn look_down_z(n: f64, eye_z: f64, fovy: f64, aspect: f64) -> ClipMatrix {
        // view: translate so the eye (n/2, n/2, eye_z) is at the origin looking along -z.
        let f = 1.0 / (fovy / 2.0).tan();
        let (near, far) = (1.0, 1e6);
        let a = far / (near - far);
        let b = near * far / (near - far);
        let (ex, ey) = (n / 2.0, n / 2.0);
        // proj * view, column-major, view = translate(-eye).
        [
            [f / aspect, 0.0, 0.0, 0.0],
            [0.0, f, 0.0, 0.0],
            [0.0, 0.0, a, -1.0],
            [-f / aspect * ex, -f * ey, -a * eye_z + b, eye_z],
        ]
    }

    #[test]
    fn a_3d_view_refines_near_pages_and_respects_the_budget() {
        let n = 1024.0;
        let layout = volume(1024, 5);
        let grid = PageGrid::new(3, &[64, 64, 64], 1).unwrap();
        let slot = grid.slot_bytes(&layout).unwrap();
        let eye = [n / 2.0, n / 2.0, n + 200.0];
        let m = look_down_z(n, eye[2], 1.2, 1.0);
        let cam = View3d::perspective(m, eye, 1.2, 512.0);
        let big =
            visible_pages_3d(&layout, &grid, &cam, LevelPolicy::default(), usize::MAX).unwrap();
        assert_eq!(big.footprint, 1.0);
        // Coarsest (64^3 samples = 1 page) always in.
        assert!(big
            .wants
            .iter()
            .any(|w| w.key == PageKey::new(4, [0, 0, 0])));
        // Every point in view is covered by a wanted page at least as fine as its distance
        // asks (one sample per pixel there), whatever pages an octree walk also kept.
        let set: HashSet<PageKey> = big.wants.iter().map(|w| w.key).collect();
        let mut rng = 12345_u64;
        let mut next = || {
            rng ^= rng << 13;
            rng ^= rng >> 7;
            rng ^= rng << 17;
            (rng >> 11) as f64 / (1u64 << 53) as f64
        };
        let mut checked = 0;
        for _ in 0..2000 {
            let p = [next() * n, next() * n, next() * n]; // numpy order
            let c = transform(&m, [p[2], p[1], p[0]]);
            if !may_be_visible(&[c], true) {
                continue;
            }
            checked += 1;
            let finest = (0..layout.levels().len())
                .find(|&l| {
                    grid.page_at(&layout, l, p)
                        .is_some_and(|k| set.contains(&k))
                })
                .expect("a point in view has no page");
            let d = box_distance(eye, p, p);
            let target = choose_level(layout.levels(), cam.footprint(d), 3, LevelPolicy::default());
            assert!(
                finest <= target,
                "{p:?}: finest page level {finest}, wanted {target}"
            );
        }
        assert!(checked > 500, "{checked}");
        // The point nearest the eye is drawn finer than the farthest one.
        let finest_at = |p: [f64; 3]| {
            (0..layout.levels().len())
                .find(|&l| {
                    grid.page_at(&layout, l, p)
                        .is_some_and(|k| set.contains(&k))
                })
                .unwrap()
        };
        let (near, far) = (
            finest_at([n - 1.0, n / 2.0, n / 2.0]),
            finest_at([0.5, n / 2.0, n / 2.0]),
        );
        assert!(near < far, "near {near}, far {far}");
        // Under budgets of fewer pages, the set shrinks, stays within the budget, and coarsens.
        for pages in [big.wants.len() / 2, big.wants.len() / 8, 9, 1] {
            let budget = pages * slot;
            let v = visible_pages_3d(&layout, &grid, &cam, LevelPolicy::default(), budget).unwrap();
            assert!(v.bytes(&grid, &layout).unwrap() <= budget, "{pages}");
            assert!(v.footprint > 1.0);
            assert!(v.level >= big.level);
        }
        let e =
            visible_pages_3d(&layout, &grid, &cam, LevelPolicy::default(), slot - 1).unwrap_err();
        assert!(matches!(e, PagingError::OverBudget { pages: 1, .. }), "{e}");
        // Looking away from the volume: only... nothing of the coarsest level is visible.
        let away = View3d::perspective(
            look_down_z(n, -500.0, 0.8, 1.0),
            [n / 2.0, n / 2.0, -500.0],
            0.8,
            512.0,
        );
        let v =
            visible_pages_3d(&layout, &grid, &away, LevelPolicy::default(), usize::MAX).unwrap();
        assert!(v.wants.is_empty());
    }
}
