//! Host memory imported as device memory (`VK_EXT_external_memory_host`, which lavapipe has):
//! a `HostImportSource` is drawn from the GPU's copy of the user's pages, with nothing staged
//! on the host, and falls back to staging, saying why, without the import.
#![cfg(target_os = "linux")]

mod common;

use std::sync::Arc;

use common::{assert_pixel, render_pixels};
use sluice::interop::{HostImportSource, Interop};
use sluice::prelude::*;
use sluice::RendererOptions;

fn interop() -> Interop {
    Interop::with_options(&RendererOptions::from_env().unwrap())
        .unwrap_or_else(|e| panic!("no Vulkan device with external memory: {e}"))
}

fn rgba_layout(height: usize, width: usize) -> Layout {
    Layout::new(Shape::d2(height, width).unwrap(), ElementType::U8, 4).unwrap()
}

fn pattern(x: usize, y: usize, frame: usize) -> [u8; 4] {
    [
        (x * 3 + y + frame) as u8,
        (y * 5 + 7) as u8,
        ((x ^ y) + 2 * frame) as u8,
        255,
    ]
}

fn fill(bytes: &mut [u8], width: usize, frame: usize) {
    for (i, px) in bytes.chunks_exact_mut(4).enumerate() {
        px.copy_from_slice(&pattern(i % width, i / width, frame));
    }
}

#[track_caller]
fn assert_frame(img: &image::RgbaImage, frame: usize) {
    for y in 0..img.height() {
        for x in 0..img.width() {
            assert_pixel(img, x, y, pattern(x as usize, y as usize, frame), 0);
        }
    }
}

#[test]
fn lavapipe_imports_host_pointers() {
    let interop = interop();
    let alignment = interop.host_import_alignment();
    eprintln!(
        "{}: VK_EXT_external_memory_host minImportedHostPointerAlignment = {alignment:?}",
        interop.identity().name
    );
    let alignment = alignment.expect("lavapipe has VK_EXT_external_memory_host");
    assert!(alignment.is_power_of_two(), "alignment {alignment}");
    let source = HostImportSource::new(&interop, rgba_layout(4, 4)).unwrap();
    assert!(source.is_imported(), "{:?}", source.fallback_reason());
    assert_eq!(source.alignment() as u64 % alignment, 0);
}

/// Full updates (256-byte rows: one copy command) and a region write (58 columns wide) are
/// GPU copies from the pages: the pixels equal the data and no byte went through staging.
#[test]
fn imported_pages_render_and_updates_are_gpu_copies() {
    let interop = interop();
    let (height, width) = (48, 64);
    let source = Arc::new(HostImportSource::new(&interop, rgba_layout(height, width)).unwrap());
    assert!(source.is_imported(), "{:?}", source.fallback_reason());
    let mut renderer = interop.renderer();
    let mut scene = Scene::new();
    scene.add(Image::new(source.clone()));
    for frame in 0..3 {
        source.update(|bytes| fill(bytes, width, frame));
        let img = render_pixels(&mut renderer, &scene, width as u32, height as u32);
        assert_frame(&img, frame);
    }
    let (copies, bytes) = source.gpu_copies();
    assert_eq!(copies, 3, "one GPU copy per full update");
    assert_eq!(bytes, 3 * (height * width * 4) as u64);
    assert_eq!(renderer.counters().bytes_uploaded, 0, "nothing was staged");

    // A region write: copied from the pages at its place (the renderer copies whole chunks
    // of the written region; this image is one chunk).
    let region = Region::d2(5, 3, 10, 58);
    let mut patch = vec![0u8; 10 * 58 * 4];
    for (i, px) in patch.chunks_exact_mut(4).enumerate() {
        px.copy_from_slice(&pattern(3 + i % 58, 5 + i / 58, 7));
    }
    source.write(region, &patch).unwrap();
    let img = render_pixels(&mut renderer, &scene, width as u32, height as u32);
    for y in 0..height {
        for x in 0..width {
            let inside = (5..15).contains(&y) && (3..61).contains(&x);
            let frame = if inside { 7 } else { 2 };
            assert_pixel(&img, x as u32, y as u32, pattern(x, y, frame), 0);
        }
    }
    let (copies_after, bytes_after) = source.gpu_copies();
    assert_eq!(copies_after, 4, "the region write is one more GPU copy");
    assert!(bytes_after >= bytes + (10 * 58 * 4) as u64, "{bytes_after}");
    assert_eq!(renderer.counters().bytes_uploaded, 0);
}

/// Without the import the same source is staged like any host source and says why.
#[test]
fn without_the_import_the_source_is_staged() {
    let interop = interop();
    let (height, width) = (20, 30);
    let source =
        Arc::new(HostImportSource::host_only(&interop, rgba_layout(height, width)).unwrap());
    assert!(!source.is_imported());
    let reason = source.fallback_reason().unwrap();
    assert!(reason.contains("host_only"), "{reason}");
    source.update(|bytes| fill(bytes, width, 1));
    let mut renderer = interop.renderer();
    let mut scene = Scene::new();
    scene.add(Image::new(source.clone()));
    let img = render_pixels(&mut renderer, &scene, width as u32, height as u32);
    assert_frame(&img, 1);
    assert_eq!(source.gpu_copies(), (0, 0));
    assert_eq!(
        renderer.counters().bytes_uploaded,
        (height * width * 4) as u64,
        "the bytes were staged"
    );
}

#[test]
fn bad_writes_name_the_numbers() {
    let interop = interop();
    let source = HostImportSource::new(&interop, rgba_layout(8, 8)).unwrap();
    let err = source.write(Region::d2(6, 0, 4, 8), &[0; 128]).unwrap_err();
    assert!(err.to_string().contains('8'), "{err}");
    let err = source.write(Region::d2(0, 0, 2, 2), &[0; 15]).unwrap_err();
    assert!(err.to_string().contains("15"), "{err}");
}
