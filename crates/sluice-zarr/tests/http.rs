//! The same fixtures served over HTTP by a loopback server that honours Range requests (and,
//! when told, ignores them or answers errors), read through object_store.

mod common;

use std::sync::atomic::Ordering;

use common::{fixtures, manifest, value, TestServer};
use sluice_zarr::{ChunkFill, ZarrError, ZarrSource};

/// Reads every chunk of a 2-D fixture and compares it with the closed form or the fill.
fn read_all_2d(source: &ZarrSource, entry: &serde_json::Value) -> u64 {
    let dtype = entry["dtype"].as_str().unwrap();
    let seed = entry["seed"].as_i64().unwrap();
    let fill = common::fill_bytes(&entry["fill"], dtype);
    let skipped: Vec<Vec<usize>> = serde_json::from_value(entry["skipped"].clone()).unwrap();
    let level = source.level(0).unwrap();
    let grid = level.chunks.grid_size(&level.shape);
    let esize = fill.len();
    let mut decoded = 0;
    for y in 0..grid[1] {
        for x in 0..grid[2] {
            let region = source.chunk_region(0, [0, y, x]).unwrap();
            let mut buf = vec![0u8; region.len() * esize];
            let got = source.read_chunk(0, [0, y, x], &mut buf).unwrap();
            let was_skipped = skipped.contains(&vec![y, x]);
            assert_eq!(got == ChunkFill::Empty, was_skipped, "chunk ({y}, {x})");
            decoded += buf.len() as u64;
            for r in 0..region.size[1] {
                for c in 0..region.size[2] {
                    let (gy, gx) = ((region.origin[1] + r) as u64, (region.origin[2] + c) as u64);
                    let want = if was_skipped {
                        fill.clone()
                    } else {
                        value(&[gy, gx], seed, dtype)
                    };
                    let i = (r * region.size[2] + c) * esize;
                    assert_eq!(&buf[i..i + esize], want.as_slice(), "({gy}, {gx})");
                }
            }
        }
    }
    decoded
}

#[test]
fn arrays_and_sharded_arrays_read_over_http_with_ranges() {
    let Some(dir) = fixtures() else { return };
    let m = manifest(dir);
    let server = TestServer::start(dir);
    for name in ["v2_blosc.zarr", "v3_gzip.zarr"] {
        let source = ZarrSource::open(&server.url(name)).unwrap();
        read_all_2d(&source, &m[name]);
    }
    let before = server.ranged_requests.load(Ordering::Relaxed);
    let sharded = ZarrSource::open(&server.url("v3_sharded.zarr")).unwrap();
    assert!(sharded.level(0).unwrap().sharded);
    read_all_2d(&sharded, &m["v3_sharded.zarr"]);
    assert!(
        server.ranged_requests.load(Ordering::Relaxed) > before,
        "sharded inner chunks are read with ranged GETs"
    );
}

#[test]
fn one_inner_chunk_of_a_shard_fetches_far_less_than_the_shard() {
    let Some(dir) = fixtures() else { return };
    let server = TestServer::start(dir);
    let sharded = ZarrSource::open(&server.url("v3_sharded.zarr")).unwrap();
    let shard_file = dir.join("v3_sharded.zarr/c/0/0");
    let shard_bytes = std::fs::metadata(&shard_file).unwrap().len();
    let before = server.bytes_served.load(Ordering::Relaxed);
    let mut buf = vec![0u8; 32 * 32 * 2];
    assert_eq!(
        sharded.read_chunk(0, [0, 0, 0], &mut buf).unwrap(),
        ChunkFill::Filled
    );
    let fetched = server.bytes_served.load(Ordering::Relaxed) - before;
    // The shard index (16 inner chunks x 16 bytes + a checksum) and one compressed chunk.
    assert!(
        fetched * 4 < shard_bytes,
        "fetched {fetched} bytes of a {shard_bytes}-byte shard for one of its 16 inner chunks"
    );
}

#[test]
fn ome_group_over_http_reads_every_level() {
    let Some(dir) = fixtures() else { return };
    let m = &manifest(dir)["ome05.zarr"];
    let server = TestServer::start(dir);
    let source = ZarrSource::open(&server.url("ome05.zarr/")).unwrap();
    assert_eq!(source.ome_version(), Some("0.5"));
    assert_eq!(source.levels().len(), 3);
    for l in 0..3 {
        let info = source.level(l).unwrap().clone();
        let seed = m["levels"][l]["seed"].as_i64().unwrap();
        let mut buf = vec![0u8; info.shape.len() * 6];
        // Level 0 has the never-written chunk at t = 0, c = 0.
        source
            .read_region(l, info.shape.full_region(), &mut buf)
            .unwrap();
        let [d, h, w] = info.shape.padded();
        let gy = (h as u64 - 1) / 32;
        let gx = (w as u64 - 1) / 32;
        for z in 0..d as u64 {
            for y in 0..h as u64 {
                for x in 0..w as u64 {
                    for c in 0..3u64 {
                        let absent = l == 0 && c == 0 && z < 4 && y / 32 == gy && x / 32 == gx;
                        let want = if absent {
                            vec![0, 0]
                        } else {
                            value(&[0, c, z, y, x], seed, "uint16")
                        };
                        let i = ((((z * h as u64 + y) * w as u64 + x) * 3 + c) * 2) as usize;
                        assert_eq!(
                            &buf[i..i + 2],
                            want.as_slice(),
                            "level {l} ({z},{y},{x}) c {c}"
                        );
                    }
                }
            }
        }
    }
}

#[test]
fn a_server_ignoring_range_is_named_as_such() {
    let Some(dir) = fixtures() else { return };
    let server = TestServer::start(dir);
    server.faults.ignore_range.store(true, Ordering::Relaxed);
    // zarrs reads metadata with ranged GETs too, so opening already fails, naming the key.
    let e = match ZarrSource::open(&server.url("v3_sharded.zarr")) {
        Err(e) => e,
        Ok(sharded) => {
            let mut buf = vec![0u8; 32 * 32 * 2];
            sharded.read_chunk(0, [0, 0, 0], &mut buf).unwrap_err()
        }
    };
    assert!(matches!(e, ZarrError::RangeIgnored { .. }), "{e:?}");
    let text = e.to_string();
    assert!(
        text.contains("ignores HTTP Range") && text.contains("v3_sharded.zarr"),
        "{text}"
    );
}

#[test]
fn http_errors_name_the_url_and_status_and_missing_chunks_are_empty() {
    let Some(dir) = fixtures() else { return };
    let server = TestServer::start(dir);
    let source = ZarrSource::open(&server.url("v2_gzip.zarr")).unwrap();
    server
        .faults
        .status
        .lock()
        .unwrap()
        .insert("/v2_gzip.zarr/0.1".to_string(), 503);
    let mut buf = vec![0u8; 64 * 64];
    let e = source.read_chunk(0, [0, 0, 1], &mut buf).unwrap_err();
    match &e {
        ZarrError::Remote { url, status, .. } => {
            assert_eq!(*status, Some(503), "{e}");
            assert!(url.ends_with("v2_gzip.zarr/0.1"), "{url}");
        }
        other => panic!("expected a remote error, got {other:?}"),
    }
    assert!(e.to_string().contains("503"), "{e}");
    // The chunk the script left out answers 404: the fill value, not an error.
    assert_eq!(
        source.read_chunk(0, [0, 1, 2], &mut buf).unwrap(),
        ChunkFill::Empty
    );
    assert!(buf.iter().all(|&b| b == 7));
    // Nothing at all at a URL: an error naming it.
    let e = ZarrSource::open(&server.url("absent.zarr")).unwrap_err();
    assert!(e.to_string().contains("absent.zarr"), "{e}");
}
