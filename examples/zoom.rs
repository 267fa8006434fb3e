//! A zoom of more than a million times into the Mandelbrot set, through the virtual texture.
//!
//! The set is a procedural lazy source of 21 levels: the coarsest is 512 x 512 samples over
//! the whole set, each finer level doubles the resolution, and level 0 is 536,870,912 samples
//! a side (2^20 = 1,048,576 times finer). Chunks of any level are computed on the loader pool
//! when a view needs them; nothing else is ever computed or uploaded. A scripted path zooms
//! from the whole set to level 0 at one sample per pixel; each frame is rendered until its view
//! is complete at its level (`Renderer::render_until_complete`), saved as a PNG, and its
//! progress printed.
//!
//! `cargo run --release --example zoom [FRAMES] [SIZE]`: FRAMES frames (default 6, at least 2)
//! of SIZE x SIZE pixels (default 256). PNGs go to `target/sluice-out/` (or `$SLUICE_OUT`).

use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, Instant};

use sluice::prelude::*;
use sluice::{ChunkFill, ChunkGrid, LazySource, Level, ProceduralLoader};

/// Levels below the coarsest: level 0 is 2^FINER times finer than the coarsest.
const FINER: u32 = 20;
/// Samples a side of the coarsest level.
const COARSEST: usize = 512;
/// The complex plane the coarsest level covers: real from RE0, imaginary from IM0, SPAN wide.
const RE0: f64 = -2.2;
const IM0: f64 = -1.5;
const SPAN: f64 = 3.0;
/// Iterations before a point counts as inside the set.
const MAX_ITER: u32 = 1500;
/// Where the path zooms to (near the seahorse valley's spirals).
const TARGET: (f64, f64) = (-0.743_643_887_037_151, 0.131_825_904_205_330);

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let mut args = std::env::args().skip(1);
    let frames: u32 = args.next().map_or(Ok(6), |a| a.parse())?;
    let size: u32 = args.next().map_or(Ok(256), |a| a.parse())?;
    if frames < 2 || size == 0 {
        return Err(format!(
            "zoom [FRAMES >= 2] [SIZE >= 1]: got {frames} frames of {size} pixels"
        )
        .into());
    }
    let out_dir =
        PathBuf::from(std::env::var("SLUICE_OUT").unwrap_or_else(|_| "target/sluice-out".into()));
    std::fs::create_dir_all(&out_dir)?;

    let side0 = COARSEST << FINER;
    let grid = ChunkGrid::new(&[128, 128])?;
    let levels = (1..=FINER).map(|l| {
        let f = 1usize << l;
        Level::new(
            Shape::d2(side0 / f, side0 / f).unwrap(),
            [1.0, f as f64, f as f64],
        )
        .with_chunks(grid)
    });
    let layout = Layout::new(Shape::d2(side0, side0)?, ElementType::F32, 1)?
        .with_chunks(grid)
        .with_levels(levels)?;
    let step0 = SPAN / side0 as f64;
    let loader = ProceduralLoader::new(layout, move |key, region, dst| {
        let f = (1u64 << key.level) as f64;
        for (i, v) in dst.chunks_exact_mut(4).enumerate() {
            let r = (region.origin[1] + i / region.size[2]) as f64;
            let c = (region.origin[2] + i % region.size[2]) as f64;
            let re = RE0 + (c + 0.5) * f * step0;
            let im = IM0 + (r + 0.5) * f * step0;
            v.copy_from_slice(&escape(re, im).to_le_bytes());
        }
        Ok(ChunkFill::Filled)
    })
    .with_label("mandelbrot");
    let source = Arc::new(LazySource::new(loader)?);

    let mut scene = Scene::new();
    scene.add(
        Image::new(source.clone())
            .with_clim(0.0, 1.0)?
            .with_colormap(Colormap::Inferno)
            .with_interpolation(Interpolation::Linear),
    );
    let mut renderer = Renderer::with_options(RendererOptions::from_env()?)?;
    let target = renderer.create_target(size, size)?;

    // The target in level-0 samples, on a grid of 64 so that it and every zoom's matrix are
    // exact in f32 (zooms are powers of two).
    let snap = |v: f64| ((v / 64.0).round() * 64.0) as f32;
    let centre = Vec2::new(
        snap((TARGET.0 - RE0) / step0),
        snap((TARGET.1 - IM0) / step0),
    );
    // Zooms are powers of two, from the whole set in view (2^-whole pixels per level-0
    // sample) to one level-0 sample per pixel (2^0).
    let whole = (side0 as f64 / f64::from(size)).log2().round() as i32;
    println!(
        "zooming {}x into a {side0} x {side0} procedural image ({} levels), {frames} frames of {size} x {size}",
        1u64 << whole,
        FINER + 1
    );
    let started = Instant::now();
    for i in 0..frames {
        let e = (i as i32 * whole) / (frames as i32 - 1);
        let zoom = 2f32.powi(e - whole);
        let camera = PanZoomCamera::new(centre, zoom);
        let t = Instant::now();
        let done =
            renderer.render_until_complete(&scene, &camera, &target, Duration::from_secs(300))?;
        let path = out_dir.join(format!("zoom-{i:02}.png"));
        renderer.read_image(&target)?.save(&path)?;
        let p = &done.progress[0];
        println!(
            "frame {i}: zoom {:>9}x, level {:>2}, {} of {} visible pages, {} chunks ({} failed), {} passes in {:.2} s{} -> {}",
            1u64 << e,
            p.level,
            p.pages_resident,
            p.pages_visible,
            p.chunks_visible,
            p.failed.len(),
            done.frames,
            t.elapsed().as_secs_f64(),
            if done.complete { "" } else { " (INCOMPLETE)" },
            path.display()
        );
    }
    let c = renderer.counters();
    println!(
        "{:.2} s in all; {} pages uploaded ({:.1} MiB), peak {:.1} MiB of pages on the GPU (budget {:.0} MiB)",
        started.elapsed().as_secs_f64(),
        c.pages_uploaded,
        c.bytes_uploaded as f64 / (1 << 20) as f64,
        c.peak_page_bytes as f64 / (1 << 20) as f64,
        c.gpu_budget as f64 / (1 << 20) as f64
    );
    Ok(())
}

/// Smooth escape time of c = re + i im, mapped to 0..1 (log scale); 0 inside the set.
fn escape(re: f64, im: f64) -> f32 {
    let (mut x, mut y) = (0.0f64, 0.0f64);
    for n in 0..MAX_ITER {
        let (x2, y2) = (x * x, y * y);
        if x2 + y2 > 256.0 {
            let smooth = f64::from(n) + 1.0 - ((x2 + y2).ln() * 0.5).ln() / std::f64::consts::LN_2;
            return ((1.0 + smooth.max(0.0)).ln() / (1.0 + f64::from(MAX_ITER)).ln()) as f32;
        }
        y = 2.0 * x * y + im;
        x = x2 - y2 + re;
    }
    0.0
}
