//! The virtual texture: 2-D sources that are lazy, multiscale or over the device's texture
//! limit are held on the GPU as pages in an atlas, found through a page table, and uploaded
//! by visibility under one GPU byte budget per renderer.
//!
//! Every decision that needs no GPU is `sluice-core`'s (`PageGrid`, `visible_pages_2d`,
//! `chunk_wants`, `AtlasAllocator`); this module executes them. Per frame, before the uploads
//! of the dense sources ([`PagedTextures::visibility_pass`]):
//!
//! 1. per draw of a paged image, the pages its view needs (the level giving about one data
//!    sample per pixel, a prefetch ring, and the coarsest level's pages);
//! 2. per source, the union of those pages' storage chunks is requested (replacing the last
//!    set: that is the cancellation);
//! 3. the allocator plans evictions and uploads of the pages whose chunks are on the host,
//!    within the per-frame upload budget;
//! 4. uploaded pages are read from the source (never waiting: only settled chunks are read)
//!    into their slots, and the page table is pointed at what is resident.
//!
//! The shader (`shaders/paged_image.wgsl`) starts at the wanted level and walks to coarser
//! levels until the table has the page, so once the coarsest level is in there are no holes.

mod atlas_texture;
mod borders;
mod format;
mod page_table;
mod pipeline;
mod progress;
mod volume;

use std::collections::{HashMap, HashSet};
use std::sync::{Arc, Weak};
use std::task::Waker;
use std::time::{Duration, Instant};

use glam::{DMat3, DMat4, DVec3, DVec4};
use sluice_core::{
    visible_pages_2d, AtlasAllocator, AtlasFrame, AtlasSourceId, ChunkStatus, ConsumerId, Layout,
    LevelPolicy, PageGrid, PageKey, PageWant, PagingError, ReadRequest, ReadStatus, Region,
    Residency, SharedSource, Tier, UploadFormat, Version, View2d, ViewOptions2d, ViewPages,
};

use crate::bricking::TextureLimits;
use crate::counters::Counters;
use crate::error::RenderError;
use crate::proxy::SourceKey;
use crate::visual::VisualToken;

pub(crate) use pipeline::{LevelParams, PagedParams, PagedPipelines, ShaderKey, MAX_LEVELS};
pub use progress::{Completion, Progress};
pub(crate) use volume::{
    camera_of, wants_paging_3d, PagedVolumes, SlicePlane, VolumeSource, MAX_LEVELS_3D,
};

use atlas_texture::AtlasTexture;
use borders::{chunks_for, upload_region, ViewRects};
use format::AtlasFormat;
use page_table::PageTable;

/// How long an unchanged wanted set goes without being requested again. Requesting costs
/// about a hash-map entry per chunk; a view that does not move need not pay it every frame,
/// but a chunk the host cache evicted is only queued again by a request.
const REREQUEST: Duration = Duration::from_millis(200);

/// The GPU byte budget of a renderer's paged sources when the options give none: 512 MiB.
pub const DEFAULT_GPU_BUDGET: u64 = 512 << 20;

/// Whether a source is drawn through the virtual texture: a 2-D host source that loads lazily,
/// has several levels, or is over the device's 2-D texture limit (or any 2-D host source when
/// `always` is set).
pub(crate) fn wants_paging(source: &SharedSource, limits: TextureLimits, always: bool) -> bool {
    let layout = source.layout();
    let shape = layout.shape();
    if shape.ndim() != 2 || !matches!(source.residency(), Residency::Host) {
        return false;
    }
    let [_, h, w] = shape.padded();
    always || source.is_lazy() || layout.levels().len() > 1 || h.max(w) > limits.d2 as usize
}

/// For an atlas of `per` slots a row (2-D) or layer (3-D) and `now` of them, at least
/// `least`: the rows or layers to shrink it to (`atlas_texture::shrink_rows`) and the slot
/// moves that pack `id`'s pages below them (`AtlasAllocator::compact`, which it applies), or
/// `None` to keep it.
fn plan_shrink(
    allocator: &mut AtlasAllocator,
    id: AtlasSourceId,
    per: u32,
    now: u32,
    least: u32,
) -> Option<(u32, Vec<(u32, u32)>)> {
    let resident = u32::try_from(allocator.resident_count(id)).unwrap_or(u32::MAX);
    let rows = atlas_texture::shrink_rows(per, now, resident, least)?;
    let moves = allocator.compact(id, rows.checked_mul(per)?).ok()?;
    Some((rows, moves.iter().map(|m| (m.from, m.to)).collect()))
}

/// Whether a page's chunks are all settled on the host (what `AtlasFrame::ready` asks).
type Readiness<'a> = dyn Fn(PageKey) -> bool + 'a;

/// Counts of the paged path, merged into [`Counters`].
#[derive(Clone, Copy, Debug, Default)]
pub(crate) struct PagedCounters {
    pub pages_uploaded: u64,
    pub pages_evicted: u64,
    pub table_bytes_written: u64,
    pub peak_page_bytes: u64,
    pub atlases_shrunk: u64,
}

/// One paged source on this renderer.
struct PagedSource {
    source: SharedSource,
    layout: Layout,
    grid: PageGrid,
    id: AtlasSourceId,
    consumer: ConsumerId,
    upload: UploadFormat,
    atlas: AtlasTexture,
    table: PageTable,
    users: usize,
    version: Version,
    /// The pages whose chunks were last requested, and when: an unchanged set is requested
    /// again only after [`REREQUEST`] (for chunks the host cache evicted meanwhile).
    requested: Option<(Vec<PageWant>, Vec<[f64; 4]>, Instant)>,
    /// This frame's level-0 view rectangles (which page sides need their border).
    rects: ViewRects,
    /// The sides each resident page was uploaded without a border (`borders`).
    clamped: HashMap<PageKey, u8>,
    /// Pages whose read failed as a whole (not a chunk failure: those read as the fill), by
    /// key, with the error; retried when the source's version moves.
    read_errors: HashMap<PageKey, String>,
}

/// What the visibility pass decided for one visual this frame.
#[derive(Clone)]
pub(crate) struct VisualFrame {
    pub view: ViewPages,
    /// Level-0 point the shader's coordinates are relative to.
    pub anchor: [f64; 2],
    /// The rectangle to draw, level-0, relative to the anchor: (x0, y0, x1, y1).
    pub rect: [f64; 4],
    /// What the view sees of the data, level-0 `(x0, y0, x1, y1)` (no margin): which page
    /// sides need their border.
    pub view_box: [f64; 4],
    /// Level-0 (relative to the anchor) to clip space.
    pub transform: DMat4,
}

/// One paged visual's GPU state.
pub(crate) struct PagedVisual {
    token: Weak<VisualToken>,
    source: SourceKey,
    pub uniform: wgpu::Buffer,
    /// Group 0 with the atlas generation and shader it was made for (the colormap is group
    /// 1, `Resources::colormap_group`).
    pub bind: Option<(wgpu::BindGroup, u64, ShaderKey)>,
    pub frame: Option<VisualFrame>,
    pub flat_depth: Option<f32>,
    /// The visual's level bias or lock (`Image::set_level_policy`).
    pub policy: LevelPolicy,
}

/// Every paged source and visual of one renderer, and the allocator of their pages.
pub(crate) struct PagedTextures {
    allocator: AtlasAllocator,
    sources: HashMap<SourceKey, PagedSource>,
    pub visuals: HashMap<u64, PagedVisual>,
    pub pipelines: PagedPipelines,
    filtering: wgpu::Sampler,
    nearest: wgpu::Sampler,
    pub counters: PagedCounters,
    features: wgpu::Features,
    max_side: u32,
    budget: u64,
    page_2d: usize,
    pub always: bool,
    /// Pages of prefetch around each view (1; 0 while rendering until complete).
    pub prefetch_ring: usize,
    upload_budget: Option<u64>,
    /// The most time the frame's page uploads may take (`None`: no limit); see
    /// [`PagedTextures::set_upload_time_budget`].
    upload_time_budget: Option<Duration>,
    /// What this frame's 2-D pass spent of the per-frame upload budgets (bytes, time, whether
    /// it uploaded a page), which the 3-D pass then has less of.
    frame_spent: (u64, Duration, bool),
    /// Paged volumes (`volume`): their pages share `allocator`.
    pub volumes: PagedVolumes,
}

impl PagedTextures {
    /// Paging on `device` under `budget` GPU bytes and `upload_budget` bytes per frame
    /// (`None`: no limit), with pages of `page_2d` samples a side.
    pub fn new(
        device: &wgpu::Device,
        budget: u64,
        upload_budget: Option<u64>,
        page_2d: usize,
        always: bool,
    ) -> Self {
        let sampler = |filter| {
            device.create_sampler(&wgpu::SamplerDescriptor {
                label: Some("sluice atlas"),
                mag_filter: filter,
                min_filter: filter,
                ..Default::default()
            })
        };
        PagedTextures {
            allocator: AtlasAllocator::new(
                usize::try_from(budget).unwrap_or(usize::MAX),
                upload_budget.map_or(usize::MAX, |b| usize::try_from(b).unwrap_or(usize::MAX)),
            ),
            sources: HashMap::new(),
            visuals: HashMap::new(),
            pipelines: PagedPipelines::default(),
            filtering: sampler(wgpu::FilterMode::Linear),
            nearest: sampler(wgpu::FilterMode::Nearest),
            counters: PagedCounters::default(),
            features: device.features(),
            max_side: device.limits().max_texture_dimension_2d,
            budget,
            page_2d,
            always,
            prefetch_ring: 1,
            upload_budget,
            upload_time_budget: None,
            frame_spent: (0, Duration::ZERO, false),
            volumes: PagedVolumes::default(),
        }
    }

    /// Sets the most time one frame spends reading and writing pages (`None`: no limit). At
    /// least one planned page uploads per frame, so a view always progresses; the pages left
    /// give their slots back and wait for a later frame (the frame reports uploads pending).
    pub fn set_upload_time_budget(&mut self, budget: Option<Duration>) {
        self.upload_time_budget = budget;
    }

    /// Sets the per-frame upload budget (`None`: no limit).
    pub fn set_upload_budget(&mut self, bytes: Option<u64>) {
        self.upload_budget = bytes;
        self.allocator.set_upload_budget(
            bytes.map_or(usize::MAX, |b| usize::try_from(b).unwrap_or(usize::MAX)),
        );
    }

    /// Sets visual `id`'s level bias or lock (checked by the caller against its source).
    pub fn set_policy(&mut self, id: u64, policy: LevelPolicy) {
        if let Some(v) = self.visuals.get_mut(&id) {
            v.policy = policy;
        }
    }

    /// Whether visual `id` is drawn through the virtual texture.
    pub fn has_visual(&self, id: u64) -> bool {
        self.visuals.contains_key(&id) || self.has_volume(id)
    }

    /// Makes sure `token`'s visual shows `source` through the virtual texture, creating the
    /// source's atlas and page table on first use.
    pub fn bind_visual(
        &mut self,
        device: &wgpu::Device,
        token: &Arc<VisualToken>,
        source: &SharedSource,
    ) -> Result<(), RenderError> {
        let key = SourceKey::of(source);
        if !self.sources.contains_key(&key) {
            let paged = self.create_source(device, source)?;
            self.sources.insert(key, paged);
        }
        match self.visuals.get_mut(&token.id) {
            Some(v) if v.source == key => {}
            Some(v) => {
                let old = std::mem::replace(&mut v.source, key);
                v.bind = None;
                v.frame = None;
                self.sources.get_mut(&key).expect("created").users += 1;
                self.release_source(old);
            }
            None => {
                let uniform = device.create_buffer(&wgpu::BufferDescriptor {
                    label: Some("sluice paged image params"),
                    size: size_of::<PagedParams>() as u64,
                    usage: wgpu::BufferUsages::UNIFORM | wgpu::BufferUsages::COPY_DST,
                    mapped_at_creation: false,
                });
                self.visuals.insert(
                    token.id,
                    PagedVisual {
                        token: Arc::downgrade(token),
                        source: key,
                        uniform,
                        bind: None,
                        frame: None,
                        flat_depth: None,
                        policy: LevelPolicy::default(),
                    },
                );
                self.sources.get_mut(&key).expect("created").users += 1;
            }
        }
        Ok(())
    }

    fn create_source(
        &mut self,
        device: &wgpu::Device,
        source: &SharedSource,
    ) -> Result<PagedSource, RenderError> {
        let layout = source.layout();
        let label = source.label();
        let levels = layout.levels().len();
        if levels > MAX_LEVELS {
            return Err(RenderError::UnsupportedSource {
                visual: "Image",
                source_label: label,
                reason: format!(
                    "it has {levels} levels; a paged image may have at most {MAX_LEVELS}"
                ),
            });
        }
        let paging = |error: PagingError| RenderError::UnsupportedSource {
            visual: "Image",
            source_label: label.clone(),
            reason: error.to_string(),
        };
        let grid = PageGrid::new(2, &[self.page_2d, self.page_2d], 1).map_err(paging)?;
        let upload = UploadFormat::for_layout(&layout);
        let format = AtlasFormat::for_upload(&upload, self.features);
        let extent = grid.slot_extent();
        let slot = [extent[2], extent[1]].map(|e| u32::try_from(e).unwrap_or(u32::MAX));
        if slot.iter().any(|&s| s > self.max_side) {
            return Err(RenderError::TextureTooLarge {
                source_label: label,
                shape: vec![extent[1], extent[2]],
                kind: "2-D page",
                limit: self.max_side,
            });
        }
        let slot_bytes = grid.slot_bytes(&layout).map_err(paging)?;
        // Upload bytes per sample may differ from the source's (RGB padded, f64 narrowed): the
        // budget counts what the atlas holds.
        let slot_bytes = slot_bytes / layout.sample_bytes().max(1) * upload.sample_bytes();
        // Slots for what the budget holds, or for every page of every level if fewer (a
        // small source's atlas starts, and stays, small).
        let in_budget = self.budget / (slot_bytes.max(1) as u64);
        let wanted = grid
            .page_count(&layout)
            .map_or(in_budget, |all| all.min(in_budget));
        let (slots, per_row, max_rows) = AtlasTexture::capacity(slot, self.max_side, wanted);
        let id = self
            .allocator
            .add_source(label.clone(), layout.clone(), grid, slots)
            .map_err(paging)?;
        let max_pages = layout
            .levels()
            .iter()
            .map(|l| {
                let g = grid.grid_size(&l.shape);
                g[1].max(g[2]) as u64
            })
            .max()
            .unwrap_or(1);
        let consumer = ConsumerId::next();
        source.attach(consumer);
        Ok(PagedSource {
            source: source.clone(),
            grid,
            id,
            consumer,
            upload,
            atlas: AtlasTexture::new(device, format, slot, per_row, max_rows),
            table: PageTable::new(device, levels as u32, max_pages),
            users: 0,
            version: source.version(),
            read_errors: HashMap::new(),
            requested: None,
            rects: ViewRects::default(),
            clamped: HashMap::new(),
            layout,
        })
    }

    fn release_source(&mut self, key: SourceKey) {
        let Some(s) = self.sources.get_mut(&key) else {
            return;
        };
        s.users -= 1;
        if s.users == 0 {
            if let Some(s) = self.sources.remove(&key) {
                self.retire(s);
            }
        }
    }

    fn retire(&mut self, s: PagedSource) {
        if let Ok(evicted) = self.allocator.clear_source(s.id) {
            self.counters.pages_evicted += evicted.len() as u64;
        }
        let _ = s
            .source
            .request_chunks(s.consumer, &[], sluice_core::noop_waker());
        s.source.detach(s.consumer);
    }

    /// Drops visual `id`'s paged state, if any (its source is no longer paged).
    pub fn remove_visual(&mut self, id: u64) {
        if let Some(v) = self.visuals.remove(&id) {
            self.release_source(v.source);
        }
    }

    /// Frees dropped visuals' state, and the sources only they showed.
    pub fn collect_garbage(&mut self) {
        let dead: Vec<u64> = self
            .visuals
            .iter()
            .filter(|(_, v)| v.token.strong_count() == 0)
            .map(|(&id, _)| id)
            .collect();
        for id in dead {
            if let Some(v) = self.visuals.remove(&id) {
                self.release_source(v.source);
            }
        }
        self.collect_volume_garbage();
    }

    /// Lets go of every source (the renderer is going away).
    pub fn retire_all(&mut self) {
        let sources: Vec<PagedSource> = self.sources.drain().map(|(_, s)| s).collect();
        for s in sources {
            self.retire(s);
        }
        self.retire_all_volumes();
    }

    /// Forgets every failed chunk of every paged source, so that they load again.
    pub fn retry_failed(&mut self) {
        for s in self.sources.values_mut() {
            s.source.retry_failed();
            s.read_errors.clear();
            s.requested = None;
        }
        self.retry_failed_volumes();
    }

    /// The progress of the paged visuals among `ids` (in that order), as of their last
    /// visibility pass.
    pub fn progress_of(&self, ids: &[u64]) -> Vec<Progress> {
        ids.iter()
            .filter_map(|id| match self.visuals.get(id) {
                Some(v) => Some(visual_progress(
                    &self.allocator,
                    &self.sources[&v.source],
                    v.frame.as_ref(),
                )),
                None => self.volume_progress(*id),
            })
            .collect()
    }

    /// Page bytes resident now (what the budget counts).
    pub fn resident_page_bytes(&self) -> u64 {
        self.allocator.resident_bytes() as u64
    }

    /// Pages resident now.
    pub fn resident_pages(&self) -> u64 {
        self.sources
            .values()
            .map(|s| self.allocator.resident(s.id).len() as u64)
            .sum::<u64>()
            + self.volume_resident_pages()
    }

    /// GPU bytes of atlas textures and page tables now.
    pub fn texture_bytes(&self) -> u64 {
        self.sources
            .values()
            .map(|s| s.atlas.bytes() + s.table.bytes())
            .sum::<u64>()
            + self.volume_texture_bytes()
    }

    /// The renderer's GPU byte budget for pages.
    pub fn budget(&self) -> u64 {
        self.budget
    }

    /// Textures of all paged sources.
    pub fn textures_alive(&self) -> u64 {
        2 * (self.sources.len() + self.volumes.sources.len()) as u64
    }

    /// The visibility pass (see the module documentation). `draws` gives each paged visual's
    /// level-0 to clip matrix and viewport this frame. Returns whether ready pages wait for a
    /// later frame's upload budget.
    pub fn visibility_pass(
        &mut self,
        queue: &wgpu::Queue,
        device: &wgpu::Device,
        waker: &Waker,
        counters: &mut Counters,
        draws: &[(u64, glam::Mat4, [u32; 2])],
    ) -> Result<bool, RenderError> {
        self.frame_spent = (0, Duration::ZERO, false);
        self.apply_changes(device)?;
        self.shrink_atlases(device, queue);
        // 1. What each visual's view needs.
        let mut wants: HashMap<SourceKey, Vec<PageWant>> = HashMap::new();
        for &(id, mvp, viewport) in draws {
            let Some(v) = self.visuals.get_mut(&id) else {
                continue;
            };
            let s = &self.sources[&v.source];
            // A frame without a target (`Renderer::upload`) keeps the last view's wants.
            if viewport != [0, 0] {
                v.frame = view_frame(
                    &s.layout,
                    &s.grid,
                    mvp,
                    viewport,
                    ViewOptions2d {
                        prefetch_ring: self.prefetch_ring,
                        policy: v.policy,
                    },
                );
            }
            if let Some(frame) = &v.frame {
                wants
                    .entry(v.source)
                    .or_default()
                    .extend_from_slice(&frame.view.wants);
            }
        }
        for s in self.sources.values_mut() {
            s.rects.0.clear();
        }
        for v in self.visuals.values() {
            if let (Some(f), Some(s)) = (&v.frame, self.sources.get_mut(&v.source)) {
                let [x0, y0, x1, y1] = f.view_box;
                if x0 < x1 && y0 < y1 {
                    // What is sampled are the pixels' centres, half a pixel inside the view's
                    // edges (half a sample of the view's level where that is smaller, as
                    // under a level lock).
                    let ds = s
                        .layout
                        .levels()
                        .get(f.view.level)
                        .map_or(1.0, |l| l.downsample[1].min(l.downsample[2]));
                    let h = 0.5 * f.view.footprint.min(ds).max(0.0);
                    let (cx, cy) = ((x0 + x1) * 0.5, (y0 + y1) * 0.5);
                    s.rects.0.push([
                        (x0 + h).min(cx),
                        (y0 + h).min(cy),
                        (x1 - h).max(cx),
                        (y1 - h).max(cy),
                    ]);
                }
            }
        }
        // 2. Request their chunks, per source (an empty set for sources not drawn).
        for (key, s) in self.sources.iter_mut() {
            let pages = wants.get(key).map_or(&[][..], Vec::as_slice);
            let now = Instant::now();
            if s.requested.as_ref().is_some_and(|(p, r, t)| {
                p == pages && *r == s.rects.0 && now.duration_since(*t) < REREQUEST
            }) {
                continue;
            }
            s.requested = Some((pages.to_vec(), s.rects.0.clone(), now));
            let chunks =
                borders::chunk_wants(&s.grid, &s.layout, pages, &s.rects).map_err(|e| {
                    RenderError::UnsupportedSource {
                        visual: "Image",
                        source_label: s.source.label(),
                        reason: e.to_string(),
                    }
                })?;
            s.source
                .request_chunks(s.consumer, &chunks, waker)
                .map_err(|error| RenderError::Source {
                    source_label: s.source.label(),
                    error,
                })?;
        }
        // 3. Plan.
        let readiness: Vec<(SourceKey, Box<Readiness<'_>>)> = self
            .sources
            .iter()
            .map(|(key, s)| {
                let ready = move |page: PageKey| {
                    !s.read_errors.contains_key(&page)
                        && settled(s, page, s.rects.clamped(&s.grid, &s.layout, page))
                };
                (*key, Box::new(ready) as Box<Readiness<'_>>)
            })
            .collect();
        let frames: Vec<AtlasFrame<'_>> = readiness
            .iter()
            .filter_map(|(key, ready)| {
                Some(AtlasFrame {
                    source: self.sources[key].id,
                    wants: wants.get(key)?,
                    ready: &**ready,
                })
            })
            .collect();
        let plan = self
            .allocator
            .plan_frame(&frames)
            .map_err(|e| RenderError::Gpu(e.to_string()))?;
        drop(frames);
        drop(readiness);
        self.counters.pages_evicted += plan.evictions.len() as u64;
        // 4. Upload.
        let by_id: HashMap<AtlasSourceId, SourceKey> =
            self.sources.iter().map(|(k, s)| (s.id, *k)).collect();
        let mut scratch = Vec::new();
        let (started, time_budget) = (Instant::now(), self.upload_time_budget);
        let out_of_time =
            |uploaded: bool| uploaded && time_budget.is_some_and(|t| started.elapsed() >= t);
        let (mut uploaded_any, mut deferred_by_time) = (false, 0usize);
        for up in &plan.uploads {
            if out_of_time(uploaded_any) {
                // Over the frame's time budget: the slot goes back, the page waits.
                let _ = self.allocator.invalidate(up.source, up.key);
                deferred_by_time += 1;
                continue;
            }
            let key = by_id[&up.source];
            let s = self.sources.get_mut(&key).expect("registered");
            let clamped = s.rects.clamped(&s.grid, &s.layout, up.key);
            match upload_page(s, device, queue, up.key, up.slot, clamped, &mut scratch) {
                Ok(Some(bytes)) => {
                    counters.bytes_uploaded += bytes;
                    counters.copies_issued += 1;
                    self.counters.pages_uploaded += 1;
                    uploaded_any = true;
                }
                Ok(None) => {
                    // A chunk left the host cache since it was seen ready: load it again.
                    let _ = self.allocator.invalidate(up.source, up.key);
                }
                Err(e) => {
                    let _ = self.allocator.invalidate(up.source, up.key);
                    s.read_errors.insert(up.key, e);
                }
            }
        }
        // Resident wanted pages a view now comes near on a side uploaded without its border:
        // upload them again with it, once its chunks are in, within the frame's budget.
        let mut budget_left = self
            .upload_budget
            .map_or(u64::MAX, |b| b.saturating_sub(plan.upload_bytes as u64));
        for f in &plan.fallbacks {
            if out_of_time(uploaded_any) {
                deferred_by_time += 1;
                break;
            }
            let Some((page, slot)) = f.drawn.filter(|(p, _)| *p == f.wanted) else {
                continue;
            };
            let s = self.sources.get_mut(&by_id[&f.source]).expect("registered");
            let had = s.clamped.get(&page).copied().unwrap_or(0);
            // Sides only ever gain their border: a page is never uploaded again to lose one.
            let now = had & s.rects.clamped(&s.grid, &s.layout, page);
            if now == had || !settled(s, page, now) {
                continue;
            }
            let bytes = s.grid.slot_bytes(&s.layout).unwrap_or(usize::MAX) as u64;
            if bytes > budget_left {
                break;
            }
            if let Ok(Some(bytes)) = upload_page(s, device, queue, page, slot, now, &mut scratch) {
                uploaded_any = true;
                budget_left = budget_left.saturating_sub(bytes);
                counters.bytes_uploaded += bytes;
                counters.copies_issued += 1;
                self.counters.pages_uploaded += 1;
            }
        }
        self.counters.peak_page_bytes = self
            .counters
            .peak_page_bytes
            .max(self.allocator.resident_bytes() as u64);
        // 5. Point the page tables at what is resident, drawn pages first.
        let mut drawn: HashMap<AtlasSourceId, HashSet<PageKey>> = HashMap::new();
        let mut covering: HashMap<AtlasSourceId, Vec<(PageKey, PageKey, u32)>> = HashMap::new();
        let mut uncovered: HashMap<AtlasSourceId, Vec<PageKey>> = HashMap::new();
        for f in &plan.fallbacks {
            let Some((page, slot)) = f.drawn else {
                uncovered.entry(f.source).or_default().push(f.wanted);
                continue;
            };
            drawn.entry(f.source).or_default().insert(page);
            if page == f.wanted {
                continue;
            }
            // A missing page's entry may point at its fallback when that page covers all of
            // it, so the shader finds it in one lookup.
            let s = &self.sources[&by_id[&f.source]];
            let boxes = (
                s.grid.level0_box(&s.layout, f.wanted),
                s.grid.level0_box(&s.layout, page),
            );
            if let (Ok((wlo, whi)), Ok((dlo, dhi))) = boxes {
                if (1..3).all(|a| dlo[a] <= wlo[a] && whi[a] <= dhi[a]) {
                    covering
                        .entry(f.source)
                        .or_default()
                        .push((f.wanted, page, slot));
                }
            }
        }
        let empty = HashSet::new();
        for s in self.sources.values_mut() {
            let resident = self.allocator.resident(s.id);
            let preferred = drawn.get(&s.id).unwrap_or(&empty);
            let fallbacks = covering.get(&s.id).map_or(&[][..], Vec::as_slice);
            let holes = match uncovered.get(&s.id) {
                Some(wanted) => holes(&s.layout, &s.grid, wanted, &resident),
                None => Vec::new(),
            };
            self.counters.table_bytes_written += s
                .table
                .refresh(queue, &resident, preferred, fallbacks, &holes, &s.clamped);
        }
        let spent = self
            .upload_budget
            .map_or(0, |b| b.saturating_sub(budget_left));
        self.frame_spent = (spent, started.elapsed(), uploaded_any);
        Ok(plan.deferred > 0 || deferred_by_time > 0)
    }

    /// Shrinks the atlas textures of 2-D sources whose pages left (at most a quarter of their
    /// slots hold pages after the last frame): their pages are packed into the lowest slots
    /// (`AtlasAllocator::compact`) and copied into a smaller texture. Before this frame's
    /// planning, so that its plan and page tables name the new slots. The GPU budget bounds
    /// resident pages; this keeps each atlas within about twice its resident pages, so that a
    /// working set moving from one source to another does not leave the first one's texture
    /// at the size it grew to.
    fn shrink_atlases(&mut self, device: &wgpu::Device, queue: &wgpu::Queue) {
        for s in self.sources.values_mut() {
            let per = s.atlas.per_row;
            if let Some((rows, moves)) =
                plan_shrink(&mut self.allocator, s.id, per, s.atlas.rows(), 2)
            {
                if s.atlas.shrink(device, queue, rows, &moves) {
                    self.counters.atlases_shrunk += 1;
                }
            }
        }
    }

    /// The per-frame upload budgets left to the 3-D pass after this frame's 2-D pass: bytes
    /// (`usize::MAX`: no limit), the time left (`None`: no limit), and whether the frame has
    /// uploaded a page already (then the first 3-D page is held to the budgets too).
    pub(crate) fn frame_budget_left(&self) -> (usize, Option<Duration>, bool) {
        let (bytes, time, any) = self.frame_spent;
        let bytes = self.upload_budget.map_or(usize::MAX, |b| {
            usize::try_from(b.saturating_sub(bytes)).unwrap_or(usize::MAX)
        });
        (
            bytes,
            self.upload_time_budget.map(|t| t.saturating_sub(time)),
            any,
        )
    }

    /// The configured per-frame upload budget in bytes (`usize::MAX`: no limit).
    pub(crate) fn upload_budget_bytes(&self) -> usize {
        self.upload_budget
            .map_or(usize::MAX, |b| usize::try_from(b).unwrap_or(usize::MAX))
    }

    /// Invalidates the resident pages whose data changed since the last frame.
    fn apply_changes(&mut self, device: &wgpu::Device) -> Result<(), RenderError> {
        let mut relaid = Vec::new();
        for (key, s) in self.sources.iter_mut() {
            let now = s.source.version();
            if now == s.version {
                continue;
            }
            let changes = s.source.changes_since(s.version);
            s.version = now;
            s.read_errors.clear();
            let layout_changed = s.source.layout() != s.layout;
            if layout_changed {
                relaid.push(*key);
                continue;
            }
            match changes {
                sluice_core::Changes::None => {}
                sluice_core::Changes::Regions(regions) if !layout_changed => {
                    for (page, _) in self.allocator.resident(s.id) {
                        let Ok((lo, hi)) = s.grid.level0_box(&s.layout, page) else {
                            continue;
                        };
                        let touched = regions.iter().any(|r| {
                            (1..3).all(|a| {
                                let (r0, r1) =
                                    (r.origin[a] as f64, (r.origin[a] + r.size[a]) as f64);
                                r0 < hi[a] + 1.0 && r1 > lo[a] - 1.0
                            })
                        });
                        if touched {
                            let _ = self.allocator.invalidate(s.id, page);
                        }
                    }
                }
                _ => {
                    if let Ok(evicted) = self.allocator.clear_source(s.id) {
                        self.counters.pages_evicted += evicted.len() as u64;
                    }
                }
            }
        }
        // A new layout gets a new atlas, page table and grid (visuals rebind to them).
        for key in relaid {
            let old = self.sources.remove(&key).expect("listed above");
            let users = old.users;
            let source = old.source.clone();
            self.retire(old);
            let mut fresh = self.create_source(device, &source)?;
            fresh.users = users;
            self.sources.insert(key, fresh);
        }
        Ok(())
    }

    /// The bind group parts of visual `id`: (atlas view, table view, sampler, atlas
    /// generation, shader key).
    pub fn bind_parts(
        &self,
        id: u64,
    ) -> (
        &wgpu::TextureView,
        &wgpu::TextureView,
        &wgpu::Sampler,
        u64,
        ShaderKey,
    ) {
        let s = &self.sources[&self.visuals[&id].source];
        let sampler = if s.atlas.format.filterable {
            &self.filtering
        } else {
            &self.nearest
        };
        (
            &s.atlas.view,
            &s.table.view,
            sampler,
            s.atlas.generation,
            ShaderKey::of(&s.atlas.format),
        )
    }

    /// The uniform block of visual `id` for this frame (zero-sized rectangle when the
    /// visibility pass saw no view of it), without the display settings.
    pub fn params(&self, id: u64) -> PagedParams {
        let v = &self.visuals[&id];
        let s = &self.sources[&v.source];
        let levels = s.layout.levels();
        let page = s.grid.page_size();
        let extent = s.grid.slot_extent();
        let [aw, ah] = s.atlas.size();
        let mut p = PagedParams {
            transform: [[0.0; 4]; 4],
            nan_color: [0.0; 4],
            display: crate::pipeline::DisplayParams {
                clim: [0.0, 1.0],
                gamma: 1.0,
                lut_size: 1,
            },
            rect: [0.0; 4],
            slot: [
                extent[2] as i32,
                extent[1] as i32,
                s.atlas.per_row as i32,
                s.grid.border() as i32,
            ],
            atlas_size: [aw as f32, ah as f32],
            page: [page[2] as f32, page[1] as f32],
            level: 0,
            levels: levels.len() as u32,
            window: s.table.window,
            mode: crate::pipeline::image_mode(s.layout.channels()),
            linear: 0,
            alpha_scale: crate::pipeline::alpha_scale(s.layout.element()),
            opacity: 1.0,
            value_scale: s.atlas.format.value_scale(),
            lv: [LevelParams::default(); MAX_LEVELS],
        };
        let Some(frame) = &v.frame else {
            return p;
        };
        p.transform = frame.transform.as_mat4().to_cols_array_2d();
        p.rect = frame.rect.map(|x| x as f32);
        p.level = frame.view.level as u32;
        for (l, level) in levels.iter().enumerate().take(MAX_LEVELS) {
            let [_, h, w] = level.shape.padded();
            let (ds, off) = (
                [level.downsample[2], level.downsample[1]],
                [level.offset[2], level.offset[1]],
            );
            let (pw, ph) = (page[2] as f64, page[1] as f64);
            let base = [
                (frame.anchor[0] - off[0]) / ds[0],
                (frame.anchor[1] - off[1]) / ds[1],
            ];
            let pg = [(base[0] / pw).floor(), (base[1] / ph).floor()];
            let pg = [
                pg[0].clamp(-1.0, (w as f64 / pw).ceil()),
                pg[1].clamp(-1.0, (h as f64 / ph).ceil()),
            ];
            p.lv[l] = LevelParams {
                anchor_page: [pg[0] as i32, pg[1] as i32, 1, 0],
                anchor_frac: [(base[0] - pg[0] * pw) as f32, (base[1] - pg[1] * ph) as f32],
                inv_downsample: [(1.0 / ds[0]) as f32, (1.0 / ds[1]) as f32],
                lo: [(-pg[0] * pw) as f32, (-pg[1] * ph) as f32],
                hi: [
                    (w as f64 - pg[0] * pw) as f32,
                    (h as f64 - pg[1] * ph) as f32,
                ],
            };
        }
        p
    }
}

/// Reads page `key` of `s` and writes it into `slot`. `Ok(None)` if a chunk is not on the host
/// any more; `Err` with the reason if the read failed.
fn upload_page(
    s: &mut PagedSource,
    device: &wgpu::Device,
    queue: &wgpu::Queue,
    key: PageKey,
    slot: u32,
    clamped: u8,
    scratch: &mut Vec<u8>,
) -> Result<Option<u64>, String> {
    let region = upload_region(&s.grid, &s.layout, key, clamped).map_err(|e| e.to_string())?;
    let inner = s.grid.interior(&s.layout, key).map_err(|e| e.to_string())?;
    let border = s.grid.border();
    // Where the region starts in the slot: the interior always starts `border` in.
    let offset = [0, 1, 2].map(|a| match a {
        0 => 0,
        _ => border - (inner.origin[a] - region.origin[a]).min(border),
    });
    let samples = region.size[2];
    let out_row = samples * s.upload.sample_bytes();
    let rows = region.size[1];
    let mut converted = Vec::new();
    let Some(data) = read_page(
        &s.source,
        &s.layout,
        &s.upload,
        key,
        &region,
        scratch,
        &mut converted,
    )?
    else {
        return Ok(None);
    };
    s.atlas.ensure_slot(device, queue, slot);
    let origin = s.atlas.slot_origin(slot);
    queue.write_texture(
        wgpu::TexelCopyTextureInfo {
            texture: &s.atlas.texture,
            mip_level: 0,
            origin: wgpu::Origin3d {
                x: origin[0] + offset[2] as u32,
                y: origin[1] + offset[1] as u32,
                z: 0,
            },
            aspect: wgpu::TextureAspect::All,
        },
        data,
        wgpu::TexelCopyBufferLayout {
            offset: 0,
            bytes_per_row: Some(out_row as u32),
            rows_per_image: None,
        },
        wgpu::Extent3d {
            width: samples as u32,
            height: rows as u32,
            depth_or_array_layers: 1,
        },
    );
    s.clamped.insert(key, clamped);
    Ok(Some((out_row * rows) as u64))
}

/// Reads `region` of `level` of `source` into `scratch` and, where `upload` converts, into
/// `converted` in the upload format: the bytes to copy, rows of `region`'s last axis. Shared by
/// 2-D and 3-D pages. `Ok(None)` if a chunk left the host; `Err` with the reason (naming the
/// page) if the read failed or the region's size overflows.
pub(super) fn read_page<'a>(
    source: &SharedSource,
    layout: &Layout,
    upload: &UploadFormat,
    key: PageKey,
    region: &Region,
    scratch: &'a mut Vec<u8>,
    converted: &'a mut Vec<u8>,
) -> Result<Option<&'a [u8]>, String> {
    let bytes = layout
        .checked_region_bytes(region)
        .ok_or_else(|| format!("page {key:?}: region {region:?} overflows"))?;
    scratch.resize(bytes, 0);
    let request = ReadRequest {
        level: key.level,
        region: *region,
        waker: sluice_core::noop_waker(),
    };
    match source.read(&request, scratch) {
        Ok(ReadStatus::Ready) => {}
        Ok(ReadStatus::Pending) => return Ok(None),
        Err(e) => return Err(e.to_string()),
    }
    if !upload.converts() {
        return Ok(Some(scratch));
    }
    let samples = region.size[region.size.len() - 1];
    let (in_row, out_row) = (
        samples * layout.sample_bytes(),
        samples * upload.sample_bytes(),
    );
    let rows = bytes / in_row.max(1);
    converted.clear();
    converted.resize(out_row * rows, 0);
    for (src, dst) in scratch
        .chunks_exact(in_row)
        .zip(converted.chunks_exact_mut(out_row))
    {
        upload.convert_row(src, dst, samples);
    }
    Ok(Some(converted))
}

/// Whether every chunk of `key`'s upload region (without the `clamped` sides) is settled on
/// the host: ready, empty or failed (a failed chunk reads as the fill value).
fn settled(s: &PagedSource, key: PageKey, clamped: u8) -> bool {
    chunks_for(&s.grid, &s.layout, key, clamped).is_ok_and(|chunks| {
        chunks.into_iter().all(|c| {
            matches!(
                s.source.chunk_status(c),
                ChunkStatus::Ready | ChunkStatus::Empty | ChunkStatus::Failed(_)
            )
        })
    })
}

/// The pages a visual's view needs this frame, where it draws and relative to what; `None`
/// when it has no view (an upload-only frame) or its plane is not seen.
fn view_frame(
    layout: &Layout,
    grid: &PageGrid,
    mvp: glam::Mat4,
    viewport: [u32; 2],
    options: ViewOptions2d,
) -> Option<VisualFrame> {
    if viewport[0] == 0 || viewport[1] == 0 {
        return None;
    }
    let m = mvp.as_dmat4();
    let view = visible_pages_2d(
        layout,
        grid,
        &View2d {
            matrix: m.to_cols_array_2d(),
            viewport: viewport.map(f64::from),
        },
        options,
    )
    .ok()?;
    // The plane z = 0 as a homography (x, y, 1) -> (X, Y, W).
    let h = DMat3::from_cols(
        DVec3::new(m.x_axis.x, m.x_axis.y, m.x_axis.w),
        DVec3::new(m.y_axis.x, m.y_axis.y, m.y_axis.w),
        DVec3::new(m.w_axis.x, m.w_axis.y, m.w_axis.w),
    );
    let hinv = h.inverse();
    let unproject = |u: f64, v: f64| -> Option<[f64; 2]> {
        let q = hinv * DVec3::new(u, v, 1.0);
        let p = [q.x / q.z, q.y / q.z];
        let w = (m * DVec4::new(p[0], p[1], 0.0, 1.0)).w;
        (q.z.abs() > 1e-300 && w > 0.0 && p[0].is_finite() && p[1].is_finite()).then_some(p)
    };
    let [_, dh, dw] = layout.shape().padded();
    let (dw, dh) = (dw as f64, dh as f64);
    let anchor = unproject(0.0, 0.0).unwrap_or([dw * 0.5, dh * 0.5]);
    let corners: Vec<Option<[f64; 2]>> = [(-1.0, -1.0), (1.0, -1.0), (-1.0, 1.0), (1.0, 1.0)]
        .iter()
        .map(|&(u, v)| unproject(u, v))
        .collect();
    let mut rect = [0.0, 0.0, dw, dh];
    let mut view_box = rect;
    if corners.iter().all(Option::is_some) {
        let pts: Vec<[f64; 2]> = corners.into_iter().flatten().collect();
        let fold =
            |i: usize, f: fn(f64, f64) -> f64, init: f64| pts.iter().map(|p| p[i]).fold(init, f);
        // A little margin: the bounding box of the corners, grown by 1 % of its size.
        let (x0, x1) = (
            fold(0, f64::min, f64::INFINITY),
            fold(0, f64::max, f64::NEG_INFINITY),
        );
        let (y0, y1) = (
            fold(1, f64::min, f64::INFINITY),
            fold(1, f64::max, f64::NEG_INFINITY),
        );
        view_box = [x0.max(0.0), y0.max(0.0), x1.min(dw), y1.min(dh)];
        let (mx, my) = ((x1 - x0) * 0.01, (y1 - y0) * 0.01);
        rect = [
            rect[0].max(x0 - mx),
            rect[1].max(y0 - my),
            rect[2].min(x1 + mx),
            rect[3].min(y1 + my),
        ];
        if rect[0] >= rect[2] || rect[1] >= rect[3] {
            rect = [0.0; 4];
        }
    }
    let rel = [
        rect[0] - anchor[0],
        rect[1] - anchor[1],
        rect[2] - anchor[0],
        rect[3] - anchor[1],
    ];
    let transform = m * DMat4::from_translation(DVec3::new(anchor[0], anchor[1], 0.0));
    Some(VisualFrame {
        view,
        anchor,
        rect: if rect == [0.0; 4] { [0.0; 4] } else { rel },
        view_box,
        transform,
    })
}

/// A visual's progress from its wanted pages and their chunks' states.
fn visual_progress(
    allocator: &AtlasAllocator,
    s: &PagedSource,
    frame: Option<&VisualFrame>,
) -> Progress {
    let mut p = Progress {
        source_label: s.source.label(),
        ..Progress::default()
    };
    let Some(frame) = frame else {
        return p;
    };
    p.level = frame.view.level;
    let visible: Vec<PageWant> = frame
        .view
        .wants
        .iter()
        .filter(|w| w.tier == Tier::Visible)
        .copied()
        .collect();
    p.pages_visible = visible.len();
    for w in &visible {
        if allocator.slot_of(s.id, w.key).is_some() {
            p.pages_resident += 1;
        } else {
            p.missing_pages.push(w.key);
        }
    }
    let Ok(chunks) = borders::chunk_wants(&s.grid, &s.layout, &visible, &s.rects) else {
        return p;
    };
    p.chunks_visible = chunks.len();
    for c in chunks {
        match s.source.chunk_status(c.key) {
            ChunkStatus::Ready | ChunkStatus::Empty => p.chunks_resident += 1,
            ChunkStatus::Failed(f) => {
                p.chunks_resident += 1;
                p.failed.push((c.key, f));
            }
            ChunkStatus::Queued | ChunkStatus::Unrequested => p.chunks_queued += 1,
            ChunkStatus::Loading => p.chunks_loading += 1,
        }
    }
    p
}

/// Of the `wanted` pages nothing is drawn for, those that no `resident` page of a coarser level
/// meets at all (not only at their centre, as the planner's fallback asks): their page-table
/// entries may tell the shader to stop looking ([`page_table::HOLE`]). A page any coarser
/// resident page overlaps keeps an empty entry, and the shader's walk finds that page.
fn holes(
    layout: &Layout,
    grid: &PageGrid,
    wanted: &[PageKey],
    resident: &[(PageKey, u32)],
) -> Vec<PageKey> {
    let resident: HashSet<PageKey> = resident.iter().map(|&(key, _)| key).collect();
    let levels = layout.levels().len();
    wanted
        .iter()
        .copied()
        .filter(|&key| {
            let Ok((lo, hi)) = grid.level0_box(layout, key) else {
                return false;
            };
            // Strictly inside, so that a coarser page merely touching an edge does not count.
            const EPS: f64 = 1e-6;
            let (lo, hi) = (lo.map(|v| v + EPS), hi.map(|v| v - EPS));
            (key.level + 1..levels).all(|level| {
                let Ok((start, end)) = grid.pages_in_box(layout, level, lo, hi) else {
                    return false;
                };
                (start[0]..end[0]).all(|p| {
                    (start[1]..end[1]).all(|r| {
                        (start[2]..end[2])
                            .all(|c| !resident.contains(&PageKey::new(level, [p, r, c])))
                    })
                })
            })
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use sluice_core::{ElementType, Level, Shape};

    /// A 1024^2 image with levels 512^2 and 256^2, pages of 128^2 samples (1-sample border).
    fn layout_and_grid() -> (Layout, PageGrid) {
        let levels = [1usize, 2].map(|l| {
            let f = 1usize << l;
            Level::new(
                Shape::d2(1024 / f, 1024 / f).unwrap(),
                [1.0, f as f64, f as f64],
            )
        });
        let layout = Layout::new(Shape::d2(1024, 1024).unwrap(), ElementType::F32, 1)
            .unwrap()
            .with_levels(levels)
            .unwrap();
        (layout, PageGrid::new(2, &[128, 128], 1).unwrap())
    }

    #[test]
    fn a_hole_is_a_missing_page_no_resident_coarser_page_meets() {
        let (layout, grid) = layout_and_grid();
        let wanted = [
            PageKey::new(0, [0, 0, 0]),
            PageKey::new(0, [0, 3, 5]),
            PageKey::new(0, [0, 7, 7]),
        ];
        // Nothing resident: all three are holes.
        assert_eq!(holes(&layout, &grid, &wanted, &[]), wanted.to_vec());
        // Level 1 page (1, 2) covers level-0 samples rows 256..512, columns 512..768: level-0
        // page (3, 5) (rows 384..512, columns 640..768) lies in it; the others do not meet it.
        let resident = [(PageKey::new(1, [0, 1, 2]), 0)];
        assert_eq!(
            holes(&layout, &grid, &wanted, &resident),
            vec![wanted[0], wanted[2]]
        );
        // Level 2 page (0, 0) covers level-0 rows and columns 0..512: it meets page (0, 0)
        // and page (3, 5)'s rows but not its columns (640..768).
        let resident = [(PageKey::new(2, [0, 0, 0]), 3)];
        assert_eq!(
            holes(&layout, &grid, &wanted, &resident),
            vec![wanted[1], wanted[2]]
        );
        // A coarser page that only touches a corner (level-1 page (2, 2): rows and columns
        // 512..768) does not meet level-0 page (3, 3) (rows and columns 384..512) ...
        let corner = [PageKey::new(0, [0, 3, 3])];
        let resident = [(PageKey::new(1, [0, 2, 2]), 1)];
        assert_eq!(holes(&layout, &grid, &corner, &resident), corner.to_vec());
        // ... but one that overlaps it does: level-1 page (1, 1) (rows and columns 256..512)
        // holds all of page (3, 3).
        let resident = [(PageKey::new(1, [0, 1, 1]), 1)];
        assert!(holes(&layout, &grid, &corner, &resident).is_empty());
        // Resident pages of the same or finer levels do not count: the walk goes coarser.
        let resident = [(PageKey::new(0, [0, 3, 3]), 2)];
        assert_eq!(holes(&layout, &grid, &corner, &resident), corner.to_vec());
    }
}
