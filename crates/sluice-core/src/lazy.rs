//! `LazySource`: a [`DataSource`] whose chunks a [`ChunkLoader`] loads on demand, on a shared
//! loader pool, into a shared host cache.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::task::Waker;

use parking_lot::Mutex;

use crate::cache::{Cached, ChunkCache, SourceKey};
use crate::changes::{ChangeLog, Changes, Version};
use crate::chunk::{ChunkKey, ChunkProgress, ChunkStatus, ChunkWant};
use crate::error::SourceError;
use crate::layout::{ChunkGrid, Layout};
use crate::loader::{ChunkFill, ChunkLoader};
use crate::pool::{LoaderPool, RetryPolicy};
use crate::pyramid;
use crate::region::Region;
use crate::source::{
    check_read, ConsumerId, DataSource, HostView, LendOutcome, ReadRequest, ReadStatus,
};

/// Where a lazy source loads and keeps its chunks, and how it retries.
#[derive(Clone, Debug)]
pub struct LazyOptions {
    /// The worker threads that run the loader.
    pub pool: LoaderPool,
    /// The host cache that holds the decoded chunks.
    pub cache: ChunkCache,
    /// Retries of transient errors.
    pub retry: RetryPolicy,
    /// The most loads of this source running at once, so that a slow source leaves workers to
    /// the others.
    pub max_in_flight: usize,
}

impl LazyOptions {
    /// The process-wide [`LoaderPool::shared`] and [`ChunkCache::shared`], the default
    /// [`RetryPolicy`], and at most half the pool's threads (at least 1) for this source.
    pub fn shared() -> Result<Self, SourceError> {
        Ok(Self::with_pool(LoaderPool::shared()?, ChunkCache::shared()))
    }

    /// `pool` and `cache`, the default [`RetryPolicy`], and at most half the pool's threads (at
    /// least 1) for this source.
    pub fn with_pool(pool: LoaderPool, cache: ChunkCache) -> Self {
        let max_in_flight = (pool.threads() / 2).max(1);
        LazyOptions {
            pool,
            cache,
            retry: RetryPolicy::default(),
            max_in_flight,
        }
    }
}

/// What the pool's workers need of a lazy source.
pub(crate) struct SourceCore {
    pub(crate) id: SourceKey,
    /// The consumer id under which reads queue the chunks they miss.
    pub(crate) reader: ConsumerId,
    pub(crate) label: String,
    pub(crate) cache: ChunkCache,
    pub(crate) retry: RetryPolicy,
    loader: Arc<dyn ChunkLoader>,
    layout: Layout,
    fill: Vec<u8>,
    /// Levels from this one on are computed from the level before (a lazy pyramid).
    computed_from: usize,
    loader_calls: AtomicU64,
}

impl SourceCore {
    /// Loads chunk `key` (computing it from finer levels for a pyramid) into the cache.
    pub(crate) fn load_into_cache(&self, key: ChunkKey) -> Result<(), SourceError> {
        self.obtain(key).map(|_| ())
    }

    /// The chunk from the cache, or loaded (and cached) now on this thread.
    fn obtain(&self, key: ChunkKey) -> Result<Cached, SourceError> {
        if let Some(cached) = self.cache.get(self.id, key) {
            return Ok(cached);
        }
        let region = key.region(&self.layout)?;
        let bytes = region.size[0]
            .checked_mul(region.size[1])
            .and_then(|n| n.checked_mul(region.size[2]))
            .and_then(|n| n.checked_mul(self.layout.sample_bytes()))
            .ok_or_else(|| {
                SourceError::custom(format!(
                    "{}: {key} ({region}) has more bytes than usize holds",
                    self.label
                ))
            })?;
        // Refuse before allocating: a chunk the cache cannot hold is an error, not an abort.
        if bytes > self.cache.budget() {
            return Err(SourceError::ChunkOverBudget {
                label: self.label.clone(),
                key,
                bytes,
                budget: self.cache.budget(),
            });
        }
        let cached = if key.level >= self.computed_from {
            let mut dst = vec![0u8; bytes];
            self.compute_from_finer(key, region, &mut dst)?;
            Cached::Ready(dst.into())
        } else {
            let mut dst = vec![0u8; bytes];
            self.loader_calls.fetch_add(1, Ordering::Relaxed);
            match self.loader.load(key, region, &mut dst)? {
                ChunkFill::Filled => Cached::Ready(dst.into()),
                ChunkFill::Empty => Cached::Empty,
            }
        };
        self.cache
            .insert(self.id, key, cached.clone())
            .map_err(|bytes| SourceError::ChunkOverBudget {
                label: self.label.clone(),
                key,
                bytes,
                budget: self.cache.budget(),
            })?;
        Ok(cached)
    }

    /// Fills `dst` with chunk `key` of a computed level: each sample the mean of the 2 (per
    /// spatial axis) samples of the level before that it covers.
    fn compute_from_finer(
        &self,
        key: ChunkKey,
        region: Region,
        dst: &mut [u8],
    ) -> Result<(), SourceError> {
        let finer_level = &self.layout.levels()[key.level - 1];
        let factor = pyramid::factor(self.layout.shape().ndim());
        let finer_region = pyramid::finer_region(&region, factor, &finer_level.shape);
        let mut acc =
            pyramid::Accumulator::new(region, self.layout.element(), self.layout.channels());
        let (lo, hi) = finer_level.chunks.chunks_touched(&finer_region);
        for z in lo[0]..hi[0] {
            for y in lo[1]..hi[1] {
                for x in lo[2]..hi[2] {
                    let finer = ChunkKey::new(key.level - 1, [z, y, x]);
                    let chunk_region = finer.region(&self.layout)?;
                    let Some(part) = chunk_region.intersection(&finer_region) else {
                        continue;
                    };
                    match self.obtain(finer)? {
                        Cached::Ready(bytes) => acc.add(&bytes, &chunk_region, &part, factor),
                        Cached::Empty => acc.add_fill(&self.fill, &part, factor),
                    }
                }
            }
        }
        acc.write(dst);
        Ok(())
    }
}

/// A source whose chunks a [`ChunkLoader`] loads on demand: procedural data, a huge file, a
/// Zarr store.
///
/// It implements [`DataSource`]: [`DataSource::request_chunks`] states what a consumer wants
/// (replacing its previous set), chunks load on a [`LoaderPool`] into a [`ChunkCache`], and
/// `read`/`lend` serve what is resident at once. A read that touches a chunk not yet
/// resident answers [`ReadStatus::Pending`], queues the chunks it misses (as visible) and wakes
/// the request's waker once they have settled. Empty and failed chunks read as the loader's
/// [`ChunkLoader::fill_value`]; a failed chunk is not loaded again until
/// [`DataSource::retry_failed`]. Nothing of it ever blocks on a loader.
///
/// The data is immutable: the version moves only when `retry_failed` forgets failed chunks
/// (their level-0 footprint is reported changed, since they read as fill before).
pub struct LazySource {
    core: Arc<SourceCore>,
    pool: LoaderPool,
    changes: Mutex<ChangeLog>,
}

impl LazySource {
    /// A lazy source of `loader` on the process-wide pool and cache ([`LazyOptions::shared`]).
    pub fn new(loader: impl ChunkLoader) -> Result<Self, SourceError> {
        Self::with_options(loader, LazyOptions::shared()?)
    }

    /// A lazy source of `loader` with `options`.
    pub fn with_options(
        loader: impl ChunkLoader,
        options: LazyOptions,
    ) -> Result<Self, SourceError> {
        Self::from_shared(Arc::new(loader), options)
    }

    /// A lazy source of a shared `loader` with `options`.
    ///
    /// Fails if the loader's layout has an invalid level (see [`Layout::with_levels`]).
    pub fn from_shared(
        loader: Arc<dyn ChunkLoader>,
        options: LazyOptions,
    ) -> Result<Self, SourceError> {
        let layout = loader.layout();
        let levels = layout.levels().len();
        Self::build(loader, layout, levels, options)
    }

    /// A lazy multiscale source whose level 0 is `base`'s level 0 and whose `levels - 1`
    /// coarser levels are computed on the pool from the level before: each sample the mean of
    /// the 2 x 2 (images) or 2 x 2 x 2 (volumes) samples it covers, in the element type
    /// (integers rounded), each level in chunks of level 0's chunk size. Computed chunks are
    /// cached like loaded ones, so finer chunks are loaded once while they stay in the cache.
    /// Computing a chunk of level `n` needs `4^n` (images) or `8^n` (volumes) chunks' worth of
    /// level 0: the coarsest level of a huge file reads all of it once.
    ///
    /// Fails if `levels` is 0 or more than the halvings level 0's shape allows (a level of 1
    /// sample per axis is the last).
    pub fn pyramid(
        base: impl ChunkLoader,
        levels: usize,
        options: LazyOptions,
    ) -> Result<Self, SourceError> {
        let loader: Arc<dyn ChunkLoader> = Arc::new(base);
        let base_layout = loader.layout();
        let coarser = pyramid::levels(&base_layout, levels)?;
        let layout = base_layout.with_levels(coarser)?;
        Self::build(loader, layout, 1, options)
    }

    fn build(
        loader: Arc<dyn ChunkLoader>,
        layout: Layout,
        computed_from: usize,
        options: LazyOptions,
    ) -> Result<Self, SourceError> {
        // Revalidate what a custom loader stated.
        let layout = layout
            .clone()
            .with_levels(layout.levels()[1..].iter().copied())?;
        let fill = loader.fill_value();
        if fill.len() != layout.sample_bytes() {
            return Err(SourceError::custom(format!(
                "{}: fill value of {} bytes, but one sample ({} x {}) is {} bytes",
                loader.label(),
                fill.len(),
                layout.channels(),
                layout.element(),
                layout.sample_bytes()
            )));
        }
        static NEXT: AtomicU64 = AtomicU64::new(1);
        let core = Arc::new(SourceCore {
            id: NEXT.fetch_add(1, Ordering::Relaxed),
            reader: ConsumerId::next(),
            label: loader.label(),
            cache: options.cache,
            retry: options.retry,
            loader,
            layout,
            fill,
            computed_from,
            loader_calls: AtomicU64::new(0),
        });
        options.pool.register(core.clone(), options.max_in_flight);
        Ok(LazySource {
            core,
            pool: options.pool,
            changes: Mutex::new(ChangeLog::new(256)),
        })
    }

    /// How many times the loader's `load` ran (computed pyramid levels not counted).
    pub fn loader_calls(&self) -> u64 {
        self.core.loader_calls.load(Ordering::Relaxed)
    }

    /// Forgets chunks so that they load again: their cached bytes (or emptiness) and failures
    /// are dropped, those still wanted are queued, and their level-0 footprint is reported
    /// changed. For a store that is still being written: a watcher that sees a chunk appear
    /// (see [`LazySource::empty_chunks`]) invalidates it. A load of one of them already running
    /// is not interrupted; its result is kept.
    pub fn invalidate(&self, keys: &[ChunkKey]) {
        self.pool.invalidate(self.core.id, keys);
        let mut changes = self.changes.lock();
        for key in keys {
            if let Some(region) = level0_footprint(&self.core.layout, *key) {
                changes.record(region);
            }
        }
    }

    /// The chunks that loaded as empty (absent on purpose) and are still cached, in key order.
    pub fn empty_chunks(&self) -> Vec<ChunkKey> {
        self.core.cache.empty_keys(self.core.id)
    }

    /// The cache the chunks live in.
    pub fn cache(&self) -> &ChunkCache {
        &self.core.cache
    }

    /// Copies the resident chunks of a checked request into `dst`, the failed ones as the
    /// fill value; returns the chunks still to load.
    fn copy_resident(&self, request: &ReadRequest<'_>, dst: &mut [u8]) -> Vec<ChunkWant> {
        let layout = &self.core.layout;
        let level = &layout.levels()[request.level];
        let grid: ChunkGrid = level.chunks;
        let (lo, hi) = grid.chunks_touched(&request.region);
        let sb = layout.sample_bytes();
        let mut missing = Vec::new();
        for z in lo[0]..hi[0] {
            for y in lo[1]..hi[1] {
                for x in lo[2]..hi[2] {
                    let key = ChunkKey::new(request.level, [z, y, x]);
                    let chunk_region = grid.chunk_region(key.index, &level.shape);
                    let Some(part) = chunk_region.intersection(&request.region) else {
                        continue;
                    };
                    if self
                        .copy_part(key, &chunk_region, &part, &request.region, dst)
                        .is_some()
                    {
                        continue;
                    }
                    if let Some(ChunkStatus::Failed(_)) =
                        self.pool.scheduled_status(self.core.id, key)
                    {
                        let row = part.size[2] * sb;
                        for pz in 0..part.size[0] {
                            for py in 0..part.size[1] {
                                let at = [part.origin[0] + pz, part.origin[1] + py, part.origin[2]];
                                let d = offset(&request.region, at, sb);
                                fill_row(&mut dst[d..d + row], &self.core.fill);
                            }
                        }
                    } else {
                        missing.push(ChunkWant::visible(key, 0.0));
                    }
                }
            }
        }
        missing
    }

    /// Writes `part` (inside chunk `key`'s region `chunk_region`) of a resident chunk into
    /// `dst`, which holds `region` tightly packed; returns false if the chunk is not resident.
    fn copy_part(
        &self,
        key: ChunkKey,
        chunk_region: &Region,
        part: &Region,
        region: &Region,
        dst: &mut [u8],
    ) -> Option<()> {
        let sb = self.core.layout.sample_bytes();
        let cached = self.core.cache.get(self.core.id, key)?;
        let row = part.size[2] * sb;
        for z in 0..part.size[0] {
            for y in 0..part.size[1] {
                let d = offset(
                    region,
                    [part.origin[0] + z, part.origin[1] + y, part.origin[2]],
                    sb,
                );
                let out = &mut dst[d..d + row];
                match &cached {
                    Cached::Ready(bytes) => {
                        let s = offset(
                            chunk_region,
                            [part.origin[0] + z, part.origin[1] + y, part.origin[2]],
                            sb,
                        );
                        out.copy_from_slice(&bytes[s..s + row]);
                    }
                    Cached::Empty => fill_row(out, &self.core.fill),
                }
            }
        }
        Some(())
    }
}

/// Byte offset of sample `at` (absolute) in `region` tightly packed.
fn offset(region: &Region, at: [usize; 3], sample_bytes: usize) -> usize {
    let [z, y, x] = [
        at[0] - region.origin[0],
        at[1] - region.origin[1],
        at[2] - region.origin[2],
    ];
    ((z * region.size[1] + y) * region.size[2] + x) * sample_bytes
}

fn fill_row(out: &mut [u8], fill: &[u8]) {
    for sample in out.chunks_exact_mut(fill.len()) {
        sample.copy_from_slice(fill);
    }
}

/// The level-0 samples a chunk of a coarser level covers.
fn level0_footprint(layout: &Layout, key: ChunkKey) -> Option<Region> {
    let region = key.region(layout).ok()?;
    let level = layout.levels().get(key.level)?;
    let d0 = layout.shape().padded();
    let mut r = Region::default();
    for (a, &d) in d0.iter().enumerate() {
        let ds = level.downsample[a];
        let lo = ((region.origin[a] as f64 * ds + level.offset[a])
            .floor()
            .max(0.0) as usize)
            .min(d - 1);
        let end = (((region.origin[a] + region.size[a]) as f64 * ds + level.offset[a]).ceil()
            as usize)
            .clamp(lo + 1, d);
        r.origin[a] = lo;
        r.size[a] = end - lo;
    }
    Some(r)
}

impl DataSource for LazySource {
    fn layout(&self) -> Layout {
        self.core.layout.clone()
    }

    fn version(&self) -> Version {
        self.changes.lock().version()
    }

    fn changes_since(&self, since: Version) -> Changes {
        self.changes.lock().since(since)
    }

    fn read(&self, request: &ReadRequest<'_>, dst: &mut [u8]) -> Result<ReadStatus, SourceError> {
        check_read(&self.core.layout, request, dst.len())?;
        loop {
            let missing = self.copy_resident(request, dst);
            if missing.is_empty() {
                return Ok(ReadStatus::Ready);
            }
            // Pending only if a missing chunk is still to settle, so that its loader wakes the
            // caller; if they all settled between the look and the request, look again (an
            // evicted one is queued again, which ends the loop).
            let waker = request.waker;
            if self
                .pool
                .request(self.core.id, self.core.reader, &missing, waker, true)
            {
                return Ok(ReadStatus::Pending);
            }
        }
    }

    fn lend(
        &self,
        request: &ReadRequest<'_>,
        visit: &mut dyn FnMut(HostView<'_>),
    ) -> Result<LendOutcome, SourceError> {
        let layout = &self.core.layout;
        let sb = layout.sample_bytes();
        let bytes_needed = request.region.len().saturating_mul(sb);
        check_read(layout, request, bytes_needed)?;
        let level = &layout.levels()[request.level];
        let (lo, hi) = level.chunks.chunks_touched(&request.region);
        if (0..3).any(|a| hi[a] != lo[a] + 1) {
            return Ok(LendOutcome::NotLendable);
        }
        let key = ChunkKey::new(request.level, lo);
        let Some(Cached::Ready(bytes)) = self.core.cache.get(self.core.id, key) else {
            return Ok(LendOutcome::NotLendable);
        };
        let chunk_region = level.chunks.chunk_region(lo, &level.shape);
        let start = offset(&chunk_region, request.region.origin, sb);
        visit(HostView {
            bytes: &bytes[start..],
            region: request.region,
            sample_bytes: sb,
            row_pitch: chunk_region.size[2] * sb,
            plane_pitch: chunk_region.size[1] * chunk_region.size[2] * sb,
        });
        Ok(LendOutcome::Lent)
    }

    fn detach(&self, consumer: ConsumerId) {
        self.pool.forget_consumer(self.core.id, consumer);
    }

    fn is_lazy(&self) -> bool {
        true
    }

    fn request_chunks(
        &self,
        consumer: ConsumerId,
        wants: &[ChunkWant],
        waker: &Waker,
    ) -> Result<(), SourceError> {
        for want in wants {
            want.key.region(&self.core.layout)?;
        }
        let _queued = self
            .pool
            .request(self.core.id, consumer, wants, waker, false);
        Ok(())
    }

    fn chunk_status(&self, key: ChunkKey) -> ChunkStatus {
        if let Some(status) = self.pool.scheduled_status(self.core.id, key) {
            return status;
        }
        match self.core.cache.contains(self.core.id, key) {
            Some(false) => ChunkStatus::Ready,
            Some(true) => ChunkStatus::Empty,
            None => ChunkStatus::Unrequested,
        }
    }

    fn chunk_progress(&self, consumer: ConsumerId) -> ChunkProgress {
        self.pool.progress(self.core.id, consumer)
    }

    fn retry_failed(&self) {
        let keys = self.pool.retry_failed(self.core.id);
        if keys.is_empty() {
            return;
        }
        let mut changes = self.changes.lock();
        for key in keys {
            if let Some(region) = level0_footprint(&self.core.layout, key) {
                changes.record(region);
            }
        }
    }

    fn label(&self) -> String {
        self.core.label.clone()
    }
}

impl Drop for LazySource {
    fn drop(&mut self) {
        self.pool.unregister(self.core.id);
        self.core.cache.remove_source(self.core.id);
    }
}
