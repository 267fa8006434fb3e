//! Frames read back into imported host pages (`HostFrame`, `VK_EXT_external_memory_host`,
//! which lavapipe has): the GPU writes the pixels where the caller reads them. Every pixel is
//! compared with the pattern drawn at one texel per pixel (nearest, computed on the CPU) and
//! with `Renderer::read_into`, tolerance 0: the same bytes. Padded rows (a width whose bytes
//! are not a multiple of 256), a second frame over the first, the staged path, and the errors.
#![cfg(target_os = "linux")]

mod common;

use std::sync::Arc;

use common::{frame_data as data, frame_pattern as pattern, interop, pixel_camera};

use sluice::interop::{HostFrame, Interop, InteropError};
use sluice::prelude::*;

/// Checks every pixel of `frame` against the pattern, and the packed bytes against
/// `read_into` of the same target.
#[track_caller]
fn assert_frame(frame: &HostFrame, expected_frame: usize, read_into: &[u8]) {
    let (w, h) = (frame.width() as usize, frame.height() as usize);
    for y in 0..h {
        let row = frame.row(y as u32).expect("a row inside the frame");
        assert_eq!(row.len(), w * 4);
        for x in 0..w {
            let expected = pattern(x, y, expected_frame);
            assert_eq!(
                &row[x * 4..x * 4 + 4],
                &expected,
                "pixel ({x}, {y}) of frame {expected_frame}"
            );
        }
    }
    assert_eq!(
        frame.to_packed(),
        read_into,
        "HostFrame and read_into agree"
    );
    assert!(frame.row(h as u32).is_none(), "no row past the last");
}

/// Two sizes: 64 wide (256-byte rows, no padding) and 100 wide (400-byte rows padded to 512);
/// two frames each, the second over the first.
#[test]
fn frames_land_in_imported_pages_as_read_into_reads_them() {
    let interop = interop();
    let mut renderer = interop.renderer();
    for (height, width) in [(48usize, 64usize), (37, 100)] {
        let source = Arc::new(ArraySource::with_channels(data(height, width, 0)).unwrap());
        let mut scene = Scene::new();
        scene.add(Image::new(source.clone()));
        let target = renderer.create_target(width as u32, height as u32).unwrap();
        let mut frame = HostFrame::for_target(&interop, &target).unwrap();
        assert!(frame.is_imported(), "{:?}", frame.fallback_reason());
        assert_eq!(frame.fallback_reason(), None);
        assert_eq!(
            frame.bytes_per_row() as usize,
            (width * 4).next_multiple_of(256),
            "rows padded to wgpu's copy alignment"
        );
        assert_eq!(frame.bytes().len(), frame.bytes_per_row() as usize * height);
        let camera = pixel_camera(width as u32, height as u32);
        let mut packed = vec![0u8; width * height * 4];
        for n in 0..2 {
            source.replace(data(height, width, n)).unwrap();
            renderer.render(&scene, &camera, &target).unwrap();
            frame.read(&renderer, &target).unwrap();
            renderer.read_into(&target, &mut packed).unwrap();
            assert_frame(&frame, n, &packed);
        }
    }
}

/// The staged frame (what a device without the extension gets) reads the same pixels, with
/// unpadded rows.
#[test]
fn a_staged_frame_reads_the_same_pixels() {
    let interop = interop();
    let mut renderer = interop.renderer();
    let (height, width) = (37usize, 100usize);
    let source = Arc::new(ArraySource::with_channels(data(height, width, 3)).unwrap());
    let mut scene = Scene::new();
    scene.add(Image::new(source));
    let target = renderer.create_target(width as u32, height as u32).unwrap();
    let mut frame = HostFrame::staged(&interop, width as u32, height as u32).unwrap();
    assert!(!frame.is_imported());
    assert!(frame.fallback_reason().unwrap().contains("staged"));
    assert_eq!(frame.bytes_per_row() as usize, width * 4);
    renderer
        .render(&scene, &pixel_camera(width as u32, height as u32), &target)
        .unwrap();
    frame.read(&renderer, &target).unwrap();
    let mut packed = vec![0u8; width * height * 4];
    renderer.read_into(&target, &mut packed).unwrap();
    assert_eq!(frame.bytes(), &packed[..]);
    assert_frame(&frame, 3, &packed);
}

/// Errors name the numbers: no pixels, a size past what rows padded to 256 bytes can
/// address, a target of another size; the frame is left as it was.
#[test]
fn bad_frames_and_targets_are_refused_naming_the_sizes() {
    let interop = interop();
    let renderer = interop.renderer();
    let e = HostFrame::new(&interop, 0, 16).unwrap_err();
    assert!(
        matches!(e, InteropError::HostFrame { .. }) && e.to_string().contains("0 x 16"),
        "{e}"
    );
    let e = HostFrame::new(&interop, u32::MAX, 2).unwrap_err();
    assert!(e.to_string().contains(&format!("{} x 2", u32::MAX)), "{e}");
    let e = HostFrame::new(&interop, 1 << 28, 1 << 28).unwrap_err();
    assert!(
        e.to_string().contains("268435456 x 268435456"),
        "an allocation that cannot be made is an error naming the size: {e}"
    );

    let target = renderer.create_target(32, 16).unwrap();
    let mut frame = HostFrame::new(&interop, 16, 32).unwrap();
    let before = frame.to_packed();
    let e = frame.read(&renderer, &target).unwrap_err();
    let text = e.to_string();
    assert!(
        text.contains("16 x 32") && text.contains("32 x 16"),
        "names both sizes: {text}"
    );
    assert_eq!(frame.to_packed(), before, "the frame is left as it was");
}

/// A renderer on another device is refused (its target cannot be copied into this device's
/// pages): a plain renderer's device, since every `Interop` on the adapter shares one.
#[test]
fn a_renderer_of_another_device_is_refused() {
    let mine = interop();
    let renderer = Renderer::with_options(RendererOptions::from_env().unwrap()).unwrap();
    assert!(renderer.device() != mine.device());
    let target = renderer.create_target(8, 8).unwrap();
    let mut frame = HostFrame::new(&mine, 8, 8).unwrap();
    let e = frame.read(&renderer, &target).unwrap_err();
    assert!(e.to_string().contains("device"), "{e}");
}

/// Every `Interop` on an adapter shares one device, kept for the life of the process (NVIDIA's
/// driver 580 deadlocked or crashed when threads dropped devices while others worked on
/// theirs): made on four threads at once and dropped there, they are all the first one's.
#[test]
fn interops_on_one_adapter_share_their_device() {
    let first = interop();
    let made: Vec<Interop> = std::thread::scope(|s| {
        let handles: Vec<_> = (0..4).map(|_| s.spawn(interop)).collect();
        handles.into_iter().map(|h| h.join().unwrap()).collect()
    });
    for other in &made {
        assert!(other.device() == first.device());
        assert_eq!(other.device_uuid(), first.device_uuid());
    }
    drop(made);
    // Still open and working after the others were dropped.
    let renderer = first.renderer();
    let target = renderer.create_target(8, 8).unwrap();
    let mut frame = HostFrame::new(&first, 8, 8).unwrap();
    frame.read(&renderer, &target).unwrap();
}
