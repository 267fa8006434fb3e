//! A store still being written: zarr-python writes the chunks of an array one by one while a
//! watched lazy source is polled the way a renderer polls it; every chunk appears.

mod common;

use std::process::Command;
use std::sync::Arc;
use std::time::{Duration, Instant};

use common::{fixtures, python, value};
use sluice_core::{
    noop_waker, ChunkKey, ChunkStatus, ChunkWant, ConsumerId, DataSource, ReadRequest, ReadStatus,
};
use sluice_zarr::ZarrSource;

const CREATE: &str = r#"
import sys, zarr
zarr.create_array(sys.argv[1], shape=(64, 96), chunks=(16, 16), dtype="uint16",
                  zarr_format=3, fill_value=0, compressors=zarr.codecs.ZstdCodec(level=1))
"#;

/// Writes the chunks one at a time from the closed form (seed 41), pausing between them.
const WRITE: &str = r#"
import sys, time, numpy as np, zarr
arr = zarr.open_array(sys.argv[1], mode="r+")
idx = np.indices((64, 96)).astype(np.int64)
data = ((41 + idx[0] * 31 + idx[1] * 3) % 65536).astype("uint16")
for y in range(4):
    for x in range(6):
        arr[y*16:(y+1)*16, x*16:(x+1)*16] = data[y*16:(y+1)*16, x*16:(x+1)*16]
        time.sleep(0.02)
"#;

#[test]
fn chunks_written_while_watched_all_appear() {
    // The fixtures' check says whether zarr-python is there; this test writes its own store.
    let Some(fixture_dir) = fixtures() else {
        return;
    };
    let dir = fixture_dir.join("being_written.zarr");
    let _ = std::fs::remove_dir_all(&dir);
    let run = |script: &str| {
        let out = Command::new(python())
            .args(["-c", script, dir.to_str().unwrap()])
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
    };
    run(CREATE);

    let zarr = ZarrSource::open(dir.to_str().unwrap()).unwrap();
    let lazy = Arc::new(zarr.lazy().unwrap());
    let watcher = zarr.watch(&lazy, Duration::from_millis(20));
    let keys: Vec<ChunkKey> = (0..4)
        .flat_map(|y| (0..6).map(move |x| ChunkKey::new(0, [0, y, x])))
        .collect();
    let wants: Vec<ChunkWant> = keys.iter().map(|&k| ChunkWant::visible(k, 0.0)).collect();
    let consumer = ConsumerId::next();
    let settled = |lazy: &Arc<sluice_core::LazySource>| {
        keys.iter().all(|&k| lazy.chunk_status(k).is_resident())
    };
    lazy.request_chunks(consumer, &wants, noop_waker()).unwrap();
    let start = Instant::now();
    while !settled(&lazy) {
        assert!(
            start.elapsed() < Duration::from_secs(30),
            "the empty store did not settle"
        );
        std::thread::sleep(Duration::from_millis(5));
    }
    assert!(keys
        .iter()
        .all(|&k| matches!(lazy.chunk_status(k), ChunkStatus::Empty)));
    let version = lazy.version();

    // zarr-python writes every chunk while the source is polled, frame by frame.
    let writer = {
        let dir = dir.clone();
        std::thread::spawn(move || {
            Command::new(python())
                .args(["-c", WRITE, dir.to_str().unwrap()])
                .output()
                .unwrap()
        })
    };
    let start = Instant::now();
    loop {
        lazy.request_chunks(consumer, &wants, noop_waker()).unwrap();
        if keys
            .iter()
            .all(|&k| matches!(lazy.chunk_status(k), ChunkStatus::Ready))
        {
            break;
        }
        assert!(
            start.elapsed() < Duration::from_secs(60),
            "after 60 s: {:?}",
            keys.iter()
                .map(|&k| (k.index, lazy.chunk_status(k)))
                .collect::<Vec<_>>()
        );
        std::thread::sleep(Duration::from_millis(10));
    }
    let out = writer.join().unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(
        lazy.version() > version,
        "the source reports the chunks that appeared as changed"
    );
    assert_eq!(watcher.appeared(), 24);

    let region = lazy.layout().shape().full_region();
    let mut buf = vec![0u8; region.len() * 2];
    assert_eq!(
        lazy.read(&ReadRequest::new(region, noop_waker()), &mut buf)
            .unwrap(),
        ReadStatus::Ready
    );
    for y in 0..64u64 {
        for x in 0..96u64 {
            let i = ((y * 96 + x) * 2) as usize;
            assert_eq!(
                &buf[i..i + 2],
                value(&[y, x], 41, "uint16").as_slice(),
                "({y}, {x})"
            );
        }
    }
    drop(watcher);
}
