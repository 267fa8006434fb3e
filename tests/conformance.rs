//! Every built-in source passes the public conformance check (`sluice::testing`), and the
//! check catches a source that breaks the contract.

use std::sync::Arc;

use sluice::ndarray::{Array1, Array2, Array3, ArrayView, IxDyn};
use sluice::prelude::*;
use sluice::testing::{check_source, check_writes};
use sluice::{Changes, ChunkGrid, HostView, LendOutcome, ReadRequest, ReadStatus};

fn passes(source: &dyn DataSource) -> usize {
    match check_source(source) {
        Ok(report) => {
            assert!(report.skipped.is_empty(), "{:?}", report.skipped);
            report.checks
        }
        Err(failures) => panic!("{failures}"),
    }
}

/// Writes packed bytes into an `ArraySource` of `T` through its own `write`.
fn writer<T: sluice::Element>(
    src: &ArraySource,
    channels: bool,
) -> impl FnMut(Region, &[u8]) -> Result<Version, SourceError> + '_ {
    move |region, bytes| {
        let layout = src.layout();
        let ndim = layout.shape().ndim();
        let mut dims = region.size[3 - ndim..].to_vec();
        if channels {
            dims.push(layout.channels());
        }
        let values: Vec<T> = bytemuck::pod_collect_to_vec(bytes);
        let view = ArrayView::from_shape(IxDyn(&dims), &values).unwrap();
        src.write(&region.origin[3 - ndim..], view)
    }
}

#[test]
fn array_sources_pass_read_and_write_checks() {
    let image = ArraySource::new(Array2::from_shape_fn((13, 17), |(r, c)| {
        (r * 17 + c) as u16
    }))
    .unwrap()
    .with_chunks(ChunkGrid::new(&[4, 4]).unwrap());
    assert!(passes(&image) > 50);
    let checks = check_writes(&image, &mut writer::<u16>(&image, false)).unwrap();
    assert!(checks.checks > 50, "{checks:?}");

    let rgb = ArraySource::with_channels(Array3::<u8>::from_shape_fn((5, 6, 3), |(r, c, k)| {
        (r * 18 + c * 3 + k) as u8
    }))
    .unwrap();
    passes(&rgb);
    check_writes(&rgb, &mut writer::<u8>(&rgb, true)).unwrap();

    let volume = ArraySource::new(Array3::from_shape_fn((4, 5, 6), |(z, y, x)| {
        (z * 30 + y * 6 + x) as f32
    }))
    .unwrap();
    passes(&volume);
    check_writes(&volume, &mut writer::<f32>(&volume, false)).unwrap();

    let line = ArraySource::new(Array1::from_vec(vec![1i32; 1])).unwrap();
    passes(&line);
    check_writes(&line, &mut writer::<i32>(&line, false)).unwrap();
}

#[test]
fn mmap_and_crop_sources_pass() {
    let dir = tempfile::tempdir().unwrap();
    let data: Vec<u16> = (0..7 * 9).map(|i| i as u16 * 3).collect();
    let mut npy = sluice::npy_header(ElementType::U16, &[7, 9]);
    npy.extend_from_slice(bytemuck::cast_slice(&data));
    let path = dir.path().join("a.npy");
    std::fs::write(&path, &npy).unwrap();
    let mapped = MmapSource::open_npy(&path).unwrap();
    passes(&mapped);

    let raw_path = dir.path().join("a.raw");
    let mut raw = vec![0xAB; 5];
    raw.extend(data.iter().flat_map(|v| v.to_le_bytes()));
    std::fs::write(&raw_path, &raw).unwrap();
    let layout = Layout::new(Shape::new(&[3, 21]).unwrap(), ElementType::U16, 1).unwrap();
    let raw = MmapSource::open_raw(&raw_path, layout, 5).unwrap();
    passes(&raw);

    let volume: SharedSource = Arc::new(
        ArraySource::new(Array3::from_shape_fn((4, 5, 6), |(z, y, x)| {
            (z * 30 + y * 6 + x) as u8
        }))
        .unwrap(),
    );
    passes(&CropSource::plane(volume.clone(), 2).unwrap());
    let window = Region::new(&[1, 1, 2], &[2, 3, 3]).unwrap();
    passes(&CropSource::new(volume, window).unwrap());
}

/// A user source that ignores the destination's length and the level: the check must say so.
struct Careless {
    data: Vec<u8>,
}

impl DataSource for Careless {
    fn layout(&self) -> Layout {
        Layout::new(Shape::d2(4, 4).unwrap(), ElementType::U8, 1).unwrap()
    }
    fn version(&self) -> Version {
        Version::INITIAL
    }
    fn changes_since(&self, _: Version) -> Changes {
        Changes::All
    }
    fn read(&self, request: &ReadRequest<'_>, dst: &mut [u8]) -> Result<ReadStatus, SourceError> {
        request.region.check_within(&self.layout().shape())?;
        // Copies what fits: no length check, no level check.
        let n = dst.len().min(self.data.len());
        dst[..n].copy_from_slice(&self.data[..n]);
        Ok(ReadStatus::Ready)
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
fn the_check_names_what_a_careless_source_gets_wrong() {
    let failures = check_source(&Careless {
        data: (0..16).collect(),
    })
    .unwrap_err();
    let text = failures.to_string();
    assert!(text.contains("a destination one byte long"), "{text}");
    assert!(text.contains("a level that does not exist"), "{text}");
    assert!(text.contains("differs from the same part"), "{text}");
}

/// A lazy source passes once its chunks are resident: a two-level procedural source whose
/// every level is read until ready first, so that no data check is skipped.
#[test]
fn a_lazy_procedural_source_passes_once_resident() {
    use std::time::{Duration, Instant};

    use sluice::{
        ChunkCache, ChunkFill, Layout, LazyOptions, LazySource, Level, LoaderPool, ProceduralLoader,
    };

    let layout = Layout::new(Shape::new(&[12, 20]).unwrap(), ElementType::U16, 1)
        .unwrap()
        .with_chunks(ChunkGrid::new(&[5, 8]).unwrap())
        .with_levels([Level::new(Shape::new(&[6, 10]).unwrap(), [1.0, 2.0, 2.0])
            .with_chunks(ChunkGrid::new(&[4, 4]).unwrap())])
        .unwrap();
    let loader = ProceduralLoader::new(layout.clone(), |key, region, dst| {
        for (i, v) in dst.chunks_exact_mut(2).enumerate() {
            let (r, c) = (i / region.size[2], i % region.size[2]);
            let value =
                (key.level * 1000 + (region.origin[1] + r) * 40 + region.origin[2] + c) as u16;
            v.copy_from_slice(&value.to_le_bytes());
        }
        Ok(ChunkFill::Filled)
    });
    let options = LazyOptions::with_pool(LoaderPool::new(2).unwrap(), ChunkCache::new(1 << 20));
    let lazy = LazySource::with_options(loader, options).unwrap();
    for (level, l) in layout.levels().iter().enumerate() {
        let region = l.shape.full_region();
        let mut dst = vec![0u8; region.len() * 2];
        let request = ReadRequest {
            level,
            region,
            waker: sluice::noop_waker(),
        };
        let deadline = Instant::now() + Duration::from_secs(20);
        while lazy.read(&request, &mut dst).unwrap() != ReadStatus::Ready {
            assert!(
                Instant::now() < deadline,
                "level {level} never became resident"
            );
            std::thread::sleep(Duration::from_millis(2));
        }
    }
    assert!(passes(&lazy) > 50);
}
