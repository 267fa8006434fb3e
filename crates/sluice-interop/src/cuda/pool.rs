//! What the two CUDA copy paths share: each destination (a staging buffer, or a texture CUDA
//! writes as an array) is handed back and forth between CUDA and the renderer by a
//! [`Handover`], and destinations are reused from a [`Pool`] under one policy.
//!
//! A handover is two timeline semaphores shared by both APIs, each signalled by one side only:
//! for the `n`th use of a destination, CUDA copies and signals `copied` = `n`; the renderer's
//! submit waits (on the GPU) for `copied` = `n` and, once it has finished reading, a submit
//! signals `read` = `n`.
//!
//! Reuse is ordered on the host: a copy takes a destination whose last read the host has seen
//! done (a query, never a wait), or a new one while the pool holds less than
//! `MAX_POOL_BYTES`. Only when the pool is full and every destination is still being read
//! (more frames in flight than destinations) does the host wait for the oldest read, the way a
//! swapchain holds back a renderer that runs ahead of the GPU. CUDA is not asked to wait on
//! the GPU for the renderer's read: on the H200 machine such waits, for a value the renderer
//! had not reached yet, cost about 0.06 ms per frame in flight (0.216 against 0.151 to 0.163
//! ms per 4K frame, `cargo bench --bench interop`). That wait remains for destinations so
//! large that fewer than three fit the pool (there a host wait would leave the GPU idle while
//! the host wakes up), and as the fallback when the host's wait times out.

use std::sync::atomic::{AtomicU64, Ordering};

use super::driver::{stream_wait_event, Event, ExternalSemaphore, StreamHandle};
use super::CudaInterop;
use crate::error::InteropError;
use crate::vulkan::semaphore::SharedSemaphore;

/// Bytes of destinations beyond which a busy one is reused (once its read is done) rather
/// than a new one made.
pub(crate) const MAX_POOL_BYTES: u64 = 256 << 20;

/// How long the host waits for the renderer's read of a destination to reuse it; past that,
/// CUDA's copy waits for it on the GPU instead.
const HOST_WAIT: std::time::Duration = std::time::Duration::from_secs(1);

/// What the pools did, process-wide, for diagnostics (the timing tests read them): host time
/// spent waiting for reads, waits for reads left to the GPU, destinations made.
pub(crate) struct PoolStats {
    pub host_wait_nanos: AtomicU64,
    pub gpu_waits: AtomicU64,
    pub created: AtomicU64,
}

pub(crate) static STATS: PoolStats = PoolStats {
    host_wait_nanos: AtomicU64::new(0),
    gpu_waits: AtomicU64::new(0),
    created: AtomicU64::new(0),
};

impl PoolStats {
    /// The statistics so far, as the renderer's counters carry them.
    pub fn counters(&self) -> sluice_render::DevicePoolCounters {
        sluice_render::DevicePoolCounters::new(
            self.host_wait_nanos.load(Ordering::Relaxed),
            self.gpu_waits.load(Ordering::Relaxed),
            self.created.load(Ordering::Relaxed),
        )
    }
}

/// The semaphores, counters and event that order one destination's uses between CUDA and the
/// renderer. Dropping it waits for CUDA's last copy (owners keep it as their first field, so
/// that it drops before the memory it orders).
pub(crate) struct Handover {
    /// Signalled by the renderer after each read; CUDA waits for it.
    read: SharedSemaphore,
    cuda_read: ExternalSemaphore,
    /// Signalled by CUDA after each copy; the renderer waits for it.
    copied: SharedSemaphore,
    cuda_copied: ExternalSemaphore,
    /// Uses so far: the value of both semaphores once the last use is over.
    value: u64,
    /// When the destination was last used, in its pool's count of copies (the oldest read is
    /// the one to wait for).
    last_use: u64,
    /// The highest value `read` was seen to have reached (a cache of
    /// `vkGetSemaphoreCounterValue`; values only grow).
    seen: u64,
    /// The read signal is queued for a submit that has not happened yet.
    unsubmitted: bool,
    /// Recorded after each CUDA copy.
    done: Event,
}

impl Handover {
    pub fn new(cuda: &CudaInterop) -> Result<Self, InteropError> {
        let interop = cuda.interop();
        let ctx = cuda.context();
        STATS.created.fetch_add(1, Ordering::Relaxed);
        let read = interop.create_semaphore()?;
        let copied = interop.create_semaphore()?;
        let cuda_read = ExternalSemaphore::import(ctx, read.export_fd()?)?;
        let cuda_copied = ExternalSemaphore::import(ctx, copied.export_fd()?)?;
        Ok(Handover {
            read,
            cuda_read,
            copied,
            cuda_copied,
            value: 0,
            last_use: 0,
            seen: 0,
            unsubmitted: false,
            done: Event::new(ctx)?,
        })
    }

    /// Whether the renderer has finished its last read (checked on the host, never waiting).
    fn read_done(&mut self) -> bool {
        if self.seen < self.value {
            if let Ok(value) = self.read.value() {
                self.seen = value;
            }
        }
        self.seen >= self.value
    }

    /// Waits on the host, up to `HOST_WAIT`, for the renderer's last read (CUDA's next copy
    /// waits for it on the GPU if this times out).
    fn wait_read(&mut self) {
        let start = std::time::Instant::now();
        let waited = self.read.wait(self.value, HOST_WAIT);
        STATS
            .host_wait_nanos
            .fetch_add(start.elapsed().as_nanos() as u64, Ordering::Relaxed);
        match waited {
            Ok(true) => self.seen = self.value,
            Ok(false) => log::warn!(
                "a CUDA copy destination's read took over {HOST_WAIT:?}; its next copy waits for it on the GPU"
            ),
            Err(e) => log::warn!("waiting for a CUDA copy destination's read: {e}"),
        }
    }

    /// Enqueues the next use on `stream`: after `ready_event` (if any) and the renderer's last
    /// read (on the GPU, only if the host has not seen it done), `copy`, then the signal that
    /// the renderer's next submit waits for. On failure CUDA may have signalled already, which
    /// would mislead the next use: callers drop the destination (its drop waits for CUDA).
    pub fn enqueue(
        &mut self,
        cuda: &CudaInterop,
        stream: StreamHandle,
        ready_event: Option<u64>,
        copy: impl FnOnce() -> Result<(), InteropError>,
    ) -> Result<(), InteropError> {
        if let Some(event) = ready_event {
            stream_wait_event(cuda.context(), stream, event)?;
        }
        if self.value > 0 && !self.read_done() {
            STATS.gpu_waits.fetch_add(1, Ordering::Relaxed);
            self.cuda_read.wait(stream, self.value)?;
        }
        copy()?;
        self.cuda_copied.signal(stream, self.value + 1)?;
        self.done.record(stream)?;
        self.value += 1;
        self.copied.wait_before_next_submit(self.value);
        Ok(())
    }

    /// The renderer's reads of the current use end with the next submit.
    pub fn release_after_next_submit(&mut self) {
        self.read.signal_after_next_submit(self.value);
        self.unsubmitted = true;
    }

    /// Marks a new destination as used at `uses` (see [`Taken::New`]).
    pub fn stamp(&mut self, uses: u64) {
        self.last_use = uses;
    }

    /// Whether a read signal is queued for a submit that has not happened yet.
    pub fn is_unsubmitted(&self) -> bool {
        self.unsubmitted
    }

    /// When it was last used, in its pool's count of copies.
    pub fn last_use(&self) -> u64 {
        self.last_use
    }

    /// The renderer submitted: a queued read signal is on its way.
    pub fn submitted(&mut self) {
        self.unsubmitted = false;
    }
}

impl Drop for Handover {
    fn drop(&mut self) {
        // CUDA's copies must be done before what they wrote is unmapped; the Vulkan semaphores
        // wait for the renderer's reads when they drop.
        if let Err(e) = self.done.synchronize() {
            log::warn!("CUDA copy destination: waiting for its last copy: {e}");
        }
    }
}

/// A destination a [`Pool`] holds.
pub(crate) trait Pooled {
    fn handover(&self) -> &Handover;
    fn handover_mut(&mut self) -> &mut Handover;
    /// Bytes of GPU memory it holds.
    fn bytes(&self) -> u64;
}

/// Destinations not in use, and the policy for taking one.
pub(crate) struct Pool<T> {
    pub free: Vec<T>,
    /// Copies so far.
    uses: u64,
}

impl<T> Default for Pool<T> {
    fn default() -> Self {
        Pool {
            free: Vec::new(),
            uses: 0,
        }
    }
}

/// What [`Pool::take`] found.
pub(crate) enum Taken<T> {
    /// A destination to reuse.
    Reuse(T),
    /// None: make a new one, and give it this use count ([`Handover::stamp`]).
    New(u64),
}

impl<T: Pooled> Pool<T> {
    /// A free destination for a copy of `bytes`, among those `fits` accepts: the smallest whose
    /// last read is done; else a new one while the pool and the destinations in use
    /// (`out_bytes`, `out_fitting` of which fit) hold less than `MAX_POOL_BYTES`; else the one
    /// read longest ago, once the host has seen that read done (up to `HOST_WAIT`), or at once
    /// where fewer than three fit (its copy then waits on the GPU).
    pub fn take(
        mut guard: parking_lot::MutexGuard<'_, Self>,
        bytes: u64,
        fits: impl Fn(&T) -> bool,
        (out_bytes, out_fitting): (u64, usize),
    ) -> Taken<T> {
        guard.uses += 1;
        let uses = guard.uses;
        let pool = &mut *guard;
        let done = pool
            .free
            .iter_mut()
            .enumerate()
            .filter(|(_, d)| fits(d))
            .filter_map(|(i, d)| d.handover_mut().read_done().then_some((i, d.bytes())))
            .min_by_key(|&(_, bytes)| bytes);
        if let Some((i, _)) = done {
            let mut taken = pool.free.swap_remove(i);
            taken.handover_mut().last_use = uses;
            return Taken::Reuse(taken);
        }
        let held = out_bytes + pool.free.iter().map(Pooled::bytes).sum::<u64>();
        // A destination whose read signal is queued for a submit still to come is left out:
        // waiting for it now would wait for a frame not submitted yet. (Submitting early
        // instead would hand that submit the waits the frame being recorded has queued.)
        let oldest = pool
            .free
            .iter()
            .enumerate()
            .filter(|(_, d)| fits(d) && !d.handover().is_unsubmitted())
            .min_by_key(|(_, d)| d.handover().last_use())
            .map(|(i, _)| i);
        let Some(oldest) = oldest.filter(|_| held + bytes > MAX_POOL_BYTES) else {
            return Taken::New(uses);
        };
        // Destinations that could take this copy, the one to reuse included: with fewer than
        // three, a host wait would leave the GPU without queued frames while the host wakes
        // up, so the copy waits for the read on the GPU instead (sources of over 85 MiB, whose
        // frames take milliseconds anyway).
        let fitting = out_fitting + pool.free.iter().filter(|d| fits(d)).count();
        let mut taken = pool.free.swap_remove(oldest);
        drop(guard);
        let handover = taken.handover_mut();
        handover.last_use = uses;
        if fitting >= 3 {
            handover.wait_read();
        }
        Taken::Reuse(taken)
    }
}
