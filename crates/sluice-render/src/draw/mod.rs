//! Drawing, one module per kind of visual behind one trait ([`DrawVisual`]), over the GPU
//! resources they share ([`Resources`]).
//!
//! A frame asks each visual of its draw list, through [`kind`], to *prepare* (check itself,
//! find or create the proxies of its sources and its GPU state), then, once the sources are
//! uploaded, to *update* (uniforms, derived data, bind group) and to *record* its draw into
//! the opaque pass or, for volumes, into passes of its own after it. Adding a kind of visual
//! is a variant of [`crate::Visual`], a module here implementing [`DrawVisual`], and one arm
//! in [`kind`] (see "Adding a kind of visual" in `docs/architecture.md`).

mod image;
mod mesh;
mod paged_image;
mod paged_slice;
mod paged_volume;
mod volume;

pub(crate) use paged_slice::PagedSlicePipelines;
pub(crate) use paged_volume::PagedVolumePipelines;

use std::collections::HashMap;
use std::sync::{Arc, Weak};
use std::task::Waker;

use sluice_core::{BufferFormat, SharedSource, Version};

use crate::bricking::{brick_binding, TextureLimits, BRICK_SLOTS};
use crate::buffer_proxy::{BufferKey, BufferProxy};
use crate::colormap::{Colormap, ColormapKey};
use crate::counters::Counters;
use crate::device_upload::DeviceUpload;
use crate::error::RenderError;
use crate::format::SampleKind;
use crate::image_pipeline::ImagePipelines;
use crate::mesh_pipeline::MeshPipelines;
use crate::pipeline::{data_slots, PassKind, PipelineKey, TexDim};
use crate::proxy::{SourceKey, TextureProxy};
use crate::sampling::{hardware_filtered, SAMPLER_BINDING};
use crate::target::RenderTarget;
use crate::visual::{Visual, VisualToken};
use crate::volume_grid::GRID_BINDING;
use crate::volume_pairs::PAIRS_BINDING;
use crate::volume_pipeline::VolumePipelines;
use wgpu::{CommandEncoder, RenderPass};

/// What a kind of visual does in a frame. Implemented by `Image`, `Volume` and `Mesh` in the
/// modules of this one; the renderer only calls these.
pub(crate) trait DrawVisual {
    /// The visual's id (the key of its GPU state).
    fn id(&self) -> u64;

    /// Checks the visual against its sources and makes sure its proxies and GPU state exist;
    /// an error ends the frame before any GPU command is recorded.
    fn prepare(&self, res: &mut Resources) -> Result<(), RenderError>;

    /// After the uploads: writes the visual's uniforms for this frame (`draw` places it on
    /// the target), derives what it needs from its sources and (re)builds its bind group.
    fn update(&self, res: &mut Resources, draw: &Draw<'_>) -> Result<(), RenderError>;

    /// What the opaque pass needs for this visual.
    fn pass_need(&self, res: &Resources) -> PassNeed;

    /// Whether it draws after the opaque visuals (opacity below 1).
    fn translucent(&self) -> bool {
        false
    }

    /// Builds the pipelines it draws with in a `pass`, where missing.
    fn ensure_pipelines(&self, res: &mut Resources, pass: PassKind) {
        let _ = (res, pass);
    }

    /// Records its draw into the opaque pass (of `mode`); whether it drew anything there.
    fn record_opaque(&self, res: &Resources, pass: &mut RenderPass<'_>, mode: PassKind) -> bool {
        let _ = (res, pass, mode);
        false
    }

    /// Records passes of its own before the opaque pass (dense meshes cull their triangles
    /// there).
    fn record_before(&self, res: &Resources, enc: &mut CommandEncoder) {
        let _ = (res, enc);
    }

    /// Records passes of its own after the opaque pass (volumes march rays there); whether it
    /// drew anything.
    fn record_after(&self, res: &Resources, enc: &mut CommandEncoder, out: &RenderTarget) -> bool {
        let _ = (res, enc, out);
        false
    }

    /// Whether a frame whose only visual is this one can be drawn by one compute pass
    /// ([`crate::ImageDraw::Compute`]: dense images); where it can, builds that pipeline if
    /// missing.
    fn ensure_compute(&self, res: &mut Resources) -> bool {
        let _ = res;
        false
    }

    /// Records the whole frame by compute: every pixel of `frame.rects` gets the visual's
    /// colour over the background, or the background. Called only where
    /// [`DrawVisual::ensure_compute`] said it can; the visuals that never can keep this
    /// default, which records nothing.
    fn record_compute(
        &self,
        res: &Resources,
        enc: &mut CommandEncoder,
        draw: &Draw<'_>,
        frame: ComputeFrame<'_>,
    ) {
        let _ = (res, enc, draw, frame);
    }

    /// Whether a frame of such visuals may redraw only the screen rectangles its texture's
    /// changes touch (a flat 2-D image); any other visual makes the frame redraw whole.
    fn redraws_partially(&self) -> bool {
        false
    }
}

/// What a frame drawn by compute covers ([`DrawVisual::record_compute`]).
pub(crate) struct ComputeFrame<'a> {
    pub target: &'a RenderTarget,
    /// The target's parameters and storage binding for this renderer.
    pub out: &'a crate::target::ImageFrame,
    pub background: [f32; 4],
    /// `[x, y, width, height]` in pixels, at most `MAX_DAMAGE_RECTS`.
    pub rects: &'a [[u32; 4]],
}

/// The one registration of the kinds of visual: what draws each.
pub(crate) fn kind(visual: &Visual) -> &dyn DrawVisual {
    match visual {
        Visual::Image(image) => image,
        Visual::Volume(volume) => volume,
        Visual::Mesh(mesh) => mesh,
    }
}

/// What a visual needs of the frame's opaque pass.
#[derive(Clone, Copy, Debug, PartialEq)]
pub(crate) enum PassNeed {
    /// The colour target alone, when every visual lies at this one depth (`None`: not flat).
    Flat(Option<f32>),
    /// A depth buffer.
    Depth,
    /// A depth buffer and the depth as a colour (for the volume marcher).
    DepthColor,
}

/// One visual to draw this frame.
pub(crate) struct Draw<'a> {
    pub visual: &'a Visual,
    /// Local to world.
    pub world: glam::Mat4,
    /// Local to clip space.
    pub mvp: glam::Mat4,
    /// The target's size in pixels (zero when the frame only uploads).
    pub viewport: [u32; 2],
}

pub(crate) struct ColormapGpu {
    /// The table bound as the pipelines' colormap group (`pipeline::COLORMAP_GROUP`).
    pub group: wgpu::BindGroup,
    pub entries: usize,
    /// Keeps a custom table's identity alive while cached.
    custom: Option<Arc<[[u8; 4]]>>,
}

/// GPU data a mesh visual derives from its sources, with the versions it was derived from.
#[derive(Default)]
pub(crate) struct MeshDerived {
    pub normals: Option<(wgpu::Buffer, Version, Version)>,
    pub edges: Option<(wgpu::Buffer, u32, Version, usize)>,
    /// The triangles reordered for vertex reuse (`mesh_order`), for the indices' version and
    /// the vertex count they were checked against; no buffer where the order was kept.
    pub ordered: Option<(Option<wgpu::Buffer>, Version, usize)>,
    /// The cull of a dense mesh's triangles (`mesh_cull`), kept between frames.
    pub cull: Option<crate::mesh_cull::MeshCull>,
    /// Whether this frame draws the culled triangles.
    pub culled: bool,
}

/// A visual's group 0 (its uniforms and textures) and what it was made for; the colormap is
/// a group of its own ([`Resources::colormap_group`]), so a colormap change keeps this one.
pub(crate) struct BindState {
    pub group: wgpu::BindGroup,
    pub key: PipelineKey,
    pub generation: u64,
    /// Volumes: the id of the z-paired copy the group holds (`volume_pairs`), `None` for the
    /// stand-in.
    pub paired: Option<u64>,
}

/// GPU state of one visual: its uniforms and bind group, and which proxy it uses.
pub(crate) struct VisualGpu {
    token: Weak<VisualToken>,
    /// The texture proxy the visual reads (images, volumes, textured meshes).
    pub texture: Option<SourceKey>,
    /// The buffer proxies it reads (meshes, by slot).
    pub buffers: Vec<Option<BufferKey>>,
    /// Data derived from a mesh's sources (normals, wireframe edges).
    pub derived: MeshDerived,
    pub uniform: wgpu::Buffer,
    /// The uniform bytes last written.
    pub params: Vec<u8>,
    pub bind: Option<BindState>,
    /// Images: the depth of the whole rectangle this frame when it is the same everywhere on
    /// it (a plane facing the camera), which lets a frame of such images skip the depth
    /// buffer.
    pub flat_depth: Option<f32>,
}

/// The GPU resources the visuals draw with: the device, the proxies of their sources, the
/// pipelines, colormap tables, and each visual's GPU state.
pub(crate) struct Resources {
    pub device: wgpu::Device,
    pub queue: wgpu::Queue,
    pub images: ImagePipelines,
    pub volumes: VolumePipelines,
    pub meshes: MeshPipelines,
    /// The layout of every colormap group (`pipeline::colormap_layout`).
    pub colormap_layout: wgpu::BindGroupLayout,
    pub colormaps: HashMap<ColormapKey, ColormapGpu>,
    pub proxies: HashMap<SourceKey, TextureProxy>,
    pub buffers: HashMap<BufferKey, BufferProxy>,
    /// Bound in place of absent mesh attributes and textures.
    pub dummy_storage: wgpu::Buffer,
    pub dummy_textures: HashMap<SampleKind, wgpu::TextureView>,
    pub visuals: HashMap<u64, VisualGpu>,
    pub counters: Counters,
    pub waker: Waker,
    pub device_upload: Option<Arc<dyn DeviceUpload>>,
    pub texture_limits: TextureLimits,
    /// Paged (virtual-texture) sources and the visuals that show them.
    pub paged: crate::paged::PagedTextures,
    /// Whether opaque one-colour meshes draw their triangles reordered for vertex reuse (CPU
    /// devices, `RendererOptions::mesh_reorder`).
    pub reorder_triangles: bool,
    /// How far (pixels) dense meshes grow their triangles before leaving out those that
    /// cover no pixel centre (`RendererOptions::mesh_cull`, `mesh_cull::margin`); `None`: no
    /// mesh is culled (the option off, or a device without what the cull needs).
    pub cull_margin: Option<f32>,
    /// The cull's pipelines, built for the first culled mesh.
    pub cull_pipelines: Option<crate::mesh_cull::CullPipelines>,
}

impl Resources {
    /// Frees the GPU state of dropped visuals (and the proxies only they used), and custom
    /// colormap tables nothing refers to any more.
    pub fn collect_garbage(&mut self) {
        self.paged.collect_garbage();
        let dead: Vec<u64> = self
            .visuals
            .iter()
            .filter(|(_, v)| v.token.strong_count() == 0)
            .map(|(&id, _)| id)
            .collect();
        for id in dead {
            if let Some(v) = self.visuals.remove(&id) {
                self.release_users(v.texture, &v.buffers);
            }
        }
        self.colormaps.retain(|_, c| {
            c.custom
                .as_ref()
                .is_none_or(|entries| Arc::strong_count(entries) > 1)
        });
    }

    /// Makes sure the visual's GPU state exists and uses the proxies of `texture` and
    /// `buffers` (creating proxies on first use, moving the visual off the old ones after a
    /// source changed).
    pub fn bind_visual(
        &mut self,
        token: &Arc<VisualToken>,
        texture: Option<&SharedSource>,
        buffers: &[Option<(&SharedSource, BufferFormat)>],
        uniform_size: usize,
    ) -> Result<(), RenderError> {
        let texture = texture.map(|s| self.ensure_proxy(s)).transpose()?;
        let buffers = buffers
            .iter()
            .map(|b| b.map(|(s, f)| self.ensure_buffer(s, f)).transpose())
            .collect::<Result<Vec<_>, _>>()?;
        match self.visuals.get_mut(&token.id) {
            Some(v) if v.texture == texture && v.buffers == buffers => {}
            Some(v) => {
                let old_texture = std::mem::replace(&mut v.texture, texture);
                let old_buffers = std::mem::replace(&mut v.buffers, buffers.clone());
                v.bind = None;
                v.derived = MeshDerived::default();
                self.add_users(texture, &buffers);
                self.release_users(old_texture, &old_buffers);
            }
            None => {
                let uniform = self.device.create_buffer(&wgpu::BufferDescriptor {
                    label: Some("sluice visual params"),
                    size: uniform_size as u64,
                    usage: wgpu::BufferUsages::UNIFORM | wgpu::BufferUsages::COPY_DST,
                    mapped_at_creation: false,
                });
                self.visuals.insert(
                    token.id,
                    VisualGpu {
                        token: Arc::downgrade(token),
                        texture,
                        buffers: buffers.clone(),
                        derived: MeshDerived::default(),
                        uniform,
                        params: Vec::new(),
                        bind: None,
                        flat_depth: None,
                    },
                );
                self.add_users(texture, &buffers);
            }
        }
        Ok(())
    }

    pub fn ensure_buffer(
        &mut self,
        source: &SharedSource,
        format: BufferFormat,
    ) -> Result<BufferKey, RenderError> {
        let key = BufferKey {
            source: SourceKey::of(source),
            format,
        };
        if !self.buffers.contains_key(&key) {
            let proxy = BufferProxy::new(&self.device, source.clone(), format, &mut self.counters)?;
            self.buffers.insert(key, proxy);
        }
        Ok(key)
    }

    pub fn proxy_mut(&mut self, key: SourceKey) -> &mut TextureProxy {
        self.proxies
            .get_mut(&key)
            .expect("proxy exists for a prepared visual")
    }

    pub fn ensure_proxy(&mut self, source: &SharedSource) -> Result<SourceKey, RenderError> {
        let key = SourceKey::of(source);
        if !self.proxies.contains_key(&key) {
            let proxy = TextureProxy::new(
                &self.device,
                source.clone(),
                &mut self.counters,
                self.device_upload.as_deref(),
                self.texture_limits,
            )?;
            self.proxies.insert(key, proxy);
        }
        Ok(key)
    }

    pub fn release_users(&mut self, texture: Option<SourceKey>, buffers: &[Option<BufferKey>]) {
        if let Some(key) = texture {
            self.release_proxy_user(key);
        }
        for key in buffers.iter().flatten() {
            let Some(proxy) = self.buffers.get_mut(key) else {
                continue;
            };
            proxy.users -= 1;
            if proxy.users == 0 {
                if let Some(proxy) = self.buffers.remove(key) {
                    proxy.retire(&mut self.counters);
                }
            }
        }
    }

    pub fn add_users(&mut self, texture: Option<SourceKey>, buffers: &[Option<BufferKey>]) {
        if let Some(key) = texture {
            self.proxy_mut(key).users += 1;
        }
        for key in buffers.iter().flatten() {
            self.buffers.get_mut(key).expect("created before use").users += 1;
        }
    }

    pub fn release_proxy_user(&mut self, key: SourceKey) {
        let Some(proxy) = self.proxies.get_mut(&key) else {
            return;
        };
        proxy.users -= 1;
        if proxy.users == 0 {
            if let Some(proxy) = self.proxies.remove(&key) {
                proxy.retire(&mut self.counters);
            }
        }
    }

    pub fn bind_group_layout(&self, key: PipelineKey) -> &wgpu::BindGroupLayout {
        match key {
            PipelineKey::Image(kind, dim, one_brick, variant) => {
                self.images.layout((kind, dim, one_brick, variant))
            }
            PipelineKey::Volume(kind, one_brick) => self.volumes.layout((kind, one_brick)),
            PipelineKey::Mesh(kind) => self.meshes.layout(kind),
        }
    }

    /// Writes a visual's uniforms if they changed.
    pub fn write_params(&mut self, id: u64, params: &[u8]) {
        let v = self.visuals.get_mut(&id).expect("prepared");
        if v.params != params {
            self.queue.write_buffer(&v.uniform, 0, params);
            v.params = params.to_vec();
        }
    }

    pub fn texture_of(&self, id: u64) -> SourceKey {
        self.visuals[&id]
            .texture
            .expect("images and volumes have a texture")
    }

    /// (Re)builds an image's or volume's bind group when its texture changed or it needs a
    /// pipeline of another layout (a colormap change keeps it, the table being a group of its
    /// own, and so does a change between an image's variants, which share their layout).
    pub fn update_bind_group(&mut self, id: u64, key: PipelineKey) {
        let generation = self.proxies[&self.texture_of(id)].generation();
        let (pairs_view, paired) = self.volumes.pairs.view(&self.proxies[&self.texture_of(id)]);
        let paired = paired.filter(|_| matches!(key, PipelineKey::Volume(..)));
        let v = self.visuals.get_mut(&id).expect("prepared");
        if let Some(b) = v.bind.as_mut() {
            if b.generation == generation && b.key.same_layout(key) && b.paired == paired {
                b.key = key;
                return;
            }
        }
        let v = &self.visuals[&id];
        let proxy = &self.proxies[&self.texture_of(id)];
        let (slots, sampler) = match key {
            PipelineKey::Image(kind, dim, one_brick, _) => (
                data_slots(dim, one_brick),
                hardware_filtered(kind, one_brick).then(|| self.images.sampler()),
            ),
            PipelineKey::Volume(kind, one_brick) => (
                data_slots(TexDim::D3, one_brick),
                hardware_filtered(kind, one_brick).then(|| self.volumes.sampler()),
            ),
            PipelineKey::Mesh(_) => (BRICK_SLOTS, None),
        };
        let mut entries = vec![wgpu::BindGroupEntry {
            binding: 0,
            resource: v.uniform.as_entire_binding(),
        }];
        entries.extend((0..slots).map(|slot| wgpu::BindGroupEntry {
            binding: brick_binding(slot),
            resource: wgpu::BindingResource::TextureView(proxy.brick_view(slot)),
        }));
        if let Some(sampler) = sampler {
            entries.push(wgpu::BindGroupEntry {
                binding: SAMPLER_BINDING,
                resource: wgpu::BindingResource::Sampler(sampler),
            });
        }
        if let PipelineKey::Volume(..) = key {
            entries.push(wgpu::BindGroupEntry {
                binding: GRID_BINDING,
                resource: wgpu::BindingResource::TextureView(
                    self.volumes.grids.get(proxy.serial()).view(),
                ),
            });
            entries.push(wgpu::BindGroupEntry {
                binding: PAIRS_BINDING,
                resource: wgpu::BindingResource::TextureView(pairs_view),
            });
        }
        self.counters.bind_groups_created += 1;
        let group = self.device.create_bind_group(&wgpu::BindGroupDescriptor {
            label: Some("sluice visual"),
            layout: self.bind_group_layout(key),
            entries: &entries,
        });
        self.visuals.get_mut(&id).expect("prepared").bind = Some(BindState {
            group,
            key,
            generation,
            paired,
        });
    }

    /// A 1 x 1 texture of `kind`, bound where a mesh has no texture.
    pub fn dummy_texture(&mut self, kind: SampleKind) -> &wgpu::TextureView {
        self.dummy_textures.entry(kind).or_insert_with(|| {
            let format = match kind {
                SampleKind::Float => wgpu::TextureFormat::R32Float,
                SampleKind::FilterFloat | SampleKind::Unorm8 | SampleKind::Unorm16 => {
                    wgpu::TextureFormat::R8Unorm
                }
                SampleKind::Uint => wgpu::TextureFormat::R32Uint,
                SampleKind::Sint => wgpu::TextureFormat::R32Sint,
            };
            self.device
                .create_texture(&wgpu::TextureDescriptor {
                    label: Some("sluice absent texture"),
                    size: wgpu::Extent3d {
                        width: 1,
                        height: 1,
                        depth_or_array_layers: 1,
                    },
                    mip_level_count: 1,
                    sample_count: 1,
                    dimension: wgpu::TextureDimension::D2,
                    format,
                    usage: wgpu::TextureUsages::TEXTURE_BINDING,
                    view_formats: &[],
                })
                .create_view(&wgpu::TextureViewDescriptor::default())
        })
    }

    /// Host data of a whole source in `format` (for data derived on the CPU); `None` if the
    /// source is not ready or not in host memory (host-imported pages count as host memory).
    pub fn read_converted(
        &self,
        source: &SharedSource,
        format: BufferFormat,
    ) -> Result<Option<Vec<u8>>, RenderError> {
        // Host-imported pages are host memory too: read as any host source.
        if !matches!(
            source.residency(),
            sluice_core::Residency::Host | sluice_core::Residency::HostImported(_)
        ) {
            return Ok(None);
        }
        let layout = source.layout();
        let region = layout.shape().full_region();
        let mut packed = vec![0u8; layout.region_bytes(&region)];
        let err = |error| RenderError::Source {
            source_label: source.label(),
            error,
        };
        let request = sluice_core::ReadRequest::new(region, &self.waker);
        if source.read(&request, &mut packed).map_err(err)? == sluice_core::ReadStatus::Pending {
            return Ok(None);
        }
        let elements = match format {
            BufferFormat::U32 => layout.shape().len() * layout.channels(),
            _ => layout.shape().len(),
        };
        let mut out = vec![0u8; elements * format.element_bytes()];
        format
            .convert_row(&layout, &packed, &mut out, layout.shape().len())
            .map_err(|reason| RenderError::InvalidMeshData {
                source_label: source.label(),
                reason,
            })?;
        Ok(Some(out))
    }

    /// The bind group of `colormap`'s table (after [`Resources::colormap_gpu`] this frame).
    pub fn colormap_group(&self, colormap: &Colormap) -> &wgpu::BindGroup {
        &self.colormaps[&colormap.key()].group
    }

    /// The GPU table of a colormap and its bind group, made on first use.
    pub fn colormap_gpu(&mut self, colormap: &Colormap) -> &ColormapGpu {
        let key = colormap.key();
        self.colormaps.entry(key).or_insert_with(|| {
            let entries = colormap.entries();
            let size = wgpu::Extent3d {
                width: entries.len() as u32,
                height: 1,
                depth_or_array_layers: 1,
            };
            let texture = self.device.create_texture(&wgpu::TextureDescriptor {
                label: Some("sluice colormap"),
                size,
                mip_level_count: 1,
                sample_count: 1,
                dimension: wgpu::TextureDimension::D2,
                format: wgpu::TextureFormat::Rgba8Unorm,
                usage: wgpu::TextureUsages::TEXTURE_BINDING | wgpu::TextureUsages::COPY_DST,
                view_formats: &[],
            });
            self.queue.write_texture(
                texture.as_image_copy(),
                bytemuck::cast_slice(entries),
                wgpu::TexelCopyBufferLayout {
                    offset: 0,
                    bytes_per_row: Some(entries.len() as u32 * 4),
                    rows_per_image: None,
                },
                size,
            );
            let view = texture.create_view(&wgpu::TextureViewDescriptor::default());
            self.counters.bind_groups_created += 1;
            let group = self.device.create_bind_group(&wgpu::BindGroupDescriptor {
                label: Some("sluice colormap"),
                layout: &self.colormap_layout,
                entries: &[wgpu::BindGroupEntry {
                    binding: 0,
                    resource: wgpu::BindingResource::TextureView(&view),
                }],
            });
            ColormapGpu {
                group,
                entries: entries.len(),
                custom: colormap.custom_handle(),
            }
        })
    }
}
