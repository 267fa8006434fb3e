//! CUDA sources: memory the user owns ([`CudaSource`]) and memory the renderer owns that CUDA
//! kernels write into ([`CudaWritableSource`]).

use std::os::fd::OwnedFd;
use std::sync::Arc;

use cudarc::driver::{CudaSlice, CudaStream, DevicePtr};
use parking_lot::Mutex;
use sluice_core::{
    ChangeLog, Changes, CudaMemory, DataSource, Layout, ReadRequest, ReadStatus, Residency,
    SourceError, TimelineSemaphore, Version, VulkanMemory,
};

use super::driver::{
    check_slice_len, copy_to_host, stream_wait_event, Event, ExternalBuffer, ExternalSemaphore,
    Pitched, StreamHandle,
};
use super::CudaInterop;
use crate::error::InteropError;
use crate::handoff::{Handoff, WriteValues};
use crate::source::{check_device_layout, not_on_host, Pitches, VulkanState};
use crate::vulkan::memory::{fd_key, ExportedBuffer};
use crate::vulkan::semaphore::SharedSemaphore;

/// A source whose bytes are in CUDA memory the user owns: a PyTorch or CuPy tensor's device
/// pointer, or a cudarc slice.
///
/// When a renderer draws a version it has not copied yet, it enqueues a copy on the source's
/// stream (after its `ready_event`, if any): for an image or a volume, straight into a texture
/// it exported and CUDA maps as an array, which it then draws; for mesh attributes (or with
/// [`crate::Interop::set_direct_cuda_textures`] off), into a staging buffer it exported, then
/// into the texture or vertex buffer on its own queue. Shared timeline semaphores order the
/// two APIs; nothing waits for the whole device. Call [`CudaSource::publish`] after
/// enqueuing each new write on the stream; writes enqueued on the stream after the renderer's
/// copy are never seen half done (the stream runs them in order).
pub struct CudaSource {
    cuda: CudaInterop,
    layout: Layout,
    memory: CudaMemory,
    log: Mutex<ChangeLog>,
    /// Memory the source owns (made by [`CudaSource::from_slice`]).
    slice: Option<Mutex<CudaSlice<u8>>>,
}

impl CudaSource {
    /// A source showing `layout` stored in `slice` at `pitches`, read on the slice's stream.
    /// The source owns the slice; write it with [`CudaSource::write`].
    pub fn from_slice(
        cuda: &CudaInterop,
        layout: Layout,
        pitches: Pitches,
        slice: CudaSlice<u8>,
    ) -> Result<Self, InteropError> {
        let needed = pitches.span(&layout) as usize;
        check_slice_len(&slice, needed)?;
        let stream = slice.stream().clone();
        let (ptr, guard) = slice.device_ptr(&stream);
        drop(guard);
        let memory = CudaMemory {
            device_uuid: cuda.device_uuid().0,
            ptr,
            row_pitch: pitches.row,
            plane_pitch: pitches.plane,
            stream: stream.cu_stream() as usize as u64,
            ready_event: None,
        };
        Self::vouched(cuda, layout, memory, Some(slice))
    }

    /// A source showing `layout` at `memory` (pointer, pitches, stream, ready event), which the
    /// caller owns: a PyTorch or CuPy tensor's data pointer and stream, say (see
    /// `docs/gpu-interop.md`).
    ///
    /// # Safety
    ///
    /// Until this source is dropped and every copy it enqueued has run:
    /// - `memory.ptr` is device memory of `cuda`'s device holding `layout` at the given
    ///   pitches (all of `Pitches::span` bytes readable);
    /// - `memory.stream` is 0 (the legacy default stream) or a live `CUstream` of `cuda`'s
    ///   context (its primary context, which PyTorch and CuPy use), and `memory.ready_event`,
    ///   if set, a live `CUevent` of that context.
    #[allow(unsafe_code)] // Declares the contract only; the body is safe code.
    pub unsafe fn from_raw(
        cuda: &CudaInterop,
        layout: Layout,
        memory: CudaMemory,
    ) -> Result<Self, InteropError> {
        cuda.interop().check_uuid(memory.device_uuid)?;
        Self::vouched(cuda, layout, memory, None)
    }

    fn vouched(
        cuda: &CudaInterop,
        layout: Layout,
        memory: CudaMemory,
        slice: Option<CudaSlice<u8>>,
    ) -> Result<Self, InteropError> {
        check_device_layout(&layout)?;
        Pitches {
            row: memory.row_pitch,
            plane: memory.plane_pitch,
        }
        .check(&layout)?;
        cuda.device().vouch(vouch_key(&memory));
        Ok(CudaSource {
            cuda: cuda.clone(),
            layout,
            memory,
            log: Mutex::new(ChangeLog::new(1)),
            slice: slice.map(Mutex::new),
        })
    }

    /// New data was enqueued on the stream: renderers copy it when they next draw.
    pub fn publish(&self) -> Version {
        self.log.lock().record_all()
    }

    /// Runs `write` with the slice a [`CudaSource::from_slice`] source owns (to enqueue
    /// kernels on its stream), then publishes. Returns `None` for sources made from raw
    /// pointers.
    pub fn write<R>(&self, write: impl FnOnce(&mut CudaSlice<u8>) -> R) -> Option<R> {
        let slice = self.slice.as_ref()?;
        let result = write(&mut slice.lock());
        self.publish();
        Some(result)
    }

    /// Where the data is.
    pub fn memory(&self) -> CudaMemory {
        self.memory
    }

    /// The explicit opt-in to the slow path: a host source that copies this source's data
    /// device to host (waiting for its stream) whenever a renderer reads it, and is uploaded
    /// like any host data. It works on any renderer, GL included, and never happens unless
    /// asked for; its label says so.
    pub fn staged_through_host(self: &Arc<Self>) -> HostStagedCudaSource {
        log::info!(
            "{} is staged through host memory on request: each new version goes device -> host -> device",
            self.label()
        );
        HostStagedCudaSource {
            inner: self.clone(),
        }
    }
}

/// A [`CudaSource`] read through host memory: see [`CudaSource::staged_through_host`].
pub struct HostStagedCudaSource {
    inner: Arc<CudaSource>,
}

impl DataSource for HostStagedCudaSource {
    fn layout(&self) -> Layout {
        self.inner.layout()
    }

    fn version(&self) -> Version {
        self.inner.version()
    }

    fn changes_since(&self, since: Version) -> Changes {
        self.inner.changes_since(since)
    }

    fn read(&self, request: &ReadRequest<'_>, dst: &mut [u8]) -> Result<ReadStatus, SourceError> {
        let inner = &self.inner;
        sluice_core::check_read(&inner.layout, request, dst.len())?;
        let memory = inner.memory;
        let region = request.region;
        let sample = inner.layout.sample_bytes();
        let src = Pitched::at(&memory, region.origin, sample);
        let stream = StreamHandle::from_raw(memory.stream);
        let device = inner.cuda.device();
        let copied = (|| {
            if let Some(event) = memory.ready_event {
                stream_wait_event(&device.ctx, stream, event)?;
            }
            copy_to_host(
                &device.ctx,
                stream,
                src,
                dst,
                [region.size[0], region.size[1], region.size[2] * sample],
            )
        })();
        copied.map_err(|e| SourceError::Custom(Box::new(e)))?;
        Ok(ReadStatus::Ready)
    }

    fn label(&self) -> String {
        format!(
            "{} (staged through host memory, by request)",
            self.inner.label()
        )
    }
}

/// The key the upload checks before giving a source's handles to the driver.
pub(crate) fn vouch_key(memory: &CudaMemory) -> (u64, u64, u64) {
    (memory.ptr, memory.stream, memory.ready_event.unwrap_or(0))
}

impl Drop for CudaSource {
    fn drop(&mut self) {
        self.cuda.device().unvouch(vouch_key(&self.memory));
    }
}

impl DataSource for CudaSource {
    fn layout(&self) -> Layout {
        self.layout.clone()
    }

    fn version(&self) -> Version {
        self.log.lock().version()
    }

    fn changes_since(&self, since: Version) -> Changes {
        self.log.lock().since(since)
    }

    fn residency(&self) -> Residency {
        Residency::Cuda(self.memory)
    }

    fn read(&self, _: &ReadRequest<'_>, _: &mut [u8]) -> Result<ReadStatus, SourceError> {
        Err(not_on_host("CudaSource"))
    }

    fn label(&self) -> String {
        format!("CudaSource {}", self.layout.shape())
    }
}

/// A source whose memory the renderer's device owns and exports to CUDA: the user's kernels
/// write straight into it, and the renderer copies it into the texture with one GPU-side copy.
///
/// Writes are handed off explicitly: [`CudaWritableSource::begin_write`] makes the user's
/// stream wait (on the GPU) until the renderer has finished reading the previous version, and
/// [`CudaWrite::end`] signals the renderer when the kernels enqueued meanwhile are done. A
/// frame drawn while a write is under way shows the previous version, whole.
pub struct CudaWritableSource {
    cuda: CudaInterop,
    layout: Layout,
    pitches: Pitches,
    handoff: Arc<Handoff>,
    state: Mutex<VulkanState>,
    /// Recorded after each write; synchronized before the CUDA objects below are destroyed.
    done: Mutex<Event>,
    mapping: ExternalBuffer,
    cuda_semaphore: ExternalSemaphore,
    /// The renderer-side owners of the memory and the semaphore (CUDA and the renderer's
    /// upload hold their own references too).
    _buffer: ExportedBuffer,
    _semaphore: SharedSemaphore,
}

impl CudaWritableSource {
    /// Allocates memory for `layout` on the renderer's device (rows pitched to 256 bytes) and
    /// maps it into CUDA.
    pub fn new(cuda: &CudaInterop, layout: Layout) -> Result<Self, InteropError> {
        check_device_layout(&layout)?;
        let interop = cuda.interop();
        let pitches = Pitches::aligned(&layout);
        let span = pitches.span(&layout);
        let buffer = interop.export_buffer(span)?;
        let semaphore = interop.create_semaphore()?;
        let ctx = cuda.context();
        let mapping = ExternalBuffer::import(
            ctx,
            buffer.export_fd()?,
            buffer.allocation_size(),
            buffer.is_dedicated(),
            span,
        )?;
        let cuda_semaphore = ExternalSemaphore::import(ctx, semaphore.export_fd()?)?;
        let semaphore_fd: Arc<OwnedFd> = Arc::new(semaphore.export_fd()?);
        let handoff = Arc::new(Handoff::default());
        interop
            .shared()
            .handoffs
            .register(fd_key(&semaphore_fd), &handoff);
        let memory = VulkanMemory {
            semaphore: Some(TimelineSemaphore {
                fd: semaphore_fd,
                wait_value: 0,
                signal_value: None,
            }),
            ..buffer.memory(0, pitches)?
        };
        Ok(CudaWritableSource {
            cuda: cuda.clone(),
            layout,
            pitches,
            handoff,
            state: Mutex::new(VulkanState {
                memory,
                log: ChangeLog::new(1),
            }),
            done: Mutex::new(Event::new(ctx)?),
            mapping,
            cuda_semaphore,
            _buffer: buffer,
            _semaphore: semaphore,
        })
    }

    /// Starts a write on `stream`: work enqueued on it from now on runs after the renderer
    /// has finished reading the previous version. Fails if a write is under way.
    pub fn begin_write<'a>(
        &'a self,
        stream: &'a CudaStream,
    ) -> Result<CudaWrite<'a>, InteropError> {
        let values = self.handoff.begin_write()?;
        let handle = StreamHandle(stream.cu_stream());
        if values.wait > 0 {
            if let Err(e) = self.cuda_semaphore.wait(handle, values.wait) {
                self.handoff.abandon_write();
                return Err(e);
            }
        }
        Ok(CudaWrite {
            source: self,
            _stream: stream,
            stream: handle,
            values,
            ended: false,
        })
    }

    /// Where samples lie in the buffer.
    pub fn pitches(&self) -> Pitches {
        self.pitches
    }

    fn finish(&self, stream: StreamHandle, values: WriteValues) -> Result<Version, InteropError> {
        if let Err(e) = self
            .cuda_semaphore
            .signal(stream, values.signal)
            .and_then(|()| self.done.lock().record(stream))
        {
            self.handoff.abandon_write();
            return Err(e);
        }
        self.handoff.end_write(values)?;
        let mut state = self.state.lock();
        if let Some(semaphore) = &mut state.memory.semaphore {
            semaphore.wait_value = values.signal;
        }
        Ok(state.log.record_all())
    }
}

impl Drop for CudaWritableSource {
    fn drop(&mut self) {
        // CUDA work on the mapping and the semaphore must be done before they are destroyed.
        if let Err(e) = self.done.lock().synchronize() {
            log::warn!("CudaWritableSource: waiting for its last write: {e}");
        }
    }
}

crate::source::vulkan_memory_source!(CudaWritableSource);

/// A write under way into a [`CudaWritableSource`]: enqueue kernels writing at
/// [`CudaWrite::ptr`] on [`CudaWrite::stream`], then call [`CudaWrite::end`] (dropping the
/// guard ends the write too, ignoring errors).
#[must_use = "end the write, or the renderer never sees it"]
pub struct CudaWrite<'a> {
    source: &'a CudaWritableSource,
    /// Borrowed so that the stream outlives the write that enqueues on it.
    _stream: &'a CudaStream,
    stream: StreamHandle,
    values: WriteValues,
    ended: bool,
}

impl CudaWrite<'_> {
    /// The device address of the first sample (a `CUdeviceptr`).
    pub fn ptr(&self) -> u64 {
        self.source.mapping.ptr()
    }

    /// Bytes writable from [`CudaWrite::ptr`].
    pub fn len(&self) -> u64 {
        self.source.mapping.len()
    }

    /// Always false: the buffer holds at least one sample.
    pub fn is_empty(&self) -> bool {
        false
    }

    /// Where samples lie from [`CudaWrite::ptr`].
    pub fn pitches(&self) -> Pitches {
        self.source.pitches
    }

    /// The source's layout.
    pub fn layout(&self) -> &Layout {
        &self.source.layout
    }

    /// The stream the write was begun on, as the driver names it (`CUstream`).
    pub fn stream(&self) -> u64 {
        self.stream.0 as usize as u64
    }

    /// Ends the write: once the work enqueued on the stream so far is done, renderers copy
    /// the new version. Returns it.
    pub fn end(mut self) -> Result<Version, InteropError> {
        self.ended = true;
        self.source.finish(self.stream, self.values)
    }

    pub(crate) fn cuda(&self) -> &CudaInterop {
        &self.source.cuda
    }

    pub(crate) fn stream_handle(&self) -> StreamHandle {
        self.stream
    }
}

impl Drop for CudaWrite<'_> {
    fn drop(&mut self) {
        if !self.ended {
            if let Err(e) = self.source.finish(self.stream, self.values) {
                log::warn!("ending a CUDA write on drop: {e}");
            }
        }
    }
}
