//! Host-import upload benchmark (`cargo bench --bench host_import`; `SLUICE_BACKEND=vulkan`).
//!
//! A 4096 x 4096 RGBA8 image (64 MiB) is fully updated and drawn on a 64 x 64 target, then
//! the renderer waits for the GPU, two ways on one renderer, alternating so drift hits both:
//!
//! - **import**: a `HostImportSource` (`VK_EXT_external_memory_host`): the full update is one
//!   GPU copy from the user's pages into the texture.
//! - **staged**: an `ArraySource` of the same bytes: the normal path (a host copy into the
//!   staging ring, then the GPU copy).
//! - **replace**: a `HostBufferSource` handed two prebuilt `HostBuffer`s (A, B) in turn, the
//!   other handed back each time: the data replaced by another array, with one GPU copy from
//!   the user's own pages and no host copy. Sampling in place is turned off for it, so that it
//!   stays the copy its ceiling measures.
//! - **in place**: the same with sampling in place (the default): on a CPU device (lavapipe)
//!   each buffer handed over is drawn from its own pages, nothing copied; elsewhere the same
//!   copy as replace. Its ratio is against replace.
//! - **bare copy** (the ceiling of replace): one wgpu `copy_buffer_to_texture` of 64 MiB from a
//!   buffer's imported pages (`HostBuffer::imported_buffer`) into a 4096^2 texture, submit,
//!   wait: what the replace path costs without sluice (no source, proxy or draw).
//!
//! Each import/staged update changes one byte in place and marks everything changed, so both
//! pay for a full upload and neither for rewriting 64 MiB on the CPU. The ceiling of those is a
//! bare 64 MiB host `memcpy` (what one staging copy costs at best). Medians of
//! `SLUICE_BENCH_ITERS` (default 9) after `SLUICE_BENCH_WARMUP` (default 2); ratios staged /
//! import and staged / replace (above 1: the GPU copy from the pages is faster), and replace /
//! bare copy (1 is the ceiling). Exits 0 with a note where the driver lacks the extension.

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
    use sluice::interop::{HostBuffer, HostBufferSource, HostImportSource, Interop};
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
    let layout = staged.layout();
    let replaced = Arc::new(HostBufferSource::new(
        &interop,
        layout.clone(),
        (0..bytes).map(|i| i as u8).collect::<Vec<u8>>(),
    )?);
    replaced.set_sample_in_place(false);
    let spare = std::cell::RefCell::new(Some(HostBuffer::from(
        (0..bytes).map(|i| (i as u8) ^ 0x55).collect::<Vec<u8>>(),
    )));
    let in_place = Arc::new(HostBufferSource::new(
        &interop,
        layout.clone(),
        (0..bytes).map(|i| i as u8).collect::<Vec<u8>>(),
    )?);
    let in_place_spare = std::cell::RefCell::new(Some(HostBuffer::from(
        (0..bytes).map(|i| (i as u8) ^ 0x55).collect::<Vec<u8>>(),
    )));
    // The ceiling: a bare copy from imported pages into a texture of the same size.
    let mut bare = HostBuffer::from(vec![7u8; bytes]);
    let (bare_buffer, bare_first) = bare.imported_buffer(&interop)?;
    let bare_texture = interop.device().create_texture(&wgpu::TextureDescriptor {
        label: Some("bare copy target"),
        size: wgpu::Extent3d {
            width: side as u32,
            height: side as u32,
            depth_or_array_layers: 1,
        },
        mip_level_count: 1,
        sample_count: 1,
        dimension: wgpu::TextureDimension::D2,
        format: wgpu::TextureFormat::Rgba8Uint,
        usage: wgpu::TextureUsages::COPY_DST | wgpu::TextureUsages::TEXTURE_BINDING,
        view_formats: &[],
    });

    let mut renderer = interop.renderer();
    renderer.set_upload_budget(None);
    let camera = PanZoomCamera::new(Vec2::new(side as f32 / 2.0, side as f32 / 2.0), 64.0);
    let target = renderer.create_target(64, 64)?;
    let mut import_scene = Scene::new();
    import_scene.add(Image::new(imported.clone()));
    let mut staged_scene = Scene::new();
    staged_scene.add(Image::new(staged.clone()));
    let mut replace_scene = Scene::new();
    replace_scene.add(Image::new(replaced.clone()));
    let mut in_place_scene = Scene::new();
    in_place_scene.add(Image::new(in_place.clone()));

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
    let mut replace_step = |r: &mut Renderer, _: usize| -> common::Res<Duration> {
        let buffer = spare.borrow_mut().take().ok_or("no spare buffer")?;
        let t = Instant::now();
        let back = replaced.replace(buffer).map_err(|e| e.to_string())?;
        frame(r, &replace_scene)?;
        let elapsed = t.elapsed();
        *spare.borrow_mut() = Some(back);
        Ok(elapsed)
    };
    let mut in_place_step = |r: &mut Renderer, _: usize| -> common::Res<Duration> {
        let buffer = in_place_spare
            .borrow_mut()
            .take()
            .ok_or("no spare buffer")?;
        let t = Instant::now();
        let back = in_place.replace(buffer).map_err(|e| e.to_string())?;
        frame(r, &in_place_scene)?;
        let elapsed = t.elapsed();
        *in_place_spare.borrow_mut() = Some(back);
        Ok(elapsed)
    };
    let mut bare_step = |_: &mut Renderer, _: usize| -> common::Res<Duration> {
        let t = Instant::now();
        let mut encoder = interop
            .device()
            .create_command_encoder(&wgpu::CommandEncoderDescriptor { label: None });
        encoder.copy_buffer_to_texture(
            wgpu::TexelCopyBufferInfo {
                buffer: &bare_buffer,
                layout: wgpu::TexelCopyBufferLayout {
                    offset: bare_first,
                    bytes_per_row: Some(side as u32 * 4),
                    rows_per_image: None,
                },
            },
            bare_texture.as_image_copy(),
            bare_texture.size(),
        );
        interop.queue().submit([encoder.finish()]);
        interop
            .device()
            .poll(wgpu::PollType::wait_indefinitely())
            .map_err(|e| e.to_string())?;
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
            &mut replace_step as &mut Step<'_>,
            &mut bare_step as &mut Step<'_>,
            &mut in_place_step as &mut Step<'_>,
        ],
    )?;
    let (copies, copied) = imported.gpu_copies();
    let (import_t, staged_t, replace_t, bare_t, in_place_t) = (
        timing.medians[0],
        timing.medians[1],
        timing.medians[2],
        timing.medians[3],
        timing.medians[4],
    );

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
        "  replace (two HostBuffers, A/B)       {:8.2} ms",
        ms(replace_t)
    );
    println!(
        "  in place (A/B drawn from the pages)  {:8.2} ms",
        ms(in_place_t)
    );
    println!(
        "  ceiling: bare wgpu copy from pages   {:8.2} ms",
        ms(bare_t)
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
        "  ratio staged / replace               {:8.2}",
        ms(staged_t) / ms(replace_t)
    );
    println!(
        "  replace / bare wgpu copy             {:8.2}",
        ms(replace_t) / ms(bare_t)
    );
    println!(
        "  import / memcpy                      {:8.2}",
        ms(import_t) / ms(memcpy)
    );
    println!(
        "  replace / in place                   {:8.2}",
        ms(replace_t) / ms(in_place_t)
    );
    let stats = replaced.stats();
    println!(
        "  replace: {} buffers handed, {} imports, {} MiB copied on the host, {} GPU copies, imported: {}",
        stats.buffers_handed,
        stats.imports_made,
        stats.bytes_copied >> 20,
        stats.gpu_copies,
        replaced.is_imported()
    );
    let drawn = in_place.stats();
    println!(
        "  in place: {} buffers handed, {} images over their pages, {} GPU copies{}",
        drawn.buffers_handed,
        drawn.in_place_images,
        drawn.gpu_copies,
        in_place
            .in_place_refusal()
            .map(|r| format!(" (copied: {r})"))
            .unwrap_or_default()
    );
    println!(
        "  GPU copies from the pages: {} ({} MiB); staged bytes over the run: {} MiB",
        copies - copies_before.0,
        (copied - copies_before.1) >> 20,
        timing.counters.bytes_uploaded >> 20
    );
    Ok(())
}
