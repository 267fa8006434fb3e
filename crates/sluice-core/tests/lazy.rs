//! Lazy sources: the loader pool's order, cancellation, concurrency bound, retries, panics, the
//! host cache's budget, and that no caller ever waits on a loader.

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Arc;
use std::task::{Wake, Waker};
use std::time::{Duration, Instant};

use parking_lot::{Condvar, Mutex};
use sluice_core::{
    ChunkCache, ChunkFill, ChunkGrid, ChunkKey, ChunkLoader, ChunkStatus, ChunkWant, ConsumerId,
    DataSource, ElementType, Layout, LazyOptions, LazySource, Level, LoaderPool, ReadRequest,
    ReadStatus, Region, RetryPolicy, Shape, SourceError, Tier,
};

/// How long a test waits for something that should happen at once before it fails.
const PATIENCE: Duration = Duration::from_secs(20);

/// A waker that counts wakes and lets a test wait for the next one.
#[derive(Default)]
struct Notify {
    wakes: Mutex<u64>,
    cond: Condvar,
}

impl Wake for Notify {
    fn wake(self: Arc<Self>) {
        self.wake_by_ref();
    }
    fn wake_by_ref(self: &Arc<Self>) {
        *self.wakes.lock() += 1;
        self.cond.notify_all();
    }
}

impl Notify {
    fn waker(self: &Arc<Self>) -> Waker {
        Waker::from(self.clone())
    }

    /// Waits until `done` holds, re-checking after every wake; fails after [`PATIENCE`].
    fn wait_for(&self, what: &str, mut done: impl FnMut() -> bool) {
        let deadline = Instant::now() + PATIENCE;
        // `done` may wake this very waker (reads may), so the lock is not held around it.
        while !done() {
            assert!(Instant::now() < deadline, "timed out waiting for {what}");
            let mut wakes = self.wakes.lock();
            self.cond.wait_for(&mut wakes, Duration::from_millis(20));
        }
    }
}

/// A gate loads wait on until the test opens it.
#[derive(Default)]
struct Gate {
    open: Mutex<bool>,
    cond: Condvar,
}

impl Gate {
    fn closed() -> Arc<Self> {
        Arc::new(Gate::default())
    }
    fn pass(&self) {
        let mut open = self.open.lock();
        while !*open {
            self.cond.wait(&mut open);
        }
    }
    fn open(&self) {
        *self.open.lock() = true;
        self.cond.notify_all();
    }
}

/// What the test loader does for a chunk on its next attempts.
#[derive(Clone, Copy)]
enum Fault {
    Timeout,
    Unavailable,
    Decode,
    Panic,
    Empty,
}

/// The value of sample (z, y, x) of level `level`.
fn value(level: usize, at: [usize; 3]) -> u16 {
    (level * 10_000 + at[1] * 97 + at[2] * 3 + at[0] * 7) as u16
}

/// A u16 loader of closed-form values that records its calls, can hold chunks at a gate and
/// inject faults.
struct TestLoader {
    layout: Layout,
    calls: Mutex<Vec<(ChunkKey, Instant)>>,
    gate: Option<(Arc<Gate>, Option<ChunkKey>)>,
    faults: Mutex<HashMap<ChunkKey, Vec<Fault>>>,
    active: AtomicUsize,
    max_active: AtomicUsize,
}

impl TestLoader {
    /// A 2-D loader of `rows` x `cols` in `chunk`-square chunks, with `levels` levels that
    /// halve each time.
    fn new(rows: usize, cols: usize, chunk: usize, levels: usize) -> Self {
        let grid = ChunkGrid::new(&[chunk, chunk]).unwrap();
        let mut coarser = Vec::new();
        for l in 1..levels {
            let f = 1 << l;
            let shape = Shape::d2(rows.div_ceil(f), cols.div_ceil(f)).unwrap();
            coarser.push(Level::new(shape, [1.0, f as f64, f as f64]).with_chunks(grid));
        }
        let layout = Layout::new(Shape::d2(rows, cols).unwrap(), ElementType::U16, 1)
            .unwrap()
            .with_chunks(grid)
            .with_levels(coarser)
            .unwrap();
        TestLoader {
            layout,
            calls: Mutex::new(Vec::new()),
            gate: None,
            faults: Mutex::new(HashMap::new()),
            active: AtomicUsize::new(0),
            max_active: AtomicUsize::new(0),
        }
    }

    /// Every load (or only `key`'s, if given) waits at `gate`.
    fn gated(mut self, gate: &Arc<Gate>, key: Option<ChunkKey>) -> Self {
        self.gate = Some((gate.clone(), key));
        self
    }

    fn fault(self, key: ChunkKey, faults: &[Fault]) -> Self {
        self.faults.lock().insert(key, faults.to_vec());
        self
    }
}

/// The loader as the source holds it, while the test keeps its own handle.
struct Handle(Arc<TestLoader>);

impl std::ops::Deref for Handle {
    type Target = TestLoader;
    fn deref(&self) -> &TestLoader {
        &self.0
    }
}

impl ChunkLoader for Handle {
    fn layout(&self) -> Layout {
        self.layout.clone()
    }

    fn load(
        &self,
        key: ChunkKey,
        region: Region,
        dst: &mut [u8],
    ) -> Result<ChunkFill, SourceError> {
        self.calls.lock().push((key, Instant::now()));
        let now = self.active.fetch_add(1, Ordering::SeqCst) + 1;
        self.max_active.fetch_max(now, Ordering::SeqCst);
        struct Leave<'a>(&'a AtomicUsize);
        impl Drop for Leave<'_> {
            fn drop(&mut self) {
                self.0.fetch_sub(1, Ordering::SeqCst);
            }
        }
        let _leave = Leave(&self.active);
        if let Some((gate, only)) = &self.gate {
            if only.is_none_or(|k| k == key) {
                gate.pass();
            }
        }
        let fault = {
            let mut faults = self.faults.lock();
            faults
                .get_mut(&key)
                .and_then(|f| (!f.is_empty()).then(|| f.remove(0)))
        };
        let url = format!("http://127.0.0.1/test/{}/{:?}", key.level, key.index);
        match fault {
            Some(Fault::Timeout) => {
                return Err(SourceError::Timeout {
                    url_or_key: url,
                    after: Duration::from_secs(1),
                })
            }
            Some(Fault::Unavailable) => {
                return Err(SourceError::Remote {
                    url_or_key: url,
                    status: Some(503),
                    reason: "service unavailable".into(),
                })
            }
            Some(Fault::Decode) => {
                return Err(SourceError::Decode {
                    url_or_key: url,
                    reason: "zstd: unknown frame descriptor".into(),
                })
            }
            Some(Fault::Panic) => panic!("injected panic in {key}"),
            Some(Fault::Empty) => return Ok(ChunkFill::Empty),
            None => {}
        }
        let mut i = 0;
        for z in region.origin[0]..region.end()[0] {
            for y in region.origin[1]..region.end()[1] {
                for x in region.origin[2]..region.end()[2] {
                    dst[i..i + 2].copy_from_slice(&value(key.level, [z, y, x]).to_le_bytes());
                    i += 2;
                }
            }
        }
        Ok(ChunkFill::Filled)
    }

    fn fill_value(&self) -> Vec<u8> {
        0xABCDu16.to_le_bytes().to_vec()
    }
}

fn options(threads: usize, cache_bytes: usize) -> LazyOptions {
    let mut o = LazyOptions::with_pool(
        LoaderPool::new(threads).unwrap(),
        ChunkCache::new(cache_bytes),
    );
    o.retry = RetryPolicy {
        attempts: 3,
        backoff: Duration::from_millis(5),
        max_backoff: Duration::from_millis(20),
    };
    o
}

fn source(loader: &Arc<TestLoader>, o: LazyOptions) -> LazySource {
    LazySource::with_options(Handle(loader.clone()), o).unwrap()
}

fn key(level: usize, row: usize, col: usize) -> ChunkKey {
    ChunkKey::new(level, [0, row, col])
}

fn calls_of(loader: &TestLoader, k: ChunkKey) -> usize {
    loader.calls.lock().iter().filter(|(c, _)| *c == k).count()
}

fn status(source: &LazySource, k: ChunkKey) -> ChunkStatus {
    source.chunk_status(k)
}

/// Reads `region` of `level`, waiting on the waker until it is ready.
fn read_all(source: &LazySource, level: usize, region: Region) -> Vec<u16> {
    let notify = Arc::new(Notify::default());
    let waker = notify.waker();
    let request = ReadRequest {
        level,
        region,
        waker: &waker,
    };
    let mut dst = vec![0u8; region.len() * 2];
    notify.wait_for("a read", || {
        source.read(&request, &mut dst).unwrap() == ReadStatus::Ready
    });
    dst.chunks_exact(2)
        .map(|b| u16::from_le_bytes([b[0], b[1]]))
        .collect()
}

/// A tiny deterministic generator for property tests (xorshift64*).
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }
    fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }
}

#[test]
fn chunks_load_visible_first_then_coarser_levels_then_nearer_the_centre() {
    for seed in 1..=24u64 {
        let mut rng = Rng(seed.wrapping_mul(0x9E37_79B9_7F4A_7C15));
        let gate = Gate::closed();
        let blocker = key(2, 0, 0);
        let loader = Arc::new(TestLoader::new(256, 256, 16, 3).gated(&gate, Some(blocker)));
        let src = source(&loader, options(1, 1 << 24));
        let notify = Arc::new(Notify::default());
        let waker = notify.waker();
        let consumer = ConsumerId::next();
        // Hold the only worker so the whole set is queued before anything else runs.
        src.request_chunks(consumer, &[ChunkWant::visible(blocker, 0.0)], &waker)
            .unwrap();
        notify.wait_for("the blocker to load", || {
            matches!(status(&src, blocker), ChunkStatus::Loading)
        });
        let mut wants = vec![ChunkWant::visible(blocker, 0.0)];
        let mut seen = std::collections::HashSet::from([blocker]);
        while wants.len() < 30 {
            let level = rng.below(3) as usize;
            let side = 16usize.div_ceil(1 << level);
            let k = key(
                level,
                rng.below(side as u64) as usize,
                rng.below(side as u64) as usize,
            );
            if !seen.insert(k) {
                continue;
            }
            let distance = rng.below(1000) as f64 / 7.0;
            wants.push(if rng.below(2) == 0 {
                ChunkWant::visible(k, distance)
            } else {
                ChunkWant::prefetch(k, distance)
            });
        }
        src.request_chunks(consumer, &wants, &waker).unwrap();
        gate.open();
        notify.wait_for("every chunk to load", || {
            wants.iter().all(|w| status(&src, w.key).is_resident())
        });
        let order: Vec<ChunkKey> = loader
            .calls
            .lock()
            .iter()
            .map(|(k, _)| *k)
            .skip(1)
            .collect();
        // The order stated independently of `load_order`: tier (visible = 0), then the level
        // descending, then the distance, then the order stated.
        let rank = |k: &ChunkKey| {
            let (pos, w) = wants.iter().enumerate().find(|(_, w)| w.key == *k).unwrap();
            let tier = if w.tier == Tier::Visible { 0 } else { 1 };
            (
                tier,
                usize::MAX - w.key.level,
                (w.distance * 7.0).round() as u64,
                pos,
            )
        };
        let ranks: Vec<_> = order.iter().map(rank).collect();
        let mut sorted = ranks.clone();
        sorted.sort();
        assert_eq!(ranks, sorted, "seed {seed}: loads out of order");
        assert_eq!(
            order.len(),
            wants.len() - 1,
            "seed {seed}: each chunk loaded once"
        );
        // And `load_order` agrees with it.
        let mut by_api: Vec<ChunkWant> = wants[1..].to_vec();
        by_api.sort_by(|a, b| a.load_order(b));
        let by_api: Vec<ChunkKey> = by_api.iter().map(|w| w.key).collect();
        assert_eq!(order, by_api, "seed {seed}");
    }
}

#[test]
fn a_replaced_wanted_set_drops_what_left_it_before_it_starts() {
    let gate = Gate::closed();
    let blocker = key(0, 0, 0);
    let loader = Arc::new(TestLoader::new(256, 256, 16, 1).gated(&gate, Some(blocker)));
    let src = source(&loader, options(1, 1 << 24));
    let notify = Arc::new(Notify::default());
    let waker = notify.waker();
    let consumer = ConsumerId::next();
    let first: Vec<ChunkWant> = (0..10)
        .map(|i| ChunkWant::visible(key(0, 1, i), i as f64))
        .chain([ChunkWant::visible(blocker, -1.0)])
        .collect();
    src.request_chunks(consumer, &first, &waker).unwrap();
    notify.wait_for("the blocker to load", || {
        matches!(status(&src, blocker), ChunkStatus::Loading)
    });
    assert!(matches!(status(&src, key(0, 1, 3)), ChunkStatus::Queued));
    // The view moved: the first set is gone (the blocker, already loading, finishes).
    let second: Vec<ChunkWant> = (0..5)
        .map(|i| ChunkWant::visible(key(0, 5, i), i as f64))
        .collect();
    src.request_chunks(consumer, &second, &waker).unwrap();
    assert!(matches!(
        status(&src, key(0, 1, 3)),
        ChunkStatus::Unrequested
    ));
    gate.open();
    notify.wait_for("the second set", || {
        second.iter().all(|w| status(&src, w.key).is_resident())
    });
    assert_eq!(src.loader_calls(), 1 + 5);
    for w in &first[..10] {
        assert_eq!(calls_of(&loader, w.key), 0, "{} was loaded", w.key);
        assert!(matches!(status(&src, w.key), ChunkStatus::Unrequested));
    }
    // Wanting a resident chunk again loads nothing.
    src.request_chunks(consumer, &second, &waker).unwrap();
    assert_eq!(src.loader_calls(), 6);
}

#[test]
fn a_slow_source_holds_at_most_its_share_and_never_delays_another() {
    let pool = LoaderPool::new(4).unwrap();
    let cache = ChunkCache::new(1 << 24);
    let mut o = LazyOptions::with_pool(pool, cache);
    o.max_in_flight = 2;
    let gate = Gate::closed();
    let slow = Arc::new(TestLoader::new(256, 256, 16, 1).gated(&gate, None));
    let fast = Arc::new(TestLoader::new(256, 256, 16, 1));
    let slow_src = source(&slow, o.clone());
    let fast_src = source(&fast, o);
    let notify = Arc::new(Notify::default());
    let waker = notify.waker();
    let consumer = ConsumerId::next();
    let slow_wants: Vec<ChunkWant> = (0..16)
        .map(|i| ChunkWant::visible(key(0, 0, i), 0.0))
        .collect();
    slow_src
        .request_chunks(consumer, &slow_wants, &waker)
        .unwrap();
    notify.wait_for("the slow source to fill its share", || {
        slow.active.load(Ordering::SeqCst) == 2
    });
    let fast_wants: Vec<ChunkWant> = (0..16)
        .flat_map(|r| (0..4).map(move |c| ChunkWant::visible(key(0, r, c), 0.0)))
        .collect();
    fast_src
        .request_chunks(consumer, &fast_wants, &waker)
        .unwrap();
    notify.wait_for("every chunk of the fast source", || {
        fast_wants
            .iter()
            .all(|w| status(&fast_src, w.key).is_resident())
    });
    assert_eq!(
        slow.max_active.load(Ordering::SeqCst),
        2,
        "the slow source's bound"
    );
    let p = slow_src.chunk_progress(consumer);
    assert_eq!((p.loading, p.queued, p.visible_resident), (2, 14, 0));
    gate.open();
    notify.wait_for("the slow source", || {
        slow_wants
            .iter()
            .all(|w| status(&slow_src, w.key).is_resident())
    });
    assert!(slow.max_active.load(Ordering::SeqCst) <= 2);
    assert!(fast.max_active.load(Ordering::SeqCst) <= 2);
}

#[test]
fn transient_errors_are_retried_with_growing_backoff_and_final_ones_are_not() {
    let healed = key(0, 0, 0);
    let down = key(0, 0, 1);
    let corrupt = key(0, 0, 2);
    let loader = Arc::new(
        TestLoader::new(64, 64, 16, 1)
            .fault(healed, &[Fault::Timeout, Fault::Unavailable])
            .fault(down, &[Fault::Unavailable; 5])
            .fault(corrupt, &[Fault::Decode]),
    );
    let src = source(&loader, options(2, 1 << 24));
    let notify = Arc::new(Notify::default());
    let waker = notify.waker();
    let consumer = ConsumerId::next();
    let wants = [healed, down, corrupt].map(|k| ChunkWant::visible(k, 0.0));
    src.request_chunks(consumer, &wants, &waker).unwrap();
    notify.wait_for("every chunk to settle", || {
        wants.iter().all(|w| !status(&src, w.key).is_pending())
    });
    assert!(matches!(status(&src, healed), ChunkStatus::Ready));
    let times: Vec<Instant> = loader
        .calls
        .lock()
        .iter()
        .filter(|(k, _)| *k == healed)
        .map(|(_, t)| *t)
        .collect();
    assert_eq!(times.len(), 3);
    assert!(
        times[1] - times[0] >= Duration::from_millis(5),
        "first backoff"
    );
    assert!(
        times[2] - times[1] >= Duration::from_millis(10),
        "doubled backoff"
    );
    let ChunkStatus::Failed(f) = status(&src, down) else {
        panic!("{down} should have failed");
    };
    assert_eq!(f.attempts, 3);
    let msg = f.error.to_string();
    assert!(
        msg.contains("http://127.0.0.1/test/0/[0, 0, 1]") && msg.contains("503"),
        "{msg}"
    );
    let ChunkStatus::Failed(f) = status(&src, corrupt) else {
        panic!("{corrupt} should have failed");
    };
    assert_eq!(f.attempts, 1, "decode errors are final");
    assert!(f.error.to_string().contains("cannot decode"), "{}", f.error);
    let p = src.chunk_progress(consumer);
    assert_eq!(
        p.failed.iter().map(|(k, _)| *k).collect::<Vec<_>>(),
        vec![down, corrupt]
    );
    assert_eq!((p.visible_wanted, p.visible_resident), (3, 1));
    // Failed chunks read as the fill value.
    let region = Region::d2(0, 16, 16, 16);
    assert!(read_all(&src, 0, region).iter().all(|v| *v == 0xABCD));
}

#[test]
fn failed_chunks_are_not_fetched_again_until_retry_failed() {
    let down = key(0, 1, 1);
    let loader = Arc::new(TestLoader::new(64, 64, 16, 1).fault(down, &[Fault::Unavailable; 3]));
    let src = source(&loader, options(1, 1 << 24));
    let notify = Arc::new(Notify::default());
    let waker = notify.waker();
    let consumer = ConsumerId::next();
    src.request_chunks(consumer, &[ChunkWant::visible(down, 0.0)], &waker)
        .unwrap();
    notify.wait_for("the failure", || {
        matches!(status(&src, down), ChunkStatus::Failed(_))
    });
    assert_eq!(calls_of(&loader, down), 3);
    // Asked again (and a read of it), with another chunk after it: only the other loads.
    let other = key(0, 0, 0);
    let wants = [
        ChunkWant::visible(down, 0.0),
        ChunkWant::prefetch(other, 0.0),
    ];
    src.request_chunks(consumer, &wants, &waker).unwrap();
    let region = Region::d2(16, 16, 16, 16);
    assert!(read_all(&src, 0, region).iter().all(|v| *v == 0xABCD));
    notify.wait_for("the other chunk", || status(&src, other).is_resident());
    assert_eq!(calls_of(&loader, down), 3);
    let before = src.version();
    src.retry_failed();
    assert!(
        src.version() > before,
        "the failed chunk's data changes from the fill"
    );
    match src.changes_since(before) {
        sluice_core::Changes::Regions(r) => assert_eq!(r, vec![region]),
        other => panic!("expected the chunk's region, got {other:?}"),
    }
    notify.wait_for("the retried chunk", || status(&src, down).is_resident());
    assert_eq!(calls_of(&loader, down), 4);
    let got = read_all(&src, 0, region);
    assert_eq!(got[0], value(0, [0, 16, 16]));
}

#[test]
fn a_panicking_loader_fails_its_chunk_and_the_pool_carries_on() {
    let bad = key(0, 0, 0);
    let loader = Arc::new(TestLoader::new(64, 64, 16, 1).fault(bad, &[Fault::Panic]));
    let src = source(&loader, options(1, 1 << 24));
    let notify = Arc::new(Notify::default());
    let waker = notify.waker();
    let consumer = ConsumerId::next();
    let wants: Vec<ChunkWant> = (0..4)
        .map(|i| ChunkWant::visible(key(0, 0, i), i as f64))
        .collect();
    src.request_chunks(consumer, &wants, &waker).unwrap();
    notify.wait_for("every chunk to settle", || {
        wants.iter().all(|w| !status(&src, w.key).is_pending())
    });
    let ChunkStatus::Failed(f) = status(&src, bad) else {
        panic!("the panicking chunk should have failed");
    };
    assert!(
        matches!(*f.error, SourceError::LoaderPanicked { .. }),
        "{}",
        f.error
    );
    assert!(
        f.error
            .to_string()
            .contains("injected panic in level 0 chunk [0, 0, 0]"),
        "{}",
        f.error
    );
    assert_eq!(f.attempts, 1);
    // The single worker survived: the other chunks loaded after it.
    for w in &wants[1..] {
        assert!(status(&src, w.key).is_resident());
    }
}

#[test]
fn the_cache_evicts_least_recently_used_chunks_within_its_decoded_byte_budget() {
    // 16 x 16 u16 chunks are 512 bytes; the budget holds three.
    let chunk_bytes = 512;
    let loader = Arc::new(TestLoader::new(64, 64, 16, 1).fault(key(0, 3, 3), &[Fault::Empty]));
    let o = options(1, 3 * chunk_bytes);
    let cache = o.cache.clone();
    let src = source(&loader, o);
    let notify = Arc::new(Notify::default());
    let waker = notify.waker();
    let consumer = ConsumerId::next();
    for i in 0..4 {
        let k = key(0, 0, i);
        src.request_chunks(consumer, &[ChunkWant::visible(k, 0.0)], &waker)
            .unwrap();
        notify.wait_for("the chunk", || status(&src, k).is_resident());
        if i == 1 {
            // Use chunk 0 again, so chunk 1 is the least recently used.
            read_all(&src, 0, Region::d2(0, 0, 16, 16));
        }
        assert!(cache.resident_bytes() <= 3 * chunk_bytes);
    }
    assert_eq!(cache.resident_bytes(), 3 * chunk_bytes);
    assert!(status(&src, key(0, 0, 0)).is_resident());
    assert!(matches!(
        status(&src, key(0, 0, 1)),
        ChunkStatus::Unrequested
    ));
    assert!(cache.peak_bytes() <= 3 * chunk_bytes);
    // An empty chunk costs nothing and reads as the fill value.
    let empty = key(0, 3, 3);
    src.request_chunks(consumer, &[ChunkWant::visible(empty, 0.0)], &waker)
        .unwrap();
    notify.wait_for("the empty chunk", || status(&src, empty).is_resident());
    assert!(matches!(status(&src, empty), ChunkStatus::Empty));
    assert_eq!(cache.resident_bytes(), 3 * chunk_bytes);
    assert!(read_all(&src, 0, Region::d2(48, 48, 16, 16))
        .iter()
        .all(|v| *v == 0xABCD));
    // The evicted chunk loads again when read.
    let got = read_all(&src, 0, Region::d2(0, 16, 16, 16));
    assert_eq!(got[17], value(0, [0, 1, 17]));
    assert_eq!(calls_of(&loader, key(0, 0, 1)), 2);
    drop(src);
    assert_eq!(
        cache.resident_bytes(),
        0,
        "a dropped source frees its chunks"
    );
}

#[test]
fn callers_never_wait_on_a_blocked_loader() {
    let gate = Gate::closed();
    let loader = Arc::new(TestLoader::new(64, 64, 16, 2).gated(&gate, None));
    let mut o = options(2, 1 << 24);
    o.max_in_flight = 2;
    let src = Arc::new(source(&loader, o));
    // If a call below blocked, the watchdog would open the gate after a while and say so.
    let fired = Arc::new(AtomicBool::new(false));
    let watchdog = {
        let (gate, fired) = (gate.clone(), fired.clone());
        let done = Arc::new(AtomicBool::new(false));
        let d = done.clone();
        let handle = std::thread::spawn(move || {
            let deadline = Instant::now() + PATIENCE;
            while !d.load(Ordering::SeqCst) {
                if Instant::now() > deadline {
                    fired.store(true, Ordering::SeqCst);
                    gate.open();
                    return;
                }
                std::thread::sleep(Duration::from_millis(5));
            }
        });
        (done, handle)
    };
    let notify = Arc::new(Notify::default());
    let waker = notify.waker();
    let consumer = ConsumerId::next();
    let wants: Vec<ChunkWant> = (0..4)
        .map(|i| ChunkWant::visible(key(0, i, 0), 0.0))
        .collect();
    src.request_chunks(consumer, &wants, &waker).unwrap();
    notify.wait_for("loads to start", || {
        loader.active.load(Ordering::SeqCst) == 2
    });
    let region = Region::d2(0, 0, 64, 16);
    let mut dst = vec![0u8; region.len() * 2];
    let request = ReadRequest {
        level: 0,
        region,
        waker: &waker,
    };
    for _ in 0..100 {
        assert_eq!(src.read(&request, &mut dst).unwrap(), ReadStatus::Pending);
        let _ = src
            .lend(&request, &mut |_| panic!("nothing is resident to lend"))
            .unwrap();
        assert!(src.chunk_status(wants[0].key).is_pending());
        let p = src.chunk_progress(consumer);
        assert_eq!((p.visible_wanted, p.visible_resident, p.loading), (4, 0, 2));
        src.request_chunks(consumer, &wants, &waker).unwrap();
        src.retry_failed();
    }
    let wakes_before = *notify.wakes.lock();
    watchdog.0.store(true, Ordering::SeqCst);
    watchdog.1.join().unwrap();
    assert!(
        !fired.load(Ordering::SeqCst),
        "a call waited on the blocked loader"
    );
    gate.open();
    notify.wait_for("the chunks after release", || {
        src.read(&request, &mut dst).unwrap() == ReadStatus::Ready
    });
    assert!(*notify.wakes.lock() > wakes_before, "the waker was woken");
    for (i, b) in dst.chunks_exact(2).enumerate() {
        let (y, x) = (i / 16, i % 16);
        assert_eq!(u16::from_le_bytes([b[0], b[1]]), value(0, [0, y, x]));
    }
}

#[test]
fn reads_and_lends_cross_chunk_borders_with_exact_values() {
    let loader = Arc::new(TestLoader::new(50, 70, 16, 2));
    let src = source(&loader, options(2, 1 << 24));
    for (level, region) in [
        (0, Region::d2(3, 5, 40, 61)),
        (0, Region::d2(48, 64, 2, 6)),
        (1, Region::d2(0, 0, 25, 35)),
    ] {
        let got = read_all(&src, level, region);
        let mut i = 0;
        for y in region.origin[1]..region.end()[1] {
            for x in region.origin[2]..region.end()[2] {
                assert_eq!(got[i], value(level, [0, y, x]), "level {level} ({y}, {x})");
                i += 1;
            }
        }
    }
    // A region inside one resident chunk is lent in place.
    let inner = Region::d2(17, 18, 5, 7);
    read_all(&src, 0, inner);
    let waker = Waker::noop();
    let request = ReadRequest {
        level: 0,
        region: inner,
        waker,
    };
    let mut rows = Vec::new();
    let outcome = src
        .lend(&request, &mut |view| {
            let mut packed = vec![0u8; inner.len() * 2];
            view.copy_packed(&mut packed);
            rows = packed;
        })
        .unwrap();
    assert_eq!(outcome, sluice_core::LendOutcome::Lent);
    assert_eq!(
        u16::from_le_bytes([rows[0], rows[1]]),
        value(0, [0, 17, 18])
    );
    let last = rows.len() - 2;
    assert_eq!(
        u16::from_le_bytes([rows[last], rows[last + 1]]),
        value(0, [0, 21, 24])
    );
    // Bad input is an error naming the numbers.
    let e = src
        .request_chunks(
            ConsumerId::next(),
            &[ChunkWant::visible(key(0, 4, 0), 0.0)],
            waker,
        )
        .unwrap_err();
    assert!(e.to_string().contains("[1, 4, 5]"), "{e}");
    let mut dst = vec![0u8; 8];
    let outside = ReadRequest {
        level: 1,
        region: Region::d2(24, 0, 2, 2),
        waker,
    };
    assert!(src.read(&outside, &mut dst).is_err());
}

#[test]
fn a_chunk_bigger_than_the_cache_fails_naming_both_sizes_without_loading() {
    // 16 x 16 u16 chunks are 512 bytes; the cache holds 500.
    let loader = Arc::new(TestLoader::new(64, 64, 16, 1));
    let src = source(&loader, options(1, 500));
    let notify = Arc::new(Notify::default());
    let waker = notify.waker();
    let k = key(0, 0, 0);
    src.request_chunks(ConsumerId::next(), &[ChunkWant::visible(k, 0.0)], &waker)
        .unwrap();
    notify.wait_for("the failure", || {
        matches!(status(&src, k), ChunkStatus::Failed(_))
    });
    let ChunkStatus::Failed(f) = status(&src, k) else {
        unreachable!()
    };
    let msg = f.error.to_string();
    assert!(msg.contains("512") && msg.contains("500"), "{msg}");
    assert_eq!(src.loader_calls(), 0, "refused before loading");
}

#[test]
fn a_fill_value_of_the_wrong_size_is_refused() {
    struct Bad(Layout);
    impl ChunkLoader for Bad {
        fn layout(&self) -> Layout {
            self.0.clone()
        }
        fn load(&self, _: ChunkKey, _: Region, _: &mut [u8]) -> Result<ChunkFill, SourceError> {
            Ok(ChunkFill::Empty)
        }
        fn fill_value(&self) -> Vec<u8> {
            vec![0; 3]
        }
    }
    let layout = Layout::new(Shape::d2(4, 4).unwrap(), ElementType::U16, 2).unwrap();
    let e = LazySource::with_options(Bad(layout), options(1, 1024))
        .err()
        .unwrap()
        .to_string();
    assert!(e.contains("3 bytes") && e.contains("4 bytes"), "{e}");
}

#[test]
fn invalidated_empty_chunks_load_again_once_written() {
    let absent = key(0, 2, 1);
    let loader = Arc::new(TestLoader::new(64, 64, 16, 1).fault(absent, &[Fault::Empty]));
    let src = source(&loader, options(1, 1 << 24));
    let notify = Arc::new(Notify::default());
    let waker = notify.waker();
    let consumer = ConsumerId::next();
    let wants = [
        ChunkWant::visible(absent, 0.0),
        ChunkWant::visible(key(0, 0, 0), 1.0),
    ];
    src.request_chunks(consumer, &wants, &waker).unwrap();
    notify.wait_for("both chunks", || {
        wants.iter().all(|w| status(&src, w.key).is_resident())
    });
    assert!(matches!(status(&src, absent), ChunkStatus::Empty));
    assert_eq!(src.empty_chunks(), vec![absent]);
    // The store wrote the chunk (the fault is used up); a watcher invalidates it.
    let before = src.version();
    src.invalidate(&[absent]);
    match src.changes_since(before) {
        sluice_core::Changes::Regions(r) => assert_eq!(r, vec![Region::d2(32, 16, 16, 16)]),
        other => panic!("expected the chunk's region, got {other:?}"),
    }
    notify.wait_for("the written chunk", || {
        matches!(status(&src, absent), ChunkStatus::Ready)
    });
    assert!(src.empty_chunks().is_empty());
    assert_eq!(calls_of(&loader, absent), 2);
    assert_eq!(
        calls_of(&loader, key(0, 0, 0)),
        1,
        "the other chunk stays cached"
    );
    let got = read_all(&src, 0, Region::d2(32, 16, 16, 16));
    assert_eq!(got[0], value(0, [0, 32, 16]));
}
