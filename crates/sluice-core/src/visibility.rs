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
    /// Level-0 samples one ray step spans at least, at any distance (0: no floor); set by
    /// [`View3d::with_depth_samples`].
    pub min_step: f64,
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
            min_step: 0.0,
        }
    }

    /// Level-0 samples one ray step spans at `distance` from the eye: a pixel's footprint
    /// there, or [`View3d::min_step`] where that is longer.
    pub fn footprint(&self, distance: f64) -> f64 {
        (self.pixel_size + self.pixel_spread * distance).max(self.min_step)
    }

    /// This view with rays of about `samples` steps at most through `layout`'s volume (a
    /// depth-sample target, as neuroglancer's volume rendering has): every ray step spans at
    /// least the volume's depth as seen from the eye (the distance of its farthest corner
    /// less that of its nearest point) over `samples`, so a volume far finer than the screen
    /// is drawn from the level whose samples along a ray number about `samples`, whatever its
    /// size, and the cost of a view follows the view. `samples` of 0 counts as 1.
    #[must_use]
    pub fn with_depth_samples(mut self, layout: &Layout, samples: u32) -> Self {
        let [d, h, w] = layout.shape().padded().map(|v| v as f64);
        let (lo, hi) = ([0.0; 3], [d, h, w]);
        let near = box_distance(self.eye, lo, hi);
        let e = [self.eye[2], self.eye[1], self.eye[0]];
        let far = (0..8)
            .map(|i: usize| {
                (0..3)
                    .map(|a| {
                        let c = if i & (1 << a) == 0 { lo[a] } else { hi[a] };
                        (c - e[a]) * (c - e[a])
                    })
                    .sum::<f64>()
                    .sqrt()
            })
            .fold(0.0, f64::max);
        self.min_step = (far - near).max(0.0) / f64::from(samples.max(1));
        self
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
/// coarsest level whose samples are no larger than the camera's footprint at the page's
/// distance from the eye (one sample per ray step: a pixel there, or the minimum step of a
/// depth-sample target, [`View3d::with_depth_samples`]), frustum-culled against the pages' boxes; the coarsest level's
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
        && camera.min_step.is_finite()
        && camera.pixel_size >= 0.0
        && camera.pixel_spread >= 0.0
        && camera.min_step >= 0.0
        && camera.eye.iter().all(|v| v.is_finite()))
    {
        return Err(PagingError::InvalidView {
            reason: format!(
                "pixel size {}, spread {} and minimum step {} must be finite and non-negative, eye {:?} finite",
                camera.pixel_size, camera.pixel_spread, camera.min_step, camera.eye
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

/// A camera looking at a plane through a volume: an image showing a slice of a 3-D source.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct PlaneView {
    /// Plane coordinates `(u, v, 0, 1)` to clip space, column-major, depth 0..1.
    pub view_proj: ClipMatrix,
    /// The viewport, in pixels.
    pub viewport: [f64; 2],
    /// Plane coordinates `(u, v, 0, 1)` to level-0 `(x, y, z, 1)`, column-major: the first
    /// two columns are the plane's axes in level-0 samples, the fourth its origin.
    pub plane: ClipMatrix,
    /// The plane's extent: `u` in `0..size[0]`, `v` in `0..size[1]`.
    pub size: [f64; 2],
}

/// The part of the plane's rectangle `0..size` that the view sees: the rectangle clipped
/// against the six clip planes (each a half-plane in plane coordinates), as a convex polygon
/// of plane coordinates (empty if nothing is seen).
fn visible_polygon(view: &PlaneView) -> Vec<[f64; 2]> {
    let m = &view.view_proj;
    let clip = |q: [f64; 2]| transform(m, [q[0], q[1], 0.0]);
    let sides: [fn(&[f64; 4]) -> f64; 6] = [
        |c| c[3] + c[0],
        |c| c[3] - c[0],
        |c| c[3] + c[1],
        |c| c[3] - c[1],
        |c| c[2],
        |c| c[3] - c[2],
    ];
    let [w, h] = view.size;
    let mut poly = vec![[0.0, 0.0], [w, 0.0], [w, h], [0.0, h]];
    for side in sides {
        let mut out = Vec::with_capacity(poly.len() + 1);
        for (i, &a) in poly.iter().enumerate() {
            let b = poly[(i + 1) % poly.len()];
            let (fa, fb) = (side(&clip(a)), side(&clip(b)));
            if fa >= 0.0 {
                out.push(a);
            }
            if (fa >= 0.0) != (fb >= 0.0) {
                let t = fa / (fa - fb);
                out.push([a[0] + (b[0] - a[0]) * t, a[1] + (b[1] - a[1]) * t]);
            }
        }
        poly = out;
        if poly.is_empty() {
            break;
        }
    }
    poly
}

/// Level-0 samples per pixel at plane point `q`, along the plane axis that the view magnifies
/// most (so that both axes get at least one sample per pixel).
fn plane_footprint(view: &PlaneView, q: [f64; 2]) -> f64 {
    let m = &view.view_proj;
    let c = transform(m, [q[0], q[1], 0.0]);
    let w = c[3].max(1e-12);
    let axis = |col: usize| {
        // Pixels per plane unit along this axis: the derivative of the pixel position.
        let dx = (m[col][0] * w - c[0] * m[col][3]) / (w * w) * 0.5 * view.viewport[0];
        let dy = (m[col][1] * w - c[1] * m[col][3]) / (w * w) * 0.5 * view.viewport[1];
        let pixels = dx.hypot(dy);
        let samples = (0..3)
            .map(|r| view.plane[col][r].powi(2))
            .sum::<f64>()
            .sqrt();
        if pixels > 0.0 {
            samples / pixels
        } else {
            f64::INFINITY
        }
    };
    axis(0).min(axis(1))
}

/// The pages of `level` that the plane's visible polygon crosses: those whose boxes the plane
/// cuts and whose projections onto the plane overlap the polygon's bounds (a conservative
/// test), each with its distance from the polygon's centre.
fn plane_pages(
    layout: &Layout,
    grid: &PageGrid,
    view: &PlaneView,
    poly: &[[f64; 2]],
    level: usize,
) -> Result<Vec<PageWant>, PagingError> {
    let p = &view.plane;
    let at = |q: [f64; 2]| {
        // Level-0 (x, y, z) of plane point q.
        [0, 1, 2].map(|r| p[0][r] * q[0] + p[1][r] * q[1] + p[3][r])
    };
    let (u, v) = ([p[0][0], p[0][1], p[0][2]], [p[1][0], p[1][1], p[1][2]]);
    let n = [
        u[1] * v[2] - u[2] * v[1],
        u[2] * v[0] - u[0] * v[2],
        u[0] * v[1] - u[1] * v[0],
    ];
    let dot = |a: [f64; 3], b: [f64; 3]| a[0] * b[0] + a[1] * b[1] + a[2] * b[2];
    let origin = [p[3][0], p[3][1], p[3][2]];
    // Plane coordinates of a level-0 point's projection: the dual basis of (u, v).
    let (uu, uv, vv) = (dot(u, u), dot(u, v), dot(v, v));
    let det = uu * vv - uv * uv;
    let project = |x: [f64; 3]| {
        let d = [x[0] - origin[0], x[1] - origin[1], x[2] - origin[2]];
        let (a, b) = (dot(d, u), dot(d, v));
        [(a * vv - b * uv) / det, (b * uu - a * uv) / det]
    };
    let (mut qlo, mut qhi) = ([f64::INFINITY; 2], [f64::NEG_INFINITY; 2]);
    let (mut lo, mut hi) = ([f64::INFINITY; 3], [f64::NEG_INFINITY; 3]);
    let mut centre = [0.0; 3];
    for &q in poly {
        for a in 0..2 {
            qlo[a] = qlo[a].min(q[a]);
            qhi[a] = qhi[a].max(q[a]);
        }
        let x = at(q);
        for a in 0..3 {
            // lo / hi in numpy order (z, y, x).
            lo[2 - a] = lo[2 - a].min(x[a]);
            hi[2 - a] = hi[2 - a].max(x[a]);
            centre[2 - a] += x[a] / poly.len() as f64;
        }
    }
    const EPS: f64 = 1e-6;
    let (s, e) = grid.pages_in_box(layout, level, lo.map(|x| x - EPS), hi.map(|x| x + EPS))?;
    let mut out = Vec::new();
    let scale = n.iter().map(|c| c.abs()).fold(0.0, f64::max).max(1e-300);
    for pz in s[0]..e[0] {
        for py in s[1]..e[1] {
            for px in s[2]..e[2] {
                let key = PageKey::new(level, [pz, py, px]);
                let (blo, bhi) = grid.level0_box(layout, key)?;
                let (mut below, mut above) = (false, false);
                let (mut plo, mut phi) = ([f64::INFINITY; 2], [f64::NEG_INFINITY; 2]);
                for i in 0..8usize {
                    let pick = |a: usize, bit: usize| if i & bit == 0 { blo[a] } else { bhi[a] };
                    let x = [pick(2, 1), pick(1, 2), pick(0, 4)];
                    let d = dot([x[0] - origin[0], x[1] - origin[1], x[2] - origin[2]], n);
                    below |= d <= EPS * scale;
                    above |= d >= -EPS * scale;
                    let q = project(x);
                    for a in 0..2 {
                        plo[a] = plo[a].min(q[a]);
                        phi[a] = phi[a].max(q[a]);
                    }
                }
                let overlaps = (0..2).all(|a| plo[a] < qhi[a] && phi[a] > qlo[a]);
                if below && above && overlaps {
                    out.push(PageWant {
                        key,
                        tier: Tier::Visible,
                        distance: box_distance([centre[2], centre[1], centre[0]], blo, bhi),
                    });
                }
            }
        }
    }
    Ok(out)
}

/// The pages of a volume that a view of a plane through it needs within `budget` bytes: the
/// pages the plane's visible part crosses at the coarsest level with at least one sample per
/// pixel where the view magnifies the plane most (then the policy's bias or lock), and the
/// coarsest level's (what the shader falls back to, so there are no holes). Over the budget
/// the footprint doubles (coarser levels) until the set fits.
///
/// Fails with [`PagingError::OverBudget`] if even the coarsest level's pages exceed the
/// budget, [`PagingError::InvalidView`] for non-finite matrices, a plane whose axes are
/// parallel or zero, or a non-positive extent or viewport, and
/// [`PagingError::InvalidPageSize`] unless the data and the grid are 3-D.
pub fn visible_pages_plane(
    layout: &Layout,
    grid: &PageGrid,
    view: &PlaneView,
    policy: LevelPolicy,
    budget: usize,
) -> Result<ViewPages, PagingError> {
    grid.check_ndim(layout, Some(3))?;
    check_matrix(&view.view_proj)?;
    check_matrix(&view.plane)?;
    let p = &view.plane;
    let cross = [
        p[0][1] * p[1][2] - p[0][2] * p[1][1],
        p[0][2] * p[1][0] - p[0][0] * p[1][2],
        p[0][0] * p[1][1] - p[0][1] * p[1][0],
    ];
    let positive = |v: &[f64; 2]| v.iter().all(|x| x.is_finite() && *x > 0.0);
    if !positive(&view.size) || !positive(&view.viewport) || cross.iter().all(|c| *c == 0.0) {
        return Err(PagingError::InvalidView {
            reason: format!(
                "a plane of extent {:?} with axes {:?} and {:?} seen in a viewport of {:?}: extents and viewport must be positive and the axes not parallel",
                view.size,
                &p[0][..3],
                &p[1][..3],
                view.viewport
            ),
        });
    }
    let levels = layout.levels();
    let coarsest = levels.len() - 1;
    let poly = visible_polygon(view);
    if poly.is_empty() {
        return Ok(ViewPages {
            level: coarsest,
            footprint: 1.0,
            wants: Vec::new(),
        });
    }
    let slot = grid.slot_bytes(layout)?;
    let max_pages = budget / slot.max(1);
    let base = plane_pages(layout, grid, view, &poly, coarsest)?;
    if base.len() > max_pages {
        return Err(PagingError::OverBudget {
            pages: base.len(),
            bytes: base.len().saturating_mul(slot),
            budget,
        });
    }
    let footprint = poly
        .iter()
        .map(|&q| plane_footprint(view, q))
        .fold(f64::INFINITY, f64::min);
    // A lock may keep the level fine whatever the footprint: after this many doublings the
    // budget wins and only the coarsest level is drawn.
    const MAX_DOUBLINGS: u32 = 64;
    let mut scale = 1.0_f64;
    for _ in 0..=MAX_DOUBLINGS {
        let level = choose_level(levels, footprint * scale, 3, policy);
        let mut wants = base.clone();
        if level < coarsest {
            wants.extend(plane_pages(layout, grid, view, &poly, level)?);
        }
        if wants.len() <= max_pages {
            wants.sort_by(PageWant::load_order);
            return Ok(ViewPages {
                level,
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

/// Adds a prefetch ring to a volume's pages from [`visible_pages_3d`]: the pages within `ring`
/// pages (along each axis) of a wanted page, at its level, that lie outside the camera's
/// frustum, so that turning or panning the camera finds them resident. Inside the frustum
/// the level rule has already chosen what is drawn. They come as [`Tier::Prefetch`], nearest
/// to the eye first, as many as fit in `budget` bytes beside the visible pages; the visible
/// pages are never dropped or changed, so a ring of 0 or a full budget leaves `pages` as it
/// was.
///
/// Fails with [`PagingError::InvalidView`] for a non-finite matrix or eye and
/// [`PagingError::InvalidPageSize`] unless the data and the grid are 3-D.
pub fn prefetch_ring_3d(
    layout: &Layout,
    grid: &PageGrid,
    camera: &View3d,
    pages: &mut ViewPages,
    ring: usize,
    budget: usize,
) -> Result<(), PagingError> {
    grid.check_ndim(layout, Some(3))?;
    check_matrix(&camera.view_proj)?;
    if !camera.eye.iter().all(|v| v.is_finite()) {
        return Err(PagingError::InvalidView {
            reason: format!("eye {:?} must be finite", camera.eye),
        });
    }
    let m = camera.view_proj;
    let eye = camera.eye;
    add_ring(layout, grid, pages, ring, budget, |lo, hi| {
        (!box_visible(&m, lo, hi)).then(|| box_distance(eye, lo, hi))
    })
}

/// Adds a prefetch ring to the pages of a plane through a volume from
/// [`visible_pages_plane`]: the pages of the view's level within `ring` pages (along each
/// axis) of those the plane crosses: the pages beside them in the plane (for panning) and the
/// slabs of pages before and behind the plane (for stepping the slice through the volume).
/// They come as [`Tier::Prefetch`], nearest to the plane's visible part first, as many as fit
/// in `budget` bytes beside the visible pages, which are never dropped or changed.
///
/// Fails with [`PagingError::InvalidView`] for non-finite matrices and
/// [`PagingError::InvalidPageSize`] unless the data and the grid are 3-D.
pub fn prefetch_ring_plane(
    layout: &Layout,
    grid: &PageGrid,
    view: &PlaneView,
    pages: &mut ViewPages,
    ring: usize,
    budget: usize,
) -> Result<(), PagingError> {
    grid.check_ndim(layout, Some(3))?;
    check_matrix(&view.view_proj)?;
    check_matrix(&view.plane)?;
    let poly = visible_polygon(view);
    if poly.is_empty() {
        return Ok(());
    }
    // The visible part's centre, level-0 (x, y, z).
    let p = &view.plane;
    let mut centre = [0.0f64; 3];
    for q in &poly {
        for (r, c) in centre.iter_mut().enumerate() {
            *c += (p[0][r] * q[0] + p[1][r] * q[1] + p[3][r]) / poly.len() as f64;
        }
    }
    // Only the view's level grows a ring (the coarsest level's pages are the fallback).
    let (wants, others): (Vec<PageWant>, Vec<PageWant>) = std::mem::take(&mut pages.wants)
        .into_iter()
        .partition(|w| w.key.level == pages.level);
    let mut of_level = ViewPages {
        level: pages.level,
        footprint: pages.footprint,
        wants,
    };
    let slot = grid.slot_bytes(layout)?;
    let left = budget.saturating_sub(others.len().saturating_mul(slot));
    let grown = add_ring(layout, grid, &mut of_level, ring, left, |lo, hi| {
        let mid = [0, 1, 2].map(|a| (lo[2 - a] + hi[2 - a]) * 0.5 - centre[a]);
        Some((mid[0] * mid[0] + mid[1] * mid[1] + mid[2] * mid[2]).sqrt())
    });
    // The pages are put back whatever `add_ring` answered.
    pages.wants = others;
    pages.wants.extend(of_level.wants);
    pages.wants.sort_by(PageWant::load_order);
    grown
}

/// Adds to `pages` the pages within `ring` pages of each wanted page at its level that it
/// does not hold and `keep` gives a distance for, as prefetch, nearest first, while the whole
/// set stays within `budget` bytes; the result stays in load order.
fn add_ring(
    layout: &Layout,
    grid: &PageGrid,
    pages: &mut ViewPages,
    ring: usize,
    budget: usize,
    keep: impl Fn([f64; 3], [f64; 3]) -> Option<f64>,
) -> Result<(), PagingError> {
    let slot = grid.slot_bytes(layout)?;
    let max_pages = budget / slot.max(1);
    if ring == 0 || pages.wants.len() >= max_pages {
        return Ok(());
    }
    let levels = layout.levels();
    let held: HashSet<PageKey> = pages.wants.iter().map(|w| w.key).collect();
    let mut seen = HashSet::new();
    let mut ring_pages = Vec::new();
    for w in &pages.wants {
        let g = grid.grid_size(&levels[w.key.level].shape);
        let i = w.key.index;
        let lo = i.map(|v| v.saturating_sub(ring));
        let hi = [0, 1, 2].map(|a| i[a].saturating_add(ring).saturating_add(1).min(g[a]));
        for z in lo[0]..hi[0] {
            for y in lo[1]..hi[1] {
                for x in lo[2]..hi[2] {
                    let key = PageKey::new(w.key.level, [z, y, x]);
                    if held.contains(&key) || !seen.insert(key) {
                        continue;
                    }
                    let (blo, bhi) = grid.level0_box(layout, key)?;
                    if let Some(distance) = keep(blo, bhi) {
                        ring_pages.push(PageWant {
                            key,
                            tier: Tier::Prefetch,
                            distance,
                        });
                    }
                }
            }
        }
    }
    ring_pages.sort_by(PageWant::load_order);
    ring_pages.truncate(max_pages - pages.wants.len());
    pages.wants.extend(ring_pages);
    pages.wants.sort_by(PageWant::load_order);
    Ok(())
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
    #[test]
    fn a_depth_sample_target_makes_the_cost_follow_the_view_not_the_volume() {
        let grid = PageGrid::new(3, &[64, 64, 64], 1).unwrap();
        // The same framing of a 1024^3 and a 4096^3 volume (eye above the top face's centre
        // at a fifth of the side), each halving down to 64^3.
        let view = |n: f64, layout: &Layout, samples: Option<u32>| {
            let eye = [n / 2.0, n / 2.0, n * 1.2];
            let cam = View3d::perspective(look_down_z(n, eye[2], 1.2, 1.0), eye, 1.2, 768.0);
            let cam = match samples {
                Some(s) => cam.with_depth_samples(layout, s),
                None => cam,
            };
            (
                cam,
                visible_pages_3d(layout, &grid, &cam, LevelPolicy::default(), usize::MAX).unwrap(),
            )
        };
        let (small, huge) = (volume(1024, 5), volume(4096, 7));
        // The depth seen from the eye: the nearest point of the box is 0.2 n away, its
        // farthest corner sqrt(2 (n/2)^2 + (1.2 n)^2).
        let (cam, _) = view(1024.0, &small, Some(256));
        let depth = (2.0 * 512.0_f64.powi(2) + (1.2 * 1024.0_f64).powi(2)).sqrt() - 0.2 * 1024.0;
        assert!(
            (cam.min_step - depth / 256.0).abs() < 1e-9,
            "{}",
            cam.min_step
        );
        assert_eq!(cam.footprint(0.0), cam.min_step);
        let (_, s) = view(1024.0, &small, Some(256));
        let (_, h) = view(4096.0, &huge, Some(256));
        // No page finer than about 256 samples along the depth: 1222 / 256 = 4.8 samples of
        // level 0, so level 2 (4) for 1024^3 and level 4 (16) for 4096^3.
        assert_eq!(s.level, 2);
        assert_eq!(h.level, 4);
        assert!(s.wants.iter().all(|w| w.key.level >= 2));
        // The same pages, level for level two apart: the cost follows the view.
        let shape = |v: &ViewPages, shift: usize| {
            let mut k: Vec<PageKey> = v
                .wants
                .iter()
                .map(|w| PageKey::new(w.key.level - shift, w.key.index))
                .collect();
            k.sort_by_key(|k| (k.level, k.index));
            k
        };
        let (small_pages, huge_pages) = (shape(&s, 0), shape(&h, 2));
        assert_eq!(small_pages, huge_pages);
        // Without the target the huge volume's near pages go finer (one sample per pixel).
        let (_, free) = view(4096.0, &huge, None);
        assert!(free.level < 4, "{}", free.level);
        assert!(free.wants.len() > h.wants.len());
        // A bad floor is an invalid view naming it.
        let mut bad = cam;
        bad.min_step = f64::NAN;
        let e =
            visible_pages_3d(&small, &grid, &bad, LevelPolicy::default(), usize::MAX).unwrap_err();
        assert!(e.to_string().contains("minimum step NaN"), "{e}");
    }
    /// Plane coordinates `[x0, x1] x [y0, y1]` shown on a `vw` x `vh` viewport, orthographic
    /// (rows down the screen).
    fn plane_ortho(x0: f64, x1: f64, y0: f64, y1: f64) -> ClipMatrix {
        let (sx, sy) = (2.0 / (x1 - x0), 2.0 / (y1 - y0));
        [
            [sx, 0.0, 0.0, 0.0],
            [0.0, -sy, 0.0, 0.0],
            [0.0, 0.0, 0.0, 0.0],
            [-sx * x0 - 1.0, sy * y0 + 1.0, 0.5, 1.0],
        ]
    }

    #[test]
    fn a_plane_view_wants_the_pages_its_visible_part_crosses_at_its_level() {
        let layout = volume(1024, 5);
        let grid = PageGrid::new(3, &[64, 64, 64], 1).unwrap();
        let z_plane = |k: f64| {
            [
                [1.0, 0.0, 0.0, 0.0],
                [0.0, 1.0, 0.0, 0.0],
                [0.0, 0.0, 0.0, 0.0],
                [0.0, 0.0, k + 0.5, 1.0],
            ]
        };
        let keys = |v: &ViewPages| -> HashSet<PageKey> { v.wants.iter().map(|w| w.key).collect() };
        // The whole 1024^2 plane z = 500.5 on 512 x 512 pixels: 2 samples per pixel, level 1
        // (z 250.25: page 3 of 64) with all its 8 x 8 pages, and the coarsest level's page.
        let whole = PlaneView {
            view_proj: plane_ortho(0.0, 1024.0, 0.0, 1024.0),
            viewport: [512.0, 512.0],
            plane: z_plane(500.0),
            size: [1024.0, 1024.0],
        };
        let v = visible_pages_plane(&layout, &grid, &whole, LevelPolicy::default(), usize::MAX)
            .unwrap();
        let mut want: HashSet<PageKey> = (0..8)
            .flat_map(|r| (0..8).map(move |c| PageKey::new(1, [3, r, c])))
            .collect();
        want.insert(PageKey::new(4, [0, 0, 0]));
        assert_eq!(v.level, 1);
        assert_eq!(keys(&v), want);
        assert_eq!(v.wants[0].key.level, 4, "coarsest first");
        // Zoomed into [260, 516]^2: 0.5 samples per pixel, level 0, plane page 7, pages 4..=8
        // across and down.
        let zoomed = PlaneView {
            view_proj: plane_ortho(260.0, 516.0, 260.0, 516.0),
            ..whole
        };
        let v = visible_pages_plane(&layout, &grid, &zoomed, LevelPolicy::default(), usize::MAX)
            .unwrap();
        let mut want: HashSet<PageKey> = (4..=8)
            .flat_map(|r| (4..=8).map(move |c| PageKey::new(0, [7, r, c])))
            .collect();
        want.insert(PageKey::new(4, [0, 0, 0]));
        assert_eq!((v.level, keys(&v)), (0, want));
        // A lock draws its level; a budget of the coarsest page and 30 more coarsens the
        // whole view (64 + 1 pages at level 1) to level 2 (16 + 1).
        let locked = LevelPolicy {
            bias: 0,
            lock: Some(3),
        };
        let v = visible_pages_plane(&layout, &grid, &whole, locked, usize::MAX).unwrap();
        assert_eq!(v.level, 3);
        assert_eq!(v.wants.len(), 2 * 2 + 1);
        let slot = grid.slot_bytes(&layout).unwrap();
        let v =
            visible_pages_plane(&layout, &grid, &whole, LevelPolicy::default(), 31 * slot).unwrap();
        assert_eq!((v.level, v.wants.len()), (2, 17));
        // An oblique plane at 45 degrees about x through the volume: every point of it in
        // view lies in a wanted page of the chosen level, and every wanted page of that
        // level meets the plane.
        let r = std::f64::consts::FRAC_1_SQRT_2;
        let oblique = PlaneView {
            view_proj: plane_ortho(0.0, 1024.0, 0.0, 1400.0),
            viewport: [256.0, 350.0],
            plane: [
                [1.0, 0.0, 0.0, 0.0],
                [0.0, r, r, 0.0],
                [0.0, 0.0, 0.0, 0.0],
                [0.0, 0.0, 0.0, 1.0],
            ],
            size: [1024.0, 1400.0],
        };
        let v = visible_pages_plane(&layout, &grid, &oblique, LevelPolicy::default(), usize::MAX)
            .unwrap();
        assert_eq!(v.level, 2, "4 samples per pixel");
        let set = keys(&v);
        let mut rng = 99_u64;
        let mut next = || {
            rng ^= rng << 13;
            rng ^= rng >> 7;
            rng ^= rng << 17;
            (rng >> 11) as f64 / (1u64 << 53) as f64
        };
        for _ in 0..4000 {
            let (a, b) = (next() * 1024.0, next() * 1400.0);
            let x = [a, b * r, b * r];
            if let Some(k) = grid.page_at(&layout, 2, [x[2], x[1], x[0]]) {
                assert!(set.contains(&k), "plane point {x:?} in {k:?}, not wanted");
            }
        }
        for w in v.wants.iter().filter(|w| w.key.level == 2) {
            let (lo, hi) = grid.level0_box(&layout, w.key).unwrap();
            // The plane y = z (level-0 x, y, z) meets the box [lo, hi) iff the y and z
            // ranges (numpy axes 1 and 0) overlap.
            assert!(
                lo[1] <= hi[0] && lo[0] <= hi[1],
                "{:?} misses the plane",
                w.key
            );
        }
        // Looking away (the plane outside the view) wants nothing; parallel axes are refused.
        let away = PlaneView {
            view_proj: plane_ortho(2000.0, 3000.0, 0.0, 1000.0),
            ..whole
        };
        let v =
            visible_pages_plane(&layout, &grid, &away, LevelPolicy::default(), usize::MAX).unwrap();
        assert!(v.wants.is_empty());
        let mut flat = whole;
        flat.plane[1] = [2.0, 0.0, 0.0, 0.0];
        let e = visible_pages_plane(&layout, &grid, &flat, LevelPolicy::default(), usize::MAX)
            .unwrap_err();
        assert!(e.to_string().contains("not parallel"), "{e}");
    }

    #[test]
    fn a_3d_prefetch_ring_adds_the_neighbours_outside_the_frustum_within_the_budget() {
        let n = 1024.0;
        let layout = volume(1024, 5);
        let grid = PageGrid::new(3, &[64, 64, 64], 1).unwrap();
        let slot = grid.slot_bytes(&layout).unwrap();
        // A narrow camera close above the volume sees only its middle.
        let eye = [n / 2.0, n / 2.0, n + 100.0];
        let m = look_down_z(n, eye[2], 0.4, 1.0);
        let cam = View3d::perspective(m, eye, 0.4, 256.0);
        let v = visible_pages_3d(&layout, &grid, &cam, LevelPolicy::default(), usize::MAX).unwrap();
        assert!(v.wants.iter().all(|w| w.tier == Tier::Visible));
        let held: HashSet<PageKey> = v.wants.iter().map(|w| w.key).collect();
        let mut r = v.clone();
        prefetch_ring_3d(&layout, &grid, &cam, &mut r, 1, usize::MAX).unwrap();
        let visible: HashSet<PageKey> = r
            .wants
            .iter()
            .filter(|w| w.tier == Tier::Visible)
            .map(|w| w.key)
            .collect();
        assert_eq!(visible, held, "the visible pages stay as they were");
        let ring: Vec<PageWant> = r
            .wants
            .iter()
            .filter(|w| w.tier == Tier::Prefetch)
            .copied()
            .collect();
        assert!(!ring.is_empty());
        let adjacent = |a: PageKey, b: PageKey| {
            a.level == b.level && (0..3).all(|i| a.index[i].abs_diff(b.index[i]) <= 1)
        };
        for w in &ring {
            let (lo, hi) = grid.level0_box(&layout, w.key).unwrap();
            assert!(!box_visible(&m, lo, hi), "{:?} is in the frustum", w.key);
            assert!(!held.contains(&w.key));
            assert!(
                held.iter().any(|&h| adjacent(h, w.key)),
                "{:?} is no neighbour",
                w.key
            );
            assert_eq!(w.distance, box_distance(eye, lo, hi));
        }
        // Every neighbour outside the frustum is in (an unlimited budget).
        let ring_keys: HashSet<PageKey> = ring.iter().map(|w| w.key).collect();
        assert_eq!(ring_keys.len(), ring.len(), "each page once");
        for h in &held {
            let g = grid.grid_size(&layout.levels()[h.level].shape);
            for dz in -1i64..=1 {
                for dy in -1i64..=1 {
                    for dx in -1i64..=1 {
                        let i = [dz, dy, dx]
                            .iter()
                            .enumerate()
                            .map(|(a, d)| h.index[a] as i64 + d)
                            .collect::<Vec<_>>();
                        if (0..3).any(|a| i[a] < 0 || i[a] >= g[a] as i64) {
                            continue;
                        }
                        let key =
                            PageKey::new(h.level, [i[0] as usize, i[1] as usize, i[2] as usize]);
                        let (lo, hi) = grid.level0_box(&layout, key).unwrap();
                        if !held.contains(&key) && !box_visible(&m, lo, hi) {
                            assert!(ring_keys.contains(&key), "{key:?} missing from the ring");
                        }
                    }
                }
            }
        }
        // In load order: every visible page before every prefetch page.
        let first_prefetch = r
            .wants
            .iter()
            .position(|w| w.tier == Tier::Prefetch)
            .unwrap();
        assert!(r.wants[first_prefetch..]
            .iter()
            .all(|w| w.tier == Tier::Prefetch));
        // A budget with room for 5 more pages takes the first 5 in load order.
        let mut tight = v.clone();
        prefetch_ring_3d(
            &layout,
            &grid,
            &cam,
            &mut tight,
            1,
            (v.wants.len() + 5) * slot,
        )
        .unwrap();
        let mut order = ring.clone();
        order.sort_by(PageWant::load_order);
        let got: Vec<PageKey> = tight
            .wants
            .iter()
            .filter(|w| w.tier == Tier::Prefetch)
            .map(|w| w.key)
            .collect();
        assert_eq!(got, order[..5].iter().map(|w| w.key).collect::<Vec<_>>());
        // No room, or a ring of 0: nothing changes (the visible pages are never dropped).
        for (ring, budget) in [(1, v.wants.len() * slot - 1), (0, usize::MAX)] {
            let mut same = v.clone();
            prefetch_ring_3d(&layout, &grid, &cam, &mut same, ring, budget).unwrap();
            assert_eq!(same, v);
        }
        let mut bad = cam;
        bad.eye[1] = f64::INFINITY;
        let e = prefetch_ring_3d(&layout, &grid, &bad, &mut v.clone(), 1, usize::MAX).unwrap_err();
        assert!(e.to_string().contains("inf"), "{e}");
    }

    #[test]
    fn a_plane_prefetch_ring_holds_the_slabs_beside_and_the_pages_around() {
        let layout = volume(1024, 5);
        let grid = PageGrid::new(3, &[64, 64, 64], 1).unwrap();
        let slot = grid.slot_bytes(&layout).unwrap();
        let z_plane = |k: f64| {
            [
                [1.0, 0.0, 0.0, 0.0],
                [0.0, 1.0, 0.0, 0.0],
                [0.0, 0.0, 0.0, 0.0],
                [0.0, 0.0, k + 0.5, 1.0],
            ]
        };
        let split = |v: &ViewPages, tier: Tier| -> HashSet<PageKey> {
            v.wants
                .iter()
                .filter(|w| w.tier == tier)
                .map(|w| w.key)
                .collect()
        };
        // The whole plane z = 500.5 at level 1 (plane page 3, all 8 x 8 pages across): the
        // ring is the slabs of pages 2 and 4, nothing around (the plane is all in view), and
        // the coarsest level's page grows none.
        let whole = PlaneView {
            view_proj: plane_ortho(0.0, 1024.0, 0.0, 1024.0),
            viewport: [512.0, 512.0],
            plane: z_plane(500.0),
            size: [1024.0, 1024.0],
        };
        let v = visible_pages_plane(&layout, &grid, &whole, LevelPolicy::default(), usize::MAX)
            .unwrap();
        let mut r = v.clone();
        prefetch_ring_plane(&layout, &grid, &whole, &mut r, 1, usize::MAX).unwrap();
        assert_eq!(split(&r, Tier::Visible), split(&v, Tier::Visible));
        let want: HashSet<PageKey> = [2usize, 4]
            .iter()
            .flat_map(|&z| {
                (0..8).flat_map(move |y| (0..8).map(move |x| PageKey::new(1, [z, y, x])))
            })
            .collect();
        assert_eq!(split(&r, Tier::Prefetch), want);
        // Zoomed into [260, 516]^2 at level 0 (plane page 7, pages 4..=8 across and down):
        // the pages around in the plane and the slabs before and behind, 3 x 7 x 7 less the
        // 25 visible ones; the page right behind the view's centre comes first.
        let zoomed = PlaneView {
            view_proj: plane_ortho(260.0, 516.0, 260.0, 516.0),
            ..whole
        };
        let v = visible_pages_plane(&layout, &grid, &zoomed, LevelPolicy::default(), usize::MAX)
            .unwrap();
        let mut r = v.clone();
        prefetch_ring_plane(&layout, &grid, &zoomed, &mut r, 1, usize::MAX).unwrap();
        let visible = split(&v, Tier::Visible);
        let want: HashSet<PageKey> = (6..=8)
            .flat_map(|z| {
                (3..=9).flat_map(move |y| (3..=9).map(move |x| PageKey::new(0, [z, y, x])))
            })
            .filter(|k| !visible.contains(k))
            .collect();
        assert_eq!(want.len(), 3 * 49 - 25);
        assert_eq!(split(&r, Tier::Prefetch), want);
        let first = r.wants.iter().find(|w| w.tier == Tier::Prefetch).unwrap();
        assert_eq!(first.key, PageKey::new(0, [8, 6, 6]));
        // Within a budget of 10 more pages, the 10 first of them.
        let mut tight = v.clone();
        prefetch_ring_plane(
            &layout,
            &grid,
            &zoomed,
            &mut tight,
            1,
            (v.wants.len() + 10) * slot,
        )
        .unwrap();
        assert_eq!(split(&tight, Tier::Prefetch).len(), 10);
        assert_eq!(split(&tight, Tier::Visible), visible);
        // A ring of 0 changes nothing.
        let mut same = v.clone();
        prefetch_ring_plane(&layout, &grid, &zoomed, &mut same, 0, usize::MAX).unwrap();
        assert_eq!(same, v);
    }
}
