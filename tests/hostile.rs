//! Hostile input: sizes, regions and file headers that once panicked or wrapped around. Each
//! must give a clear error naming the numbers, never a panic, in debug and release builds
//! alike. Cases the fuzz targets (tests/fuzz.rs) ever found are kept here too.

mod common;

use std::path::Path;
use std::sync::Arc;

use sluice::prelude::*;
use sluice::{Changes, HostView, LendOutcome, ReadRequest, ReadStatus};

fn write_npy(dir: &Path, name: &str, dict: &str, data: &[u8]) -> std::path::PathBuf {
    let mut bytes = b"\x93NUMPY\x01\x00".to_vec();
    bytes.extend_from_slice(&(dict.len() as u16).to_le_bytes());
    bytes.extend_from_slice(dict.as_bytes());
    bytes.extend_from_slice(data);
    let path = dir.join(name);
    std::fs::write(&path, bytes).unwrap();
    path
}

fn read(src: &dyn DataSource, region: Region, dst: &mut [u8]) -> Result<ReadStatus, SourceError> {
    src.read(&ReadRequest::new(region, sluice::noop_waker()), dst)
}

#[test]
fn an_enormous_npy_shape_is_refused_at_open_naming_the_file_and_shape() {
    let dir = tempfile::tempdir().unwrap();
    let huge = 1usize << 62;
    let dict = format!("{{'descr': '<f8', 'fortran_order': False, 'shape': ({huge}, 2), }}");
    let path = write_npy(dir.path(), "huge.npy", &dict, &[0; 16]);
    let e = MmapSource::open_npy(&path).err().expect("refused");
    let text = e.to_string();
    assert!(text.contains("huge.npy"), "{text}");
    assert!(text.contains(&format!("({huge}, 2)")), "{text}");
    assert!(text.contains("f64"), "{text}");
    // With the last axis as channels: (2**62,) samples of 2 channels.
    let e = MmapSource::open_npy_with_channels(&path)
        .err()
        .expect("refused");
    assert!(e.to_string().contains("huge.npy"), "{e}");
}

#[test]
fn a_header_declaring_more_than_the_file_holds_is_refused_with_both_numbers() {
    let dir = tempfile::tempdir().unwrap();
    let dict = "{'descr': '<f4', 'fortran_order': False, 'shape': (1000, 1000), }";
    let path = write_npy(dir.path(), "short.npy", dict, &[0; 16]);
    let e = MmapSource::open_npy(&path).err().expect("refused");
    let text = e.to_string();
    let file_bytes = std::fs::metadata(&path).unwrap().len();
    assert!(matches!(e, SourceError::Truncated { .. }), "{e:?}");
    for needle in [
        "short.npy".to_string(),
        file_bytes.to_string(),
        "4000000".to_string(),
        "cut short".to_string(),
    ] {
        assert!(text.contains(&needle), "{needle} missing from: {text}");
    }
}

#[test]
fn raw_layouts_that_do_not_fit_are_errors_naming_shape_and_type() {
    let shape = Shape::new(&[1 << 40, 1 << 20, 1 << 3]).unwrap();
    let e = Layout::new(shape, ElementType::U32, 4).unwrap_err();
    let text = e.to_string();
    assert!(
        text.contains("[1099511627776, 1048576, 8]") && text.contains("u32"),
        "{text}"
    );
    let e = Shape::new(&[usize::MAX, 2]).unwrap_err();
    assert!(e.to_string().contains(&usize::MAX.to_string()), "{e}");

    // A raw file smaller than its layout, or an offset past its end (as u64, beyond usize
    // on no machine but still named exactly).
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("a.raw");
    std::fs::write(&path, [0u8; 100]).unwrap();
    let layout = Layout::new(Shape::d2(10, 10).unwrap(), ElementType::U16, 1).unwrap();
    let e = MmapSource::open_raw(&path, layout.clone(), 0)
        .err()
        .unwrap();
    assert!(
        e.to_string().contains("100 bytes") && e.to_string().contains("200 bytes"),
        "{e}"
    );
    let e = MmapSource::open_raw(&path, layout, u64::MAX).err().unwrap();
    assert!(e.to_string().contains(&u64::MAX.to_string()), "{e}");
}

#[test]
fn empty_files_and_cut_headers_say_what_and_where() {
    let dir = tempfile::tempdir().unwrap();
    let empty = dir.path().join("empty.npy");
    std::fs::write(&empty, b"").unwrap();
    let e = MmapSource::open_npy(&empty).err().unwrap();
    assert!(
        e.to_string().contains("empty.npy") && e.to_string().contains("empty"),
        "{e}"
    );
    let layout = Layout::new(Shape::d2(2, 2).unwrap(), ElementType::U8, 1).unwrap();
    let e = MmapSource::open_raw(&empty, layout, 0).err().unwrap();
    assert!(e.to_string().contains("is empty"), "{e}");

    let cut = dir.path().join("cut.npy");
    std::fs::write(&cut, b"\x93NUM").unwrap();
    let e = MmapSource::open_npy(&cut).err().unwrap();
    assert!(
        e.to_string().contains("cut.npy") && e.to_string().contains("byte 4"),
        "{e}"
    );
    let full = sluice::npy_header(ElementType::U8, &[4, 4]);
    std::fs::write(&cut, &full[..40]).unwrap();
    let e = MmapSource::open_npy(&cut).err().unwrap();
    let text = e.to_string();
    assert!(
        text.contains("cut short") && text.contains("byte 40"),
        "{text}"
    );

    // A shape error from a file names the file and the shape.
    let p = write_npy(
        dir.path(),
        "zero.npy",
        "{'descr': '<u1', 'fortran_order': False, 'shape': (3, 0), }",
        &[],
    );
    let e = MmapSource::open_npy(&p).err().unwrap();
    assert!(
        e.to_string().contains("zero.npy") && e.to_string().contains("(3, 0)"),
        "{e}"
    );
    let p = write_npy(
        dir.path(),
        "scalar.npy",
        "{'descr': '<u1', 'fortran_order': False, 'shape': (), }",
        &[1],
    );
    let e = MmapSource::open_npy(&p).err().unwrap();
    assert!(
        e.to_string().contains("scalar.npy") && e.to_string().contains("()"),
        "{e}"
    );
}

fn host_sources(dir: &Path) -> Vec<Box<dyn DataSource>> {
    let data: Vec<u8> = (0..24).collect();
    let array = ArraySource::new(Array2::from_shape_vec((4, 6), data.clone()).unwrap()).unwrap();
    let mut npy = sluice::npy_header(ElementType::U8, &[4, 6]);
    npy.extend_from_slice(&data);
    let path = dir.join("host.npy");
    std::fs::write(&path, npy).unwrap();
    vec![
        Box::new(array),
        Box::new(MmapSource::open_npy(&path).unwrap()),
    ]
}

#[test]
fn empty_regions_are_no_ops_in_every_host_source() {
    let dir = tempfile::tempdir().unwrap();
    for src in host_sources(dir.path()) {
        for region in [
            Region::d2(0, 0, 1, 0),
            Region::d2(0, 0, 0, 6),
            Region::d2(4, 6, 0, 0),
        ] {
            assert_eq!(
                read(src.as_ref(), region, &mut []).unwrap(),
                ReadStatus::Ready
            );
            let mut seen = None;
            let lent = src
                .lend(
                    &ReadRequest::new(region, sluice::noop_waker()),
                    &mut |v: HostView<'_>| seen = Some(v.bytes.len()),
                )
                .unwrap();
            assert_eq!(
                (lent, seen),
                (LendOutcome::Lent, Some(0)),
                "{}",
                src.label()
            );
            // An empty region still needs an empty destination, and a place in the shape.
            let e = read(src.as_ref(), region, &mut [0]).unwrap_err();
            assert!(
                matches!(
                    e,
                    SourceError::BufferSize {
                        expected: 0,
                        got: 1,
                        ..
                    }
                ),
                "{e}"
            );
        }
        let e = read(src.as_ref(), Region::d2(5, 0, 0, 1), &mut []).unwrap_err();
        assert!(matches!(e, SourceError::OutOfBounds { .. }), "{e}");
    }
}

#[test]
fn every_host_source_checks_the_destination_length() {
    let dir = tempfile::tempdir().unwrap();
    for src in host_sources(dir.path()) {
        let region = Region::d2(1, 1, 2, 3);
        for len in [0, 5, 7, 100] {
            let mut dst = vec![0xEE; len];
            let e = read(src.as_ref(), region, &mut dst).unwrap_err();
            assert!(
                e.to_string().contains(&format!("buffer of {len} bytes"))
                    && e.to_string().contains("exactly 6"),
                "{}: {e}",
                src.label()
            );
            assert!(dst.iter().all(|&b| b == 0xEE), "nothing written on error");
        }
        let mut dst = [0u8; 6];
        let _ = read(src.as_ref(), region, &mut dst).unwrap();
        assert_eq!(dst, [7, 8, 9, 13, 14, 15]);
    }
}

#[test]
fn regions_near_usize_max_are_errors_that_format() {
    let dir = tempfile::tempdir().unwrap();
    let near = Region::d2(usize::MAX - 1, usize::MAX, 5, 2);
    assert_eq!(near.checked_end(), None);
    let text = near.to_string();
    // The exact ends, past usize::MAX.
    assert!(
        text.contains(&format!("{}..{}", usize::MAX - 1, usize::MAX as u128 + 4)),
        "{text}"
    );
    for src in host_sources(dir.path()) {
        let e = read(src.as_ref(), near, &mut []).unwrap_err();
        assert!(e.to_string().contains("out of bounds"), "{e}");
        let mut called = false;
        let e = src
            .lend(&ReadRequest::new(near, sluice::noop_waker()), &mut |_| {
                called = true
            })
            .unwrap_err();
        assert!(!called && e.to_string().contains("(4, 6)"), "{e}");
    }
    let crop: SharedSource = Arc::new(ArraySource::new(Array2::<u8>::zeros((4, 6))).unwrap());
    let crop = CropSource::new(crop, Region::d2(1, 1, 2, 2)).unwrap();
    assert!(read(&crop, near, &mut []).is_err());
    assert!(CropSource::new(Arc::new(crop), near).is_err());
}

#[test]
fn region_new_refuses_mismatched_axes() {
    let e = Region::new(&[1, 2], &[3]).unwrap_err();
    assert!(
        e.to_string().contains("[1, 2]") && e.to_string().contains("[3]"),
        "{e}"
    );
    assert!(Region::new(&[], &[]).is_err());
    assert!(Region::new(&[0; 4], &[1; 4]).is_err());
    assert_eq!(Region::new(&[2], &[3]).unwrap(), Region::d1(2, 3));
}

#[test]
fn array_writes_with_huge_origins_change_nothing() {
    let src = ArraySource::new(Array2::<u8>::zeros((4, 4))).unwrap();
    let v = src.version();
    let e = src
        .write(
            &[usize::MAX, usize::MAX - 1],
            Array2::<u8>::ones((2, 2)).view(),
        )
        .unwrap_err();
    assert!(e.to_string().contains("out of bounds"), "{e}");
    let e = src
        .update::<u8>(Region::d2(usize::MAX, 0, 2, 1), |_| panic!("not called"))
        .unwrap_err();
    assert!(e.to_string().contains("out of bounds"), "{e}");
    let e = src
        .update::<u8>(Region::d2(1, 1, 0, 2), |_| panic!("not called"))
        .unwrap_err();
    assert!(matches!(e, SourceError::EmptyShape { .. }), "{e}");
    assert_eq!(src.version(), v);
    assert_eq!(src.changes_since(v), Changes::None);
}

/// A user source whose layout is absurd for a GPU (2^60 bytes): rendering it is an error,
/// not a panic or an attempt to allocate it (or, for a 2-D image, it is paged: only what is
/// in view reaches the GPU).
struct Absurd(Layout);

impl DataSource for Absurd {
    fn layout(&self) -> Layout {
        self.0.clone()
    }
    fn version(&self) -> Version {
        Version::INITIAL
    }
    fn changes_since(&self, _: Version) -> Changes {
        Changes::All
    }
    fn read(&self, request: &ReadRequest<'_>, dst: &mut [u8]) -> Result<ReadStatus, SourceError> {
        sluice::check_read(&self.0, request, dst.len())?;
        dst.fill(0);
        Ok(ReadStatus::Ready)
    }
}

#[test]
fn rendering_an_absurd_layout_is_an_error() {
    let mut r = common::renderer();
    let target = r.create_target(16, 16).unwrap();
    let cam = common::pixel_camera(16, 16);
    for dims in [
        vec![1usize << 20, 1 << 20, 1 << 20],
        vec![1 << 31, 1 << 29],
        vec![1 << 40],
    ] {
        let layout = Layout::new(Shape::new(&dims).unwrap(), ElementType::U8, 1).unwrap();
        let source: SharedSource = Arc::new(Absurd(layout));
        let mut scene = Scene::new();
        if dims.len() == 3 {
            scene.add(Volume::new(source.clone()));
        } else {
            scene.add(Image::new(source.clone()));
        }
        if dims.len() == 2 {
            // Over the texture limit, a 2-D source is drawn through the virtual texture: only
            // the pages in view are uploaded, under the renderer's GPU budget.
            r.render(&scene, &cam, &target).unwrap();
            let c = r.counters();
            assert!(c.page_bytes_resident <= c.gpu_budget, "{dims:?}: {c:?}");
            continue;
        }
        let e = r.render(&scene, &cam, &target).err();
        assert!(e.is_some(), "{dims:?} rendered");
        let text = e.unwrap().to_string();
        assert!(!text.is_empty(), "{dims:?}");
    }
    // The renderer stays usable.
    let ok = Arc::new(ArraySource::new(Array2::<f32>::zeros((4, 4))).unwrap());
    let mut scene = Scene::new();
    scene.add(Image::new(ok));
    r.render(&scene, &cam, &target).unwrap();
}

/// Found by the `region_arithmetic` fuzz target: an empty region whose other axes multiply
/// past `usize::MAX` has 0 samples, not an overflow (it made `checked_len` answer `None`).
#[test]
fn fuzz_found_empty_regions_with_huge_axes_have_no_samples() {
    let r = Region {
        origin: [0; 3],
        size: [usize::MAX, usize::MAX, 0],
    };
    assert_eq!((r.checked_len(), r.len()), (Some(0), 0));
    let layout = Layout::new(Shape::d2(2, 2).unwrap(), ElementType::F32, 3).unwrap();
    assert_eq!(layout.checked_region_bytes(&r), Some(0));
}

/// A source that reports only empty changed regions after its first version.
struct EmptyChanges {
    layout: Layout,
    version: std::sync::atomic::AtomicU64,
}

impl DataSource for EmptyChanges {
    fn layout(&self) -> Layout {
        self.layout.clone()
    }
    fn version(&self) -> Version {
        Version(self.version.load(std::sync::atomic::Ordering::Acquire))
    }
    fn changes_since(&self, since: Version) -> Changes {
        if since >= self.version() {
            Changes::None
        } else if since < Version::INITIAL {
            Changes::All
        } else {
            Changes::Regions(vec![Region::d2(1, 1, 0, 3), Region::d2(4, 8, 0, 0)])
        }
    }
    fn read(&self, request: &ReadRequest<'_>, dst: &mut [u8]) -> Result<ReadStatus, SourceError> {
        sluice::check_read(&self.layout, request, dst.len())?;
        dst.fill(128);
        Ok(ReadStatus::Ready)
    }
}

#[test]
fn the_proxy_uploads_nothing_for_empty_changed_regions() {
    let mut r = common::renderer();
    let target = r.create_target(8, 4).unwrap();
    let cam = common::pixel_camera(8, 4);
    let source = Arc::new(EmptyChanges {
        layout: Layout::new(Shape::d2(4, 8).unwrap(), ElementType::U8, 1).unwrap(),
        version: std::sync::atomic::AtomicU64::new(1),
    });
    let mut scene = Scene::new();
    scene.add(Image::new(source.clone()));
    let first = r.render(&scene, &cam, &target).unwrap();
    assert_eq!(first.bytes_uploaded, 32);
    source
        .version
        .store(2, std::sync::atomic::Ordering::Release);
    let second = r.render(&scene, &cam, &target).unwrap();
    assert_eq!((second.bytes_uploaded, second.copies_issued), (0, 0));
}

/// A page side of 0, or one whose slot (the page and two border samples) overflows or passes
/// the device's 2-D texture limit, is refused when the renderer is made, naming the numbers.
#[test]
fn a_page_size_that_cannot_fit_a_texture_is_refused_naming_it() {
    for side in [0, usize::MAX, usize::MAX - 1, 1 << 40] {
        let mut options = RendererOptions::from_env().unwrap();
        options.page_size_2d = Some(side);
        let error = match Renderer::with_options(options) {
            Ok(_) => panic!("page_size_2d {side} was accepted"),
            Err(e) => e.to_string(),
        };
        assert!(
            error.contains("page_size_2d") && error.contains(&side.to_string()),
            "{error}"
        );
        assert!(error.contains("2-D texture limit is"), "{error}");
    }
    // One that fits still makes a renderer.
    let mut options = RendererOptions::from_env().unwrap();
    options.page_size_2d = Some(64);
    Renderer::with_options(options).expect("a 64-sample page fits every device");
}
