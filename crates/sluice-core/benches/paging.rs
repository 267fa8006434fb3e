//! Paging planning cost (`cargo bench -p sluice-core --bench paging`).
//!
//! One frame's planning is `visible_pages_*`, `chunk_wants` and `AtlasAllocator::plan_frame`.
//! The claim measured is that its cost follows the view, not the data: each figure is the
//! median time per frame of a scripted pan over a huge source, as a ratio against the same
//! path over a small source measured in the same run (the ceiling), and the target is at most
//! 1.5x.
//!
//! - **2-D**: a 1024 x 1024 view at one pixel per sample, panning over a 100,000 x 100,000 u8
//!   pyramid (10 levels), against a 4,096 x 4,096 one (5 levels). The view and its prefetch
//!   ring lie inside both images, so both plan the same pages (50 per frame). Each figure
//!   averages 20 paths of 100 frames, the two sources interleaved.
//! - **3-D**: a 1024 x 768 perspective view filled by the volume, orbiting an 8192^3 u16
//!   pyramid (8 levels), against a 2048^3 one (6 levels), under a 512 MiB GPU budget. At one
//!   sample per pixel both want more than the budget holds, so both plan about as many pages
//!   (the budget's worth); the cost per frame grows with those pages, not with the data. (A
//!   256^3 volume wants at most 73 pages, so it is no ceiling for a budget-limited view.)
//!
//! `SLUICE_BENCH_ITERS` (default 5) timed runs per figure; `SLUICE_BENCH_STRICT=1` makes a
//! missed target exit with status 1.

use std::time::Instant;

use sluice_core::{
    chunk_wants, visible_pages_2d, visible_pages_3d, AtlasAllocator, AtlasFrame, ChunkGrid,
    ElementType, Layout, Level, LevelPolicy, PageGrid, PageKey, Shape, View2d, View3d,
    ViewOptions2d,
};

const TARGET: f64 = 1.5;

/// One measurement: seconds per frame on the huge and the small source.
type Pair<'a> = dyn Fn() -> (f64, f64) + 'a;
const FRAMES: usize = 100;

fn pyramid(dims: &[usize], levels: usize, element: ElementType) -> Layout {
    let chunk: Vec<usize> = dims
        .iter()
        .map(|_| if dims.len() == 2 { 512 } else { 64 })
        .collect();
    let base = Layout::new(Shape::new(dims).unwrap(), element, 1)
        .unwrap()
        .with_chunks(ChunkGrid::new(&chunk).unwrap());
    base.with_levels((1..levels).map(|i| {
        let f = 1usize << i;
        let shape: Vec<usize> = dims.iter().map(|d| d.div_ceil(f)).collect();
        let mut ds = [1.0; 3];
        for d in ds.iter_mut().skip(3 - dims.len()) {
            *d = f as f64;
        }
        Level::new(Shape::new(&shape).unwrap(), ds).with_chunks(ChunkGrid::new(&chunk).unwrap())
    }))
    .unwrap()
}

fn ortho(cx: f64, cy: f64, vw: f64, vh: f64) -> View2d {
    let (sx, sy) = (2.0 / vw, -2.0 / vh);
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

/// Seconds per frame of a pan over `layout`, starting at `(x, y)`.
fn run_2d(layout: &Layout, start: f64) -> f64 {
    let grid = PageGrid::default_for(layout);
    let mut atlas = AtlasAllocator::new(256 << 20, 16 << 20);
    let id = atlas
        .add_source("bench", layout.clone(), grid, 4096)
        .unwrap();
    let ready = |_: PageKey| true;
    let t = Instant::now();
    for f in 0..FRAMES {
        let x = start + 20.0 * f as f64;
        let view = ortho(x, start, 1024.0, 1024.0);
        let v = visible_pages_2d(layout, &grid, &view, ViewOptions2d::default()).unwrap();
        let chunks = chunk_wants(layout, &grid, &v.wants).unwrap();
        std::hint::black_box(&chunks);
        let plan = atlas
            .plan_frame(&[AtlasFrame {
                source: id,
                wants: &v.wants,
                ready: &ready,
            }])
            .unwrap();
        std::hint::black_box(&plan);
    }
    t.elapsed().as_secs_f64() / FRAMES as f64
}

/// Column-major perspective * look-at for an eye orbiting the volume's centre.
fn orbit(n: f64, angle: f64, aspect: f64, fovy: f64) -> ([[f64; 4]; 4], [f64; 3]) {
    let c = [n / 2.0; 3];
    let r = n * 1.6;
    let eye = [
        c[0] + r * angle.cos(),
        c[1] + 0.3 * r,
        c[2] + r * angle.sin(),
    ];
    let sub = |a: [f64; 3], b: [f64; 3]| [a[0] - b[0], a[1] - b[1], a[2] - b[2]];
    let cross = |a: [f64; 3], b: [f64; 3]| {
        [
            a[1] * b[2] - a[2] * b[1],
            a[2] * b[0] - a[0] * b[2],
            a[0] * b[1] - a[1] * b[0],
        ]
    };
    let dot = |a: [f64; 3], b: [f64; 3]| a[0] * b[0] + a[1] * b[1] + a[2] * b[2];
    let norm = |a: [f64; 3]| {
        let l = dot(a, a).sqrt();
        [a[0] / l, a[1] / l, a[2] / l]
    };
    let fwd = norm(sub(c, eye));
    let s = norm(cross(fwd, [0.0, 1.0, 0.0]));
    let u = cross(s, fwd);
    // view rows: s, u, -fwd; translation -dot(., eye).
    let view = [
        [s[0], u[0], -fwd[0], 0.0],
        [s[1], u[1], -fwd[1], 0.0],
        [s[2], u[2], -fwd[2], 0.0],
        [-dot(s, eye), -dot(u, eye), dot(fwd, eye), 1.0],
    ];
    let f = 1.0 / (fovy / 2.0).tan();
    let (near, far) = (1.0, 1e7);
    let proj = [
        [f / aspect, 0.0, 0.0, 0.0],
        [0.0, f, 0.0, 0.0],
        [0.0, 0.0, far / (near - far), -1.0],
        [0.0, 0.0, near * far / (near - far), 0.0],
    ];
    let mut m = [[0.0; 4]; 4];
    for (col, mc) in m.iter_mut().enumerate() {
        for (row, v) in mc.iter_mut().enumerate() {
            *v = (0..4).map(|k| proj[k][row] * view[col][k]).sum();
        }
    }
    (m, eye)
}

fn run_3d(layout: &Layout) -> f64 {
    let mut pages = 0;
    let n = layout.shape().width() as f64;
    let grid = PageGrid::default_for(layout);
    let budget = 512 << 20;
    let mut atlas = AtlasAllocator::new(budget, 64 << 20);
    let id = atlas
        .add_source("bench", layout.clone(), grid, 1 << 20)
        .unwrap();
    let ready = |_: PageKey| true;
    let t = Instant::now();
    for f in 0..FRAMES {
        let (m, eye) = orbit(n, f as f64 * 0.01, 1024.0 / 768.0, 0.7);
        let cam = View3d::perspective(m, eye, 0.7, 768.0);
        let v = visible_pages_3d(layout, &grid, &cam, LevelPolicy::default(), budget).unwrap();
        pages += v.wants.len();
        let chunks = chunk_wants(layout, &grid, &v.wants).unwrap();
        std::hint::black_box(&chunks);
        let plan = atlas
            .plan_frame(&[AtlasFrame {
                source: id,
                wants: &v.wants,
                ready: &ready,
            }])
            .unwrap();
        std::hint::black_box(&plan);
    }
    let secs = t.elapsed().as_secs_f64() / FRAMES as f64;
    eprintln!(
        "3-D {}^3: {} pages per frame on average",
        layout.shape().width(),
        pages / FRAMES
    );
    secs
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

fn main() {
    let iters: usize = std::env::var("SLUICE_BENCH_ITERS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(5)
        .max(1);
    let strict = std::env::var("SLUICE_BENCH_STRICT").is_ok_and(|v| v == "1");
    let huge2 = pyramid(&[100_000, 100_000], 10, ElementType::U8);
    let small2 = pyramid(&[4096, 4096], 5, ElementType::U8);
    let huge3 = pyramid(&[8192; 3], 8, ElementType::U16);
    let small3 = pyramid(&[2048; 3], 6, ElementType::U16);
    let mut missed = false;
    println!("| planning | huge ms/frame | small ms/frame | huge / small | target |");
    println!("|---|---|---|---|---|");
    let rows: [(&str, Box<Pair<'_>>); 2] = [
        (
            "2-D 1024^2 view, 100,000^2 vs 4,096^2",
            // 20 paths each, interleaved: one path takes only milliseconds.
            Box::new(|| {
                let (mut h, mut s) = (0.0, 0.0);
                for _ in 0..20 {
                    h += run_2d(&huge2, 1200.0) / 20.0;
                    s += run_2d(&small2, 1200.0) / 20.0;
                }
                (h, s)
            }),
        ),
        (
            "3-D 1024x768 view, 8192^3 vs 2048^3",
            Box::new(|| (run_3d(&huge3), run_3d(&small3))),
        ),
    ];
    for (name, f) in rows {
        let (mut h, mut s) = (Vec::new(), Vec::new());
        for _ in 0..iters {
            let (a, b) = f();
            h.push(a);
            s.push(b);
        }
        let (h, s) = (median(h), median(s));
        let ratio = h / s;
        missed |= ratio > TARGET;
        println!(
            "| {name} | {:.3} | {:.3} | {ratio:.2} | <= {TARGET} |",
            h * 1e3,
            s * 1e3
        );
    }
    if missed && strict {
        std::process::exit(1);
    }
}
