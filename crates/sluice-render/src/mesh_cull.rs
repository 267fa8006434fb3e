//! Dense meshes drawn without their triangles that cover no pixel centre
//! (`shaders/mesh_cull.wgsl`).
//!
//! A triangle smaller than a pixel often covers no pixel centre, and then gives no fragment:
//! leaving it out of the draw changes no pixel, but spares the draw its vertex fetches and
//! its setup in the rasterizer. For sub-pixel triangles that setup is most of the draw:
//! lavapipe sets every triangle up on the one thread that submits, and GPUs built for compute
//! (H100/H200) have few rasterizers. A mesh with at least a quarter as many triangles as the
//! target has pixels (and at least [`MIN_TRIANGLES`]) is culled each frame on the device,
//! before the opaque pass: its vertices are placed on the target as its vertex shader places
//! them, each triangle grown by 1/64 of a pixel is tested against the pixel centres it may
//! cover, and the kept ones are written in their order into an index buffer drawn
//! indirectly. Growing the triangles keeps every triangle a rasterizer could find a centre in
//! (they snap vertices to 1/256 of a pixel), and the order keeps blending and equal depths as
//! they were. Triangles with a vertex behind the eye are kept without a test.

use crate::counters::Counters;

/// Fewer triangles than this are never culled: the passes' fixed cost would not pay.
pub(crate) const MIN_TRIANGLES: usize = 65_536;

/// Triangles a run of the test handles (the bits of one `u32`).
const RUN: usize = 32;

/// Invocations per workgroup of the per-vertex and per-run passes (`@workgroup_size(64)`).
const WORKGROUP: u32 = 64;

/// Workgroups per dispatch row (`ROW_GROUPS` in the shader): larger dispatches take rows.
const ROW_GROUPS: u32 = 65_535;

const SHADER: &str = include_str!("shaders/mesh_cull.wgsl");

/// What may also be done with the kept triangles and the draw's arguments in tests: read
/// them back.
const TEST_USAGE: wgpu::BufferUsages = if cfg!(test) {
    wgpu::BufferUsages::COPY_SRC
} else {
    wgpu::BufferUsages::empty()
};

/// Whether a mesh of `triangles` is culled on a target of `pixels`: at least
/// [`MIN_TRIANGLES`] and a quarter of the pixels (a mesh that fills the target then has
/// triangles of 4 pixels or less on average; one that fills a part of it, smaller ones).
pub(crate) fn worth_culling(triangles: usize, pixels: u64) -> bool {
    triangles >= MIN_TRIANGLES && (triangles as u64).saturating_mul(4) >= pixels
}

/// `Cull` of `shaders/mesh_cull.wgsl`.
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, bytemuck::Pod, bytemuck::Zeroable)]
struct CullParams {
    mvp: [[f32; 4]; 4],
    viewport: [f32; 2],
    triangles: u32,
    vertices: u32,
    runs: u32,
    pad: [u32; 3],
}

/// The cull's pipelines, built on the first culled mesh.
pub(crate) struct CullPipelines {
    layout: wgpu::BindGroupLayout,
    project: wgpu::ComputePipeline,
    test: wgpu::ComputePipeline,
    scan: wgpu::ComputePipeline,
    gather: wgpu::ComputePipeline,
}

impl CullPipelines {
    fn new(device: &wgpu::Device) -> Self {
        let storage = crate::pipeline::compute_storage_entry;
        let layout = device.create_bind_group_layout(&wgpu::BindGroupLayoutDescriptor {
            label: Some("sluice mesh cull"),
            entries: &[
                crate::pipeline::uniform_entry(
                    size_of::<CullParams>(),
                    wgpu::ShaderStages::COMPUTE,
                ),
                storage(1, true),
                storage(2, true),
                storage(3, false),
                storage(4, false),
                storage(5, false),
                storage(6, false),
                storage(7, false),
            ],
        });
        let pipeline_layout = device.create_pipeline_layout(&wgpu::PipelineLayoutDescriptor {
            label: Some("sluice mesh cull"),
            bind_group_layouts: &[Some(&layout)],
            immediate_size: 0,
        });
        let module = device.create_shader_module(wgpu::ShaderModuleDescriptor {
            label: Some("sluice mesh cull"),
            source: wgpu::ShaderSource::Wgsl(SHADER.into()),
        });
        let pipeline = |entry: &str| {
            let _serial = crate::pipeline::pipeline_creation_lock();
            device.create_compute_pipeline(&wgpu::ComputePipelineDescriptor {
                label: Some("sluice mesh cull"),
                layout: Some(&pipeline_layout),
                module: &module,
                entry_point: Some(entry),
                compilation_options: Default::default(),
                cache: crate::pipeline_cache::for_pipeline(device).as_ref(),
            })
        };
        CullPipelines {
            project: pipeline("project"),
            test: pipeline("test"),
            scan: pipeline("scan"),
            gather: pipeline("gather"),
            layout,
        }
    }
}

/// What a cull's result depends on besides its buffers: the writes into the positions and
/// the indices (`BufferProxy::writes`), the transform's bits and the target size.
pub(crate) type CullStamp = (u64, u64, [u32; 16], [u32; 2]);

/// What one mesh's cull works on: the buffers the draw reads.
#[derive(Clone, Copy)]
pub(crate) struct CullInput<'a> {
    /// Positions, 3 f32 a vertex.
    pub positions: &'a wgpu::Buffer,
    pub vertices: usize,
    /// The indices the draw would use, 3 a triangle.
    pub indices: &'a wgpu::Buffer,
    pub triangles: usize,
}

/// One mesh's cull: its buffers and bind group, for the positions and indices they were made
/// for (remade when those change).
pub(crate) struct MeshCull {
    params: wgpu::Buffer,
    /// The kept triangles' indices, drawn with `args`.
    pub culled: wgpu::Buffer,
    /// `draw_indexed_indirect`'s arguments, written by the scan.
    pub args: wgpu::Buffer,
    group: wgpu::BindGroup,
    made_for: (wgpu::Buffer, wgpu::Buffer, usize, usize),
    runs: u32,
    /// What this frame's draw needs the result for.
    wanted: Option<CullStamp>,
    /// What the passes last recorded computed (set as they are recorded; forgotten when a
    /// frame fails, since its commands may not have run).
    recorded: parking_lot::Mutex<Option<CullStamp>>,
}

impl MeshCull {
    /// The cull of `input`, reusing `old` where it was made for the same buffers and counts.
    /// `None` where a buffer it needs would pass the device's limits (the mesh is drawn
    /// whole).
    pub fn ensure(
        device: &wgpu::Device,
        pipelines: &mut Option<CullPipelines>,
        old: Option<MeshCull>,
        input: CullInput<'_>,
    ) -> Option<MeshCull> {
        let key = (
            input.positions.clone(),
            input.indices.clone(),
            input.vertices,
            input.triangles,
        );
        if let Some(old) = old {
            if old.made_for == key {
                return Some(old);
            }
        }
        let limits = device.limits();
        let max = limits
            .max_storage_buffer_binding_size
            .min(limits.max_buffer_size);
        let index_bytes = (input.triangles as u64).checked_mul(12)?;
        let placed_bytes = (input.vertices as u64).checked_mul(8)?;
        let runs = input.triangles.div_ceil(RUN);
        let runs_u32 = u32::try_from(runs).ok()?;
        if index_bytes > max || placed_bytes > max || input.vertices > u32::MAX as usize {
            return None;
        }
        let pipelines = pipelines.get_or_insert_with(|| CullPipelines::new(device));
        let buffer = |label, size: u64, usage| {
            device.create_buffer(&wgpu::BufferDescriptor {
                label: Some(label),
                size: size.max(16),
                usage,
                mapped_at_creation: false,
            })
        };
        use wgpu::BufferUsages as U;
        let params = buffer(
            "sluice mesh cull params",
            size_of::<CullParams>() as u64,
            U::UNIFORM | U::COPY_DST,
        );
        let placed = buffer("sluice mesh cull placed", placed_bytes, U::STORAGE);
        let kept = buffer("sluice mesh cull kept", runs as u64 * 4, U::STORAGE);
        let before = buffer("sluice mesh cull before", runs as u64 * 4, U::STORAGE);
        let culled = buffer(
            "sluice mesh culled triangles",
            index_bytes,
            U::STORAGE | U::INDEX | TEST_USAGE,
        );
        let args = buffer(
            "sluice mesh cull draw",
            20,
            U::STORAGE | U::INDIRECT | TEST_USAGE,
        );
        let group = device.create_bind_group(&wgpu::BindGroupDescriptor {
            label: Some("sluice mesh cull"),
            layout: &pipelines.layout,
            entries: &[
                &params,
                input.positions,
                input.indices,
                &placed,
                &kept,
                &before,
                &culled,
                &args,
            ]
            .iter()
            .enumerate()
            .map(|(binding, buffer)| wgpu::BindGroupEntry {
                binding: binding as u32,
                resource: buffer.as_entire_binding(),
            })
            .collect::<Vec<_>>(),
        });
        Some(MeshCull {
            params,
            culled,
            args,
            group,
            made_for: key,
            runs: runs_u32,
            wanted: None,
            recorded: parking_lot::Mutex::new(None),
        })
    }

    /// Sets what this frame draws for: `stamp`, from `mvp` on a target of `viewport`. Returns
    /// whether the passes must run (their last result was for something else), and then
    /// writes their parameters.
    pub fn want(
        &mut self,
        queue: &wgpu::Queue,
        stamp: CullStamp,
        mvp: glam::Mat4,
        viewport: [u32; 2],
    ) -> bool {
        self.wanted = Some(stamp);
        let run = *self.recorded.lock() != self.wanted;
        if run {
            self.write_params(queue, mvp, viewport);
        }
        run
    }

    /// Forgets what the passes computed: the next frame runs them.
    pub fn forget(&self) {
        *self.recorded.lock() = None;
    }

    /// Writes this frame's transform and target size.
    fn write_params(&self, queue: &wgpu::Queue, mvp: glam::Mat4, viewport: [u32; 2]) {
        let (_, _, vertices, triangles) = self.made_for;
        let params = CullParams {
            mvp: mvp.to_cols_array_2d(),
            viewport: [viewport[0] as f32, viewport[1] as f32],
            // Both fit: checked against the buffer limits when made.
            triangles: triangles as u32,
            vertices: vertices as u32,
            runs: self.runs,
            pad: [0; 3],
        };
        queue.write_buffer(&self.params, 0, bytemuck::bytes_of(&params));
    }

    /// Records the four passes (one compute pass), before the opaque pass draws `culled`,
    /// unless their last result is what this frame needs.
    pub fn record(&self, pipelines: &CullPipelines, enc: &mut wgpu::CommandEncoder) {
        let mut recorded = self.recorded.lock();
        if *recorded == self.wanted {
            return;
        }
        *recorded = self.wanted;
        let (_, _, vertices, _) = self.made_for;
        let mut pass = enc.begin_compute_pass(&wgpu::ComputePassDescriptor {
            label: Some("sluice mesh cull"),
            timestamp_writes: None,
        });
        pass.set_bind_group(0, &self.group, &[]);
        let groups = |items: u64| {
            let groups = items.div_ceil(u64::from(WORKGROUP));
            let x = groups.min(u64::from(ROW_GROUPS)) as u32;
            let y = groups.div_ceil(u64::from(ROW_GROUPS)) as u32;
            (x, y)
        };
        pass.set_pipeline(&pipelines.project);
        let (x, y) = groups(vertices as u64);
        pass.dispatch_workgroups(x, y, 1);
        pass.set_pipeline(&pipelines.test);
        let (x, y) = groups(u64::from(self.runs));
        pass.dispatch_workgroups(x, y, 1);
        pass.set_pipeline(&pipelines.scan);
        pass.dispatch_workgroups(1, 1, 1);
        pass.set_pipeline(&pipelines.gather);
        pass.dispatch_workgroups(x, y, 1);
    }
}

/// Counts a culled draw, and the cull's passes where they run.
pub(crate) fn count(counters: &mut Counters, run: bool) {
    counters.mesh_draws_culled += 1;
    counters.mesh_culls_run += u64::from(run);
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The cull's passes are valid WGSL (naga, no GPU needed; `tests/mesh.rs` checks what they
    /// leave out through the pixels).
    #[test]
    fn the_cull_source_is_valid() {
        crate::pipeline::assert_valid_with_constants(
            SHADER,
            &[],
            &[
                (wgpu::naga::ShaderStage::Compute, "project"),
                (wgpu::naga::ShaderStage::Compute, "test"),
                (wgpu::naga::ShaderStage::Compute, "scan"),
                (wgpu::naga::ShaderStage::Compute, "gather"),
            ],
            "mesh cull",
        );
    }

    /// The cull keeps exactly the triangles that hold a pixel centre, with the pixels the
    /// whole draw gives: on a 64 x 64 target seen pixel for pixel (`PanZoomCamera::fit`), each
    /// pixel (i, j) holds 8 triangles around its centre (i + 0.5, j + 0.5) and 8 near its
    /// corner (i, j), at least 0.2 pixel from any centre (65,536 in all, interleaved): the
    /// indirect draw holds the 32,768 first, in their order, and every pixel shows the mesh.
    #[test]
    fn the_cull_keeps_the_triangles_over_pixel_centres() {
        use crate::{Mesh, PanZoomCamera, Scene, Shading};
        use sluice_core::{ndarray, ArraySource};
        use std::sync::Arc;
        let mut renderer = crate::Renderer::new().expect("a device (lavapipe in CI)");
        let n = 64u32;
        let mut points: Vec<f32> = Vec::new();
        let mut centre_triangles = Vec::new();
        let mut indices: Vec<u32> = Vec::new();
        for j in 0..n {
            for i in 0..n {
                let (x, y) = (i as f32, j as f32);
                for k in 0..16 {
                    let d = (k / 2) as f32 * 0.01;
                    let tri = if k % 2 == 0 {
                        [[0.4 + d, 0.4], [0.6, 0.45 + d], [0.45, 0.6]]
                    } else {
                        [[0.05, 0.05 + d], [0.3, 0.05], [0.05 + d, 0.3]]
                    };
                    let first = (points.len() / 3) as u32;
                    for [u, v] in tri {
                        points.extend_from_slice(&[x + u, y + v, 0.5]);
                    }
                    if k % 2 == 0 {
                        centre_triangles.push(first);
                    }
                    indices.extend_from_slice(&[first, first + 1, first + 2]);
                }
            }
        }
        let triangles = indices.len() / 3;
        assert!(worth_culling(triangles, u64::from(n * n)));
        let vertices = points.len() / 3;
        let positions = ndarray::Array2::from_shape_vec((vertices, 3), points).unwrap();
        let mut scene = Scene::new();
        let mesh = Mesh::new(Arc::new(ArraySource::with_channels(positions).unwrap()))
            .with_indices(Arc::new(
                ArraySource::new(ndarray::Array1::from_vec(indices)).unwrap(),
            ))
            .with_color([0.2, 0.6, 0.9, 1.0])
            .with_shading(Shading::Unlit);
        let id = mesh.token.id;
        scene.add(mesh);
        let camera = PanZoomCamera::fit(glam::Vec2::ZERO, glam::Vec2::splat(n as f32), [n, n]);
        let target = renderer.create_target(n, n).unwrap();
        renderer.render(&scene, &camera, &target).unwrap();
        assert_eq!(renderer.counters().mesh_draws_culled, 1);
        let image = renderer.read_image(&target).unwrap();
        let unlit = image
            .pixels()
            .filter(|p| p.0 != [51, 153, 230, 255])
            .count();
        assert_eq!(unlit, 0, "pixels not showing the mesh");

        let res = renderer.resources();
        let cull = res.visuals[&id].derived.cull.as_ref().expect("culled");
        let read = |buffer: &wgpu::Buffer, bytes: u64| -> Vec<u32> {
            let copy = res.device.create_buffer(&wgpu::BufferDescriptor {
                label: None,
                size: bytes,
                usage: wgpu::BufferUsages::MAP_READ | wgpu::BufferUsages::COPY_DST,
                mapped_at_creation: false,
            });
            let mut enc = res.device.create_command_encoder(&Default::default());
            enc.copy_buffer_to_buffer(buffer, 0, &copy, 0, bytes);
            res.queue.submit([enc.finish()]);
            copy.slice(..).map_async(wgpu::MapMode::Read, |_| {});
            res.device
                .poll(wgpu::PollType::wait_indefinitely())
                .unwrap();
            let out = bytemuck::pod_collect_to_vec(&copy.slice(..).get_mapped_range().unwrap());
            out
        };
        let args = read(&cull.args, 20);
        assert_eq!(args, [3 * centre_triangles.len() as u32, 1, 0, 0, 0]);
        let kept = read(&cull.culled, u64::from(args[0]) * 4);
        let firsts: Vec<u32> = kept.chunks(3).map(|t| t[0]).collect();
        assert_eq!(firsts, centre_triangles, "the kept triangles, in order");
    }

    /// Small meshes and meshes of few triangles per pixel are drawn whole.
    #[test]
    fn only_dense_meshes_are_culled() {
        let pixels = 1024 * 1024;
        assert!(!worth_culling(MIN_TRIANGLES - 1, 1));
        assert!(!worth_culling(200_000, pixels));
        assert!(worth_culling(262_144, pixels));
        assert!(worth_culling(2_000_000, pixels));
        assert!(worth_culling(MIN_TRIANGLES, 64 * 64));
    }
}
