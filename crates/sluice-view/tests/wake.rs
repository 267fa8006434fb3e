//! A source that answers "not ready" and later wakes the renderer reaches the hook a window's
//! event loop installs (`Renderer::set_redraw_notify`), from the waking thread, so a sleeping
//! window draws again without polling.

use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Arc;
use std::task::Waker;

use parking_lot::Mutex;
use sluice_core::{
    check_read, ChangeLog, Changes, DataSource, ElementType, Layout, ReadRequest, ReadStatus,
    Shape, SourceError, Version,
};
use sluice_render::glam::Vec2;
use sluice_render::{Image, PanZoomCamera, Renderer, Scene};

/// Pending until `ready` is set; keeps the waker of the last pending read.
struct Late {
    ready: AtomicBool,
    waker: Mutex<Option<Waker>>,
    log: ChangeLog,
}

impl DataSource for Late {
    fn layout(&self) -> Layout {
        Layout::new(Shape::d2(4, 4).unwrap(), ElementType::U8, 1).unwrap()
    }
    fn version(&self) -> Version {
        self.log.version()
    }
    fn changes_since(&self, since: Version) -> Changes {
        self.log.since(since)
    }
    fn read(&self, request: &ReadRequest<'_>, dst: &mut [u8]) -> Result<ReadStatus, SourceError> {
        check_read(&self.layout(), request, dst.len())?;
        if !self.ready.load(Ordering::Acquire) {
            *self.waker.lock() = Some(request.waker.clone());
            return Ok(ReadStatus::Pending);
        }
        dst.fill(200);
        Ok(ReadStatus::Ready)
    }
}

#[test]
fn a_source_waking_the_renderer_calls_the_redraw_notify_hook() {
    let late = Arc::new(Late {
        ready: AtomicBool::new(false),
        waker: Mutex::new(None),
        log: ChangeLog::new(4),
    });
    let mut scene = Scene::new();
    scene.add(Image::new(late.clone()).with_clim(0.0, 255.0).unwrap());
    let mut renderer =
        Renderer::with_options(sluice_render::RendererOptions::from_env().unwrap()).unwrap();
    let calls = Arc::new(AtomicUsize::new(0));
    let counted = calls.clone();
    renderer.set_redraw_notify(Some(Arc::new(move || {
        counted.fetch_add(1, Ordering::AcqRel);
    })));
    let target = renderer.create_target(4, 4).unwrap();
    let camera = PanZoomCamera::fit(Vec2::ZERO, Vec2::splat(4.0), target.size());
    let stats = renderer.render(&scene, &camera, &target).unwrap();
    assert!(stats.uploads_pending, "the data is not ready yet");
    assert_eq!(calls.load(Ordering::Acquire), 0);

    late.ready.store(true, Ordering::Release);
    let waker = late
        .waker
        .lock()
        .take()
        .expect("the pending read kept the waker");
    std::thread::spawn(move || waker.wake()).join().unwrap();
    assert_eq!(
        calls.load(Ordering::Acquire),
        1,
        "the hook ran on the waking thread"
    );
    assert!(
        renderer.take_redraw_request(),
        "the flag is still set for polling callers"
    );

    renderer.render(&scene, &camera, &target).unwrap();
    let image = renderer.read_image(&target).unwrap();
    assert_eq!(image.get_pixel(1, 1).0, [200, 200, 200, 255]);
}
