//! Lazy pyramids over a memory-mapped file and over procedural data: every level equals the
//! 2x mean pyramid computed here on the CPU, and level 0 is read only once while it is cached.

use std::sync::Arc;
use std::task::{Wake, Waker};
use std::time::{Duration, Instant};

use parking_lot::{Condvar, Mutex};
use sluice_core::{
    npy_header, ChunkCache, ChunkFill, ChunkGrid, ChunkKey, DataSource, ElementType, Layout,
    LazyOptions, LazySource, LoaderPool, MmapSource, ProceduralLoader, ReadRequest, ReadStatus,
    Region, Shape, SourceLoader,
};

#[derive(Default)]
struct Notify {
    wakes: Mutex<u64>,
    cond: Condvar,
}

impl Wake for Notify {
    fn wake(self: Arc<Self>) {
        *self.wakes.lock() += 1;
        self.cond.notify_all();
    }
}

/// Reads `region` of `level` in full, waiting for the loader pool.
fn read_all(source: &LazySource, level: usize, region: Region, sample_bytes: usize) -> Vec<u8> {
    let notify = Arc::new(Notify::default());
    let waker = Waker::from(notify.clone());
    let request = ReadRequest {
        level,
        region,
        waker: &waker,
    };
    let mut dst = vec![0u8; region.len() * sample_bytes];
    let deadline = Instant::now() + Duration::from_secs(30);
    // A read may wake this very waker, so the lock is not held around it.
    while source.read(&request, &mut dst).unwrap() == ReadStatus::Pending {
        assert!(
            Instant::now() < deadline,
            "level {level} never became ready"
        );
        let mut wakes = notify.wakes.lock();
        notify.cond.wait_for(&mut wakes, Duration::from_millis(20));
    }
    dst
}

/// One 2x mean step of a 2-D u16 image, rounding half up, computed independently of sluice.
fn halve(img: &[Vec<u32>]) -> Vec<Vec<u32>> {
    let (h, w) = (img.len(), img[0].len());
    (0..h.div_ceil(2))
        .map(|y| {
            (0..w.div_ceil(2))
                .map(|x| {
                    let mut sum = 0;
                    let mut n = 0;
                    for row in &img[2 * y..(2 * y + 2).min(h)] {
                        for v in &row[2 * x..(2 * x + 2).min(w)] {
                            sum += v;
                            n += 1;
                        }
                    }
                    (sum + n / 2) / n
                })
                .collect()
        })
        .collect()
}

fn options(threads: usize, cache: usize) -> LazyOptions {
    LazyOptions::with_pool(LoaderPool::new(threads).unwrap(), ChunkCache::new(cache))
}

#[test]
fn a_memory_mapped_npy_gets_a_lazy_mean_pyramid() {
    let (h, w) = (37usize, 53usize);
    let value = |y: usize, x: usize| ((y * 131 + x * 17) % 60_000) as u16;
    let mut file = npy_header(ElementType::U16, &[h, w]);
    for y in 0..h {
        for x in 0..w {
            file.extend_from_slice(&value(y, x).to_le_bytes());
        }
    }
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("big.npy");
    std::fs::write(&path, &file).unwrap();
    let mmap = Arc::new(MmapSource::open_npy(&path).unwrap());
    let base = SourceLoader::new(mmap.clone(), ChunkGrid::new(&[8, 8]).unwrap()).unwrap();
    let src = LazySource::pyramid(base, 4, options(3, 1 << 24)).unwrap();
    let layout = src.layout();
    let shapes: Vec<_> = layout
        .levels()
        .iter()
        .map(|l| l.shape.dims().to_vec())
        .collect();
    assert_eq!(
        shapes,
        vec![vec![37, 53], vec![19, 27], vec![10, 14], vec![5, 7]]
    );
    assert_eq!(layout.levels()[3].downsample, [1.0, 8.0, 8.0]);

    let mut expected: Vec<Vec<Vec<u32>>> = vec![(0..h)
        .map(|y| (0..w).map(|x| value(y, x) as u32).collect())
        .collect()];
    for l in 1..4 {
        let next = halve(&expected[l - 1]);
        expected.push(next);
    }
    // Coarsest first, as a renderer asks: it computes every finer chunk once on the way.
    for level in (0..4).rev() {
        let shape = layout.levels()[level].shape;
        let got = read_all(&src, level, shape.full_region(), 2);
        for (i, b) in got.chunks_exact(2).enumerate() {
            let (y, x) = (i / shape.width(), i % shape.width());
            assert_eq!(
                u16::from_le_bytes([b[0], b[1]]) as u32,
                expected[level][y][x],
                "level {level} ({y}, {x})"
            );
        }
    }
    let level0_chunks = 37usize.div_ceil(8) * 53usize.div_ceil(8);
    assert_eq!(
        src.loader_calls(),
        level0_chunks as u64,
        "level 0 read once"
    );
    assert_eq!(
        mmap.bytes_read(),
        (h * w * 2) as u64,
        "each byte of the file read once"
    );
}

#[test]
fn a_small_cache_still_gives_exact_levels_and_never_exceeds_its_budget() {
    // A 3-D, 2-channel f32 volume from a closure; chunks of 4^3 samples x 8 bytes = 512 bytes.
    let dims = [9usize, 10, 11];
    let f = |z: usize, y: usize, x: usize, c: usize| (z * 100 + y * 10 + x) as f32 + c as f32 * 0.5;
    let layout = Layout::new(Shape::new(&dims).unwrap(), ElementType::F32, 2)
        .unwrap()
        .with_chunks(ChunkGrid::new(&[4, 4, 4]).unwrap());
    let loader = ProceduralLoader::new(layout, move |key: ChunkKey, r: Region, dst: &mut [u8]| {
        assert_eq!(key.level, 0, "only level 0 is loaded; the rest is computed");
        let mut i = 0;
        for z in r.origin[0]..r.end()[0] {
            for y in r.origin[1]..r.end()[1] {
                for x in r.origin[2]..r.end()[2] {
                    for c in 0..2 {
                        dst[i..i + 4].copy_from_slice(&f(z, y, x, c).to_le_bytes());
                        i += 4;
                    }
                }
            }
        }
        Ok(ChunkFill::Filled)
    });
    let o = options(2, 6 * 512);
    let cache = o.cache.clone();
    let src = LazySource::pyramid(loader, 3, o).unwrap();
    let level2 = src.layout().levels()[2].shape;
    assert_eq!(level2.dims(), &[3, 3, 3]);
    let got = read_all(&src, 2, level2.full_region(), 8);
    // Level 2 is the mean of level 1's means; f is linear per axis, so compute level 1 first.
    let mean = |vals: &[f64]| vals.iter().sum::<f64>() / vals.len() as f64;
    let l1 = |z: usize, y: usize, x: usize, c: usize| {
        let mut v = Vec::new();
        for zz in 2 * z..(2 * z + 2).min(dims[0]) {
            for yy in 2 * y..(2 * y + 2).min(dims[1]) {
                for xx in 2 * x..(2 * x + 2).min(dims[2]) {
                    v.push(f(zz, yy, xx, c) as f64);
                }
            }
        }
        mean(&v) as f32 as f64
    };
    let l1dims = [5usize, 5, 6];
    let mut i = 0;
    for z in 0..3 {
        for y in 0..3 {
            for x in 0..3 {
                for c in 0..2 {
                    let mut v = Vec::new();
                    for zz in 2 * z..(2 * z + 2).min(l1dims[0]) {
                        for yy in 2 * y..(2 * y + 2).min(l1dims[1]) {
                            for xx in 2 * x..(2 * x + 2).min(l1dims[2]) {
                                v.push(l1(zz, yy, xx, c));
                            }
                        }
                    }
                    let want = mean(&v) as f32;
                    let b = &got[i * 4..i * 4 + 4];
                    let have = f32::from_le_bytes([b[0], b[1], b[2], b[3]]);
                    assert!(
                        (have - want).abs() <= 1e-4,
                        "({z}, {y}, {x}) c{c}: {have} vs {want}"
                    );
                    i += 1;
                }
            }
        }
    }
    assert!(
        cache.peak_bytes() <= 6 * 512,
        "peak {} over the budget",
        cache.peak_bytes()
    );
    assert!(
        cache.evictions() > 0,
        "the budget was small enough to evict"
    );
}

#[test]
fn a_pyramid_deeper_than_the_shape_allows_is_refused() {
    let layout = Layout::new(Shape::d2(4, 4).unwrap(), ElementType::U8, 1).unwrap();
    let loader = ProceduralLoader::new(layout, |_, _, _| Ok(ChunkFill::Empty));
    let e = LazySource::pyramid(loader, 5, options(1, 1024))
        .err()
        .unwrap();
    assert!(e.to_string().contains("(4, 4)"), "{e}");
}

#[test]
fn a_procedural_source_computes_each_level_on_the_shared_pool() {
    // A 1000 x 1500 u32 image with two coarser levels the closure computes directly.
    let grid = ChunkGrid::new(&[128, 128]).unwrap();
    let levels = (1..3).map(|l| {
        let f = 1usize << l;
        sluice_core::Level::new(
            Shape::d2(1000usize.div_ceil(f), 1500usize.div_ceil(f)).unwrap(),
            [1.0, f as f64, f as f64],
        )
        .with_chunks(grid)
    });
    let layout = Layout::new(Shape::d2(1000, 1500).unwrap(), ElementType::U32, 1)
        .unwrap()
        .with_chunks(grid)
        .with_levels(levels)
        .unwrap();
    let value = |level: usize, y: usize, x: usize| (level * 1_000_000 + y * 1500 + x) as u32;
    let loader = ProceduralLoader::new(layout, move |key: ChunkKey, r: Region, dst: &mut [u8]| {
        let mut i = 0;
        for y in r.origin[1]..r.end()[1] {
            for x in r.origin[2]..r.end()[2] {
                dst[i..i + 4].copy_from_slice(&value(key.level, y, x).to_le_bytes());
                i += 4;
            }
        }
        Ok(ChunkFill::Filled)
    })
    .with_label("gradient");
    let src = LazySource::new(loader).unwrap();
    assert_eq!(src.label(), "gradient");
    assert!(src.is_lazy());
    for (level, region) in [
        (2, Region::d2(0, 0, 250, 375)),
        (1, Region::d2(100, 200, 300, 400)),
        (0, Region::d2(990, 1400, 10, 100)),
    ] {
        let got = read_all(&src, level, region, 4);
        let mut i = 0;
        for y in region.origin[1]..region.end()[1] {
            for x in region.origin[2]..region.end()[2] {
                let b = &got[i * 4..i * 4 + 4];
                assert_eq!(
                    u32::from_le_bytes([b[0], b[1], b[2], b[3]]),
                    value(level, y, x)
                );
                i += 1;
            }
        }
    }
    assert!(src.cache().budget() == sluice_core::DEFAULT_CACHE_BYTES);
}
