//! `BufferProxy`: one GPU buffer per (source, renderer, format), for vertex attributes and
//! indices, kept up to date with the source like a texture proxy: only changed chunks are
//! uploaded, merged into few copies, through the staging ring, converted on the way.

use sluice_core::{
    BufferFormat, ConsumerId, Layout, LendOutcome, ReadRequest, ReadStatus, Region, Residency,
    SharedSource,
};

use crate::device_upload::{DeviceBufferCopy, DeviceCopyOutcome};
use crate::error::RenderError;
use crate::proxy::{SourceKey, UploadContext};
use crate::upload_state::UploadState;

/// Identity of a buffer proxy: the source, and the format it is held in.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub(crate) struct BufferKey {
    pub source: SourceKey,
    pub format: BufferFormat,
}

pub(crate) struct BufferProxy {
    source: SharedSource,
    consumer: ConsumerId,
    layout: Layout,
    format: BufferFormat,
    buffer: wgpu::Buffer,
    generation: u64,
    /// Bumped with every copy recorded into the buffer (and when it is recreated): what the
    /// buffer holds on the device changes only with it.
    writes: u64,
    state: UploadState,
    /// Indices must be below this (the vertex count they were checked against).
    index_limit: Option<u32>,
    /// Known that no f32 element of the buffer is NaN (see [`BufferProxy::nan_free`]).
    nan_free: bool,
    pub users: usize,
}

impl BufferProxy {
    pub fn new(
        device: &wgpu::Device,
        source: SharedSource,
        format: BufferFormat,
        counters: &mut crate::counters::Counters,
    ) -> Result<Self, RenderError> {
        let layout = source.layout();
        check_attribute_layout(&source, &layout, format)?;
        let buffer = create_buffer(device, &layout, format);
        counters.resident_bytes += buffer.size();
        counters.buffers_alive += 1;
        let consumer = ConsumerId::next();
        source.attach(consumer);
        Ok(BufferProxy {
            source,
            consumer,
            layout,
            format,
            buffer,
            generation: 0,
            writes: 0,
            state: UploadState::new(),
            index_limit: None,
            // A new buffer holds zeros.
            nan_free: true,
            users: 0,
        })
    }

    pub fn buffer(&self) -> &wgpu::Buffer {
        &self.buffer
    }

    pub fn generation(&self) -> u64 {
        self.generation
    }

    /// Changes whenever what the buffer holds on the device may have changed: a copy into it
    /// was recorded, or it was recreated (data derived from its contents on the device, such
    /// as a mesh's cull, is current while this stays the same).
    pub fn writes(&self) -> u64 {
        self.writes
    }

    pub fn source(&self) -> &SharedSource {
        &self.source
    }

    /// Whether the buffer is known to hold no NaN: f32 buffers on CPU devices, where every
    /// region is scanned as it is staged (or, for imported host pages, read from the pages
    /// the source lends). A region with a NaN, or one not scanned (on a GPU, or device data),
    /// makes this false until a scan of the whole buffer finds none; a region without NaN
    /// keeps it as it was. The mesh draws positions known free of NaN without the per-vertex
    /// NaN flag and its discard (`MeshProgram::Finite`).
    pub fn nan_free(&self) -> bool {
        self.nan_free
    }

    /// Notes that `region` was copied into the buffer, and whether its elements were found
    /// free of NaN (`None`: not scanned).
    fn note_scan(&mut self, region: Region, nan_free: Option<bool>) {
        let whole = region == self.layout.shape().full_region();
        self.nan_free = match nan_free {
            Some(true) => self.nan_free || whole,
            Some(false) | None => false,
        };
    }

    /// Whether `bytes` (f32 elements, little-endian) hold no NaN; `None` where this buffer is
    /// not scanned (not f32, or `host_summaries` false: not a CPU device).
    fn scan(&self, host_summaries: bool, bytes: &[u8]) -> Option<bool> {
        if !host_summaries || !matches!(self.format, BufferFormat::F32 { .. }) {
            return None;
        }
        // Element by element with no early exit, so that it compiles to vector compares.
        let nan = bytes.chunks_exact(4).fold(false, |acc, b| {
            acc | f32::from_le_bytes([b[0], b[1], b[2], b[3]]).is_nan()
        });
        Some(!nan)
    }

    /// Elements of the format held: vertices for attributes, single indices for indices.
    pub fn len(&self) -> usize {
        match self.format {
            BufferFormat::U32 => self.layout.shape().len() * self.layout.channels(),
            _ => self.layout.shape().len(),
        }
    }

    /// Sets the vertex count indices must stay below; a new limit re-checks (and re-uploads)
    /// every index.
    pub fn set_index_limit(&mut self, limit: u32) {
        if self.index_limit != Some(limit) {
            self.index_limit = Some(limit);
            self.state.reset();
        }
    }

    pub fn retire(self, counters: &mut crate::counters::Counters) {
        counters.resident_bytes -= self.buffer.size();
        counters.buffers_alive -= 1;
        self.source.detach(self.consumer);
        self.buffer.destroy();
    }

    /// The frame's commands were submitted: the source hears of what its copies brought.
    pub fn submitted(&mut self) {
        self.state.submitted(self.source.as_ref(), self.consumer);
    }

    /// The last frame was dropped unsubmitted (it panicked) or its commands were rejected:
    /// if it recorded copies into the buffer, they are made again (what changed since the
    /// upload before it, see `UploadState::lost`), and nothing is assumed of the buffer's
    /// values (its NaN scan may have been of data that never arrived).
    pub fn forget_lost_frame(&mut self) {
        if self.state.lost() {
            self.nan_free = false;
            self.writes += 1;
        }
    }

    /// Brings the buffer up to date. Returns whether uploads remain for a later frame.
    pub fn upload(&mut self, ctx: &mut UploadContext<'_>) -> Result<bool, RenderError> {
        let Some(begun) = self.state.begin(self.source.as_ref(), &self.layout) else {
            return Ok(false);
        };
        if let Some(layout) = begun.new_layout {
            if let Err(e) = check_attribute_layout(&self.source, &layout, self.format) {
                self.state.reset();
                return Err(e);
            }
            ctx.counters.resident_bytes -= self.buffer.size();
            self.buffer.destroy();
            self.buffer = create_buffer(ctx.device, &layout, self.format);
            ctx.counters.resident_bytes += self.buffer.size();
            self.layout = layout;
            self.generation += 1;
            self.writes += 1;
            self.nan_free = true;
        }
        let mut copies = self
            .state
            .plan(self.source.readable(), &self.layout)
            .into_iter();
        while let Some(region) = copies.next() {
            match self.copy_region(ctx, region) {
                Ok(true) => self.writes += 1,
                Ok(false) => {
                    self.state.defer(std::iter::once(region).chain(copies));
                    break;
                }
                Err(e) => {
                    // Retry from here next frame; the error is reported now.
                    self.state.defer(std::iter::once(region).chain(copies));
                    return Err(e);
                }
            }
        }
        Ok(self.state.finish(begun.version))
    }

    fn copy_region(
        &mut self,
        ctx: &mut UploadContext<'_>,
        region: Region,
    ) -> Result<bool, RenderError> {
        let residency = self.source.residency();
        if !matches!(residency, Residency::Host) {
            ctx.staging.note_device_copy();
            return self.copy_device_region(ctx, &residency, region);
        }
        let samples = region.size[2];
        let per_sample = match self.format {
            BufferFormat::U32 => self.layout.channels() * 4,
            f => f.element_bytes(),
        };
        let size = (samples * per_sample) as u64;
        ctx.make_room(size);
        let request = ReadRequest::new(region, ctx.waker);
        let sample_bytes = self.layout.sample_bytes();
        // Convert into scratch (validating indices), then stage.
        let mut converted = std::mem::take(ctx.scratch);
        converted.resize(size as usize, 0);
        let mut convert_result = Ok(());
        let layout = &self.layout;
        let format = self.format;
        let source = &self.source;
        let source_err = |error| RenderError::Source {
            source_label: source.label(),
            error,
        };
        if self.holds_as_is() {
            // No conversion: lend straight into staging, one copy from the source's memory to
            // the GPU's (indices are checked on the lent bytes first).
            let mut checked = Ok(());
            let mut scanned = None;
            let summaries = ctx.host_summaries;
            let mut lent = Ok(LendOutcome::NotLendable);
            let staged = ctx.staging.stage(ctx.device, size, |view| {
                lent = source.lend(&request, &mut |host| {
                    let bytes = &host.bytes[..size as usize];
                    checked = self.check_indices(bytes, region);
                    if checked.is_ok() {
                        view.slice(..size as usize).copy_from_slice(bytes);
                        scanned = self.scan(summaries, bytes);
                    }
                });
            });
            if lent.map_err(source_err)? == LendOutcome::Lent {
                *ctx.scratch = converted;
                checked?;
                self.record_copy(ctx, &staged, region, per_sample, size);
                self.note_scan(region, scanned);
                return Ok(true);
            }
        }
        let lent = source
            .lend(&request, &mut |host| {
                convert_result =
                    format.convert_row(layout, host.row(0, 0), &mut converted, samples);
            })
            .map_err(source_err)?;
        if lent == LendOutcome::NotLendable {
            let mut packed = vec![0u8; samples * sample_bytes];
            if source.read(&request, &mut packed).map_err(source_err)? == ReadStatus::Pending {
                *ctx.scratch = converted;
                return Ok(false);
            }
            convert_result = format.convert_row(layout, &packed, &mut converted, samples);
        }
        let checked = convert_result
            .map_err(|reason| RenderError::InvalidMeshData {
                source_label: source.label(),
                reason,
            })
            .and_then(|()| self.check_indices(&converted, region));
        if let Err(e) = checked {
            *ctx.scratch = converted;
            return Err(e);
        }
        let staged = ctx.staging.stage(ctx.device, size, |view| {
            view.slice(..size as usize)
                .copy_from_slice(&converted[..size as usize]);
        });
        let scanned = self.scan(ctx.host_summaries, &converted[..size as usize]);
        *ctx.scratch = converted;
        self.record_copy(ctx, &staged, region, per_sample, size);
        self.note_scan(region, scanned);
        Ok(true)
    }

    fn record_copy(
        &self,
        ctx: &mut UploadContext<'_>,
        staged: &crate::staging::Staged,
        region: Region,
        per_sample: usize,
        size: u64,
    ) {
        ctx.encoder.copy_buffer_to_buffer(
            &staged.buffer,
            staged.offset,
            &self.buffer,
            (region.origin[2] * per_sample) as u64,
            size,
        );
        ctx.counters.bytes_uploaded += size;
        ctx.counters.copies_issued += 1;
    }

    /// Whether the source's elements are already in the GPU format (f32 attributes with the
    /// format's channels, u32 indices, u8 RGBA colours).
    fn holds_as_is(&self) -> bool {
        use sluice_core::ElementType as E;
        match (self.format, self.layout.element(), self.layout.channels()) {
            (BufferFormat::F32 { channels }, E::F32, c) => c == channels,
            (BufferFormat::U32, E::U32, _) => true,
            (BufferFormat::Rgba8, E::U8, 4) => true,
            _ => false,
        }
    }

    /// A device-resident attribute: one GPU-side copy by the renderer's device upload path,
    /// for layouts the GPU holds as they are. Indices cannot be checked on the CPU here.
    fn copy_device_region(
        &mut self,
        ctx: &mut UploadContext<'_>,
        residency: &Residency,
        region: Region,
    ) -> Result<bool, RenderError> {
        let unconverted = self.holds_as_is();
        let unsupported = |reason: String| RenderError::UnsupportedSource {
            visual: "Mesh",
            source_label: self.source.label(),
            reason,
        };
        if !unconverted {
            return Err(unsupported(format!(
                "device-resident {} data with {} channel(s) would need conversion to {:?}",
                self.layout.element(),
                self.layout.channels(),
                self.format
            )));
        }
        let upload = ctx.device_upload.ok_or_else(|| {
            unsupported("its data is in device memory and this renderer has no device upload path (create it through sluice-interop)".into())
        })?;
        let outcome = upload.copy_to_buffer(DeviceBufferCopy {
            device: ctx.device,
            queue: ctx.queue,
            encoder: ctx.encoder,
            source: self.source.as_ref(),
            residency,
            layout: &self.layout,
            range: region.origin[2]..region.origin[2] + region.size[2],
            buffer: &self.buffer,
        })?;
        if outcome == DeviceCopyOutcome::NotReady {
            return Ok(false);
        }
        // Host pages the device imported: scanned from the pages the source lends, where
        // buffers are scanned at all (no lend otherwise).
        let mut scanned = None;
        let scans = ctx.host_summaries && matches!(self.format, BufferFormat::F32 { .. });
        if scans && matches!(residency, Residency::HostImported(_)) {
            let request = ReadRequest::new(region, ctx.waker);
            let bytes = region.size[2] * self.layout.sample_bytes();
            let lent = self.source.lend(&request, &mut |host| {
                scanned = host
                    .bytes
                    .get(..bytes)
                    .and_then(|b| self.scan(ctx.host_summaries, b));
            });
            if !matches!(lent, Ok(LendOutcome::Lent)) {
                scanned = None;
            }
        }
        self.note_scan(region, scanned);
        // Elements as the source holds them (3 u32 per triangle for 3-channel indices).
        ctx.counters.device_bytes_copied += (region.size[2] * self.layout.sample_bytes()) as u64;
        ctx.counters.copies_issued += 1;
        Ok(true)
    }

    /// Every index of a converted region must be below the vertex count.
    fn check_indices(&self, converted: &[u8], region: Region) -> Result<(), RenderError> {
        let Some(limit) = self.index_limit else {
            return Ok(());
        };
        let channels = self.layout.channels();
        for (i, b) in converted.chunks_exact(4).enumerate() {
            let index = u32::from_le_bytes([b[0], b[1], b[2], b[3]]);
            if index >= limit {
                return Err(RenderError::InvalidMeshData {
                    source_label: self.source.label(),
                    reason: format!(
                        "index {index} at position {} is out of range for {limit} vertices",
                        region.origin[2] * channels + i
                    ),
                });
            }
        }
        Ok(())
    }
}

fn create_buffer(device: &wgpu::Device, layout: &Layout, format: BufferFormat) -> wgpu::Buffer {
    let elements = match format {
        BufferFormat::U32 => layout.shape().len() * layout.channels(),
        _ => layout.shape().len(),
    };
    device.create_buffer(&wgpu::BufferDescriptor {
        label: Some("sluice attribute buffer"),
        size: (elements * format.element_bytes()).max(4) as u64,
        usage: wgpu::BufferUsages::STORAGE
            | wgpu::BufferUsages::INDEX
            | wgpu::BufferUsages::COPY_DST,
        mapped_at_creation: false,
    })
}

/// Attributes are 1-D; indices are integers with 1 or 3 channels.
fn check_attribute_layout(
    source: &SharedSource,
    layout: &Layout,
    format: BufferFormat,
) -> Result<(), RenderError> {
    let shape = layout.shape();
    let invalid = |reason: String| RenderError::InvalidMeshData {
        source_label: source.label(),
        reason,
    };
    if shape.ndim() != 1 {
        return Err(invalid(format!(
            "a mesh attribute is 1-D (elements, with channels); this source has shape {shape}"
        )));
    }
    if format == BufferFormat::U32 {
        if layout.element().is_float() {
            return Err(invalid(format!(
                "indices must be integers, not {}",
                layout.element()
            )));
        }
        if layout.channels() != 1 && layout.channels() != 3 {
            return Err(invalid(format!(
                "indices have 1 channel (3 per triangle) or 3 (one triangle each), not {}",
                layout.channels()
            )));
        }
    }
    Ok(())
}
