//! `sluice render` writes the same pixels as the library's offscreen render of the same scene,
//! and those pixels are the colormap entries computed on the CPU. Renders on lavapipe with
//! `SLUICE_BACKEND=vulkan`.

use std::io::Write;
use std::process::Command;
use std::sync::Arc;

use sluice_core::ndarray::{Array2, Array3};
use sluice_core::{npy_header, ArraySource, ElementType};
use sluice_render::glam::{Vec2, Vec3};
use sluice_render::{Colormap, Image, OrbitCamera, PanZoomCamera, Renderer, Scene, Volume};

const W: usize = 64;
const H: usize = 40;

fn data() -> Array2<f32> {
    Array2::from_shape_fn((H, W), |(y, x)| (x as f32 + 3.0 * y as f32) / 200.0)
}

fn write_npy_f32(path: &std::path::Path, shape: &[usize], values: &[f32]) {
    let mut f = std::fs::File::create(path).unwrap();
    f.write_all(&npy_header(ElementType::F32, shape)).unwrap();
    for v in values {
        f.write_all(&v.to_le_bytes()).unwrap();
    }
}

/// The colormap entry for `v` under `clim` (the matplotlib convention the renderer states).
fn expected(map: &Colormap, v: f32, [lo, hi]: [f32; 2]) -> [u8; 4] {
    let t = ((v - lo) / (hi - lo)).clamp(0.0, 1.0);
    let n = map.entries().len();
    map.entries()[((t * n as f32) as usize).min(n - 1)]
}

/// Runs the `sluice` binary with `args` (and `env`), asserting that it succeeds; its stdout.
fn sluice(args: &[&str], env: &[(&str, &std::path::Path)]) -> String {
    let mut command = Command::new(env!("CARGO_BIN_EXE_sluice"));
    for (key, value) in env {
        command.env(key, value);
    }
    let run = command.args(args).output().unwrap();
    assert!(
        run.status.success(),
        "sluice {args:?}: {}",
        String::from_utf8_lossy(&run.stderr)
    );
    String::from_utf8_lossy(&run.stdout).into_owned()
}

#[test]
fn render_command_matches_the_library_render() {
    let dir = tempfile::tempdir().unwrap();
    let npy = dir.path().join("ramp.npy");
    let data = data();
    write_npy_f32(&npy, &[H, W], data.as_slice().unwrap());
    let out = dir.path().join("ramp.png");
    let status = Command::new(env!("CARGO_BIN_EXE_sluice"))
        .args([
            "render",
            npy.to_str().unwrap(),
            "--out",
            out.to_str().unwrap(),
        ])
        .args(["--size", &format!("{W}x{H}"), "--clim", "0.1,0.6"])
        .args(["--colormap", "viridis"])
        .output()
        .unwrap();
    assert!(
        status.status.success(),
        "{}",
        String::from_utf8_lossy(&status.stderr)
    );
    let cli = image::open(&out).unwrap().to_rgba8();

    // The same scene through the library.
    let mut scene = Scene::new();
    scene.add(
        Image::new(Arc::new(ArraySource::new(data.clone()).unwrap()))
            .with_clim(0.1, 0.6)
            .unwrap()
            .with_colormap(Colormap::Viridis),
    );
    let mut renderer =
        Renderer::with_options(sluice_render::RendererOptions::from_env().unwrap()).unwrap();
    let target = renderer.create_target(W as u32, H as u32).unwrap();
    let camera = PanZoomCamera::fit(Vec2::ZERO, Vec2::new(W as f32, H as f32), target.size());
    renderer.render(&scene, &camera, &target).unwrap();
    let library = renderer.read_image(&target).unwrap();
    assert_eq!(cli.dimensions(), library.dimensions());
    assert!(
        cli.as_raw() == library.as_raw(),
        "the PNG differs from the library's render"
    );

    // And both are the colormap on the CPU: one data pixel per screen pixel. Values exactly on
    // an entry boundary may round either way in the shader: the neighbour entry is accepted.
    let map = Colormap::Viridis;
    let mut wrong = 0;
    for y in 0..H {
        for x in 0..W {
            let v = data[[y, x]];
            let got = cli.get_pixel(x as u32, y as u32).0;
            let near = [-0.002f32, 0.0, 0.002]
                .iter()
                .any(|d| expected(&map, v + d, [0.1, 0.6]) == got);
            if !near {
                wrong += 1;
            }
        }
    }
    assert_eq!(wrong, 0, "pixels off the CPU colormap");
}

#[test]
fn render_command_matches_the_library_volume_render() {
    let dir = tempfile::tempdir().unwrap();
    let npy = dir.path().join("vol.npy");
    let (d, h, w) = (16usize, 20usize, 24usize);
    let vol = Array3::from_shape_fn((d, h, w), |(z, y, x)| {
        let r = ((x as f32 - 12.0).powi(2) + (y as f32 - 10.0).powi(2) + (z as f32 - 8.0).powi(2))
            .sqrt();
        (1.0 - r / 12.0).max(0.0)
    });
    write_npy_f32(&npy, &[d, h, w], vol.as_slice().unwrap());
    let out = dir.path().join("vol.png");
    let status = Command::new(env!("CARGO_BIN_EXE_sluice"))
        .args([
            "render",
            npy.to_str().unwrap(),
            "--out",
            out.to_str().unwrap(),
        ])
        .args(["--size", "96x80", "--clim", "0,1", "--colormap", "magma"])
        .args(["--camera", "40,25", "--mode", "mip"])
        .output()
        .unwrap();
    assert!(
        status.status.success(),
        "{}",
        String::from_utf8_lossy(&status.stderr)
    );
    let cli = image::open(&out).unwrap().to_rgba8();

    let mut scene = Scene::new();
    scene.add(
        Volume::new(Arc::new(ArraySource::new(vol).unwrap()))
            .with_clim(0.0, 1.0)
            .unwrap()
            .with_colormap(Colormap::Magma),
    );
    let mut renderer =
        Renderer::with_options(sluice_render::RendererOptions::from_env().unwrap()).unwrap();
    let target = renderer.create_target(96, 80).unwrap();
    let camera = OrbitCamera::fit(
        Vec3::ZERO,
        Vec3::new(w as f32, h as f32, d as f32),
        40.0,
        25.0,
    );
    renderer.render(&scene, &camera, &target).unwrap();
    let library = renderer.read_image(&target).unwrap();
    assert!(
        cli.as_raw() == library.as_raw(),
        "the PNG differs from the library's render"
    );
    // The ball's centre projects near the image centre: its MIP there is close to 1.
    let centre = cli.get_pixel(48, 40).0;
    let top = Colormap::Magma.entries()[255];
    let close = centre.iter().zip(top).all(|(a, b)| a.abs_diff(b) <= 40);
    assert!(close, "centre {centre:?}, magma top {top:?}");
}

#[test]
fn grid_places_inputs_side_by_side() {
    let dir = tempfile::tempdir().unwrap();
    let (a, b) = (dir.path().join("a.npy"), dir.path().join("b.npy"));
    write_npy_f32(&a, &[32, 32], &[0.25; 32 * 32]);
    write_npy_f32(&b, &[32, 32], &[0.75; 32 * 32]);
    let out = dir.path().join("grid.png");
    // 32 + 16 (gap) + 32 = 80 columns: the fitted camera shows them at one pixel per sample.
    let status = Command::new(env!("CARGO_BIN_EXE_sluice"))
        .args(["render", a.to_str().unwrap(), b.to_str().unwrap(), "--grid"])
        .args([
            "--out",
            out.to_str().unwrap(),
            "--size",
            "80x32",
            "--clim",
            "0,1",
        ])
        .output()
        .unwrap();
    assert!(
        status.status.success(),
        "{}",
        String::from_utf8_lossy(&status.stderr)
    );
    let png = image::open(&out).unwrap().to_rgba8();
    let gray = Colormap::Gray;
    assert_eq!(png.get_pixel(16, 16).0, expected(&gray, 0.25, [0.0, 1.0]));
    assert_eq!(png.get_pixel(64, 16).0, expected(&gray, 0.75, [0.0, 1.0]));
    assert_eq!(
        png.get_pixel(40, 16).0,
        [0, 0, 0, 255],
        "the gap shows the background"
    );
}

/// An image wider than 16,384 samples is drawn through a lazy pyramid over its map (chunks
/// read on the loader pool, coarser levels the means of finer ones): `sluice info` says so and
/// lists the levels, and `sluice render` of the whole image, 32 samples a pixel, shows the
/// data. The data are constant over blocks of 1,024 columns, so every level's mean inside a
/// block is the block's value: pixels away from block edges are the gray colormap of it.
#[test]
fn a_wide_npy_is_drawn_through_a_lazy_pyramid() {
    const WIDE: usize = 17 * 1024;
    const TALL: usize = 1024;
    let value = |c: usize| ((c / 1024) * 29 + 7) as u8;
    let dir = tempfile::tempdir().unwrap();
    let npy = dir.path().join("wide.npy");
    let mut bytes = npy_header(ElementType::U8, &[TALL, WIDE]);
    let row: Vec<u8> = (0..WIDE).map(value).collect();
    for _ in 0..TALL {
        bytes.extend_from_slice(&row);
    }
    std::fs::write(&npy, bytes).unwrap();

    let text = sluice(&["info", npy.to_str().unwrap()], &[]);
    assert!(text.contains("drawn through a lazy pyramid"), "{text}");
    // 17,408 halves five times to 544 (at most 1,024 a side: 6 levels in all).
    assert!(
        text.contains("level 5: shape [32, 544], 17408 bytes"),
        "{text}"
    );
    assert!(!text.contains("level 6:"), "{text}");

    let out = dir.path().join("wide.png");
    let (w, h) = (WIDE / 32, TALL / 32);
    let size = format!("{w}x{h}");
    let (npy_arg, out_arg) = (npy.to_str().unwrap(), out.to_str().unwrap());
    sluice(&["render", npy_arg, "--out", out_arg, "--size", &size], &[]);
    let png = image::open(&out).unwrap().to_rgba8();
    assert_eq!(png.dimensions(), (w as u32, h as u32));
    let map = Colormap::Gray;
    let mut wrong = Vec::new();
    for y in 0..h {
        for x in (0..w).filter(|x| (2..30).contains(&(x % 32))) {
            let v = f32::from(value(x * 32 + 16));
            let got = png.get_pixel(x as u32, y as u32).0;
            let near = [-0.5f32, 0.0, 0.5]
                .iter()
                .any(|d| expected(&map, v + d, [0.0, 255.0]) == got);
            if !near {
                wrong.push((x, y, got, v));
            }
        }
    }
    assert!(
        wrong.is_empty(),
        "{} pixels off, first {:?}",
        wrong.len(),
        &wrong[..wrong.len().min(4)]
    );
}

/// The `sluice` binary keeps its pipelines in the cache on disk (`SLUICE_PIPELINE_CACHE`
/// names the folder): after one render the folder holds the cache file, which a second render
/// reads back and finds unchanged in size (no pipeline it needs was missing), and both PNGs
/// are the same.
#[test]
fn the_command_line_keeps_its_pipelines_on_disk() {
    let dir = tempfile::tempdir().unwrap();
    let cache = dir.path().join("pipelines");
    let npy = dir.path().join("ramp.npy");
    let data = data();
    write_npy_f32(&npy, &[H, W], data.as_slice().unwrap());
    let size = format!("{W}x{H}");
    let render = |out: &std::path::Path| {
        let (npy_arg, out_arg) = (npy.to_str().unwrap(), out.to_str().unwrap());
        let args = ["render", npy_arg, "--out", out_arg, "--size", &size];
        sluice(&args, &[("SLUICE_PIPELINE_CACHE", &cache)]);
    };
    let files = || -> Vec<(std::path::PathBuf, u64)> {
        let mut v: Vec<_> = std::fs::read_dir(&cache)
            .map(|d| {
                d.flatten()
                    .map(|e| (e.path(), e.metadata().map_or(0, |m| m.len())))
                    .collect()
            })
            .unwrap_or_default();
        v.sort();
        v
    };
    let (a, b) = (dir.path().join("a.png"), dir.path().join("b.png"));
    render(&a);
    let first = files();
    let backend = std::env::var("SLUICE_BACKEND").unwrap_or_default();
    if backend.eq_ignore_ascii_case("gl") {
        // Only Vulkan has pipeline caches.
        return;
    }
    assert_eq!(first.len(), 1, "one cache file: {first:?}");
    assert!(first[0].1 > 16, "the cache holds data: {first:?}");
    render(&b);
    assert_eq!(
        files(),
        first,
        "the second run compiled no pipeline the first had not"
    );
    let (a, b) = (image::open(&a).unwrap(), image::open(&b).unwrap());
    assert_eq!(a.as_bytes(), b.as_bytes());
}
