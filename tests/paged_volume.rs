//! Paged volumes (3-D pages in a 3-D atlas, `always_page_3d` for dense data) on a real GPU:
//! the same MIP, translucent and iso pixels as the dense path, the coarse level exactly while the fine one is
//! blocked, resident bytes under the GPU budget on an orbit, and no uploads when orbiting
//! within resident pages.

mod common;

use std::sync::Arc;
use std::time::{Duration, Instant};

use common::{expected_entry, render, renderer, Front};
use sluice::ndarray::Array3;
use sluice::prelude::*;
use sluice::{
    ChunkCache, ChunkFill, ChunkGrid, ChunkKey, LazyOptions, LazySource, Level, LoaderPool,
    OrbitCamera, ProceduralLoader, Region, RetryPolicy, Volume, VolumeMode,
};

const BG: [u8; 4] = [0, 0, 0, 255];

fn paged_renderer(budget: Option<u64>) -> Renderer {
    let mut options = RendererOptions::from_env().unwrap();
    options.always_page_3d = true;
    options.gpu_budget = budget;
    Renderer::with_options(options).unwrap()
}

/// Level-0 sample (z, y, x) of the test volumes.
fn value(z: usize, y: usize, x: usize) -> f32 {
    ((x * x * 3 + y * 7 + z * z * 5 + x * y) % 200) as f32
}

fn options() -> LazyOptions {
    let mut o = LazyOptions::with_pool(LoaderPool::new(2).unwrap(), ChunkCache::new(256 << 20));
    o.retry = RetryPolicy {
        attempts: 2,
        backoff: Duration::from_millis(5),
        max_backoff: Duration::from_millis(5),
    };
    o
}

/// A `levels`-level f32 volume of `n`^3 level-0 samples, level `l` sampling `value` at
/// (z 2^l, y 2^l, x 2^l), in chunks of 32^3.
fn pyramid(n: usize, levels: usize) -> Layout {
    let grid = ChunkGrid::new(&[32, 32, 32]).unwrap();
    let coarser = (1..levels).map(|l| {
        let f = 1usize << l;
        let m = n.div_ceil(f);
        Level::new(Shape::new(&[m, m, m]).unwrap(), [f as f64; 3]).with_chunks(grid)
    });
    Layout::new(Shape::new(&[n, n, n]).unwrap(), ElementType::F32, 1)
        .unwrap()
        .with_chunks(grid)
        .with_levels(coarser)
        .unwrap()
}

fn fill(key: ChunkKey, region: Region, dst: &mut [u8]) {
    let f = 1usize << key.level;
    let [d, h, w] = region.size;
    let _ = d;
    for (i, v) in dst.chunks_exact_mut(4).enumerate() {
        let (z, y, x) = (
            region.origin[0] + i / (h * w),
            region.origin[1] + (i / w) % h,
            region.origin[2] + i % w,
        );
        v.copy_from_slice(&value(z * f, y * f, x * f).to_ne_bytes());
    }
}

fn mip_volume(source: SharedSource, interpolation: Interpolation) -> Volume {
    Volume::new(source)
        .with_interpolation(interpolation)
        .with_clim(0.0, 255.0)
        .unwrap()
        .with_colormap(Colormap::Gray)
}

#[test]
fn a_dense_volume_through_pages_matches_the_dense_path() {
    // 100^3: 2 x 2 x 2 pages of 64, meeting at 64 (the border makes trilinear seamless).
    let n = 100usize;
    let data = Array3::from_shape_fn((n, n, n), |(z, y, x)| {
        let p = Vec3::new(x as f32, y as f32, z as f32) - Vec3::splat(49.5);
        (40.0 - p.length()) * 4.0 + 0.5 * ((x * 7 + y * 3 + z) % 11) as f32
    });
    let source: SharedSource = Arc::new(ArraySource::new(data).unwrap());
    let mut paged = paged_renderer(None);
    let mut dense = renderer();
    let mut camera = OrbitCamera::fit(Vec3::ZERO, Vec3::splat(n as f32), 35.0, 25.0);
    for mode in [
        VolumeMode::Mip,
        VolumeMode::Translucent { attenuation: 0.05 },
    ] {
        let mut scene = Scene::new();
        scene.add(
            mip_volume(source.clone(), Interpolation::Linear)
                .with_mode(mode)
                .unwrap(),
        );
        for _ in 0..3 {
            let a = render(&mut paged, &scene, &camera, 96, 96);
            let b = render(&mut dense, &scene, &camera, 96, 96);
            // Tolerance: 1 per channel (trilinear in another texture, same sample positions).
            let differing = a
                .pixels()
                .zip(b.pixels())
                .filter(|(p, q)| p.0.iter().zip(q.0).any(|(u, v)| u.abs_diff(v) > 1))
                .count();
            assert_eq!(
                differing, 0,
                "{mode:?}: {differing} pixels differ between paged and dense"
            );
            let lit = a.pixels().filter(|p| p.0 != BG).count();
            assert!(
                lit > 800,
                "{mode:?}: only {lit} pixels lit: too little to compare"
            );
            assert_eq!(paged.counters().pages_resident, 8);
            assert_eq!(dense.counters().pages_resident, 0);
            camera.orbit(0.7, 0.2);
        }
    }
}

/// CPU MIP along z under `Front` of the level of downsample `f` (pixel (x, y) is level-0
/// column (y, x)).
fn cpu_mip(n: usize, f: usize, x: usize, y: usize) -> f32 {
    (0..n / f)
        .map(|z| value(z * f, y / f * f, x / f * f))
        .fold(f32::MIN, f32::max)
}

fn assert_mip(img: &image::RgbaImage, n: usize, f: usize) -> Result<(), String> {
    for y in 0..n {
        for x in 0..n {
            let v = cpu_mip(n, f, x, y);
            let (want, near) = expected_entry(&Colormap::Gray, v, [0.0, 255.0], 1.0);
            let got = img.get_pixel(x as u32, y as u32).0;
            if got != want && Some(got) != near {
                return Err(format!(
                    "pixel ({x}, {y}) is {got:?}, expected {want:?} (MIP {v} of level 1/{f})"
                ));
            }
        }
    }
    Ok(())
}

#[test]
fn a_blocked_fine_level_shows_the_coarse_mip_exactly_then_the_fine_one() {
    let gate = Arc::new((parking_lot::Mutex::new(false), parking_lot::Condvar::new()));
    let g = gate.clone();
    let n = 64usize;
    let loader = ProceduralLoader::new(pyramid(n, 2), move |key, region, dst| {
        if key.level == 0 {
            let (lock, cv) = &*g;
            let mut open = lock.lock();
            while !*open {
                cv.wait(&mut open);
            }
        }
        fill(key, region, dst);
        Ok(ChunkFill::Filled)
    });
    let source: SharedSource = Arc::new(LazySource::with_options(loader, options()).unwrap());
    let mut r = paged_renderer(None);
    let mut scene = Scene::new();
    scene.add(mip_volume(source, Interpolation::Nearest));
    let target = r.create_target(n as u32, n as u32).unwrap();
    let camera = Front { n: n as f32 };
    let until = |r: &mut Renderer, f: usize| -> Result<(), String> {
        let start = Instant::now();
        loop {
            r.render(&scene, &camera, &target).unwrap();
            let img = r.read_image(&target).unwrap();
            match assert_mip(&img, n, f) {
                Ok(()) => return Ok(()),
                Err(e) if start.elapsed() > Duration::from_secs(30) => return Err(e),
                Err(_) => std::thread::sleep(Duration::from_millis(20)),
            }
        }
    };
    until(&mut r, 2).unwrap();
    // Still blocked: the coarse MIP stays, every frame.
    for _ in 0..3 {
        r.render(&scene, &camera, &target).unwrap();
        assert_mip(&r.read_image(&target).unwrap(), n, 2).unwrap();
    }
    let done = r
        .render_until_complete(&scene, &camera, &target, Duration::from_millis(300))
        .unwrap();
    let p = &done.progress[0];
    assert!(
        !done.complete && p.pages_resident < p.pages_visible,
        "{done:?}"
    );
    assert_mip(&r.read_image(&target).unwrap(), n, 2).unwrap();
    {
        let (lock, cv) = &*gate;
        *lock.lock() = true;
        cv.notify_all();
    }
    let done = r
        .render_until_complete(&scene, &camera, &target, Duration::from_secs(30))
        .unwrap();
    assert!(done.complete, "{done:?}");
    assert_mip(&r.read_image(&target).unwrap(), n, 1).unwrap();
}

#[test]
fn resident_page_bytes_stay_under_the_budget_on_a_random_orbit() {
    // 256^3, 3 levels: level 0 alone is 64 pages; the budget holds 12 f32 slots of 66^3.
    let slot = 66u64 * 66 * 66 * 4;
    let budget = 12 * slot;
    let n = 256usize;
    let loader = ProceduralLoader::new(pyramid(n, 3), |key, region, dst| {
        fill(key, region, dst);
        Ok(ChunkFill::Filled)
    });
    let source: SharedSource = Arc::new(LazySource::with_options(loader, options()).unwrap());
    let mut r = paged_renderer(Some(budget));
    let mut scene = Scene::new();
    scene.add(mip_volume(source, Interpolation::Linear));
    let target = r.create_target(64, 64).unwrap();
    let mut camera = OrbitCamera::fit(Vec3::ZERO, Vec3::splat(n as f32), 20.0, 10.0);
    // A fixed pseudo-random walk (xorshift), in and out and around.
    let mut s = 0x9e37_79b9_u32;
    let mut rand = move || {
        s ^= s << 13;
        s ^= s >> 17;
        s ^= s << 5;
        s as f32 / u32::MAX as f32
    };
    let mut uploaded = 0;
    for _ in 0..40 {
        camera.orbit(rand() - 0.5, (rand() - 0.5) * 0.5);
        camera.distance = (camera.distance * (0.7 + 0.6 * rand())).clamp(60.0, 900.0);
        r.render(&scene, &camera, &target).unwrap();
        let c = r.counters();
        assert!(
            c.page_bytes_resident <= budget && c.peak_page_bytes <= budget,
            "resident {} / peak {} over the budget {budget}",
            c.page_bytes_resident,
            c.peak_page_bytes
        );
        uploaded = c.pages_uploaded;
        std::thread::sleep(Duration::from_millis(5));
    }
    assert!(uploaded > 0, "the orbit uploaded nothing");
}

#[test]
fn orbiting_within_resident_pages_uploads_nothing() {
    let n = 100usize;
    let data = Array3::from_shape_fn((n, n, n), |(z, y, x)| value(z, y, x));
    let source: SharedSource = Arc::new(ArraySource::new(data).unwrap());
    let mut r = paged_renderer(None);
    let mut scene = Scene::new();
    scene.add(mip_volume(source, Interpolation::Linear));
    let target = r.create_target(64, 64).unwrap();
    let mut camera = OrbitCamera::fit(Vec3::ZERO, Vec3::splat(n as f32), 30.0, 20.0);
    let first = r.render(&scene, &camera, &target).unwrap();
    assert!(first.bytes_uploaded > 0);
    assert_eq!(r.counters().pages_resident, 8);
    for _ in 0..10 {
        camera.orbit(0.3, 0.05);
        let stats = r.render(&scene, &camera, &target).unwrap();
        assert_eq!(
            stats.bytes_uploaded, 0,
            "orbit within resident pages uploaded"
        );
    }
}

#[test]
fn a_host_volume_over_the_brick_limit_is_paged_and_matches_the_dense_path() {
    // 200^3 under a 3-D limit of 66 would need 4 x 4 x 4 = 64 bricks (8 at most): paged, in
    // 4 x 4 x 4 pages. Compared with a renderer whose limit holds it in one texture.
    let n = 200usize;
    let data = Array3::from_shape_fn((n, n, n), |(z, y, x)| {
        let p = Vec3::new(x as f32, y as f32, z as f32) - Vec3::splat(99.5);
        (90.0 - p.length()).clamp(0.0, 90.0) as u8 + ((x * 7 + y * 3 + z) % 11) as u8
    });
    let source: SharedSource = Arc::new(ArraySource::new(data).unwrap());
    let mut small = RendererOptions::from_env().unwrap();
    small.max_texture_dimension_3d = Some(66);
    let mut paged = Renderer::with_options(small).unwrap();
    let mut dense = renderer();
    let camera = OrbitCamera::fit(Vec3::ZERO, Vec3::splat(n as f32), 40.0, 30.0);
    let mut scene = Scene::new();
    scene.add(
        mip_volume(source, Interpolation::Linear)
            .with_clim(0.0, 100.0)
            .unwrap(),
    );
    let a = render(&mut paged, &scene, &camera, 96, 96);
    let b = render(&mut dense, &scene, &camera, 96, 96);
    let differing = a
        .pixels()
        .zip(b.pixels())
        .filter(|(p, q)| p.0.iter().zip(q.0).any(|(u, v)| u.abs_diff(v) > 1))
        .count();
    let worst: Vec<(u32, u32, [u8; 4], [u8; 4])> = a
        .enumerate_pixels()
        .zip(b.pixels())
        .filter(|((_, _, p), q)| p.0.iter().zip(q.0).any(|(u, v)| u.abs_diff(v) > 1))
        .map(|((x, y, p), q)| (x, y, p.0, q.0))
        .collect();
    // Tolerance: 1 per channel, except at most 0.1 % of the pixels by at most 4. On lavapipe
    // 2 of 9216 pixels differ by 2 and 3 (u8 in an R8Unorm atlas, filtered at other
    // normalized coordinates than the whole texture: the filter's quantized weights can
    // round apart; the f32 test above matches within 1 everywhere).
    assert!(
        differing <= 9
            && worst
                .iter()
                .all(|(_, _, p, q)| p.iter().zip(q).all(|(u, v)| u.abs_diff(*v) <= 4)),
        "{differing} pixels differ: {worst:?}"
    );
    assert!(a.pixels().filter(|p| p.0 != BG).count() > 800);
    assert_eq!(paged.counters().pages_resident, 64);
    assert_eq!(dense.counters().pages_resident, 0);
}

/// Renders a fresh 3-level lazy 64^3 volume (set up by `setup`) until complete under `Front`
/// and returns the image and the chunks loaded per level.
fn drawn_with(setup: impl FnOnce(Volume) -> Volume) -> (image::RgbaImage, [usize; 3]) {
    use std::sync::atomic::{AtomicUsize, Ordering};
    let n = 64usize;
    let loads = Arc::new([0, 0, 0].map(|_| AtomicUsize::new(0)));
    let counted = loads.clone();
    let loader = ProceduralLoader::new(pyramid(n, 3), move |key, region, dst| {
        counted[key.level].fetch_add(1, Ordering::Relaxed);
        fill(key, region, dst);
        Ok(ChunkFill::Filled)
    });
    let source: SharedSource = Arc::new(LazySource::with_options(loader, options()).unwrap());
    let mut r = paged_renderer(None);
    let mut scene = Scene::new();
    scene.add(setup(mip_volume(source, Interpolation::Nearest)));
    let target = r.create_target(n as u32, n as u32).unwrap();
    let done = r
        .render_until_complete(
            &scene,
            &Front { n: n as f32 },
            &target,
            Duration::from_secs(30),
        )
        .unwrap();
    assert!(done.complete, "{done:?}");
    let img = r.read_image(&target).unwrap();
    (img, [0, 1, 2].map(|l| loads[l].load(Ordering::Relaxed)))
}

#[test]
fn a_level_lock_and_a_depth_sample_target_choose_the_level_drawn() {
    let n = 64;
    // The default target (256 samples) is finer than this view's pixels: level 0 is drawn,
    // its 8 chunks of 32^3 loaded.
    let (img, loads) = drawn_with(|v| v);
    assert_mip(&img, n, 1).unwrap();
    assert_eq!(loads[0], 8, "{loads:?}");
    // Under `Front` the eye sits on the near plane 9 voxels before the box; the box's depth
    // from there is sqrt(32^2 + 32^2 + 73^2) - 9 = 76.9 voxels. 32 samples: steps of 2.4
    // voxels, so level 1 (2 voxels per sample) and no chunk of level 0; 40 samples: 1.9,
    // still level 0.
    let (img, loads) = drawn_with(|v| v.with_depth_samples(Some(40)).unwrap());
    assert_mip(&img, n, 1).unwrap();
    assert_eq!(loads[0], 8, "{loads:?}");
    let (img, loads) = drawn_with(|v| v.with_depth_samples(Some(32)).unwrap());
    assert_mip(&img, n, 2).unwrap();
    assert_eq!((loads[0], loads[1]), (0, 1), "{loads:?}");
    // 16 samples: steps of 4.8 voxels, level 2.
    let (img, loads) = drawn_with(|v| v.with_depth_samples(Some(16)).unwrap());
    assert_mip(&img, n, 4).unwrap();
    assert_eq!((loads[0], loads[1]), (0, 0), "{loads:?}");
    // One sample per pixel whatever the depth: level 0 again.
    let (img, _) = drawn_with(|v| v.with_depth_samples(None).unwrap());
    assert_mip(&img, n, 1).unwrap();
    // A lock draws its level whatever the view; a bias draws coarser.
    let (img, loads) = drawn_with(|v| v.with_level_lock(2).unwrap());
    assert_mip(&img, n, 4).unwrap();
    assert_eq!((loads[0], loads[1]), (0, 0), "{loads:?}");
    let (img, loads) = drawn_with(|v| v.with_level_bias(1));
    assert_mip(&img, n, 2).unwrap();
    assert_eq!(loads[0], 0, "{loads:?}");
    // Bad values name themselves; the volume keeps its settings.
    let source: SharedSource = Arc::new(ArraySource::new(Array3::<f32>::zeros((4, 4, 4))).unwrap());
    let mut v = Volume::new(source);
    let e = v.set_depth_samples(Some(0)).unwrap_err().to_string();
    assert!(e.contains("depth samples") && e.contains('0'), "{e}");
    assert_eq!(v.depth_samples(), Some(sluice::DEFAULT_DEPTH_SAMPLES));
    let e = v
        .set_level_policy(sluice::LevelPolicy {
            bias: 0,
            lock: Some(3),
        })
        .unwrap_err()
        .to_string();
    assert!(e.contains("level 3") && e.contains("1 level"), "{e}");
}

/// Renders `image` of a fresh 3-level lazy `n`^3 volume until complete under `Front { n }` on
/// a `px` x `px` target; returns the image and the level-0 chunks loaded.
fn slice_drawn(n: usize, px: u32, setup: impl FnOnce(Image) -> Image) -> (image::RgbaImage, usize) {
    use std::sync::atomic::{AtomicUsize, Ordering};
    let fine = Arc::new(AtomicUsize::new(0));
    let counted = fine.clone();
    let loader = ProceduralLoader::new(pyramid(n, 3), move |key, region, dst| {
        if key.level == 0 {
            counted.fetch_add(1, Ordering::Relaxed);
        }
        fill(key, region, dst);
        Ok(ChunkFill::Filled)
    });
    let source: SharedSource = Arc::new(LazySource::with_options(loader, options()).unwrap());
    let mut r = paged_renderer(None);
    let mut scene = Scene::new();
    scene.add(setup(
        Image::new(source)
            .with_interpolation(Interpolation::Nearest)
            .with_clim(0.0, 255.0)
            .unwrap(),
    ));
    let target = r.create_target(px, px).unwrap();
    let done = r
        .render_until_complete(
            &scene,
            &Front { n: n as f32 },
            &target,
            Duration::from_secs(30),
        )
        .unwrap();
    assert!(done.complete, "{done:?}");
    (r.read_image(&target).unwrap(), fine.load(Ordering::Relaxed))
}

/// Checks every pixel of `img` against the gray entry of `value_at(x, y)`.
fn assert_pixels(img: &image::RgbaImage, what: &str, value_at: impl Fn(usize, usize) -> f32) {
    for (x, y, p) in img.enumerate_pixels() {
        let v = value_at(x as usize, y as usize);
        let (want, near) = expected_entry(&Colormap::Gray, v, [0.0, 255.0], 1.0);
        assert!(
            p.0 == want || Some(p.0) == near,
            "{what}: pixel ({x}, {y}) is {:?}, expected {want:?} (value {v})",
            p.0
        );
    }
}

#[test]
fn slices_of_a_lazy_volume_show_its_planes_at_the_level_the_view_needs() {
    let n = 128;
    // One sample per pixel: level 0, exactly the data; only the pages the plane crosses load
    // (one layer of 64^3 pages and their borders: 3 of the 4 layers of 32^3 chunks).
    let (img, loads) = slice_drawn(n, 128, |i| i.with_slice(Slice::Z(37)));
    assert_pixels(&img, "Z(37)", |x, y| value(37, y, x));
    assert!(loads <= 48, "{loads} level-0 chunks loaded for one plane");
    let (img, _) = slice_drawn(n, 128, |i| i.with_slice(Slice::Y(50)));
    assert_pixels(&img, "Y(50)", |x, z| value(z, 50, x));
    let (img, _) = slice_drawn(n, 128, |i| i.with_slice(Slice::X(101)));
    assert_pixels(&img, "X(101)", |y, z| value(z, y, 101));
    // Two samples per pixel: level 1, and no level-0 chunk. Pixel (x, y) covers level-1
    // sample (x, y) of plane floor(37.5 / 2) = 18, which is level-0 sample (2x, 2y, 36).
    let (img, loads) = slice_drawn(n, 64, |i| i.with_slice(Slice::Z(37)));
    assert_pixels(&img, "Z(37) at level 1", |x, y| value(36, 2 * y, 2 * x));
    assert_eq!(loads, 0);
    // A lock draws level 2 whatever the zoom: pixel (x, y) shows level-2 sample
    // (x / 4, y / 4) of plane floor(37.5 / 4) = 9.
    let (img, loads) = slice_drawn(n, 128, |i| {
        i.with_slice(Slice::Z(37)).with_level_lock(2).unwrap()
    });
    assert_pixels(&img, "Z(37) locked to level 2", |x, y| {
        value(36, y / 4 * 4, x / 4 * 4)
    });
    assert_eq!(loads, 0);
    // A slice outside the volume names the numbers.
    let source: SharedSource = Arc::new(
        LazySource::with_options(
            ProceduralLoader::new(pyramid(64, 2), |k, r, d| {
                fill(k, r, d);
                Ok(ChunkFill::Filled)
            }),
            options(),
        )
        .unwrap(),
    );
    let mut r = paged_renderer(None);
    let mut scene = Scene::new();
    scene.add(Image::new(source).with_slice(Slice::Z(64)));
    let target = r.create_target(8, 8).unwrap();
    let e = r
        .render(&scene, &Front { n: 64.0 }, &target)
        .unwrap_err()
        .to_string();
    assert!(e.contains("Z(64)") && e.contains("63"), "{e}");
}

/// With the prefetch ring (plain `render`; `render_until_complete` keeps it off), a slice's
/// view also loads and uploads the slabs of pages before and behind it: once the frames have
/// settled, stepping the slice into the next slab of 64^3 pages draws it complete in its first
/// frame, exactly, with no chunk loaded for it.
#[test]
fn a_slice_view_prefetches_the_slabs_beside_it() {
    use std::sync::atomic::{AtomicUsize, Ordering};
    let n = 128;
    let loads = Arc::new(AtomicUsize::new(0));
    let counted = loads.clone();
    let loader = ProceduralLoader::new(pyramid(n, 3), move |key, region, dst| {
        counted.fetch_add(1, Ordering::Relaxed);
        fill(key, region, dst);
        Ok(ChunkFill::Filled)
    });
    let source: SharedSource = Arc::new(LazySource::with_options(loader, options()).unwrap());
    let mut r = paged_renderer(None);
    let mut scene = Scene::new();
    let id = scene.add(
        Image::new(source)
            .with_slice(Slice::Z(37))
            .with_interpolation(Interpolation::Nearest)
            .with_clim(0.0, 255.0)
            .unwrap(),
    );
    let target = r.create_target(n as u32, n as u32).unwrap();
    let camera = Front { n: n as f32 };
    // Frames until nothing more loads or uploads (the ring's chunks included).
    let mut quiet = 0;
    for _ in 0..2000 {
        let before = loads.load(Ordering::Relaxed);
        let stats = r.render(&scene, &camera, &target).unwrap();
        r.wait_idle().unwrap();
        std::thread::sleep(Duration::from_millis(5));
        let settled = stats.bytes_uploaded == 0
            && !stats.uploads_pending
            && loads.load(Ordering::Relaxed) == before;
        quiet = if settled { quiet + 1 } else { 0 };
        if quiet == 20 {
            break;
        }
    }
    assert_eq!(quiet, 20, "the frames never settled");
    let visual = scene.visual(id).unwrap();
    assert!(r.progress(visual).unwrap().is_complete());
    assert_pixels(&r.read_image(&target).unwrap(), "Z(37)", |x, y| {
        value(37, y, x)
    });
    // Plane 101 lies in the next slab of pages (64..128).
    let settled = loads.load(Ordering::Relaxed);
    scene.image_mut(id).unwrap().set_slice(Slice::Z(101));
    r.render(&scene, &camera, &target).unwrap();
    let visual = scene.visual(id).unwrap();
    let progress = r.progress(visual).unwrap();
    assert!(progress.is_complete(), "{progress:?}");
    assert_eq!(
        loads.load(Ordering::Relaxed),
        settled,
        "chunks loaded for the new slab"
    );
    assert_pixels(&r.read_image(&target).unwrap(), "Z(101)", |x, y| {
        value(101, y, x)
    });
}

#[test]
fn slices_through_pages_match_the_dense_path_axis_aligned_and_oblique() {
    // The dense test volume, drawn as slices by a paged renderer (always_page_3d) and by a
    // dense one: linear interpolation across page borders, oblique planes clipped to the data.
    let n = 100usize;
    let data = Array3::from_shape_fn((n, n, n), |(z, y, x)| {
        ((x * 5 + y * 3 + z * 7) % 250) as f32 + 0.25 * ((x * y + z) % 4) as f32
    });
    let source: SharedSource = Arc::new(ArraySource::new(data).unwrap());
    let mut paged = paged_renderer(None);
    let mut dense = renderer();
    let slices = [
        Slice::Z(63),
        Slice::Y(64),
        Slice::X(10),
        Slice::Oblique {
            origin: [0.0, 0.0, 20.0],
            u: [1.0, 0.0, 0.0],
            v: [0.0, 0.8, 0.6],
            extent: [100.0, 100.0],
        },
    ];
    for slice in slices {
        let mut scene = Scene::new();
        scene.add(
            Image::new(source.clone())
                .with_slice(slice)
                .with_interpolation(Interpolation::Linear)
                .with_clim(0.0, 255.0)
                .unwrap(),
        );
        let camera = Front { n: n as f32 };
        let target = paged.create_target(n as u32, n as u32).unwrap();
        let done = paged
            .render_until_complete(&scene, &camera, &target, Duration::from_secs(30))
            .unwrap();
        assert!(done.complete, "{slice:?}: {done:?}");
        let a = paged.read_image(&target).unwrap();
        let b = render(&mut dense, &scene, &camera, n as u32, n as u32);
        assert!(
            paged.counters().pages_resident > 0,
            "{slice:?} was not paged"
        );
        // Tolerance: 1 per channel (the same interpolation in another texture).
        let differing: Vec<_> = a
            .enumerate_pixels()
            .zip(b.pixels())
            .filter(|((_, _, p), q)| p.0.iter().zip(q.0).any(|(u, v)| u.abs_diff(v) > 1))
            .map(|((x, y, p), q)| (x, y, p.0, q.0))
            .take(5)
            .collect();
        assert!(
            differing.is_empty(),
            "{slice:?}: paged vs dense differ at {differing:?}"
        );
        let lit = a
            .pixels()
            .filter(|p| p.0 != [0, 0, 0, 0] && p.0 != BG)
            .count();
        assert!(lit > 5000, "{slice:?}: only {lit} pixels drawn");
    }
}

#[test]
fn a_paged_image_and_a_paged_volume_share_the_frames_upload_budget() {
    // A lazy 1024^2 f32 image (16 pages of 256^2, 266 KB a slot) and a lazy 3-level 128^3
    // volume (9 pages of 64^3 at levels 0 and 1 and 1 at level 2, 1.15 MB a slot) in one
    // scene, under a per-frame upload budget of 1.5 MiB: every frame's page uploads, 2-D and
    // 3-D together, stay within it (no page here is larger than the budget, so not even a
    // frame's first page may pass it), and both visuals complete.
    let budget = 3 << 19;
    let mut renderer_options = RendererOptions::from_env().unwrap();
    renderer_options.always_page_3d = true;
    renderer_options.upload_budget = Some(budget);
    let mut r = Renderer::with_options(renderer_options).unwrap();
    let grid = ChunkGrid::new(&[256, 256]).unwrap();
    let layout = Layout::new(Shape::d2(1024, 1024).unwrap(), ElementType::F32, 1)
        .unwrap()
        .with_chunks(grid);
    let loader = ProceduralLoader::new(layout, |_key, region, dst| {
        for (i, v) in dst.chunks_exact_mut(4).enumerate() {
            let (y, x) = (
                region.origin[0] + i / region.size[2],
                region.origin[2] + i % region.size[2],
            );
            v.copy_from_slice(&(((x + y) % 256) as f32).to_ne_bytes());
        }
        Ok(ChunkFill::Filled)
    });
    let flat: SharedSource = Arc::new(LazySource::with_options(loader, options_2d()).unwrap());
    let volume_loader = ProceduralLoader::new(pyramid(128, 3), |key, region, dst| {
        fill(key, region, dst);
        Ok(ChunkFill::Filled)
    });
    let deep: SharedSource = Arc::new(LazySource::with_options(volume_loader, options()).unwrap());
    let mut scene = Scene::new();
    let image = scene.add(Image::new(flat).with_clim(0.0, 255.0).unwrap());
    scene.set_transform(image, Mat4::from_scale(Vec3::splat(0.125)));
    let volume = scene.add(mip_volume(deep, Interpolation::Linear));
    let camera = Front { n: 128.0 };
    let target = r.create_target(128, 128).unwrap();
    let start = Instant::now();
    let mut frames_over_half = 0;
    loop {
        let before = r.counters().bytes_uploaded;
        r.render(&scene, &camera, &target).unwrap();
        let spent = r.counters().bytes_uploaded - before;
        assert!(
            spent <= budget,
            "a frame uploaded {spent} bytes, budget {budget}"
        );
        if spent > budget / 2 {
            frames_over_half += 1;
        }
        let done =
            [image, volume].map(|n| r.progress(scene.visual(n).unwrap()).unwrap().is_complete());
        if done == [true, true] {
            break;
        }
        assert!(
            start.elapsed() < Duration::from_secs(60),
            "not complete: {done:?}"
        );
        std::thread::sleep(Duration::from_millis(5));
    }
    // The budget was the limit, not the loaders: frames filled most of it.
    assert!(
        frames_over_half >= 4,
        "{frames_over_half} frames used over half the budget"
    );
}

fn options_2d() -> LazyOptions {
    LazyOptions::with_pool(LoaderPool::new(2).unwrap(), ChunkCache::new(64 << 20))
}
