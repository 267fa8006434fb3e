//! Dense meshes drawn without their triangles that cover no pixel centre
//! (`shaders/mesh_cull.wgsl`).
//!
//! A triangle smaller than a pixel often covers no pixel centre, and then gives no fragment:
//! leaving it out of the draw changes no pixel, but spares the draw its vertex fetches and
//! its setup in the rasterizer. For sub-pixel triangles that setup is most of the draw:
//! lavapipe sets every triangle up on the one thread that submits, and GPUs built for compute
//! (H100/H200) have few rasterizers. A mesh with at least a quarter as many triangles as the
//! target has pixels (and at least [`MIN_TRIANGLES`]) is culled on the device, before the
//! opaque pass: its vertices are placed on the target as its vertex shader places them (with
//! a bound on how far that shader's rounding may put them elsewhere), each triangle grown by
//! a [`margin`] (more than the rasterizer moves a vertex when it snaps it to its sub-pixel
//! grid) plus its vertices' bounds is tested against the pixel centres it may cover, and the
//! kept ones are written in their order into an index buffer drawn indirectly. The order
//! keeps blending and equal depths as they were. Triangles with a vertex behind the eye are
//! kept without a test. The result is reused while the buffers' contents, the transform and
//! the target size stay the same.

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

/// Storage buffers the cull's passes bind in one stage.
const STORAGE_BUFFERS: u32 = 7;

/// Invocations of the scan's one workgroup (`@workgroup_size(256)`).
const SCAN_WORKGROUP: u32 = 256;

/// How far (in pixels) triangles are grown before they are tested on `adapter`'s device, or
/// `None` where the device cannot run the cull (too few storage buffers a stage, too small a
/// workgroup or dispatch, no indirect draws): its meshes are drawn whole.
///
/// A rasterizer snaps each vertex to its grid of sub-pixel positions, moving it by up to one
/// step of that grid on each axis: the margin is four such steps, and at least 1/64 of a
/// pixel (which also covers the rounding between the cull's placement of a vertex and the
/// device's). See [`sub_pixel_bits`] for the grid.
pub(crate) fn margin(adapter: &wgpu::Adapter, device: &wgpu::Device) -> Option<f32> {
    let limits = device.limits();
    let capable = limits.max_storage_buffers_per_shader_stage >= STORAGE_BUFFERS
        && limits.max_compute_workgroup_storage_size >= SCAN_WORKGROUP * 4
        && limits.max_compute_invocations_per_workgroup >= SCAN_WORKGROUP
        && limits.max_compute_workgroup_size_x >= SCAN_WORKGROUP
        && limits.max_compute_workgroups_per_dimension >= ROW_GROUPS
        && adapter
            .get_downlevel_capabilities()
            .flags
            .contains(wgpu::DownlevelFlags::INDIRECT_EXECUTION);
    capable.then(|| margin_for_bits(sub_pixel_bits(&adapter.get_info())))
}

/// The margin for a rasterizer with `bits` bits of sub-pixel precision.
fn margin_for_bits(bits: u32) -> f32 {
    (4.0 / (1u64 << bits.min(16)) as f32).max(1.0 / 64.0)
}

/// The bits of sub-pixel precision of the rasterizer of `info`'s device. wgpu does not
/// report Vulkan's `subPixelPrecisionBits` (nor do the other APIs report theirs): Direct3D 12
/// requires 8; NVIDIA's, AMD's and Intel's drivers and Mesa's llvmpipe (lavapipe) report 8
/// (llvmpipe snaps vertices to 1/256 of a pixel); for anything else the least Vulkan and
/// OpenGL allow, 4, is assumed (a margin of 1/4 of a pixel: fewer triangles left out, none
/// wrongly).
fn sub_pixel_bits(info: &wgpu::AdapterInfo) -> u32 {
    const NVIDIA: u32 = 0x10de;
    const AMD: u32 = 0x1002;
    const INTEL: u32 = 0x8086;
    let known = matches!(info.vendor, NVIDIA | AMD | INTEL) || info.driver == "llvmpipe";
    if info.backend == wgpu::Backend::Dx12 || known {
        8
    } else {
        4
    }
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
    margin: f32,
    pad: [u32; 2],
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
    /// What the passes computed and what they were recorded for this frame.
    state: parking_lot::Mutex<CullState>,
}

/// What a cull's buffers hold: `done`, what passes of a submitted frame without errors
/// computed; `recorded`, what passes recorded in the frame being built will compute, known
/// only once it was submitted without errors ([`MeshCull::settle`]; a frame that fails or
/// panics leaves `done` unset or as it was, so the passes run again).
#[derive(Default)]
struct CullState {
    done: Option<CullStamp>,
    recorded: Option<CullStamp>,
}

impl CullState {
    /// Whether the buffers hold the result for `wanted`: passes that computed it ran, and
    /// none recorded since is unsettled (a frame that panicked after its submission).
    fn holds(&self, wanted: Option<CullStamp>) -> bool {
        self.recorded.is_none() && self.done.is_some() && self.done == wanted
    }

    /// See [`MeshCull::begin_frame`].
    fn begin_frame(&mut self) {
        if self.recorded.take().is_some() {
            self.done = None;
        }
    }

    /// See [`MeshCull::settle`].
    fn settle(&mut self, ran: bool) {
        let recorded = self.recorded.take();
        self.done = if ran { recorded.or(self.done) } else { None };
    }
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
        let placed_bytes = (input.vertices as u64).checked_mul(16)?;
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
            state: parking_lot::Mutex::new(CullState::default()),
        })
    }

    /// Sets what this frame draws for: `stamp`, from `mvp` on a target of `viewport`, triangles
    /// grown by `margin` pixels. Returns whether the passes must run (their last result was
    /// for something else), and then writes their parameters.
    pub fn want(
        &mut self,
        queue: &wgpu::Queue,
        stamp: CullStamp,
        mvp: glam::Mat4,
        viewport: [u32; 2],
        margin: f32,
    ) -> bool {
        self.wanted = Some(stamp);
        let run = !self.state.lock().holds(self.wanted);
        if run {
            self.write_params(queue, mvp, viewport, margin);
        }
        run
    }

    /// At the start of a frame: passes recorded in an earlier frame that never settled (it
    /// panicked before its submission) may not have run, so nothing is known to be held.
    pub fn begin_frame(&self) {
        self.state.lock().begin_frame();
    }

    /// After the frame's submission: what the passes recorded in it computed is known now if
    /// `ran` (its commands had no error), else forgotten, so that the next frame runs them.
    pub fn settle(&self, ran: bool) {
        self.state.lock().settle(ran);
    }

    /// Writes this frame's transform, target size and margin.
    fn write_params(&self, queue: &wgpu::Queue, mvp: glam::Mat4, viewport: [u32; 2], margin: f32) {
        let (_, _, vertices, triangles) = self.made_for;
        let params = CullParams {
            mvp: mvp.to_cols_array_2d(),
            viewport: [viewport[0] as f32, viewport[1] as f32],
            // Both fit: checked against the buffer limits when made.
            triangles: triangles as u32,
            vertices: vertices as u32,
            runs: self.runs,
            margin,
            pad: [0; 2],
        };
        queue.write_buffer(&self.params, 0, bytemuck::bytes_of(&params));
    }

    /// Records the four passes (one compute pass), before the opaque pass draws `culled`,
    /// unless their last result is what this frame needs.
    pub fn record(&self, pipelines: &CullPipelines, enc: &mut wgpu::CommandEncoder) {
        let mut state = self.state.lock();
        if state.holds(self.wanted) {
            return;
        }
        state.recorded = self.wanted;
        drop(state);
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
        let (id, target, _scene) = draw_pixel_for_pixel(&mut renderer, points, indices, n);
        assert_eq!(renderer.counters().mesh_draws_culled, 1);
        let image = renderer.read_image(&target).unwrap();
        let mut others: Vec<[u8; 4]> = image
            .pixels()
            .map(|p| p.0)
            .filter(|&p| p != [51, 153, 204, 255])
            .collect();
        let unlit = others.len();
        others.dedup();
        others.truncate(4);
        assert_eq!(unlit, 0, "pixels not showing the mesh, such as {others:?}");

        let (args, kept) = culled(&renderer, id);
        assert_eq!(args, [3 * centre_triangles.len() as u32, 1, 0, 0, 0]);
        let firsts: Vec<u32> = kept.chunks(3).map(|t| t[0]).collect();
        assert_eq!(firsts, centre_triangles, "the kept triangles, in order");
    }

    /// Draws the unlit mesh of `points` (x, y, z a vertex) and `indices` on an `n` x `n`
    /// target seen pixel for pixel (world (x, y) on pixel (x, y)), in the colour
    /// (0.2, 0.6, 0.8); returns the mesh's id, the target and the scene (which keeps the
    /// mesh's GPU state alive).
    fn draw_pixel_for_pixel(
        renderer: &mut crate::Renderer,
        points: Vec<f32>,
        indices: Vec<u32>,
        n: u32,
    ) -> (u64, crate::RenderTarget, crate::Scene) {
        use crate::{Mesh, PanZoomCamera, Scene, Shading};
        use sluice_core::{ndarray, ArraySource};
        use std::sync::Arc;
        let positions = ndarray::Array2::from_shape_vec((points.len() / 3, 3), points).unwrap();
        let mut scene = Scene::new();
        let mesh = Mesh::new(Arc::new(ArraySource::with_channels(positions).unwrap()))
            .with_indices(Arc::new(
                ArraySource::new(ndarray::Array1::from_vec(indices)).unwrap(),
            ))
            // Channels whose 8-bit values are no rounding tie: 0.9 gives 229.5, which
            // lavapipe writes as 230, and on the H200 no pixel had 230.
            .with_color([0.2, 0.6, 0.8, 1.0])
            .with_shading(Shading::Unlit);
        let id = mesh.token.id;
        scene.add(mesh);
        let camera = PanZoomCamera::fit(glam::Vec2::ZERO, glam::Vec2::splat(n as f32), [n, n]);
        let target = renderer.create_target(n, n).unwrap();
        renderer.render(&scene, &camera, &target).unwrap();
        (id, target, scene)
    }

    /// The indirect draw's arguments of the mesh `id`'s cull, and the indices it kept.
    fn culled(renderer: &crate::Renderer, id: u64) -> (Vec<u32>, Vec<u32>) {
        let derived = &renderer.resources().visuals[&id].derived;
        let cull = derived.cull.as_ref().expect("culled");
        let args = read_back(renderer, &cull.args, 20);
        let kept = read_back(renderer, &cull.culled, u64::from(args[0]) * 4);
        (args, kept)
    }

    /// Reads `bytes` of `buffer` back (the cull's buffers can be copied from in tests).
    fn read_back(renderer: &crate::Renderer, buffer: &wgpu::Buffer, bytes: u64) -> Vec<u32> {
        let (device, queue) = (renderer.device(), renderer.queue());
        let copy = device.create_buffer(&wgpu::BufferDescriptor {
            label: None,
            size: bytes.max(4),
            usage: wgpu::BufferUsages::MAP_READ | wgpu::BufferUsages::COPY_DST,
            mapped_at_creation: false,
        });
        let mut enc = device.create_command_encoder(&Default::default());
        enc.copy_buffer_to_buffer(buffer, 0, &copy, 0, bytes.max(4));
        queue.submit([enc.finish()]);
        copy.slice(..).map_async(wgpu::MapMode::Read, |_| {});
        device
            .poll(wgpu::PollType::wait_indefinitely())
            .expect("poll");
        let out = bytemuck::pod_collect_to_vec(&copy.slice(..).get_mapped_range().expect("mapped"));
        out.into_iter().take((bytes / 4) as usize).collect()
    }

    /// Against a CPU reference (f64): 70,001 random triangles of 0.05 to 2.5 pixels (not a
    /// whole number of runs of 32), a tenth of them partly or wholly off the 64 x 64 target,
    /// one vertex in a hundred NaN (placed at the target's centre, as the vertex shader
    /// places it). The cull keeps every triangle that holds a pixel centre or lies within half
    /// the margin of one (so a cull that grew triangles by less than the margin fails), and
    /// only triangles that hold one within twice the margin outside them or span more than 2
    /// centres across or down (kept untested), in their order; and it leaves some out.
    #[test]
    fn the_cull_keeps_what_a_cpu_finds_over_pixel_centres() {
        let mut renderer = crate::Renderer::new().expect("a device (lavapipe in CI)");
        let n = 64u32;
        let triangles = 70_001usize;
        let mut seed = 0x2545_f491_4f6c_dd1du64;
        let mut next = || {
            seed ^= seed << 13;
            seed ^= seed >> 7;
            seed ^= seed << 17;
            (seed >> 11) as f64 / (1u64 << 53) as f64
        };
        let mut points = Vec::with_capacity(triangles * 9);
        for _ in 0..triangles {
            let (cx, cy) = (next() * 84.0 - 10.0, next() * 84.0 - 10.0);
            let size = 0.05 + next() * 2.45;
            for _ in 0..3 {
                let nan = next() < 0.01;
                points.push(if nan {
                    f32::NAN
                } else {
                    (cx + (next() - 0.5) * size) as f32
                });
                points.push((cy + (next() - 0.5) * size) as f32);
                points.push(0.5);
            }
        }
        // Where the vertex shader puts each vertex: pixels, NaN ones at the target's centre.
        let placed: Vec<[f64; 2]> = points
            .chunks(3)
            .map(|p| {
                if p.iter().any(|v| v.is_nan()) {
                    [32.0, 32.0]
                } else {
                    [f64::from(p[0]), f64::from(p[1])]
                }
            })
            .collect();
        let indices: Vec<u32> = (0..triangles as u32 * 3).collect();
        let (id, _target, _scene) = draw_pixel_for_pixel(&mut renderer, points, indices, n);
        let margin = f64::from(renderer.resources().cull_margin.expect("culling"));
        let kept: Vec<usize> = culled(&renderer, id)
            .1
            .chunks(3)
            .map(|t| t[0] as usize / 3)
            .collect();
        // Whether a centre of the target lies in the triangle grown by `grow` (negative:
        // shrunk), and how many centres its box grown by `grow` spans across and down.
        let covers = |t: usize, grow: f64| {
            let [a, b, c] = [placed[3 * t], placed[3 * t + 1], placed[3 * t + 2]];
            let area = (b[0] - a[0]) * (c[1] - a[1]) - (b[1] - a[1]) * (c[0] - a[0]);
            if area == 0.0 {
                return false;
            }
            let s = area.signum();
            (0..n).any(|j| {
                (0..n).any(|i| {
                    let p = [f64::from(i) + 0.5, f64::from(j) + 0.5];
                    [(a, b), (b, c), (c, a)].iter().all(|(u, v)| {
                        let e = [v[0] - u[0], v[1] - u[1]];
                        let f = s * (e[0] * (p[1] - u[1]) - e[1] * (p[0] - u[0]));
                        f >= -grow * e[0].hypot(e[1])
                    })
                })
            })
        };
        let wide = |t: usize, grow: f64| {
            let v = [placed[3 * t], placed[3 * t + 1], placed[3 * t + 2]];
            (0..2).any(|k| {
                let lo = v.iter().map(|p| p[k]).fold(f64::MAX, f64::min) - grow;
                let hi = v.iter().map(|p| p[k]).fold(f64::MIN, f64::max) + grow;
                (hi - 0.5).floor() - (lo - 0.5).ceil() > 1.0
            })
        };
        // Whether a centre of the target lies within `d` (Euclidean) of the triangle: inside
        // it, or that close to one of its edges.
        let within = |t: usize, d: f64| {
            let v = [placed[3 * t], placed[3 * t + 1], placed[3 * t + 2]];
            let centres = |k: usize| {
                let lo = v.iter().map(|p| p[k]).fold(f64::MAX, f64::min) - d;
                let hi = v.iter().map(|p| p[k]).fold(f64::MIN, f64::max) + d;
                let first = (lo - 0.5).ceil().max(0.0) as i64;
                let last = (hi - 0.5).floor().min(f64::from(n) - 1.0) as i64;
                (first..=last).map(|i| i as f64 + 0.5)
            };
            let area = (v[1][0] - v[0][0]) * (v[2][1] - v[0][1])
                - (v[1][1] - v[0][1]) * (v[2][0] - v[0][0]);
            let edge = |k: usize| (v[k], v[(k + 1) % 3]);
            centres(1).any(|y| {
                centres(0).any(|x| {
                    let inside = area != 0.0
                        && (0..3).all(|k| {
                            let (u, w) = edge(k);
                            let f = (w[0] - u[0]) * (y - u[1]) - (w[1] - u[1]) * (x - u[0]);
                            area.signum() * f >= 0.0
                        });
                    inside
                        || (0..3).any(|k| {
                            let (u, w) = edge(k);
                            let e = [w[0] - u[0], w[1] - u[1]];
                            let len2 = e[0] * e[0] + e[1] * e[1];
                            let along = if len2 > 0.0 {
                                ((x - u[0]) * e[0] + (y - u[1]) * e[1]) / len2
                            } else {
                                0.0
                            };
                            let s = along.clamp(0.0, 1.0);
                            (x - u[0] - s * e[0]).hypot(y - u[1] - s * e[1]) <= d
                        })
                })
            })
        };
        let must: Vec<usize> = (0..triangles)
            .filter(|&t| within(t, 0.5 * margin))
            .collect();
        // Slivers too thin for their orientation to be known in f32 are kept untested.
        let sliver = |t: usize| {
            let [a, b, c] = [placed[3 * t], placed[3 * t + 1], placed[3 * t + 2]];
            let (e0, e2) = ([b[0] - a[0], b[1] - a[1]], [a[0] - c[0], a[1] - c[1]]);
            let area = e0[0] * e2[1] - e0[1] * e2[0];
            area.abs() <= 1e-5 * ((e0[0] * e2[1]).abs() + (e0[1] * e2[0]).abs())
        };
        let may = |t: usize| covers(t, 2.0 * margin) || wide(t, 2.0 * margin) || sliver(t);
        assert!(kept.windows(2).all(|w| w[0] < w[1]), "kept out of order");
        let missing: Vec<_> = must
            .iter()
            .filter(|t| kept.binary_search(t).is_err())
            .collect();
        assert!(
            missing.is_empty(),
            "left out although over a centre: {missing:?}"
        );
        let extra: Vec<_> = kept.iter().filter(|&&t| !may(t)).collect();
        let show = |t: usize| [placed[3 * t], placed[3 * t + 1], placed[3 * t + 2]];
        let shown: Vec<_> = extra.iter().map(|&&t| (t, show(t))).collect();
        assert!(extra.is_empty(), "kept although over no centre: {shown:?}");
        assert!(
            must.len() > 1000 && kept.len() < triangles * 9 / 10,
            "{} over a centre, {} kept of {triangles}",
            must.len(),
            kept.len()
        );
    }

    /// A result is held once the frame that recorded its passes settled without errors; not
    /// after a frame with errors, nor after a frame that recorded passes and never settled (it
    /// panicked), whatever frames settle after it without recording.
    #[test]
    fn a_result_is_held_only_after_its_frame_ran() {
        let a: CullStamp = (1, 1, [0; 16], [8, 8]);
        let b: CullStamp = (2, 1, [0; 16], [8, 8]);
        let mut state = CullState::default();
        assert!(!state.holds(Some(a)));
        // A frame records a's passes and runs.
        state.begin_frame();
        state.recorded = Some(a);
        state.settle(true);
        assert!(state.holds(Some(a)) && !state.holds(Some(b)));
        // A frame without the mesh culled settles: still a.
        state.begin_frame();
        state.settle(true);
        assert!(state.holds(Some(a)));
        // A frame records b's passes and has an error: nothing held.
        state.begin_frame();
        state.recorded = Some(b);
        state.settle(false);
        assert!(!state.holds(Some(a)) && !state.holds(Some(b)));
        // A frame records a's passes and runs; the next records b's and panics (no settle);
        // a frame without recording then starts and settles: nothing held.
        state.recorded = Some(a);
        state.settle(true);
        state.begin_frame();
        state.recorded = Some(b);
        assert!(!state.holds(Some(b)));
        state.begin_frame();
        state.settle(true);
        assert!(!state.holds(Some(a)) && !state.holds(Some(b)));
    }

    /// The margin is four steps of the rasterizer's sub-pixel grid, at least 1/64 pixel;
    /// devices not known to snap finer than the least the APIs allow get 1/4.
    #[test]
    fn the_margin_follows_the_sub_pixel_grid() {
        assert_eq!(margin_for_bits(8), 1.0 / 64.0);
        assert_eq!(margin_for_bits(10), 1.0 / 64.0);
        assert_eq!(margin_for_bits(6), 1.0 / 16.0);
        assert_eq!(margin_for_bits(4), 0.25);
        let info = |vendor, driver: &str, backend| wgpu::AdapterInfo {
            vendor,
            driver: driver.into(),
            backend,
            ..wgpu::AdapterInfo::new(wgpu::DeviceType::DiscreteGpu, backend)
        };
        assert_eq!(sub_pixel_bits(&info(0x10de, "", wgpu::Backend::Vulkan)), 8);
        assert_eq!(
            sub_pixel_bits(&info(0x10005, "llvmpipe", wgpu::Backend::Vulkan)),
            8
        );
        assert_eq!(sub_pixel_bits(&info(0x1234, "", wgpu::Backend::Dx12)), 8);
        assert_eq!(sub_pixel_bits(&info(0x1234, "", wgpu::Backend::Vulkan)), 4);
        assert_eq!(sub_pixel_bits(&info(0x106b, "", wgpu::Backend::Metal)), 4);
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
