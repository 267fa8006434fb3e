//! The virtual texture's costs, each a ratio against a ceiling measured in the same run:
//!
//! 1. **Cost follows the view**: the time to the first complete frame of a 1024 x 1024 view
//!    (one sample per pixel) into a 100,000 x 100,000 procedural source (9 levels), against the
//!    same view into a 1,000 x 1,000 one. Target: at most 1.5x.
//! 2. **Loading does not slow frames**: the frame time (rendered and waited for) of a view
//!    while about 1,000 of its chunks are loading (a loader that takes 4 ms a chunk), against
//!    the same view once everything is resident and idle. Target: at most 1.2x.
//! 3. **Budgets hold**: the peak GPU page bytes and host cache bytes over a scripted pan and
//!    zoom across the huge source, against a 32 MiB GPU budget and a 64 MiB host budget.
//!    Target: never above.
//!
//! 4. **Cost follows the view, in 3-D**: the time to the first complete frame of a MIP of an
//!    8192^3 procedural f32 volume (levels halving down to 256^3, chunks of 64^3), against the
//!    same view of a 256^3 one, each fitted to the view (an orbit camera), 1024 x 768 by
//!    default (`SLUICE_BENCH_VOLUME_VIEW=WxH` for a smaller one on slow software devices).
//!    Both volumes are drawn with the default depth-sample target (`Volume::set_depth_samples`:
//!    about 256 samples along a ray, which chooses the level), as a user gets them;
//!    `SLUICE_BENCH_VOLUME_PIXEL_RULE=1` adds one run of each at one sample per pixel (not
//!    judged). Target: at most 1.5x. `SLUICE_BENCH_VOLUME_ONLY=1` runs this case alone
//!    (`SLUICE_BENCH_LOADING_ONLY=1` case 2 alone).
//! 5. **What pages cost a march**: the render-only frame (the whole target redrawn, waited
//!    for) of a linear MIP of a 256^3 `u8` volume drawn through pages (4 x 4 x 4 of
//!    them in one atlas, all resident), against the same view through the dense path (one texture,
//!    its min/max grid, on CPU devices its z-paired copy). Reported, not judged: the paged
//!    marcher looks pages up once per span of a ray and skips whole pages, the dense one
//!    skips by its finer grid (docs/measurements.md has the figures).
//!    `SLUICE_BENCH_MARCH_ONLY=1` runs this case alone.
//!
//! `cargo bench --bench chunked`; `SLUICE_BENCH_ITERS` runs (default 3, medians reported);
//! `SLUICE_BENCH_STRICT=1` exits with status 1 when a target is missed.

mod common;

use std::sync::Arc;
use std::time::{Duration, Instant};

use common::{env_usize, median, ms, Res, Verdicts};
use sluice::prelude::*;
use sluice::{
    ChunkCache, ChunkFill, ChunkGrid, ChunkKey, LazyOptions, LazySource, Level, LoaderPool,
    OrbitCamera, ProceduralLoader, Region, Volume,
};

const VIEW: u32 = 1024;
const TIMEOUT: Duration = Duration::from_secs(600);

/// A procedural f32 image of `side` x `side` level-0 samples with levels halving down to at
/// most 1024 a side, chunked `chunk` x `chunk`; each chunk takes `delay` to load.
fn source(side: usize, chunk: usize, delay: Duration, cache: &ChunkCache) -> Res<Arc<LazySource>> {
    let grid = ChunkGrid::new(&[chunk, chunk])?;
    let mut levels = Vec::new();
    let mut f = 2usize;
    while side.div_ceil(f / 2) > 1024 {
        levels.push(
            Level::new(
                Shape::d2(side.div_ceil(f), side.div_ceil(f))?,
                [1.0, f as f64, f as f64],
            )
            .with_chunks(grid),
        );
        f *= 2;
    }
    let layout = Layout::new(Shape::d2(side, side)?, ElementType::F32, 1)?
        .with_chunks(grid)
        .with_levels(levels)?;
    let loader = ProceduralLoader::new(layout, move |key: ChunkKey, region: Region, dst| {
        if !delay.is_zero() {
            std::thread::sleep(delay);
        }
        let f = (1usize << key.level) as f32;
        for (i, v) in dst.chunks_exact_mut(4).enumerate() {
            let r = (region.origin[1] + i / region.size[2]) as f32 * f;
            let c = (region.origin[2] + i % region.size[2]) as f32 * f;
            let value = (r * 0.013).sin() * (c * 0.011).cos();
            v.copy_from_slice(&value.to_le_bytes());
        }
        Ok(ChunkFill::Filled)
    });
    let options = LazyOptions::with_pool(LoaderPool::new(4)?, cache.clone());
    Ok(Arc::new(LazySource::with_options(loader, options)?))
}

fn renderer(gpu_budget: u64) -> Res<Renderer> {
    let mut options = RendererOptions::from_env()?;
    options.gpu_budget = Some(gpu_budget);
    Ok(Renderer::with_options(options)?)
}

fn scene_of(source: SharedSource) -> Res<(Scene, sluice::NodeId)> {
    let mut scene = Scene::new();
    let id = scene.add(
        Image::new(source)
            .with_clim(-1.0, 1.0)?
            .with_colormap(Colormap::Viridis),
    );
    Ok((scene, id))
}

/// Seconds to the first complete frame of a one-sample-per-pixel view at `centre` into a
/// fresh `side`^2 source, with a fresh renderer.
fn first_complete(side: usize, centre: f32, chunk: usize) -> Res<Duration> {
    let cache = ChunkCache::new(256 << 20);
    let src = source(side, chunk, Duration::ZERO, &cache)?;
    let mut r = renderer(512 << 20)?;
    let (scene, _) = scene_of(src)?;
    let target = r.create_target(VIEW, VIEW)?;
    let camera = PanZoomCamera::new(Vec2::splat(centre), 1.0);
    let t = Instant::now();
    let done = r.render_until_complete(&scene, &camera, &target, TIMEOUT)?;
    r.wait_idle()?;
    let d = t.elapsed();
    if !done.complete {
        return Err(format!("{side}^2: the view did not complete: {:?}", done.progress).into());
    }
    Ok(d)
}

/// One frame rendered and waited for: its whole time, and the part spent in `render` (the
/// CPU's work: planning, uploads, recording, submitting; the rest is waiting for the device).
fn frame(
    r: &mut Renderer,
    scene: &Scene,
    camera: &PanZoomCamera,
    target: &RenderTarget,
) -> Res<(Duration, Duration)> {
    let t = Instant::now();
    r.render(scene, camera, target)?;
    let cpu = t.elapsed();
    r.wait_idle()?;
    Ok((t.elapsed(), cpu))
}

/// A procedural f32 volume of `side`^3 level-0 samples with levels halving down to 256^3,
/// chunked 64^3.
fn volume_source(side: usize, cache: &ChunkCache) -> Res<Arc<LazySource>> {
    let grid = ChunkGrid::new(&[64, 64, 64])?;
    let mut levels = Vec::new();
    let mut f = 2usize;
    while side.div_ceil(f / 2) > 256 {
        let m = side.div_ceil(f);
        levels.push(Level::new(Shape::new(&[m, m, m])?, [f as f64; 3]).with_chunks(grid));
        f *= 2;
    }
    let layout = Layout::new(Shape::new(&[side, side, side])?, ElementType::F32, 1)?
        .with_chunks(grid)
        .with_levels(levels)?;
    let scale = 256.0 / side as f32;
    let loader = ProceduralLoader::new(layout, move |key: ChunkKey, region: Region, dst| {
        let f = (1usize << key.level) as f32 * scale;
        let [_, h, w] = region.size;
        for (i, v) in dst.chunks_exact_mut(4).enumerate() {
            let z = (region.origin[0] + i / (h * w)) as f32 * f;
            let y = (region.origin[1] + (i / w) % h) as f32 * f;
            let x = (region.origin[2] + i % w) as f32 * f;
            let value = (x * 0.05).sin() * (y * 0.043).cos() * (z * 0.037).sin();
            v.copy_from_slice(&value.to_le_bytes());
        }
        Ok(ChunkFill::Filled)
    });
    let options = LazyOptions::with_pool(LoaderPool::new(4)?, cache.clone());
    Ok(Arc::new(LazySource::with_options(loader, options)?))
}

/// Seconds to the first complete MIP frame of a fresh `side`^3 volume fitted to a `view`
/// target, with a fresh renderer and the depth-sample target `depth` (the default's
/// `Some(DEFAULT_DEPTH_SAMPLES)`, or `None`: one sample per pixel); and the level drawn.
fn first_complete_volume(
    side: usize,
    view: [u32; 2],
    depth: Option<u32>,
) -> Res<(Duration, usize)> {
    let cache = ChunkCache::new(1 << 30);
    let src = volume_source(side, &cache)?;
    let mut r = renderer(512 << 20)?;
    let mut scene = Scene::new();
    scene.add(
        Volume::new(src)
            .with_clim(-1.0, 1.0)?
            .with_colormap(Colormap::Viridis)
            .with_depth_samples(depth)?,
    );
    let target = r.create_target(view[0], view[1])?;
    let camera = OrbitCamera::fit(Vec3::ZERO, Vec3::splat(side as f32), 30.0, 20.0);
    let t = Instant::now();
    let done = r.render_until_complete(&scene, &camera, &target, TIMEOUT)?;
    r.wait_idle()?;
    let d = t.elapsed();
    if !done.complete {
        return Err(format!("{side}^3: the view did not complete: {:?}", done.progress).into());
    }
    Ok((d, done.progress.first().map_or(0, |p| p.level)))
}

/// Case 4: cost follows the view, in 3-D (alternating runs, medians).
fn volume_case(v: &mut Verdicts, iters: usize) -> Res<()> {
    let view = match std::env::var("SLUICE_BENCH_VOLUME_VIEW") {
        Ok(s) => {
            let (w, h) = s
                .split_once('x')
                .ok_or_else(|| format!("SLUICE_BENCH_VOLUME_VIEW={s:?}: expected WxH"))?;
            [w.parse()?, h.parse()?]
        }
        Err(_) => [1024, 768],
    };
    let default = Some(sluice::DEFAULT_DEPTH_SAMPLES);
    let (mut huge, mut small) = (Vec::new(), Vec::new());
    let mut levels = (0, 0);
    for _ in 0..iters {
        let (h, lh) = first_complete_volume(8192, view, default)?;
        let (s, ls) = first_complete_volume(256, view, default)?;
        huge.push(h);
        small.push(s);
        levels = (lh, ls);
    }
    let (h, s) = (median(&huge), median(&small));
    println!(
        "first complete {}x{} MIP ({} depth samples, the default): 8192^3 volume {:.1} ms (level {}), 256^3 volume {:.1} ms (level {})",
        view[0],
        view[1],
        sluice::DEFAULT_DEPTH_SAMPLES,
        ms(h),
        levels.0,
        ms(s),
        levels.1
    );
    let ratio = h.as_secs_f64() / s.as_secs_f64();
    v.judge(
        "first complete MIP frame, 8192^3 / 256^3",
        format!("{ratio:.2}x"),
        "<= 1.5x",
        ratio <= 1.5,
    );
    // For comparison, not judged: one sample per pixel at every distance (no depth-sample
    // target), one run of each.
    if std::env::var("SLUICE_BENCH_VOLUME_PIXEL_RULE").is_ok_and(|v| v == "1") {
        let (h, lh) = first_complete_volume(8192, view, None)?;
        let (s, ls) = first_complete_volume(256, view, None)?;
        println!(
            "  one sample per pixel (not judged): 8192^3 {:.1} ms (level {lh}), 256^3 {:.1} ms (level {ls}): {:.2}x",
            ms(h),
            ms(s),
            h.as_secs_f64() / s.as_secs_f64()
        );
    }
    Ok(())
}

/// The 8-bit volume of case 5: a ball with a pattern on it, `side`^3.
fn ball_u8(side: usize) -> Res<SharedSource> {
    let c = (side as f32 - 1.0) / 2.0;
    let data = sluice::ndarray::Array3::from_shape_fn((side, side, side), |(z, y, x)| {
        let p = Vec3::new(x as f32, y as f32, z as f32) - Vec3::splat(c);
        (c * 0.9 - p.length()).clamp(0.0, 200.0) as u8 + ((x * 7 + y * 3 + z) % 11) as u8
    });
    Ok(Arc::new(sluice::ArraySource::new(data)?))
}

/// Case 5's renderers: through pages (always) or dense.
fn march_renderer(paged: bool) -> Res<Renderer> {
    let mut options = RendererOptions::from_env()?;
    options.always_page_3d = paged;
    Ok(Renderer::with_options(options)?)
}

/// Case 5: render-only frames of a 256^3 u8 MIP through pages and through the dense path
/// (alternating, medians).
fn march_case(iters: usize) -> Res<()> {
    let side = 256;
    let source = ball_u8(side)?;
    let mut scene = Scene::new();
    scene.add(
        Volume::new(source)
            .with_clim(0.0, 220.0)?
            .with_interpolation(Interpolation::Linear),
    );
    let camera = OrbitCamera::fit(Vec3::ZERO, Vec3::splat(side as f32), 35.0, 25.0);
    let mut setups = Vec::new();
    for paged in [true, false] {
        let mut r = march_renderer(paged)?;
        let target = r.create_target(512, 512)?;
        let done = r.render_until_complete(&scene, &camera, &target, TIMEOUT)?;
        if !done.complete {
            return Err(format!("case 5: the view did not complete: {:?}", done.progress).into());
        }
        r.wait_idle()?;
        setups.push((r, target));
    }
    let mut times = vec![Vec::new(); setups.len()];
    for _ in 0..iters.max(3) {
        for ((r, target), t) in setups.iter_mut().zip(&mut times) {
            target.invalidate();
            let start = Instant::now();
            r.render(&scene, &camera, target)?;
            r.wait_idle()?;
            t.push(start.elapsed());
        }
    }
    let [paged, dense] = [0, 1].map(|i| median(&times[i]));
    let c = setups[0].0.counters();
    println!(
        "render-only 512x512 linear MIP of 256^3 u8: through {} pages {:.1} ms, dense {:.1} ms: {:.2}x (not judged)",
        c.pages_resident,
        ms(paged),
        ms(dense),
        paged.as_secs_f64() / dense.as_secs_f64()
    );
    Ok(())
}

fn main() -> Res<()> {
    let iters = env_usize("SLUICE_BENCH_ITERS", 3)?.max(1);
    let strict = std::env::var("SLUICE_BENCH_STRICT").is_ok_and(|v| v == "1");
    let mut v = Verdicts {
        lines: Vec::new(),
        failed: 0,
    };
    // `SLUICE_BENCH_MARCH_ONLY=1`: case 5 alone.
    if std::env::var("SLUICE_BENCH_MARCH_ONLY").is_ok_and(|v| v == "1") {
        return march_case(iters);
    }
    // `SLUICE_BENCH_VOLUME_ONLY=1`: case 4 alone.
    if std::env::var("SLUICE_BENCH_VOLUME_ONLY").is_ok_and(|v| v == "1") {
        volume_case(&mut v, iters)?;
        v.finish("virtual texture (benches/chunked.rs)", strict);
        return Ok(());
    }

    // `SLUICE_BENCH_LOADING_ONLY=1`: case 2 alone.
    let loading_only = std::env::var("SLUICE_BENCH_LOADING_ONLY").is_ok_and(|v| v == "1");

    // 1. Cost follows the view (alternating runs, medians). Both views start on a page
    // boundary: 4 x 4 pages of level 0 each. Inside the huge source the pages' 1-sample borders
    // also need the storage chunks around the view (the small source's view reaches its
    // edges, where pages have no border): with 256^2 chunks that is 6 x 6 chunks against
    // 4 x 4; with 64^2 chunks, 18 x 18 against 16 x 16.
    for chunk in [256usize, 64].into_iter().filter(|_| !loading_only) {
        let (mut huge, mut small) = (Vec::new(), Vec::new());
        for _ in 0..iters {
            huge.push(first_complete(100_000, 50_176.0, chunk)?);
            small.push(first_complete(1_000, 500.0, chunk)?);
        }
        let (h, s) = (median(&huge), median(&small));
        println!(
            "first complete 1024^2 frame, {chunk}^2 chunks: 100,000^2 source {:.1} ms, 1,000^2 source {:.1} ms",
            ms(h),
            ms(s)
        );
        let ratio = h.as_secs_f64() / s.as_secs_f64();
        v.judge(
            &format!("first complete frame, 100,000^2 / 1,000^2, {chunk}^2 chunks"),
            format!("{ratio:.2}x"),
            "<= 1.5x",
            ratio <= 1.5,
        );
    }

    // 2. Frames while ~1,000 chunks load, against idle frames of the same view. Chunks of
    // 32^2: a 1024^2 view at level 0 needs 32^2 = 1,024 of them (and the coarsest level's).
    let cache = ChunkCache::new(256 << 20);
    // `SLUICE_BENCH_LOADER_DELAY_MS` (default 4) slows or speeds the loader, for profiling
    // the loading frames (the judged figure uses the default).
    let delay = env_usize("SLUICE_BENCH_LOADER_DELAY_MS", 4)?;
    let src = source(8_192, 32, Duration::from_millis(delay as u64), &cache)?;
    let mut r = renderer(512 << 20)?;
    let (scene, id) = scene_of(src.clone())?;
    let target = r.create_target(VIEW, VIEW)?;
    let camera = PanZoomCamera::new(Vec2::splat(4096.0), 1.0);
    let mut loading = Vec::new();
    let mut loading_cpu = Vec::new();
    let mut in_flight = Vec::new();
    // The first frame creates pipelines: not timed.
    r.render(&scene, &camera, &target)?;
    for _ in 0..(5 * iters) {
        let (whole, cpu) = frame(&mut r, &scene, &camera, &target)?;
        loading.push(whole);
        loading_cpu.push(cpu);
        let p = scene
            .visual(id)
            .and_then(|visual| r.progress(visual))
            .unwrap_or_default();
        in_flight.push(p.chunks_visible - p.chunks_resident);
    }
    let done = r.render_until_complete(&scene, &camera, &target, TIMEOUT)?;
    if !done.complete {
        return Err("the loading view never completed".into());
    }
    let mut idle = Vec::new();
    let mut idle_cpu = Vec::new();
    for _ in 0..(5 * iters) {
        let (whole, cpu) = frame(&mut r, &scene, &camera, &target)?;
        idle.push(whole);
        idle_cpu.push(cpu);
    }
    let (l, i) = (median(&loading), median(&idle));
    println!(
        "  of which in render (CPU): {:.1} ms loading, {:.1} ms idle; waiting for the device: {:.1} / {:.1} ms",
        ms(median(&loading_cpu)),
        ms(median(&idle_cpu)),
        ms(l.saturating_sub(median(&loading_cpu))),
        ms(i.saturating_sub(median(&idle_cpu)))
    );
    let least = in_flight.iter().min().copied().unwrap_or(0);
    println!(
        "1024^2 frame: {:.1} ms while {least}..{} chunks were loading, {:.1} ms idle",
        ms(l),
        in_flight.iter().max().copied().unwrap_or(0),
        ms(i)
    );
    let ratio = l.as_secs_f64() / i.as_secs_f64();
    v.judge(
        "frame while ~1,000 chunks load / idle frame",
        format!("{ratio:.2}x"),
        "<= 1.2x",
        ratio <= 1.2,
    );
    v.info(
        "fewest chunks still loading during those frames",
        least.to_string(),
        "(~1,000 wanted)",
    );

    if loading_only {
        v.finish("virtual texture (benches/chunked.rs)", strict);
        return Ok(());
    }

    // 3. Budgets over a scripted pan and zoom.
    let gpu_budget = 32u64 << 20;
    let host_budget = 64usize << 20;
    let cache = ChunkCache::new(host_budget);
    let src = source(100_000, 256, Duration::ZERO, &cache)?;
    let mut r = renderer(gpu_budget)?;
    let (scene, _) = scene_of(src)?;
    let target = r.create_target(512, 512)?;
    for step in 0..12 {
        let zoom = 2f32.powi(-(step % 6));
        let centre = Vec2::new(20_000.0 + 6_000.0 * step as f32, 50_000.0);
        let camera = PanZoomCamera::new(centre, zoom);
        r.render_until_complete(&scene, &camera, &target, TIMEOUT)?;
    }
    let c = r.counters();
    println!(
        "pan and zoom: peak {:.1} MiB of pages on the GPU (budget {:.0} MiB), peak {:.1} MiB in the host cache (budget {:.0} MiB), {} pages evicted",
        c.peak_page_bytes as f64 / (1 << 20) as f64,
        gpu_budget as f64 / (1 << 20) as f64,
        cache.peak_bytes() as f64 / (1 << 20) as f64,
        host_budget as f64 / (1 << 20) as f64,
        c.pages_evicted
    );
    v.judge(
        "peak GPU page bytes / budget",
        format!("{:.2}", c.peak_page_bytes as f64 / gpu_budget as f64),
        "<= 1",
        c.peak_page_bytes <= gpu_budget,
    );
    v.judge(
        "peak host cache bytes / budget",
        format!("{:.2}", cache.peak_bytes() as f64 / host_budget as f64),
        "<= 1",
        cache.peak_bytes() <= host_budget,
    );
    volume_case(&mut v, iters)?;
    march_case(iters)?;
    v.finish("virtual texture (benches/chunked.rs)", strict);
    Ok(())
}
