//! Fuzz targets on the stable toolchain: a bounded driver (a seeded xorshift generator, no
//! extra crates) runs each target for a number of generated cases and checks every outcome
//! against an oracle computed independently (in u128 where sizes could overflow).
//!
//! - `npy_header`: mutated and generated `.npy` files through `MmapSource::open_npy`;
//! - `raw_layout`: shapes, element types, channels, offsets and file sizes through
//!   `Shape::new`, `Layout::new` and `MmapSource::open_raw`;
//! - `region_arithmetic`: regions near 0, the shape's edges and `usize::MAX` through bounds
//!   checks, formatting, intersection, union, chunk arithmetic and upload planning;
//! - `write_read`: writes, updates, reads and lends on `ArraySource` against a model array.
//!
//! CI runs `SLUICE_FUZZ_CASES` cases per target (default 1000 here); `just fuzz` runs many more
//! in release. A failing case prints its seed: replay it with `SLUICE_FUZZ_SEED=<seed>
//! SLUICE_FUZZ_CASES=1`, and keep it as a regression test in tests/hostile.rs.

use std::panic::{catch_unwind, AssertUnwindSafe};

use sluice::ndarray::{ArrayView, IxDyn};
use sluice::prelude::*;
use sluice::{plan_chunked, Changes, ChunkGrid, LendOutcome, ReadRequest, ReadStatus};

/// xorshift64*: small, seedable, good enough to spread cases.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }
    fn below(&mut self, n: usize) -> usize {
        (self.next() % n.max(1) as u64) as usize
    }
    fn chance(&mut self, percent: usize) -> bool {
        self.below(100) < percent
    }
    fn pick<T: Copy>(&mut self, items: &[T]) -> T {
        items[self.below(items.len())]
    }
    /// A size drawn to hit edges: small numbers, around `dim`, powers of two, near MAX.
    fn edgy(&mut self, dim: usize) -> usize {
        match self.below(8) {
            0 => 0,
            1 => 1,
            2 => dim,
            3 => dim.saturating_add(1),
            4 => dim.saturating_sub(1),
            5 => 1usize << self.below(64),
            6 => usize::MAX - self.below(3),
            _ => self.below(dim.saturating_add(2).min(1 << 20)),
        }
    }
}

fn cases() -> usize {
    std::env::var("SLUICE_FUZZ_CASES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(1000)
}

/// Runs `case` for each seed; a panic (a failed oracle assertion or a bug) names the target,
/// case and seed.
fn drive(target: &str, mut case: impl FnMut(&mut Rng)) {
    let base: u64 = std::env::var("SLUICE_FUZZ_SEED")
        .ok()
        .and_then(|v| {
            v.trim_start_matches("0x")
                .parse::<u64>()
                .ok()
                .or_else(|| u64::from_str_radix(v.trim_start_matches("0x"), 16).ok())
        })
        .unwrap_or(0x5EED_0000);
    let n = cases();
    for i in 0..n as u64 {
        let seed = base.wrapping_add(i);
        let mut rng = Rng(seed.wrapping_mul(0x9e37_79b9_7f4a_7c15) | 1);
        if let Err(panic) = catch_unwind(AssertUnwindSafe(|| case(&mut rng))) {
            let message = panic
                .downcast_ref::<String>()
                .cloned()
                .or_else(|| panic.downcast_ref::<&str>().map(|s| s.to_string()))
                .unwrap_or_default();
            panic!(
                "fuzz target {target}: case {i} failed (replay: SLUICE_FUZZ_SEED={seed} SLUICE_FUZZ_CASES=1): {message}"
            );
        }
    }
    eprintln!("fuzz target {target}: {n} cases, no failure");
}

const ELEMENTS: [ElementType; 9] = [
    ElementType::U8,
    ElementType::I8,
    ElementType::U16,
    ElementType::I16,
    ElementType::U32,
    ElementType::I32,
    ElementType::F16,
    ElementType::F32,
    ElementType::F64,
];

fn oracle_total(dims: &[usize], element_size: usize, channels: usize) -> u128 {
    dims.iter()
        .fold(1u128, |n, &d| n.saturating_mul(d as u128))
        .saturating_mul((element_size * channels) as u128)
}

/// A `.npy` file generated, then mutated.
fn npy_bytes(rng: &mut Rng) -> Vec<u8> {
    let descrs = [
        "<u1", "|u1", "<i2", ">i2", "<f4", "<f8", "<c8", "<u8", "f", "d", "e", "B", "", "<", "<f",
        "|V16",
    ];
    let ndim = rng.below(5);
    let dims: Vec<String> = (0..ndim)
        .map(|_| match rng.below(6) {
            0 => rng.edgy(8).to_string(),
            1 => "-1".into(),
            2 => "x".into(),
            3 => format!("{}L", rng.below(9)),
            4 => "340282366920938463463374607431768211456".into(),
            _ => (1 + rng.below(6)).to_string(),
        })
        .collect();
    let shape = match dims.len() {
        1 if rng.chance(70) => format!("({},)", dims[0]),
        _ => format!("({})", dims.join(", ")),
    };
    let fortran = rng.pick(&["False", "True", "0", "False"]);
    let mut dict = format!(
        "{{'descr': '{}', 'fortran_order': {fortran}, 'shape': {shape}, }}",
        rng.pick(&descrs)
    );
    if rng.chance(10) {
        dict = dict.replace("'shape'", "'shap'");
    }
    if rng.chance(10) {
        dict.insert(
            rng.below(dict.len()),
            rng.pick(&['(', ')', '\'', '"', ',', '}', '\u{e9}']),
        );
    }
    let major = rng.pick(&[1u8, 1, 2, 3, 0, 9]);
    let mut out = b"\x93NUMPY".to_vec();
    out.extend_from_slice(&[major, 0]);
    let declared = if rng.chance(90) {
        dict.len()
    } else {
        rng.edgy(dict.len())
    };
    if major == 1 {
        out.extend_from_slice(&(declared as u16).to_le_bytes());
    } else {
        out.extend_from_slice(&(declared as u32).to_le_bytes());
    }
    out.extend_from_slice(dict.as_bytes());
    out.extend((0..rng.below(200)).map(|_| rng.next() as u8));
    // Mutations: cut, flip, splice.
    for _ in 0..rng.below(3) {
        match rng.below(3) {
            0 => out.truncate(rng.below(out.len() + 1)),
            1 if !out.is_empty() => {
                let i = rng.below(out.len());
                out[i] ^= 1 << rng.below(8);
            }
            _ => {
                let i = rng.below(out.len() + 1);
                out.insert(i, rng.next() as u8);
            }
        }
    }
    out
}

#[test]
fn fuzz_npy_header() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("fuzz.npy");
    drive("npy_header", |rng| {
        let bytes = npy_bytes(rng);
        std::fs::write(&path, &bytes).unwrap();
        for channels in [false, true] {
            let opened = if channels {
                MmapSource::open_npy_with_channels(&path)
            } else {
                MmapSource::open_npy(&path)
            };
            match opened {
                Err(e) => {
                    let text = e.to_string();
                    assert!(
                        text.contains("fuzz.npy"),
                        "an .npy error without the file: {text}"
                    );
                }
                Ok(src) => check_mapped(&src, &bytes),
            }
        }
    });
}

/// An opened map: its data starts where the header says (computed here from the prefix)
/// and fits the file, and reading it whole gives the file's bytes there.
fn check_mapped(src: &MmapSource, file: &[u8]) {
    let layout = src.layout();
    let total = layout.total_bytes();
    let offset = match file[6] {
        1 => 10 + u16::from_le_bytes([file[8], file[9]]) as usize,
        _ => 12 + u32::from_le_bytes([file[8], file[9], file[10], file[11]]) as usize,
    };
    assert!(
        offset as u128 + total as u128 <= file.len() as u128,
        "layout of {total} bytes at {offset} opened on a {}-byte file",
        file.len()
    );
    let mut whole = vec![0u8; total];
    let status = src
        .read(
            &ReadRequest::new(layout.shape().full_region(), sluice::noop_waker()),
            &mut whole,
        )
        .unwrap();
    assert_eq!(status, ReadStatus::Ready);
    assert_eq!(whole, &file[offset..offset + total]);
}

#[test]
fn fuzz_raw_layout() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("fuzz.raw");
    drive("raw_layout", |rng| {
        let ndim = rng.below(5);
        let dims: Vec<usize> = (0..ndim)
            .map(|_| {
                if rng.chance(70) {
                    1 + rng.below(9)
                } else {
                    rng.edgy(16)
                }
            })
            .collect();
        let element = rng.pick(&ELEMENTS);
        let channels = rng.below(6);
        let file: Vec<u8> = (0..rng.below(300)).map(|_| rng.next() as u8).collect();
        let offset: u64 = match rng.below(4) {
            0 => 0,
            1 => rng.below(64) as u64,
            2 => file.len() as u64,
            _ => u64::MAX - rng.below(3) as u64,
        };
        let shape = match Shape::new(&dims) {
            Ok(shape) => shape,
            Err(e) => {
                let oracle_ok = (1..=3).contains(&dims.len())
                    && !dims.contains(&0)
                    && oracle_total(&dims, 1, 1) <= usize::MAX as u128;
                assert!(!oracle_ok, "Shape::new({dims:?}) refused: {e}");
                return;
            }
        };
        let layout = match Layout::new(shape, element, channels) {
            Ok(layout) => layout,
            Err(e) => {
                let oracle_ok = (1..=4).contains(&channels)
                    && oracle_total(&dims, element.size(), channels) <= isize::MAX as u128;
                assert!(
                    !oracle_ok,
                    "Layout::new({dims:?}, {element}, {channels}) refused: {e}"
                );
                assert!(!e.to_string().is_empty());
                return;
            }
        };
        let total = oracle_total(&dims, element.size(), channels);
        assert_eq!(layout.total_bytes() as u128, total);
        std::fs::write(&path, &file).unwrap();
        let fits = u128::from(offset) + total <= file.len() as u128;
        match MmapSource::open_raw(&path, layout.clone(), offset) {
            Ok(src) => {
                assert!(
                    fits,
                    "opened {total} bytes at {offset} in a {}-byte file",
                    file.len()
                );
                let mut whole = vec![0u8; total as usize];
                let _ = src
                    .read(
                        &ReadRequest::new(shape.full_region(), sluice::noop_waker()),
                        &mut whole,
                    )
                    .unwrap();
                let start = offset as usize;
                assert_eq!(whole, &file[start..start + total as usize]);
            }
            Err(e) => {
                assert!(!fits, "refused a layout that fits: {e}");
                let text = e.to_string();
                assert!(
                    text.contains("fuzz.raw") && text.contains(&offset.to_string()),
                    "{text}"
                );
            }
        }
    });
}

#[test]
fn fuzz_region_arithmetic() {
    drive("region_arithmetic", |rng| {
        let dims: Vec<usize> = (0..1 + rng.below(3)).map(|_| 1 + rng.below(40)).collect();
        let shape = Shape::new(&dims).unwrap();
        let d = shape.padded();
        let mut region = || Region {
            origin: [0, 1, 2].map(|a| rng.edgy(d[a])),
            size: [0, 1, 2].map(|a| rng.edgy(d[a])),
        };
        let r = region();
        let q = region();
        let ends = |r: &Region| [0, 1, 2].map(|a| r.origin[a] as u128 + r.size[a] as u128);
        let within = (0..3).all(|a| ends(&r)[a] <= d[a] as u128);
        assert_eq!(r.is_within(&shape), within, "{r}");
        assert_eq!(r.check_within(&shape).is_ok(), within);
        let text = r.to_string();
        let e = ends(&r);
        assert!(
            text.contains(&format!("{}..{}", r.origin[2], e[2])),
            "{text}"
        );
        assert_eq!(
            r.checked_end().is_some(),
            e.iter().all(|&e| e <= usize::MAX as u128)
        );
        let len = r
            .size
            .iter()
            .fold(1u128, |n, &s| n.saturating_mul(s as u128));
        assert_eq!(
            r.checked_len().map(|l| l as u128),
            (len <= usize::MAX as u128).then_some(len)
        );
        let layout = Layout::new(shape, ElementType::F32, 3).unwrap();
        let bytes = len.saturating_mul(12);
        assert_eq!(
            layout.checked_region_bytes(&r).map(|b| b as u128),
            (bytes <= usize::MAX as u128).then_some(bytes)
        );
        // Set operations never panic; for regions that end inside usize they are exact.
        let i = r.intersection(&q);
        let _ = r.bounding_union(&q);
        let _ = r.contains(&q);
        let _ = r.relative_to(&q);
        let _ = r.translated(q.origin);
        if r.checked_end().is_some() && q.checked_end().is_some() {
            let (re, qe) = (ends(&r), ends(&q));
            let overlap =
                (0..3).all(|a| (r.origin[a] as u128).max(q.origin[a] as u128) < re[a].min(qe[a]));
            assert_eq!(i.is_some(), overlap, "{r} and {q}");
        }
        // Chunk arithmetic and planning on the clipped change.
        let chunk: Vec<usize> = dims.iter().map(|_| 1 + rng.below(9)).collect();
        let grid = ChunkGrid::new(&chunk).unwrap();
        let _ = grid.chunks_touched(&r);
        let _ = grid.chunk_region([0, 1, 2].map(|_| rng.edgy(8)), &shape);
        let plan = plan_chunked(&shape, &grid, &[r, q], 0.5);
        for copy in &plan.copies {
            assert!(copy.is_within(&shape) && !copy.is_empty(), "planned {copy}");
        }
        for change in [r, q] {
            if let Some(part) = change.intersection(&shape.full_region()) {
                for corner in [
                    part.origin,
                    [0, 1, 2].map(|a| part.origin[a] + part.size[a] - 1),
                ] {
                    let sample = Region {
                        origin: corner,
                        size: [1; 3],
                    };
                    assert!(
                        plan.copies.iter().any(|c| c.contains(&sample)),
                        "{change} not covered by {:?}",
                        plan.copies
                    );
                }
            }
        }
    });
}

/// A random region of `d` (usually inside, sometimes not).
fn some_region(rng: &mut Rng, d: [usize; 3]) -> Region {
    if rng.chance(80) {
        let origin = [0, 1, 2].map(|a| rng.below(d[a]));
        Region {
            origin,
            size: [0, 1, 2].map(|a| 1 + rng.below(d[a] - origin[a])),
        }
    } else {
        Region {
            origin: [0, 1, 2].map(|a| rng.edgy(d[a])),
            size: [0, 1, 2].map(|a| rng.edgy(d[a])),
        }
    }
}

#[test]
fn fuzz_write_read() {
    drive("write_read", |rng| {
        let ndim = 1 + rng.below(3);
        let dims: Vec<usize> = (0..ndim).map(|_| 1 + rng.below(9)).collect();
        let channels = 1 + rng.below(4);
        let shape = Shape::new(&dims).unwrap();
        let d = shape.padded();
        let mut array_dims = dims.clone();
        array_dims.push(channels);
        let n = shape.len() * channels;
        let mut model: Vec<u16> = (0..n).map(|_| rng.next() as u16).collect();
        let src = ArraySource::with_channels(
            sluice::ndarray::ArrayD::from_shape_vec(IxDyn(&array_dims), model.clone()).unwrap(),
        )
        .unwrap();
        let index =
            |z: usize, y: usize, x: usize, c: usize| ((z * d[1] + y) * d[2] + x) * channels + c;
        for _ in 0..8 {
            let mut region = some_region(rng, d);
            // The padded leading axes of a 1-D or 2-D source: origin 0, size 1.
            for a in 0..3 - ndim {
                region.origin[a] = 0;
                region.size[a] = 1;
            }
            let inside = region.is_within(&shape) && !region.is_empty();
            match rng.below(4) {
                0 => {
                    // Write.
                    let mut wdims: Vec<usize> = region.size[3 - ndim..].to_vec();
                    let wrong_channels = rng.chance(5);
                    wdims.push(if wrong_channels {
                        channels % 4 + 1
                    } else {
                        channels
                    });
                    let count = wdims.iter().try_fold(1usize, |a, &b| a.checked_mul(b));
                    let Some(count) = count.filter(|&c| c <= 1 << 16) else {
                        continue;
                    };
                    let values: Vec<u16> = (0..count).map(|_| rng.next() as u16).collect();
                    // ndarray itself refuses views whose non-zero axes overflow isize.
                    let Ok(view) = ArrayView::from_shape(IxDyn(&wdims), &values) else {
                        continue;
                    };
                    let before = src.version();
                    let result = src.write(&region.origin[3 - ndim..], view);
                    let ok = inside && (!wrong_channels || wdims[ndim] == channels);
                    assert_eq!(result.is_ok(), ok, "write of {region}: {result:?}");
                    if ok {
                        let after = result.unwrap();
                        assert!(after > before);
                        match src.changes_since(before) {
                            Changes::Regions(r) => assert_eq!(r, vec![region]),
                            other => panic!("{other:?}"),
                        }
                        let mut k = 0;
                        for z in 0..region.size[0] {
                            for y in 0..region.size[1] {
                                for x in 0..region.size[2] {
                                    for c in 0..channels {
                                        let o = region.origin;
                                        model[index(o[0] + z, o[1] + y, o[2] + x, c)] = values[k];
                                        k += 1;
                                    }
                                }
                            }
                        }
                    } else {
                        assert_eq!(src.version(), before);
                    }
                }
                1 => {
                    // Update in place.
                    let before = src.version();
                    let fill = rng.next() as u16;
                    let result = src.update::<u16>(region, |mut v| v.fill(fill));
                    assert_eq!(result.is_ok(), inside, "update of {region}: {result:?}");
                    if inside {
                        for z in 0..region.size[0] {
                            for y in 0..region.size[1] {
                                for x in 0..region.size[2] {
                                    for c in 0..channels {
                                        let o = region.origin;
                                        model[index(o[0] + z, o[1] + y, o[2] + x, c)] = fill;
                                    }
                                }
                            }
                        }
                    } else {
                        assert_eq!(src.version(), before);
                    }
                }
                _ => {
                    // Read (sometimes with a wrong destination) and lend.
                    let readable = region.is_within(&shape);
                    let exact = region
                        .checked_len()
                        .and_then(|l| l.checked_mul(channels * 2));
                    let len = match exact {
                        Some(e) if e <= 1 << 20 && rng.chance(80) => e,
                        Some(e) if e <= 1 << 20 => e + rng.below(3) + 1,
                        _ => rng.below(16),
                    };
                    let mut dst = vec![0xA5u8; len];
                    let result =
                        src.read(&ReadRequest::new(region, sluice::noop_waker()), &mut dst);
                    let ok = readable && Some(len) == exact;
                    assert_eq!(
                        result.is_ok(),
                        ok,
                        "read of {region} into {len}: {result:?}"
                    );
                    if !ok {
                        assert!(dst.iter().all(|&b| b == 0xA5), "a failed read wrote");
                        assert!(!result.unwrap_err().to_string().is_empty());
                        continue;
                    }
                    let got: Vec<u16> = bytemuck::pod_collect_to_vec(&dst);
                    let mut k = 0;
                    for z in 0..region.size[0] {
                        for y in 0..region.size[1] {
                            for x in 0..region.size[2] {
                                for c in 0..channels {
                                    let o = region.origin;
                                    assert_eq!(
                                        got[k],
                                        model[index(o[0] + z, o[1] + y, o[2] + x, c)]
                                    );
                                    k += 1;
                                }
                            }
                        }
                    }
                    let mut lent = vec![0u8; len];
                    let outcome = src
                        .lend(&ReadRequest::new(region, sluice::noop_waker()), &mut |v| {
                            v.copy_packed(&mut lent)
                        })
                        .unwrap();
                    assert_eq!((outcome, &lent), (LendOutcome::Lent, &dst));
                }
            }
        }
    });
}
