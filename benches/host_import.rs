//! Host-import upload benchmark (`cargo bench --bench host_import`; `SLUICE_BACKEND=vulkan`).
//!
//! A 4096 x 4096 RGBA8 image (64 MiB) is fully updated and drawn on a 64 x 64 target, then
//! the renderer waits for the GPU, two ways on one renderer, alternating so drift hits both:
//!
//! - **import**: a `HostImportSource` (`VK_EXT_external_memory_host`): the full update is one
//!   GPU copy from the user's pages into the texture.
//! - **staged**: an `ArraySource` of the same bytes: the normal path (a host copy into the
//!   staging ring, then the GPU copy).
//!
//! Each update changes one byte in place and marks everything changed, so both pay for a full
//! upload and neither for rewriting 64 MiB on the CPU. The ceiling is a bare 64 MiB host
//! `memcpy` (what one staging copy costs at best). Medians of `SLUICE_BENCH_ITERS` (default
//! 9) after `SLUICE_BENCH_WARMUP` (default 2); ratio staged / import (above 1: import faster).
//! Exits 0 with a note where the driver lacks the extension.

#[cfg(not(target_os = "linux"))]
fn main() {
    println!("this benchmark needs Linux (Vulkan host memory import)");
}

#[cfg(target_os = "linux")]
mod common;

#[cfg(target_os = "linux")]
fn main() -> Result<(), Box<dyn std::error::Error>> {
    use std::sync::Arc;
    use std::time::{Duration, Instant};

    use common::{env_usize, measure, median, ms, Step};
    use sluice::interop::{HostImportSource, Interop};
    use sluice::prelude::*;
    use sluice::{Renderer, RendererOptions};

    if std::env::args().any(|a| a == "--list") {
        return Ok(());
    }
    let warmup = env_usize("SLUICE_BENCH_WARMUP", 2)?;
    let iters = env_usize("SLUICE_BENCH_ITERS", 9)?;
    let side = 4096;
    let bytes = side * side * 4;
    let interop = Interop::with_options(&RendererOptions::from_env()?)?;
    let layout = Layout::new(Shape::d2(side, side)?, ElementType::U8, 4)?;
    let imported = Arc::new(HostImportSource::new(&interop, layout)?);
    if let Some(reason) = imported.fallback_reason() {
        println!("host import unavailable: {reason}");
        return Ok(());
    }
    imported.update(|b| b.iter_mut().enumerate().for_each(|(i, v)| *v = i as u8));
    let array = ndarray::Array3::<u8>::from_shape_fn((side, side, 4), |(y, x, c)| {
        ((y * side + x) * 4 + c) as u8
    });
    let staged = Arc::new(ArraySource::with_channels(array)?);

    let mut renderer = interop.renderer();
    renderer.set_upload_budget(None);
    let camera = PanZoomCamera::new(Vec2::new(side as f32 / 2.0, side as f32 / 2.0), 64.0);
    let target = renderer.create_target(64, 64)?;
    let mut import_scene = Scene::new();
    import_scene.add(Image::new(imported.clone()));
    let mut staged_scene = Scene::new();
    staged_scene.add(Image::new(staged.clone()));

    let frame = |r: &mut Renderer, scene: &Scene| -> common::Res<()> {
        let _ = r.render(scene, &camera, &target)?;
        r.wait_idle()?;
        Ok(())
    };
    let mut import_step = |r: &mut Renderer, i: usize| -> common::Res<Duration> {
        let t = Instant::now();
        imported.update(|b| b[0] = i as u8);
        let u = t.elapsed();
        frame(r, &import_scene)?;
        if std::env::var_os("SLUICE_BENCH_PARTS").is_some() {
            eprintln!(
                "import: update {:.2} ms, frame {:.2} ms",
                ms(u),
                ms(t.elapsed() - u)
            );
        }
        Ok(t.elapsed())
    };
    let mut staged_step = |r: &mut Renderer, i: usize| -> common::Res<Duration> {
        let t = Instant::now();
        staged.update::<u8>(Region::d2(0, 0, side, side), |mut v| {
            v[[0, 0, 0]] = i as u8;
        })?;
        frame(r, &staged_scene)?;
        Ok(t.elapsed())
    };
    let copies_before = imported.gpu_copies();
    let timing = measure(
        &mut renderer,
        warmup,
        iters,
        &mut [
            &mut import_step as &mut Step<'_>,
            &mut staged_step as &mut Step<'_>,
        ],
    )?;
    let (copies, copied) = imported.gpu_copies();
    let (import_t, staged_t) = (timing.medians[0], timing.medians[1]);

    let src = vec![1u8; bytes];
    let mut dst = vec![0u8; bytes];
    let mut memcpy = Vec::new();
    for _ in 0..iters {
        let t = Instant::now();
        dst.copy_from_slice(std::hint::black_box(&src));
        std::hint::black_box(&dst);
        memcpy.push(t.elapsed());
    }
    let memcpy = median(&memcpy);

    println!(
        "64 MiB full update + 64x64 draw + wait ({} iterations, {})",
        iters,
        interop.identity().name
    );
    println!(
        "  import (one GPU copy from the pages) {:8.2} ms",
        ms(import_t)
    );
    println!(
        "  staged (normal path)                 {:8.2} ms",
        ms(staged_t)
    );
    println!(
        "  ceiling: host memcpy of 64 MiB       {:8.2} ms",
        ms(memcpy)
    );
    println!(
        "  ratio staged / import                {:8.2}",
        ms(staged_t) / ms(import_t)
    );
    println!(
        "  import / memcpy                      {:8.2}",
        ms(import_t) / ms(memcpy)
    );
    println!(
        "  GPU copies from the pages: {} ({} MiB); staged bytes over the run: {} MiB",
        copies - copies_before.0,
        (copied - copies_before.1) >> 20,
        timing.counters.bytes_uploaded >> 20
    );
    Ok(())
}
