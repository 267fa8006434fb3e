//! Volume and mesh benchmarks (`cargo bench --bench visuals`, or `just bench`).
//!
//! Every judged figure is a ratio against a ceiling measured in the same run, on the same
//! device:
//!
//! - **a) Volume upload**: for 256^3 and 512^3 u8 volumes (one MIP `Volume`, `OrbitCamera::fit`,
//!   512 x 512 target), filling the whole source (`ArraySource::update`) and drawing it,
//!   against the bare wgpu path that fills a host `Vec<u8>` of the same bytes,
//!   `queue.write_texture`s it into an R8Uint 3-D texture of its own and draws the same
//!   (unchanged) scene. Throughput ratio `baseline / sluice`, target >= 0.9. The render-only
//!   time (nothing changed) is reported beside it: it is the floor of both.
//! - **b) Mesh positions**: 1,000,002 vertices (333,334 consecutive triangles, no indices,
//!   flat shading so nothing is derived on the CPU) in a 12 MB f32 x 3 positions source.
//!   Updating every position and drawing, against filling a `Vec<f32>` alike,
//!   `queue.write_buffer` into a STORAGE | COPY_DST buffer of its own and drawing the same
//!   (unchanged) scene: ratio `baseline / sluice`, target >= 0.9. Then 1% of the vertices
//!   (10,000, starting on the 1024-vertex chunk grid, moving every frame) changed: the
//!   update's time against the full update's, without drawing (b'), target <= 0.03, and the
//!   bytes uploaded per frame (the ten 1024-vertex chunks those 10,000 vertices touch). The
//!   same ratio with a draw per frame is reported, not judged: the 1M-vertex draw is most of
//!   such a frame (its render-only floor is printed beside it), for the bare path as well.
//! - **c) Ray-march cost** (reported, not judged): the 512^3 u8 volume (a radial blob)
//!   already on the GPU, drawn into a 1024 x 1024 target for MIP, translucent
//!   (attenuation 0.05) and isosurface modes, half-voxel steps, linear interpolation:
//!   milliseconds per frame and pixels per second over the whole target (rays that miss the
//!   volume are counted too).
//!
//! Each iteration ends with `Renderer::wait_idle`, so GPU work is counted. After warm-up
//! iterations, `SLUICE_BENCH_ITERS` (default 15) timed iterations run; medians are reported.
//! sluice and baseline iterations alternate, so drift affects both alike.
//! `SLUICE_BENCH_WARMUP` (default 3) sets the warm-up count; `SLUICE_BENCH_STRICT=1` makes a
//! missed target exit with status 1. The adapter follows `SLUICE_BACKEND` / `SLUICE_ADAPTER`.
//!
//! Ray marching is slow on a CPU driver (lavapipe ray-marches some 10^7 samples a second), so
//! part c) runs `SLUICE_BENCH_RAYMARCH_ITERS` (default 3) timed iterations after at most one
//! warm-up, `SLUICE_BENCH_RAYMARCH_SIZE` sets its target side and `SLUICE_BENCH_MAX_VOLUME`
//! caps the volume sides of a) and c). Their defaults are 1024 and 512 on a GPU, and 256 and
//! 64 on a CPU adapter (which keeps the whole run to a couple of minutes on two cores); the
//! sizes used are printed.

use std::sync::Arc;
use std::time::{Duration, Instant};

mod common;

use common::{env_usize, gibs, measure, ms, print_table, Res, Row, Step, Verdicts};
use sluice::prelude::*;
use sluice::{wgpu, Counters, Mesh, OrbitCamera, RenderTarget, Shading};
use sluice::{Volume, VolumeMode};

/// Volume sides of part a) (before `SLUICE_BENCH_MAX_VOLUME`).
const VOLUME_SIDES: [usize; 2] = [256, 512];
/// Side of the render target of parts a) and b).
const TARGET_SIDE: u32 = 512;
/// Default side of the render target of part c).
const RAYMARCH_SIDE: usize = 1024;
/// Default cap on volume sides on a CPU adapter (lavapipe).
const CPU_MAX_VOLUME: usize = 64;
/// Default side of the render target of part c) on a CPU adapter.
const CPU_RAYMARCH_SIDE: usize = 256;
/// Vertices of the mesh of part b): a multiple of 3 (consecutive triangles).
const MESH_VERTICES: usize = 1_000_002;
/// Bytes of the mesh positions (f32 x 3).
const MESH_BYTES: usize = MESH_VERTICES * 3 * 4;
/// Vertices changed by the 1% update.
const PARTIAL_VERTICES: usize = 10_000;
/// The default chunk of 1-D sources, in elements.
const VERTEX_CHUNK: usize = 1024;
/// Triangle cells per row of the mesh grid (two triangles per cell).
const MESH_COLUMNS: usize = 409;
/// Attenuation of the translucent mode of part c).
const ATTENUATION: f32 = 0.05;
/// Iso threshold of part c), data units: the blob's value at about a quarter of the side
/// from the centre.
const ISO_THRESHOLD: f64 = 128.0;

const FULL_THROUGHPUT_TARGET: f64 = 0.9;
const PARTIAL_TIME_TARGET: f64 = 0.03;

/// `a / b` of two durations.
fn ratio(a: Duration, b: Duration) -> f64 {
    a.as_secs_f64() / b.as_secs_f64()
}

/// `(part - floor) / (full - floor)`: the share of the part above the render-only floor.
fn above_floor(part: Duration, full: Duration, floor: Duration) -> f64 {
    (part.as_secs_f64() - floor.as_secs_f64()).max(0.0) / (full.as_secs_f64() - floor.as_secs_f64())
}

/// `(bare - floor) / (sluice - floor)`, or "n/a" where the render-only floor is not below both
/// (the draw hides the upload).
fn above_render(bare: Duration, sluice: Duration, floor: Duration) -> String {
    if bare <= floor || sluice <= floor {
        return "n/a".into();
    }
    format!("{:.3}", ratio(bare - floor, sluice - floor))
}

/// Millions of pixels a second, `pixels` in `d`, with three significant digits or so.
fn mpixels(pixels: f64, d: Duration) -> String {
    let m = pixels / d.as_secs_f64() / 1e6;
    if m >= 100.0 {
        format!("{m:.0} Mpixels/s")
    } else if m >= 1.0 {
        format!("{m:.2} Mpixels/s")
    } else {
        format!("{m:.4} Mpixels/s")
    }
}

/// The fill value of iteration `i`: never the initial zero, different from the last.
fn fill_value(i: usize) -> u8 {
    (i % 251 + 1) as u8
}

/// The position offset of iteration `i`: alternating, so the mesh does not drift away.
fn offset(i: usize) -> f32 {
    if i.is_multiple_of(2) {
        0.25
    } else {
        -0.25
    }
}

/// Renders one frame and waits for the GPU. A frame that should upload nothing (baselines,
/// render-only frames) and did is an error: its time would not be the ceiling it stands for.
fn frame(
    renderer: &mut Renderer,
    scene: &Scene,
    camera: &dyn Camera,
    target: &RenderTarget,
    expect_nothing: bool,
) -> Res<()> {
    let stats = renderer.render(scene, camera, target)?;
    renderer.wait_idle()?;
    if stats.uploads_pending {
        return Err("a frame left uploads pending (upload budget set?)".into());
    }
    if expect_nothing && stats.bytes_uploaded != 0 {
        return Err(format!(
            "a frame that should upload nothing uploaded {} bytes",
            stats.bytes_uploaded
        )
        .into());
    }
    Ok(())
}

/// A camera fitting the cube `0..n` of a volume, from a little to the side and above.
fn volume_camera(n: usize) -> OrbitCamera {
    OrbitCamera::fit(Vec3::ZERO, Vec3::splat(n as f32), 30.0, 20.0)
}

/// The positions of the benchmark mesh: consecutive triangles, two per cell of a grid
/// `MESH_COLUMNS` cells wide, on a gentle wave. Returns them with their bounding box.
fn mesh_positions() -> (Array2<f32>, Vec3, Vec3) {
    let positions = Array2::from_shape_fn((MESH_VERTICES, 3), |(v, c)| {
        let t = v / 3;
        let cell = t / 2;
        let (cx, cy) = ((cell % MESH_COLUMNS) as f32, (cell / MESH_COLUMNS) as f32);
        // Corners of the cell's lower-left and upper-right triangles.
        const CORNERS: [[[f32; 2]; 3]; 2] = [
            [[0.0, 0.0], [1.0, 0.0], [0.0, 1.0]],
            [[1.0, 0.0], [1.0, 1.0], [0.0, 1.0]],
        ];
        let [dx, dy] = CORNERS[t % 2][v % 3];
        let (x, y) = (cx + dx, cy + dy);
        match c {
            0 => x,
            1 => y,
            _ => 4.0 * (x * 0.05).sin() * (y * 0.04).cos(),
        }
    });
    let rows = (MESH_VERTICES / 3).div_ceil(2).div_ceil(MESH_COLUMNS);
    let min = Vec3::new(0.0, 0.0, -4.5);
    let max = Vec3::new(MESH_COLUMNS as f32 + 1.0, rows as f32 + 1.0, 4.5);
    (positions, min, max)
}

/// A 3-D u8 blob: 255 at the centre of the cube, falling linearly to 0 at 0.45 of its side.
fn blob(n: usize) -> Array3<u8> {
    let mut data = Array3::<u8>::zeros((n, n, n));
    let c = n as f32 * 0.5;
    let r = n as f32 * 0.45;
    for ((z, y, x), v) in data.indexed_iter_mut() {
        let d = Vec3::new(x as f32 + 0.5 - c, y as f32 + 0.5 - c, z as f32 + 0.5 - c).length();
        *v = (255.0 * (1.0 - d / r)).clamp(0.0, 255.0) as u8;
    }
    data
}

/// Figures of part a) for one volume side.
struct VolumeRun {
    side: usize,
    sluice: Duration,
    bare: Duration,
    render: Duration,
    bytes_per_frame: f64,
    copies_per_frame: f64,
    staging_created: u64,
}

/// Part a) for one side: update(fill) + render against fill + write_texture + render.
fn volume_upload(renderer: &mut Renderer, n: usize, warmup: usize, iters: usize) -> Res<VolumeRun> {
    let bytes = n * n * n;
    let source = Arc::new(ArraySource::new(Array3::<u8>::zeros((n, n, n)))?);
    let mut scene = Scene::new();
    scene.add(Volume::new(source.clone()).with_mode(VolumeMode::Mip)?);
    let camera = volume_camera(n);
    let target = renderer.create_target(TARGET_SIDE, TARGET_SIDE)?;
    let full = Region::new(&[0, 0, 0], &[n, n, n]).expect("3 axes each");
    frame(renderer, &scene, &camera, &target, false)?;

    let extent = wgpu::Extent3d {
        width: n as u32,
        height: n as u32,
        depth_or_array_layers: n as u32,
    };
    let bare = renderer.device().create_texture(&wgpu::TextureDescriptor {
        label: Some("bench baseline volume"),
        size: extent,
        mip_level_count: 1,
        sample_count: 1,
        dimension: wgpu::TextureDimension::D3,
        format: wgpu::TextureFormat::R8Uint,
        usage: wgpu::TextureUsages::COPY_DST | wgpu::TextureUsages::TEXTURE_BINDING,
        view_formats: &[],
    });
    let bare_layout = wgpu::TexelCopyBufferLayout {
        offset: 0,
        bytes_per_row: Some(n as u32),
        rows_per_image: Some(n as u32),
    };
    let mut host = vec![0u8; bytes];

    let mut sluice_fill = |r: &mut Renderer, i: usize| -> Res<Duration> {
        let k = fill_value(i);
        let t = Instant::now();
        source.update::<u8>(full, |mut v| v.fill(k))?;
        frame(r, &scene, &camera, &target, false)?;
        Ok(t.elapsed())
    };
    let mut bare_fill = |r: &mut Renderer, i: usize| -> Res<Duration> {
        let k = fill_value(i);
        let t = Instant::now();
        host.fill(k);
        r.queue()
            .write_texture(bare.as_image_copy(), &host, bare_layout, extent);
        frame(r, &scene, &camera, &target, true)?;
        Ok(t.elapsed())
    };
    let mut render_only = |r: &mut Renderer, _: usize| -> Res<Duration> {
        let t = Instant::now();
        frame(r, &scene, &camera, &target, true)?;
        Ok(t.elapsed())
    };
    let timing = measure(
        renderer,
        warmup,
        iters,
        &mut [&mut sluice_fill, &mut bare_fill, &mut render_only],
    )?;
    drop(scene);
    bare.destroy();
    // Frees the volume's texture: the next side starts from nothing.
    renderer.collect_garbage();
    let frames = iters as f64;
    let [sluice, bare, render] = timing.medians[..] else {
        unreachable!()
    };
    Ok(VolumeRun {
        side: n,
        sluice,
        bare,
        render,
        bytes_per_frame: timing.counters.bytes_uploaded as f64 / frames,
        copies_per_frame: timing.counters.copies_issued as f64 / frames,
        staging_created: timing.counters.staging_buffers_created,
    })
}

fn main() -> Res<()> {
    // `cargo bench` passes `--bench` (and a filter, if given): nothing here is selectable.
    let iters = env_usize("SLUICE_BENCH_ITERS", 15)?.max(1);
    let warmup = env_usize("SLUICE_BENCH_WARMUP", 3)?;
    let strict = std::env::var("SLUICE_BENCH_STRICT").is_ok_and(|v| v == "1");
    let raymarch_iters = env_usize("SLUICE_BENCH_RAYMARCH_ITERS", 3)?.max(1);
    let raymarch_warmup = warmup.min(1);

    let started = Instant::now();
    let mut renderer = Renderer::with_options(RendererOptions::from_env()?)?;
    let info = renderer.adapter_info().clone();
    println!("sluice visuals bench");
    println!(
        "adapter: {} ({:?}, {:?}), driver: {} {}",
        info.name, info.backend, info.device_type, info.driver, info.driver_info
    );
    // A CPU driver ray-marches some 10^7 samples a second: full sizes would take an hour.
    let cpu = info.device_type == wgpu::DeviceType::Cpu;
    let (default_volume, default_raymarch) = if cpu {
        (CPU_MAX_VOLUME, CPU_RAYMARCH_SIDE)
    } else {
        (VOLUME_SIDES[1], RAYMARCH_SIDE)
    };
    let max_volume = env_usize("SLUICE_BENCH_MAX_VOLUME", default_volume)?.max(1);
    let raymarch_side = env_usize("SLUICE_BENCH_RAYMARCH_SIZE", default_raymarch)?.max(1) as u32;
    if cpu {
        println!(
            "CPU adapter: volume sides capped at {max_volume}, ray-march target \
             {raymarch_side}x{raymarch_side} (defaults {CPU_MAX_VOLUME} and \
             {CPU_RAYMARCH_SIDE} on CPU adapters, {} and {RAYMARCH_SIDE} on GPUs)",
            VOLUME_SIDES[1]
        );
    }
    let mut sides: Vec<usize> = VOLUME_SIDES.iter().map(|&s| s.min(max_volume)).collect();
    sides.dedup();
    let raymarch_volume = *sides.last().expect("at least one side");
    let side_list: Vec<String> = sides.iter().map(|s| format!("{s}^3")).collect();
    println!(
        "a) u8 volumes {} at {TARGET_SIDE}x{TARGET_SIDE}; b) mesh of {MESH_VERTICES} vertices \
         ({:.1} MB positions) at {TARGET_SIDE}x{TARGET_SIDE}; {warmup} warm-up + {iters} timed \
         iterations, medians",
        side_list.join(" and "),
        MESH_BYTES as f64 / 1e6
    );
    println!(
        "c) ray march of {raymarch_volume}^3 u8 at {raymarch_side}x{raymarch_side}, \
         {raymarch_warmup} warm-up + {raymarch_iters} timed iterations \
         (SLUICE_BENCH_MAX_VOLUME, SLUICE_BENCH_RAYMARCH_SIZE, SLUICE_BENCH_RAYMARCH_ITERS)"
    );

    // ---- a) volume upload against bare write_texture ------------------------------------
    let mut volumes = Vec::new();
    for &n in &sides {
        println!("\nrunning a) volume upload {n}^3 ...");
        volumes.push(volume_upload(&mut renderer, n, warmup, iters)?);
    }
    let rows: Vec<Row> = volumes
        .iter()
        .flat_map(|v| {
            let bytes = v.side.pow(3);
            [
                Row {
                    label: format!("{}^3 sluice: update(fill) + render", v.side),
                    median: v.sluice,
                    bytes_per_frame: v.bytes_per_frame,
                    copies_per_frame: v.copies_per_frame,
                    note: format!("{:.2} GiB/s", gibs(bytes, v.sluice)),
                },
                Row {
                    label: format!("{}^3 baseline: Vec fill + write_texture + render", v.side),
                    median: v.bare,
                    bytes_per_frame: 0.0,
                    copies_per_frame: 0.0,
                    note: format!("{:.2} GiB/s", gibs(bytes, v.bare)),
                },
                Row {
                    label: format!("{}^3 render only (nothing changed)", v.side),
                    median: v.render,
                    bytes_per_frame: 0.0,
                    copies_per_frame: 0.0,
                    note: "floor of both".into(),
                },
            ]
        })
        .collect();
    print_table(
        &format!("a) volume upload, u8, one MIP volume, target {TARGET_SIDE}x{TARGET_SIDE}"),
        &rows,
    );

    // ---- b) mesh positions ----------------------------------------------------------------
    println!("\nrunning b) mesh positions ...");
    let (initial, min, max) = mesh_positions();
    let mut host: Vec<f32> = initial
        .as_slice()
        .ok_or("positions are contiguous")?
        .to_vec();
    let positions = Arc::new(ArraySource::with_channels(initial)?);
    let mut scene = Scene::new();
    scene.add(Mesh::new(positions.clone()).with_shading(Shading::Flat));
    let camera = OrbitCamera::fit(min, max, 15.0, 15.0);
    let target = renderer.create_target(TARGET_SIDE, TARGET_SIDE)?;
    frame(&mut renderer, &scene, &camera, &target, false)?;
    let bare = renderer.device().create_buffer(&wgpu::BufferDescriptor {
        label: Some("bench baseline positions"),
        size: MESH_BYTES as u64,
        usage: wgpu::BufferUsages::STORAGE | wgpu::BufferUsages::COPY_DST,
        mapped_at_creation: false,
    });
    let all = Region::d1(0, MESH_VERTICES);
    let mut sluice_full = |r: &mut Renderer, i: usize| -> Res<Duration> {
        let d = offset(i);
        let t = Instant::now();
        positions.update::<f32>(all, |mut v| v.map_inplace(|p| *p += d))?;
        frame(r, &scene, &camera, &target, false)?;
        Ok(t.elapsed())
    };
    let mut bare_full = |r: &mut Renderer, i: usize| -> Res<Duration> {
        let d = offset(i);
        let t = Instant::now();
        host.iter_mut().for_each(|p| *p += d);
        r.queue()
            .write_buffer(&bare, 0, bytemuck::cast_slice(&host));
        frame(r, &scene, &camera, &target, true)?;
        Ok(t.elapsed())
    };
    let mut render_only = |r: &mut Renderer, _: usize| -> Res<Duration> {
        let t = Instant::now();
        frame(r, &scene, &camera, &target, true)?;
        Ok(t.elapsed())
    };
    let mesh_full = measure(
        &mut renderer,
        warmup,
        iters,
        &mut [&mut sluice_full, &mut bare_full, &mut render_only],
    )?;

    // 1%: 10,000 vertices from a chunk-aligned start that moves every frame.
    let slots = (MESH_VERTICES - PARTIAL_VERTICES) / VERTEX_CHUNK + 1;
    let start_of = |i: usize| (i * 7 % slots) * VERTEX_CHUNK;
    let partial_expected = |start: usize| {
        let first = start / VERTEX_CHUNK * VERTEX_CHUNK;
        let end =
            ((start + PARTIAL_VERTICES).div_ceil(VERTEX_CHUNK) * VERTEX_CHUNK).min(MESH_VERTICES);
        (end - first) * 12
    };
    let partial_bytes = partial_expected(start_of(0));
    let mut sluice_partial = |r: &mut Renderer, i: usize| -> Res<Duration> {
        let d = offset(i);
        let region = Region::d1(start_of(i), PARTIAL_VERTICES);
        let t = Instant::now();
        positions.update::<f32>(region, |mut v| v.map_inplace(|p| *p += d))?;
        frame(r, &scene, &camera, &target, false)?;
        Ok(t.elapsed())
    };
    let mesh_partial = measure(&mut renderer, warmup, iters, &mut [&mut sluice_partial])?;

    // b') the same updates without drawing: `Renderer::upload` alone, PIPELINED updates in a
    // row and one wait (as an application streaming changes runs), against the bare
    // `write_buffer` of the same bytes the same way. Times are per update.
    const PIPELINED: usize = 16;
    let mut host_partial = host.clone();
    let mut upload_full = |r: &mut Renderer, i: usize| -> Res<Duration> {
        let t = Instant::now();
        for j in 0..PIPELINED {
            let d = offset(i * PIPELINED + j);
            positions.update::<f32>(all, |mut v| v.map_inplace(|p| *p += d))?;
            r.upload(&scene)?;
        }
        r.wait_idle()?;
        Ok(t.elapsed() / PIPELINED as u32)
    };
    let mut bare_upload = |r: &mut Renderer, i: usize| -> Res<Duration> {
        let t = Instant::now();
        for j in 0..PIPELINED {
            let d = offset(i * PIPELINED + j);
            host.iter_mut().for_each(|p| *p += d);
            r.queue()
                .write_buffer(&bare, 0, bytemuck::cast_slice(&host));
            r.queue().submit([]);
        }
        r.wait_idle()?;
        Ok(t.elapsed() / PIPELINED as u32)
    };
    let mut upload_partial = |r: &mut Renderer, i: usize| -> Res<Duration> {
        let t = Instant::now();
        for j in 0..PIPELINED {
            let n = i * PIPELINED + j;
            let d = offset(n);
            let region = Region::d1(start_of(n), PARTIAL_VERTICES);
            positions.update::<f32>(region, |mut v| v.map_inplace(|p| *p += d))?;
            r.upload(&scene)?;
        }
        r.wait_idle()?;
        Ok(t.elapsed() / PIPELINED as u32)
    };
    // The bare path for the same 1%: the vertices updated in a host copy, `write_buffer` of
    // exactly their bytes, a submit. The least a 1% update can cost on this machine.
    let mut bare_partial = |r: &mut Renderer, i: usize| -> Res<Duration> {
        let t = Instant::now();
        for j in 0..PIPELINED {
            let n = i * PIPELINED + j;
            let d = offset(n);
            let range = start_of(n) * 3..(start_of(n) + PARTIAL_VERTICES) * 3;
            host_partial[range.clone()].iter_mut().for_each(|p| *p += d);
            r.queue().write_buffer(
                &bare,
                (range.start * 4) as u64,
                bytemuck::cast_slice(&host_partial[range]),
            );
            r.queue().submit([]);
        }
        r.wait_idle()?;
        Ok(t.elapsed() / PIPELINED as u32)
    };
    let uploads = measure(
        &mut renderer,
        warmup,
        iters,
        &mut [
            &mut upload_full,
            &mut bare_upload,
            &mut upload_partial,
            &mut bare_partial,
        ],
    )?;
    let [t_up_full, t_up_bare, t_up_partial, t_up_bare_partial] = uploads.medians[..] else {
        unreachable!()
    };
    println!(
        "\nb') mesh positions without drawing: 16 x (change + Renderer::upload), one wait; per update\n  \
         sluice full {:.3} ms, bare write_buffer {:.3} ms, sluice 1% {:.3} ms, bare 1% {:.3} ms",
        ms(t_up_full),
        ms(t_up_bare),
        ms(t_up_partial),
        ms(t_up_bare_partial)
    );
    drop(scene);
    bare.destroy();
    renderer.collect_garbage();

    let frames = iters as f64;
    let per = |c: &Counters| {
        (
            c.bytes_uploaded as f64 / frames,
            c.copies_issued as f64 / frames,
        )
    };
    let [t_mesh_sluice, t_mesh_bare, t_mesh_render] = mesh_full.medians[..] else {
        unreachable!()
    };
    let t_partial = mesh_partial.medians[0];
    let (full_bytes, full_copies) = per(&mesh_full.counters);
    let (part_bytes, part_copies) = per(&mesh_partial.counters);
    let derived =
        mesh_full.counters.derived_bytes_uploaded + mesh_partial.counters.derived_bytes_uploaded;
    print_table(
        &format!(
            "b) mesh positions, {MESH_VERTICES} vertices f32 x 3 ({MESH_BYTES} B), flat shading, \
             target {TARGET_SIDE}x{TARGET_SIDE}"
        ),
        &[
            Row {
                label: "sluice: update(all positions) + render".into(),
                median: t_mesh_sluice,
                bytes_per_frame: full_bytes,
                copies_per_frame: full_copies,
                note: format!("{:.2} GiB/s", gibs(MESH_BYTES, t_mesh_sluice)),
            },
            Row {
                label: "baseline: Vec update + write_buffer + render".into(),
                median: t_mesh_bare,
                bytes_per_frame: 0.0,
                copies_per_frame: 0.0,
                note: format!("{:.2} GiB/s", gibs(MESH_BYTES, t_mesh_bare)),
            },
            Row {
                label: "render only (nothing changed)".into(),
                median: t_mesh_render,
                bytes_per_frame: 0.0,
                copies_per_frame: 0.0,
                note: "floor of every frame here".into(),
            },
            Row {
                label: format!("sluice: update({PARTIAL_VERTICES} vertices, 1%) + render"),
                median: t_partial,
                bytes_per_frame: part_bytes,
                copies_per_frame: part_copies,
                note: format!(
                    "{:.4} of the full update, {:.3} ms above render only",
                    ratio(t_partial, t_mesh_sluice),
                    ms(t_partial) - ms(t_mesh_render)
                ),
            },
        ],
    );

    // ---- c) ray-march cost ------------------------------------------------------------------
    println!("\nrunning c) ray march {raymarch_volume}^3 at {raymarch_side}x{raymarch_side} ...");
    let n = raymarch_volume;
    let source = Arc::new(ArraySource::new(blob(n))?);
    let modes = [
        ("MIP", VolumeMode::Mip),
        (
            "translucent, attenuation 0.05",
            VolumeMode::Translucent {
                attenuation: ATTENUATION,
            },
        ),
        (
            "iso, threshold 128",
            VolumeMode::Iso {
                threshold: ISO_THRESHOLD,
            },
        ),
    ];
    // One scene per mode, all showing one source: one texture, uploaded once.
    let scenes = modes
        .iter()
        .map(|&(_, mode)| -> Res<Scene> {
            let mut scene = Scene::new();
            scene.add(
                Volume::new(source.clone())
                    .with_mode(mode)?
                    .with_colormap(Colormap::Viridis)
                    .with_step(0.5)?
                    .with_interpolation(Interpolation::Linear),
            );
            Ok(scene)
        })
        .collect::<Res<Vec<Scene>>>()?;
    let camera = volume_camera(n);
    let target = renderer.create_target(raymarch_side, raymarch_side)?;
    for scene in &scenes {
        frame(&mut renderer, scene, &camera, &target, false)?;
    }
    let resident = renderer.counters();
    let mut steps: Vec<Box<Step<'_>>> = scenes
        .iter()
        .map(|scene| {
            let camera = &camera;
            let target = &target;
            Box::new(move |r: &mut Renderer, _: usize| -> Res<Duration> {
                let t = Instant::now();
                frame(r, scene, camera, target, true)?;
                Ok(t.elapsed())
            }) as Box<Step<'_>>
        })
        .collect();
    let mut step_refs: Vec<&mut Step<'_>> = steps.iter_mut().map(|s| &mut **s).collect();
    let raymarch = measure(
        &mut renderer,
        raymarch_warmup,
        raymarch_iters,
        &mut step_refs,
    )?;
    drop(step_refs);
    drop(steps);
    let pixels = raymarch_side as f64 * raymarch_side as f64;
    let rows: Vec<Row> = modes
        .iter()
        .zip(&raymarch.medians)
        .map(|(&(name, _), &t)| Row {
            label: format!("render only: {name}"),
            median: t,
            bytes_per_frame: 0.0,
            copies_per_frame: 0.0,
            note: mpixels(pixels, t),
        })
        .collect();
    print_table(
        &format!(
            "c) ray march, {n}^3 u8 blob on the GPU ({} texture(s), {} MiB resident), \
             target {raymarch_side}x{raymarch_side}, step 0.5, linear",
            resident.textures_alive,
            resident.resident_bytes >> 20
        ),
        &rows,
    );
    drop(scenes);
    renderer.collect_garbage();

    let timed_staging: u64 = volumes.iter().map(|v| v.staging_created).sum::<u64>()
        + mesh_full.counters.staging_buffers_created
        + mesh_partial.counters.staging_buffers_created;
    println!(
        "\nstaging buffers created: {} in all ({timed_staging} inside timed upload loops)",
        renderer.counters().staging_buffers_created
    );

    // ---- summary --------------------------------------------------------------------------
    let mut v = Verdicts {
        lines: Vec::new(),
        failed: 0,
    };
    for run in &volumes {
        let n = run.side;
        let r = ratio(run.bare, run.sluice);
        v.judge(
            &format!("a) {n}^3 upload + render throughput, sluice / bare"),
            format!("{r:.3}"),
            &format!(">= {FULL_THROUGHPUT_TARGET}"),
            r >= FULL_THROUGHPUT_TARGET,
        );
        v.judge(
            &format!("a) {n}^3 bytes uploaded per frame"),
            format!("{:.0}", run.bytes_per_frame),
            &format!("== {}", n.pow(3)),
            run.bytes_per_frame == n.pow(3) as f64,
        );
        v.info(
            &format!("a) {n}^3 render-only time (MIP, {TARGET_SIDE}^2)"),
            format!("{:.3} ms", ms(run.render)),
            &format!("{:.3} of the sluice frame", ratio(run.render, run.sluice)),
        );
        v.info(
            &format!("a) {n}^3 throughput above the render-only floor"),
            above_render(run.bare, run.sluice, run.render),
            "(upload part alone)",
        );
    }
    let mesh_ratio = ratio(t_mesh_bare, t_mesh_sluice);
    v.judge(
        "b) mesh positions update + render, sluice / bare",
        format!("{mesh_ratio:.3}"),
        &format!(">= {FULL_THROUGHPUT_TARGET}"),
        mesh_ratio >= FULL_THROUGHPUT_TARGET,
    );
    v.judge(
        "b) bytes uploaded per full-update frame",
        format!("{full_bytes:.0}"),
        &format!("== {MESH_BYTES}"),
        full_bytes == MESH_BYTES as f64,
    );
    v.judge(
        "b) derived bytes uploaded (flat shading)",
        derived.to_string(),
        "== 0",
        derived == 0,
    );
    let part_ratio = ratio(t_partial, t_mesh_sluice);
    let up_ratio = t_up_bare.as_secs_f64() / t_up_full.as_secs_f64();
    v.judge(
        "b') positions update (no draw), sluice / bare write_buffer",
        format!("{up_ratio:.3}"),
        ">= 0.9",
        up_ratio >= 0.9,
    );
    let up_partial = t_up_partial.as_secs_f64() / t_up_full.as_secs_f64();
    v.judge(
        "b') 1% of vertices / full update (no draw)",
        format!("{up_partial:.4}"),
        &format!("<= {PARTIAL_TIME_TARGET}"),
        up_partial <= PARTIAL_TIME_TARGET,
    );
    v.info(
        "b') same for the bare path (write_buffer of the 1%)",
        format!("{:.4}", ratio(t_up_bare_partial, t_up_bare)),
        "(what wgpu alone gets)",
    );
    v.info(
        "b') 1% update, sluice / bare",
        format!("{:.2}", ratio(t_up_partial, t_up_bare_partial)),
        "(time, lower is better)",
    );
    v.info(
        "b) 1% of vertices time / full update time, drawn",
        format!("{part_ratio:.4}"),
        "(draw-bound: floor below)",
    );
    v.info(
        "b) render-only time / full update time",
        format!("{:.4}", ratio(t_mesh_render, t_mesh_sluice)),
        "(floor of b)",
    );
    v.info(
        "b) same ratio above the render-only floor",
        format!(
            "{:.4}",
            above_floor(t_partial, t_mesh_sluice, t_mesh_render)
        ),
        "(upload part alone)",
    );
    v.judge(
        "b) bytes uploaded per 1% frame",
        format!("{part_bytes:.0}"),
        &format!(
            "== {partial_bytes} ({} chunks)",
            partial_bytes / 12 / VERTEX_CHUNK
        ),
        part_bytes == partial_bytes as f64,
    );
    v.info(
        "b) 1% frame bytes / full positions bytes",
        format!("{:.4}", part_bytes / MESH_BYTES as f64),
        "(10,000 of 1,000,002)",
    );
    for (&(name, _), &t) in modes.iter().zip(&raymarch.medians) {
        v.info(
            &format!("c) {n}^3 at {raymarch_side}^2, {name}"),
            format!("{:.2} ms", ms(t)),
            &mpixels(pixels, t),
        );
    }
    v.judge(
        "staging buffers created inside timed upload loops",
        timed_staging.to_string(),
        "== 0 (ring reused)",
        timed_staging == 0,
    );

    v.finish(
        &format!(
            "{} ({:?}), {iters} timed iterations ({raymarch_iters} for c), {:.1} s in all",
            info.name,
            info.backend,
            started.elapsed().as_secs_f64()
        ),
        strict,
    );
    Ok(())
}
