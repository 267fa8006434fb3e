//! Loader throughput on a zstd Zarr store: every chunk of a 2048 x 2048 u16 array (256 chunks
//! of 128 x 128) loaded through a `LazySource` on pools of 1, 2 and 4 threads, each against
//! the ceiling measured in the same run: the same chunks read one after the other on this
//! thread with `ZarrSource::read_chunk` (no pool, no cache, one buffer for all). A ratio above
//! 1 is the pool overlapping I/O and decoding; below 1 is the pool's own cost, and the cost of
//! keeping the chunks: a cache holding every chunk puts each in fresh memory, whose first
//! touch (page faults) the one-buffer ceiling never pays. A second reference, the same serial
//! read into a buffer of its own per chunk kept to the end, shows that part apart.
//!
//! `cargo bench -p sluice-zarr --bench loader`

use std::sync::Arc;
use std::time::{Duration, Instant};

use sluice_core::{
    noop_waker, ChunkCache, ChunkKey, ChunkWant, ConsumerId, DataSource, LazyOptions, LoaderPool,
};
use sluice_zarr::ZarrSource;
use zarrs::array::{codec::ZstdCodec, data_type, ArrayBuilder};
use zarrs::filesystem::FilesystemStore;

const SIDE: u64 = 2048;
const CHUNK: u64 = 128;
const RUNS: usize = 3;

/// Writes the store: a pattern that is not trivially compressible (zstd level 3).
fn write_store(dir: &std::path::Path) {
    let store = Arc::new(FilesystemStore::new(dir).expect("a writable temp dir"));
    let array = ArrayBuilder::new(
        vec![SIDE, SIDE],
        vec![CHUNK, CHUNK],
        data_type::uint16(),
        0u16,
    )
    .bytes_to_bytes_codecs(vec![Arc::new(ZstdCodec::new(3, false))])
    .build(store, "/")
    .expect("array metadata");
    array.store_metadata().expect("store metadata");
    let n = SIDE / CHUNK;
    for cy in 0..n {
        for cx in 0..n {
            let mut data = Vec::with_capacity((CHUNK * CHUNK) as usize);
            for y in cy * CHUNK..(cy + 1) * CHUNK {
                for x in cx * CHUNK..(cx + 1) * CHUNK {
                    let v = (y * 7919 + x * 31) ^ ((x * y) >> 3);
                    data.push((v % 65521) as u16 | 1);
                }
            }
            array.store_chunk(&[cy, cx], data).expect("store a chunk");
        }
    }
}

fn keys() -> Vec<ChunkKey> {
    let n = (SIDE / CHUNK) as usize;
    (0..n)
        .flat_map(|y| (0..n).map(move |x| ChunkKey::new(0, [0, y, x])))
        .collect()
}

/// Seconds to read every chunk serially on this thread.
fn serial(zarr: &ZarrSource) -> f64 {
    let mut buf = vec![0u8; (CHUNK * CHUNK * 2) as usize];
    let start = Instant::now();
    for key in keys() {
        let _ = zarr.read_chunk(0, key.index, &mut buf).expect("read");
    }
    start.elapsed().as_secs_f64()
}

/// Seconds to read every chunk serially on this thread into a buffer of its own, kept until
/// the end (what a cache holding every chunk must do: fresh memory for each).
fn serial_kept(zarr: &ZarrSource) -> f64 {
    let start = Instant::now();
    let kept: Vec<Vec<u8>> = keys()
        .into_iter()
        .map(|key| {
            let mut buf = vec![0u8; (CHUNK * CHUNK * 2) as usize];
            let _ = zarr.read_chunk(0, key.index, &mut buf).expect("read");
            buf
        })
        .collect();
    let t = start.elapsed().as_secs_f64();
    drop(kept);
    t
}

/// Seconds until every chunk is resident in a fresh lazy source on a pool of `threads`.
fn pooled(zarr: &ZarrSource, threads: usize) -> f64 {
    let pool = LoaderPool::new(threads).expect("pool");
    let mut options = LazyOptions::with_pool(pool, ChunkCache::new(64 << 20));
    options.max_in_flight = threads;
    let lazy = zarr.lazy_with(options).expect("lazy source");
    let wants: Vec<ChunkWant> = keys()
        .into_iter()
        .map(|k| ChunkWant::visible(k, 0.0))
        .collect();
    let start = Instant::now();
    lazy.request_chunks(ConsumerId::next(), &wants, noop_waker())
        .expect("request");
    loop {
        if wants.iter().all(|w| lazy.chunk_status(w.key).is_resident()) {
            break;
        }
        assert!(
            start.elapsed() < Duration::from_secs(120),
            "not loaded in 120 s"
        );
        std::thread::sleep(Duration::from_micros(200));
    }
    start.elapsed().as_secs_f64()
}

fn best(mut f: impl FnMut() -> f64) -> f64 {
    (0..RUNS).map(|_| f()).fold(f64::INFINITY, f64::min)
}

fn main() {
    let dir = std::env::temp_dir().join(format!("sluice-zarr-bench-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    write_store(&dir);
    let zarr = ZarrSource::open(dir.to_str().expect("utf-8 temp path")).expect("open");
    let mib = (SIDE * SIDE * 2) as f64 / (1 << 20) as f64;
    let ceiling = best(|| serial(&zarr));
    println!(
        "loader/zstd {SIDE}x{SIDE} u16, {} chunks of {CHUNK}^2, best of {RUNS}, {} cores",
        keys().len(),
        std::thread::available_parallelism().map_or(0, |n| n.get())
    );
    println!(
        "  serial read_chunk (ceiling): {:.1} ms, {:.0} MiB/s decoded",
        ceiling * 1e3,
        mib / ceiling
    );
    let kept = best(|| serial_kept(&zarr));
    println!(
        "  serial, each chunk kept in a buffer of its own: {:.1} ms, {:.2}x the ceiling",
        kept * 1e3,
        ceiling / kept
    );
    for threads in [1, 2, 4] {
        let t = best(|| pooled(&zarr, threads));
        println!(
            "  pool of {threads}: {:.1} ms, {:.0} MiB/s, {:.2}x the serial ceiling, {:.2}x the \
             serial read that keeps its chunks",
            t * 1e3,
            mib / t,
            ceiling / t,
            kept / t
        );
    }
    let _ = std::fs::remove_dir_all(&dir);
}
