//! Host sources end to end: memory-mapped files, custom sources written against the public
//! trait only, and concurrent writers while frames render.

mod common;

use std::io::Write;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;

use common::{assert_pixel, expected_entry, render_pixels, renderer};
use sluice::prelude::*;
use sluice::{
    npy_header, ChangeLog, Changes, HostView, LendOutcome, ReadRequest, ReadStatus, Readable,
};

fn write_npy(path: &std::path::Path, element: ElementType, shape: &[usize], data: &[u8]) {
    let mut f = std::fs::File::create(path).unwrap();
    f.write_all(&npy_header(element, shape)).unwrap();
    f.write_all(data).unwrap();
}

#[test]
fn mmap_touches_only_what_is_drawn() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("stack.npy");
    // 64 planes of 512 x 512 u16 (32 MiB); the image shows plane 37 only.
    let (planes, h, w) = (64usize, 512usize, 512usize);
    let value = |p: usize, y: usize, x: usize| ((p * 1000 + y * 3 + x) % 65536) as u16;
    let mut bytes = Vec::with_capacity(planes * h * w * 2);
    for p in 0..planes {
        for y in 0..h {
            for x in 0..w {
                bytes.extend_from_slice(&value(p, y, x).to_le_bytes());
            }
        }
    }
    write_npy(&path, ElementType::U16, &[planes, h, w], &bytes);
    drop(bytes);

    let stack = Arc::new(MmapSource::open_npy(&path).unwrap());
    assert_eq!(stack.layout().shape().dims(), &[64, 512, 512]);
    let plane = Arc::new(CropSource::plane(stack.clone(), 37).unwrap());
    let mut scene = Scene::new();
    scene.add(Image::new(plane).with_clim(0.0, 65535.0).unwrap());
    let mut r = renderer();
    let img = render_pixels(&mut r, &scene, 512, 512);
    assert_eq!(
        stack.bytes_read(),
        (h * w * 2) as u64,
        "only one plane of 64 was read"
    );
    for (x, y) in [(0, 0), (100, 7), (511, 511)] {
        let v = value(37, y as usize, x as usize) as f32;
        let (want, near) = expected_entry(&Colormap::Gray, v, [0.0, 65535.0], 1.0);
        let got = img.get_pixel(x, y).0;
        assert!(
            got == want || Some(got) == near,
            "({x}, {y}): {got:?} vs {want:?}"
        );
    }
    // Nothing changes in a mapped file: later frames read nothing.
    render_pixels(&mut r, &scene, 512, 512);
    assert_eq!(stack.bytes_read(), (h * w * 2) as u64);
}

#[test]
fn mmap_raw_files_with_an_explicit_layout() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("frame.raw");
    let header = b"16 bytes header!";
    let rgb: Vec<u8> = (0..8 * 8)
        .flat_map(|i| [i as u8 * 4, 255 - i as u8, 7])
        .collect();
    std::fs::write(&path, [&header[..], &rgb].concat()).unwrap();
    let layout = Layout::new(Shape::d2(8, 8).unwrap(), ElementType::U8, 3).unwrap();
    let source = Arc::new(MmapSource::open_raw(&path, layout.clone(), 16).unwrap());
    let mut scene = Scene::new();
    scene.add(Image::new(source));
    let img = render_pixels(&mut renderer(), &scene, 8, 8);
    let i = 3 * 8 + 5;
    assert_pixel(&img, 5, 3, [i as u8 * 4, 255 - i as u8, 7, 255], 0);
    // One byte short: a clear error with the numbers.
    let e = MmapSource::open_raw(&path, layout, 17)
        .err()
        .unwrap()
        .to_string();
    assert!(
        e.contains("208 bytes") && e.contains("192 bytes") && e.contains("offset 17"),
        "{e}"
    );
}

#[test]
fn bad_npy_files_are_clear_errors() {
    let dir = tempfile::tempdir().unwrap();
    let header = |descr: &str, fortran: &str, shape: &str| {
        let dict =
            format!("{{'descr': '{descr}', 'fortran_order': {fortran}, 'shape': {shape}, }}\n");
        let mut b = b"\x93NUMPY\x01\x00".to_vec();
        b.extend_from_slice(&(dict.len() as u16).to_le_bytes());
        b.extend_from_slice(dict.as_bytes());
        b
    };
    let cases: Vec<(&str, Vec<u8>, &str)> = vec![
        (
            "truncated.npy",
            [npy_header(ElementType::F32, &[4, 4]), vec![0; 60]].concat(),
            "file has",
        ),
        (
            "fortran.npy",
            [header("<f4", "True", "(2, 2)"), vec![0; 16]].concat(),
            "Fortran",
        ),
        (
            "big.npy",
            [header(">u2", "False", "(2, 2)"), vec![0; 8]].concat(),
            "big-endian",
        ),
        (
            "u64.npy",
            [header("<u8", "False", "(2,)"), vec![0; 16]].concat(),
            "<u8 is not supported",
        ),
        (
            "broken.npy",
            b"\x93NUMPY\x01\x00\xff\x00{'descr'".to_vec(),
            "truncated header",
        ),
        ("nomagic.npy", b"hello, world".to_vec(), "magic"),
        ("empty.npy", Vec::new(), "0 bytes"),
        ("zero.npy", header("<f4", "False", "(0, 3)"), "is empty"),
        (
            "scalar.npy",
            [header("<f4", "False", "()"), vec![0; 4]].concat(),
            "1 to 3 spatial axes",
        ),
    ];
    for (name, bytes, needle) in cases {
        let path = dir.path().join(name);
        std::fs::write(&path, &bytes).unwrap();
        let e = MmapSource::open_npy(&path).err().unwrap().to_string();
        assert!(
            e.contains(needle),
            "{name}: {e:?} should mention {needle:?}"
        );
        assert_eq!(std::fs::read(&path).unwrap(), bytes, "{name} was modified");
    }
    let e = MmapSource::open_npy(dir.path().join("missing.npy"))
        .err()
        .unwrap()
        .to_string();
    assert!(e.contains("missing.npy"), "{e}");
}

#[test]
fn npy_format_versions_two_and_three_map() {
    let dir = tempfile::tempdir().unwrap();
    for major in [2u8, 3] {
        let dict = "{'descr': '<i2', 'fortran_order': False, 'shape': (3, 5), }\n";
        let mut b = b"\x93NUMPY".to_vec();
        b.extend_from_slice(&[major, 0]);
        b.extend_from_slice(&(dict.len() as u32).to_le_bytes());
        b.extend_from_slice(dict.as_bytes());
        for i in 0..15i16 {
            b.extend_from_slice(&(i - 7).to_le_bytes());
        }
        let path = dir.path().join(format!("v{major}.npy"));
        std::fs::write(&path, b).unwrap();
        let s = MmapSource::open_npy(&path).unwrap();
        assert_eq!(s.layout().element(), ElementType::I16);
        let mut out = [0u8; 4];
        let _ = s
            .read(
                &ReadRequest::new(Region::d2(2, 3, 1, 2), sluice::noop_waker()),
                &mut out,
            )
            .unwrap();
        assert_eq!(
            [
                i16::from_le_bytes([out[0], out[1]]),
                i16::from_le_bytes([out[2], out[3]])
            ],
            [6, 7]
        );
    }
}

/// A procedural source implemented the way a user would, in their own crate: a checkerboard
/// whose square size can change (a new version), served by `read` only (nothing to lend).
struct Checkerboard {
    shape: Shape,
    square: AtomicU64,
    log: parking_lot::Mutex<ChangeLog>,
    reads: AtomicU64,
}

impl Checkerboard {
    fn new(h: usize, w: usize, square: u64) -> Self {
        Checkerboard {
            shape: Shape::d2(h, w).unwrap(),
            square: AtomicU64::new(square),
            log: parking_lot::Mutex::new(ChangeLog::new(16)),
            reads: AtomicU64::new(0),
        }
    }

    fn set_square(&self, square: u64) {
        let mut log = self.log.lock();
        self.square.store(square, Ordering::Release);
        log.record_all();
    }

    fn value(&self, y: usize, x: usize) -> u8 {
        let s = self.square.load(Ordering::Acquire) as usize;
        if (y / s + x / s).is_multiple_of(2) {
            30
        } else {
            220
        }
    }
}

impl DataSource for Checkerboard {
    fn layout(&self) -> Layout {
        Layout::new(self.shape, ElementType::U8, 1).unwrap()
    }
    fn version(&self) -> Version {
        self.log.lock().version()
    }
    fn changes_since(&self, since: Version) -> Changes {
        self.log.lock().since(since)
    }
    fn read(&self, request: &ReadRequest<'_>, dst: &mut [u8]) -> Result<ReadStatus, SourceError> {
        sluice::check_read(&self.layout(), request, dst.len())?;
        self.reads.fetch_add(1, Ordering::Relaxed);
        let r = request.region;
        for (i, out) in dst.iter_mut().enumerate() {
            let (y, x) = (r.origin[1] + i / r.size[2], r.origin[2] + i % r.size[2]);
            *out = self.value(y, x);
        }
        Ok(ReadStatus::Ready)
    }
}

#[test]
fn a_custom_source_through_the_public_trait() {
    let board = Arc::new(Checkerboard::new(64, 96, 8));
    let mut scene = Scene::new();
    scene.add(Image::new(board.clone()));
    let mut r = renderer();
    let img = render_pixels(&mut r, &scene, 96, 64);
    for (x, y) in [(0u32, 0u32), (9, 1), (17, 9), (95, 63)] {
        let v = board.value(y as usize, x as usize);
        assert_pixel(&img, x, y, [v, v, v, 255], 0);
    }
    assert_eq!(board.reads.load(Ordering::Relaxed), 1);
    board.set_square(16);
    let img = render_pixels(&mut r, &scene, 96, 64);
    assert_pixel(&img, 9, 1, [30, 30, 30, 255], 0);
    assert_pixel(&img, 17, 1, [220, 220, 220, 255], 0);
    assert_eq!(r.counters().bytes_uploaded, 2 * 64 * 96);
}

/// A 4 x 4 u8 source of one value, scripted: not ready until `ready` (lazy data must not
/// block the frame), and its reads panic while `panics` (a user's source with a bug, found
/// in the middle of a frame).
struct Slow {
    ready: AtomicBool,
    panics: AtomicBool,
    value: u8,
    waker: parking_lot::Mutex<Option<std::task::Waker>>,
}

impl DataSource for Slow {
    fn layout(&self) -> Layout {
        Layout::new(Shape::d2(4, 4).unwrap(), ElementType::U8, 1).unwrap()
    }
    fn version(&self) -> Version {
        Version::INITIAL
    }
    fn changes_since(&self, since: Version) -> Changes {
        if since < Version::INITIAL {
            Changes::All
        } else {
            Changes::None
        }
    }
    fn read(&self, request: &ReadRequest<'_>, dst: &mut [u8]) -> Result<ReadStatus, SourceError> {
        assert!(
            !self.panics.load(Ordering::Acquire),
            "the source's read panics"
        );
        if !self.ready.load(Ordering::Acquire) {
            *self.waker.lock() = Some(request.waker.clone());
            return Ok(ReadStatus::Pending);
        }
        dst.fill(self.value);
        Ok(ReadStatus::Ready)
    }
    fn readable(&self) -> Readable {
        Readable::Everywhere
    }
    fn lend(
        &self,
        _: &ReadRequest<'_>,
        _: &mut dyn FnMut(HostView<'_>),
    ) -> Result<LendOutcome, SourceError> {
        Ok(LendOutcome::NotLendable)
    }
}

#[test]
fn pending_data_does_not_block_and_wakes_the_renderer() {
    let slow = Arc::new(Slow {
        ready: AtomicBool::new(false),
        panics: AtomicBool::new(false),
        value: 123,
        waker: parking_lot::Mutex::new(None),
    });
    let mut scene = Scene::new();
    scene.add(Image::new(slow.clone()));
    let mut r = renderer();
    let target = r.create_target(4, 4).unwrap();
    let cam = common::pixel_camera(4, 4);
    let stats = r.render(&scene, &cam, &target).unwrap();
    assert!(stats.uploads_pending);
    assert!(!r.take_redraw_request());
    slow.ready.store(true, Ordering::Release);
    slow.waker
        .lock()
        .take()
        .expect("the source kept the waker")
        .wake();
    assert!(r.take_redraw_request());
    let stats = r.render(&scene, &cam, &target).unwrap();
    assert!(!stats.uploads_pending);
    let img = r.read_image(&target).unwrap();
    assert_pixel(&img, 2, 2, [123, 123, 123, 255], 0);
}

#[test]
fn concurrent_writers_never_show_a_torn_region() {
    // 256 x 256 u8, 16 tiles of 64 x 64 (the chunk size). Four writer threads each own four
    // tiles and keep rewriting each tile whole with one value; every rendered frame must show
    // every tile uniform.
    let source = Arc::new(ArraySource::new(Array2::<u8>::zeros((256, 256))).unwrap());
    let stop = Arc::new(AtomicBool::new(false));
    let writers: Vec<_> = (0..4)
        .map(|t| {
            let source = source.clone();
            let stop = stop.clone();
            std::thread::spawn(move || {
                let mut n = 0u32;
                while !stop.load(Ordering::Relaxed) {
                    for k in 0..4 {
                        let tile = t * 4 + k;
                        let (ty, tx) = (tile / 4 * 64, tile % 4 * 64);
                        let v = ((n * 16 + tile as u32) % 251) as u8 + 1;
                        let block = Array2::from_elem((64, 64), v);
                        source.write(&[ty, tx], block.view()).unwrap();
                    }
                    n += 1;
                }
                n
            })
        })
        .collect();
    let mut r = renderer();
    let mut scene = Scene::new();
    scene.add(Image::new(source.clone()));
    let mut distinct_frames = std::collections::HashSet::new();
    for frame in 0..40 {
        let img = render_pixels(&mut r, &scene, 256, 256);
        for tile in 0..16u32 {
            let (ty, tx) = (tile / 4 * 64, tile % 4 * 64);
            let first = img.get_pixel(tx, ty).0;
            for y in ty..ty + 64 {
                for x in tx..tx + 64 {
                    assert_eq!(
                        img.get_pixel(x, y).0,
                        first,
                        "frame {frame}: tile {tile} torn at ({x}, {y})"
                    );
                }
            }
        }
        distinct_frames.insert(img.into_raw());
    }
    stop.store(true, Ordering::Relaxed);
    let writes: u32 = writers.into_iter().map(|w| w.join().unwrap()).sum();
    assert!(writes > 40, "writers barely ran ({writes} rounds)");
    assert!(
        distinct_frames.len() > 1,
        "frames never changed while writers ran"
    );
}

/// A source that says its bytes are in CUDA memory.
struct OnDevice;

impl DataSource for OnDevice {
    fn layout(&self) -> Layout {
        Layout::new(Shape::d2(4, 4).unwrap(), ElementType::F32, 1).unwrap()
    }
    fn version(&self) -> Version {
        Version::INITIAL
    }
    fn changes_since(&self, _: Version) -> Changes {
        Changes::All
    }
    fn residency(&self) -> sluice::Residency {
        sluice::Residency::Cuda(sluice::CudaMemory {
            device_uuid: [0; 16],
            ptr: 0x1000,
            row_pitch: 16,
            plane_pitch: 64,
            stream: 0,
            ready_event: None,
        })
    }
    fn read(&self, _: &ReadRequest<'_>, _: &mut [u8]) -> Result<ReadStatus, SourceError> {
        panic!("a device-resident source is never read through the host");
    }
}

#[test]
fn device_resident_sources_are_never_copied_through_the_host_silently() {
    let mut r = renderer();
    let mut scene = Scene::new();
    scene.add(Image::new(Arc::new(OnDevice)));
    let target = r.create_target(4, 4).unwrap();
    let e = r
        .render(&scene, &common::pixel_camera(4, 4), &target)
        .unwrap_err()
        .to_string();
    assert!(
        e.contains("device memory") && e.contains("never made silently"),
        "{e}"
    );
}

#[test]
fn a_write_split_over_several_copies_is_never_torn() {
    // Chunks of 64 x 64. Writer A rewrites a 128 x 128 block (2 x 2 chunks) with one value;
    // writer B rewrites the chunk to the right of its top row. When both are dirty the plan
    // copies row 0 (three chunks) and row 1 (two chunks) separately: the 128 x 128 block spans
    // two copies, and must still show one write.
    let source = Arc::new(ArraySource::new(Array2::<u8>::zeros((256, 256))).unwrap());
    let stop = Arc::new(AtomicBool::new(false));
    let writer = |origin: [usize; 2], size: usize| {
        let source = source.clone();
        let stop = stop.clone();
        std::thread::spawn(move || {
            let mut v = 1u8;
            while !stop.load(Ordering::Relaxed) {
                source
                    .write(&origin, Array2::from_elem((size, size), v).view())
                    .unwrap();
                v = v % 250 + 1;
            }
        })
    };
    let a = writer([0, 0], 128);
    let b = writer([0, 128], 64);
    let mut r = renderer();
    let mut scene = Scene::new();
    scene.add(Image::new(source.clone()));
    for frame in 0..60 {
        let img = render_pixels(&mut r, &scene, 256, 256);
        let first = img.get_pixel(0, 0).0;
        for (x, y) in [(127u32, 0u32), (0, 127), (127, 127), (70, 70), (5, 100)] {
            assert_eq!(
                img.get_pixel(x, y).0,
                first,
                "frame {frame}: block torn at ({x}, {y})"
            );
        }
    }
    stop.store(true, Ordering::Relaxed);
    a.join().unwrap();
    b.join().unwrap();
}

#[test]
fn a_dropped_renderer_no_longer_holds_released_memory() {
    // Two chunk rows, so that a one-byte budget leaves the first renderer half done and both
    // renderers are attached before the host copy is released.
    let source = Arc::new(
        ArraySource::new(Array2::<u8>::zeros((128, 64)))
            .unwrap()
            .with_policy(HostCopyPolicy::ReleaseAfterUpload),
    );
    let mut scene = Scene::new();
    scene.add(Image::new(source.clone()));
    let mut options = sluice::RendererOptions::from_env().unwrap();
    options.upload_budget = Some(1);
    let mut first = Renderer::with_options(options).unwrap();
    let mut second = renderer();
    render_pixels(&mut first, &scene, 8, 8);
    render_pixels(&mut second, &scene, 8, 8);
    assert!(!source.is_released(), "the first renderer has half of it");
    render_pixels(&mut first, &scene, 8, 8);
    assert!(source.is_released());
    source
        .write(&[0, 0], Array2::from_elem((8, 8), 7u8).view())
        .unwrap();
    render_pixels(&mut first, &scene, 8, 8);
    assert_eq!(
        source.host_bytes(),
        64,
        "the second renderer has not uploaded the write yet"
    );
    drop(second);
    assert_eq!(source.host_bytes(), 0, "nobody else needs the write");
}

/// A 4 x 4 u8 source of `value` that frees its host copy once uploaded.
fn released_after_upload(value: u8) -> Arc<ArraySource> {
    Arc::new(
        ArraySource::new(Array2::<u8>::from_elem((4, 4), value))
            .unwrap()
            .with_policy(HostCopyPolicy::ReleaseAfterUpload),
    )
}

/// A 4 x 4 source of `value` whose reads panic until `panics` is cleared.
fn panicking(value: u8) -> Arc<Slow> {
    Arc::new(Slow {
        ready: AtomicBool::new(true),
        panics: AtomicBool::new(true),
        value,
        waker: parking_lot::Mutex::new(None),
    })
}

/// A frame that panics after other sources' copies were recorded drops those copies with its
/// encoder: the next frame must upload them again, not draw a texture or a vertex buffer it
/// never filled. A source that frees its host copy once uploaded is told only after the
/// frame is submitted, so its data is still there to upload again; and a source uploaded in
/// an earlier frame (its host copy already freed) is left as it is.
#[test]
fn a_frame_that_panics_loses_no_upload() {
    let released = released_after_upload(120);
    let good = released_after_upload(200);
    let bad = panicking(50);
    // A red square over rows 4..8 (two triangles, unlit).
    let corners: Vec<f32> = [
        [0.0, 4.0],
        [8.0, 4.0],
        [8.0, 8.0],
        [0.0, 4.0],
        [8.0, 8.0],
        [0.0, 8.0],
    ]
    .iter()
    .flat_map(|[x, y]| [*x, *y, 0.0f32])
    .collect();
    let square = Arc::new(
        ArraySource::with_channels(Array2::from_shape_vec((6, 3), corners).unwrap()).unwrap(),
    );
    let mut r = renderer();
    let target = r.create_target(12, 8).unwrap();
    let cam = common::pixel_camera(12, 8);
    let mut scene = Scene::new();
    let far = scene.add(Image::new(released.clone()));
    scene.set_transform(far, Mat4::from_translation(Vec3::new(8.0, 0.0, 0.0)));
    r.render(&scene, &cam, &target).unwrap();
    assert!(released.is_released());
    // Buffers upload first, then textures in draw order: the mesh's and the good image's
    // copies are recorded before the bad image's read panics.
    scene.add(
        sluice::Mesh::new(square)
            .with_color([1.0, 0.0, 0.0, 1.0])
            .with_shading(sluice::Shading::Unlit),
    );
    scene.add(Image::new(good.clone()));
    let right = scene.add(Image::new(bad.clone()));
    scene.set_transform(right, Mat4::from_translation(Vec3::new(4.0, 0.0, 0.0)));
    let unwound = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        r.render(&scene, &cam, &target)
    }));
    assert!(unwound.is_err(), "the source's panic reaches the caller");
    assert!(
        !good.is_released(),
        "a copy of a frame never submitted released the host data"
    );
    bad.panics.store(false, Ordering::Release);
    r.render(&scene, &cam, &target).unwrap();
    assert!(good.is_released());
    let check = |img: &image::RgbaImage| {
        for y in 0..4 {
            assert_pixel(img, 1, y, [200, 200, 200, 255], 0);
            assert_pixel(img, 6, y, [50, 50, 50, 255], 0);
            assert_pixel(img, 10, y, [120, 120, 120, 255], 0);
        }
        for x in [1, 6] {
            assert_pixel(img, x, 6, [255, 0, 0, 255], 0);
        }
    };
    check(&r.read_image(&target).unwrap());
    // Later frames keep it (nothing is uploaded again).
    let before = r.counters().bytes_uploaded;
    r.render(&scene, &cam, &target).unwrap();
    assert_eq!(r.counters().bytes_uploaded, before);
    check(&r.read_image(&target).unwrap());
}

/// A write to a release-after-upload source whose host copy is gone, lost with its frame (a
/// panic after the write's copy was recorded): the next frame uploads that write again, from
/// the source's pending write, rather than asking for the whole source, which it can no
/// longer serve (`HostReleased` on every frame, the write never shown).
#[test]
fn a_lost_frame_keeps_a_released_source_s_later_writes() {
    let released = released_after_upload(120);
    let bad = panicking(50);
    let mut r = renderer();
    let target = r.create_target(8, 4).unwrap();
    let cam = common::pixel_camera(8, 4);
    let mut scene = Scene::new();
    scene.add(Image::new(released.clone()));
    r.render(&scene, &cam, &target).unwrap();
    assert!(released.is_released());
    // Rows 1..3, columns 1..3: 30.
    released
        .write(&[1, 1], Array2::from_elem((2, 2), 30u8).view())
        .unwrap();
    // Textures upload in draw order: the write's copy is recorded before the panic.
    let right = scene.add(Image::new(bad.clone()));
    scene.set_transform(right, Mat4::from_translation(Vec3::new(4.0, 0.0, 0.0)));
    let unwound = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        r.render(&scene, &cam, &target)
    }));
    assert!(unwound.is_err(), "the source's panic reaches the caller");
    bad.panics.store(false, Ordering::Release);
    let stats = r.render(&scene, &cam, &target).unwrap();
    assert!(!stats.uploads_pending, "{stats:?}");
    let img = r.read_image(&target).unwrap();
    for y in 0..4 {
        for x in 0..4 {
            let v = if (1..3).contains(&x) && (1..3).contains(&y) {
                30
            } else {
                120
            };
            assert_pixel(&img, x, y, [v, v, v, 255], 0);
        }
        assert_pixel(&img, 6, y, [50, 50, 50, 255], 0);
    }
}
