//! The virtual texture on a real GPU (lavapipe in CI): lazy, multiscale and over-limit 2-D
//! sources drawn through pages, against values computed on the CPU; budgets, uploads driven
//! by visibility, progress, and injected faults.

mod common;

use std::sync::atomic::{AtomicBool, AtomicU32, Ordering};
use std::sync::Arc;
use std::time::Duration;

use common::{expected_entry, pixel_diff, renderer};
use sluice::prelude::*;
use sluice::{
    ChunkCache, ChunkFill, ChunkGrid, ChunkKey, ChunkStatus, LazyOptions, LazySource, Level,
    LevelPolicy, LoaderPool, ProceduralLoader, Region, RetryPolicy,
};

const LONG: Duration = Duration::from_secs(60);

/// The test pattern: level-0 sample (r, c).
fn pattern(r: usize, c: usize) -> f32 {
    ((r * 3 + c * 5) % 251) as f32
}

/// A `levels`-level f32 image of `h` x `w` level-0 samples, level `l` sampling the pattern at
/// (r 2^l, c 2^l), stored in chunks of `chunk`.
fn pyramid_layout(h: usize, w: usize, levels: usize, chunk: [usize; 2]) -> Layout {
    let grid = ChunkGrid::new(&chunk).unwrap();
    let coarser = (1..levels).map(|l| {
        let f = 1usize << l;
        Level::new(
            Shape::d2(h.div_ceil(f), w.div_ceil(f)).unwrap(),
            [1.0, f as f64, f as f64],
        )
        .with_chunks(grid)
    });
    Layout::new(Shape::d2(h, w).unwrap(), ElementType::F32, 1)
        .unwrap()
        .with_chunks(grid)
        .with_levels(coarser)
        .unwrap()
}

fn fill_pattern(key: ChunkKey, region: Region, dst: &mut [u8]) {
    let f = 1usize << key.level;
    for (i, v) in dst.chunks_exact_mut(4).enumerate() {
        let (r, c) = (
            region.origin[1] + i / region.size[2],
            region.origin[2] + i % region.size[2],
        );
        v.copy_from_slice(&pattern(r * f, c * f).to_le_bytes());
    }
}

fn options() -> LazyOptions {
    let mut o = LazyOptions::with_pool(LoaderPool::new(2).unwrap(), ChunkCache::new(64 << 20));
    o.retry = RetryPolicy {
        attempts: 2,
        backoff: Duration::from_millis(5),
        max_backoff: Duration::from_millis(5),
    };
    o
}

fn procedural(layout: Layout) -> Arc<LazySource> {
    let loader = ProceduralLoader::new(layout, |key, region, dst| {
        fill_pattern(key, region, dst);
        Ok(ChunkFill::Filled)
    });
    Arc::new(LazySource::with_options(loader, options()).unwrap())
}

fn paged_renderer(page: usize, budget: Option<u64>, upload: Option<u64>) -> Renderer {
    let mut options = RendererOptions::from_env().unwrap();
    options.page_size_2d = Some(page);
    options.gpu_budget = budget;
    options.upload_budget = upload;
    Renderer::with_options(options).expect("a GPU adapter for the rendering tests")
}

fn gray_image(source: SharedSource) -> Image {
    Image::new(source)
        .with_clim(0.0, 255.0)
        .unwrap()
        .with_colormap(Colormap::Gray)
}

/// Asserts every pixel of `img` shows the pattern at level-0 sample (r0 + y * step, c0 + x *
/// step) through Gray and clim 0..255 (nearest sampling; an entry's neighbour where the value
/// sits on a LUT boundary).
#[track_caller]
fn assert_pattern(img: &image::RgbaImage, r0: usize, c0: usize, step: usize) {
    assert_pattern_gamma(img, r0, c0, step, 1.0);
}

/// [`assert_pattern`] through a gamma curve.
#[track_caller]
fn assert_pattern_gamma(img: &image::RgbaImage, r0: usize, c0: usize, step: usize, gamma: f32) {
    for y in 0..img.height() {
        for x in 0..img.width() {
            let v = pattern(r0 + y as usize * step, c0 + x as usize * step);
            let (want, near) = expected_entry(&Colormap::Gray, v, [0.0, 255.0], gamma);
            let got = img.get_pixel(x, y).0;
            assert!(
                got == want || Some(got) == near,
                "pixel ({x}, {y}) is {got:?}, expected {want:?} (value {v})"
            );
        }
    }
}

#[test]
fn a_lazy_multiscale_image_shows_level_0_once_complete() {
    let source = procedural(pyramid_layout(600, 600, 3, [50, 70]));
    let mut r = paged_renderer(64, None, None);
    let mut scene = Scene::new();
    let id = scene.add(gray_image(source.clone()));
    let target = r.create_target(200, 150).unwrap();
    let camera = PanZoomCamera::new(Vec2::new(300.0, 300.0), 1.0);
    let done = r
        .render_until_complete(&scene, &camera, &target, LONG)
        .unwrap();
    assert!(done.complete, "{done:?}");
    assert_eq!(done.progress.len(), 1);
    assert_eq!(done.progress[0].level, 0);
    assert!(done.progress[0].failed.is_empty());
    let img = r.read_image(&target).unwrap();
    assert_pattern(&img, 225, 200, 1);
    let c = r.counters();
    assert!(
        c.pages_resident > 0 && c.page_bytes_resident <= c.gpu_budget,
        "{c:?}"
    );
    // A gamma curve draws through another pipeline (`GAMMA_CURVE`), over the same pages.
    scene.image_mut(id).unwrap().set_gamma(1.3).unwrap();
    r.render(&scene, &camera, &target).unwrap();
    assert_pattern_gamma(&r.read_image(&target).unwrap(), 225, 200, 1, 1.3);
}

#[test]
fn zoomed_out_views_show_the_coarser_level() {
    let source = procedural(pyramid_layout(600, 600, 3, [64, 64]));
    let mut r = paged_renderer(64, None, None);
    let mut scene = Scene::new();
    scene.add(gray_image(source.clone()));
    let (w, h) = (150u32, 150u32);
    let target = r.create_target(w, h).unwrap();
    // A little under a quarter of a pixel per sample: level 2 (4 level-0 samples per sample)
    // is the coarsest with at least one sample per pixel.
    let (centre, zoom) = (300.0f32, 0.2499f32);
    let camera = PanZoomCamera::new(Vec2::new(centre, centre), zoom);
    let done = r
        .render_until_complete(&scene, &camera, &target, LONG)
        .unwrap();
    assert!(done.complete, "{done:?}");
    assert_eq!(done.progress[0].level, 2);
    let img = r.read_image(&target).unwrap();
    // Pixel centre -> level-0 point -> nearest level-2 sample; skip pixels within 1e-3 of a
    // sample edge (rounding may go either way there).
    let mut checked = 0;
    for y in 0..h {
        for x in 0..w {
            let to_level2 = |p: u32, half: u32| {
                let world = centre as f64 + (p as f64 + 0.5 - half as f64 / 2.0) / zoom as f64;
                world / 4.0
            };
            let (cx, cy) = (to_level2(x, w), to_level2(y, h));
            let edge = |v: f64| (v - v.round()).abs() < 1e-3;
            if edge(cx) || edge(cy) || cx < 0.0 || cy < 0.0 || cx >= 150.0 || cy >= 150.0 {
                continue;
            }
            let v = pattern(4 * cy.floor() as usize, 4 * cx.floor() as usize);
            let (want, near) = expected_entry(&Colormap::Gray, v, [0.0, 255.0], 1.0);
            let got = img.get_pixel(x, y).0;
            assert!(
                got == want || Some(got) == near,
                "pixel ({x}, {y}) is {got:?}, expected {want:?} (level-2 sample {cy}, {cx})"
            );
            checked += 1;
        }
    }
    assert!(checked > 20_000, "{checked}");
}

#[test]
fn storage_chunks_need_not_match_pages() {
    // Strips of 8 x 3840, as NDPI-derived stores have, under 256 x 256 pages.
    let layout = pyramid_layout(300, 4000, 1, [8, 3840]);
    let source = procedural(layout);
    let mut r = paged_renderer(256, None, None);
    let mut scene = Scene::new();
    scene.add(gray_image(source.clone()));
    let target = r.create_target(300, 120).unwrap();
    let camera = PanZoomCamera::new(Vec2::new(3800.0, 200.0), 1.0);
    let done = r
        .render_until_complete(&scene, &camera, &target, LONG)
        .unwrap();
    assert!(done.complete, "{done:?}");
    assert!(done.progress[0].chunks_visible >= 2 * 17, "{done:?}");
    let img = r.read_image(&target).unwrap();
    assert_pattern(&img, 140, 3650, 1);
}

#[test]
fn a_dense_source_over_the_texture_limit_is_paged() {
    let mut r = paged_renderer(256, None, None);
    let w = r.max_texture_dimension_2d() as usize + 300;
    let data = Array2::from_shape_fn((40, w), |(row, c)| pattern(row, c));
    let source: SharedSource = Arc::new(ArraySource::new(data).unwrap());
    let mut scene = Scene::new();
    scene.add(gray_image(source));
    let target = r.create_target(400, 40).unwrap();
    let camera = PanZoomCamera::new(Vec2::new(w as f32 - 200.0, 20.0), 1.0);
    let done = r
        .render_until_complete(&scene, &camera, &target, LONG)
        .unwrap();
    assert!(done.complete, "{done:?}");
    let img = r.read_image(&target).unwrap();
    assert_pattern(&img, 0, w - 400, 1);
}

/// The same dense sources drawn by the dense path and through pages give the same pixels:
/// for f32 data through Gray within 1 per channel, one colormap entry (2 where f32 is
/// filterable, see below; no filterable-float feature: four taps in both, but the coordinates are computed in another order,
/// anchor-relative, so a value on an entry boundary may take the neighbouring entry), and
/// within 2 per channel for u8 data
/// through Gray (a unorm atlas filtered by the hardware, whose weights have 8 fractional bits
/// on lavapipe: values differ by up to about 1.5/255), for nearest and linear sampling under
/// zooms that put pixel centres between samples (nearest leaves out the pixels whose centre
/// is within 1/256 sample of a sample edge: either sample is right there).
#[test]
fn dense_and_paged_paths_give_the_same_pixels() {
    let mut dense = renderer();
    let mut options = RendererOptions::from_env().unwrap();
    options.always_page_2d = true;
    options.page_size_2d = Some(32);
    let mut paged = Renderer::with_options(options).unwrap();
    let f32_data = Array2::from_shape_fn((90, 130), |(r, c)| pattern(r, c));
    let u8_data = Array2::from_shape_fn((90, 130), |(r, c)| pattern(r, c) as u8);
    // NaN at one sample in eleven: both paths leave NaN taps out of a linear sample and
    // renormalize the rest (all NaN: the NaN colour).
    let nan_data = Array2::from_shape_fn((90, 130), |(r, c)| {
        if (r * 7 + c * 3) % 11 == 0 {
            f32::NAN
        } else {
            pattern(r, c)
        }
    });
    // Where f32 is filterable both paths filter it in hardware, at texel positions that
    // differ by float rounding, with weights the device may round to 8 bits (the H100: one
    // pixel of the second camera's linear view by 2).
    let filterable = paged
        .device()
        .features()
        .contains(wgpu::Features::FLOAT32_FILTERABLE);
    let f32_tol = if filterable { 2 } else { 1 };
    let sources: [(SharedSource, Colormap, u8); 3] = [
        (
            Arc::new(ArraySource::new(f32_data).unwrap()),
            Colormap::Gray,
            f32_tol,
        ),
        (
            Arc::new(ArraySource::new(nan_data).unwrap()),
            Colormap::Gray,
            f32_tol,
        ),
        (
            Arc::new(ArraySource::new(u8_data).unwrap()),
            Colormap::Gray,
            2,
        ),
    ];
    for (source, colormap, tol) in sources {
        for interpolation in [Interpolation::Nearest, Interpolation::Linear] {
            let mut scene = Scene::new();
            scene.add(
                gray_image(source.clone())
                    .with_colormap(colormap.clone())
                    .with_interpolation(interpolation),
            );
            // The second view pans across page edges the first left without their border
            // (no view came near them): those pages are uploaded again with it.
            for camera in [
                PanZoomCamera::new(Vec2::new(61.3, 40.7), 2.37),
                PanZoomCamera::new(Vec2::new(33.9, 58.2), 1.71),
            ] {
                let a = common::render(&mut dense, &scene, &camera, 160, 120);
                let target = paged.create_target(160, 120).unwrap();
                let done = paged
                    .render_until_complete(&scene, &camera, &target, LONG)
                    .unwrap();
                assert!(done.complete, "{done:?}");
                let b = paged.read_image(&target).unwrap();
                // Nearest: a pixel whose centre lies within 1/256 sample of a sample edge
                // may take either sample, as the two paths compute its position in another
                // order (on the H100 the first camera's column 157, 0.00042 of a sample past
                // an edge, took the neighbour in the paged path: by 5). Such pixels are left
                // out, their columns and rows found here from the camera.
                let near_edge = |centre: f32, zoom: f32, half: f32, p: u32| {
                    let at = centre as f64 + (p as f64 + 0.5 - half as f64) / zoom as f64;
                    interpolation == Interpolation::Nearest && (at - at.round()).abs() < 1.0 / 256.0
                };
                let mut worst = 0;
                let mut past = Vec::new();
                let mut left_out = 0;
                for ((x, y, p), q) in a.enumerate_pixels().zip(b.pixels()) {
                    if near_edge(camera.center.x, camera.zoom, 80.0, x)
                        || near_edge(camera.center.y, camera.zoom, 60.0, y)
                    {
                        left_out += 1;
                        continue;
                    }
                    let d = pixel_diff(p, q);
                    worst = worst.max(d);
                    if d > tol {
                        past.push(format!("({x}, {y}) {:?} against {:?}", p.0, q.0));
                    }
                }
                assert!(left_out * 20 < 160 * 120, "{left_out} pixels left out");
                assert!(
                    worst <= tol,
                    "{:?} {interpolation:?} {camera:?}: paged differs from dense by {worst} \
                     (tolerance {tol}) in {} pixels, the first: {:?}",
                    source.layout().element(),
                    past.len(),
                    &past[..past.len().min(6)]
                );
            }
        }
    }
}

#[test]
fn panning_and_zooming_within_resident_pages_uploads_nothing() {
    let source = procedural(pyramid_layout(1000, 1000, 3, [64, 64]));
    let mut r = paged_renderer(64, None, None);
    let mut scene = Scene::new();
    scene.add(gray_image(source.clone()));
    let target = r.create_target(128, 128).unwrap();
    let path: Vec<PanZoomCamera> = (0..6)
        .map(|i| {
            PanZoomCamera::new(
                Vec2::new(400.0 + 30.0 * i as f32, 500.0),
                1.0 + 0.1 * i as f32,
            )
        })
        .collect();
    // First pass: load everything the path sees, prefetch ring included (interactive frames
    // want it; rendering until complete does not): frames until 20 in a row upload nothing.
    for camera in &path {
        let done = r
            .render_until_complete(&scene, camera, &target, LONG)
            .unwrap();
        assert!(done.complete, "{done:?}");
        let deadline = std::time::Instant::now() + LONG;
        let mut quiet = 0;
        while quiet < 20 {
            assert!(
                std::time::Instant::now() < deadline,
                "the ring never settled"
            );
            let stats = r.render(&scene, camera, &target).unwrap();
            quiet = if stats.bytes_uploaded == 0 {
                quiet + 1
            } else {
                0
            };
            std::thread::sleep(Duration::from_millis(5));
        }
    }
    let before = r.counters();
    for camera in path.iter().rev() {
        let stats = r.render(&scene, camera, &target).unwrap();
        assert_eq!(stats.bytes_uploaded, 0, "{stats:?}");
    }
    let after = r.counters();
    assert_eq!(after.bytes_uploaded, before.bytes_uploaded);
    assert_eq!(after.pages_uploaded, before.pages_uploaded);
    assert_eq!(after.pages_evicted, before.pages_evicted);
}

/// A tiny xorshift generator: reproducible random camera paths.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> f32 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        (self.0 >> 40) as f32 / (1u64 << 24) as f32
    }
}

/// Random camera paths over three sources of different sizes and element types sharing one
/// GPU budget: after every frame the resident page bytes stay within it, and within the
/// per-frame upload budget each frame.
#[test]
fn random_camera_paths_never_exceed_the_gpu_budget() {
    let slot = 66 * 66 * 4; // 64 x 64 pages + border, f32
    let budget = 40 * slot as u64;
    let upload = 6 * slot as u64;
    let mut r = paged_renderer(64, Some(budget), Some(upload));
    let sources = [
        procedural(pyramid_layout(3000, 2000, 5, [100, 100])),
        procedural(pyramid_layout(800, 900, 3, [64, 200])),
        procedural(pyramid_layout(5000, 5000, 6, [256, 256])),
    ];
    let target = r.create_target(160, 120).unwrap();
    let mut rng = Rng(0x5eed_1234_abcd);
    let mut frames = 0;
    for (i, source) in sources.iter().enumerate() {
        let mut scene = Scene::new();
        scene.add(gray_image(source.clone()));
        // And another source in the same scene, placed beside it.
        let other = sources[(i + 1) % sources.len()].clone();
        let id = scene.add(gray_image(other));
        scene.set_transform(id, Mat4::from_translation(Vec3::new(-900.0, 0.0, 0.0)));
        for _ in 0..12 {
            let camera = PanZoomCamera::new(
                Vec2::new(rng.next() * 3000.0 - 500.0, rng.next() * 3000.0),
                0.02 + rng.next() * 2.0,
            );
            let stats = r.render(&scene, &camera, &target).unwrap();
            frames += 1;
            let c = r.counters();
            assert!(
                c.page_bytes_resident <= budget,
                "frame {frames}: {} page bytes resident over a budget of {budget}",
                c.page_bytes_resident
            );
            assert!(stats.bytes_uploaded <= upload, "frame {frames}: {stats:?}");
            assert_eq!(c.page_bytes_resident, c.pages_resident * slot as u64);
        }
    }
    assert!(r.counters().peak_page_bytes <= budget);
    assert!(
        r.counters().pages_evicted > 0,
        "the paths should have made the budget evict"
    );
}

/// A loader whose every chunk fails (a final decode error): after the pool gives up, the view
/// completes with the fill value (0 for this source: black through Gray) and progress names
/// the error and the chunk keys; `retry_failed` loads them again, now successfully.
#[test]
fn failed_chunks_show_the_fill_and_progress_names_them_until_retried() {
    let fail = Arc::new(AtomicBool::new(true));
    let calls = Arc::new(AtomicU32::new(0));
    let layout = pyramid_layout(100, 100, 1, [50, 50]);
    let (f, n) = (fail.clone(), calls.clone());
    let loader = ProceduralLoader::new(layout, move |key, region, dst| {
        n.fetch_add(1, Ordering::SeqCst);
        if f.load(Ordering::SeqCst) && key.index == [0, 0, 1] {
            return Err(SourceError::Decode {
                url_or_key: format!("chunk {:?}", key.index),
                reason: "injected fault".into(),
            });
        }
        fill_pattern(key, region, dst);
        Ok(ChunkFill::Filled)
    });
    let source = Arc::new(LazySource::with_options(loader, options()).unwrap());
    let mut r = paged_renderer(64, None, None);
    let mut scene = Scene::new();
    let image = scene.add(gray_image(source.clone()));
    let target = r.create_target(100, 100).unwrap();
    let camera = common::pixel_camera(100, 100);
    let done = r
        .render_until_complete(&scene, &camera, &target, LONG)
        .unwrap();
    assert!(done.complete, "{done:?}");
    let p = &done.progress[0];
    assert_eq!(p.failed.len(), 1, "{p:?}");
    assert_eq!(p.failed[0].0, ChunkKey::new(0, [0, 0, 1]));
    assert!(
        p.failed[0].1.error.to_string().contains("injected fault"),
        "{p:?}"
    );
    let progress = r.progress(scene.visual(image).unwrap()).unwrap();
    assert_eq!(progress.failed.len(), 1);
    let img = r.read_image(&target).unwrap();
    // Chunk (0, 1) covers rows 0..50, columns 50..100: the fill, 0, is black.
    assert_eq!(img.get_pixel(75, 25).0, [0, 0, 0, 255]);
    let (want, _) = expected_entry(&Colormap::Gray, pattern(25, 25), [0.0, 255.0], 1.0);
    assert_eq!(img.get_pixel(25, 25).0, want);
    // Nothing is fetched again for the failed chunk, however many frames ask.
    let before = calls.load(Ordering::SeqCst);
    for _ in 0..3 {
        r.render(&scene, &camera, &target).unwrap();
    }
    std::thread::sleep(Duration::from_millis(50));
    assert_eq!(calls.load(Ordering::SeqCst), before);
    fail.store(false, Ordering::SeqCst);
    r.retry_failed();
    let done = r
        .render_until_complete(&scene, &camera, &target, LONG)
        .unwrap();
    assert!(
        done.complete && done.progress[0].failed.is_empty(),
        "{done:?}"
    );
    // The page may have completed before the reload; wait for the chunk, then draw again.
    let deadline = std::time::Instant::now() + LONG;
    while !matches!(
        source.chunk_status(ChunkKey::new(0, [0, 0, 1])),
        ChunkStatus::Ready
    ) {
        assert!(std::time::Instant::now() < deadline);
        std::thread::sleep(Duration::from_millis(5));
    }
    r.render_until_complete(&scene, &camera, &target, LONG)
        .unwrap();
    let img = r.read_image(&target).unwrap();
    assert_pattern(&img, 0, 0, 1);
}

/// A loader that panics on one chunk: the renderer stays up, the chunk shows the fill, and
/// progress names the panic.
#[test]
fn a_panicking_loader_does_not_take_the_renderer_down() {
    let layout = pyramid_layout(64, 128, 1, [64, 64]);
    let loader = ProceduralLoader::new(layout, |key, region, dst| {
        if key.index == [0, 0, 0] {
            panic!("injected panic in chunk {:?}", key.index);
        }
        fill_pattern(key, region, dst);
        Ok(ChunkFill::Filled)
    });
    let source = Arc::new(LazySource::with_options(loader, options()).unwrap());
    let mut r = paged_renderer(64, None, None);
    let mut scene = Scene::new();
    scene.add(gray_image(source));
    let target = r.create_target(128, 64).unwrap();
    let done = r
        .render_until_complete(&scene, &common::pixel_camera(128, 64), &target, LONG)
        .unwrap();
    assert!(done.complete, "{done:?}");
    let failed = &done.progress[0].failed;
    assert_eq!(failed.len(), 1, "{done:?}");
    assert!(
        failed[0].1.error.to_string().contains("injected panic"),
        "{failed:?}"
    );
    let img = r.read_image(&target).unwrap();
    assert_eq!(img.get_pixel(10, 10).0, [0, 0, 0, 255]);
    let (want, _) = expected_entry(&Colormap::Gray, pattern(10, 100), [0.0, 255.0], 1.0);
    assert_eq!(img.get_pixel(100, 10).0, want);
}

/// A loader that blocks until the test releases it: frames keep rendering meanwhile (what is
/// resident: nothing of that source), the view is reported incomplete with what is missing,
/// and once released the chunks arrive, wake the renderer and fill in.
#[test]
fn a_blocked_loader_never_blocks_a_frame() {
    let gate = Arc::new((parking_lot::Mutex::new(false), parking_lot::Condvar::new()));
    let g = gate.clone();
    let layout = pyramid_layout(64, 64, 1, [32, 32]);
    let loader = ProceduralLoader::new(layout, move |key, region, dst| {
        let (lock, cv) = &*g;
        let mut open = lock.lock();
        while !*open {
            cv.wait(&mut open);
        }
        fill_pattern(key, region, dst);
        Ok(ChunkFill::Filled)
    });
    let source = Arc::new(LazySource::with_options(loader, options()).unwrap());
    let mut r = paged_renderer(64, None, None);
    let woken = Arc::new(AtomicU32::new(0));
    let w = woken.clone();
    r.set_redraw_notify(Some(Arc::new(move || {
        w.fetch_add(1, Ordering::SeqCst);
    })));
    let mut scene = Scene::new();
    scene.add(gray_image(source));
    let target = r.create_target(64, 64).unwrap();
    let camera = common::pixel_camera(64, 64);
    for _ in 0..5 {
        let stats = r.render(&scene, &camera, &target).unwrap();
        assert_eq!(stats.bytes_uploaded, 0);
    }
    let done = r
        .render_until_complete(&scene, &camera, &target, Duration::from_millis(100))
        .unwrap();
    assert!(!done.complete);
    let p = &done.progress[0];
    assert_eq!(p.pages_resident, 0);
    assert_eq!(p.missing_pages.len(), p.pages_visible);
    assert!(
        p.chunks_loading + p.chunks_queued == p.chunks_visible,
        "{p:?}"
    );
    let img = r.read_image(&target).unwrap();
    assert_eq!(
        img.get_pixel(32, 32).0,
        [0, 0, 0, 255],
        "nothing resident: background"
    );
    {
        let (lock, cv) = &*gate;
        *lock.lock() = true;
        cv.notify_all();
    }
    let done = r
        .render_until_complete(&scene, &camera, &target, LONG)
        .unwrap();
    assert!(done.complete, "{done:?}");
    assert!(woken.load(Ordering::SeqCst) > 0);
    assert_pattern(&r.read_image(&target).unwrap(), 0, 0, 1);
}

/// While the wanted level is still loading, the view shows the coarsest level's samples where
/// they lie (the fallback the page table points at), exactly; then the wanted level.
#[test]
fn missing_pages_fall_back_to_the_coarser_level_exactly() {
    let gate = Arc::new((parking_lot::Mutex::new(false), parking_lot::Condvar::new()));
    let g = gate.clone();
    let layout = pyramid_layout(256, 256, 3, [64, 64]);
    let loader = ProceduralLoader::new(layout, move |key, region, dst| {
        if key.level < 2 {
            let (lock, cv) = &*g;
            let mut open = lock.lock();
            while !*open {
                cv.wait(&mut open);
            }
        }
        fill_pattern(key, region, dst);
        Ok(ChunkFill::Filled)
    });
    let source = Arc::new(LazySource::with_options(loader, options()).unwrap());
    let mut r = paged_renderer(64, None, None);
    let mut scene = Scene::new();
    scene.add(gray_image(source));
    let target = r.create_target(128, 128).unwrap();
    let camera = PanZoomCamera::new(Vec2::new(100.0, 90.0), 1.0);
    let done = r
        .render_until_complete(&scene, &camera, &target, Duration::from_millis(1500))
        .unwrap();
    assert!(!done.complete, "{done:?}");
    assert_eq!(done.progress[0].level, 0);
    let img = r.read_image(&target).unwrap();
    // Pixel (x, y) is level-0 sample (26 + y, 36 + x), inside level-2 sample (r / 4, c / 4).
    for y in 0..128 {
        for x in 0..128 {
            let (row, col) = (26 + y as usize, 36 + x as usize);
            let v = pattern(row / 4 * 4, col / 4 * 4);
            let (want, near) = expected_entry(&Colormap::Gray, v, [0.0, 255.0], 1.0);
            let got = img.get_pixel(x, y).0;
            assert!(
                got == want || Some(got) == near,
                "pixel ({x}, {y}) is {got:?}, expected the coarse {want:?}"
            );
        }
    }
    {
        let (lock, cv) = &*gate;
        *lock.lock() = true;
        cv.notify_all();
    }
    let done = r
        .render_until_complete(&scene, &camera, &target, LONG)
        .unwrap();
    assert!(done.complete, "{done:?}");
    assert_pattern(&r.read_image(&target).unwrap(), 26, 36, 1);
}

/// A paged source replaced by one of another shape gets a new atlas and table: the next view
/// shows the new data.
#[test]
fn a_replaced_layout_is_paged_anew() {
    let mut options = RendererOptions::from_env().unwrap();
    options.always_page_2d = true;
    options.page_size_2d = Some(16);
    let mut r = Renderer::with_options(options).unwrap();
    let source = Arc::new(
        ArraySource::new(Array2::from_shape_fn((40, 50), |(row, c)| pattern(row, c))).unwrap(),
    );
    let mut scene = Scene::new();
    scene.add(gray_image(source.clone()));
    let target = r.create_target(50, 40).unwrap();
    let done = r
        .render_until_complete(&scene, &common::pixel_camera(50, 40), &target, LONG)
        .unwrap();
    assert!(done.complete, "{done:?}");
    assert_pattern(&r.read_image(&target).unwrap(), 0, 0, 1);
    source
        .replace(Array2::from_shape_fn((30, 60), |(row, c)| {
            pattern(row + 7, c)
        }))
        .unwrap();
    let target = r.create_target(60, 30).unwrap();
    let done = r
        .render_until_complete(&scene, &common::pixel_camera(60, 30), &target, LONG)
        .unwrap();
    assert!(done.complete, "{done:?}");
    assert_pattern(&r.read_image(&target).unwrap(), 7, 0, 1);
    // A written region re-uploads the pages it touches, and only those.
    let before = r.counters();
    source
        .write(&[3, 20], Array2::from_elem((4, 5), 250.0f32).view())
        .unwrap();
    let done = r
        .render_until_complete(&scene, &common::pixel_camera(60, 30), &target, LONG)
        .unwrap();
    assert!(done.complete, "{done:?}");
    let img = r.read_image(&target).unwrap();
    let (white, _) = expected_entry(&Colormap::Gray, 250.0, [0.0, 255.0], 1.0);
    assert_eq!(img.get_pixel(22, 5).0, white);
    let (want, _) = expected_entry(&Colormap::Gray, pattern(7 + 5, 40), [0.0, 255.0], 1.0);
    assert_eq!(img.get_pixel(40, 5).0, want);
    // Columns 20..25 of rows 3..7 lie in pages (0, 1) of 16 x 16 (and their borders).
    let uploaded = r.counters().since(&before).pages_uploaded;
    assert!((1..=2).contains(&uploaded), "{uploaded} pages uploaded");
}

/// Asserts every pixel of `img` (a `PanZoomCamera` at `centre`, `zoom` pixels per level-0
/// sample) shows the nearest sample of `level` (2^level level-0 samples a side), skipping
/// pixels within 1e-3 of a sample edge and outside `extent` level-0 samples. Returns the
/// pixels checked.
#[track_caller]
fn assert_level(img: &image::RgbaImage, centre: f64, zoom: f64, level: u32, extent: f64) -> usize {
    let f = f64::from(1u32 << level);
    let (w, h) = (img.width(), img.height());
    let mut checked = 0;
    for y in 0..h {
        for x in 0..w {
            let at = |p: u32, side: u32| {
                (centre + (f64::from(p) + 0.5 - f64::from(side) / 2.0) / zoom) / f
            };
            let (cx, cy) = (at(x, w), at(y, h));
            let edge = |v: f64| (v - v.round()).abs() < 1e-3;
            if edge(cx) || edge(cy) || cx < 0.0 || cy < 0.0 || cx * f >= extent || cy * f >= extent
            {
                continue;
            }
            let s = 1usize << level;
            let v = pattern(s * cy.floor() as usize, s * cx.floor() as usize);
            let (want, near) = expected_entry(&Colormap::Gray, v, [0.0, 255.0], 1.0);
            let got = img.get_pixel(x, y).0;
            assert!(
                got == want || Some(got) == near,
                "pixel ({x}, {y}) is {got:?}, expected {want:?} (level-{level} sample {cy}, {cx})"
            );
            checked += 1;
        }
    }
    checked
}

/// A procedural pyramid source counting the chunks its loader filled per level.
fn counting_procedural(layout: Layout, per_level: Arc<[AtomicU32; 3]>) -> Arc<LazySource> {
    let loader = ProceduralLoader::new(layout, move |key, region, dst| {
        per_level[key.level].fetch_add(1, Ordering::SeqCst);
        fill_pattern(key, region, dst);
        Ok(ChunkFill::Filled)
    });
    Arc::new(LazySource::with_options(loader, options()).unwrap())
}

#[test]
fn a_level_lock_or_bias_draws_that_level_exactly() {
    let (w, h) = (160u32, 120u32);
    // (policy, zoom, the level drawn): zoom 1 wants level 0, zoom 0.4999 level 1.
    let cases = [
        (
            LevelPolicy {
                bias: 0,
                lock: Some(1),
            },
            1.0,
            1u32,
        ),
        (
            LevelPolicy {
                bias: 0,
                lock: Some(2),
            },
            1.0,
            2,
        ),
        (
            LevelPolicy {
                bias: 0,
                lock: Some(0),
            },
            0.2499,
            0,
        ),
        (
            LevelPolicy {
                bias: 1,
                lock: None,
            },
            1.0,
            1,
        ),
        (
            LevelPolicy {
                bias: 1,
                lock: None,
            },
            0.4999,
            2,
        ),
        (
            LevelPolicy {
                bias: 5,
                lock: None,
            },
            1.0,
            2,
        ),
        (
            LevelPolicy {
                bias: -1,
                lock: None,
            },
            0.4999,
            0,
        ),
    ];
    for (policy, zoom, level) in cases {
        let per_level = Arc::new([AtomicU32::new(0), AtomicU32::new(0), AtomicU32::new(0)]);
        let source = counting_procedural(pyramid_layout(600, 600, 3, [50, 50]), per_level.clone());
        let mut r = paged_renderer(64, None, None);
        let mut scene = Scene::new();
        let mut image = gray_image(source);
        image.set_level_policy(policy).unwrap();
        assert_eq!(image.level_policy(), policy);
        scene.add(image);
        let target = r.create_target(w, h).unwrap();
        let camera = PanZoomCamera::new(Vec2::new(300.0, 300.0), zoom as f32);
        let done = r
            .render_until_complete(&scene, &camera, &target, LONG)
            .unwrap();
        assert!(done.complete, "{policy:?}: {done:?}");
        assert_eq!(
            done.progress[0].level, level as usize,
            "{policy:?} at zoom {zoom}"
        );
        let img = r.read_image(&target).unwrap();
        let checked = assert_level(&img, 300.0, f64::from(zoom as f32), level, 600.0);
        assert!(checked > 10_000, "{policy:?}: {checked} pixels checked");
        // Nothing finer than the level drawn was fetched: a coarser lock costs less.
        for (l, n) in per_level.iter().enumerate().take(level as usize) {
            assert_eq!(
                n.load(Ordering::SeqCst),
                0,
                "{policy:?}: level {l} chunks were fetched"
            );
        }
        assert!(
            per_level[level as usize].load(Ordering::SeqCst) > 0,
            "{policy:?}"
        );
    }
}

#[test]
fn a_level_lock_past_the_levels_is_refused_naming_the_numbers() {
    let source = procedural(pyramid_layout(600, 600, 3, [64, 64]));
    let err = gray_image(source.clone())
        .with_level_lock(3)
        .unwrap_err()
        .to_string();
    assert!(err.contains("level 3") && err.contains("3 levels"), "{err}");
    let mut image = gray_image(source).with_level_lock(2).unwrap();
    let before = image.level_policy();
    assert!(image
        .set_level_policy(LevelPolicy {
            bias: 0,
            lock: Some(7)
        })
        .is_err());
    assert_eq!(
        image.level_policy(),
        before,
        "a refused lock keeps the old policy"
    );
    // The source changes under the lock: the frame reports it with the level count.
    image.set_source(procedural(pyramid_layout(600, 600, 2, [64, 64])));
    let mut r = paged_renderer(64, None, None);
    let mut scene = Scene::new();
    scene.add(image);
    let target = r.create_target(64, 64).unwrap();
    let camera = PanZoomCamera::new(Vec2::new(300.0, 300.0), 1.0);
    let err = r.render(&scene, &camera, &target).unwrap_err().to_string();
    assert!(err.contains("level 2") && err.contains("2 levels"), "{err}");
}

#[test]
fn a_per_frame_upload_time_budget_spreads_pages_over_frames() {
    let source = procedural(pyramid_layout(600, 600, 3, [64, 64]));
    let mut r = paged_renderer(64, None, None);
    // No time at all: each frame uploads its first planned page only.
    r.set_page_upload_time_budget(Some(Duration::ZERO));
    let mut scene = Scene::new();
    let node = scene.add(gray_image(source));
    let target = r.create_target(200, 150).unwrap();
    let camera = PanZoomCamera::new(Vec2::new(300.0, 300.0), 1.0);
    let (mut most, mut pending_frames) = (0, 0);
    let started = std::time::Instant::now();
    loop {
        let before = r.counters().pages_uploaded;
        let stats = r.render(&scene, &camera, &target).unwrap();
        let uploaded = r.counters().pages_uploaded - before;
        most = most.max(uploaded);
        pending_frames += u32::from(stats.uploads_pending);
        let p = r.progress(scene.visual(node).unwrap()).unwrap();
        if p.is_complete() && !stats.uploads_pending {
            break;
        }
        assert!(started.elapsed() < LONG, "{p:?}");
        if uploaded == 0 {
            std::thread::sleep(Duration::from_millis(2));
        }
    }
    assert_eq!(
        most, 1,
        "at most one page per frame under a zero time budget"
    );
    let pages = r.counters().pages_uploaded;
    assert!(pages >= 12, "{pages} pages");
    assert!(pending_frames > 0, "frames reported uploads pending");
    r.render(&scene, &camera, &target).unwrap();
    assert_pattern(&r.read_image(&target).unwrap(), 225, 200, 1);
    // Without the time budget the same view uploads several pages in one frame.
    let mut fresh = paged_renderer(64, None, None);
    let fresh_target = fresh.create_target(200, 150).unwrap();
    let source = procedural(pyramid_layout(600, 600, 3, [64, 64]));
    let mut scene = Scene::new();
    scene.add(gray_image(source));
    let done = fresh
        .render_until_complete(&scene, &camera, &fresh_target, LONG)
        .unwrap();
    assert!(done.complete);
    assert!(
        u64::from(done.frames) < pages,
        "{} frames for {pages} pages",
        done.frames
    );
}

/// Renders `scene` until complete with the camera centred on `centre`, 1:1, on `target`.
fn complete_at(r: &mut Renderer, scene: &Scene, target: &RenderTarget, centre: [f32; 2]) {
    let camera = PanZoomCamera::new(Vec2::new(centre[0], centre[1]), 1.0);
    let done = r
        .render_until_complete(scene, &camera, target, LONG)
        .unwrap();
    assert!(done.complete, "{done:?}");
}

#[test]
fn an_atlas_whose_pages_left_shrinks_and_still_draws_what_it_kept() {
    // Two lazy 1024^2 images side by side (pages of 32^2, 34^2 slots of f32: 4,624 bytes),
    // under a budget of 1,100 slots: A is seen whole (its four quadrants in turn), then B;
    // B's pages push A's out (LRU) but for those of the quadrant A showed last.
    let slot = 34 * 34 * 4;
    let budget = 1_100 * slot;
    let mut r = paged_renderer(32, Some(budget), None);
    let a = procedural(pyramid_layout(1024, 1024, 1, [64, 64]));
    let b = procedural(pyramid_layout(1024, 1024, 1, [64, 64]));
    let mut scene = Scene::new();
    scene.add(gray_image(a));
    let node_b = scene.add(gray_image(b));
    scene.set_transform(node_b, Mat4::from_translation(Vec3::new(2048.0, 0.0, 0.0)));
    let target = r.create_target(512, 512).unwrap();
    let quadrants = [
        [256.0, 256.0],
        [768.0, 256.0],
        [256.0, 768.0],
        [768.0, 768.0],
    ];
    for q in quadrants {
        complete_at(&mut r, &scene, &target, q);
    }
    let grown = r.counters();
    assert_eq!(grown.pages_resident, 1_024, "{grown:?}");
    for q in quadrants {
        complete_at(&mut r, &scene, &target, [q[0] + 2048.0, q[1]]);
    }
    // A frame more: A's atlas, now at most a quarter full, shrinks before planning.
    complete_at(&mut r, &scene, &target, [768.0 + 2048.0, 768.0]);
    let after = r.counters();
    assert!(
        after.atlases_shrunk >= 1,
        "max_texture_dimension_2d {}: {after:?}",
        r.max_texture_dimension_2d()
    );
    assert!(after.page_bytes_resident <= budget, "{after:?}");
    // B's atlas (32 rows of 32 slots for its 1,024 pages, on any device: atlases are about
    // square) and A's (8 rows) against two full ones before: more than 480 slots fewer.
    assert!(
        after.resident_bytes < grown.resident_bytes * 2 - 2 * 240 * slot,
        "textures {} bytes after, {} with A alone: {after:?}",
        after.resident_bytes,
        grown.resident_bytes
    );
    // Back to A's last quadrant: the pages A kept, packed into low slots, and those loading
    // again draw the image exactly.
    complete_at(&mut r, &scene, &target, [768.0, 768.0]);
    assert_pattern(&r.read_image(&target).unwrap(), 512, 512, 1);
    complete_at(&mut r, &scene, &target, [256.0, 256.0]);
    assert_pattern(&r.read_image(&target).unwrap(), 0, 0, 1);
}
