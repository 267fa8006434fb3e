//! The renderer's path for CUDA memory the user owns: a device-to-device copy on the user's
//! stream into a staging buffer the renderer exported to CUDA, then a copy into the texture
//! on the renderer's queue.
//!
//! Each staging buffer has two timeline semaphores shared by both APIs, each signalled by
//! one side only: for the `n`th use of the buffer, CUDA copies and signals `copied` = `n`;
//! the renderer's submit waits (on the GPU) for `copied` = `n`, copies into the texture and
//! signals `read` = `n`. A buffer is used by one copy per frame and goes back to the pool when
//! the frame is submitted.
//!
//! Reuse is ordered on the host: a copy takes a buffer whose last read the host has seen done
//! (a query, never a wait), or a new one while the pool holds less than `MAX_STAGING_BYTES`.
//! Only when the pool is full and every buffer is still being read (more frames in flight than
//! buffers) does the host wait for the oldest read, the way a swapchain holds back a renderer
//! that runs ahead of the GPU. CUDA is not asked to wait on the GPU for the renderer's read:
//! on the H200 machine such waits, for a value the renderer had not reached yet, cost about
//! 0.06 ms per frame in flight (0.216 against 0.151 to 0.163 ms per 4K frame, `cargo bench
//! --bench interop`). That wait remains for sources so large that fewer than three buffers fit
//! the pool (there a host wait would leave the GPU idle while the host wakes up), and as the
//! fallback when the host's wait times out.

use parking_lot::Mutex;
use sluice_core::{CudaMemory, Layout};
use sluice_render::{DeviceBufferCopy, DeviceCopy};

use super::driver::{
    copy_into, stream_wait_event, Event, ExternalBuffer, ExternalSemaphore, Pitched, StreamHandle,
};
use super::source::vouch_key;
use super::CudaInterop;
use crate::error::InteropError;
use crate::interop::Interop;
use crate::source::{check_device_layout, check_texture_layout, Pitches};
use crate::vulkan::memory::ExportedBuffer;
use crate::vulkan::semaphore::SharedSemaphore;

/// Staging buffers kept for reuse beyond those the last frame used.
const SPARE_BUFFERS: usize = 8;

/// Bytes of staging beyond which a busy buffer is reused (once its read is done) rather than
/// a new one made.
const MAX_STAGING_BYTES: u64 = 256 << 20;

/// How long the host waits for the renderer's read of a staging buffer to reuse it; past
/// that, CUDA's copy waits for it on the GPU instead.
const HOST_WAIT: std::time::Duration = std::time::Duration::from_secs(1);

struct Staging {
    buffer: ExportedBuffer,
    mapping: ExternalBuffer,
    /// Signalled by the renderer after each read of the buffer; CUDA waits for it.
    read: SharedSemaphore,
    cuda_read: ExternalSemaphore,
    /// Signalled by CUDA after each copy into the buffer; the renderer waits for it.
    copied: SharedSemaphore,
    cuda_copied: ExternalSemaphore,
    /// Uses so far: the value of both semaphores once the last use is over.
    value: u64,
    /// When the buffer was last used, in the pool's count of copies (the oldest read is the
    /// one to wait for).
    last_use: u64,
    /// The highest value `read` was seen to have reached (a cache of
    /// `vkGetSemaphoreCounterValue`; values only grow).
    seen: u64,
    /// Recorded after each CUDA copy into the buffer.
    done: Event,
}

impl Staging {
    fn new(cuda: &CudaInterop, bytes: u64) -> Result<Self, InteropError> {
        let interop = cuda.interop();
        let ctx = cuda.context();
        let buffer = interop.export_buffer(bytes)?;
        let read = interop.create_semaphore()?;
        let copied = interop.create_semaphore()?;
        let mapping = ExternalBuffer::import(
            ctx,
            buffer.export_fd()?,
            buffer.allocation_size(),
            buffer.is_dedicated(),
            bytes,
        )?;
        let cuda_read = ExternalSemaphore::import(ctx, read.export_fd()?)?;
        let cuda_copied = ExternalSemaphore::import(ctx, copied.export_fd()?)?;
        Ok(Staging {
            buffer,
            mapping,
            read,
            cuda_read,
            copied,
            cuda_copied,
            value: 0,
            seen: 0,
            last_use: 0,
            done: Event::new(ctx)?,
        })
    }
}

impl Staging {
    /// Whether the renderer has finished its last read of the buffer (checked on the host,
    /// never waiting).
    fn read_done(&mut self) -> bool {
        if self.seen < self.value {
            if let Ok(value) = self.read.value() {
                self.seen = value;
            }
        }
        self.seen >= self.value
    }
}

impl Drop for Staging {
    fn drop(&mut self) {
        // CUDA's copies into the mapping must be done before it is unmapped; the Vulkan
        // semaphore waits for the renderer's reads when it drops.
        if let Err(e) = self.done.synchronize() {
            log::warn!("CUDA staging buffer: waiting for its last copy: {e}");
        }
    }
}

#[derive(Default)]
struct Pool {
    free: Vec<Staging>,
    busy: Vec<Staging>,
    /// Copies so far.
    uses: u64,
}

pub(crate) struct CudaStaging {
    interop: Interop,
    pool: Mutex<Pool>,
}

impl CudaStaging {
    pub fn new(interop: Interop) -> Self {
        CudaStaging {
            interop,
            pool: Mutex::new(Pool::default()),
        }
    }

    fn cuda(&self) -> Result<CudaInterop, InteropError> {
        if self.interop.shared().cuda.get().is_none() {
            return Err(InteropError::CudaUnavailable(
                "CUDA interop is not enabled on this renderer's device: call Interop::cuda() before drawing CUDA sources",
            ));
        }
        self.interop.cuda()
    }

    pub fn check(&self, memory: &CudaMemory, layout: &Layout) -> Result<(), InteropError> {
        let cuda = self.cuda()?;
        self.interop.check_uuid(memory.device_uuid)?;
        check_device_layout(layout)?;
        Pitches {
            row: memory.row_pitch,
            plane: memory.plane_pitch,
        }
        .check(layout)?;
        if !cuda.device().is_vouched(vouch_key(memory)) {
            return Err(InteropError::UnvouchedCudaMemory);
        }
        Ok(())
    }

    pub fn copy(&self, copy: &mut DeviceCopy<'_>, memory: &CudaMemory) -> Result<(), InteropError> {
        check_texture_layout(copy.layout)?;
        self.check(memory, copy.layout)?;
        let region = copy.region;
        let sample = copy.layout.sample_bytes();
        let width_bytes = region.size[2] * sample;
        let row = width_bytes.next_multiple_of(crate::COPY_ROW_ALIGNMENT);
        let pitches = Pitches {
            row,
            plane: row * region.size[1],
        };
        let extent = [region.size[0], region.size[1], width_bytes];
        self.through_staging(
            memory,
            Pitched::at(memory, region.origin, sample),
            pitches,
            extent,
            |staging| copy.copy_from_buffer(staging, 0, pitches.row as u64, pitches.plane as u64),
        )
    }

    /// Copies `bytes` of a 1-D source from byte `offset` (elements `copy.range`) into the
    /// mesh attribute buffer at the same offset: on the source's stream into a staging
    /// buffer, then `copy_buffer_to_buffer` on the renderer's queue, ordered by the staging
    /// buffer's semaphore exactly as texture copies are.
    pub fn copy_to_buffer(
        &self,
        copy: &mut DeviceBufferCopy<'_>,
        memory: &CudaMemory,
        offset: u64,
        bytes: u64,
    ) -> Result<(), InteropError> {
        self.check(memory, copy.layout)?;
        if bytes == 0 {
            return Ok(());
        }
        let width_bytes = bytes as usize;
        // 1-D: one row, its elements back to back from `memory.ptr`.
        let src = Pitched {
            ptr: memory.ptr + offset,
            row: memory.row_pitch.max(width_bytes),
            plane: memory.plane_pitch.max(width_bytes),
        };
        let packed = Pitches {
            row: width_bytes,
            plane: width_bytes,
        };
        self.through_staging(memory, src, packed, [1, 1, width_bytes], |staging| {
            copy.encoder
                .copy_buffer_to_buffer(staging, 0, copy.buffer, offset, bytes)
        })
    }

    /// The path both copies take: `extent` (`[depth, height, width in bytes]`) from `src` on
    /// the source's stream into a staging buffer laid out by `pitches` (after the source's
    /// ready event, and after the renderer's last read of that buffer if it has not
    /// finished), then `record` of the renderer-side copy out of it, ordered by the buffer's
    /// semaphore.
    fn through_staging(
        &self,
        memory: &CudaMemory,
        src: Pitched,
        pitches: Pitches,
        extent: [usize; 3],
        record: impl FnOnce(&wgpu::Buffer),
    ) -> Result<(), InteropError> {
        let cuda = self.cuda()?;
        let ctx = cuda.context();
        let mut staging = self.take(&cuda, (pitches.plane * extent[0]) as u64)?;
        let stream = StreamHandle::from_raw(memory.stream);
        let dst = Pitched {
            ptr: staging.mapping.ptr(),
            row: pitches.row,
            plane: pitches.plane,
        };
        let enqueued = (|| {
            if let Some(event) = memory.ready_event {
                stream_wait_event(ctx, stream, event)?;
            }
            if staging.value > 0 && !staging.read_done() {
                staging.cuda_read.wait(stream, staging.value)?;
            }
            copy_into(ctx, stream, src, dst, &staging.mapping, extent)?;
            staging.cuda_copied.signal(stream, staging.value + 1)?;
            staging.done.record(stream)
        })();
        // On failure CUDA may have signalled `copied` already, which would then run ahead of
        // `read` and mislead the next use: the buffer is dropped (its drop waits for CUDA).
        enqueued?;
        staging.value += 1;
        staging.copied.wait_before_next_submit(staging.value);
        record(staging.buffer.buffer());
        staging.read.signal_after_next_submit(staging.value);
        let mut pool = self.pool.lock();
        pool.uses += 1;
        staging.last_use = pool.uses;
        pool.busy.push(staging);
        Ok(())
    }

    /// A staging buffer of at least `bytes`: the smallest free one the renderer has finished
    /// reading; else a new one while the pool holds less than `MAX_STAGING_BYTES`; else the
    /// free one read longest ago, once the host has seen that read done (up to `HOST_WAIT`),
    /// or at once where fewer than three buffers fit (its copy then waits on the GPU).
    fn take(&self, cuda: &CudaInterop, bytes: u64) -> Result<Staging, InteropError> {
        let mut pool = self.pool.lock();
        let done = pool
            .free
            .iter_mut()
            .enumerate()
            .filter(|(_, s)| s.mapping.len() >= bytes)
            .filter_map(|(i, s)| s.read_done().then_some((i, s.mapping.len())))
            .min_by_key(|&(_, len)| len);
        if let Some((i, _)) = done {
            return Ok(pool.free.swap_remove(i));
        }
        let held: u64 = pool
            .free
            .iter()
            .chain(&pool.busy)
            .map(|s| s.mapping.len())
            .sum();
        let oldest = pool
            .free
            .iter()
            .enumerate()
            .filter(|(_, s)| s.mapping.len() >= bytes)
            .min_by_key(|(_, s)| s.last_use)
            .map(|(i, _)| i);
        // Buffers that could take this copy, the one to reuse included: with fewer than three,
        // a host wait would leave the GPU without queued frames while the host wakes up, so
        // the copy waits for the read on the GPU instead (sources of over 85 MiB, whose
        // frames take milliseconds anyway).
        let fitting = pool
            .free
            .iter()
            .chain(&pool.busy)
            .filter(|s| s.mapping.len() >= bytes)
            .count();
        match oldest {
            Some(i) if held + bytes > MAX_STAGING_BYTES && fitting < 3 => {
                Ok(pool.free.swap_remove(i))
            }
            Some(i) if held + bytes > MAX_STAGING_BYTES => {
                let mut staging = pool.free.swap_remove(i);
                drop(pool);
                match staging.read.wait(staging.value, HOST_WAIT) {
                    Ok(true) => staging.seen = staging.value,
                    Ok(false) => log::warn!(
                        "a CUDA staging buffer's read took over {HOST_WAIT:?}; its next copy waits for it on the GPU"
                    ),
                    Err(e) => log::warn!("waiting for a CUDA staging buffer's read: {e}"),
                }
                Ok(staging)
            }
            _ => {
                drop(pool);
                Staging::new(cuda, bytes)
            }
        }
    }

    pub fn frame_submitted(&self) {
        let mut pool = self.pool.lock();
        let busy = std::mem::take(&mut pool.busy);
        pool.free.extend(busy);
        while pool.free.len() > SPARE_BUFFERS {
            pool.free.remove(0);
        }
    }
}
