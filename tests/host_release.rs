//! Host-copy release: once every renderer has a source on the GPU, its host memory is really
//! returned (measured with a counting allocator), and region writes still reach the screen.

mod common;

use std::alloc::{GlobalAlloc, Layout, System};
use std::sync::atomic::{AtomicIsize, Ordering};
use std::sync::Arc;

use common::{assert_pixel, render_pixels, renderer};
use sluice::prelude::*;

struct Counting;

static LIVE_BYTES: AtomicIsize = AtomicIsize::new(0);

// SAFETY: forwards to the system allocator unchanged and only counts sizes.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        LIVE_BYTES.fetch_add(layout.size() as isize, Ordering::Relaxed);
        // SAFETY: same contract as the caller's.
        unsafe { System.alloc(layout) }
    }
    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        LIVE_BYTES.fetch_sub(layout.size() as isize, Ordering::Relaxed);
        // SAFETY: same contract as the caller's.
        unsafe { System.dealloc(ptr, layout) }
    }
}

#[global_allocator]
static ALLOCATOR: Counting = Counting;

const MIB: isize = 1 << 20;

#[test]
fn released_host_memory_is_returned_and_writes_still_show() {
    let mut r = renderer();
    // Warm the renderer up so its own one-time allocations are not counted below.
    let warm = Arc::new(ArraySource::new(Array2::<u8>::zeros((8, 8))).unwrap());
    let mut scene = Scene::new();
    scene.add(Image::new(warm));
    render_pixels(&mut r, &scene, 64, 64);

    let baseline = LIVE_BYTES.load(Ordering::Relaxed);
    let data = Array2::from_shape_fn((2048, 2048), |(y, x)| ((x + y) % 1000) as f32 / 1000.0); // 16 MiB
    let source = Arc::new(
        ArraySource::new(data)
            .unwrap()
            .with_policy(HostCopyPolicy::ReleaseAfterUpload),
    );
    assert!(LIVE_BYTES.load(Ordering::Relaxed) - baseline >= 16 * MIB);
    let mut scene = Scene::new();
    scene.add(Image::new(source.clone()));
    let img = render_pixels(&mut r, &scene, 64, 64);
    assert_pixel(&img, 10, 20, [7, 7, 7, 255], 0); // 0.030 -> entry 7
    assert!(source.is_released());
    assert_eq!(source.host_bytes(), 0);
    let held = LIVE_BYTES.load(Ordering::Relaxed) - baseline;
    assert!(
        held < 2 * MIB,
        "{held} bytes still held after release (16 MiB were allocated)"
    );

    // A region write after release: kept until uploaded, shown, then dropped.
    source
        .write(&[0, 0], Array2::from_elem((64, 64), 1.0f32).view())
        .unwrap();
    assert_eq!(source.host_bytes(), 64 * 64 * 4);
    let before = r.counters();
    let img = render_pixels(&mut r, &scene, 64, 64);
    assert_eq!(r.counters().since(&before).bytes_uploaded, 64 * 64 * 4);
    assert_pixel(&img, 5, 5, [255, 255, 255, 255], 0);
    assert_pixel(&img, 10, 0, [255, 255, 255, 255], 0);
    assert_eq!(source.host_bytes(), 0);

    // A renderer that starts showing the source after the release cannot upload it: an error
    // that says why, not a panic or a blank image.
    let mut late = renderer();
    let target = late.create_target(8, 8).unwrap();
    let e = late
        .render(&scene, &common::pixel_camera(8, 8), &target)
        .unwrap_err()
        .to_string();
    assert!(e.contains("released its host copy"), "{e}");
}
