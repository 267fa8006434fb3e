//! Zarr and OME-Zarr stores through the command line: `sluice render` of a local store equals
//! the library's offscreen render of the same lazy source, once resident, and both are the
//! closed form the fixtures were written from, through the colormap on the CPU; `--t` and
//! `--channel` pick what is shown; `sluice info` names the store, axes, levels, chunk grids
//! and bytes; a missing store, an unreachable URL and a selection the store does not have each
//! give one line and exit status 1.
//!
//! The same store over HTTP (a loopback server the test starts) renders the same PNG, and a
//! chunk the server refuses is one line naming it, with no PNG written.
//!
//! The fixtures are written by `tests/fixtures/write_zarr.py` (zarr-python 3.1.6, from
//! `SLUICE_PYTHON` or the venv `.ci/run` makes); without it the fixture tests say they skipped,
//! unless `SLUICE_REQUIRE_ZARR=1`. Renders on lavapipe with `SLUICE_BACKEND=vulkan`.

use std::process::{Command, Output};
use std::sync::Arc;
use std::time::{Duration, Instant};

use sluice_render::glam::Vec2;
use sluice_render::{Colormap, Image, PanZoomCamera, Renderer, Scene};

fn sluice(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_sluice"))
        .args(args)
        .env("RUST_BACKTRACE", "1")
        .output()
        .expect("the sluice binary runs")
}

/// Asserts a failure with exit status 1 and one stderr line (ignoring the Vulkan loader's own
/// lines) containing every `needle`.
fn assert_one_line_error(out: &Output, needles: &[&str]) {
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(
        out.status.code(),
        Some(1),
        "exit status {:?}; stderr: {stderr}",
        out.status
    );
    let lines: Vec<&str> = stderr.lines().filter(|l| l.starts_with("sluice")).collect();
    assert_eq!(lines.len(), 1, "one line on stderr, got: {stderr}");
    assert!(lines[0].starts_with("sluice: error: "), "{stderr}");
    for needle in needles {
        assert!(
            lines[0].contains(needle),
            "{needle:?} missing from {stderr:?}"
        );
    }
    assert!(!stderr.contains("panicked") && !stderr.contains("backtrace"));
}

/// sluice-zarr's test helpers: the fixtures zarr-python writes, and a loopback HTTP server
/// honouring Range with injectable faults.
#[path = "../../sluice-zarr/tests/common/mod.rs"]
mod common;

use common::fixtures;

/// `write_zarr.py`'s closed form for uint16: the seed plus index[i] times the last primes.
fn closed_form(index: &[u64], seed: i64) -> f32 {
    const PRIMES: [i64; 5] = [7919, 1009, 131, 31, 3];
    let primes = &PRIMES[5 - index.len()..];
    let v: i64 = seed
        + index
            .iter()
            .zip(primes)
            .map(|(&i, &p)| i as i64 * p)
            .sum::<i64>();
    (v % 65536) as f32
}

/// The colormap entry for `v` under `clim` (the convention the renderer states).
fn expected(map: &Colormap, v: f32, [lo, hi]: [f32; 2]) -> [u8; 4] {
    let t = ((v - lo) / (hi - lo)).clamp(0.0, 1.0);
    let n = map.entries().len();
    map.entries()[((t * n as f32) as usize).min(n - 1)]
}

/// Pixels of `png` (one sample per pixel) that are not `value(x, y)` through `map` and `clim`,
/// accepting the neighbouring entry for values on an entry boundary (u16 is normalized on the
/// GPU).
fn wrong_pixels(
    png: &image::RgbaImage,
    map: &Colormap,
    clim: [f32; 2],
    value: impl Fn(u64, u64) -> f32,
) -> usize {
    let slack = (clim[1] - clim[0]) * 0.002;
    let mut wrong = 0;
    for y in 0..png.height() {
        for x in 0..png.width() {
            let v = value(u64::from(x), u64::from(y));
            let got = png.get_pixel(x, y).0;
            if ![-slack, 0.0, slack]
                .iter()
                .any(|d| expected(map, v + d, clim) == got)
            {
                wrong += 1;
            }
        }
    }
    wrong
}

fn render_ok(args: &[&str]) -> image::RgbaImage {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("out.png");
    let mut all = vec!["render"];
    all.extend_from_slice(args);
    all.extend_from_slice(&["--out", out.to_str().unwrap()]);
    let status = sluice(&all);
    assert!(
        status.status.success(),
        "{}",
        String::from_utf8_lossy(&status.stderr)
    );
    image::open(&out).unwrap().to_rgba8()
}

/// OME-Zarr 0.4, c/y/x = 2 x 90 x 130 in chunks of 1 x 40 x 40, seed 31; level 0's chunk
/// [0, 2, 3] (channel 0, rows 80.., columns 120..) was never written: it shows the fill, 0.
#[test]
fn render_of_a_local_ome_zarr_matches_the_library_render_and_the_closed_form() {
    let Some(dir) = fixtures() else { return };
    let store = dir.join("ome04.zarr");
    let store = store.to_str().unwrap();
    let (w, h) = (130u32, 90u32);
    let clim = [0.0f32, 4000.0];
    let cli = render_ok(&[
        store,
        "--size",
        &format!("{w}x{h}"),
        "--clim",
        "0,4000",
        "--colormap",
        "viridis",
    ]);

    // The same store through the library: its lazy source (channel 0) drawn offscreen, frames
    // rendered until nothing is pending.
    let zarr = sluice_zarr::ZarrSource::open_with(
        store,
        &sluice_zarr::OpenOptions {
            channels: Some(vec![0]),
            ..Default::default()
        },
    )
    .unwrap();
    let mut scene = Scene::new();
    scene.add(
        Image::new(Arc::new(zarr.lazy().unwrap()))
            .with_clim(0.0, 4000.0)
            .unwrap()
            .with_colormap(Colormap::Viridis),
    );
    let mut renderer =
        Renderer::with_options(sluice_render::RendererOptions::from_env().unwrap()).unwrap();
    let target = renderer.create_target(w, h).unwrap();
    let camera = PanZoomCamera::fit(Vec2::ZERO, Vec2::new(w as f32, h as f32), target.size());
    let started = Instant::now();
    while renderer
        .render(&scene, &camera, &target)
        .unwrap()
        .uploads_pending
    {
        assert!(
            started.elapsed() < Duration::from_secs(60),
            "never resident"
        );
        std::thread::sleep(Duration::from_millis(10));
    }
    let library = renderer.read_image(&target).unwrap();
    assert_eq!(cli.dimensions(), library.dimensions());
    assert!(
        cli.as_raw() == library.as_raw(),
        "the PNG differs from the library's render"
    );

    let wrong = wrong_pixels(&cli, &Colormap::Viridis, clim, |x, y| {
        if y >= 80 && x >= 120 {
            0.0
        } else {
            closed_form(&[0, y, x], 31)
        }
    });
    assert_eq!(wrong, 0, "pixels off the closed form through the colormap");
}

/// OME-Zarr 0.5, t/c/z/y/x = 2 x 3 x 10 x 72 x 100, seed 21 at level 0: `--t 1 --channel 2
/// --as image` shows plane 5 (the middle) of time point 1, channel 2.
#[test]
fn time_point_and_channel_flags_choose_what_is_rendered() {
    let Some(dir) = fixtures() else { return };
    let store = dir.join("ome05.zarr");
    let store = store.to_str().unwrap();
    let clim = [10_000.0f32, 14_000.0];
    let png = render_ok(&[
        store,
        "--as",
        "image",
        "--t",
        "1",
        "--channel",
        "2",
        "--size",
        "100x72",
        "--clim",
        "10000,14000",
        "--colormap",
        "magma",
    ]);
    let wrong = wrong_pixels(&png, &Colormap::Magma, clim, |x, y| {
        closed_form(&[1, 2, 5, y, x], 21)
    });
    assert_eq!(
        wrong, 0,
        "pixels off t = 1, c = 2, z = 5 of the closed form"
    );
    // Time point 0 differs by 7919 everywhere: the flag is not ignored.
    let t0 = render_ok(&[
        store,
        "--as",
        "image",
        "--channel",
        "2",
        "--size",
        "100x72",
        "--clim",
        "10000,14000",
        "--colormap",
        "magma",
    ]);
    assert_ne!(t0.as_raw(), png.as_raw());
}

#[test]
fn info_names_the_store_axes_levels_chunk_grids_and_bytes() {
    let Some(dir) = fixtures() else { return };
    let store = dir.join("ome05.zarr");
    let store = store.to_str().unwrap();
    let out = sluice(&["info", store, "--t", "1"]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let text = String::from_utf8_lossy(&out.stdout);
    // Levels halve y and x (rounding up) and z: 10 x 72 x 100, 5 x 36 x 50, 3 x 18 x 25, in
    // chunks of 4 x 32 x 32; u16, one channel shown.
    let levels = [[10usize, 72, 100], [5, 36, 50], [3, 18, 25]];
    let mut wanted = vec![
        store.to_string(),
        "OME-Zarr 0.5".into(),
        "local directory".into(),
        "t 2, c 3, z 10, y 72, x 100".into(),
        "time point: 1 of 2".into(),
        "channels: [0] of 3".into(),
        "U16 x 1 channel(s)".into(),
    ];
    for (i, shape) in levels.iter().enumerate() {
        let grid: Vec<usize> = shape
            .iter()
            .zip([4, 32, 32])
            .map(|(s, c)| s.div_ceil(c))
            .collect();
        let bytes = shape.iter().product::<usize>() * 2;
        wanted.push(format!(
            "level {i} (/s{i}): shape {shape:?}, chunks [4, 32, 32] in a grid of {grid:?} ({} chunk(s)), {bytes} bytes",
            grid.iter().product::<usize>()
        ));
    }
    for line in &wanted {
        assert!(
            text.contains(line.as_str()),
            "{line:?} missing from:\n{text}"
        );
    }

    let sharded = dir.join("v3_sharded.zarr");
    let out = sluice(&["info", sharded.to_str().unwrap()]);
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        text.contains("shape [256, 384], chunks [32, 32] in a grid of [8, 12] (96 chunk(s), sharded), 196608 bytes"),
        "{text}"
    );
}

#[test]
fn selections_the_store_does_not_have_name_the_numbers() {
    let Some(dir) = fixtures() else { return };
    let store = dir.join("ome05.zarr");
    let store = store.to_str().unwrap();
    assert_one_line_error(
        &sluice(&["info", store, "--t", "5"]),
        &[store, "time point 5", "2 point(s)"],
    );
    assert_one_line_error(
        &sluice(&["render", store, "--channel", "7", "--out", "/tmp/never.png"]),
        &[store, "[7]", "3 channel(s)"],
    );
}

#[test]
fn missing_stores_bad_channels_and_unreachable_urls_give_one_line() {
    let dir = tempfile::tempdir().unwrap();
    let missing = dir.path().join("none.zarr");
    let missing = missing.to_str().unwrap();
    assert_one_line_error(&sluice(&["info", missing]), &[missing, "No such file"]);
    // Port 1 on the loopback: nothing listens, the connection is refused at once.
    let url = "http://127.0.0.1:1/data.zarr";
    assert_one_line_error(&sluice(&["info", url]), &[url, "remote read failed"]);
    assert_one_line_error(&sluice(&["render", url, "--out", "/tmp/never.png"]), &[url]);
    assert_one_line_error(&sluice(&["info", "gs://bucket/x.zarr"]), &["gs://"]);
    assert_one_line_error(
        &sluice(&["info", missing, "--channel", "0,1"]),
        &["--channel", "3 or 4"],
    );
}

/// Renders `view` at `size` until nothing is pending (the store's chunks have loaded).
fn render_resident(
    renderer: &mut Renderer,
    view: &sluice_view::View,
    size: [u32; 2],
) -> image::RgbaImage {
    let target = renderer.create_target(size[0], size[1]).unwrap();
    let camera = view.fit_camera(size);
    let started = Instant::now();
    while renderer
        .render(&view.scene, &camera, &target)
        .unwrap()
        .uploads_pending
    {
        assert!(
            started.elapsed() < Duration::from_secs(60),
            "never resident"
        );
        std::thread::sleep(Duration::from_millis(10));
    }
    renderer.read_image(&target).unwrap()
}

/// The window panel's t and channel sliders (driven through egui_kittest by their
/// accessibility actions) make the layer draw that time point and channel of the store; the
/// status bar's chunk counts and memory say what is resident.
#[test]
fn panel_t_and_channel_sliders_show_that_time_point_and_channel() {
    use egui::accesskit::Role;
    use egui_kittest::kittest::Queryable;
    use sluice_view::input::{self, OpenOptions};
    use sluice_view::panel::{self, ChunkCounts, Status};
    use sluice_view::{Settings, ShowAs, View};

    let Some(dir) = fixtures() else { return };
    let store = dir.join("ome05.zarr");
    let input = input::open(store.to_str().unwrap(), &OpenOptions::default()).unwrap();
    let settings = Settings {
        show_as: ShowAs::Image,
        clim: Some([10_000.0, 14_000.0]),
        colormap: Some(Colormap::Magma),
        ..Settings::default()
    };
    let view = View::build(&[input], &settings).unwrap();
    let mut harness = egui_kittest::Harness::new_ui_state(
        |ui, view: &mut View| {
            panel::layer_controls(ui, &mut view.scene, &mut view.layers);
        },
        view,
    );
    harness.run();
    harness
        .get_by_role_and_label(Role::Slider, "t")
        .set_value_accesskit(1.0);
    harness.run();
    harness
        .get_by_role_and_label(Role::Slider, "channel")
        .set_value_accesskit(2.0);
    harness.run();
    let view = harness.state();
    let selection = view.layers[0].store.as_ref().unwrap().selection().clone();
    assert_eq!((selection.time, selection.channels), (1, vec![2]));

    let mut renderer =
        Renderer::with_options(sluice_render::RendererOptions::from_env().unwrap()).unwrap();
    let png = render_resident(&mut renderer, view, [100, 72]);
    let wrong = wrong_pixels(&png, &Colormap::Magma, [10_000.0, 14_000.0], |x, y| {
        closed_form(&[1, 2, 5, y, x], 21)
    });
    assert_eq!(
        wrong, 0,
        "pixels off t = 1, c = 2, z = 5 of the closed form"
    );

    // The plane of this lazy 3-D store is drawn from its 3-D pages (`draw/paged_slice.rs`):
    // the level-0 page it crosses holds all 10 planes, whose 3 x 3 x 4 chunks load, and the
    // one chunk of the coarsest level it falls back to; all resident now.
    let chunks = ChunkCounts::from(&sluice_view::chunks::scene_progress(&view.scene, &renderer));
    assert_eq!(
        chunks,
        ChunkCounts {
            wanted: 37,
            resident: 37,
            loading: 0,
            failed: 0
        }
    );
    assert_eq!(
        panel::chunks_text(&chunks).unwrap(),
        "chunks 37 / 37, 0 loading, 0 failed"
    );
    // Pages of 66^3 u16 texels (64^3 and a 1-sample border) in a 3-D atlas sized for the
    // store's pages (a slot per page of every level, rounded up), not for the 512 MiB GPU
    // budget.
    let counters = renderer.counters();
    let slot = 66 * 66 * 66 * 2;
    let layout = match view.scene.visual(view.layers[0].node).unwrap() {
        sluice_render::Visual::Image(image) => image.source().layout(),
        other => panic!("the layer is not an image: {other:?}"),
    };
    let all_pages: u64 = layout
        .levels()
        .iter()
        .map(|l| {
            let [d, h, w] = l.shape.padded();
            (d.div_ceil(64) * h.div_ceil(64) * w.div_ceil(64)) as u64
        })
        .sum();
    assert!(counters.pages_resident >= 2, "{counters:?}");
    assert_eq!(
        counters.page_bytes_resident,
        counters.pages_resident * slot,
        "{counters:?}"
    );
    let resident = counters.resident_bytes;
    // (textures_alive 2: the atlas, whose slots come in about a cube, here 2 x 2 x 2 for 6
    // pages, and a texture of a few hundred bytes.)
    assert!(
        (all_pages * slot..2 * all_pages * slot + 4096).contains(&resident),
        "{all_pages} pages; {counters:?}"
    );
    let status = Status {
        resident_bytes: resident,
        ..Status::default()
    };
    assert_eq!(panel::memory_text(&status), "resident 4.4 MiB (no budget)");
    let budgeted = Status {
        resident_bytes: 40 << 20,
        page_bytes: 12 << 20,
        gpu_budget: Some(512 << 20),
        ..Status::default()
    };
    assert_eq!(
        panel::memory_text(&budgeted),
        "resident 40.0 MiB, pages 12.0 of 512.0 MiB budget"
    );
}

#[test]
fn a_store_over_http_renders_as_the_local_store_and_a_refused_chunk_is_one_line() {
    let Some(dir) = fixtures() else { return };
    let args = |store: &str| -> Vec<String> {
        [
            store,
            "--size",
            "130x90",
            "--clim",
            "0,4000",
            "--colormap",
            "viridis",
        ]
        .iter()
        .map(|s| s.to_string())
        .collect()
    };
    let local = dir.join("ome04.zarr");
    let local = render_ok(
        &args(local.to_str().unwrap())
            .iter()
            .map(String::as_str)
            .collect::<Vec<_>>(),
    );
    let server = common::TestServer::start(dir);
    let url = server.url("ome04.zarr");
    let remote = render_ok(&args(&url).iter().map(String::as_str).collect::<Vec<_>>());
    assert!(
        remote.as_raw() == local.as_raw(),
        "the store over HTTP renders differently"
    );
    assert!(server.requests.load(std::sync::atomic::Ordering::Relaxed) > 0);

    // Level 0's chunk (c 0, y 1, x 2) refused with 403 (final: not retried, not "absent").
    server
        .faults
        .status
        .lock()
        .unwrap()
        .insert("/ome04.zarr/s0/0/1/2".into(), 403);
    let out_dir = tempfile::tempdir().unwrap();
    let png = out_dir.path().join("never.png");
    let mut all = vec!["render".to_string()];
    all.extend(args(&url));
    all.extend(["--out".to_string(), png.to_str().unwrap().to_string()]);
    let out = sluice(&all.iter().map(String::as_str).collect::<Vec<_>>());
    assert_one_line_error(&out, &[&url, "chunk [0, 1, 2]", "403"]);
    assert!(!png.exists(), "no PNG is written for an incomplete frame");
}

/// `sluice view STORE --frames 2 --save` under a display (Xvfb): the window waits for the
/// store's chunks before counting frames, and its last frame is what `sluice render` draws at
/// the same size (the same fitted camera), pixel for pixel.
#[test]
fn view_of_a_store_saves_the_complete_frame_that_render_draws() {
    let has_display =
        std::env::var_os("DISPLAY").is_some() || std::env::var_os("WAYLAND_DISPLAY").is_some();
    if !has_display {
        assert!(
            std::env::var("SLUICE_REQUIRE_WINDOW").as_deref() != Ok("1"),
            "SLUICE_REQUIRE_WINDOW=1 but there is no display (run under xvfb-run)"
        );
        eprintln!("skipped: no display (DISPLAY / WAYLAND_DISPLAY unset); run under xvfb-run");
        return;
    }
    let Some(dir) = fixtures() else { return };
    let store = dir.join("ome04.zarr");
    let store = store.to_str().unwrap();
    let out_dir = tempfile::tempdir().unwrap();
    let saved = out_dir.path().join("window.png");
    let shown = ["--clim", "0,4000", "--colormap", "viridis"];
    let mut args = vec![
        "view",
        store,
        "--frames",
        "2",
        "--save",
        saved.to_str().unwrap(),
    ];
    args.extend_from_slice(&shown);
    let run = sluice(&args);
    assert!(
        run.status.success(),
        "{}",
        String::from_utf8_lossy(&run.stderr)
    );
    let window = image::open(&saved).unwrap().to_rgba8();
    let size = format!("{}x{}", window.width(), window.height());
    let mut args = vec![store, "--size", size.as_str()];
    args.extend_from_slice(&shown);
    let rendered = render_ok(&args);
    assert!(
        window.as_raw() == rendered.as_raw(),
        "the window's last frame differs from sluice render at {size}"
    );
}

/// A store slower than `--timeout`: one line naming what had not arrived, and no PNG.
#[test]
fn render_gives_up_after_the_timeout_naming_the_missing_chunks() {
    let Some(dir) = fixtures() else { return };
    let server = common::TestServer::start(dir);
    let url = server.url("ome04.zarr");
    // Every answer waits 100 ms: the first frame finds level 0's chunks loading.
    server
        .faults
        .latency_ms
        .store(100, std::sync::atomic::Ordering::Relaxed);
    let out_dir = tempfile::tempdir().unwrap();
    let png = out_dir.path().join("never.png");
    let out = sluice(&[
        "render",
        &url,
        "--timeout",
        "0",
        "--out",
        png.to_str().unwrap(),
    ]);
    // Which chunks a frame needs is the renderer's business (level 0 whole on the dense
    // path, the view's pages through the virtual texture): the line counts them.
    assert_one_line_error(
        &out,
        &[&url, "chunks the frame shows not loaded", "after 0 s"],
    );
    assert!(!png.exists(), "no PNG is written for an incomplete frame");
}

/// A 2-D store is drawn through the renderer's virtual texture: once complete, the status
/// bar's chunks are the chunks the view needs, all resident, and the memory is its pages
/// against the GPU budget.
#[test]
fn a_two_dimensional_store_is_paged_and_the_status_counts_its_view() {
    use sluice_view::input::{self, OpenOptions};
    use sluice_view::panel::{self, ChunkCounts, Status};
    use sluice_view::{Settings, View};

    let Some(dir) = fixtures() else { return };
    let store = dir.join("ome04.zarr");
    let input = input::open(store.to_str().unwrap(), &OpenOptions::default()).unwrap();
    let view = View::build(&[input], &Settings::default()).unwrap();
    let mut renderer =
        Renderer::with_options(sluice_render::RendererOptions::from_env().unwrap()).unwrap();
    let target = renderer.create_target(130, 90).unwrap();
    let camera = view.fit_camera(target.size());
    let done = renderer
        .render_until_complete(&view.scene, &camera, &target, Duration::from_secs(60))
        .unwrap();
    assert!(done.complete, "{:?}", done.progress);
    let visual = view.scene.visual(view.layers[0].node).unwrap();
    let progress = renderer
        .progress(visual)
        .expect("a lazy 2-D source is paged");
    assert!(progress.is_complete());
    let chunks = ChunkCounts::from(&sluice_view::chunks::scene_progress(&view.scene, &renderer));
    assert_eq!(chunks.wanted, progress.chunks_visible);
    assert!(chunks.wanted > 0);
    assert_eq!(
        (chunks.resident, chunks.loading, chunks.failed),
        (chunks.wanted, 0, 0)
    );
    let counters = renderer.counters();
    assert!(counters.page_bytes_resident > 0);
    let status = Status {
        resident_bytes: counters.resident_bytes,
        page_bytes: counters.page_bytes_resident,
        gpu_budget: Some(counters.gpu_budget),
        ..Status::default()
    };
    assert!(panel::memory_text(&status).contains("of 512.0 MiB budget"));
}
