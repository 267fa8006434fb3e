//! Paged volumes: 3-D sources that are lazy, multiscale or over the dense path's brick limit
//! are held as 3-D pages (64^3 samples and a 1-sample border) in a 3-D atlas per source, found
//! through a 3-D page table per source, chosen per frame by `sluice_core::visible_pages_3d`
//! (level by distance, never more than the GPU budget) and placed by the renderer's one
//! [`sluice_core::AtlasAllocator`], the same instance (budget, LRU order and counters) as the
//! 2-D pages. The marcher is `shaders/paged_volume.wgsl` (see `draw/paged_volume.rs`).
//!
//! The 3-D pass plans its pages in its own `plan_frame` call, after the 2-D pass: pages of
//! both kinds share the budget and one LRU order, but the per-frame upload budget applies to
//! each pass separately.

use std::collections::HashMap;
use std::sync::{Arc, Weak};
use std::task::Waker;
use std::time::Instant;

use glam::{DVec3, DVec4, Mat4};
use sluice_core::{
    chunk_wants, prefetch_ring_3d, prefetch_ring_plane, visible_pages_3d, visible_pages_plane,
    AtlasFrame, AtlasSourceId, ChunkStatus, ConsumerId, Layout, LevelPolicy, PageGrid, PageKey,
    PageWant, PagingError, PlaneView, Residency, SharedSource, Tier, UploadFormat, Version, View3d,
    ViewPages, DEFAULT_PAGE_3D,
};

use super::format::AtlasFormat;
use super::{PagedTextures, REREQUEST};
use crate::bricking::{TextureLimits, BRICK_SLOTS};
use crate::counters::Counters;
use crate::error::RenderError;
use crate::proxy::SourceKey;
use crate::visual::VisualToken;

/// The most levels a paged volume may have.
pub(crate) const MAX_LEVELS_3D: usize = 16;

/// Page-table entries per axis per level at most (pages `(x, y, z)` share entry
/// `(x, y, z) mod window`; a collision falls back to a coarser level, never to wrong data).
const MAX_WINDOW_3D: usize = 32;

/// The range of a slot whose page's values are not known (a format the host does not read):
/// every value and NaN, so that nothing is skipped. A slot's entry is `[low, high, 1 where
/// some texel is NaN, 0]` (`page_ranges` in `shaders/paged_volume.wgsl`).
const NO_RANGE: [f32; 4] = [-3.4e38, 3.4e38, 1.0, 0.0];

/// Whether a volume's source is drawn through 3-D pages: a 3-D host source that loads lazily,
/// has several levels, or needs more than the dense path's bricks where a page fits the 3-D
/// texture limit (or any 3-D host source when `always` is set).
pub(crate) fn wants_paging_3d(source: &SharedSource, limits: TextureLimits, always: bool) -> bool {
    let layout = source.layout();
    let shape = layout.shape();
    if shape.ndim() != 3 || !matches!(source.residency(), Residency::Host) {
        return false;
    }
    // Over the brick limit, pages help only where a slot fits the 3-D limit (else the dense
    // path's `TooManyBricks` names the numbers).
    let slot_fits = DEFAULT_PAGE_3D + 2 <= limits.d3 as usize;
    always
        || source.is_lazy()
        || layout.levels().len() > 1
        || (slot_fits
            && sluice_core::pieces::plan_bricks(shape.padded(), limits.d3 as usize, BRICK_SLOTS)
                .is_none())
}

/// A source's 3-D atlas: slots of `side`^3 texels, `per[0]` x `per[1]` per layer of slots,
/// grown in layers (by a copy into a deeper texture) up to `max_layers`.
pub(crate) struct Atlas3d {
    pub texture: wgpu::Texture,
    pub view: wgpu::TextureView,
    pub format: AtlasFormat,
    pub side: u32,
    pub per: [u32; 2],
    layers: u32,
    max_layers: u32,
    pub generation: u64,
}

impl Atlas3d {
    /// `(slots, per, max_layers)` for slots of `side` texels under a side limit `max_side`,
    /// for `wanted` slots (capped by the limit): about a cube of slots (a layer of
    /// `ceil(cbrt(wanted))^2`, as many layers as the rest needs), so that the texture a source
    /// starts with (one layer) stays small, grows by layers as its pages arrive, and no side
    /// runs to the device's limit while the others stay one slot wide.
    fn capacity(side: u32, max_side: u32, wanted: u64) -> (u32, [u32; 2], u32) {
        let fit = u64::from((max_side / side.max(1)).max(1));
        let wanted = wanted.clamp(1, fit * fit * fit);
        let mut edge = (wanted as f64).cbrt().round() as u64;
        while edge * edge * edge < wanted {
            edge += 1;
        }
        let px = fit.min(edge.max(1));
        let py = fit.min(wanted.div_ceil(px).min(edge.max(1)));
        let pz = fit.min(wanted.div_ceil(px * py));
        let py = fit.min(wanted.div_ceil(px * pz)).max(1);
        ((px * py * pz) as u32, [px as u32, py as u32], pz as u32)
    }

    fn new(device: &wgpu::Device, format: AtlasFormat, side: u32, per: [u32; 2], max: u32) -> Self {
        let layers = 1;
        let texture = create_3d(device, format, side, per, layers);
        Atlas3d {
            view: texture.create_view(&wgpu::TextureViewDescriptor::default()),
            texture,
            format,
            side,
            per,
            layers,
            max_layers: max,
            generation: next_generation(),
        }
    }

    /// Texel origin of `slot` (x, y, z).
    pub fn slot_origin(&self, slot: u32) -> [u32; 3] {
        let [px, py] = self.per;
        [
            (slot % px) * self.side,
            ((slot / px) % py) * self.side,
            (slot / (px * py)) * self.side,
        ]
    }

    /// Texels of the texture now (x, y, z).
    pub fn size(&self) -> [u32; 3] {
        [
            self.per[0] * self.side,
            self.per[1] * self.side,
            self.layers * self.side,
        ]
    }

    fn bytes(&self) -> u64 {
        let [w, h, d] = self.size();
        u64::from(w)
            * u64::from(h)
            * u64::from(d)
            * u64::from(self.format.format.block_copy_size(None).unwrap_or(4))
    }

    /// Grows the texture (doubling its layers, at most to the capacity, with a copy submitted
    /// at once) until `slot` lies inside it.
    fn ensure_slot(&mut self, device: &wgpu::Device, queue: &wgpu::Queue, slot: u32) {
        let layer = slot / (self.per[0] * self.per[1]);
        if layer < self.layers {
            return;
        }
        let mut layers = self.layers;
        while layers <= layer {
            layers = (layers * 2).min(self.max_layers);
        }
        let texture = create_3d(device, self.format, self.side, self.per, layers);
        let mut encoder = device.create_command_encoder(&wgpu::CommandEncoderDescriptor {
            label: Some("sluice 3-D atlas growth"),
        });
        let [w, h, d] = self.size();
        encoder.copy_texture_to_texture(
            self.texture.as_image_copy(),
            texture.as_image_copy(),
            wgpu::Extent3d {
                width: w,
                height: h,
                depth_or_array_layers: d,
            },
        );
        queue.submit([encoder.finish()]);
        self.view = texture.create_view(&wgpu::TextureViewDescriptor::default());
        self.texture = texture;
        self.layers = layers;
        self.generation = next_generation();
    }
}

impl Atlas3d {
    /// Slot layers the texture has now.
    pub fn layers(&self) -> u32 {
        self.layers
    }

    /// Shrinks the texture to `layers` layers (at least 1, never more than it has): slots
    /// below the new size keep their texels, and each `(from, to)` in `moves` (from
    /// `AtlasAllocator::compact`) copies a slot above it into one below. Submitted at once.
    /// Returns whether it shrank.
    pub fn shrink(
        &mut self,
        device: &wgpu::Device,
        queue: &wgpu::Queue,
        layers: u32,
        moves: &[(u32, u32)],
    ) -> bool {
        let layers = layers.max(1);
        if layers >= self.layers {
            return false;
        }
        let texture = create_3d(device, self.format, self.side, self.per, layers);
        let mut encoder = device.create_command_encoder(&wgpu::CommandEncoderDescriptor {
            label: Some("sluice 3-D atlas shrink"),
        });
        let [w, h, _] = self.size();
        encoder.copy_texture_to_texture(
            self.texture.as_image_copy(),
            texture.as_image_copy(),
            wgpu::Extent3d {
                width: w,
                height: h,
                depth_or_array_layers: layers * self.side,
            },
        );
        let at = |slot: u32| {
            let [x, y, z] = self.slot_origin(slot);
            wgpu::Origin3d { x, y, z }
        };
        for &(from, to) in moves {
            encoder.copy_texture_to_texture(
                wgpu::TexelCopyTextureInfo {
                    texture: &self.texture,
                    mip_level: 0,
                    origin: at(from),
                    aspect: wgpu::TextureAspect::All,
                },
                wgpu::TexelCopyTextureInfo {
                    texture: &texture,
                    mip_level: 0,
                    origin: at(to),
                    aspect: wgpu::TextureAspect::All,
                },
                wgpu::Extent3d {
                    width: self.side,
                    height: self.side,
                    depth_or_array_layers: self.side,
                },
            );
        }
        queue.submit([encoder.finish()]);
        self.view = texture.create_view(&wgpu::TextureViewDescriptor::default());
        self.texture = texture;
        self.layers = layers;
        self.generation = next_generation();
        true
    }
}

fn next_generation() -> u64 {
    static NEXT: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(1);
    NEXT.fetch_add(1, std::sync::atomic::Ordering::Relaxed)
}

fn create_3d(
    device: &wgpu::Device,
    format: AtlasFormat,
    side: u32,
    per: [u32; 2],
    layers: u32,
) -> wgpu::Texture {
    device.create_texture(&wgpu::TextureDescriptor {
        label: Some("sluice 3-D page atlas"),
        size: wgpu::Extent3d {
            width: per[0] * side,
            height: per[1] * side,
            depth_or_array_layers: layers * side,
        },
        mip_level_count: 1,
        sample_count: 1,
        dimension: wgpu::TextureDimension::D3,
        format: format.format,
        usage: wgpu::TextureUsages::TEXTURE_BINDING
            | wgpu::TextureUsages::COPY_DST
            | wgpu::TextureUsages::COPY_SRC,
        view_formats: &[],
    })
}

/// One paged volume source on this renderer.
pub(crate) struct VolumeSource {
    source: SharedSource,
    pub layout: Layout,
    pub grid: PageGrid,
    id: AtlasSourceId,
    consumer: ConsumerId,
    upload: UploadFormat,
    pub atlas: Atlas3d,
    /// The page table: per level `window`^3 entries `(slot + 1, x, y, z)` (0: empty).
    pub table: wgpu::Buffer,
    /// Per slot, the (low, high) of the page it holds in data units (its border included,
    /// NaN left out) and whether it holds NaN ([`NO_RANGE`]), which the marcher skips pages
    /// by: the buffer, and its copy here.
    pub ranges: wgpu::Buffer,
    range_of: Vec<[f32; 4]>,
    entries: Vec<[u32; 4]>,
    pub window: u32,
    users: usize,
    version: Version,
    requested: Option<(Vec<PageWant>, Instant)>,
    read_errors: HashMap<PageKey, String>,
}

/// One paged volume visual's GPU state.
pub(crate) struct VolumeVisual {
    token: Weak<VisualToken>,
    pub source: SourceKey,
    pub uniform: wgpu::Buffer,
    /// Group 0 with the atlas generation it was made for (the colormap is group 1,
    /// `Resources::colormap_group`).
    pub bind: Option<(wgpu::BindGroup, u64)>,
    /// This frame's wanted pages.
    pub frame: Option<ViewPages>,
    /// For an image showing a plane of the source (`draw/paged_slice.rs`): the plane, whose
    /// pages are wanted instead of a ray marcher's.
    pub slice: Option<SlicePlane>,
    /// A slice image's depth where it lies flat on the screen (for partial redraws).
    pub flat_depth: Option<f32>,
    /// The volume's level bias or lock.
    pub policy: LevelPolicy,
    /// The volume's depth-sample target (`Volume::set_depth_samples`).
    pub depth_samples: Option<u32>,
}

/// The plane an image of a paged volume source shows: plane coordinates `(u, v)` in
/// `0..size` to level-0 voxel coordinates by `plane` (`image_pipeline::SliceGeometry`).
#[derive(Clone, Copy, Debug, PartialEq)]
pub(crate) struct SlicePlane {
    pub plane: Mat4,
    pub size: [f32; 2],
    pub clip: bool,
}

/// Every paged volume source and visual of one renderer (their pages live in the
/// renderer's one allocator, [`PagedTextures`]'s).
#[derive(Default)]
pub(crate) struct PagedVolumes {
    pub sources: HashMap<SourceKey, VolumeSource>,
    pub visuals: HashMap<u64, VolumeVisual>,
    /// Draw every 3-D host source through pages (`RendererOptions::always_page_3d`).
    pub always: bool,
    /// Tests only: the marchers made from now on look each sample's page up (their spans
    /// end at their first sample), the reference the spans are compared with.
    pub per_sample_spans: bool,
    /// The paged marchers (`draw/paged_volume.rs`).
    pub pipelines: crate::draw::PagedVolumePipelines,
    /// The paged slices' pipelines (`draw/paged_slice.rs`).
    pub slice_pipelines: crate::draw::PagedSlicePipelines,
}

/// The camera of `mvp` (level-0 voxel coordinates to clip space) over `viewport`, as
/// `visible_pages_3d` wants it.
pub(crate) fn camera_of(mvp: Mat4, viewport: [u32; 2]) -> Option<View3d> {
    let m = mvp.as_dmat4();
    let inv = m.inverse();
    if !inv.is_finite() || viewport[1] == 0 {
        return None;
    }
    let unproject = |x: f64, y: f64, z: f64| {
        let h = inv * DVec4::new(x, y, z, 1.0);
        h.truncate() / h.w
    };
    let dy = 2.0 / f64::from(viewport[1]);
    let a = unproject(0.0, 0.0, 0.5);
    let b = unproject(0.0, dy, 0.5);
    let e = inv * DVec4::new(0.0, 0.0, 1.0, 0.0);
    let matrix = m.to_cols_array_2d();
    let camera = if e.w.abs() > 1e-12 * e.truncate().length().max(1e-300) {
        let eye: DVec3 = e.truncate() / e.w;
        let d = (a - eye).length().max(1e-300);
        View3d {
            view_proj: matrix,
            eye: eye.to_array(),
            pixel_size: 0.0,
            pixel_spread: (b - a).length() / d,
            min_step: 0.0,
        }
    } else {
        View3d {
            view_proj: matrix,
            eye: unproject(0.0, 0.0, 0.0).to_array(),
            pixel_size: (b - a).length(),
            pixel_spread: 0.0,
            min_step: 0.0,
        }
    };
    Some(camera)
}

impl PagedTextures {
    /// Sets paged volume `id`'s level bias or lock and depth-sample target (checked by the
    /// caller against its source).
    pub fn set_volume_policy(&mut self, id: u64, policy: LevelPolicy, depth_samples: Option<u32>) {
        if let Some(v) = self.volumes.visuals.get_mut(&id) {
            v.policy = policy;
            v.depth_samples = depth_samples;
        }
    }

    /// Whether visual `id` is a paged volume.
    pub fn has_volume(&self, id: u64) -> bool {
        self.volumes.visuals.contains_key(&id)
    }

    /// Makes sure `token`'s volume (or slice image, with `slice`) shows `source` through 3-D
    /// pages, with a uniform block of `uniform_size` bytes.
    pub fn bind_volume(
        &mut self,
        device: &wgpu::Device,
        token: &Arc<VisualToken>,
        source: &SharedSource,
        slice: Option<SlicePlane>,
        uniform_size: u64,
    ) -> Result<(), RenderError> {
        let key = SourceKey::of(source);
        if !self.volumes.sources.contains_key(&key) {
            let s = self.create_volume_source(device, source)?;
            self.volumes.sources.insert(key, s);
        }
        // A volume that became a slice image (or back) needs another uniform block.
        if self
            .volumes
            .visuals
            .get(&token.id)
            .is_some_and(|v| v.slice.is_some() != slice.is_some())
        {
            self.remove_volume(token.id);
        }
        match self.volumes.visuals.get_mut(&token.id) {
            Some(v) if v.source == key => {
                if v.slice != slice {
                    v.slice = slice;
                    v.frame = None;
                }
            }
            Some(v) => {
                let old = std::mem::replace(&mut v.source, key);
                v.bind = None;
                v.frame = None;
                v.slice = slice;
                self.volumes.sources.get_mut(&key).expect("created").users += 1;
                self.release_volume_source(old);
            }
            None => {
                let uniform = device.create_buffer(&wgpu::BufferDescriptor {
                    label: Some("sluice paged volume params"),
                    size: uniform_size,
                    usage: wgpu::BufferUsages::UNIFORM | wgpu::BufferUsages::COPY_DST,
                    mapped_at_creation: false,
                });
                self.volumes.visuals.insert(
                    token.id,
                    VolumeVisual {
                        token: Arc::downgrade(token),
                        source: key,
                        uniform,
                        bind: None,
                        frame: None,
                        slice,
                        flat_depth: None,
                        policy: LevelPolicy::default(),
                        depth_samples: None,
                    },
                );
                self.volumes.sources.get_mut(&key).expect("created").users += 1;
            }
        }
        Ok(())
    }

    fn create_volume_source(
        &mut self,
        device: &wgpu::Device,
        source: &SharedSource,
    ) -> Result<VolumeSource, RenderError> {
        let layout = source.layout();
        let label = source.label();
        let unsupported = |reason: String| RenderError::UnsupportedSource {
            visual: "Volume",
            source_label: label.clone(),
            reason,
        };
        let levels = layout.levels().len();
        if levels > MAX_LEVELS_3D {
            return Err(unsupported(format!(
                "it has {levels} levels; a paged volume may have at most {MAX_LEVELS_3D}"
            )));
        }
        let grid = PageGrid::new(3, &[DEFAULT_PAGE_3D; 3], 1)
            .map_err(|e: PagingError| unsupported(e.to_string()))?;
        let upload = UploadFormat::for_layout(&layout);
        // Every format of the dense path: integer atlases are interpolated by taps in the
        // shader (`shaders/paged3d.wgsl`).
        let format = AtlasFormat::for_upload(&upload, self.features);
        let side = grid.slot_extent()[0];
        let max_3d = device.limits().max_texture_dimension_3d;
        let side = u32::try_from(side)
            .ok()
            .filter(|&s| s <= max_3d)
            .ok_or_else(|| RenderError::TextureTooLarge {
                source_label: label.clone(),
                shape: vec![side; 3],
                kind: "3-D page",
                limit: max_3d,
            })?;
        let slot_bytes = grid
            .slot_bytes(&layout)
            .map_err(|e| unsupported(e.to_string()))?;
        let slot_bytes = slot_bytes / layout.sample_bytes().max(1) * upload.sample_bytes();
        let in_budget = self.budget / (slot_bytes.max(1) as u64);
        // Every view needs the coarsest level's visible pages (the fallback that leaves no
        // holes), and choosing them walks its whole page grid: it must fit the budget.
        let coarsest = &layout.levels()[levels - 1].shape;
        let g = grid.grid_size(coarsest);
        let pages = g[0].checked_mul(g[1]).and_then(|p| p.checked_mul(g[2]));
        if pages.is_none_or(|p| p as u64 > in_budget) {
            return Err(unsupported(format!(
                "its coarsest level {coarsest} needs {g:?} pages of {slot_bytes} bytes, more than the {in_budget} the GPU budget of {} bytes holds (give it coarser levels, or raise gpu_budget)",
                self.budget
            )));
        }
        // Slots for what the budget holds, or for every page of every level if fewer.
        let wanted = grid
            .page_count(&layout)
            .map_or(in_budget, |all| all.min(in_budget));
        let (slots, per, max_layers) = Atlas3d::capacity(side, max_3d, wanted);
        let id = self
            .allocator
            .add_source(label.clone(), layout.clone(), grid, slots)
            .map_err(|e| unsupported(e.to_string()))?;
        let max_pages = layout
            .levels()
            .iter()
            .map(|l| grid.grid_size(&l.shape).into_iter().max().unwrap_or(1))
            .max()
            .unwrap_or(1);
        let window = max_pages.clamp(1, MAX_WINDOW_3D);
        let entries = window
            .checked_pow(3)
            .and_then(|e| e.checked_mul(levels))
            .ok_or_else(|| unsupported(format!("a page table of {window}^3 x {levels}")))?;
        let table = device.create_buffer(&wgpu::BufferDescriptor {
            label: Some("sluice 3-D page table"),
            size: (entries * 16) as u64,
            usage: wgpu::BufferUsages::STORAGE | wgpu::BufferUsages::COPY_DST,
            mapped_at_creation: false,
        });
        let consumer = ConsumerId::next();
        source.attach(consumer);
        Ok(VolumeSource {
            source: source.clone(),
            grid,
            id,
            consumer,
            upload,
            atlas: Atlas3d::new(device, format, side, per, max_layers),
            table,
            ranges: device.create_buffer(&wgpu::BufferDescriptor {
                label: Some("sluice 3-D page ranges"),
                size: u64::from(slots.max(1)) * 16,
                usage: wgpu::BufferUsages::STORAGE | wgpu::BufferUsages::COPY_DST,
                mapped_at_creation: false,
            }),
            range_of: vec![NO_RANGE; slots.max(1) as usize],
            entries: vec![[u32::MAX; 4]; entries],
            window: window as u32,
            users: 0,
            version: source.version(),
            requested: None,
            read_errors: HashMap::new(),
            layout,
        })
    }

    fn release_volume_source(&mut self, key: SourceKey) {
        let Some(s) = self.volumes.sources.get_mut(&key) else {
            return;
        };
        s.users -= 1;
        if s.users == 0 {
            if let Some(s) = self.volumes.sources.remove(&key) {
                self.retire_volume(s);
            }
        }
    }

    fn retire_volume(&mut self, s: VolumeSource) {
        if let Ok(evicted) = self.allocator.clear_source(s.id) {
            self.counters.pages_evicted += evicted.len() as u64;
        }
        let _ = s
            .source
            .request_chunks(s.consumer, &[], sluice_core::noop_waker());
        s.source.detach(s.consumer);
    }

    /// Drops volume `id`'s paged state, if any.
    pub fn remove_volume(&mut self, id: u64) {
        if let Some(v) = self.volumes.visuals.remove(&id) {
            self.release_volume_source(v.source);
        }
    }

    /// Frees dropped volumes' state (part of `collect_garbage`).
    pub(super) fn collect_volume_garbage(&mut self) {
        let dead: Vec<u64> = self
            .volumes
            .visuals
            .iter()
            .filter(|(_, v)| v.token.strong_count() == 0)
            .map(|(&id, _)| id)
            .collect();
        for id in dead {
            self.remove_volume(id);
        }
    }

    /// Lets go of every volume source (part of `retire_all`).
    pub(super) fn retire_all_volumes(&mut self) {
        let sources: Vec<VolumeSource> = self.volumes.sources.drain().map(|(_, s)| s).collect();
        for s in sources {
            self.retire_volume(s);
        }
    }

    /// The progress of paged volume `id` as of its last visibility pass (`None`: not a paged
    /// volume): its visible pages and their chunks (the prefetch ring is not counted).
    pub(super) fn volume_progress(&self, id: u64) -> Option<super::Progress> {
        let v = self.volumes.visuals.get(&id)?;
        let s = &self.volumes.sources[&v.source];
        let mut p = super::Progress {
            source_label: s.source.label(),
            ..super::Progress::default()
        };
        let Some(pages) = &v.frame else {
            return Some(p);
        };
        p.level = pages.level;
        let visible: Vec<PageWant> = pages
            .wants
            .iter()
            .filter(|w| w.tier == Tier::Visible)
            .copied()
            .collect();
        p.pages_visible = visible.len();
        for w in &visible {
            if self.allocator.slot_of(s.id, w.key).is_some() {
                p.pages_resident += 1;
            } else {
                p.missing_pages.push(w.key);
            }
        }
        let Ok(chunks) = chunk_wants(&s.layout, &s.grid, &visible) else {
            return Some(p);
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
        Some(p)
    }

    /// Pages of volume sources resident now.
    pub(super) fn volume_resident_pages(&self) -> u64 {
        self.volumes
            .sources
            .values()
            .map(|s| self.allocator.resident(s.id).len() as u64)
            .sum()
    }

    /// GPU bytes of 3-D atlases and page tables.
    pub(super) fn volume_texture_bytes(&self) -> u64 {
        self.volumes
            .sources
            .values()
            .map(|s| s.atlas.bytes() + s.entries.len() as u64 * 16)
            .sum()
    }

    /// The 3-D visibility pass: per paged volume draw, the pages its camera needs under the
    /// GPU budget; their chunks requested; the ready ones uploaded; the page tables pointed
    /// at what is resident. Never waits on a read. Returns whether ready pages wait for a
    /// later frame's upload budget.
    pub fn volume_pass(
        &mut self,
        queue: &wgpu::Queue,
        device: &wgpu::Device,
        waker: &Waker,
        counters: &mut Counters,
        draws: &[(u64, Mat4, [u32; 2])],
    ) -> Result<bool, RenderError> {
        if self.volumes.sources.is_empty() {
            return Ok(false);
        }
        self.apply_volume_changes(device)?;
        // Atlases whose pages left shrink before planning (as 2-D atlases do), so that this
        // frame's plan and tables name the new slots.
        for s in self.volumes.sources.values_mut() {
            let per = s.atlas.per[0] * s.atlas.per[1];
            if let Some((layers, moves)) =
                super::plan_shrink(&mut self.allocator, s.id, per, s.atlas.layers(), 1)
            {
                if s.atlas.shrink(device, queue, layers, &moves) {
                    self.counters.atlases_shrunk += 1;
                    // The moved pages' ranges move with them.
                    for &(from, to) in &moves {
                        let range = s.range_of[from as usize];
                        s.range_of[to as usize] = range;
                    }
                    queue.write_buffer(&s.ranges, 0, bytemuck::cast_slice(&s.range_of));
                }
            }
        }
        let budget = usize::try_from(self.budget).unwrap_or(usize::MAX);
        let ring = self.prefetch_ring;
        // 1. What each camera needs, with a prefetch ring around it.
        let mut wants: HashMap<SourceKey, Vec<PageWant>> = HashMap::new();
        for &(id, mvp, viewport) in draws {
            let Some(v) = self.volumes.visuals.get_mut(&id) else {
                continue;
            };
            let s = &self.volumes.sources[&v.source];
            if viewport != [0, 0] {
                let label = || s.source.label();
                v.frame = match v.slice {
                    Some(slice) => {
                        let view = PlaneView {
                            view_proj: mvp.as_dmat4().to_cols_array_2d(),
                            viewport: viewport.map(f64::from),
                            plane: slice.plane.as_dmat4().to_cols_array_2d(),
                            size: slice.size.map(f64::from),
                        };
                        let mut pages =
                            visible_pages_plane(&s.layout, &s.grid, &view, v.policy, budget)
                                .map_err(|e| unsupported("Image", label(), e))?;
                        prefetch_ring_plane(&s.layout, &s.grid, &view, &mut pages, ring, budget)
                            .map_err(|e| unsupported("Image", label(), e))?;
                        Some(pages)
                    }
                    None => match camera_of(mvp, viewport) {
                        Some(camera) => {
                            let camera = match v.depth_samples {
                                Some(n) => camera.with_depth_samples(&s.layout, n),
                                None => camera,
                            };
                            let mut pages =
                                visible_pages_3d(&s.layout, &s.grid, &camera, v.policy, budget)
                                    .map_err(|e| unsupported("Volume", label(), e))?;
                            prefetch_ring_3d(&s.layout, &s.grid, &camera, &mut pages, ring, budget)
                                .map_err(|e| unsupported("Volume", label(), e))?;
                            Some(pages)
                        }
                        None => None,
                    },
                };
            }
            if let Some(pages) = &v.frame {
                wants
                    .entry(v.source)
                    .or_default()
                    .extend_from_slice(&pages.wants);
            }
        }
        // 2. Request their chunks (an empty set for sources not drawn).
        for (key, s) in self.volumes.sources.iter_mut() {
            let pages = wants.get(key).map_or(&[][..], Vec::as_slice);
            let now = Instant::now();
            if s.requested
                .as_ref()
                .is_some_and(|(p, t)| p == pages && now.duration_since(*t) < REREQUEST)
            {
                continue;
            }
            s.requested = Some((pages.to_vec(), now));
            let chunks = chunk_wants(&s.layout, &s.grid, pages).map_err(|e| {
                RenderError::UnsupportedSource {
                    visual: "Volume",
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
        // 3. Plan, in the one allocator.
        type Ready<'a> = Box<dyn Fn(PageKey) -> bool + 'a>;
        let readiness: Vec<(SourceKey, Ready<'_>)> = self
            .volumes
            .sources
            .iter()
            .map(|(key, s)| {
                let ready =
                    move |page: PageKey| !s.read_errors.contains_key(&page) && settled_3d(s, page);
                (*key, Box::new(ready) as Ready<'_>)
            })
            .collect();
        let frames: Vec<AtlasFrame<'_>> = readiness
            .iter()
            .filter_map(|(key, ready)| {
                Some(AtlasFrame {
                    source: self.volumes.sources[key].id,
                    wants: wants.get(key)?,
                    ready: &**ready,
                })
            })
            .collect();
        // The frame's upload budgets are shared with the 2-D pass before this one: plan within
        // what it left, and once the frame has uploaded a page, hold every further one to it.
        let (bytes_left, time_left, spent_any) = self.frame_budget_left();
        self.allocator.set_upload_budget(bytes_left);
        let plan = self.allocator.plan_frame(&frames);
        self.allocator.set_upload_budget(self.upload_budget_bytes());
        let plan = plan.map_err(|e| RenderError::Gpu(e.to_string()))?;
        drop(frames);
        drop(readiness);
        self.counters.pages_evicted += plan.evictions.len() as u64;
        // 4. Upload.
        let by_id: HashMap<AtlasSourceId, SourceKey> = self
            .volumes
            .sources
            .iter()
            .map(|(k, s)| (s.id, *k))
            .collect();
        let mut scratch = Vec::new();
        let started = Instant::now();
        let (mut uploaded, mut any, mut deferred) = (0usize, spent_any, 0usize);
        for up in &plan.uploads {
            let Some(key) = by_id.get(&up.source) else {
                continue;
            };
            let s = self.volumes.sources.get_mut(key).expect("registered");
            let slot_bytes = s.grid.slot_bytes(&s.layout).unwrap_or(usize::MAX);
            let over_bytes = uploaded.saturating_add(slot_bytes) > bytes_left;
            let over_time = time_left.is_some_and(|t| started.elapsed() >= t);
            if any && (over_bytes || over_time) {
                // Over what the frame has left: the slot goes back, the page waits.
                let _ = self.allocator.invalidate(up.source, up.key);
                deferred += 1;
                continue;
            }
            match upload_page_3d(s, device, queue, up.key, up.slot, &mut scratch) {
                Ok(Some(bytes)) => {
                    counters.bytes_uploaded += bytes;
                    counters.copies_issued += 1;
                    self.counters.pages_uploaded += 1;
                    uploaded = uploaded.saturating_add(slot_bytes);
                    any = true;
                }
                Ok(None) => {
                    let _ = self.allocator.invalidate(up.source, up.key);
                }
                Err(e) => {
                    let _ = self.allocator.invalidate(up.source, up.key);
                    s.read_errors.insert(up.key, e);
                }
            }
        }
        self.counters.peak_page_bytes = self
            .counters
            .peak_page_bytes
            .max(self.allocator.resident_bytes() as u64);
        // 5. Page tables: every resident page at its entry, this frame's wanted pages first.
        for (key, s) in self.volumes.sources.iter_mut() {
            let wanted: std::collections::HashSet<PageKey> = wants
                .get(key)
                .map(|w| w.iter().map(|w| w.key).collect())
                .unwrap_or_default();
            let resident = self.allocator.resident(s.id);
            self.counters.table_bytes_written += refresh_table(s, queue, &resident, &wanted);
        }
        Ok(plan.deferred > 0 || deferred > 0)
    }

    /// Evicts the resident pages of sources whose data changed, and recreates those whose
    /// layout changed.
    fn apply_volume_changes(&mut self, device: &wgpu::Device) -> Result<(), RenderError> {
        let mut relaid = Vec::new();
        for (key, s) in self.volumes.sources.iter_mut() {
            let now = s.source.version();
            if now == s.version {
                continue;
            }
            let changes = s.source.changes_since(s.version);
            s.version = now;
            s.read_errors.clear();
            s.requested = None;
            if s.source.layout() != s.layout {
                relaid.push(*key);
                continue;
            }
            if !matches!(changes, sluice_core::Changes::None) {
                if let Ok(evicted) = self.allocator.clear_source(s.id) {
                    self.counters.pages_evicted += evicted.len() as u64;
                }
            }
        }
        for key in relaid {
            let old = self.volumes.sources.remove(&key).expect("listed above");
            let users = old.users;
            let source = old.source.clone();
            self.retire_volume(old);
            let mut fresh = self.create_volume_source(device, &source)?;
            fresh.users = users;
            self.volumes.sources.insert(key, fresh);
            for v in self.volumes.visuals.values_mut() {
                if v.source == key {
                    v.bind = None;
                }
            }
        }
        Ok(())
    }

    /// Forgets failed reads of volume pages (part of `retry_failed`).
    pub(super) fn retry_failed_volumes(&mut self) {
        for s in self.volumes.sources.values_mut() {
            s.source.retry_failed();
            s.read_errors.clear();
            s.requested = None;
        }
    }
}

/// Whether every chunk page `key` needs (border included) is settled on the host.
fn settled_3d(s: &VolumeSource, key: PageKey) -> bool {
    s.grid.chunks_needed(&s.layout, key).is_ok_and(|chunks| {
        chunks.into_iter().all(|c| {
            matches!(
                s.source.chunk_status(c),
                ChunkStatus::Ready | ChunkStatus::Empty | ChunkStatus::Failed(_)
            )
        })
    })
}

/// Reads page `key` (its sample region, border included) and writes it into `slot`.
/// `Ok(None)` if a chunk left the host; `Err` with the reason if the read failed.
fn upload_page_3d(
    s: &mut VolumeSource,
    device: &wgpu::Device,
    queue: &wgpu::Queue,
    key: PageKey,
    slot: u32,
    scratch: &mut Vec<u8>,
) -> Result<Option<u64>, String> {
    let region = s
        .grid
        .sample_region(&s.layout, key)
        .map_err(|e| e.to_string())?;
    let offset = s
        .grid
        .offset_in_slot(&s.layout, key)
        .map_err(|e| e.to_string())?;
    let samples = region.size[2];
    let rows = region.size[0] * region.size[1];
    let out_row = samples * s.upload.sample_bytes();
    let mut converted = Vec::new();
    let Some(data) = super::read_page(
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
                z: origin[2] + offset[0] as u32,
            },
            aspect: wgpu::TextureAspect::All,
        },
        data,
        wgpu::TexelCopyBufferLayout {
            offset: 0,
            bytes_per_row: Some(out_row as u32),
            rows_per_image: Some(region.size[1] as u32),
        },
        wgpu::Extent3d {
            width: samples as u32,
            height: region.size[1] as u32,
            depth_or_array_layers: region.size[0] as u32,
        },
    );
    let range = crate::host_grid::value_range(s.atlas.format.format, data)
        .map_or(NO_RANGE, |([low, high], nan)| {
            [low, high, f32::from(u8::from(nan)), 0.0]
        });
    if let Some(r) = s.range_of.get_mut(slot as usize) {
        *r = range;
        queue.write_buffer(&s.ranges, u64::from(slot) * 16, bytemuck::bytes_of(&range));
    }
    Ok(Some((out_row * rows) as u64))
}

/// Points `s`'s page table at `resident` pages (a page of `wanted` wins a shared entry, then
/// the coarser page); writes the table if it changed and returns the bytes written.
fn refresh_table(
    s: &mut VolumeSource,
    queue: &wgpu::Queue,
    resident: &[(PageKey, u32)],
    wanted: &std::collections::HashSet<PageKey>,
) -> u64 {
    let w = s.window as usize;
    let per_level = w * w * w;
    let mut table = vec![[0u32; 4]; s.entries.len()];
    let mut rank = vec![(0u8, 0usize); s.entries.len()];
    for &(key, slot) in resident {
        let [z, y, x] = key.index;
        let i = key.level * per_level + ((z % w) * w + (y % w)) * w + (x % w);
        let Some(entry) = table.get_mut(i) else {
            continue;
        };
        let r = (1 + u8::from(wanted.contains(&key)), usize::MAX - x - y - z);
        if r > rank[i] {
            rank[i] = r;
            *entry = [slot + 1, x as u32, y as u32, z as u32];
        }
    }
    if table == s.entries {
        return 0;
    }
    queue.write_buffer(&s.table, 0, bytemuck::cast_slice(&table));
    s.entries = table;
    s.entries.len() as u64 * 16
}

/// A view the paging planner refused, as the error of the visual showing `source_label`.
fn unsupported(visual: &'static str, source_label: String, e: PagingError) -> RenderError {
    RenderError::UnsupportedSource {
        visual,
        source_label,
        reason: e.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn atlas_capacity_fits_the_wanted_slots_under_the_side_limit() {
        // About a cube of slots: 10 in 3 x 2 a layer, two layers.
        assert_eq!(Atlas3d::capacity(66, 2048, 10), (12, [3, 2], 2));
        // 2,000 slots: 13 x 13 a layer (a cube of 12.6), 12 layers.
        let (slots, per, layers) = Atlas3d::capacity(66, 2048, 2000);
        assert_eq!((slots, per, layers), (2028, [13, 13], 12));
        // A 512 MiB budget of f32 slots (466): a first layer of 64 slots (74 MB), not 496,
        // and the same on a device whose 3-D side limit is 16,384 (no 15,000-texel tower).
        assert_eq!(Atlas3d::capacity(66, 2048, 466), (512, [8, 8], 8));
        assert_eq!(Atlas3d::capacity(66, 16384, 466), (512, [8, 8], 8));
        // Never more than the side limit allows.
        assert_eq!(Atlas3d::capacity(66, 200, 1000), (27, [3, 3], 3));
        assert_eq!(Atlas3d::capacity(66, 2048, 0), (1, [1, 1], 1));
    }

    #[test]
    fn orthographic_and_perspective_cameras_are_recognised() {
        let ortho = Mat4::orthographic_rh(0.0, 100.0, 0.0, 100.0, -100.0, 100.0);
        let c = camera_of(ortho, [100, 100]).expect("camera");
        // The matrix is f32: a pixel of 1 sample, to f32 precision.
        assert!(
            (c.pixel_size - 1.0).abs() < 1e-4 && c.pixel_spread == 0.0,
            "{c:?}"
        );
        let proj = Mat4::perspective_rh(1.0, 1.0, 0.1, 100.0);
        let view = Mat4::look_at_rh(
            glam::Vec3::new(5.0, 6.0, 7.0),
            glam::Vec3::ZERO,
            glam::Vec3::Y,
        );
        let c = camera_of(proj * view, [100, 200]).expect("camera");
        assert!((c.eye[0] - 5.0).abs() < 1e-3 && (c.eye[2] - 7.0).abs() < 1e-3);
        let want = 2.0 * (0.5f64).tan() / 200.0;
        assert!(
            (c.pixel_spread - want).abs() < want * 0.05,
            "{}",
            c.pixel_spread
        );
    }
}
