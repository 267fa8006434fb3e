//! Loader throughput (`cargo bench -p sluice-core --bench loader`).
//!
//! Chunks per second through a `LazySource` on pools of 1, 2 and 4 threads, for two loaders:
//!
//! - **compute**: a procedural loader computing each 128 x 128 f32 chunk (an escape-time
//!   fractal, CPU-bound);
//! - **latency**: a loader that waits 2 ms per chunk and fills it (I/O-bound, like a remote
//!   store).
//!
//! Each figure is a ratio against a ceiling measured in the same run: the same loader's `load`
//! called on the same number of plain threads splitting the same chunks evenly between them (no
//! queue, no cache, no scheduling). `pool / bare` is the pool's efficiency; the target is at
//! least 0.85. The speedup over one pool thread is reported beside it. `SLUICE_BENCH_ITERS`
//! (default 5) timed runs per figure; medians are reported. `SLUICE_BENCH_STRICT=1` makes a
//! missed target exit with status 1.

use std::sync::Arc;
use std::task::{Wake, Waker};
use std::time::{Duration, Instant};

use parking_lot::{Condvar, Mutex};
use sluice_core::{
    ChunkCache, ChunkFill, ChunkGrid, ChunkKey, ChunkLoader, ChunkWant, ConsumerId, DataSource,
    ElementType, Layout, LazyOptions, LazySource, LoaderPool, Region, RetryPolicy, Shape,
    SourceError,
};

const CHUNK: usize = 128;
const GRID: usize = 16;
const TARGET: f64 = 0.85;

#[derive(Clone, Copy, Debug)]
enum Kind {
    Compute,
    Latency,
}

struct Bench {
    layout: Layout,
    kind: Kind,
}

impl ChunkLoader for Bench {
    fn layout(&self) -> Layout {
        self.layout.clone()
    }

    fn load(
        &self,
        key: ChunkKey,
        region: Region,
        dst: &mut [u8],
    ) -> Result<ChunkFill, SourceError> {
        if let Kind::Latency = self.kind {
            std::thread::sleep(Duration::from_millis(2));
        }
        let mut i = 0;
        for y in region.origin[1]..region.end()[1] {
            for x in region.origin[2]..region.end()[2] {
                let v = match self.kind {
                    Kind::Compute => escape_time(x, y),
                    Kind::Latency => (x ^ y ^ key.level) as f32,
                };
                dst[i..i + 4].copy_from_slice(&v.to_le_bytes());
                i += 4;
            }
        }
        Ok(ChunkFill::Filled)
    }
}

/// Iterations before z^2 + c escapes, for a point of the plane.
fn escape_time(x: usize, y: usize) -> f32 {
    let side = (CHUNK * GRID) as f64;
    let (cr, ci) = (x as f64 / side * 3.0 - 2.0, y as f64 / side * 3.0 - 1.5);
    let (mut zr, mut zi) = (0.0f64, 0.0f64);
    let mut n = 0;
    while n < 48 && zr * zr + zi * zi < 4.0 {
        let t = zr * zr - zi * zi + cr;
        zi = 2.0 * zr * zi + ci;
        zr = t;
        n += 1;
    }
    n as f32
}

fn bench_loader(kind: Kind) -> Bench {
    let side = CHUNK * GRID;
    let layout = Layout::new(Shape::d2(side, side).unwrap(), ElementType::F32, 1)
        .unwrap()
        .with_chunks(ChunkGrid::new(&[CHUNK, CHUNK]).unwrap());
    Bench { layout, kind }
}

fn keys(n: usize) -> Vec<ChunkKey> {
    (0..n)
        .map(|i| ChunkKey::new(0, [0, i / GRID, i % GRID]))
        .collect()
}

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

/// Seconds for a fresh pool of `threads` to load `n` chunks.
fn time_pool(kind: Kind, threads: usize, n: usize) -> f64 {
    let mut o = LazyOptions::with_pool(LoaderPool::new(threads).unwrap(), ChunkCache::new(1 << 30));
    o.max_in_flight = threads;
    o.retry = RetryPolicy::default();
    let src = LazySource::with_options(bench_loader(kind), o).unwrap();
    let notify = Arc::new(Notify::default());
    let waker = Waker::from(notify.clone());
    let wants: Vec<ChunkWant> = keys(n)
        .into_iter()
        .map(|k| ChunkWant::visible(k, 0.0))
        .collect();
    let start = Instant::now();
    src.request_chunks(ConsumerId::next(), &wants, &waker)
        .unwrap();
    let mut wakes = notify.wakes.lock();
    while !wants.iter().all(|w| src.chunk_status(w.key).is_resident()) {
        notify.cond.wait_for(&mut wakes, Duration::from_millis(1));
    }
    start.elapsed().as_secs_f64()
}

/// Seconds for `threads` plain threads to call `load` on `n` chunks split evenly.
fn time_bare(kind: Kind, threads: usize, n: usize) -> f64 {
    let loader = Arc::new(bench_loader(kind));
    let all = keys(n);
    let start = Instant::now();
    std::thread::scope(|s| {
        for t in 0..threads {
            let loader = loader.clone();
            let mine: Vec<ChunkKey> = all.iter().copied().skip(t).step_by(threads).collect();
            s.spawn(move || {
                let mut out = Vec::new();
                for k in mine {
                    let r = k.region(&loader.layout).unwrap();
                    let mut dst = vec![0u8; r.len() * 4];
                    let _ = loader.load(k, r, &mut dst).unwrap();
                    out.push(dst);
                }
                out.len()
            });
        }
    });
    start.elapsed().as_secs_f64()
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

fn main() {
    let iters: usize = std::env::var("SLUICE_BENCH_ITERS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(5);
    let strict = std::env::var("SLUICE_BENCH_STRICT").is_ok_and(|v| v == "1");
    let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
    println!("loader throughput, {cores} cores, {iters} timed runs per figure (medians)");
    println!(
        "{:<8} {:>7} {:>7} {:>13} {:>13} {:>11} {:>12}",
        "loader", "threads", "chunks", "pool chunk/s", "bare chunk/s", "pool/bare", "vs 1 thread"
    );
    let mut missed = Vec::new();
    for kind in [Kind::Compute, Kind::Latency] {
        let n = match kind {
            Kind::Compute => 128,
            Kind::Latency => 256,
        };
        let mut one = 0.0;
        for threads in [1, 2, 4] {
            // Warm-up, then alternate pool and bare runs so drift affects both alike.
            time_pool(kind, threads, n);
            let mut pool = Vec::new();
            let mut bare = Vec::new();
            for _ in 0..iters {
                pool.push(time_pool(kind, threads, n));
                bare.push(time_bare(kind, threads, n));
            }
            let (p, b) = (n as f64 / median(pool), n as f64 / median(bare));
            if threads == 1 {
                one = p;
            }
            let ratio = p / b;
            println!(
                "{:<8} {:>7} {:>7} {:>13.0} {:>13.0} {:>11.3} {:>11.2}x",
                format!("{kind:?}").to_lowercase(),
                threads,
                n,
                p,
                b,
                ratio,
                p / one
            );
            if ratio < TARGET {
                missed.push(format!(
                    "{kind:?} with {threads} threads: pool/bare {ratio:.3} < {TARGET}"
                ));
            }
        }
    }
    for m in &missed {
        println!("MISSED: {m}");
    }
    if strict && !missed.is_empty() {
        std::process::exit(1);
    }
}
