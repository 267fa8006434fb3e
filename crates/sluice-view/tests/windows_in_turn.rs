//! Several windows from one thread, one after the other, in one process (winit allows one
//! event loop per process: sluice-view keeps it and runs it again for each window), each
//! presenting what the offscreen render of its scene draws; a window asked for from another
//! thread once the loop exists is an error saying why. Its own test binary: the loop belongs
//! to the first thread that opens a window in the process.
//!
//! Tolerance: each channel within 2 of the offscreen render (as tests/window.rs). Without a
//! display the test says it skipped, unless `SLUICE_REQUIRE_WINDOW=1` (set by `.ci/run`).

use std::sync::Arc;

use sluice_core::ndarray::Array2;
use sluice_core::ArraySource;
use sluice_render::{Colormap, Image, Renderer, Scene};
use sluice_view::{ViewError, Viewer};

fn scene(colormap: Colormap, phase: f32) -> Scene {
    let data = Array2::from_shape_fn((80, 120), |(y, x)| {
        ((x as f32 / 8.0 + phase).sin() + (y as f32 / 6.0).cos()) * 0.5
    });
    let mut scene = Scene::new();
    scene.set_background([0.1, 0.2, 0.3, 1.0]);
    scene.add(
        Image::new(Arc::new(ArraySource::new(data).unwrap()))
            .with_clim(-1.0, 1.0)
            .unwrap()
            .with_colormap(colormap),
    );
    scene
}

/// Opens a window on `scene`, closes it after 3 frames, and checks what it presented against
/// the offscreen render of the same scene with the window's camera.
fn shows_its_scene(colormap: Colormap, phase: f32) {
    let report = Viewer::new()
        .title("sluice windows in turn")
        .size(400, 300)
        .quit_after_frames(3)
        .show(scene(colormap.clone(), phase))
        .expect("the window opens and draws");
    assert_eq!(report.frames, 3);
    let window = report.last_window_image.expect("the window is read back");
    let camera = report.camera.expect("the report names the camera");
    let mut renderer =
        Renderer::with_options(sluice_render::RendererOptions::from_env().unwrap()).unwrap();
    let target = renderer
        .create_target(window.width(), window.height())
        .unwrap();
    renderer
        .render(&scene(colormap, phase), &camera, &target)
        .unwrap();
    let offscreen = renderer.read_image(&target).unwrap();
    let worst = window
        .pixels()
        .zip(offscreen.pixels())
        .flat_map(|(a, b)| (0..3).map(move |c| a.0[c].abs_diff(b.0[c])))
        .max()
        .unwrap_or(0);
    assert!(worst <= 2, "window and offscreen render differ by {worst}");
    let first = offscreen.get_pixel(0, 0).0;
    assert!(offscreen.pixels().any(|p| p.0 != first), "a flat image");
}

#[test]
fn windows_open_one_after_another_on_one_thread() {
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
    shows_its_scene(Colormap::Inferno, 0.0);
    shows_its_scene(Colormap::Viridis, 1.0);
    shows_its_scene(Colormap::Gray, 2.0);
    // Another thread cannot make a second event loop: an error naming the reason.
    let other = std::thread::Builder::new()
        .name("second thread".into())
        .spawn(|| Viewer::new().show(scene(Colormap::Gray, 0.0)))
        .unwrap()
        .join()
        .unwrap();
    match other {
        Err(ViewError::Window(message)) => {
            assert!(message.contains("one event loop per process"), "{message}");
            assert!(message.contains("second thread"), "{message}");
        }
        Err(e) => panic!("another error: {e}"),
        Ok(_) => panic!("a second event loop opened"),
    }
    // And this thread still can.
    shows_its_scene(Colormap::Magma, 3.0);
}
