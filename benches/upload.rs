//! Upload benchmarks (`cargo bench --bench upload`, or `just bench`).
//!
//! Every figure is a ratio against a ceiling measured in the same run, on the same device:
//!
//! - **Full update**: filling a 4096 x 4096 RGBA8 source and drawing it, against the bare
//!   wgpu path that fills a host buffer of the same 64 MiB, `queue.write_texture`s it into a
//!   texture of its own and draws the same (unchanged) scene. Throughput ratio
//!   `baseline / sluice`, target >= 0.9. A second pair replaces the data from a prepared array
//!   (`ArraySource::write` against `write_texture` of that array): sluice copies the array
//!   into the source first, so that pair is reported, not judged.
//! - **Dirty region**: a 256 x 256 RGBA8 write (64-aligned, moving) and a frame, against the
//!   full update above. Time ratio target <= 0.03; bytes uploaded per frame must be exactly
//!   the region's 262144. The frame redraws only the screen rectangle the region covers (as
//!   sluice does by default); the same frame redrawing the whole target (invalidated first)
//!   is reported beside it. Baseline and render-only frames invalidate the target, so they
//!   draw the whole scene.
//! - **Sharing**: 8 images of one source (different contrast limits and colormaps) against 1,
//!   with a full update per frame: one texture, the same resident and uploaded bytes.
//!
//! Each iteration ends with `Renderer::wait_idle`, so GPU work is counted. After warm-up
//! iterations, `SLUICE_BENCH_ITERS` (default 15) timed iterations run; medians are reported.
//! sluice and baseline iterations alternate, so drift affects both alike.
//! `SLUICE_BENCH_WARMUP` (default 3) sets the warm-up count; `SLUICE_BENCH_STRICT=1` makes a
//! missed target exit with status 1. The adapter follows `SLUICE_BACKEND` / `SLUICE_ADAPTER`.

use std::sync::Arc;
use std::time::{Duration, Instant};

mod common;

use common::{env_usize, gibs, measure, ms, print_table, Res, Row, Timing, Verdicts};
use sluice::prelude::*;
use sluice::{wgpu, Counters, RenderTarget};

/// Side of the square test image, in pixels.
const SIDE: usize = 4096;
/// RGBA.
const CHANNELS: usize = 4;
/// Bytes of the whole image.
const FULL_BYTES: usize = SIDE * SIDE * CHANNELS;
/// Side of the render target.
const TARGET_SIDE: u32 = 1024;
/// Side of the dirty region of part b.
const REGION_SIDE: usize = 256;
/// Bytes of the dirty region.
const REGION_BYTES: usize = REGION_SIDE * REGION_SIDE * CHANNELS;
/// Images in the shared scene of part c.
const SHARED_IMAGES: usize = 8;

const FULL_THROUGHPUT_TARGET: f64 = 0.9;
const REGION_TIME_TARGET: f64 = 0.03;

/// The fill value of iteration `i`: never the initial zero, different from the last.
fn fill_value(i: usize) -> u8 {
    (i % 251 + 1) as u8
}

/// Renders one frame and waits for the GPU; checks what it uploaded.
fn frame(
    renderer: &mut Renderer,
    scene: &Scene,
    camera: &PanZoomCamera,
    target: &RenderTarget,
    expect_bytes: Option<usize>,
) -> Res<()> {
    let stats = renderer.render(scene, camera, target)?;
    renderer.wait_idle()?;
    if stats.uploads_pending {
        return Err("a frame left uploads pending (upload budget set?)".into());
    }
    if let Some(expected) = expect_bytes {
        if stats.bytes_uploaded != expected as u64 {
            return Err(format!(
                "a frame uploaded {} bytes, expected {expected}",
                stats.bytes_uploaded
            )
            .into());
        }
    }
    Ok(())
}

/// A scene of `n` images of `source`, tiled in a grid of up to 4 columns, each with its own
/// contrast limits and colormap; and a camera that fits the grid.
fn grid_scene(
    source: &Arc<ArraySource>,
    n: usize,
    target: &RenderTarget,
) -> Res<(Scene, PanZoomCamera)> {
    let colormaps = Colormap::builtins();
    let cols = n.min(4);
    let rows = n.div_ceil(cols);
    let mut scene = Scene::new();
    for i in 0..n {
        let hi = 255.0 - 16.0 * i as f64;
        let image = Image::new(source.clone())
            .with_clim(8.0 * i as f64, hi)?
            .with_colormap(colormaps[i % colormaps.len()].clone());
        let id = scene.add(image);
        let offset = Vec3::new(((i % cols) * SIDE) as f32, ((i / cols) * SIDE) as f32, 0.0);
        scene.set_transform(id, Mat4::from_translation(offset));
    }
    let extent = Vec2::new((cols * SIDE) as f32, (rows * SIDE) as f32);
    let camera = PanZoomCamera::fit(Vec2::ZERO, extent, target.size());
    Ok((scene, camera))
}

fn main() -> Res<()> {
    // `cargo bench` passes `--bench` (and a filter, if given): nothing here is selectable.
    let iters = env_usize("SLUICE_BENCH_ITERS", 15)?.max(1);
    let warmup = env_usize("SLUICE_BENCH_WARMUP", 3)?;
    let strict = std::env::var("SLUICE_BENCH_STRICT").is_ok_and(|v| v == "1");

    let started = Instant::now();
    let mut renderer = Renderer::with_options(RendererOptions::from_env()?)?;
    let info = renderer.adapter_info().clone();
    println!("sluice upload bench");
    println!(
        "adapter: {} ({:?}, {:?}), driver: {} {}",
        info.name, info.backend, info.device_type, info.driver, info.driver_info
    );
    println!(
        "image {SIDE}x{SIDE} RGBA8 ({} MiB), target {TARGET_SIDE}x{TARGET_SIDE}, \
         {warmup} warm-up + {iters} timed iterations, medians",
        FULL_BYTES >> 20
    );

    let source = Arc::new(ArraySource::with_channels(Array3::<u8>::zeros((
        SIDE, SIDE, CHANNELS,
    )))?);
    let target = renderer.create_target(TARGET_SIDE, TARGET_SIDE)?;
    let full = Region::d2(0, 0, SIDE, SIDE);

    // ---- a) full update against bare write_texture -------------------------------------
    let (scene, camera) = grid_scene(&source, 1, &target)?;
    frame(&mut renderer, &scene, &camera, &target, Some(FULL_BYTES))?;

    let extent = wgpu::Extent3d {
        width: SIDE as u32,
        height: SIDE as u32,
        depth_or_array_layers: 1,
    };
    let bare = renderer.device().create_texture(&wgpu::TextureDescriptor {
        label: Some("bench baseline texture"),
        size: extent,
        mip_level_count: 1,
        sample_count: 1,
        dimension: wgpu::TextureDimension::D2,
        format: wgpu::TextureFormat::Rgba8Unorm,
        usage: wgpu::TextureUsages::COPY_DST | wgpu::TextureUsages::TEXTURE_BINDING,
        view_formats: &[],
    });
    let bare_layout = wgpu::TexelCopyBufferLayout {
        offset: 0,
        bytes_per_row: Some((SIDE * CHANNELS) as u32),
        rows_per_image: Some(SIDE as u32),
    };
    let mut host = vec![0u8; FULL_BYTES];
    let prepared = Array3::<u8>::from_shape_fn((SIDE, SIDE, CHANNELS), |(r, c, ch)| {
        (r ^ c ^ (ch << 6)) as u8
    });
    let prepared_bytes = prepared.as_slice().ok_or("prepared array is contiguous")?;

    let mut sluice_fill = |r: &mut Renderer, i: usize| -> Res<Duration> {
        let k = fill_value(i);
        let t = Instant::now();
        source.update::<u8>(full, |mut v| v.fill(k))?;
        frame(r, &scene, &camera, &target, Some(FULL_BYTES))?;
        Ok(t.elapsed())
    };
    let mut bare_fill = |r: &mut Renderer, i: usize| -> Res<Duration> {
        let k = fill_value(i);
        let t = Instant::now();
        host.fill(k);
        r.queue()
            .write_texture(bare.as_image_copy(), &host, bare_layout, extent);
        // The same draw as sluice's frame: the whole target (sluice would see nothing changed
        // in its own textures and redraw nothing).
        target.invalidate();
        frame(r, &scene, &camera, &target, Some(0))?;
        Ok(t.elapsed())
    };
    let mut render_only = |r: &mut Renderer, _: usize| -> Res<Duration> {
        let t = Instant::now();
        target.invalidate();
        frame(r, &scene, &camera, &target, Some(0))?;
        Ok(t.elapsed())
    };
    println!("\nrunning a) full update ...");
    let fill = measure(
        &mut renderer,
        warmup,
        iters,
        &mut [&mut sluice_fill, &mut bare_fill, &mut render_only],
    )?;
    let staging_before = fill.before.staging_buffers_created;

    let mut sluice_write = |r: &mut Renderer, _: usize| -> Res<Duration> {
        let t = Instant::now();
        source.write(&[0, 0], prepared.view())?;
        frame(r, &scene, &camera, &target, Some(FULL_BYTES))?;
        Ok(t.elapsed())
    };
    let mut bare_write = |r: &mut Renderer, _: usize| -> Res<Duration> {
        let t = Instant::now();
        r.queue()
            .write_texture(bare.as_image_copy(), prepared_bytes, bare_layout, extent);
        target.invalidate();
        frame(r, &scene, &camera, &target, Some(0))?;
        Ok(t.elapsed())
    };
    let replace = measure(
        &mut renderer,
        warmup,
        iters,
        &mut [&mut sluice_write, &mut bare_write],
    )?;

    let frames = iters as f64;
    let [t_sluice_fill, t_bare_fill, t_render] = fill.medians[..] else {
        unreachable!()
    };
    let [t_sluice_write, t_bare_write] = replace.medians[..] else {
        unreachable!()
    };
    // The sluice steps alone uploaded; baselines and render-only frames uploaded nothing.
    let per = |c: &Counters| {
        (
            c.bytes_uploaded as f64 / frames,
            c.copies_issued as f64 / frames,
        )
    };
    let (fill_bytes, fill_copies) = per(&fill.counters);
    let (write_bytes, write_copies) = per(&replace.counters);
    print_table(
        "a) full update, 4096x4096 RGBA8 (64 MiB), one image",
        &[
            Row {
                label: "sluice: update(fill) + render".into(),
                median: t_sluice_fill,
                bytes_per_frame: fill_bytes,
                copies_per_frame: fill_copies,
                note: format!("{:.2} GiB/s", gibs(FULL_BYTES, t_sluice_fill)),
            },
            Row {
                label: "baseline: Vec fill + write_texture + render".into(),
                median: t_bare_fill,
                bytes_per_frame: 0.0,
                copies_per_frame: 0.0,
                note: format!("{:.2} GiB/s", gibs(FULL_BYTES, t_bare_fill)),
            },
            Row {
                label: "render only (nothing changed)".into(),
                median: t_render,
                bytes_per_frame: 0.0,
                copies_per_frame: 0.0,
                note: "floor of every frame here".into(),
            },
            Row {
                label: "replace from a prepared array: sluice write".into(),
                median: t_sluice_write,
                bytes_per_frame: write_bytes,
                copies_per_frame: write_copies,
                note: format!("{:.2} GiB/s", gibs(FULL_BYTES, t_sluice_write)),
            },
            Row {
                label: "replace from a prepared array: write_texture".into(),
                median: t_bare_write,
                bytes_per_frame: 0.0,
                copies_per_frame: 0.0,
                note: format!("{:.2} GiB/s", gibs(FULL_BYTES, t_bare_write)),
            },
        ],
    );

    // ---- b) dirty region ----------------------------------------------------------------
    let region = Array3::<u8>::from_elem((REGION_SIDE, REGION_SIDE, CHANNELS), 200);
    let slots = (SIDE - REGION_SIDE) / 64 + 1;
    let mut sluice_region = |r: &mut Renderer, i: usize| -> Res<Duration> {
        // A walk over 64-aligned positions that moves every frame.
        let y = (i * 7 % slots) * 64;
        let x = (i * 13 % slots) * 64;
        let t = Instant::now();
        source.write(&[y, x], region.view())?;
        frame(r, &scene, &camera, &target, Some(REGION_BYTES))?;
        Ok(t.elapsed())
    };
    // The same with the whole target redrawn, as a renderer without partial redraws does.
    let mut sluice_region_whole = |r: &mut Renderer, i: usize| -> Res<Duration> {
        let y = (i * 11 % slots) * 64;
        let x = (i * 5 % slots) * 64;
        let t = Instant::now();
        source.write(&[y, x], region.view())?;
        target.invalidate();
        frame(r, &scene, &camera, &target, Some(REGION_BYTES))?;
        Ok(t.elapsed())
    };
    println!("running b) dirty region ...");
    let dirty = measure(
        &mut renderer,
        warmup,
        iters,
        &mut [&mut sluice_region, &mut sluice_region_whole],
    )?;
    let (t_region, t_region_whole) = (dirty.medians[0], dirty.medians[1]);
    // Two steps per iteration here, each one region.
    let (region_bytes, region_copies) = {
        let (b, c) = per(&dirty.counters);
        (b / 2.0, c / 2.0)
    };
    print_table(
        "b) dirty region, 256x256 RGBA8 write at 64-aligned moving positions",
        &[
            Row {
                label: "sluice: write(region) + render (partial redraw)".into(),
                median: t_region,
                bytes_per_frame: region_bytes,
                copies_per_frame: region_copies,
                note: format!(
                    "{:.4} of the full update",
                    t_region.as_secs_f64() / t_sluice_fill.as_secs_f64(),
                ),
            },
            Row {
                label: "sluice: write(region) + render, whole target".into(),
                median: t_region_whole,
                bytes_per_frame: region_bytes,
                copies_per_frame: region_copies,
                note: format!(
                    "{:.4} of the full update, {:.3} ms above render only",
                    t_region_whole.as_secs_f64() / t_sluice_fill.as_secs_f64(),
                    ms(t_region_whole) - ms(t_render)
                ),
            },
        ],
    );
    // b') the same changes without drawing: `Renderer::upload` alone, PIPELINED updates in a
    // row and one wait at the end (as an application streaming changes runs), so neither the
    // draw nor the GPU round trip of a per-frame wait hides the upload's own cost. Times are
    // per update.
    const PIPELINED: usize = 16;
    let mut upload_full = |r: &mut Renderer, i: usize| -> Res<Duration> {
        let t = Instant::now();
        for j in 0..PIPELINED {
            let k = fill_value(i * PIPELINED + j);
            source.update::<u8>(full, |mut v| v.fill(k))?;
            let stats = r.upload(&scene)?;
            if stats.bytes_uploaded != FULL_BYTES as u64 {
                return Err(format!("full upload moved {} bytes", stats.bytes_uploaded).into());
            }
        }
        r.wait_idle()?;
        Ok(t.elapsed() / PIPELINED as u32)
    };
    let mut upload_region = |r: &mut Renderer, i: usize| -> Res<Duration> {
        let t = Instant::now();
        for j in 0..PIPELINED {
            let n = i * PIPELINED + j;
            let (y, x) = ((n * 7 % slots) * 64, (n * 13 % slots) * 64);
            source.write(&[y, x], region.view())?;
            let stats = r.upload(&scene)?;
            if stats.bytes_uploaded != REGION_BYTES as u64 {
                return Err(format!("region upload moved {} bytes", stats.bytes_uploaded).into());
            }
        }
        r.wait_idle()?;
        Ok(t.elapsed() / PIPELINED as u32)
    };
    // b'') frames in flight: the same changes each followed by a drawn frame, 16 frames per
    // wait (how an interactive viewer streams edits), per frame.
    let mut drawn_full = |r: &mut Renderer, i: usize| -> Res<Duration> {
        let t = Instant::now();
        for j in 0..PIPELINED {
            let k = fill_value(i * PIPELINED + j);
            source.update::<u8>(full, |mut v| v.fill(k))?;
            r.render(&scene, &camera, &target)?;
        }
        r.wait_idle()?;
        Ok(t.elapsed() / PIPELINED as u32)
    };
    let mut drawn_region = |r: &mut Renderer, i: usize| -> Res<Duration> {
        let t = Instant::now();
        for j in 0..PIPELINED {
            let n = i * PIPELINED + j;
            let (y, x) = ((n * 7 % slots) * 64, (n * 13 % slots) * 64);
            source.write(&[y, x], region.view())?;
            r.render(&scene, &camera, &target)?;
        }
        r.wait_idle()?;
        Ok(t.elapsed() / PIPELINED as u32)
    };
    println!("running b') uploads without drawing, b'') frames in flight ...");
    let uploads = measure(
        &mut renderer,
        warmup,
        iters,
        &mut [
            &mut upload_full,
            &mut upload_region,
            &mut drawn_full,
            &mut drawn_region,
        ],
    )?;
    let (t_drawn_full, t_drawn_region) = (uploads.medians[2], uploads.medians[3]);
    println!(
        "\nb'') frames in flight (16 x (change + render), one wait), per frame: full {:.3} ms, \
         256x256 region {:.3} ms",
        ms(t_drawn_full),
        ms(t_drawn_region)
    );
    let (t_upload_full, t_upload_region) = (uploads.medians[0], uploads.medians[1]);
    print_table(
        "b') the same changes without drawing: 16 x (change + Renderer::upload), one wait; per update",
        &[
            Row {
                label: "sluice: update(fill) + upload".into(),
                median: t_upload_full,
                bytes_per_frame: FULL_BYTES as f64,
                copies_per_frame: 1.0,
                note: String::new(),
            },
            Row {
                label: "sluice: write(region) + upload".into(),
                median: t_upload_region,
                bytes_per_frame: REGION_BYTES as f64,
                copies_per_frame: 1.0,
                note: format!(
                    "{:.4} of the full upload",
                    t_upload_region.as_secs_f64() / t_upload_full.as_secs_f64()
                ),
            },
        ],
    );
    drop(scene);
    bare.destroy();

    // ---- c) sharing -----------------------------------------------------------------------
    println!("running c) sharing ...");
    struct Shared {
        timing: Timing,
        resident_bytes: u64,
        textures_alive: u64,
    }
    let mut shared = Vec::new();
    for n in [1, SHARED_IMAGES] {
        let (scene, camera) = grid_scene(&source, n, &target)?;
        let mut step = |r: &mut Renderer, i: usize| -> Res<Duration> {
            let k = fill_value(i);
            let t = Instant::now();
            source.update::<u8>(full, |mut v| v.fill(k))?;
            frame(r, &scene, &camera, &target, Some(FULL_BYTES))?;
            Ok(t.elapsed())
        };
        let timing = measure(&mut renderer, warmup, iters, &mut [&mut step])?;
        let now = renderer.counters();
        shared.push(Shared {
            timing,
            resident_bytes: now.resident_bytes,
            textures_alive: now.textures_alive,
        });
        drop(scene);
        // Frees the texture: the next configuration starts from nothing.
        renderer.collect_garbage();
    }
    let rows: Vec<Row> = shared
        .iter()
        .zip([1, SHARED_IMAGES])
        .map(|(s, n)| {
            let (b, c) = per(&s.timing.counters);
            Row {
                label: format!("{n} image(s) of one source: update(fill) + render"),
                median: s.timing.medians[0],
                bytes_per_frame: b,
                copies_per_frame: c,
                note: format!(
                    "textures alive {}, resident {} B",
                    s.textures_alive, s.resident_bytes
                ),
            }
        })
        .collect();
    print_table(
        "c) sharing: 8 images (own clim and colormap, tiled 4x2) vs 1, full update per frame",
        &rows,
    );
    let staging_after = renderer.counters().staging_buffers_created;
    let timed_staging: u64 = [&fill, &replace, &dirty]
        .iter()
        .map(|t| t.counters.staging_buffers_created)
        .chain(
            shared
                .iter()
                .map(|s| s.timing.counters.staging_buffers_created),
        )
        .sum();
    println!(
        "\nstaging buffers created: {staging_before} before the timed loops, {staging_after} \
         after ({timed_staging} created inside timed loops)"
    );

    // ---- summary --------------------------------------------------------------------------
    let mut v = Verdicts {
        lines: Vec::new(),
        failed: 0,
    };
    let full_ratio = t_bare_fill.as_secs_f64() / t_sluice_fill.as_secs_f64();
    v.judge(
        "a) full update throughput, sluice / bare wgpu",
        format!("{full_ratio:.3}"),
        &format!(">= {FULL_THROUGHPUT_TARGET}"),
        full_ratio >= FULL_THROUGHPUT_TARGET,
    );
    v.judge(
        "a) bytes uploaded per full-update frame",
        format!("{fill_bytes:.0}"),
        &format!("== {FULL_BYTES}"),
        fill_bytes == FULL_BYTES as f64,
    );
    v.info(
        "a) replace from prepared array, sluice / bare",
        format!(
            "{:.3}",
            t_bare_write.as_secs_f64() / t_sluice_write.as_secs_f64()
        ),
        "(sluice copies it in)",
    );
    let region_ratio = t_region.as_secs_f64() / t_sluice_fill.as_secs_f64();
    v.judge(
        "b) dirty region time / full update time",
        format!("{region_ratio:.4}"),
        &format!("<= {REGION_TIME_TARGET}"),
        region_ratio <= REGION_TIME_TARGET,
    );
    let upload_ratio = t_upload_region.as_secs_f64() / t_upload_full.as_secs_f64();
    v.judge(
        "b') dirty region upload / full upload (no draw, pipelined)",
        format!("{upload_ratio:.4}"),
        &format!("<= {REGION_TIME_TARGET}"),
        upload_ratio <= REGION_TIME_TARGET,
    );
    let drawn_ratio = t_drawn_region.as_secs_f64() / t_drawn_full.as_secs_f64();
    v.judge(
        "b'') dirty region frame / full update frame (in flight)",
        format!("{drawn_ratio:.4}"),
        &format!("<= {REGION_TIME_TARGET}"),
        drawn_ratio <= REGION_TIME_TARGET,
    );
    v.info(
        "b) same, whole target redrawn / full update time",
        format!(
            "{:.4}",
            t_region_whole.as_secs_f64() / t_sluice_fill.as_secs_f64()
        ),
        "(no partial redraw)",
    );
    v.info(
        "b) whole-target render-only time / full update time",
        format!(
            "{:.4}",
            t_render.as_secs_f64() / t_sluice_fill.as_secs_f64()
        ),
        "(floor without partial redraw)",
    );
    v.info(
        "b) whole-target ratio above that floor",
        format!(
            "{:.4}",
            (t_region_whole.as_secs_f64() - t_render.as_secs_f64()).max(0.0)
                / (t_sluice_fill.as_secs_f64() - t_render.as_secs_f64())
        ),
        "(whole-target frame, upload part)",
    );
    v.judge(
        "b) bytes uploaded per region frame",
        format!("{region_bytes:.0}"),
        &format!("== {REGION_BYTES}"),
        region_bytes == REGION_BYTES as f64,
    );
    let (one, eight) = (&shared[0], &shared[1]);
    let (b1, _) = per(&one.timing.counters);
    let (b8, _) = per(&eight.timing.counters);
    v.judge(
        "c) textures alive, 1 image / 8 images",
        format!("{} / {}", one.textures_alive, eight.textures_alive),
        "1 / 1",
        one.textures_alive == 1 && eight.textures_alive == 1,
    );
    v.judge(
        "c) resident bytes, 1 image / 8 images",
        format!(
            "{} / {} MiB",
            one.resident_bytes >> 20,
            eight.resident_bytes >> 20
        ),
        "equal, 64 MiB",
        one.resident_bytes == eight.resident_bytes && one.resident_bytes == FULL_BYTES as u64,
    );
    v.judge(
        "c) bytes uploaded per frame, 1 image / 8 images",
        format!(
            "{:.0} / {:.0} MiB",
            b1 / (1 << 20) as f64,
            b8 / (1 << 20) as f64
        ),
        "equal",
        b1 == b8 && b1 == FULL_BYTES as f64,
    );
    v.info(
        "c) time with 8 images / time with 1",
        format!(
            "{:.3}",
            eight.timing.medians[0].as_secs_f64() / one.timing.medians[0].as_secs_f64()
        ),
        "(about 1 when shared)",
    );
    v.judge(
        "staging buffers created inside timed loops",
        timed_staging.to_string(),
        "== 0 (ring reused)",
        timed_staging == 0,
    );
    v.info(
        "staging buffers created in b'), b'') loops",
        uploads.counters.staging_buffers_created.to_string(),
        "16 in flight",
    );

    v.finish(
        &format!(
            "{} ({:?}), {iters} timed iterations, {:.1} s in all",
            info.name,
            info.backend,
            started.elapsed().as_secs_f64()
        ),
        strict,
    );
    Ok(())
}
