//! The renderer's path for CUDA memory the user owns: a device-to-device copy on the user's
//! stream into a staging buffer the renderer exported to CUDA, then a copy into the texture
//! on the renderer's queue.
//!
//! Each staging buffer has its own timeline semaphore, shared by both APIs. Its values
//! alternate: CUDA waits for the renderer's last read (value `n`), copies, signals `n + 1`;
//! the renderer's submit waits for `n + 1`, copies into the texture, signals `n + 2`. A buffer
//! is used by one copy per frame and goes back to the pool when the frame is submitted, so a
//! later frame's CUDA copy into it waits on the GPU for this frame's read, never on the CPU.
//!
//! A buffer the renderer still reads is not taken while the pool may grow: the next frame
//! then copies into another one, so CUDA's copy for frame `n + 1` does not wait for the
//! renderer's frame `n`, and frames in flight overlap instead of alternating between the two
//! APIs.

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

/// Bytes of staging beyond which a busy buffer is reused (its next copy waits on the GPU for
/// the renderer's read) rather than a new one made.
const MAX_STAGING_BYTES: u64 = 256 << 20;

struct Staging {
    buffer: ExportedBuffer,
    mapping: ExternalBuffer,
    vulkan_semaphore: SharedSemaphore,
    cuda_semaphore: ExternalSemaphore,
    /// The semaphore value of the last operation on the buffer.
    value: u64,
    /// Recorded after each CUDA copy into the buffer.
    done: Event,
}

impl Staging {
    fn new(cuda: &CudaInterop, bytes: u64) -> Result<Self, InteropError> {
        let interop = cuda.interop();
        let ctx = cuda.context();
        let buffer = interop.export_buffer(bytes)?;
        let vulkan_semaphore = interop.create_semaphore()?;
        let mapping = ExternalBuffer::import(
            ctx,
            buffer.export_fd()?,
            buffer.allocation_size(),
            buffer.is_dedicated(),
            bytes,
        )?;
        let cuda_semaphore = ExternalSemaphore::import(ctx, vulkan_semaphore.export_fd()?)?;
        Ok(Staging {
            buffer,
            mapping,
            vulkan_semaphore,
            cuda_semaphore,
            value: 0,
            done: Event::new(ctx)?,
        })
    }
}

impl Staging {
    /// Whether the renderer has finished its last read of the buffer (checked on the host,
    /// never waiting).
    fn read_done(&self) -> bool {
        self.vulkan_semaphore.value().is_ok_and(|v| v >= self.value)
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
                staging.cuda_semaphore.wait(stream, staging.value)?;
            }
            copy_into(ctx, stream, src, dst, &staging.mapping, extent)?;
            staging.cuda_semaphore.signal(stream, staging.value + 1)?;
            staging.value += 1;
            staging.done.record(stream)
        })();
        if let Err(e) = enqueued {
            self.pool.lock().free.push(staging);
            return Err(e);
        }
        staging
            .vulkan_semaphore
            .wait_before_next_submit(staging.value);
        record(staging.buffer.buffer());
        staging.value += 1;
        staging
            .vulkan_semaphore
            .signal_after_next_submit(staging.value);
        self.pool.lock().busy.push(staging);
        Ok(())
    }

    /// A staging buffer of at least `bytes`: the smallest free one the renderer has finished
    /// reading; else a new one while the pool holds less than `MAX_STAGING_BYTES`; else the
    /// smallest free one (its copy then waits on the GPU for the renderer's read).
    fn take(&self, cuda: &CudaInterop, bytes: u64) -> Result<Staging, InteropError> {
        let mut pool = self.pool.lock();
        let fitting = |read_done: bool| {
            pool.free
                .iter()
                .enumerate()
                .filter(|(_, s)| s.mapping.len() >= bytes)
                .filter(|(_, s)| !read_done || s.read_done())
                .min_by_key(|(_, s)| s.mapping.len())
                .map(|(i, _)| i)
        };
        if let Some(i) = fitting(true) {
            return Ok(pool.free.swap_remove(i));
        }
        let held: u64 = pool
            .free
            .iter()
            .chain(&pool.busy)
            .map(|s| s.mapping.len())
            .sum();
        if held + bytes > MAX_STAGING_BYTES {
            if let Some(i) = fitting(false) {
                return Ok(pool.free.swap_remove(i));
            }
        }
        drop(pool);
        Staging::new(cuda, bytes)
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
