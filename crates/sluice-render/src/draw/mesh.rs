//! Drawing a [`Mesh`]: triangles from the buffer proxies of its attributes (and a wireframe
//! over them), with normals and edges derived on the CPU where the mesh has none.

use sluice_core::{BufferFormat, SharedSource, Version};

use crate::error::RenderError;
use crate::format::SampleKind;
use crate::mesh_pipeline::{
    vertex_normals, wireframe_edges, MeshParams, MeshProgram, MeshTexture, HAS_COLORS, HAS_NORMALS,
    HAS_SCALARS, HAS_TEXTURE,
};
use crate::pipeline::{PassKind, PipelineKey, COLORMAP_GROUP};
use crate::visual::{Mesh, Shading};
use wgpu::{CommandEncoder, RenderPass};

use super::{BindState, Draw, DrawVisual, PassNeed, Resources};

/// Slots of a mesh's buffers in `VisualGpu::buffers`.
const MESH_POSITIONS: usize = 0;
const MESH_INDICES: usize = 1;
const MESH_NORMALS: usize = 2;
const MESH_COLORS: usize = 3;
const MESH_SCALARS: usize = 4;
const MESH_TEXCOORDS: usize = 5;

impl DrawVisual for Mesh {
    fn id(&self) -> u64 {
        self.token.id
    }

    fn prepare(&self, res: &mut Resources) -> Result<(), RenderError> {
        let mesh = self;
        let (buffers, vertices) = mesh_buffers(mesh)?;
        let texture = mesh.texture().map(|(_, image)| image);
        if let Some(image) = texture {
            if image.layout().shape().ndim() > 2 {
                return Err(RenderError::InvalidMeshData {
                    source_label: image.label(),
                    reason: format!(
                        "a mesh texture is a 1-D or 2-D image; this source has shape {}",
                        image.layout().shape()
                    ),
                });
            }
        }
        res.bind_visual(&mesh.token, texture, &buffers, size_of::<MeshParams>())?;
        let indices = res.visuals[&mesh.token.id].buffers[MESH_INDICES];
        if let Some(key) = indices {
            let limit = u32::try_from(vertices).unwrap_or(u32::MAX);
            res.buffers
                .get_mut(&key)
                .expect("bound")
                .set_index_limit(limit);
        }
        res.colormap_gpu(mesh.colormap());
        Ok(())
    }

    fn update(&self, res: &mut Resources, draw: &Draw<'_>) -> Result<(), RenderError> {
        update(self, res, draw.world, draw.mvp)?;
        let program = program(self, res);
        if matches!(program, MeshProgram::Finite | MeshProgram::OpaqueFinite) {
            res.counters.mesh_draws_without_nan_test += 1;
        }
        if program == MeshProgram::OpaqueFinite && res.reorder_triangles {
            derive_order(self, res)?;
            if reordered(self, res).is_some() {
                res.counters.mesh_draws_reordered += 1;
            }
        }
        prepare_cull(self, res, draw);
        Ok(())
    }

    fn record_before(&self, res: &Resources, enc: &mut CommandEncoder) {
        let derived = &res.visuals[&self.token.id].derived;
        if let (true, Some(cull), Some(pipelines)) =
            (derived.culled, &derived.cull, &res.cull_pipelines)
        {
            cull.record(pipelines, enc);
        }
    }

    fn pass_need(&self, _res: &Resources) -> PassNeed {
        PassNeed::Depth
    }

    fn translucent(&self) -> bool {
        self.opacity() < 1.0
    }

    fn ensure_pipelines(&self, res: &mut Resources, pass: PassKind) {
        let Some(bind) = res.visuals[&self.token.id].bind.as_ref() else {
            return;
        };
        if let PipelineKey::Mesh(kind) = bind.key {
            let program = program(self, res);
            res.meshes.ensure_pass(&res.device, kind, program, pass);
            if self.wireframe().is_some() {
                res.meshes
                    .ensure_pass(&res.device, kind, MeshProgram::Wire, pass);
            }
        }
    }

    fn record_opaque(&self, res: &Resources, pass: &mut RenderPass<'_>, mode: PassKind) -> bool {
        let mesh = self;
        let v = &res.visuals[&mesh.token.id];
        let bind = v.bind.as_ref().expect("bound");
        let PipelineKey::Mesh(kind) = bind.key else {
            return true;
        };
        pass.set_pipeline(res.meshes.pipeline(kind, program(mesh, res), mode));
        pass.set_bind_group(0, &bind.group, &[]);
        pass.set_bind_group(COLORMAP_GROUP, res.colormap_group(mesh.colormap()), &[]);
        match (&v.derived.cull, v.derived.culled) {
            (Some(cull), true) => {
                // The triangles that may cover a pixel centre, as many as the cull found.
                pass.set_index_buffer(cull.culled.slice(..), wgpu::IndexFormat::Uint32);
                pass.draw_indexed_indirect(&cull.args, 0);
            }
            _ => match draw_indices(mesh, res) {
                Some((buffer, count)) => {
                    pass.set_index_buffer(buffer.slice(..), wgpu::IndexFormat::Uint32);
                    pass.draw_indexed(0..count, 0, 0..1);
                }
                None => {
                    let vertices =
                        res.buffers[&v.buffers[MESH_POSITIONS].expect("positions")].len();
                    pass.draw(0..vertices as u32, 0..1);
                }
            },
        }
        if let (Some(_), Some((edges, count, _, _))) = (mesh.wireframe(), &v.derived.edges) {
            pass.set_pipeline(res.meshes.pipeline(kind, MeshProgram::Wire, mode));
            pass.set_index_buffer(edges.slice(..), wgpu::IndexFormat::Uint32);
            pass.draw_indexed(0..*count, 0, 0..1);
        }
        true
    }
}

/// The triangles' shaders: the one-colour program for unlit meshes with no colours, scalars
/// or texture (what it draws is the same), without the NaN test where the positions are
/// known to hold no NaN and the colour has some alpha, and then without blending where the
/// colour is opaque; the full one otherwise.
fn program(mesh: &Mesh, res: &Resources) -> MeshProgram {
    let v = &res.visuals[&mesh.token.id];
    let coloured = v.buffers[MESH_COLORS].is_some() || v.buffers[MESH_SCALARS].is_some();
    if mesh.shading() == Shading::Unlit && !coloured && v.texture.is_none() {
        let positions = &res.buffers[&v.buffers[MESH_POSITIONS].expect("positions")];
        let alpha = mesh.color().map_or(1.0, |c| c[3]) * mesh.opacity();
        if positions.nan_free() && alpha > 0.0 {
            if alpha >= 1.0 {
                MeshProgram::OpaqueFinite
            } else {
                MeshProgram::Finite
            }
        } else {
            MeshProgram::Plain
        }
    } else {
        MeshProgram::Shaded
    }
}

/// The index buffer the mesh's triangles are drawn from and its count of indices: opaque
/// triangles in the order that reuses vertices where there is one (the same pixels, see
/// `mesh_order`), else the source's; `None` for a mesh without indices.
fn draw_indices<'a>(mesh: &Mesh, res: &'a Resources) -> Option<(&'a wgpu::Buffer, u32)> {
    let v = &res.visuals[&mesh.token.id];
    let indices = &res.buffers[&v.buffers[MESH_INDICES]?];
    let reordered = match program(mesh, res) {
        MeshProgram::OpaqueFinite => reordered(mesh, res),
        _ => None,
    };
    // The reordered copy holds the source's current indices, all of them.
    Some(match reordered {
        Some(b) => (b, (b.size() / 4) as u32),
        None => (indices.buffer(), indices.len() as u32),
    })
}

/// Decides whether this frame draws `mesh` culled (`mesh_cull`: a dense indexed mesh, the
/// option on, a target to draw on), and makes its cull and writes its parameters if so.
fn prepare_cull(mesh: &Mesh, res: &mut Resources, draw: &Draw<'_>) {
    let id = mesh.token.id;
    let [w, h] = draw.viewport;
    let input = match res.cull_margin {
        Some(margin) if w > 0 && h > 0 => {
            let v = &res.visuals[&id];
            let positions = &res.buffers[&v.buffers[MESH_POSITIONS].expect("positions")];
            let index_writes = v.buffers[MESH_INDICES].map_or(0, |k| res.buffers[&k].writes());
            draw_indices(mesh, res).and_then(|(indices, count)| {
                let triangles = count as usize / 3;
                crate::mesh_cull::worth_culling(triangles, u64::from(w) * u64::from(h)).then(|| {
                    let stamp = (
                        positions.writes(),
                        index_writes,
                        draw.mvp.to_cols_array().map(f32::to_bits),
                        draw.viewport,
                    );
                    let buffers = (positions.buffer().clone(), indices.clone());
                    (buffers, positions.len(), triangles, stamp, margin)
                })
            })
        }
        _ => None,
    };
    let derived = &mut res.visuals.get_mut(&id).expect("prepared").derived;
    let Some(((positions, indices), vertices, triangles, stamp, margin)) = input else {
        // Drawn whole this frame; the cull is kept for a later one (a mesh drawn into targets
        // of other sizes in turn keeps its buffers).
        derived.culled = false;
        return;
    };
    let old = derived.cull.take();
    let mut cull = crate::mesh_cull::MeshCull::ensure(
        &res.device,
        &mut res.cull_pipelines,
        old,
        crate::mesh_cull::CullInput {
            positions: &positions,
            vertices,
            indices: &indices,
            triangles,
        },
    );
    if let Some(cull) = &mut cull {
        let run = cull.want(&res.queue, stamp, draw.mvp, draw.viewport, margin);
        crate::mesh_cull::count(&mut res.counters, run);
    }
    let derived = &mut res.visuals.get_mut(&id).expect("prepared").derived;
    derived.culled = cull.is_some();
    derived.cull = cull;
}

/// The mesh's triangles reordered for vertex reuse, where they were and the copy is of the
/// indices' current version.
fn reordered<'a>(mesh: &Mesh, res: &'a Resources) -> Option<&'a wgpu::Buffer> {
    let v = &res.visuals[&mesh.token.id];
    let indices = &res.buffers[&v.buffers[MESH_INDICES]?];
    match &v.derived.ordered {
        Some((Some(buffer), version, _)) if *version == indices.source().version() => Some(buffer),
        _ => None,
    }
}

/// Reorders the mesh's triangles for vertex reuse (`mesh_order`) when its indices or vertex
/// count changed since the last time, keeping the copy only where the model says it saves
/// fetches. Indices the host cannot read (device-resident) keep their order.
fn derive_order(mesh: &Mesh, res: &mut Resources) -> Result<(), RenderError> {
    let id = mesh.token.id;
    let keys = res.visuals[&id].buffers.clone();
    let Some(index_key) = keys[MESH_INDICES] else {
        return Ok(());
    };
    let vertices = res.buffers[&keys[MESH_POSITIONS].expect("positions")].len();
    let source = res.buffers[&index_key].source().clone();
    let version = source.version();
    let fresh = res.visuals[&id]
        .derived
        .ordered
        .as_ref()
        .is_some_and(|(_, v, n)| *v == version && *n == vertices);
    if fresh {
        return Ok(());
    }
    let Some(bytes) = res.read_converted(&source, BufferFormat::U32)? else {
        return Ok(());
    };
    let indices: Vec<u32> = bytemuck::pod_collect_to_vec(&bytes);
    let buffer = crate::mesh_order::reorder_for_reuse(&indices, vertices).map(|ordered| {
        let buffer = res.device.create_buffer(&wgpu::BufferDescriptor {
            label: Some("sluice reordered triangles"),
            size: (ordered.len() * 4) as u64,
            // Storage too: a dense mesh's cull reads it (`mesh_cull`).
            usage: wgpu::BufferUsages::INDEX
                | wgpu::BufferUsages::COPY_DST
                | wgpu::BufferUsages::STORAGE,
            mapped_at_creation: false,
        });
        res.queue
            .write_buffer(&buffer, 0, bytemuck::cast_slice(&ordered));
        res.counters.derived_bytes_uploaded += ordered.len() as u64 * 4;
        buffer
    });
    res.visuals.get_mut(&id).expect("prepared").derived.ordered = Some((buffer, version, vertices));
    Ok(())
}

/// Mesh uniforms, derived data (normals when smooth shading has none, wireframe edges)
/// and bind group for this frame.
fn update(
    mesh: &Mesh,
    res: &mut Resources,
    world: glam::Mat4,
    mvp: glam::Mat4,
) -> Result<(), RenderError> {
    let id = mesh.token.id;
    let entries = res.colormaps[&mesh.colormap().key()].entries;
    let keys = res.visuals[&id].buffers.clone();
    let positions = &res.buffers[&keys[MESH_POSITIONS].expect("positions")];
    let vertex_count = positions.len();
    let positions_source = positions.source().clone();
    let indices_source = keys[MESH_INDICES].map(|k| res.buffers[&k].source().clone());

    // Smooth shading without normals: derive them on the CPU from host positions.
    let mut flags = 0;
    if keys[MESH_NORMALS].is_some() {
        flags |= HAS_NORMALS;
    } else if mesh.shading() == Shading::Smooth {
        let versions = (
            positions_source.version(),
            indices_source
                .as_ref()
                .map_or(Version::NEVER, |s| s.version()),
        );
        let stale = res.visuals[&id]
            .derived
            .normals
            .as_ref()
            .is_none_or(|(_, p, i)| (*p, *i) != versions);
        if stale {
            let pos = res.read_converted(&positions_source, BufferFormat::F32 { channels: 3 })?;
            let idx = match &indices_source {
                Some(s) => res.read_converted(s, BufferFormat::U32)?,
                None => Some(Vec::new()),
            };
            if let (Some(pos), Some(idx)) = (pos, idx) {
                let idx: Vec<u32> = bytemuck::pod_collect_to_vec(&idx);
                let pos: Vec<f32> = bytemuck::pod_collect_to_vec(&pos);
                let normals = vertex_normals(&pos, indices_source.as_ref().map(|_| idx.as_slice()));
                let buffer = res.device.create_buffer(&wgpu::BufferDescriptor {
                    label: Some("sluice derived normals"),
                    size: (normals.len() * 4).max(16) as u64,
                    usage: wgpu::BufferUsages::STORAGE | wgpu::BufferUsages::COPY_DST,
                    mapped_at_creation: false,
                });
                res.queue
                    .write_buffer(&buffer, 0, bytemuck::cast_slice(&normals));
                res.counters.derived_bytes_uploaded += normals.len() as u64 * 4;
                let v = res.visuals.get_mut(&id).expect("prepared");
                v.derived.normals = Some((buffer, versions.0, versions.1));
                v.bind = None;
            }
        }
        if res.visuals[&id].derived.normals.is_some() {
            flags |= HAS_NORMALS;
        }
    }
    if keys[MESH_COLORS].is_some() {
        flags |= HAS_COLORS;
    }
    if keys[MESH_SCALARS].is_some() {
        flags |= HAS_SCALARS;
    }
    let texture = match res.visuals[&id].texture {
        Some(key) => {
            flags |= HAS_TEXTURE;
            let layout = res.proxies[&key].layout();
            let [_, h, w] = layout.shape().padded();
            Some(MeshTexture {
                size: [h, w],
                channels: layout.channels(),
                element: layout.element(),
            })
        }
        None => None,
    };

    // Wireframe edges, derived from the indices when they change.
    if mesh.wireframe().is_some() {
        let version = indices_source
            .as_ref()
            .map_or(Version::NEVER, |s| s.version());
        let stale = res.visuals[&id]
            .derived
            .edges
            .as_ref()
            .is_none_or(|(_, _, v, n)| *v != version || *n != vertex_count);
        if stale {
            let idx = match &indices_source {
                Some(s) => res.read_converted(s, BufferFormat::U32)?,
                None => Some(Vec::new()),
            };
            if let Some(idx) = idx {
                let idx: Vec<u32> = bytemuck::pod_collect_to_vec(&idx);
                let edges = wireframe_edges(
                    indices_source.as_ref().map(|_| idx.as_slice()),
                    vertex_count,
                );
                let buffer = res.device.create_buffer(&wgpu::BufferDescriptor {
                    label: Some("sluice wireframe edges"),
                    size: (edges.len() * 4).max(16) as u64,
                    usage: wgpu::BufferUsages::INDEX | wgpu::BufferUsages::COPY_DST,
                    mapped_at_creation: false,
                });
                res.queue
                    .write_buffer(&buffer, 0, bytemuck::cast_slice(&edges));
                res.counters.derived_bytes_uploaded += edges.len() as u64 * 4;
                res.visuals.get_mut(&id).expect("prepared").derived.edges =
                    Some((buffer, edges.len() as u32, version, vertex_count));
            }
        }
    }

    let params = MeshParams::new(
        mesh,
        world,
        mvp,
        flags,
        vertex_count,
        entries,
        texture.as_ref(),
    );
    res.write_params(id, bytemuck::bytes_of(&params));
    let kind = res.visuals[&id]
        .texture
        .map_or(SampleKind::Float, |k| res.proxies[&k].sample_kind());
    res.meshes.ensure(&res.device, kind);
    let key = PipelineKey::Mesh(kind);

    // The bind group follows every buffer's and the texture's generation.
    let generation = keys
        .iter()
        .flatten()
        .map(|k| res.buffers[k].generation())
        .chain(
            res.visuals[&id]
                .texture
                .map(|k| res.proxies[&k].generation()),
        )
        .fold(0u64, |acc, g| acc.wrapping_mul(31).wrapping_add(g + 1));
    let fresh = res.visuals[&id]
        .bind
        .as_ref()
        .is_some_and(|b| b.generation == generation && b.key == key);
    if fresh {
        return Ok(());
    }
    if res.visuals[&id].texture.is_none() {
        res.dummy_texture(kind);
    }
    let v = &res.visuals[&id];
    let texture_view = match v.texture {
        Some(k) => res.proxies[&k].brick_view(0),
        None => &res.dummy_textures[&kind],
    };
    let buffer_at = |slot: usize| -> &wgpu::Buffer {
        match keys[slot] {
            Some(k) => res.buffers[&k].buffer(),
            None if slot == MESH_NORMALS => v
                .derived
                .normals
                .as_ref()
                .map_or(&res.dummy_storage, |(b, _, _)| b),
            None => &res.dummy_storage,
        }
    };
    res.counters.bind_groups_created += 1;
    let group = res.device.create_bind_group(&wgpu::BindGroupDescriptor {
        label: Some("sluice mesh"),
        layout: res.meshes.layout(kind),
        entries: &[
            wgpu::BindGroupEntry {
                binding: 0,
                resource: v.uniform.as_entire_binding(),
            },
            wgpu::BindGroupEntry {
                binding: 1,
                resource: wgpu::BindingResource::TextureView(texture_view),
            },
            wgpu::BindGroupEntry {
                binding: 3,
                resource: buffer_at(MESH_POSITIONS).as_entire_binding(),
            },
            wgpu::BindGroupEntry {
                binding: 4,
                resource: buffer_at(MESH_NORMALS).as_entire_binding(),
            },
            wgpu::BindGroupEntry {
                binding: 5,
                resource: buffer_at(MESH_COLORS).as_entire_binding(),
            },
            wgpu::BindGroupEntry {
                binding: 6,
                resource: buffer_at(MESH_SCALARS).as_entire_binding(),
            },
            wgpu::BindGroupEntry {
                binding: 7,
                resource: buffer_at(MESH_TEXCOORDS).as_entire_binding(),
            },
        ],
    });
    res.visuals.get_mut(&id).expect("prepared").bind = Some(BindState {
        group,
        key,
        generation,
        paired: None,
    });
    Ok(())
}

/// A mesh's buffer sources in `MESH_*` slot order with their GPU formats, and its vertex
/// count; refuses meshes that cannot be drawn, naming the numbers.
#[allow(clippy::type_complexity)]
fn mesh_buffers(
    mesh: &Mesh,
) -> Result<(Vec<Option<(&SharedSource, BufferFormat)>>, usize), RenderError> {
    let invalid = |source: &SharedSource, reason: String| RenderError::InvalidMeshData {
        source_label: source.label(),
        reason,
    };
    let positions = mesh.positions();
    let layout = positions.layout();
    let vertices = layout.shape().len();
    if layout.shape().ndim() != 1 || !(2..=3).contains(&layout.channels()) {
        return Err(invalid(
            positions,
            format!(
                "positions are 1-D with 2 or 3 channels (x, y[, z]); this source has shape {} with {} channel(s)",
                layout.shape(),
                layout.channels()
            ),
        ));
    }
    let attribute = |source: Option<&SharedSource>,
                     name: &str,
                     channels: &[usize]|
     -> Result<(), RenderError> {
        let Some(source) = source else {
            return Ok(());
        };
        let l = source.layout();
        if l.shape().ndim() != 1 || l.shape().len() != vertices {
            return Err(invalid(
                source,
                format!("{name} have shape {} but positions have {vertices} vertices: attribute lengths must agree", l.shape()),
            ));
        }
        if !channels.contains(&l.channels()) {
            return Err(invalid(
                source,
                format!(
                    "{name} have {} channel(s); {channels:?} allowed",
                    l.channels()
                ),
            ));
        }
        Ok(())
    };
    attribute(mesh.normals(), "normals", &[3])?;
    attribute(mesh.vertex_colors(), "colours", &[3, 4])?;
    attribute(mesh.scalars(), "scalars", &[1])?;
    attribute(
        mesh.texture().map(|(uv, _)| uv),
        "texture coordinates",
        &[2],
    )?;
    match mesh.indices() {
        Some(indices) => {
            let l = indices.layout();
            let count = l.shape().len() * l.channels();
            if count % 3 != 0 {
                return Err(invalid(
                    indices,
                    format!("{count} indices is not a whole number of triangles (a multiple of 3)"),
                ));
            }
        }
        None if vertices < 3 || !vertices.is_multiple_of(3) => {
            return Err(invalid(
                positions,
                format!("{vertices} vertices without indices: consecutive vertices make triangles, so the count must be a non-zero multiple of 3"),
            ));
        }
        None => {}
    }
    let f32s = |channels| BufferFormat::F32 { channels };
    Ok((
        vec![
            Some((positions, f32s(3))),
            mesh.indices().map(|s| (s, BufferFormat::U32)),
            mesh.normals().map(|s| (s, f32s(3))),
            mesh.vertex_colors().map(|s| (s, BufferFormat::Rgba8)),
            mesh.scalars().map(|s| (s, f32s(1))),
            mesh.texture().map(|(uv, _)| (uv, f32s(2))),
        ],
        vertices,
    ))
}
