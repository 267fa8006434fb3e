//! The host chunk cache: decoded chunks of every lazy source, evicted least recently used first
//! under one byte budget.

use std::collections::{BTreeMap, HashMap};
use std::sync::{Arc, OnceLock};

use parking_lot::Mutex;

use crate::chunk::ChunkKey;

/// The budget of [`ChunkCache::shared`]: 1 GiB of decoded chunks.
pub const DEFAULT_CACHE_BYTES: usize = 1 << 30;

/// A chunk in the cache.
#[derive(Clone, Debug)]
pub(crate) enum Cached {
    /// The chunk's decoded bytes.
    Ready(Arc<[u8]>),
    /// Absent on purpose: reads give the fill value.
    Empty,
}

/// Which source a chunk belongs to (a [`crate::LazySource`]'s id).
pub(crate) type SourceKey = u64;

/// Decoded chunks of lazy sources in host memory, under a byte budget.
///
/// One cache is shared by every lazy source of a process ([`ChunkCache::shared`]) unless a user
/// makes more ([`ChunkCache::new`]). Bytes are counted decoded (what reads hand out), not as
/// stored; empty chunks cost nothing. When a new chunk would exceed the budget, the least
/// recently used chunks (of any source) are evicted first; a read or lend of a chunk counts as
/// a use. The budget is never exceeded: a single chunk larger than the budget fails with
/// [`SourceError::ChunkOverBudget`](crate::SourceError::ChunkOverBudget).
/// Clones share the same cache.
#[derive(Clone)]
pub struct ChunkCache {
    inner: Arc<Mutex<CacheState>>,
    budget: usize,
}

struct Entry {
    data: Cached,
    tick: u64,
}

#[derive(Default)]
struct CacheState {
    entries: HashMap<(SourceKey, ChunkKey), Entry>,
    lru: BTreeMap<u64, (SourceKey, ChunkKey)>,
    tick: u64,
    bytes: usize,
    peak: usize,
    evictions: u64,
}

impl CacheState {
    fn touch(&mut self, key: (SourceKey, ChunkKey)) -> Option<Cached> {
        self.tick += 1;
        let tick = self.tick;
        let entry = self.entries.get_mut(&key)?;
        self.lru.remove(&entry.tick);
        entry.tick = tick;
        self.lru.insert(tick, key);
        Some(entry.data.clone())
    }

    fn remove(&mut self, key: &(SourceKey, ChunkKey)) {
        if let Some(entry) = self.entries.remove(key) {
            self.lru.remove(&entry.tick);
            self.bytes -= cached_bytes(&entry.data);
        }
    }
}

fn cached_bytes(data: &Cached) -> usize {
    match data {
        Cached::Ready(bytes) => bytes.len(),
        Cached::Empty => 0,
    }
}

impl ChunkCache {
    /// A cache holding at most `budget_bytes` of decoded chunks.
    pub fn new(budget_bytes: usize) -> Self {
        ChunkCache {
            inner: Arc::new(Mutex::new(CacheState::default())),
            budget: budget_bytes,
        }
    }

    /// The process-wide cache, made on first use with [`DEFAULT_CACHE_BYTES`].
    pub fn shared() -> Self {
        static SHARED: OnceLock<ChunkCache> = OnceLock::new();
        SHARED
            .get_or_init(|| ChunkCache::new(DEFAULT_CACHE_BYTES))
            .clone()
    }

    /// The byte budget.
    pub fn budget(&self) -> usize {
        self.budget
    }

    /// Decoded bytes held now.
    pub fn resident_bytes(&self) -> usize {
        self.inner.lock().bytes
    }

    /// The most decoded bytes held at once since the cache was made.
    pub fn peak_bytes(&self) -> usize {
        self.inner.lock().peak
    }

    /// Chunks held now (empty ones included).
    pub fn len(&self) -> usize {
        self.inner.lock().entries.len()
    }

    /// Whether no chunk is held.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Chunks evicted to stay within the budget since the cache was made.
    pub fn evictions(&self) -> u64 {
        self.inner.lock().evictions
    }

    /// The chunk, counted as a use.
    pub(crate) fn get(&self, source: SourceKey, key: ChunkKey) -> Option<Cached> {
        self.inner.lock().touch((source, key))
    }

    /// Whether the chunk is held, without counting a use.
    pub(crate) fn contains(&self, source: SourceKey, key: ChunkKey) -> Option<bool> {
        let state = self.inner.lock();
        state
            .entries
            .get(&(source, key))
            .map(|e| matches!(e.data, Cached::Empty))
    }

    /// Stores a chunk, evicting least recently used ones to stay within the budget. Fails
    /// (storing nothing) with the chunk's size if it alone exceeds the budget.
    pub(crate) fn insert(
        &self,
        source: SourceKey,
        key: ChunkKey,
        data: Cached,
    ) -> Result<(), usize> {
        let bytes = cached_bytes(&data);
        if bytes > self.budget {
            return Err(bytes);
        }
        let mut state = self.inner.lock();
        state.remove(&(source, key));
        while state.bytes + bytes > self.budget {
            let Some((_, victim)) = state.lru.pop_first() else {
                break;
            };
            if let Some(entry) = state.entries.remove(&victim) {
                state.bytes -= cached_bytes(&entry.data);
                state.evictions += 1;
            }
        }
        state.tick += 1;
        let tick = state.tick;
        state.entries.insert((source, key), Entry { data, tick });
        state.lru.insert(tick, (source, key));
        state.bytes += bytes;
        state.peak = state.peak.max(state.bytes);
        Ok(())
    }

    /// Drops one chunk.
    pub(crate) fn remove(&self, source: SourceKey, key: ChunkKey) {
        self.inner.lock().remove(&(source, key));
    }

    /// The empty chunks of `source` held now.
    pub(crate) fn empty_keys(&self, source: SourceKey) -> Vec<ChunkKey> {
        let state = self.inner.lock();
        let mut keys: Vec<ChunkKey> = state
            .entries
            .iter()
            .filter(|((s, _), e)| *s == source && matches!(e.data, Cached::Empty))
            .map(|((_, k), _)| *k)
            .collect();
        keys.sort();
        keys
    }

    /// Drops every chunk of `source` (a lazy source that was dropped).
    pub(crate) fn remove_source(&self, source: SourceKey) {
        let mut state = self.inner.lock();
        let keys: Vec<_> = state
            .entries
            .keys()
            .filter(|(s, _)| *s == source)
            .copied()
            .collect();
        for key in keys {
            state.remove(&key);
        }
    }
}

impl std::fmt::Debug for ChunkCache {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ChunkCache")
            .field("budget", &self.budget)
            .field("resident_bytes", &self.resident_bytes())
            .finish()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn chunk(n: usize) -> Cached {
        Cached::Ready(vec![7u8; n].into())
    }

    fn key(i: usize) -> ChunkKey {
        ChunkKey::new(0, [0, 0, i])
    }

    #[test]
    fn least_recently_used_chunks_go_first_and_the_budget_holds() {
        let cache = ChunkCache::new(300);
        for i in 0..3 {
            cache.insert(1, key(i), chunk(100)).unwrap();
        }
        assert_eq!(cache.resident_bytes(), 300);
        // Use chunk 0, so chunk 1 is now the least recently used.
        assert!(cache.get(1, key(0)).is_some());
        cache.insert(2, key(9), chunk(150)).unwrap();
        assert!(cache.resident_bytes() <= 300);
        assert!(cache.contains(1, key(1)).is_none(), "LRU chunk 1 evicted");
        assert!(cache.contains(1, key(2)).is_none(), "then chunk 2");
        assert!(cache.contains(1, key(0)).is_some(), "the used chunk stays");
        assert_eq!(cache.resident_bytes(), 250);
        assert_eq!(cache.evictions(), 2);
        assert_eq!(cache.peak_bytes(), 300);
    }

    /// A reference model: chunks in recency order, oldest first.
    #[derive(Default)]
    struct Model {
        order: Vec<(u64, ChunkKey, usize)>,
    }

    impl Model {
        fn bytes(&self) -> usize {
            self.order.iter().map(|(_, _, n)| n).sum()
        }
        fn get(&mut self, s: u64, k: ChunkKey) -> bool {
            let Some(i) = self.order.iter().position(|(a, b, _)| (*a, *b) == (s, k)) else {
                return false;
            };
            let e = self.order.remove(i);
            self.order.push(e);
            true
        }
        fn insert(&mut self, s: u64, k: ChunkKey, n: usize, budget: usize) {
            self.order.retain(|(a, b, _)| (*a, *b) != (s, k));
            while self.bytes() + n > budget && !self.order.is_empty() {
                self.order.remove(0);
            }
            self.order.push((s, k, n));
        }
    }

    #[test]
    fn eviction_matches_a_least_recently_used_model_under_random_use() {
        for seed in 1..=40u64 {
            let mut x = seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
            let mut rng = move |n: u64| {
                x ^= x >> 12;
                x ^= x << 25;
                x ^= x >> 27;
                x.wrapping_mul(0x2545_F491_4F6C_DD1D) % n
            };
            let budget = 200 + rng(800) as usize;
            let cache = ChunkCache::new(budget);
            let mut model = Model::default();
            for _ in 0..300 {
                let s = 1 + rng(3);
                let k = key(rng(12) as usize);
                if rng(3) == 0 {
                    assert_eq!(cache.get(s, k).is_some(), model.get(s, k), "seed {seed}");
                } else {
                    let n = rng(budget as u64 / 2) as usize;
                    let data = if n == 0 { Cached::Empty } else { chunk(n) };
                    cache.insert(s, k, data).unwrap();
                    model.insert(s, k, n, budget);
                }
                assert_eq!(cache.resident_bytes(), model.bytes(), "seed {seed}");
                assert!(cache.resident_bytes() <= budget, "seed {seed}");
                assert_eq!(cache.len(), model.order.len(), "seed {seed}");
            }
            assert!(cache.peak_bytes() <= budget);
        }
    }

    #[test]
    fn empty_chunks_cost_nothing_and_oversized_ones_are_refused() {
        let cache = ChunkCache::new(100);
        cache.insert(1, key(0), Cached::Empty).unwrap();
        assert_eq!(cache.contains(1, key(0)), Some(true));
        assert_eq!(cache.resident_bytes(), 0);
        assert_eq!(cache.insert(1, key(1), chunk(101)), Err(101));
        assert_eq!(cache.len(), 1);
        cache.insert(1, key(2), chunk(60)).unwrap();
        cache.remove_source(1);
        assert!(cache.is_empty());
        assert_eq!(cache.resident_bytes(), 0);
    }
}
