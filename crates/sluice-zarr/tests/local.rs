//! Zarr v2/v3 arrays and OME-Zarr groups written by zarr-python, read from a local directory
//! and checked sample by sample against the closed form they were written from.

mod common;

use common::{fill_bytes, fixtures, manifest, value};
use sluice_zarr::{AxisKind, ChunkFill, OpenOptions, Selection, ZarrError, ZarrSource};

/// Reads every chunk of a plain 2-D or 3-D fixture array and compares each sample with the
/// closed form, or with the fill value where the script left the chunk out.
fn check_plain(source: &ZarrSource, entry: &serde_json::Value) {
    let dtype = entry["dtype"].as_str().unwrap();
    let seed = entry["seed"].as_i64().unwrap();
    let fill = fill_bytes(&entry["fill"], dtype);
    let skipped: Vec<Vec<usize>> = serde_json::from_value(entry["skipped"].clone()).unwrap();
    let shape: Vec<usize> = serde_json::from_value(entry["shape"].clone()).unwrap();
    let level = source.level(0).unwrap();
    assert_eq!(level.shape.dims(), shape.as_slice());
    let grid = level.chunks.grid_size(&level.shape);
    let esize = fill.len();
    let pad = 3 - shape.len();
    let mut empties = 0;
    for z in 0..grid[0] {
        for y in 0..grid[1] {
            for x in 0..grid[2] {
                let idx = [z, y, x];
                let region = source.chunk_region(0, idx).unwrap();
                let mut buf = vec![0u8; region.len() * esize];
                let fillkind = source.read_chunk(0, idx, &mut buf).unwrap();
                let was_skipped = skipped.contains(&idx[pad..].to_vec());
                assert_eq!(
                    fillkind == ChunkFill::Empty,
                    was_skipped,
                    "chunk {idx:?} of {}",
                    source.location()
                );
                empties += usize::from(was_skipped);
                let mut i = 0;
                for a in 0..region.size[0] {
                    for b in 0..region.size[1] {
                        for c in 0..region.size[2] {
                            let full = [
                                region.origin[0] + a,
                                region.origin[1] + b,
                                region.origin[2] + c,
                            ];
                            let index: Vec<u64> = full[pad..].iter().map(|&v| v as u64).collect();
                            let want = if was_skipped {
                                fill.clone()
                            } else {
                                value(&index, seed, dtype)
                            };
                            assert_eq!(
                                &buf[i..i + esize],
                                want.as_slice(),
                                "sample {index:?} of {}",
                                source.location()
                            );
                            i += esize;
                        }
                    }
                }
            }
        }
    }
    assert_eq!(empties, skipped.len(), "{}", source.location());
}

#[test]
fn v2_and_v3_arrays_with_every_codec_read_exactly() {
    let Some(dir) = fixtures() else { return };
    let m = manifest(dir);
    for name in [
        "v2_blosc.zarr",
        "v2_zstd.zarr",
        "v2_gzip.zarr",
        "v3_blosc.zarr",
        "v3_zstd.zarr",
        "v3_gzip.zarr",
        "v3_volume.zarr",
    ] {
        let source = ZarrSource::open(dir.join(name).to_str().unwrap()).unwrap();
        assert_eq!(source.levels().len(), 1);
        assert_eq!(source.channels(), 1);
        assert!(source.ome_version().is_none());
        check_plain(&source, &m[name]);
    }
}

#[test]
fn edge_chunks_are_clipped_to_the_shape() {
    let Some(dir) = fixtures() else { return };
    let source = ZarrSource::open(dir.join("v2_blosc.zarr").to_str().unwrap()).unwrap();
    // 300 x 500 in 64 x 64 chunks: the corner chunk is 300 - 256 = 44 by 500 - 448 = 52.
    let corner = source.chunk_region(0, [0, 4, 7]).unwrap();
    assert_eq!((corner.origin, corner.size), ([0, 256, 448], [1, 44, 52]));
    let mut too_big = vec![0u8; 64 * 64 * 2];
    let e = source.read_chunk(0, [0, 4, 7], &mut too_big).unwrap_err();
    assert!(
        matches!(
            e,
            ZarrError::BufferSize {
                expected: 4576,
                got: 8192,
                ..
            }
        ),
        "{e}"
    );
    let e = source.read_chunk(0, [0, 5, 0], &mut too_big).unwrap_err();
    assert!(
        e.to_string().contains("[0, 5, 0]") && e.to_string().contains("[1, 5, 8]"),
        "{e}"
    );
}

#[test]
fn a_region_across_chunks_and_a_missing_one_reads_exactly() {
    let Some(dir) = fixtures() else { return };
    let m = manifest(dir);
    let source = ZarrSource::open(dir.join("v3_zstd.zarr").to_str().unwrap()).unwrap();
    // Rows 50..150, columns 100..200 touch chunks (0..3, 1..4), including the skipped (1, 2).
    let region = sluice_core::Region::d2(50, 100, 100, 100);
    let mut buf = vec![0u8; region.len() * 2];
    assert!(source.read_region(0, region, &mut buf).unwrap());
    let seed = m["v3_zstd.zarr"]["seed"].as_i64().unwrap();
    let fill = fill_bytes(&m["v3_zstd.zarr"]["fill"], "int16");
    for r in 0..100u64 {
        for c in 0..100u64 {
            let (y, x) = (50 + r, 100 + c);
            let skipped = y / 64 == 1 && x / 64 == 2;
            let want = if skipped {
                fill.clone()
            } else {
                value(&[y, x], seed, "int16")
            };
            let i = ((r * 100 + c) * 2) as usize;
            assert_eq!(&buf[i..i + 2], want.as_slice(), "sample ({y}, {x})");
        }
    }
}

#[test]
fn sharded_arrays_read_by_inner_chunk_and_missing_ones_are_empty() {
    let Some(dir) = fixtures() else { return };
    let m = manifest(dir);
    let source = ZarrSource::open(dir.join("v3_sharded.zarr").to_str().unwrap()).unwrap();
    let level = source.level(0).unwrap();
    assert!(level.sharded);
    assert_eq!(level.chunks.chunk_size(), [1, 32, 32]);
    check_plain(&source, &m["v3_sharded.zarr"]);
}

#[test]
fn ome_05_tczyx_levels_map_scale_and_translation() {
    let Some(dir) = fixtures() else { return };
    let m = &manifest(dir)["ome05.zarr"];
    let source = ZarrSource::open(dir.join("ome05.zarr").to_str().unwrap()).unwrap();
    assert_eq!(source.ome_version(), Some("0.5"));
    let kinds: Vec<AxisKind> = source.axes().iter().map(|a| a.kind).collect();
    use AxisKind::*;
    assert_eq!(kinds, [Time, Channel, Space, Space, Space]);
    // Three channels: all of them, interleaved, by default.
    assert_eq!(
        source.selection(),
        &Selection {
            time: 0,
            channels: vec![0, 1, 2]
        }
    );
    let levels: Vec<_> = source.levels().cloned().collect();
    assert_eq!(levels.len(), 3);
    assert_eq!(levels[0].shape.dims(), [10, 72, 100]);
    assert_eq!(levels[1].shape.dims(), [5, 36, 50]);
    assert_eq!(levels[2].shape.dims(), [3, 18, 25]);
    assert_eq!(levels[1].downsample, [2.0; 3]);
    assert_eq!(levels[2].downsample, [4.0; 3]);
    // Translations 0.25 (level 1) and 0.75 (level 2) at a level-0 scale of 0.5 put the centres
    // where a 2x (4x) mean puts them: the corners line up with level 0's.
    assert_eq!(levels[1].offset, [0.0; 3]);
    assert_eq!(levels[2].offset, [0.0; 3]);
    assert_eq!(levels[0].chunks.chunk_size(), [4, 32, 32]);

    // Time point 1, channels 2 and 0 interleaved in that order, every chunk of every level.
    let picked = source
        .with_selection(Selection {
            time: 1,
            channels: vec![2, 0],
        })
        .unwrap();
    for (l, info) in levels.iter().enumerate() {
        let lm = &m["levels"][l];
        let seed = lm["seed"].as_i64().unwrap();
        let grid = info.chunks.grid_size(&info.shape);
        for z in 0..grid[0] {
            for y in 0..grid[1] {
                for x in 0..grid[2] {
                    let region = picked.chunk_region(l, [z, y, x]).unwrap();
                    let mut buf = vec![0u8; region.len() * 4];
                    let got = picked.read_chunk(l, [z, y, x], &mut buf).unwrap();
                    // Skipped chunks are at t = 0 and c = 0 only: here (t = 1) all are stored.
                    assert_eq!(got, ChunkFill::Filled);
                    let mut i = 0;
                    for a in 0..region.size[0] as u64 {
                        for b in 0..region.size[1] as u64 {
                            for c in 0..region.size[2] as u64 {
                                let [oz, oy, ox] = region.origin.map(|v| v as u64);
                                for ch in [2u64, 0] {
                                    let want =
                                        value(&[1, ch, oz + a, oy + b, ox + c], seed, "uint16");
                                    assert_eq!(
                                        &buf[i..i + 2],
                                        want.as_slice(),
                                        "level {l} c {ch} ({a},{b},{c}) of chunk {:?}",
                                        [z, y, x]
                                    );
                                    i += 2;
                                }
                            }
                        }
                    }
                }
            }
        }
    }

    // At t = 0, c = 0 the last chunk of the first plane was never written: the fill, Empty.
    let first = source
        .with_selection(Selection {
            time: 0,
            channels: vec![0],
        })
        .unwrap();
    let g = levels[0].chunks.grid_size(&levels[0].shape);
    let idx = [0, g[1] - 1, g[2] - 1];
    let region = first.chunk_region(0, idx).unwrap();
    let mut buf = vec![1u8; region.len() * 2];
    assert_eq!(
        first.read_chunk(0, idx, &mut buf).unwrap(),
        ChunkFill::Empty
    );
    assert!(buf.iter().all(|&b| b == 0));
    // With channel 1 beside it, the chunk has data, and channel 0's samples are the fill.
    let two = source
        .with_selection(Selection {
            time: 0,
            channels: vec![0, 1],
        })
        .unwrap();
    let mut buf = vec![1u8; region.len() * 4];
    assert_eq!(two.read_chunk(0, idx, &mut buf).unwrap(), ChunkFill::Filled);
    let [oz, oy, ox] = region.origin.map(|v| v as u64);
    assert_eq!(&buf[0..2], &[0, 0]);
    assert_eq!(
        &buf[2..4],
        value(&[0, 1, oz, oy, ox], 21, "uint16").as_slice()
    );
}

#[test]
fn ome_04_planar_channels_interleave() {
    let Some(dir) = fixtures() else { return };
    let m = &manifest(dir)["ome04.zarr"];
    let source = ZarrSource::open(dir.join("ome04.zarr").to_str().unwrap()).unwrap();
    assert_eq!(source.ome_version(), Some("0.4"));
    assert_eq!(source.channels(), 2);
    let levels: Vec<_> = source.levels().cloned().collect();
    assert_eq!(levels[0].shape.dims(), [90, 130]);
    assert_eq!(levels[1].shape.dims(), [45, 65]);
    assert_eq!(levels[1].downsample, [1.0, 2.0, 2.0]);
    // Every level is shifted by 10.0 (that cancels) and level 1 by 1.0 more on x: two level-0
    // samples at a scale of 0.5.
    assert_eq!(levels[1].offset, [0.0, 0.0, 2.0]);
    for l in 0..2 {
        let seed = m["levels"][l]["seed"].as_i64().unwrap();
        let shape = levels[l].shape;
        let mut buf = vec![0u8; shape.len() * 4];
        source
            .read_region(l, shape.full_region(), &mut buf)
            .unwrap();
        let skipped: Vec<Vec<u64>> =
            serde_json::from_value(m["levels"][l]["skipped"].clone()).unwrap();
        for y in 0..shape.height() as u64 {
            for x in 0..shape.width() as u64 {
                for ch in 0..2u64 {
                    let in_skipped = skipped
                        .iter()
                        .any(|s| s[0] == ch && s[1] == y / 40 && s[2] == x / 40);
                    let want = if in_skipped {
                        vec![0, 0]
                    } else {
                        value(&[ch, y, x], seed, "uint16")
                    };
                    let i = (((y * shape.width() as u64 + x) * 2 + ch) * 2) as usize;
                    assert_eq!(
                        &buf[i..i + 2],
                        want.as_slice(),
                        "level {l} ({y}, {x}) c {ch}"
                    );
                }
            }
        }
    }
}

#[test]
fn bad_selections_and_locations_name_the_numbers() {
    let Some(dir) = fixtures() else { return };
    let path = dir.join("ome05.zarr");
    let source = ZarrSource::open(path.to_str().unwrap()).unwrap();
    let e = source
        .with_selection(Selection {
            time: 2,
            channels: vec![0],
        })
        .unwrap_err();
    assert_eq!(
        e.to_string(),
        "time point 2 selected; the time axis has 2 point(s)"
    );
    let e = source
        .with_selection(Selection {
            time: 0,
            channels: vec![3],
        })
        .unwrap_err();
    assert!(
        e.to_string().contains("[3]") && e.to_string().contains("3 channel(s)"),
        "{e}"
    );
    let e = source
        .with_selection(Selection {
            time: 0,
            channels: vec![0; 5],
        })
        .unwrap_err();
    assert!(e.to_string().contains("1 to 4"), "{e}");
    let options = OpenOptions {
        channels: Some(vec![]),
        ..OpenOptions::default()
    };
    assert!(ZarrSource::open_with(path.to_str().unwrap(), &options).is_err());
    let e = source.level(3).unwrap_err();
    assert_eq!(
        e.to_string(),
        "level 3 requested; the source has 3 level(s)"
    );
    let missing = dir.join("nothing-here.zarr");
    let e = ZarrSource::open(missing.to_str().unwrap()).unwrap_err();
    assert!(e.to_string().contains("nothing-here.zarr"), "{e}");
    let e = ZarrSource::open("gs://bucket/x.zarr").unwrap_err();
    assert!(e.to_string().contains("gs://"), "{e}");
}
