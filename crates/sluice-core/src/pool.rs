//! The loader pool: worker threads that run chunk loaders in priority order, with per-consumer
//! wanted sets (replacing a set cancels what left it), bounded concurrency per source, retries
//! with backoff and panics caught.

use std::collections::{BTreeSet, HashMap, HashSet};
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::{Arc, OnceLock};
use std::task::Waker;
use std::time::{Duration, Instant};

use parking_lot::{Condvar, Mutex};

use crate::cache::SourceKey;
use crate::chunk::{ChunkFailure, ChunkKey, ChunkProgress, ChunkStatus, ChunkWant, Tier};
use crate::error::SourceError;
use crate::lazy::SourceCore;
use crate::source::ConsumerId;

/// How a lazy source retries a chunk whose load failed with a transient error
/// ([`SourceError::is_transient`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RetryPolicy {
    /// Attempts in all, the first included (1 = never retry). Default 4.
    pub attempts: u32,
    /// Wait before the first retry; each further retry waits twice as long. Default 100 ms.
    pub backoff: Duration,
    /// The longest wait between two attempts. Default 5 s.
    pub max_backoff: Duration,
}

impl Default for RetryPolicy {
    fn default() -> Self {
        RetryPolicy {
            attempts: 4,
            backoff: Duration::from_millis(100),
            max_backoff: Duration::from_secs(5),
        }
    }
}

impl RetryPolicy {
    /// The wait before attempt `next` (2 = the first retry).
    pub fn delay(&self, next: u32) -> Duration {
        let doublings = next.saturating_sub(2).min(30);
        self.backoff
            .saturating_mul(1u32 << doublings)
            .min(self.max_backoff)
    }
}

/// Worker threads that run [`ChunkLoader`](crate::ChunkLoader)s for lazy sources.
///
/// One pool is shared by every lazy source of a process ([`LoaderPool::shared`]) unless a user
/// makes more ([`LoaderPool::new`]). Each worker takes the most urgent queued chunk of all its
/// sources (see [`ChunkWant`] for the order; equal wants in the order they were stated), skipping
/// sources that already have their [`LazyOptions::max_in_flight`](crate::LazyOptions) loads
/// running, so one slow source leaves workers to the others. Clones share the same threads; the
/// threads end once every clone and every source using the pool is dropped.
#[derive(Clone)]
pub struct LoaderPool {
    handle: Arc<PoolHandle>,
}

/// Ends the workers when the last [`LoaderPool`] clone goes.
struct PoolHandle {
    shared: Arc<PoolShared>,
    threads: usize,
}

impl Drop for PoolHandle {
    fn drop(&mut self) {
        self.shared.state.lock().shutdown = true;
        self.shared.wake.notify_all();
    }
}

pub(crate) struct PoolShared {
    state: Mutex<PoolState>,
    wake: Condvar,
}

#[derive(Default)]
struct PoolState {
    sources: HashMap<SourceKey, SourceSched>,
    shutdown: bool,
    seq: u64,
}

/// A queued chunk, ordered so that the first entry loads first.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
struct QueueEntry {
    tier: Tier,
    coarseness: std::cmp::Reverse<usize>,
    distance: u64,
    seq: u64,
    key: ChunkKey,
}

/// A float's bits, ordered like the float (NaN last).
fn ordered_bits(d: f64) -> u64 {
    let d = if d.is_nan() { f64::INFINITY } else { d };
    let bits = d.to_bits();
    if bits >> 63 == 1 {
        !bits
    } else {
        bits | 1 << 63
    }
}

#[derive(Default)]
struct Consumer {
    wants: HashMap<ChunkKey, ChunkWant>,
    wakers: Vec<Waker>,
}

/// One source's scheduling state.
struct SourceSched {
    core: Arc<SourceCore>,
    max_in_flight: usize,
    consumers: HashMap<ConsumerId, Consumer>,
    /// The most urgent want of each chunk some consumer wants.
    merged: HashMap<ChunkKey, ChunkWant>,
    queue: BTreeSet<QueueEntry>,
    /// Queued chunks: their queue entry and the attempts made so far.
    queued: HashMap<ChunkKey, (QueueEntry, u32)>,
    /// Chunks waiting out a retry's backoff: when they may run, attempts made so far.
    backoff: HashMap<ChunkKey, (Instant, u32)>,
    loading: HashSet<ChunkKey>,
    failed: HashMap<ChunkKey, ChunkFailure>,
}

impl SourceSched {
    fn dequeue(&mut self, key: &ChunkKey) {
        if let Some((entry, _)) = self.queued.remove(key) {
            self.queue.remove(&entry);
        }
    }

    fn enqueue(&mut self, seq: &mut u64, want: ChunkWant, attempts: u32) {
        self.dequeue(&want.key);
        *seq += 1;
        let entry = QueueEntry {
            tier: want.tier,
            coarseness: std::cmp::Reverse(want.key.level),
            distance: ordered_bits(want.distance),
            seq: *seq,
            key: want.key,
        };
        self.queue.insert(entry);
        self.queued.insert(want.key, (entry, attempts));
    }

    /// Brings chunk `key`'s place in the queue in line with what the consumers want now.
    /// Returns whether it queued something new.
    fn reconcile(&mut self, seq: &mut u64, key: ChunkKey) -> bool {
        let idle = !self.loading.contains(&key)
            && !self.queued.contains_key(&key)
            && !self.backoff.contains_key(&key);
        let settled = self.failed.contains_key(&key)
            || (idle && self.core.cache.contains(self.core.id, key).is_some());
        if settled {
            // Reads wait for a chunk only until it settles.
            if let Some(reader) = self.consumers.get_mut(&self.core.reader) {
                reader.wants.remove(&key);
            }
        }
        let want = self
            .consumers
            .values()
            .filter_map(|c| c.wants.get(&key).copied())
            .reduce(ChunkWant::more_urgent);
        let Some(want) = want else {
            // Nobody wants it: cancel it unless it already runs.
            self.merged.remove(&key);
            self.dequeue(&key);
            self.backoff.remove(&key);
            return false;
        };
        self.merged.insert(key, want);
        if self.loading.contains(&key)
            || self.failed.contains_key(&key)
            || self.backoff.contains_key(&key)
        {
            return false;
        }
        if let Some((entry, attempts)) = self.queued.get(&key).copied() {
            if entry.tier != want.tier
                || entry.coarseness.0 != want.key.level
                || entry.distance != ordered_bits(want.distance)
            {
                self.enqueue(seq, want, attempts);
            }
            return false;
        }
        if self.core.cache.contains(self.core.id, key).is_some() {
            return false;
        }
        self.enqueue(seq, want, 0);
        true
    }

    fn wakers(&self) -> Vec<Waker> {
        self.consumers
            .values()
            .flat_map(|c| c.wakers.iter().cloned())
            .collect()
    }
}

/// The default worker count: the machine's cores, at least 4 (loaders often wait on I/O).
pub fn default_threads() -> usize {
    std::thread::available_parallelism()
        .map(|n| n.get())
        .unwrap_or(1)
        .max(4)
}

impl LoaderPool {
    /// A pool of `threads` workers (at least 1).
    ///
    /// Fails if the system refuses to start a thread.
    pub fn new(threads: usize) -> Result<Self, SourceError> {
        let threads = threads.max(1);
        let shared = Arc::new(PoolShared {
            state: Mutex::new(PoolState::default()),
            wake: Condvar::new(),
        });
        let handle = Arc::new(PoolHandle {
            shared: shared.clone(),
            threads,
        });
        for i in 0..threads {
            let shared = shared.clone();
            std::thread::Builder::new()
                .name(format!("sluice-loader-{i}"))
                .spawn(move || worker(&shared))
                .map_err(|e| {
                    SourceError::custom(format!("cannot start loader thread {i} of {threads}: {e}"))
                })?;
        }
        Ok(LoaderPool { handle })
    }

    /// The process-wide pool, made on first use with [`default_threads`] workers.
    pub fn shared() -> Result<Self, SourceError> {
        static SHARED: OnceLock<Result<LoaderPool, String>> = OnceLock::new();
        SHARED
            .get_or_init(|| LoaderPool::new(default_threads()).map_err(|e| e.to_string()))
            .clone()
            .map_err(SourceError::custom)
    }

    /// The number of worker threads.
    pub fn threads(&self) -> usize {
        self.handle.threads
    }

    fn shared_state(&self) -> &PoolShared {
        &self.handle.shared
    }

    pub(crate) fn register(&self, core: Arc<SourceCore>, max_in_flight: usize) {
        let mut state = self.shared_state().state.lock();
        state.sources.insert(
            core.id,
            SourceSched {
                core,
                max_in_flight: max_in_flight.max(1),
                consumers: HashMap::new(),
                merged: HashMap::new(),
                queue: BTreeSet::new(),
                queued: HashMap::new(),
                backoff: HashMap::new(),
                loading: HashSet::new(),
                failed: HashMap::new(),
            },
        );
    }

    pub(crate) fn unregister(&self, source: SourceKey) {
        self.shared_state().state.lock().sources.remove(&source);
    }

    /// Replaces `consumer`'s wanted set (`add` false) or adds to it (`add` true). Returns
    /// whether one of `wants` is now queued or loading (so that its settling wakes `waker`).
    pub(crate) fn request(
        &self,
        source: SourceKey,
        consumer: ConsumerId,
        wants: &[ChunkWant],
        waker: &Waker,
        add: bool,
    ) -> bool {
        let shared = self.shared_state();
        let mut guard = shared.state.lock();
        let state = &mut *guard;
        let Some(sched) = state.sources.get_mut(&source) else {
            return false;
        };
        let mut new: HashMap<ChunkKey, ChunkWant> = HashMap::with_capacity(wants.len());
        for w in wants {
            new.entry(w.key)
                .and_modify(|old| *old = old.more_urgent(*w))
                .or_insert(*w);
        }
        let entry = sched.consumers.entry(consumer).or_default();
        if !entry.wakers.iter().any(|w| w.will_wake(waker)) {
            if !add {
                entry.wakers.clear();
            }
            entry.wakers.push(waker.clone());
        }
        // In the stated order, so that equal wants load in that order.
        let mut affected: Vec<ChunkKey> = wants.iter().map(|w| w.key).collect();
        if add {
            for (k, w) in new {
                entry
                    .wants
                    .entry(k)
                    .and_modify(|old| *old = old.more_urgent(w))
                    .or_insert(w);
            }
        } else {
            let old = std::mem::replace(&mut entry.wants, new);
            affected.extend(old.into_keys());
        }
        let mut queued_any = false;
        for key in affected {
            queued_any |= sched.reconcile(&mut state.seq, key);
        }
        let pending = wants.iter().any(|w| {
            sched.loading.contains(&w.key)
                || sched.queued.contains_key(&w.key)
                || sched.backoff.contains_key(&w.key)
        });
        drop(guard);
        if queued_any {
            shared.wake.notify_all();
        }
        pending
    }

    /// Forgets `consumer`'s wanted set and wakers.
    pub(crate) fn forget_consumer(&self, source: SourceKey, consumer: ConsumerId) {
        let mut guard = self.shared_state().state.lock();
        let state = &mut *guard;
        let Some(sched) = state.sources.get_mut(&source) else {
            return;
        };
        if let Some(c) = sched.consumers.remove(&consumer) {
            for key in c.wants.into_keys() {
                sched.reconcile(&mut state.seq, key);
            }
        }
    }

    /// Where a chunk stands in the scheduler, or `None` if it is not queued, loading or failed.
    pub(crate) fn scheduled_status(&self, source: SourceKey, key: ChunkKey) -> Option<ChunkStatus> {
        let state = self.shared_state().state.lock();
        let sched = state.sources.get(&source)?;
        sched_status(sched, key)
    }

    pub(crate) fn progress(&self, source: SourceKey, consumer: ConsumerId) -> ChunkProgress {
        let state = self.shared_state().state.lock();
        let mut p = ChunkProgress::default();
        let Some(sched) = state.sources.get(&source) else {
            return p;
        };
        let Some(c) = sched.consumers.get(&consumer) else {
            return p;
        };
        for want in c.wants.values() {
            let status = sched_status(sched, want.key).unwrap_or_else(|| {
                match sched.core.cache.contains(sched.core.id, want.key) {
                    Some(_) => ChunkStatus::Ready,
                    None => ChunkStatus::Unrequested,
                }
            });
            let resident = status.is_resident();
            match want.tier {
                Tier::Visible => {
                    p.visible_wanted += 1;
                    p.visible_resident += resident as usize;
                }
                Tier::Prefetch => {
                    p.prefetch_wanted += 1;
                    p.prefetch_resident += resident as usize;
                }
            }
            match status {
                ChunkStatus::Queued => p.queued += 1,
                ChunkStatus::Loading => p.loading += 1,
                ChunkStatus::Failed(f) => p.failed.push((want.key, f)),
                _ => {}
            }
        }
        p.failed.sort_by_key(|(k, _)| *k);
        p
    }

    /// Forgets `keys` (cached bytes, emptiness, failure) and queues those still wanted.
    pub(crate) fn invalidate(&self, source: SourceKey, keys: &[ChunkKey]) {
        let shared = self.shared_state();
        let mut guard = shared.state.lock();
        let state = &mut *guard;
        let Some(sched) = state.sources.get_mut(&source) else {
            return;
        };
        let mut queued_any = false;
        for key in keys {
            sched.failed.remove(key);
            sched.core.cache.remove(source, *key);
            queued_any |= sched.reconcile(&mut state.seq, *key);
        }
        drop(guard);
        if queued_any {
            shared.wake.notify_all();
        }
    }

    /// Forgets the source's failed chunks and queues those still wanted; returns the keys.
    pub(crate) fn retry_failed(&self, source: SourceKey) -> Vec<ChunkKey> {
        let shared = self.shared_state();
        let mut guard = shared.state.lock();
        let state = &mut *guard;
        let Some(sched) = state.sources.get_mut(&source) else {
            return Vec::new();
        };
        let keys: Vec<ChunkKey> = sched.failed.drain().map(|(k, _)| k).collect();
        let mut queued_any = false;
        for key in &keys {
            queued_any |= sched.reconcile(&mut state.seq, *key);
        }
        drop(guard);
        if queued_any {
            shared.wake.notify_all();
        }
        keys
    }
}

fn sched_status(sched: &SourceSched, key: ChunkKey) -> Option<ChunkStatus> {
    if sched.loading.contains(&key) {
        Some(ChunkStatus::Loading)
    } else if sched.queued.contains_key(&key) || sched.backoff.contains_key(&key) {
        Some(ChunkStatus::Queued)
    } else {
        sched
            .failed
            .get(&key)
            .map(|f| ChunkStatus::Failed(f.clone()))
    }
}

impl std::fmt::Debug for LoaderPool {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LoaderPool")
            .field("threads", &self.threads())
            .finish()
    }
}

/// A job a worker took: the source, the chunk and the attempts made before.
struct Job {
    core: Arc<SourceCore>,
    key: ChunkKey,
    attempts: u32,
}

/// Takes the most urgent runnable chunk of all sources, or says when to look again.
fn take_job(state: &mut PoolState, now: Instant) -> Result<Job, Option<Instant>> {
    let mut next_retry: Option<Instant> = None;
    let mut seq = state.seq;
    for sched in state.sources.values_mut() {
        let due: Vec<(ChunkKey, u32)> = sched
            .backoff
            .iter()
            .filter(|(_, (at, _))| *at <= now)
            .map(|(k, (_, n))| (*k, *n))
            .collect();
        for (key, attempts) in due {
            sched.backoff.remove(&key);
            if let Some(want) = sched.merged.get(&key).copied() {
                sched.enqueue(&mut seq, want, attempts);
            }
        }
        if let Some(at) = sched.backoff.values().map(|(at, _)| *at).min() {
            next_retry = Some(next_retry.map_or(at, |n| n.min(at)));
        }
    }
    state.seq = seq;
    let best = state
        .sources
        .iter()
        .filter(|(_, s)| s.loading.len() < s.max_in_flight)
        .filter_map(|(id, s)| s.queue.first().map(|e| (*e, *id)))
        .min();
    let Some((entry, id)) = best else {
        return Err(next_retry);
    };
    let sched = state.sources.get_mut(&id).ok_or(next_retry)?;
    let attempts = sched.queued.get(&entry.key).map_or(0, |(_, n)| *n);
    sched.dequeue(&entry.key);
    sched.loading.insert(entry.key);
    Ok(Job {
        core: sched.core.clone(),
        key: entry.key,
        attempts,
    })
}

fn worker(shared: &PoolShared) {
    loop {
        let job = {
            let mut state = shared.state.lock();
            loop {
                if state.shutdown {
                    return;
                }
                match take_job(&mut state, Instant::now()) {
                    Ok(job) => break job,
                    Err(Some(at)) => {
                        shared.wake.wait_until(&mut state, at);
                    }
                    Err(None) => shared.wake.wait(&mut state),
                }
            }
        };
        let outcome = run_job(&job);
        let wakers = {
            let mut guard = shared.state.lock();
            let state = &mut *guard;
            let Some(sched) = state.sources.get_mut(&job.core.id) else {
                continue;
            };
            sched.loading.remove(&job.key);
            let attempts = job.attempts + 1;
            let mut settled = true;
            if let Err(error) = outcome {
                let retry = &job.core.retry;
                if error.is_transient() && attempts < retry.attempts {
                    if sched.merged.contains_key(&job.key) {
                        let at = Instant::now() + retry.delay(attempts + 1);
                        sched.backoff.insert(job.key, (at, attempts));
                    }
                    settled = false;
                } else {
                    sched.failed.insert(
                        job.key,
                        ChunkFailure {
                            error: Arc::new(error),
                            attempts,
                        },
                    );
                }
            }
            if settled {
                sched.reconcile(&mut state.seq, job.key);
            }
            let wakers = if settled { sched.wakers() } else { Vec::new() };
            if let Some(reader) = sched.consumers.get_mut(&job.core.reader) {
                if reader.wants.is_empty() {
                    reader.wakers.clear();
                }
            }
            wakers
        };
        // Another worker may run what this one's retry left, or the next chunk.
        shared.wake.notify_one();
        for waker in wakers {
            waker.wake();
        }
    }
}

/// Loads one chunk into the cache, turning a panic into an error.
fn run_job(job: &Job) -> Result<(), SourceError> {
    let core = &job.core;
    match catch_unwind(AssertUnwindSafe(|| core.load_into_cache(job.key))) {
        Ok(result) => result,
        Err(payload) => {
            let message = payload
                .downcast_ref::<&str>()
                .map(|s| s.to_string())
                .or_else(|| payload.downcast_ref::<String>().cloned())
                .unwrap_or_else(|| "a non-string panic payload".into());
            Err(SourceError::LoaderPanicked {
                label: core.label.clone(),
                key: job.key,
                message,
            })
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn backoff_doubles_up_to_its_ceiling() {
        let p = RetryPolicy {
            attempts: 10,
            backoff: Duration::from_millis(10),
            max_backoff: Duration::from_millis(50),
        };
        assert_eq!(p.delay(2), Duration::from_millis(10));
        assert_eq!(p.delay(3), Duration::from_millis(20));
        assert_eq!(p.delay(4), Duration::from_millis(40));
        assert_eq!(p.delay(5), Duration::from_millis(50));
        assert_eq!(p.delay(40), Duration::from_millis(50));
    }

    #[test]
    fn ordered_bits_orders_like_floats() {
        let v = [-1e300, -2.0, -0.0, 0.0, 1.0, 3.5, 1e300, f64::INFINITY];
        for w in v.windows(2) {
            assert!(ordered_bits(w[0]) <= ordered_bits(w[1]), "{w:?}");
        }
        assert_eq!(ordered_bits(f64::NAN), ordered_bits(f64::INFINITY));
    }
}
