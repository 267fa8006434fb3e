//! `TextureProxy`: one GPU texture per (source, renderer), kept up to date with the source.
//!
//! The proxy is the one place that decides uploads. Each frame it asks its source what changed
//! since the version it holds, plans copies by chunk (few, merged; the whole texture when most
//! of it changed), stages the bytes through the renderer's staging ring (converting formats on
//! the way) and records `copy_buffer_to_texture` commands. A per-frame byte budget spreads a
//! large change over several frames.

use sluice_core::{
    plan_chunked, plan_exact, Changes, ConsumerId, HostView, Layout, LendOutcome, ReadRequest,
    ReadStatus, Readable, Region, Residency, SharedSource, UploadFormat, Version,
};

use crate::counters::Counters;
use crate::device_upload::{DeviceCopy, DeviceUpload};
use crate::error::RenderError;
use crate::format::{texture_format, SampleKind};
use crate::staging::{StagingRing, STAGING_ALIGNMENT};

/// Above this fraction of dirty chunks, the whole texture is uploaded in one copy.
const FULL_UPLOAD_FRACTION: f64 = 0.5;

/// Identity of a shared source: the address of its `Arc` allocation. The proxy holds a clone
/// of the `Arc`, so the address cannot be reused while the key is in use.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub(crate) struct SourceKey(usize);

impl SourceKey {
    pub fn of(source: &SharedSource) -> Self {
        SourceKey(std::sync::Arc::as_ptr(source) as *const () as usize)
    }
}

/// What the frame's uploads may use.
pub(crate) struct UploadContext<'a> {
    pub device: &'a wgpu::Device,
    pub queue: &'a wgpu::Queue,
    pub device_upload: Option<&'a dyn DeviceUpload>,
    pub encoder: &'a mut wgpu::CommandEncoder,
    pub staging: &'a mut StagingRing,
    pub counters: &'a mut Counters,
    /// Bytes of source data a frame may upload; `None` for no limit. The first copy of a
    /// frame always goes, so that every frame makes progress.
    pub budget: Option<u64>,
    /// `counters.bytes_uploaded` when the frame began.
    pub frame_start_bytes: u64,
    pub waker: &'a std::task::Waker,
    /// Scratch for conversion and sources that cannot lend.
    pub scratch: &'a mut Vec<u8>,
}

pub(crate) struct TextureProxy {
    source: SharedSource,
    consumer: ConsumerId,
    layout: Layout,
    format: UploadFormat,
    sample_kind: SampleKind,
    texture: wgpu::Texture,
    view: wgpu::TextureView,
    /// Bumped whenever the texture is recreated, so bind groups know to follow.
    generation: u64,
    uploaded: Version,
    /// Changes not uploaded yet (over budget, or not ready).
    pending: Vec<Region>,
    /// Visuals using this proxy.
    pub users: usize,
}

impl TextureProxy {
    /// Creates the texture for `source`; uploads nothing yet.
    pub fn new(
        device: &wgpu::Device,
        source: SharedSource,
        counters: &mut Counters,
        device_upload: Option<&dyn DeviceUpload>,
    ) -> Result<Self, RenderError> {
        let layout = source.layout();
        check_residency(&source, &layout, device_upload)?;
        let (texture, view, format, sample_kind) = create_texture(device, &source, &layout)?;
        let consumer = ConsumerId::next();
        source.attach(consumer);
        counters.textures_alive += 1;
        counters.textures_created += 1;
        counters.resident_bytes += texture_bytes(&layout, &format);
        Ok(TextureProxy {
            source,
            consumer,
            layout,
            format,
            sample_kind,
            texture,
            view,
            generation: 0,
            uploaded: Version::NEVER,
            pending: Vec::new(),
            users: 0,
        })
    }

    pub fn view(&self) -> &wgpu::TextureView {
        &self.view
    }

    pub fn generation(&self) -> u64 {
        self.generation
    }

    pub fn sample_kind(&self) -> SampleKind {
        self.sample_kind
    }

    pub fn layout(&self) -> &Layout {
        &self.layout
    }

    /// Releases the texture's share of the counters; the texture itself drops with `self`.
    pub fn retire(self, counters: &mut Counters) {
        counters.textures_alive -= 1;
        counters.resident_bytes -= texture_bytes(&self.layout, &self.format);
        self.source.detach(self.consumer);
        self.texture.destroy();
    }

    /// Brings the texture up to date with the source as far as the budget allows. Returns
    /// whether uploads remain for a later frame.
    pub fn upload(&mut self, ctx: &mut UploadContext<'_>) -> Result<bool, RenderError> {
        let current = self.source.version();
        if current == self.uploaded && self.pending.is_empty() {
            return Ok(false);
        }
        match self.source.changes_since(self.uploaded) {
            Changes::None => {}
            Changes::Regions(regions) => self.pending.extend(regions),
            Changes::All => {
                let layout = self.source.layout();
                if layout != self.layout {
                    self.recreate(ctx.device, layout, ctx.counters)?;
                }
                self.pending.clear();
                self.pending.push(self.layout.shape().full_region());
            }
        }
        self.uploaded = current;
        let plan = match self.source.readable() {
            Readable::Everywhere => plan_chunked(
                &self.layout.shape(),
                &self.layout.chunks(),
                &self.pending,
                FULL_UPLOAD_FRACTION,
            ),
            Readable::ChangedRegionsOnly => plan_exact(&self.pending),
        };
        self.pending.clear();
        // GPU-side copies of device-resident data are cheap and must not be split over frames:
        // a later frame could copy the rest from newer data, showing a torn version.
        let budget = match self.source.residency() {
            Residency::Host => ctx.budget,
            _ => None,
        };
        let mut copies = plan.copies.into_iter();
        while let Some(region) = copies.next() {
            let done = ctx.counters.bytes_uploaded - ctx.frame_start_bytes;
            let (head, tail) = match budget {
                Some(budget) => {
                    self.split_for_budget(region, budget.saturating_sub(done), done == 0)
                }
                None => (Some(region), None),
            };
            let Some(head) = head else {
                self.pending.push(region);
                self.pending.extend(copies);
                break;
            };
            let copied = match self.copy_region(ctx, head) {
                Ok(copied) => copied,
                Err(e) => {
                    // Start over from a full upload next time rather than guess what is left.
                    self.uploaded = Version::NEVER;
                    self.pending.clear();
                    return Err(e);
                }
            };
            if !copied {
                self.pending.push(region);
                self.pending.extend(copies);
                break;
            }
            if let Some(tail) = tail {
                self.pending.push(tail);
                self.pending.extend(copies);
                break;
            }
        }
        if self.pending.is_empty() {
            self.source.uploaded(self.consumer, current);
        }
        Ok(!self.pending.is_empty())
    }

    /// Cuts `region` so that its first part fits in `allowed` bytes, along its slowest axis and
    /// at chunk boundaries (so each chunk is still uploaded by one copy, showing one version).
    /// With `must_progress`, at least one chunk row (or plane) goes even over the budget.
    fn split_for_budget(
        &self,
        region: Region,
        allowed: u64,
        must_progress: bool,
    ) -> (Option<Region>, Option<Region>) {
        let bytes = (region.len() * self.format.sample_bytes()) as u64;
        if bytes <= allowed {
            return (Some(region), None);
        }
        let axis = if region.size[0] > 1 { 0 } else { 1 };
        let chunk = self.layout.chunks().chunk_size()[axis];
        let slice_bytes = bytes / region.size[axis] as u64;
        // Chunk-aligned end of the head, counted from the region's origin.
        let first_boundary = (region.origin[axis] / chunk + 1) * chunk - region.origin[axis];
        let fits = (allowed / slice_bytes) as usize;
        let head_len = if fits >= first_boundary {
            first_boundary + (fits - first_boundary) / chunk * chunk
        } else if must_progress {
            first_boundary
        } else {
            return (None, Some(region));
        };
        let head_len = head_len.min(region.size[axis]);
        if head_len == region.size[axis] {
            return (Some(region), None);
        }
        let mut head = region;
        head.size[axis] = head_len;
        let mut tail = region;
        tail.origin[axis] += head_len;
        tail.size[axis] -= head_len;
        (Some(head), Some(tail))
    }

    fn recreate(
        &mut self,
        device: &wgpu::Device,
        layout: Layout,
        counters: &mut Counters,
    ) -> Result<(), RenderError> {
        let (texture, view, format, sample_kind) = create_texture(device, &self.source, &layout)?;
        counters.resident_bytes -= texture_bytes(&self.layout, &self.format);
        counters.resident_bytes += texture_bytes(&layout, &format);
        counters.textures_created += 1;
        self.texture.destroy();
        self.texture = texture;
        self.view = view;
        self.format = format;
        self.sample_kind = sample_kind;
        self.layout = layout;
        self.generation += 1;
        Ok(())
    }

    /// Stages and copies one region, split into pieces that fit a staging buffer. Returns false
    /// if the source had the data not ready (nothing of the region was copied then).
    fn copy_region(
        &mut self,
        ctx: &mut UploadContext<'_>,
        region: Region,
    ) -> Result<bool, RenderError> {
        let residency = self.source.residency();
        if !matches!(residency, Residency::Host) {
            let upload = ctx
                .device_upload
                .ok_or_else(|| no_device_upload(&self.source))?;
            upload.copy_to_texture(DeviceCopy {
                device: ctx.device,
                queue: ctx.queue,
                encoder: ctx.encoder,
                source: self.source.as_ref(),
                residency: &residency,
                layout: &self.layout,
                region,
                texture: &self.texture,
            })?;
            ctx.counters.copies_issued += 1;
            return Ok(true);
        }
        let texel = self.format.sample_bytes();
        let row_bytes = region.size[2] * texel;
        let padded_row = (row_bytes as u64).next_multiple_of(STAGING_ALIGNMENT);
        let rows = region.size[1];
        let plane_bytes = padded_row * rows as u64;
        let max = ctx.staging.max_stage();
        // Pieces: whole planes when a plane fits, else row bands of one plane.
        let mut pieces = Vec::new();
        if plane_bytes <= max {
            let planes_per_piece = ((max / plane_bytes) as usize).max(1);
            let mut p = 0;
            while p < region.size[0] {
                let n = planes_per_piece.min(region.size[0] - p);
                pieces.push(Region {
                    origin: [region.origin[0] + p, region.origin[1], region.origin[2]],
                    size: [n, rows, region.size[2]],
                });
                p += n;
            }
        } else {
            let rows_per_piece = ((max / padded_row) as usize).max(1);
            for p in 0..region.size[0] {
                let mut r = 0;
                while r < rows {
                    let n = rows_per_piece.min(rows - r);
                    pieces.push(Region {
                        origin: [region.origin[0] + p, region.origin[1] + r, region.origin[2]],
                        size: [1, n, region.size[2]],
                    });
                    r += n;
                }
            }
        }
        for piece in pieces {
            if !self.copy_piece(ctx, piece, padded_row)? {
                return Ok(false);
            }
        }
        Ok(true)
    }

    fn copy_piece(
        &mut self,
        ctx: &mut UploadContext<'_>,
        piece: Region,
        padded_row: u64,
    ) -> Result<bool, RenderError> {
        let request = ReadRequest::new(piece, ctx.waker);
        let format = self.format;
        let rows_total = piece.size[0] * piece.size[1];
        let out_row = piece.size[2] * format.sample_bytes();
        let size = padded_row * rows_total as u64;
        let source = &self.source;
        let source_err = |error| RenderError::Source {
            source_label: source.label(),
            error,
        };

        // Lend straight into staging: one copy from the source's memory to the GPU's.
        let mut row_scratch = std::mem::take(ctx.scratch);
        let mut lent = Ok(LendOutcome::NotLendable);
        let staged = ctx.staging.stage(ctx.device, size, |view| {
            lent = source.lend(&request, &mut |host| {
                write_rows(view, &host, &format, padded_row as usize, &mut row_scratch)
            });
        });
        let staged = match lent.map_err(source_err)? {
            LendOutcome::Lent => staged,
            LendOutcome::NotLendable => {
                // Read packed, then stage; the reservation made for lending is given back.
                ctx.staging.rewind(&staged, size);
                let sample_bytes = self.layout.sample_bytes();
                let mut packed = vec![0u8; piece.len() * sample_bytes];
                if source.read(&request, &mut packed).map_err(source_err)? == ReadStatus::Pending {
                    *ctx.scratch = row_scratch;
                    return Ok(false);
                }
                let row_pitch = piece.size[2] * sample_bytes;
                let host = HostView {
                    bytes: &packed,
                    region: piece,
                    sample_bytes,
                    row_pitch,
                    plane_pitch: row_pitch * piece.size[1],
                };
                ctx.staging.stage(ctx.device, size, |view| {
                    write_rows(view, &host, &format, padded_row as usize, &mut row_scratch)
                })
            }
        };
        *ctx.scratch = row_scratch;
        ctx.encoder.copy_buffer_to_texture(
            wgpu::TexelCopyBufferInfo {
                buffer: &staged.buffer,
                layout: wgpu::TexelCopyBufferLayout {
                    offset: staged.offset,
                    bytes_per_row: Some(padded_row as u32),
                    rows_per_image: Some(piece.size[1] as u32),
                },
            },
            wgpu::TexelCopyTextureInfo {
                texture: &self.texture,
                mip_level: 0,
                origin: wgpu::Origin3d {
                    x: piece.origin[2] as u32,
                    y: piece.origin[1] as u32,
                    z: piece.origin[0] as u32,
                },
                aspect: wgpu::TextureAspect::All,
            },
            wgpu::Extent3d {
                width: piece.size[2] as u32,
                height: piece.size[1] as u32,
                depth_or_array_layers: piece.size[0] as u32,
            },
        );
        ctx.counters.bytes_uploaded += (rows_total * out_row) as u64;
        ctx.counters.copies_issued += 1;
        Ok(true)
    }
}

/// Writes the rows of `host` into a staging view, `padded_row` bytes apart, converting the
/// format where needed (through `scratch`, one row long).
fn write_rows(
    view: &mut wgpu::BufferViewMut,
    host: &HostView<'_>,
    format: &UploadFormat,
    padded_row: usize,
    scratch: &mut Vec<u8>,
) {
    let samples = host.region.size[2];
    let out_row = samples * format.sample_bytes();
    if !format.converts() && host.is_contiguous() && padded_row == out_row {
        let n = host.region.len() * host.sample_bytes;
        view.slice(..n).copy_from_slice(&host.bytes[..n]);
        return;
    }
    scratch.resize(out_row, 0);
    let mut dst = 0;
    for p in 0..host.region.size[0] {
        for r in 0..host.region.size[1] {
            let src = host.row(p, r);
            if format.converts() {
                format.convert_row(src, scratch, samples);
                view.slice(dst..dst + out_row)
                    .copy_from_slice(&scratch[..out_row]);
            } else {
                view.slice(dst..dst + out_row).copy_from_slice(src);
            }
            dst += padded_row;
        }
    }
}

fn no_device_upload(source: &SharedSource) -> RenderError {
    RenderError::UnsupportedSource {
        visual: "TextureProxy",
        source_label: source.label(),
        reason: "its data is in device memory and this renderer has no device upload path \
                 (create it through sluice-interop); a copy through host memory is never made silently"
            .into(),
    }
}

/// Device-resident sources need a device upload path that accepts them, and a layout the GPU
/// holds as it is (conversion happens in host staging only).
fn check_residency(
    source: &SharedSource,
    layout: &Layout,
    device_upload: Option<&dyn DeviceUpload>,
) -> Result<(), RenderError> {
    let residency = source.residency();
    if matches!(residency, Residency::Host) {
        return Ok(());
    }
    let upload = device_upload.ok_or_else(|| no_device_upload(source))?;
    let unsupported = |reason: String| RenderError::UnsupportedSource {
        visual: "TextureProxy",
        source_label: source.label(),
        reason,
    };
    if UploadFormat::for_layout(layout).converts() {
        return Err(unsupported(format!(
            "device-resident {} data with {} channels would need conversion; provide 1, 2 or 4 channels of a type other than f64",
            layout.element(),
            layout.channels()
        )));
    }
    upload.check(&residency, layout).map_err(unsupported)
}

fn texture_bytes(layout: &Layout, format: &UploadFormat) -> u64 {
    (layout.shape().len() * format.sample_bytes()) as u64
}

fn create_texture(
    device: &wgpu::Device,
    source: &SharedSource,
    layout: &Layout,
) -> Result<(wgpu::Texture, wgpu::TextureView, UploadFormat, SampleKind), RenderError> {
    let shape = layout.shape();
    let limits = device.limits();
    let (dimension, limit, kind) = if shape.ndim() == 3 {
        (
            wgpu::TextureDimension::D3,
            limits.max_texture_dimension_3d,
            "3-D",
        )
    } else {
        (
            wgpu::TextureDimension::D2,
            limits.max_texture_dimension_2d,
            "2-D",
        )
    };
    if shape.padded().iter().any(|&d| d > limit as usize) {
        return Err(RenderError::TextureTooLarge {
            source_label: source.label(),
            shape: shape.dims().to_vec(),
            kind,
            limit,
        });
    }
    let format = UploadFormat::for_layout(layout);
    let (texture_format, sample_kind) = texture_format(&format);
    let texture = device.create_texture(&wgpu::TextureDescriptor {
        label: Some("sluice source texture"),
        size: wgpu::Extent3d {
            width: shape.width() as u32,
            height: shape.height() as u32,
            depth_or_array_layers: shape.depth() as u32,
        },
        mip_level_count: 1,
        sample_count: 1,
        dimension,
        format: texture_format,
        usage: wgpu::TextureUsages::TEXTURE_BINDING | wgpu::TextureUsages::COPY_DST,
        view_formats: &[],
    });
    let view = texture.create_view(&wgpu::TextureViewDescriptor::default());
    Ok((texture, view, format, sample_kind))
}
