//! The staging ring gives a burst's memory back: large staging chunks are reused while
//! uploads keep coming and released after `STAGING_IDLE_FRAMES` frames without use; a frame
//! that updates many large sources submits its copies in parts, so its staging is bounded.

mod common;

use std::sync::Arc;

use common::renderer;
use sluice::prelude::*;
use sluice::STAGING_IDLE_FRAMES;

/// 2048 x 2048 RGBA8: 16 MiB, four times the default staging chunk.
const SIDE: usize = 2048;
const BYTES: u64 = (SIDE * SIDE * 4) as u64;
/// The default staging chunk (small uploads share chunks of this size).
const DEFAULT_CHUNK: u64 = 4 << 20;

/// An opaque grey image of `value`.
fn filled(value: u8) -> Array3<u8> {
    Array3::from_shape_fn(
        (SIDE, SIDE, 4),
        |(_, _, c)| if c == 3 { 255 } else { value },
    )
}

#[test]
fn a_bursts_staging_is_released_after_idle_frames() {
    let mut r = renderer();
    let source = Arc::new(ArraySource::with_channels(filled(1)).unwrap());
    let mut scene = Scene::new();
    scene.add(Image::new(source.clone()).with_clim(0.0, 255.0).unwrap());
    let target = r.create_target(64, 64).unwrap();
    let cam = PanZoomCamera::fit(Vec2::ZERO, Vec2::splat(SIDE as f32), [64, 64]);
    // A burst of full updates: one large chunk, reused from frame to frame.
    for value in 0..4u8 {
        source.replace(filled(value * 60)).unwrap();
        let _ = r.render(&scene, &cam, &target).unwrap();
        r.wait_idle().unwrap();
    }
    let burst = r.counters();
    assert_eq!(burst.bytes_uploaded, 4 * BYTES);
    assert!(
        burst.staging_bytes >= BYTES,
        "the burst's chunk is held while the burst lasts: {} bytes",
        burst.staging_bytes
    );
    assert!(
        burst.staging_buffers_created <= 2,
        "the burst's chunk is reused: {} staging buffers created",
        burst.staging_buffers_created
    );
    let img = r.read_image(&target).unwrap();
    assert_eq!(img.get_pixel(32, 32).0, [180, 180, 180, 255]);
    // Frames with nothing to upload: the large chunk goes back, small ones may stay.
    for _ in 0..STAGING_IDLE_FRAMES + 2 {
        let _ = r.render(&scene, &cam, &target).unwrap();
        r.wait_idle().unwrap();
    }
    let idle = r.counters();
    assert_eq!(idle.bytes_uploaded, burst.bytes_uploaded);
    assert!(
        idle.staging_bytes <= 2 * DEFAULT_CHUNK,
        "after {} idle frames the ring still holds {} bytes of staging (burst: {})",
        STAGING_IDLE_FRAMES + 2,
        idle.staging_bytes,
        burst.staging_bytes
    );
}

#[test]
fn many_large_sources_in_one_frame_are_uploaded_in_parts() {
    const N: usize = 8;
    let mut r = renderer();
    let cpu = r.adapter_info().device_type == sluice::wgpu::DeviceType::Cpu;
    let sources: Vec<Arc<ArraySource>> = (0..N)
        .map(|i| Arc::new(ArraySource::with_channels(filled(i as u8 * 20 + 10)).unwrap()))
        .collect();
    let mut scene = Scene::new();
    for (i, source) in sources.iter().enumerate() {
        let id = scene.add(Image::new(source.clone()).with_clim(0.0, 255.0).unwrap());
        // Each tile 2048 world units wide, side by side: target pixel 8 i + 4 is tile i's centre.
        scene.set_transform(
            id,
            Mat4::from_translation(Vec3::new((i * SIDE) as f32, 0.0, 0.0)),
        );
    }
    let (w, h) = (8 * N as u32, 8);
    let target = r.create_target(w, h).unwrap();
    let cam = PanZoomCamera::fit(
        Vec2::ZERO,
        Vec2::new((N * SIDE) as f32, SIDE as f32),
        [w, h],
    );
    let stats = r.render(&scene, &cam, &target).unwrap();
    assert_eq!(stats.bytes_uploaded, N as u64 * BYTES);
    let img = r.read_image(&target).unwrap();
    for i in 0..N {
        let v = i as u8 * 20 + 10;
        assert_eq!(
            img.get_pixel(8 * i as u32 + 4, 4).0,
            [v, v, v, 255],
            "tile {i} shows its own source"
        );
    }
    let c = r.counters();
    // On a CPU driver a submission's copies are done when the next part is staged, so the
    // parts share chunks; a GPU may still be copying, and then more chunks are made.
    if cpu {
        assert!(
            c.staging_bytes <= 3 * BYTES,
            "{} bytes of staging held for {} MiB of uploads in one frame",
            c.staging_bytes,
            (N as u64 * BYTES) >> 20
        );
    }
}
