//! The GPU side of [`crate::Mesh`]: uniform block, pipelines, and the data sluice derives
//! from a mesh (vertex normals, wireframe edges).

use std::collections::HashMap;

use glam::{Mat4, Vec3};

use crate::format::SampleKind;
use crate::pipeline::{
    alpha_scale, render_pipeline_from, shader_source, uniform_entry, DisplayParams, PassKind,
    PipelineSpec, ShaderParts, TexDim,
};
use crate::visual::{Interpolation, Mesh, Shading};

const SHADER: &str = include_str!("shaders/mesh.wgsl");

/// Flag bits of `Params.flags` in `shaders/mesh.wgsl`.
pub(crate) const HAS_NORMALS: u32 = 1;
pub(crate) const HAS_COLORS: u32 = 2;
pub(crate) const HAS_SCALARS: u32 = 4;
pub(crate) const HAS_TEXTURE: u32 = 8;
pub(crate) const FLAT: u32 = 16;
pub(crate) const UNLIT: u32 = 32;
/// The texture is sampled at the nearest sample rather than interpolated.
pub(crate) const NEAREST: u32 = 64;

/// The uniform block of `shaders/mesh.wgsl` (`Params`), 304 bytes.
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, bytemuck::Pod, bytemuck::Zeroable)]
pub(crate) struct MeshParams {
    mvp: [[f32; 4]; 4],
    model: [[f32; 4]; 4],
    normal_matrix: [[f32; 4]; 4],
    base_color: [f32; 4],
    wire_color: [f32; 4],
    light_dir: [f32; 4],
    display: DisplayParams,
    flags: u32,
    vertex_count: u32,
    ambient: f32,
    opacity: f32,
    texture_size: [i32; 3],
    texture_mode: u32,
    texture_alpha_scale: f32,
    pad: [u32; 3],
}

/// What the texture of a textured mesh looks like.
pub(crate) struct MeshTexture {
    pub size: [usize; 2],
    pub channels: usize,
    pub element: sluice_core::ElementType,
}

impl MeshParams {
    #[allow(clippy::too_many_arguments)]
    pub fn new(
        mesh: &Mesh,
        model: Mat4,
        mvp: Mat4,
        flags: u32,
        vertex_count: usize,
        lut_size: usize,
        texture: Option<&MeshTexture>,
    ) -> Self {
        let clim = mesh.effective_clim();
        let [lx, ly, lz] = mesh.light_direction();
        let (texture_size, texture_mode, texture_alpha_scale) = match texture {
            Some(t) => (
                [t.size[1] as i32, t.size[0] as i32, 1],
                match t.channels {
                    1 => 0,
                    2 => 1,
                    3 => 2,
                    _ => 3,
                },
                alpha_scale(t.element),
            ),
            None => ([1, 1, 1], 0, 1.0),
        };
        let mut flags = match mesh.shading() {
            Shading::Flat => flags | FLAT,
            Shading::Smooth => flags,
            Shading::Unlit => flags | UNLIT,
        };
        if mesh.interpolation() == Interpolation::Nearest {
            flags |= NEAREST;
        }
        MeshParams {
            mvp: mvp.to_cols_array_2d(),
            model: model.to_cols_array_2d(),
            normal_matrix: model.inverse().transpose().to_cols_array_2d(),
            base_color: mesh.color().unwrap_or([1.0; 4]),
            wire_color: mesh.wireframe().unwrap_or([0.0; 4]),
            light_dir: [lx, ly, lz, 0.0],
            display: DisplayParams {
                clim: [clim[0] as f32, clim[1] as f32],
                gamma: mesh.gamma(),
                lut_size: lut_size as u32,
            },
            flags,
            vertex_count: vertex_count as u32,
            ambient: if mesh.shading() == Shading::Unlit {
                1.0
            } else {
                mesh.ambient()
            },
            opacity: mesh.opacity(),
            texture_size,
            texture_mode,
            texture_alpha_scale,
            pad: [0; 3],
        }
    }
}

/// The shader and layouts of meshes with textures of one kind.
struct MeshShader {
    layout: wgpu::BindGroupLayout,
    pipeline_layout: wgpu::PipelineLayout,
    module: wgpu::ShaderModule,
}

pub(crate) struct MeshPipelines {
    shaders: HashMap<SampleKind, MeshShader>,
    /// By texture kind, program and pass kind; built on first use.
    pipelines: HashMap<(SampleKind, MeshProgram, PassKind), wgpu::RenderPipeline>,
    /// Group 1 of every mesh pipeline (`pipeline::colormap_layout`).
    colormap_layout: wgpu::BindGroupLayout,
}

impl MeshPipelines {
    pub fn new(colormap_layout: wgpu::BindGroupLayout) -> Self {
        MeshPipelines {
            shaders: HashMap::new(),
            colormap_layout,
            pipelines: HashMap::new(),
        }
    }

    /// Builds the bind group layout and shader for textures of `kind` if needed.
    pub fn ensure(&mut self, device: &wgpu::Device, kind: SampleKind) {
        if self.shaders.contains_key(&kind) {
            return;
        }
        let storage = |binding| wgpu::BindGroupLayoutEntry {
            binding,
            visibility: wgpu::ShaderStages::VERTEX,
            ty: wgpu::BindingType::Buffer {
                ty: wgpu::BufferBindingType::Storage { read_only: true },
                has_dynamic_offset: false,
                min_binding_size: None,
            },
            count: None,
        };
        let entries = [
            uniform_entry(size_of::<MeshParams>(), wgpu::ShaderStages::VERTEX_FRAGMENT),
            wgpu::BindGroupLayoutEntry {
                binding: 1,
                visibility: wgpu::ShaderStages::FRAGMENT,
                ty: wgpu::BindingType::Texture {
                    sample_type: kind.texture_sample_type(),
                    view_dimension: wgpu::TextureViewDimension::D2,
                    multisampled: false,
                },
                count: None,
            },
            storage(3),
            storage(4),
            storage(5),
            storage(6),
            storage(7),
        ];
        let source = shader_source(SHADER, kind, TexDim::D2);
        let parts = ShaderParts::new(
            device,
            "sluice mesh",
            &entries,
            source,
            &[&self.colormap_layout],
        );
        self.shaders.insert(
            kind,
            MeshShader {
                layout: parts.layout,
                pipeline_layout: parts.pipeline_layout,
                module: parts.module,
            },
        );
    }

    /// Builds `program`'s pipeline for textures of `kind` in a `pass` if needed (after
    /// [`MeshPipelines::ensure`]). Meshes are never in a flat pass.
    pub fn ensure_pass(
        &mut self,
        device: &wgpu::Device,
        kind: SampleKind,
        program: MeshProgram,
        pass: PassKind,
    ) {
        debug_assert!(pass != PassKind::Flat, "meshes need the depth test");
        let shader = &self.shaders[&kind];
        let wire = program == MeshProgram::Wire;
        self.pipelines
            .entry((kind, program, pass))
            .or_insert_with(|| {
                let mut depth = pass.depth(true);
                if let (Some(depth), false) = (depth.as_mut(), wire) {
                    // Push triangles back a little so their own wireframe wins the depth test.
                    depth.bias = wgpu::DepthBiasState {
                        constant: 2,
                        slope_scale: 1.0,
                        clamp: 0.0,
                    };
                }
                let (label, vertex, fragment) = match program {
                    MeshProgram::Shaded => ("sluice mesh", "vs_main", "fs_main"),
                    MeshProgram::Plain => ("sluice mesh, one colour", "vs_plain", "fs_plain"),
                    MeshProgram::Finite => {
                        ("sluice mesh, one colour, no NaN", "vs_finite", "fs_finite")
                    }
                    MeshProgram::OpaqueFinite => (
                        "sluice mesh, one opaque colour, no NaN",
                        "vs_finite",
                        "fs_finite",
                    ),
                    MeshProgram::Wire => ("sluice mesh wireframe", "vs_main", "fs_wire"),
                };
                let mut targets = pass.targets(true);
                if program == MeshProgram::OpaqueFinite {
                    // An opaque colour replaces what is under it, as the blend would.
                    if let Some(color) = targets[0].as_mut() {
                        color.blend = None;
                    }
                }
                // The depth as a colour is written only in a pass that has it (`mesh.wgsl`).
                let fragment = if pass == PassKind::DepthColor {
                    fragment.to_owned()
                } else {
                    format!("{fragment}_color")
                };
                render_pipeline_from(
                    device,
                    PipelineSpec {
                        label,
                        constants: &[],
                        layout: &shader.pipeline_layout,
                        module: &shader.module,
                        topology: if wire {
                            wgpu::PrimitiveTopology::LineList
                        } else {
                            wgpu::PrimitiveTopology::TriangleList
                        },
                        depth,
                        fragment_entry: &fragment,
                        targets: &targets,
                    },
                    vertex,
                )
            });
    }

    pub fn layout(&self, kind: SampleKind) -> &wgpu::BindGroupLayout {
        &self.shaders[&kind].layout
    }

    /// The pipeline built by [`MeshPipelines::ensure_pass`].
    pub fn pipeline(
        &self,
        kind: SampleKind,
        program: MeshProgram,
        pass: PassKind,
    ) -> &wgpu::RenderPipeline {
        &self.pipelines[&(kind, program, pass)]
    }
}

/// Which shaders draw a mesh.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub(crate) enum MeshProgram {
    /// Triangles with every attribute (`vs_main`, `fs_main`).
    Shaded,
    /// Unlit triangles of the base colour: no colours, scalars or texture (`vs_plain`,
    /// `fs_plain`). The vertex shader passes on the position alone: on a CPU driver (lavapipe)
    /// each interpolated value costs setup work per triangle, and `vs_main`'s 15 values made
    /// a 2M-triangle mesh's frame several times the cost of its pixels.
    Plain,
    /// `Plain` for positions known to hold no NaN ([`crate::buffer_proxy::BufferProxy::nan_free`])
    /// and a colour of some alpha (`vs_finite`, `fs_finite`): nothing is discarded, so a CPU
    /// driver tests depth before shading, and no NaN flag is interpolated.
    Finite,
    /// `Finite` for an opaque colour (alpha times opacity 1), drawn with blending off: the
    /// colour replaces what is under it, as the blend would, and a CPU driver (lavapipe)
    /// spends no raster time blending (11 % of a 2M-triangle mesh's raster CPU time in a
    /// wgpu-py probe of this pipeline on one raster thread; the 2-core frame moved within
    /// the noise, docs/measurements.md).
    OpaqueFinite,
    /// The wireframe's lines (`vs_main`, `fs_wire`).
    Wire,
}

/// Area-weighted vertex normals of a triangle list (`indices`, or consecutive vertices when
/// `None`). Vertices of no triangle, or of degenerate ones only, get a zero normal.
pub(crate) fn vertex_normals(positions: &[f32], indices: Option<&[u32]>) -> Vec<f32> {
    let n = positions.len() / 3;
    let p = |i: usize| Vec3::new(positions[3 * i], positions[3 * i + 1], positions[3 * i + 2]);
    let mut acc = vec![Vec3::ZERO; n];
    let mut add = |a: usize, b: usize, c: usize| {
        let (pa, pb, pc) = (p(a), p(b), p(c));
        // Twice the area times the unit normal; NaN triangles contribute nothing.
        let face = (pb - pa).cross(pc - pa);
        if face.is_finite() {
            acc[a] += face;
            acc[b] += face;
            acc[c] += face;
        }
    };
    match indices {
        Some(idx) => {
            for t in idx.chunks_exact(3) {
                add(t[0] as usize, t[1] as usize, t[2] as usize);
            }
        }
        None => {
            for t in 0..n / 3 {
                add(3 * t, 3 * t + 1, 3 * t + 2);
            }
        }
    }
    acc.iter()
        .flat_map(|v| v.normalize_or_zero().to_array())
        .collect()
}

/// Line-list indices of every triangle edge (each shared edge once).
pub(crate) fn wireframe_edges(indices: Option<&[u32]>, vertices: usize) -> Vec<u32> {
    let implicit: Vec<u32>;
    let tris = match indices {
        Some(i) => i,
        None => {
            implicit = (0..(vertices / 3 * 3) as u32).collect();
            &implicit
        }
    };
    let mut edges: Vec<(u32, u32)> = tris
        .chunks_exact(3)
        .flat_map(|t| [(t[0], t[1]), (t[1], t[2]), (t[2], t[0])])
        .map(|(a, b)| (a.min(b), a.max(b)))
        .collect();
    edges.sort_unstable();
    edges.dedup();
    edges.into_iter().flat_map(|(a, b)| [a, b]).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn normals_of_a_square_point_up() {
        let pos = [0.0, 0.0, 0.0, 1.0, 0.0, 0.0, 1.0, 1.0, 0.0, 0.0, 1.0, 0.0];
        let n = vertex_normals(&pos, Some(&[0, 1, 2, 0, 2, 3]));
        for v in n.chunks(3) {
            assert_eq!(v, [0.0, 0.0, 1.0]);
        }
        let tri = [0.0, 0.0, 0.0, 0.0, 1.0, 0.0, 1.0, 0.0, 0.0];
        assert_eq!(&vertex_normals(&tri, None)[..3], &[0.0, 0.0, -1.0]);
    }

    #[test]
    fn shared_edges_are_drawn_once() {
        let e = wireframe_edges(Some(&[0, 1, 2, 0, 2, 3]), 4);
        assert_eq!(e.len(), 2 * 5);
        assert_eq!(wireframe_edges(None, 3), vec![0, 1, 0, 2, 1, 2]);
    }
}
