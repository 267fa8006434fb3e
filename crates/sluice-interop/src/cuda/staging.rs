//! The renderer's path for CUDA memory the user owns, where it cannot be copied straight
//! into a texture (see `textures.rs`): a device-to-device copy on the user's stream into a
//! staging buffer the renderer exported to CUDA, then a copy into the texture (or vertex
//! buffer) on the renderer's queue.
//!
//! Each staging buffer is ordered between the two APIs by a [`Handover`] and reused from a
//! [`Pool`] (see `pool.rs`). A buffer is used by one copy per frame: the renderer's read
//! signal goes with that frame's submit, and the buffer goes back to the pool then.

use parking_lot::Mutex;
use sluice_core::{CudaMemory, Layout};
use sluice_render::{DeviceBufferCopy, DeviceCopy};

use super::driver::{copy_into, ExternalBuffer, Pitched, StreamHandle};
use super::pool::{Handover, Pool, Pooled, Taken};
use super::source::vouch_key;
use super::{CudaDevice, CudaInterop};
use crate::error::InteropError;
use crate::interop::Interop;
use crate::source::{check_device_layout, Pitches};
use crate::vulkan::memory::ExportedBuffer;

/// Staging buffers kept for reuse beyond those the last frame used.
const SPARE_BUFFERS: usize = 8;

struct Staging {
    /// First, so that it drops (waiting for CUDA's last copy) before the mapping.
    handover: Handover,
    buffer: ExportedBuffer,
    mapping: ExternalBuffer,
}

impl Staging {
    fn new(cuda: &CudaInterop, bytes: u64) -> Result<Self, InteropError> {
        let buffer = cuda.interop().export_buffer(bytes)?;
        let mapping = ExternalBuffer::import(
            cuda.context(),
            buffer.export_fd()?,
            buffer.allocation_size(),
            buffer.is_dedicated(),
            bytes,
        )?;
        Ok(Staging {
            handover: Handover::new(cuda)?,
            buffer,
            mapping,
        })
    }
}

impl Pooled for Staging {
    fn handover(&self) -> &Handover {
        &self.handover
    }

    fn handover_mut(&mut self) -> &mut Handover {
        &mut self.handover
    }

    fn bytes(&self) -> u64 {
        self.mapping.len()
    }
}

pub(crate) struct CudaStaging {
    interop: Interop,
    pool: Mutex<Pool<Staging>>,
    /// Buffers the frame being recorded copies through.
    busy: Mutex<Vec<Staging>>,
}

impl CudaStaging {
    pub fn new(interop: Interop) -> Self {
        CudaStaging {
            interop,
            pool: Mutex::new(Pool::default()),
            busy: Mutex::new(Vec::new()),
        }
    }

    pub fn cuda(&self) -> Result<CudaInterop, InteropError> {
        if CudaDevice::opened(self.interop.device_uuid()).is_none() {
            return Err(InteropError::CudaUnavailable(
                "CUDA interop is not enabled on this renderer's device: call Interop::cuda() before drawing CUDA sources",
            ));
        }
        self.interop.cuda()
    }

    /// Checks that `memory` holds `layout` on this renderer's CUDA device and was vouched for;
    /// returns that device's CUDA side.
    pub fn check(&self, memory: &CudaMemory, layout: &Layout) -> Result<CudaInterop, InteropError> {
        check_device_layout(layout)?;
        self.check_memory(memory, layout)
    }

    /// The checks of [`CudaStaging::check`] that depend on the memory (device, pitches,
    /// vouching), for each copy of a source whose layout was checked when its proxy was made.
    pub fn check_memory(
        &self,
        memory: &CudaMemory,
        layout: &Layout,
    ) -> Result<CudaInterop, InteropError> {
        let cuda = self.cuda()?;
        self.interop.check_uuid(memory.device_uuid)?;
        Pitches {
            row: memory.row_pitch,
            plane: memory.plane_pitch,
        }
        .check(layout)?;
        if !cuda.device().is_vouched(vouch_key(memory)) {
            return Err(InteropError::UnvouchedCudaMemory);
        }
        Ok(cuda)
    }

    pub fn copy(&self, copy: &mut DeviceCopy<'_>, memory: &CudaMemory) -> Result<(), InteropError> {
        let cuda = self.check_memory(memory, copy.layout)?;
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
            &cuda,
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
        let cuda = self.check(memory, copy.layout)?;
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
        self.through_staging(&cuda, memory, src, packed, [1, 1, width_bytes], |staging| {
            copy.encoder
                .copy_buffer_to_buffer(staging, 0, copy.buffer, offset, bytes)
        })
    }

    /// The path both copies take: `extent` (`[depth, height, width in bytes]`) from `src` on
    /// the source's stream into a staging buffer laid out by `pitches` (after the source's
    /// ready event, and after the renderer's last read of that buffer if it has not
    /// finished), then `record` of the renderer-side copy out of it, ordered by the buffer's
    /// handover.
    pub(crate) fn through_staging(
        &self,
        cuda: &CudaInterop,
        memory: &CudaMemory,
        src: Pitched,
        pitches: Pitches,
        extent: [usize; 3],
        record: impl FnOnce(&wgpu::Buffer),
    ) -> Result<(), InteropError> {
        let ctx = cuda.context();
        let mut staging = self.take(cuda, (pitches.plane * extent[0]) as u64)?;
        let stream = StreamHandle::from_raw(memory.stream);
        let dst = Pitched {
            ptr: staging.mapping.ptr(),
            row: pitches.row,
            plane: pitches.plane,
        };
        let mapping = &staging.mapping;
        staging
            .handover
            .enqueue(cuda, stream, memory.ready_event, || {
                copy_into(ctx, stream, src, dst, mapping, extent)
            })?;
        record(staging.buffer.buffer());
        staging.handover.release_after_next_submit();
        self.busy.lock().push(staging);
        Ok(())
    }

    /// A staging buffer of at least `bytes` (see [`Pool::take`]).
    fn take(&self, cuda: &CudaInterop, bytes: u64) -> Result<Staging, InteropError> {
        let fits = |s: &Staging| s.mapping.len() >= bytes;
        let out = {
            let busy = self.busy.lock();
            (
                busy.iter().map(Pooled::bytes).sum(),
                busy.iter().filter(|s| fits(s)).count(),
            )
        };
        match Pool::take(self.pool.lock(), bytes, fits, out) {
            Taken::Reuse(staging) => Ok(staging),
            Taken::New(uses) => {
                let mut staging = Staging::new(cuda, bytes)?;
                staging.handover.stamp(uses);
                Ok(staging)
            }
        }
    }

    pub fn frame_submitted(&self) {
        let busy = std::mem::take(&mut *self.busy.lock());
        let mut pool = self.pool.lock();
        for mut staging in busy {
            staging.handover.submitted();
            pool.free.push(staging);
        }
        while pool.free.len() > SPARE_BUFFERS {
            pool.free.remove(0);
        }
    }
}
