//! A window on a scene another thread keeps changing ([`Viewer::show_shared`]), closed from
//! that thread ([`SharedViewControl::close`]): a region written into the shown source is
//! uploaded by the window's renderer (its counters grow by at least that region's bytes) and
//! the window closes when asked, returning its report.
//!
//! Its own test binary: winit allows one event loop per process. Without a display the test
//! says it skipped, unless `SLUICE_REQUIRE_WINDOW=1` (set by `.ci/run`), where it fails.

use std::sync::Arc;
use std::time::{Duration, Instant};

use parking_lot::Mutex;
use sluice_core::ndarray::Array2;
use sluice_core::ArraySource;
use sluice_render::{Image, Scene};
use sluice_view::shared::SharedViewControl;
use sluice_view::Viewer;

/// Polls `done` every 10 ms until it holds or `limit` passes; says which.
fn wait_for(limit: Duration, mut done: impl FnMut() -> bool) -> bool {
    let start = Instant::now();
    while start.elapsed() < limit {
        if done() {
            return true;
        }
        std::thread::sleep(Duration::from_millis(10));
    }
    done()
}

#[test]
fn a_shared_window_uploads_what_another_thread_writes_and_closes_when_asked() {
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
    let source = Arc::new(ArraySource::new(Array2::<f32>::zeros((64, 96))).unwrap());
    let mut scene = Scene::new();
    scene.add(Image::new(source.clone()).with_clim(0.0, 1.0).unwrap());
    let scene = Arc::new(Mutex::new(scene));
    // The viewer (its frame callback) stays on the thread that runs it; the control comes
    // back from there.
    let (send, receive) = std::sync::mpsc::channel();
    let window = {
        let scene = scene.clone();
        std::thread::spawn(move || {
            let viewer = Viewer::new()
                .title("sluice shared window test")
                .size(320, 240);
            let control = SharedViewControl::new(&viewer);
            send.send(control.clone()).unwrap();
            viewer.show_shared(scene, &control)
        })
    };
    let control = receive.recv().expect("the window thread sends its control");
    let limit = Duration::from_secs(60);
    assert!(
        wait_for(limit, || control.frames() >= 2),
        "the window drew no two frames in {limit:?}"
    );
    let before = control.counters().bytes_uploaded;
    // A 16 x 24 region: 1,536 bytes of f32.
    source
        .write(&[8, 16], Array2::<f32>::ones((16, 24)).view())
        .unwrap();
    control.request_redraw();
    let region_bytes = 16 * 24 * 4;
    assert!(
        wait_for(limit, || {
            control.request_redraw();
            control.counters().bytes_uploaded >= before + region_bytes
        }),
        "the write of {region_bytes} bytes was not uploaded in {limit:?} (bytes uploaded {} before, {} now)",
        before,
        control.counters().bytes_uploaded
    );
    let frames = control.frames();
    control.close();
    assert!(control.close_requested());
    assert!(
        wait_for(limit, || window.is_finished()),
        "the window did not close within {limit:?} of SharedViewControl::close"
    );
    let report = window
        .join()
        .expect("the window thread did not panic")
        .expect("a window closed through its control reports, not fails");
    assert!(
        report.frames >= frames,
        "the report counts {} frames, the control saw {frames}",
        report.frames
    );
}
