//! Zarr sources as lazy `DataSource`s on sluice's loader pool: requested chunks load off the
//! caller's thread, missing chunks are Empty (the fill), remote failures end Failed with
//! their status after the retries.

mod common;

use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use common::{fixtures, manifest, value, TestServer};
use sluice_core::{
    noop_waker, ChunkCache, ChunkKey, ChunkStatus, ChunkWant, ConsumerId, DataSource, LazyOptions,
    LoaderPool, ReadRequest, ReadStatus, RetryPolicy, SourceError,
};
use sluice_zarr::ZarrSource;

/// Requests every chunk of `level` and waits (polling, never inside a read) until none is
/// queued or loading; returns the statuses.
fn load_level(source: &dyn DataSource, level: usize) -> Vec<(ChunkKey, ChunkStatus)> {
    let layout = source.layout();
    let info = layout.levels()[level];
    let grid = info.chunks.grid_size(&info.shape);
    let mut wants = Vec::new();
    for z in 0..grid[0] {
        for y in 0..grid[1] {
            for x in 0..grid[2] {
                wants.push(ChunkWant::visible(ChunkKey::new(level, [z, y, x]), 0.0));
            }
        }
    }
    let consumer = ConsumerId::next();
    source
        .request_chunks(consumer, &wants, noop_waker())
        .unwrap();
    let start = Instant::now();
    loop {
        let statuses: Vec<_> = wants
            .iter()
            .map(|w| (w.key, source.chunk_status(w.key)))
            .collect();
        if statuses.iter().all(|(_, s)| !s.is_pending()) {
            return statuses;
        }
        assert!(
            start.elapsed() < Duration::from_secs(60),
            "chunks still loading after 60 s"
        );
        std::thread::sleep(Duration::from_millis(5));
    }
}

#[test]
fn open_gives_a_lazy_data_source_whose_chunks_load_on_the_pool() {
    let Some(dir) = fixtures() else { return };
    let m = &manifest(dir)["v2_blosc.zarr"];
    let source = sluice_zarr::open(dir.join("v2_blosc.zarr").to_str().unwrap()).unwrap();
    assert!(source.is_lazy());
    let layout = source.layout();
    assert_eq!(layout.shape().dims(), [300, 500]);
    assert_eq!(layout.chunks().chunk_size(), [1, 64, 64]);
    let region = layout.shape().full_region();
    let mut buf = vec![0u8; layout.region_bytes(&region)];
    // Nothing is loaded yet: the read answers pending and queues what it touches.
    let request = ReadRequest::new(region, noop_waker());
    assert_eq!(
        source.read(&request, &mut buf).unwrap(),
        ReadStatus::Pending
    );
    let statuses = load_level(&source, 0);
    let empties: Vec<[usize; 3]> = statuses
        .iter()
        .filter(|(_, s)| matches!(s, ChunkStatus::Empty))
        .map(|(k, _)| k.index)
        .collect();
    assert_eq!(empties, [[0, 1, 2], [0, 4, 7]]);
    assert!(
        statuses.iter().all(|(_, s)| s.is_resident()),
        "{statuses:?}"
    );
    assert_eq!(source.read(&request, &mut buf).unwrap(), ReadStatus::Ready);
    for y in 0..300u64 {
        for x in 0..500u64 {
            let skipped = (y / 64, x / 64) == (1, 2) || (y / 64, x / 64) == (4, 7);
            let want = if skipped {
                7u16.to_le_bytes().to_vec()
            } else {
                value(&[y, x], m["seed"].as_i64().unwrap(), "uint16")
            };
            let i = ((y * 500 + x) * 2) as usize;
            assert_eq!(&buf[i..i + 2], want.as_slice(), "({y}, {x})");
        }
    }
}

#[test]
fn ome_levels_reach_the_layout_with_their_grids_and_offsets() {
    let Some(dir) = fixtures() else { return };
    let zarr = ZarrSource::open(dir.join("ome04.zarr").to_str().unwrap()).unwrap();
    let lazy = zarr.lazy().unwrap();
    let layout = lazy.layout();
    assert_eq!(layout.channels(), 2);
    assert_eq!(layout.levels().len(), 2);
    let l1 = layout.levels()[1];
    assert_eq!(l1.shape.dims(), [45, 65]);
    assert_eq!(l1.downsample, [1.0, 2.0, 2.0]);
    assert_eq!(l1.offset, [0.0, 0.0, 2.0]);
    assert_eq!(l1.chunks.chunk_size(), [1, 40, 40]);
    let statuses = load_level(&lazy, 1);
    assert!(
        statuses
            .iter()
            .all(|(_, s)| matches!(s, ChunkStatus::Ready)),
        "{statuses:?}"
    );
}

#[test]
fn a_failing_server_ends_failed_with_its_status_after_the_retries() {
    let Some(dir) = fixtures() else { return };
    let server = TestServer::start(dir);
    let zarr = ZarrSource::open(&server.url("v2_gzip.zarr")).unwrap();
    server
        .faults
        .status
        .lock()
        .unwrap()
        .insert("/v2_gzip.zarr/0.0".into(), 503);
    server
        .faults
        .status
        .lock()
        .unwrap()
        .insert("/v2_gzip.zarr/0.1".into(), 403);
    let mut options = LazyOptions::with_pool(LoaderPool::new(2).unwrap(), ChunkCache::new(1 << 24));
    options.retry = RetryPolicy {
        attempts: 3,
        backoff: Duration::from_millis(10),
        max_backoff: Duration::from_millis(20),
    };
    let lazy = zarr.lazy_with(options).unwrap();
    let before = server.requests.load(Ordering::Relaxed);
    let statuses = load_level(&lazy, 0);
    let status_of = |index| {
        statuses
            .iter()
            .find(|(k, _)| k.index == index)
            .unwrap()
            .1
            .clone()
    };
    match status_of([0, 0, 0]) {
        ChunkStatus::Failed(f) => {
            assert_eq!(f.attempts, 3, "503 is transient: retried");
            match &*f.error {
                SourceError::Remote {
                    url_or_key, status, ..
                } => {
                    assert_eq!(*status, Some(503));
                    assert!(url_or_key.ends_with("v2_gzip.zarr/0.0"), "{url_or_key}");
                }
                other => panic!("expected a remote error, got {other}"),
            }
        }
        other => panic!("expected Failed, got {other:?}"),
    }
    match status_of([0, 0, 1]) {
        ChunkStatus::Failed(f) => assert_eq!(f.attempts, 1, "403 is final: {}", f.error),
        other => panic!("expected Failed, got {other:?}"),
    }
    assert!(matches!(status_of([0, 1, 2]), ChunkStatus::Empty));
    assert!(matches!(status_of([0, 2, 2]), ChunkStatus::Ready));
    // 40 chunks: 38 fetched once, 0.0 three times, 0.1 once.
    let made = server.requests.load(Ordering::Relaxed) - before;
    assert_eq!(made, 38 + 3 + 1, "requests made");
}
