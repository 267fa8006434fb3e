//! `TextureProxy`: one GPU texture per (source, renderer), kept up to date with the source.
//!
//! The proxy is the one place that decides uploads. Each frame it asks its source what changed
//! since the version it holds, plans copies by chunk (few, merged; one copy of the dirty
//! chunks' bounding box when most of them changed), stages the bytes through the renderer's staging ring (converting formats on
//! the way) and records `copy_buffer_to_texture` commands. A per-frame byte budget spreads a
//! large change over several frames.

use std::collections::VecDeque;
use std::sync::atomic::{AtomicU64, Ordering};

use sluice_core::{
    ConsumerId, HostView, Layout, LendOutcome, ReadRequest, ReadStatus, Region, Residency,
    SharedSource, UploadFormat,
};

use sluice_core::pieces::{cut_pieces, damage_of, plan_bricks, split_for_budget, BrickGrid, Piece};

use crate::bricking::{Bricking, TextureLimits, BRICK_SLOTS};
use crate::counters::Counters;
use crate::device_upload::{
    DeviceCopy, DeviceCopyOutcome, DeviceTexture, DeviceTextureRequest, DeviceUpload,
};
use crate::error::RenderError;
use crate::format::{texture_format, SampleKind};
use crate::host_grid::{GridCells, HostGrid};
use crate::staging::{Staged, StagingRing, STAGING_ALIGNMENT};
use crate::unpack::{self, Unpacker};
use crate::upload_state::UploadState;
use crate::volume_pairs::ZPairsSet;

/// Copied regions a proxy remembers for partial redraws.
const DAMAGE_LOG: usize = 256;

static NEXT_SERIAL: AtomicU64 = AtomicU64::new(1);

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
    /// Buffer-to-texture copies by compute, for device-resident sources.
    pub unpack: &'a Unpacker,
    /// The device is a CPU: whole host uploads of volumes also compute the volume grid
    /// (`host_grid`), and f32 buffers are scanned for NaN as they are staged
    /// (`BufferProxy::nan_free`). The bytes pass through the CPU's caches there anyway.
    pub host_summaries: bool,
    /// The z-paired copies of 8-bit volumes (CPU devices): a whole host upload of a texture
    /// that has one also writes it from the host.
    pub volume_pairs: &'a ZPairsSet,
}

impl UploadContext<'_> {
    /// Submits the copies recorded so far when staging `incoming` more bytes would hold too
    /// much staging in one submission (see [`StagingRing::should_flush`]); the frame goes on
    /// in a new encoder. Call only between copies whose commands are all recorded.
    pub fn make_room(&mut self, incoming: u64) {
        if !self.staging.should_flush(incoming) {
            return;
        }
        let next = self
            .device
            .create_command_encoder(&wgpu::CommandEncoderDescriptor {
                label: Some("sluice frame"),
            });
        let recorded = std::mem::replace(self.encoder, next);
        self.staging.unmap_active();
        let submitted = self.queue.submit([recorded.finish()]);
        self.staging.recall();
        // At most two parts in flight: wait for the one before this (its chunks come back
        // for the next part). A failed wait only means the next part makes new chunks.
        if let Some(previous) = self.staging.swap_flushed(submitted) {
            let _ = self.device.poll(wgpu::PollType::Wait {
                submission_index: Some(previous),
                timeout: None,
            });
        }
    }
}

pub(crate) struct TextureProxy {
    source: SharedSource,
    consumer: ConsumerId,
    layout: Layout,
    format: UploadFormat,
    sample_kind: SampleKind,
    /// One brick (texture) for most sources; volumes over the device's 3-D limit are split
    /// into up to [`BRICK_SLOTS`] bricks of equal size (the last on each axis may be
    /// smaller).
    bricks: Vec<Brick>,
    bricking: Bricking,
    limits: TextureLimits,
    /// Bumped whenever the texture is recreated, so bind groups know to follow.
    generation: u64,
    /// Unique among all proxies ever made (keys are addresses, which can be reused).
    serial: u64,
    /// Moves on every frame that records copies into the textures.
    content: u64,
    /// Regions copied, with the `content` value they produced; the oldest are dropped past
    /// `DAMAGE_LOG` entries.
    damage: VecDeque<(u64, Region)>,
    /// Changes up to this `content` value may be missing from `damage`.
    damage_floor: u64,
    state: UploadState,
    /// The volume grid computed while the textures' whole content was staged
    /// (`host_grid`), until the grids take it.
    host_grid: Option<HostGridCells>,
    /// The `content` whose z-paired copy was written from the host while it was staged
    /// (`volume_pairs`), until the pairs take it.
    host_pairs: Option<u64>,
    /// Visuals using this proxy.
    pub users: usize,
}

/// A volume grid computed on the host, for the textures' `content` value.
pub(crate) struct HostGridCells {
    pub content: u64,
    pub grid: GridCells,
}

impl TextureProxy {
    /// Creates the texture(s) for `source`; uploads nothing yet.
    pub fn new(
        device: &wgpu::Device,
        source: SharedSource,
        counters: &mut Counters,
        device_upload: Option<&dyn DeviceUpload>,
        limits: TextureLimits,
    ) -> Result<Self, RenderError> {
        let layout = source.layout();
        check_residency(&source, &layout, device_upload)?;
        let (bricks, bricking, format, sample_kind) =
            create_bricks(device, &source, &layout, limits)?;
        let consumer = ConsumerId::next();
        source.attach(consumer);
        counters.textures_alive += bricks.len() as u64;
        counters.textures_created += bricks.len() as u64;
        counters.resident_bytes += texture_bytes(&layout, &format);
        Ok(TextureProxy {
            source,
            consumer,
            layout,
            format,
            sample_kind,
            bricks,
            bricking,
            limits,
            generation: 0,
            serial: NEXT_SERIAL.fetch_add(1, Ordering::Relaxed),
            content: 0,
            damage: VecDeque::new(),
            damage_floor: 0,
            state: UploadState::new(),
            host_grid: None,
            host_pairs: None,
            users: 0,
        })
    }

    /// The view bound at brick slot `slot` (`x + cx (y + cy z)` for brick coordinates x, y, z
    /// in a grid of cx x cy x cz); slots without a brick get brick 0's view, which the shaders
    /// never read through them.
    pub fn brick_view(&self, slot: usize) -> &wgpu::TextureView {
        // Slot `x + cx (y + cy z)` holds brick (x, y, z), the order `create_bricks` makes
        // them in; slots beyond the bricks repeat the first (never read).
        let brick = self.bricks.get(slot).unwrap_or(&self.bricks[0]);
        brick.provided.as_ref().map_or(&brick.view, |p| &p.view)
    }

    /// The one texture holding the whole source, where it can be copied from: one brick, not
    /// replaced by a texture the device upload path provided. The volume grid reads it in
    /// slabs.
    pub fn copy_source(&self) -> Option<&wgpu::Texture> {
        match self.bricks.as_slice() {
            [brick]
                if brick.provided.is_none()
                    && brick
                        .texture
                        .usage()
                        .contains(wgpu::TextureUsages::COPY_SRC) =>
            {
                Some(&brick.texture)
            }
            _ => None,
        }
    }

    /// Brick size and count per axis, in samples, `[x, y, z]` order as the shaders take them.
    pub fn bricking(&self) -> Bricking {
        self.bricking
    }

    pub fn generation(&self) -> u64 {
        self.generation
    }

    /// Unique among all proxies ever made.
    pub fn serial(&self) -> u64 {
        self.serial
    }

    /// Moves on every frame that records copies into the textures.
    pub fn content(&self) -> u64 {
        self.content
    }

    /// Takes the volume grid computed on the host while the textures' content was staged, if
    /// any (for the current `content` or an older one).
    pub fn take_host_grid(&mut self) -> Option<HostGridCells> {
        self.host_grid.take()
    }

    /// The frame's commands were submitted: the source hears of what its copies brought.
    pub fn submitted(&mut self) {
        self.state.submitted(self.source.as_ref(), self.consumer);
    }

    /// The last frame was dropped unsubmitted (it panicked) or its commands were rejected.
    /// If it recorded copies into the textures, they are made again (what changed since the
    /// upload before it, see `UploadState::lost`). Either way the content counts as
    /// changed, so what is derived from the textures on the device (volume grids, z-paired
    /// copies, built by commands that frame may have recorded and lost) is made again from
    /// what they hold, and partial redraws do not trust the damage log across it.
    pub fn forget_lost_frame(&mut self) {
        if self.state.lost() {
            self.host_grid = None;
            self.host_pairs = None;
        }
        self.content += 1;
        self.damage.clear();
        self.damage_floor = self.content;
    }

    /// Takes the `content` value whose z-paired copy the last upload wrote from the host, if
    /// any.
    pub fn take_host_pairs(&mut self) -> Option<u64> {
        self.host_pairs.take()
    }

    /// The regions copied since the textures held `content` value `since`, or `None` when
    /// that is no longer known (the log dropped them, or the textures were recreated).
    pub fn damage_since(&self, since: u64) -> Option<Vec<Region>> {
        if since < self.damage_floor || since > self.content {
            return None;
        }
        Some(
            self.damage
                .iter()
                .filter(|(v, _)| *v > since)
                .map(|(_, r)| *r)
                .collect(),
        )
    }

    /// Records that `regions` were copied (or may have been) in this frame.
    fn log_damage(&mut self, regions: &[Region]) {
        if regions.is_empty() {
            return;
        }
        self.content += 1;
        for region in regions {
            self.damage.push_back((self.content, *region));
        }
        while self.damage.len() > DAMAGE_LOG {
            let (v, _) = self.damage.pop_front().expect("longer than the limit");
            self.damage_floor = self.damage_floor.max(v);
        }
    }

    pub fn sample_kind(&self) -> SampleKind {
        self.sample_kind
    }

    pub fn layout(&self) -> &Layout {
        &self.layout
    }

    /// Releases the texture's share of the counters; the texture itself drops with `self`.
    pub fn retire(self, counters: &mut Counters) {
        counters.textures_alive -= self.bricks.len() as u64;
        counters.resident_bytes -= texture_bytes(&self.layout, &self.format);
        self.source.detach(self.consumer);
        for brick in &self.bricks {
            brick.texture.destroy();
        }
    }

    /// Brings the texture up to date with the source as far as the budget allows. Returns
    /// whether uploads remain for a later frame.
    ///
    /// Host data for all of the frame's copies is lent in one `lend_many` call, so the frame
    /// shows one version of the source even when a write spans several copies.
    pub fn upload(&mut self, ctx: &mut UploadContext<'_>) -> Result<bool, RenderError> {
        let pending = self.upload_changes(ctx)?;
        Ok(self.keep_in_place(ctx)? || pending)
    }

    /// A texture sampled in place from the source's host pages is counted as drawn by this
    /// frame, so that the pages are not handed back before it is done. If they were handed
    /// back since the frame took the source's changes (another thread replaced the data), the
    /// texture must not be drawn: what the source shows now is copied into the proxy's own.
    /// Returns whether that copy was deferred to a later frame.
    fn keep_in_place(&mut self, ctx: &mut UploadContext<'_>) -> Result<bool, RenderError> {
        let in_place = self.bricks[0]
            .provided
            .as_ref()
            .and_then(|p| p.in_place.clone());
        let Some(in_place) = in_place else {
            return Ok(false);
        };
        if in_place.begin_frame() {
            return Ok(false);
        }
        ctx.counters.in_place_fallbacks += 1;
        let whole = self.layout.shape().full_region();
        // The regions taken for this frame stand for the old data: the source's version moved
        // with the hand-over, so the next frame takes all of it again.
        let copied = self.copy_device(ctx, std::slice::from_ref(&whole), false);
        self.log_damage(std::slice::from_ref(&whole));
        match copied {
            Ok(true) => Ok(false),
            // The proxy's own texture was made again but not filled: retry it all.
            Ok(false) => {
                self.state.defer([whole]);
                Ok(true)
            }
            Err(e) => {
                self.state.defer([whole]);
                Err(e)
            }
        }
    }

    fn upload_changes(&mut self, ctx: &mut UploadContext<'_>) -> Result<bool, RenderError> {
        let Some(begun) = self.state.begin(self.source.as_ref(), &self.layout) else {
            return Ok(false);
        };
        if let Some(layout) = begun.new_layout {
            // A device-resident source's layout is checked once, here and when the proxy is
            // made; its copies then only check the memory of each version.
            let checked = check_residency(&self.source, &layout, ctx.device_upload);
            if let Err(e) = checked.and_then(|()| self.recreate(ctx.device, layout, ctx.counters)) {
                // Keep failing clearly until the source changes again, rather than uploading
                // the new data into the old texture.
                self.state.reset();
                return Err(e);
            }
        }
        // What really changed (copies are whole chunks): a partial redraw needs only this.
        let changed: Vec<Region> = self.state.pending().to_vec();
        // Take planned copies while the budget allows (bytes other proxies uploaded this frame
        // count too).
        let sample = self.format.sample_bytes() as u64;
        let mut planned = ctx.counters.bytes_uploaded - ctx.frame_start_bytes;
        let mut batch = Vec::new();
        // GPU-side copies of device-resident data are cheap and must not be split over frames:
        // a later frame could copy the rest from newer data, showing a torn version.
        let host = matches!(self.source.residency(), Residency::Host);
        let budget = if host { ctx.budget } else { None };
        let mut copies = self
            .state
            .plan(self.source.readable(), &self.layout)
            .into_iter();
        while let Some(region) = copies.next() {
            let (head, tail) = match budget {
                Some(budget) => split_for_budget(
                    region,
                    self.layout.chunks().chunk_size(),
                    self.format.sample_bytes(),
                    budget.saturating_sub(planned),
                    planned == 0,
                ),
                None => (Some(region), None),
            };
            let Some(head) = head else {
                self.state.defer(std::iter::once(region).chain(copies));
                break;
            };
            planned += head.len() as u64 * sample;
            batch.push(head);
            if let Some(tail) = tail {
                self.state.defer(std::iter::once(tail).chain(copies));
                break;
            }
        }
        let mut grid = None;
        let copied = if host {
            self.copy_host(ctx, &batch, &mut grid)
        } else {
            let copied = self.copy_device(ctx, &batch, true);
            if matches!(copied, Ok(true))
                && matches!(self.source.residency(), Residency::HostImported(_))
            {
                grid = self.grid_of_imported(ctx, &batch);
            }
            copied
        };
        let paired = matches!(copied, Ok(true))
            && self.pairs_from_host(ctx, &batch)
            // The pairs were lent apart from the copies: a write between the two lends (the
            // version moved since the frame began) makes them another version than the
            // texture's, so they are built from the texture instead.
            && self.source.version() == begun.version;
        // Copies recorded before a failure or a not-ready answer stand: count them all.
        let before = self.content;
        self.log_damage(&damage_of(&batch, &changed));
        if self.content != before {
            // A grid of older content is of no use any more.
            self.host_grid = match (&copied, grid) {
                (Ok(true), Some(grid)) => Some(HostGridCells {
                    content: self.content,
                    grid,
                }),
                _ => None,
            };
            self.host_pairs = paired.then_some(self.content);
        }
        match copied {
            Ok(true) => {}
            // Not ready, or failed: retry these copies later (a failure is reported now).
            Ok(false) => self.state.defer(batch),
            Err(e) => {
                self.state.defer(batch);
                return Err(e);
            }
        }
        Ok(self.state.finish(begun.version))
    }

    fn recreate(
        &mut self,
        device: &wgpu::Device,
        layout: Layout,
        counters: &mut Counters,
    ) -> Result<(), RenderError> {
        let (bricks, bricking, format, sample_kind) =
            create_bricks(device, &self.source, &layout, self.limits)?;
        counters.resident_bytes -= texture_bytes(&self.layout, &self.format);
        counters.resident_bytes += texture_bytes(&layout, &format);
        counters.textures_created += bricks.len() as u64;
        counters.textures_alive -= self.bricks.len() as u64;
        counters.textures_alive += bricks.len() as u64;
        for brick in &self.bricks {
            brick.texture.destroy();
        }
        self.bricks = bricks;
        self.bricking = bricking;
        self.format = format;
        self.sample_kind = sample_kind;
        self.layout = layout;
        self.generation += 1;
        self.content += 1;
        self.damage.clear();
        self.damage_floor = self.content;
        Ok(())
    }

    /// The regions of `regions` that lie in each brick, cut into pieces that fit one staging
    /// buffer (see [`cut_pieces`]).
    fn pieces(&self, regions: &[Region], max_stage: u64) -> Vec<Piece> {
        let bricks: Vec<Region> = self.bricks.iter().map(|b| b.region).collect();
        cut_pieces(
            regions,
            &bricks,
            self.format.sample_bytes(),
            STAGING_ALIGNMENT,
            max_stage,
        )
    }

    /// Stages host data for `regions` and records the copies. The source lends every piece in
    /// one call (one version for all); sources that cannot lend are read piece by piece.
    /// Returns false, recording nothing, if the source had data not ready. Sets `grid` to
    /// the volume grid (cells per axis, cells) where it is computed on the way
    /// ([`TextureProxy::host_grid_for`]).
    fn copy_host(
        &mut self,
        ctx: &mut UploadContext<'_>,
        regions: &[Region],
        grid_out: &mut Option<GridCells>,
    ) -> Result<bool, RenderError> {
        let pieces = self.pieces(regions, ctx.staging.max_stage());
        if pieces.is_empty() {
            return Ok(true);
        }
        let mut grid = self.host_grid_for(ctx, regions);
        ctx.make_room(pieces.iter().map(staged_size).sum());
        let format = self.format;
        let source = &self.source;
        let source_err = |error| RenderError::Source {
            source_label: source.label(),
            error,
        };
        let requests: Vec<ReadRequest<'_>> = pieces
            .iter()
            .map(|p| ReadRequest::new(p.region, ctx.waker))
            .collect();
        let mut scratch = std::mem::take(ctx.scratch);
        let mut staged = Vec::with_capacity(pieces.len());
        let (staging, device) = (&mut *ctx.staging, ctx.device);
        let outcome = source.lend_many(&requests, &mut |i, host| {
            staged.push(stage_piece(
                &pieces[i],
                staging,
                device,
                &host,
                &format,
                &mut scratch,
                grid.as_mut(),
            ));
        });
        let outcome = match outcome {
            Ok(o) => o,
            Err(e) => {
                *ctx.scratch = scratch;
                return Err(source_err(e));
            }
        };
        if outcome == LendOutcome::NotLendable {
            // Read each piece packed, then stage it. A source may have lent some pieces before
            // refusing one: those are staged again from the reads, in order.
            staged.clear();
            grid = self.host_grid_for(ctx, regions);
            let sample_bytes = self.layout.sample_bytes();
            for (piece, request) in pieces.iter().zip(&requests) {
                let mut packed = vec![0u8; piece.region.len() * sample_bytes];
                let status = source.read(request, &mut packed);
                match status {
                    Ok(ReadStatus::Ready) => {}
                    Ok(ReadStatus::Pending) => {
                        *ctx.scratch = scratch;
                        return Ok(false);
                    }
                    Err(e) => {
                        *ctx.scratch = scratch;
                        return Err(source_err(e));
                    }
                }
                let row_pitch = piece.region.size[2] * sample_bytes;
                let host = HostView {
                    bytes: &packed,
                    region: piece.region,
                    sample_bytes,
                    row_pitch,
                    plane_pitch: row_pitch * piece.region.size[1],
                };
                staged.push(stage_piece(
                    piece,
                    ctx.staging,
                    ctx.device,
                    &host,
                    &format,
                    &mut scratch,
                    grid.as_mut(),
                ));
            }
        }
        *ctx.scratch = scratch;
        for (piece, staged) in pieces.iter().zip(staged) {
            let brick = &self.bricks[piece.brick];
            let o = piece.region.relative_to(&brick.region).origin;
            ctx.encoder.copy_buffer_to_texture(
                wgpu::TexelCopyBufferInfo {
                    buffer: &staged.buffer,
                    layout: wgpu::TexelCopyBufferLayout {
                        offset: staged.offset,
                        bytes_per_row: Some(piece.padded_row as u32),
                        rows_per_image: Some(piece.region.size[1] as u32),
                    },
                },
                wgpu::TexelCopyTextureInfo {
                    texture: &brick.texture,
                    mip_level: 0,
                    origin: wgpu::Origin3d {
                        x: o[2] as u32,
                        y: o[1] as u32,
                        z: o[0] as u32,
                    },
                    aspect: wgpu::TextureAspect::All,
                },
                wgpu::Extent3d {
                    width: piece.region.size[2] as u32,
                    height: piece.region.size[1] as u32,
                    depth_or_array_layers: piece.region.size[0] as u32,
                },
            );
            ctx.counters.bytes_uploaded += (piece.region.len() * format.sample_bytes()) as u64;
            ctx.counters.copies_issued += 1;
        }
        *grid_out = grid.and_then(HostGrid::finish);
        Ok(true)
    }

    /// The grid of host pages the device imported (`Residency::HostImported`), which the GPU
    /// copied from without staging: computed from the pages the source lends, where
    /// `host_grid_for` allows and the texture holds the bytes as they are.
    fn grid_of_imported(&self, ctx: &UploadContext<'_>, regions: &[Region]) -> Option<GridCells> {
        let mut grid = self.host_grid_for(ctx, regions)?;
        if self.format.converts() {
            return None;
        }
        let request = ReadRequest::new(regions[0], ctx.waker);
        let lent = self.source.lend(&request, &mut |view| {
            grid.begin_piece(view.region);
            for p in 0..view.region.size[0] {
                for r in 0..view.region.size[1] {
                    grid.row(p, r, view.row(p, r));
                }
            }
            grid.end_piece();
        });
        match lent {
            Ok(LendOutcome::Lent) => grid.finish(),
            _ => None,
        }
    }

    /// Writes the z-paired copy of the texture (`volume_pairs`) from the host after a whole
    /// upload of host data into it, where the copy exists (CPU devices, 8-bit data in one
    /// texture): lends the source's data once more (the pages just staged or imported, still
    /// in the CPU's caches for small volumes) and stages each row interleaved with the one
    /// under it in the next plane. Returns whether it wrote all of it; otherwise the pairs
    /// are built on the device before the next march. (The caller also checks that no write
    /// landed between this lend and the copies'.) A pass over the bytes on the host costs
    /// a fraction of the build on a CPU device (docs/measurements.md).
    fn pairs_from_host(&self, ctx: &mut UploadContext<'_>, regions: &[Region]) -> bool {
        // A copy for the current texture: one copyable `R8Unorm` 3-D texture of its size.
        let Some(target) = ctx.volume_pairs.target(self) else {
            return false;
        };
        let whole = self.layout.shape().full_region();
        if regions != [whole]
            || self.format.converts()
            || !matches!(
                self.source.residency(),
                Residency::Host | Residency::HostImported(_)
            )
        {
            return false;
        }
        let size = target.size();
        let (w, h, d) = (
            size.width as usize,
            size.height as usize,
            size.depth_or_array_layers,
        );
        let bytes_per_row = (2 * w).next_multiple_of(wgpu::COPY_BYTES_PER_ROW_ALIGNMENT as usize);
        let layer = (bytes_per_row * h) as u64;
        let max_stage = ctx.staging.max_stage();
        if layer > max_stage {
            return false;
        }
        let per_batch = (max_stage / layer).min(u64::from(d)) as u32;
        ctx.make_room(layer * u64::from(d));
        let (staging, device, encoder) = (&mut *ctx.staging, ctx.device, &mut *ctx.encoder);
        let request = ReadRequest::new(whole, ctx.waker);
        let lent = self.source.lend(&request, &mut |view| {
            let mut z = 0;
            while z < d {
                let n = per_batch.min(d - z);
                let planes = PairedPlanes {
                    view: &view,
                    first: z as usize,
                    depth: d as usize,
                    width: w,
                    height: h,
                    bytes_per_row,
                };
                let staged = staging.stage(device, layer * u64::from(n), |out| {
                    planes.write(out.slice(..));
                });
                encoder.copy_buffer_to_texture(
                    wgpu::TexelCopyBufferInfo {
                        buffer: &staged.buffer,
                        layout: wgpu::TexelCopyBufferLayout {
                            offset: staged.offset,
                            bytes_per_row: Some(bytes_per_row as u32),
                            rows_per_image: Some(h as u32),
                        },
                    },
                    wgpu::TexelCopyTextureInfo {
                        texture: target,
                        mip_level: 0,
                        origin: wgpu::Origin3d { x: 0, y: 0, z },
                        aspect: wgpu::TextureAspect::All,
                    },
                    wgpu::Extent3d {
                        width: w as u32,
                        height: h as u32,
                        depth_or_array_layers: n,
                    },
                );
                z += n;
            }
        });
        let done = matches!(lent, Ok(LendOutcome::Lent));
        if done {
            ctx.counters.derived_bytes_uploaded += (2 * w * h) as u64 * u64::from(d);
            ctx.counters.copies_issued += u64::from(d.div_ceil(per_batch));
        }
        done
    }

    /// The grid to compute while `regions` are staged (or, for imported host pages, read
    /// after the GPU copy is recorded): on CPU devices, where they are the whole of one 3-D
    /// texture of a format `HostGrid` reads (the volume grid is then written, not built by
    /// the GPU: see `host_grid`).
    fn host_grid_for(&self, ctx: &UploadContext<'_>, regions: &[Region]) -> Option<HostGrid> {
        let [brick] = self.bricks.as_slice() else {
            return None;
        };
        let texture = &brick.texture;
        let whole = regions == [self.layout.shape().full_region()];
        if !ctx.host_summaries || !whole || texture.dimension() != wgpu::TextureDimension::D3 {
            return None;
        }
        let size = texture.size();
        HostGrid::new(
            texture.format(),
            [size.width, size.height, size.depth_or_array_layers],
        )
    }

    /// Device-resident data: one GPU-side copy per region and brick, by the renderer's device
    /// upload path, or (where `provided` allows) a texture the path provides for the whole.
    /// Returns false if the data was not ready (copies recorded before that stand; the
    /// regions are retried).
    fn copy_device(
        &mut self,
        ctx: &mut UploadContext<'_>,
        regions: &[Region],
        provided: bool,
    ) -> Result<bool, RenderError> {
        let residency = self.source.residency();
        let upload = ctx
            .device_upload
            .ok_or_else(|| no_device_upload(&self.source))?;
        ctx.staging.note_device_copy();
        let whole = self.layout.shape().full_region();
        if provided && self.bricks.len() == 1 && regions == [whole] {
            let texture = &self.bricks[0].texture;
            let provided = upload.provide_texture(DeviceTextureRequest {
                device: ctx.device,
                queue: ctx.queue,
                source: self.source.as_ref(),
                residency: &residency,
                layout: &self.layout,
                format: texture.format(),
                size: texture.size(),
                dimension: texture.dimension(),
            })?;
            if let Some(provided) = provided {
                let in_place = provided.in_place.is_some();
                self.bind_provided(provided)?;
                ctx.counters.textures_provided += 1;
                if in_place {
                    // Sampled where the data lies: nothing is copied.
                    ctx.counters.textures_in_place += 1;
                } else {
                    let bytes = (whole.len() * self.format.sample_bytes()) as u64;
                    ctx.counters.device_bytes_copied += bytes;
                    ctx.counters.copies_issued += 1;
                }
                return Ok(true);
            }
        }
        // Copies go into the proxy's own textures: if a provided one was bound, its own were
        // given up, and are made again to take all of the source, not only what changed.
        let mut regions = regions;
        if self.bricks.iter().any(|b| b.provided.is_some()) {
            self.recreate(ctx.device, self.layout.clone(), ctx.counters)?;
            regions = std::slice::from_ref(&whole);
        }
        for region in regions {
            for brick in &self.bricks {
                let Some(part) = region.intersection(&brick.region) else {
                    continue;
                };
                let o = part.relative_to(&brick.region).origin;
                let outcome = upload.copy_to_texture(DeviceCopy {
                    device: ctx.device,
                    queue: ctx.queue,
                    encoder: ctx.encoder,
                    source: self.source.as_ref(),
                    residency: &residency,
                    layout: &self.layout,
                    region: part,
                    texture: &brick.texture,
                    texture_origin: [o[2] as u32, o[1] as u32, o[0] as u32],
                    unpack: ctx.unpack,
                })?;
                if outcome == DeviceCopyOutcome::NotReady {
                    return Ok(false);
                }
                ctx.counters.device_bytes_copied +=
                    (part.len() * self.format.sample_bytes()) as u64;
                ctx.counters.copies_issued += 1;
            }
        }
        Ok(true)
    }
}

impl TextureProxy {
    /// Binds a texture the device upload path filled in place of brick 0 (the only one),
    /// releasing the one bound before. Refuses a texture the pipelines could not read as
    /// they read the proxy's own.
    fn bind_provided(&mut self, provided: DeviceTexture) -> Result<(), RenderError> {
        let own = &self.bricks[0].texture;
        let texture = &provided.texture;
        let matches = texture.format() == own.format()
            && texture.size() == own.size()
            && texture.dimension() == own.dimension()
            && texture
                .usage()
                .contains(wgpu::TextureUsages::TEXTURE_BINDING);
        if !matches {
            return Err(RenderError::UnsupportedSource {
                visual: "TextureProxy",
                source_label: self.source.label(),
                reason: format!(
                    "the device upload path provided a {:?} {:?} texture of {:?} with usage {:?}, where a {:?} {:?} texture of {:?} that can be bound is needed",
                    texture.dimension(),
                    texture.format(),
                    texture.size(),
                    texture.usage(),
                    own.dimension(),
                    own.format(),
                    own.size()
                ),
            });
        }
        // The proxy's own texture is not drawn while a provided one is bound: its memory goes
        // back now (a volume's can be hundreds of MiB), and it is made again if copies into
        // it resume. Frames already submitted keep it alive until they are done.
        if self.bricks[0].provided.is_none() {
            self.bricks[0].texture.destroy();
        }
        self.bricks[0].provided = Some(provided);
        self.generation += 1;
        Ok(())
    }
}

/// Bytes of the staged pairs each thread of [`PairedPlanes::write`] takes at a time: 128
/// pairs, a divisor of every padded row (`COPY_BYTES_PER_ROW_ALIGNMENT`).
const PAIR_PIECE: usize = 256;

/// Planes `first..` of an 8-bit volume (`view`, `depth` planes of `height` rows of `width`
/// voxels) written as the z-paired copy's layers (`volume_pairs`) into staging: each row of
/// pairs `bytes_per_row` apart, layer after layer.
struct PairedPlanes<'v, 'a> {
    view: &'v HostView<'a>,
    first: usize,
    depth: usize,
    width: usize,
    height: usize,
    bytes_per_row: usize,
}

impl PairedPlanes<'_, '_> {
    /// Writes the layers into `out` (a whole number of padded rows, so of
    /// [`PAIR_PIECE`]-byte pieces), on as many threads as the machine has (up to four): a
    /// pass over hundreds of megabytes on the host is the larger part of a whole update of a
    /// large volume on a CPU device (docs/measurements.md). The padding after each row's
    /// pairs is left unwritten (the copy into the texture does not read it).
    fn write(&self, out: wgpu::WriteOnly<'_, [u8]>) {
        let (pieces, rest) = out.into_chunks::<PAIR_PIECE>();
        debug_assert_eq!(rest.len(), 0, "whole padded rows");
        let pieces: Vec<wgpu::WriteOnly<'_, [u8; PAIR_PIECE]>> = pieces.into_iter().collect();
        let threads = std::thread::available_parallelism()
            .map_or(1, |n| n.get())
            .clamp(1, 4);
        let per_thread = pieces.len().div_ceil(threads).max(1);
        let mut parts = Vec::with_capacity(threads);
        let mut pieces = pieces;
        while pieces.len() > per_thread {
            let tail = pieces.split_off(pieces.len() - per_thread);
            parts.push((pieces.len(), tail));
        }
        std::thread::scope(|scope| {
            for (start, part) in parts {
                scope.spawn(move || self.write_pieces(start, part));
            }
            self.write_pieces(0, pieces);
        });
    }

    /// Writes `pieces`, the pieces from number `start` on.
    fn write_pieces(&self, start: usize, pieces: Vec<wgpu::WriteOnly<'_, [u8; PAIR_PIECE]>>) {
        let mut pairs = [0u16; PAIR_PIECE / 2];
        for (i, piece) in pieces.into_iter().enumerate() {
            let at = (start + i) * PAIR_PIECE;
            let (row, column) = (at / self.bytes_per_row, at % self.bytes_per_row);
            let x = column / 2;
            if x >= self.width {
                continue;
            }
            let n = (self.width - x).min(PAIR_PIECE / 2);
            let (layer, r) = (row / self.height, row % self.height);
            let p = self.first + layer;
            let next = (p + 1).min(self.depth - 1);
            interleave(
                &mut pairs[..n],
                &self.view.row(p, r)[x..x + n],
                &self.view.row(next, r)[x..x + n],
            );
            wgpu::WriteOnly::<'_, [u8]>::from(piece)
                .slice(..2 * n)
                .copy_from_slice(bytemuck::cast_slice(&pairs[..n]));
        }
    }
}

/// Pairs a row of voxels `a` with the row `b` under it in the next plane: `out[i]` holds
/// `a[i]` in its low byte and `b[i]` in its high one, that is the bytes `a[i], b[i]` in
/// little-endian order (a loop the compiler turns into wide unpack instructions).
fn interleave(out: &mut [u16], a: &[u8], b: &[u8]) {
    for ((o, &x), &y) in out.iter_mut().zip(a).zip(b) {
        *o = (u16::from(x) | (u16::from(y) << 8)).to_le();
    }
}

/// One staged copy: a region inside one brick, rows `padded_row` bytes apart in staging.
/// Stages `piece`'s samples from `host`, rows `padded_row` apart (converted to `format`
/// through `scratch`).
fn stage_piece(
    piece: &Piece,
    staging: &mut StagingRing,
    device: &wgpu::Device,
    host: &HostView<'_>,
    format: &UploadFormat,
    scratch: &mut Vec<u8>,
    grid: Option<&mut HostGrid>,
) -> Staged {
    staging.stage(device, staged_size(piece), |view| {
        write_rows(view, host, format, piece.padded_row as usize, scratch, grid)
    })
}

/// Staging bytes of `piece`: its rows, `padded_row` apart.
fn staged_size(piece: &Piece) -> u64 {
    piece.padded_row * (piece.region.size[0] * piece.region.size[1]) as u64
}

/// Writes the rows of `host` into a staging view, `padded_row` bytes apart, converting the
/// format where needed (through `scratch`, one row long); each row as the texture takes it
/// also widens `grid`.
fn write_rows(
    view: &mut wgpu::BufferViewMut,
    host: &HostView<'_>,
    format: &UploadFormat,
    padded_row: usize,
    scratch: &mut Vec<u8>,
    mut grid: Option<&mut HostGrid>,
) {
    let samples = host.region.size[2];
    let out_row = samples * format.sample_bytes();
    if let Some(grid) = grid.as_deref_mut() {
        grid.begin_piece(host.region);
    }
    if !format.converts() && host.is_contiguous() && padded_row == out_row {
        let n = host.region.len() * host.sample_bytes;
        match grid {
            // Row by row, so that each row is in the cache when the grid reads it.
            Some(grid) => {
                for (i, row) in host.bytes[..n].chunks_exact(out_row).enumerate() {
                    view.slice(i * out_row..(i + 1) * out_row)
                        .copy_from_slice(row);
                    grid.row(i / host.region.size[1], i % host.region.size[1], row);
                }
                grid.end_piece();
            }
            None => view.slice(..n).copy_from_slice(&host.bytes[..n]),
        }
        return;
    }
    scratch.resize(out_row, 0);
    let mut dst = 0;
    for p in 0..host.region.size[0] {
        for r in 0..host.region.size[1] {
            let src = host.row(p, r);
            let row = if format.converts() {
                format.convert_row(src, scratch, samples);
                &scratch[..out_row]
            } else {
                src
            };
            view.slice(dst..dst + out_row).copy_from_slice(row);
            if let Some(grid) = grid.as_deref_mut() {
                grid.row(p, r, row);
            }
            dst += padded_row;
        }
    }
    if let Some(grid) = grid {
        grid.end_piece();
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
    upload
        .check(&residency, layout)
        .map_err(|error| RenderError::DeviceUpload {
            visual: "TextureProxy",
            source_label: source.label(),
            error,
        })
}

fn texture_bytes(layout: &Layout, format: &UploadFormat) -> u64 {
    (layout.shape().len() * format.sample_bytes()) as u64
}

/// One texture of a proxy and the part of the source it holds.
struct Brick {
    texture: wgpu::Texture,
    view: wgpu::TextureView,
    region: Region,
    /// A texture the device upload path filled with the whole source, bound instead of
    /// `texture` until a copy goes into `texture` again.
    provided: Option<DeviceTexture>,
}

type Bricks = (Vec<Brick>, Bricking, UploadFormat, SampleKind);

fn create_bricks(
    device: &wgpu::Device,
    source: &SharedSource,
    layout: &Layout,
    limits: TextureLimits,
) -> Result<Bricks, RenderError> {
    let shape = layout.shape();
    let too_large = |kind, limit| RenderError::TextureTooLarge {
        source_label: source.label(),
        shape: shape.dims().to_vec(),
        kind,
        limit,
    };
    let (dimension, grid) = if shape.ndim() == 3 {
        let grid =
            plan_bricks(shape.padded(), limits.d3 as usize, BRICK_SLOTS).ok_or_else(|| {
                let grid = shape
                    .padded()
                    .map(|d| d.div_ceil(limits.d3.max(1) as usize));
                RenderError::TooManyBricks {
                    source_label: source.label(),
                    shape: shape.dims().to_vec(),
                    limit: limits.d3,
                    grid,
                    needed: grid.iter().product(),
                    max: BRICK_SLOTS,
                }
            })?;
        (wgpu::TextureDimension::D3, grid)
    } else {
        if shape.padded().iter().any(|&d| d > limits.d2 as usize) {
            return Err(too_large("2-D", limits.d2));
        }
        let grid = BrickGrid {
            size: shape.padded(),
            count: [1; 3],
        };
        (wgpu::TextureDimension::D2, grid)
    };
    let format = UploadFormat::for_layout(layout);
    // Host pages the device imported are host data to the texture: copied byte for byte by
    // `copy_buffer_to_texture`, so they take the host formats (u8 as unorm, sampled by the
    // hardware) rather than the integer formats other producers write.
    let host = matches!(
        source.residency(),
        Residency::Host | Residency::HostImported(_)
    );
    let (texture_format, sample_kind) = texture_format(&format, host, device.features());
    let mut usage = wgpu::TextureUsages::TEXTURE_BINDING | wgpu::TextureUsages::COPY_DST;
    if !matches!(source.residency(), Residency::Host) && unpack::supports(device, texture_format) {
        // Device-resident data is copied in by a compute pass where it can (see `unpack`).
        usage |= wgpu::TextureUsages::STORAGE_BINDING;
    }
    if dimension == wgpu::TextureDimension::D3 {
        // The volume grid copies the texture out to read it a word at a time (`volume_grid`).
        usage |= wgpu::TextureUsages::COPY_SRC;
    }
    let mut bricks = Vec::new();
    for region in grid.regions(shape.padded()) {
        let texture = device.create_texture(&wgpu::TextureDescriptor {
            label: Some("sluice source texture"),
            size: wgpu::Extent3d {
                width: region.size[2] as u32,
                height: region.size[1] as u32,
                depth_or_array_layers: region.size[0] as u32,
            },
            mip_level_count: 1,
            sample_count: 1,
            dimension,
            format: texture_format,
            usage,
            view_formats: &[],
        });
        let view = texture.create_view(&wgpu::TextureViewDescriptor::default());
        bricks.push(Brick {
            texture,
            view,
            region,
            provided: None,
        });
    }
    let bricking = Bricking {
        size: [
            grid.size[2] as u32,
            grid.size[1] as u32,
            grid.size[0] as u32,
        ],
        count: [
            grid.count[2] as u32,
            grid.count[1] as u32,
            grid.count[0] as u32,
        ],
    };
    Ok((bricks, bricking, format, sample_kind))
}
