//! Watching a store that is still being written: chunks that loaded empty are checked again
//! every poll interval, and those that have appeared are invalidated so that they load.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Weak};
use std::thread::JoinHandle;
use std::time::Duration;

use sluice_core::{ChunkFill, LazySource};

use crate::source::ZarrSource;

/// A thread that polls the chunks a [`LazySource`] of a [`ZarrSource`] found empty, and
/// invalidates those that have been written since, so that they load and replace the fill
/// (the source's version moves and reports their footprint changed). Made by
/// [`ZarrSource::watch`]; stops when dropped or when the lazy source is gone.
///
/// Each poll reads every still-empty chunk once (one request each on remote stores; an absent
/// one answers 404 without a body), on the watcher's own thread: the loader pool and the render
/// thread never wait for it.
#[must_use = "the watcher stops when dropped"]
pub struct Watcher {
    stop: Arc<AtomicBool>,
    polls: Arc<AtomicU64>,
    appeared: Arc<AtomicU64>,
    thread: Option<JoinHandle<()>>,
}

impl Watcher {
    /// Polls completed so far.
    pub fn polls(&self) -> u64 {
        self.polls.load(Ordering::Relaxed)
    }

    /// Chunks seen appearing (and invalidated) so far.
    pub fn appeared(&self) -> u64 {
        self.appeared.load(Ordering::Relaxed)
    }
}

impl Drop for Watcher {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(thread) = self.thread.take() {
            thread.thread().unpark();
            let _ = thread.join();
        }
    }
}

impl ZarrSource {
    /// Watches the store behind `lazy` (a lazy source made from this `ZarrSource`, e.g. by
    /// [`ZarrSource::lazy`]) every `interval`: chunks that loaded empty and have been written
    /// since are invalidated, so that the next request loads them. A read error during a poll
    /// leaves the chunk empty until a later poll succeeds.
    pub fn watch(&self, lazy: &Arc<LazySource>, interval: Duration) -> Watcher {
        let stop = Arc::new(AtomicBool::new(false));
        let polls = Arc::new(AtomicU64::new(0));
        let appeared = Arc::new(AtomicU64::new(0));
        let source = self.clone();
        let weak: Weak<LazySource> = Arc::downgrade(lazy);
        let (s, p, a) = (stop.clone(), polls.clone(), appeared.clone());
        let thread = std::thread::Builder::new()
            .name("sluice-zarr-watch".into())
            .spawn(move || poll_loop(&source, &weak, interval, &s, &p, &a))
            .ok();
        Watcher {
            stop,
            polls,
            appeared,
            thread,
        }
    }
}

fn poll_loop(
    source: &ZarrSource,
    lazy: &Weak<LazySource>,
    interval: Duration,
    stop: &AtomicBool,
    polls: &AtomicU64,
    appeared: &AtomicU64,
) {
    let mut buf = Vec::new();
    while !stop.load(Ordering::Relaxed) {
        std::thread::park_timeout(interval);
        if stop.load(Ordering::Relaxed) {
            return;
        }
        let Some(lazy) = lazy.upgrade() else { return };
        let mut written = Vec::new();
        for key in lazy.empty_chunks() {
            let Ok(region) = source.chunk_region(key.level, key.index) else {
                continue;
            };
            let Some(bytes) = region.len().checked_mul(source.sample_bytes()) else {
                continue;
            };
            buf.resize(bytes, 0);
            if let Ok(ChunkFill::Filled) = source.read_chunk(key.level, key.index, &mut buf) {
                written.push(key);
            }
        }
        if !written.is_empty() {
            appeared.fetch_add(written.len() as u64, Ordering::Relaxed);
            lazy.invalidate(&written);
        }
        polls.fetch_add(1, Ordering::Relaxed);
    }
}
