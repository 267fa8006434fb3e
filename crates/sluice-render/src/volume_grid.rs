//! The volume marcher's coarse min/max grid: per cell of [`GRID_CELL`]^3 voxels, the range
//! of values any sample inside the cell interpolates from, built on the GPU by two compute
//! passes (`shaders/volume_grid.wgsl`) whenever the source's texture changes. The marcher
//! skips the cells that cannot change a ray's result (see `shaders/volume.wgsl`).
//!
//! The first pass takes each cell's own (min, max). Where the data is one texture of one
//! channel, it reads the voxels from a buffer: the texture is copied into it a slab of cell
//! layers at a time (at most [`SLAB_BYTES`], one buffer reused for every slab) and each load
//! takes a word, up to four voxels (`shaders/volume_grid_slab.wgsl`). A CPU device pays for
//! every texture load as a call into its sampler, so this is several times faster there
//! (docs/architecture.md gives the figures). Other data (bricks, several channels, a texture the device upload path
//! provided, a cell layer larger than a storage binding) is read texel by texel from the
//! texture.
//!
//! On a CPU device a whole upload of one one-channel texture from the host computes the grid
//! on the host as the rows are staged (`host_grid`), and [`MinMaxGrids::ensure`] writes it
//! instead of recording the passes; partial uploads, bricks and device data are built here.
//!
//! A grid belongs to a source's texture, not to a visual: volumes sharing a source share it.

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, Ordering};

use wgpu::util::DeviceExt;

use crate::bricking::{brick_binding, BrickParams, Bricking, BRICK_SLOTS};
use crate::format::SampleKind;
use crate::host_grid::GridSummary;
use crate::pipeline::TexDim;
use crate::pipeline::{data_slots, data_texture_entries, sampled_shader_source, uniform_entry};
use crate::proxy::{HostGridCells, TextureProxy};

const SHADER: &str = include_str!("shaders/volume_grid.wgsl");
const SLAB_SHADER: &str = include_str!("shaders/volume_grid_slab.wgsl");

/// The largest slab of cell layers copied into the build's buffer at a time (one layer
/// whatever its size, up to the device's storage binding limit).
pub(crate) const SLAB_BYTES: u64 = 4 << 20;

/// Voxels per grid cell edge: 8 keeps the grid small (1/512 of the voxels) while skipping
/// at a resolution close to the data's.
pub(crate) const GRID_CELL: u32 = 8;

/// The binding of the grid in the marcher's group 0.
pub(crate) const GRID_BINDING: u32 = 11;

/// What the grid textures may also be used for in tests: being read back.
const TEST_USAGE: wgpu::TextureUsages = if cfg!(test) {
    wgpu::TextureUsages::COPY_SRC
} else {
    wgpu::TextureUsages::empty()
};

const CELL_FORMAT: wgpu::TextureFormat = wgpu::TextureFormat::Rgba32Float;
const WORKGROUP: u32 = 4;

/// `Params` of `shaders/volume_grid.wgsl`, 48 bytes.
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, bytemuck::Pod, bytemuck::Zeroable)]
struct GridParams {
    data_size: [i32; 3],
    cell: i32,
    bricks: BrickParams,
}

/// `Slab` of `shaders/volume_grid_slab.wgsl`, 32 bytes (the cell edge is its constant `CELL`).
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, bytemuck::Pod, bytemuck::Zeroable)]
struct SlabParams {
    width: u32,
    height: u32,
    row_words: u32,
    plane_words: u32,
    first_layer: u32,
    planes: u32,
    pad: [u32; 2],
}

/// How a grid's own (min, max) per cell is read.
enum Build {
    /// Texel by texel from the data texture(s): the group of the `build` pass.
    Texture(wgpu::BindGroup),
    /// From a buffer the texture is copied into, slab by slab.
    Slabs(Slabs),
}

/// The slab build of one texture.
struct Slabs {
    texture: wgpu::Texture,
    /// One slab of rows `bytes_per_row` apart, read by the build as words.
    buffer: wgpu::Buffer,
    bytes_per_row: u32,
    /// The group of the slab pass, `SlabParams` at a dynamic offset per slab.
    group: wgpu::BindGroup,
    params_stride: u32,
    /// Per slab: its first cell layer and its planes of voxels.
    slabs: Vec<(u32, u32)>,
    /// Its pipeline's key (`slab_key`).
    key: (wgpu::TextureFormat, bool),
}

/// One source texture's grid.
pub(crate) struct MinMaxGrid {
    /// The proxy generation and content the grid was made and built for.
    generation: u64,
    content: u64,
    count: [u32; 3],
    key: (SampleKind, bool),
    view: wgpu::TextureView,
    build: Build,
    dilate_group: wgpu::BindGroup,
    /// Set when the texture's content moved; the next recorded volume pass rebuilds first.
    stale: AtomicBool,
    /// What the grid says about the data, where it was computed on the host (a GPU build
    /// is never read back).
    summary: Option<GridSummary>,
}

impl MinMaxGrid {
    /// Cells per axis, `[x, y, z]`.
    pub fn count(&self) -> [u32; 3] {
        self.count
    }

    /// What the grid says about the data, where it was computed on the host.
    pub fn summary(&self) -> Option<GridSummary> {
        self.summary
    }

    /// The grid (cells of (min, max) in `.xy`) as the marcher binds it.
    pub fn view(&self) -> &wgpu::TextureView {
        &self.view
    }

    /// Writes `cells` (the grid's, x fastest) into the grid texture, in place of a build.
    fn write(&self, queue: &wgpu::Queue, cells: &[[f32; 4]]) {
        let [w, h, d] = self.count;
        queue.write_texture(
            self.view.texture().as_image_copy(),
            bytemuck::cast_slice(cells),
            wgpu::TexelCopyBufferLayout {
                offset: 0,
                bytes_per_row: Some(w * 16),
                rows_per_image: Some(h),
            },
            wgpu::Extent3d {
                width: w,
                height: h,
                depth_or_array_layers: d,
            },
        );
    }
}

struct GridPipeline {
    build_layout: wgpu::BindGroupLayout,
    build: wgpu::ComputePipeline,
    dilate_layout: wgpu::BindGroupLayout,
    dilate: wgpu::ComputePipeline,
}

/// The slab build's pipeline for one texture format.
struct SlabPipeline {
    layout: wgpu::BindGroupLayout,
    build: wgpu::ComputePipeline,
}

/// The grids of the sources volumes show, keyed by proxy serial, and their pipelines.
#[derive(Default)]
pub(crate) struct MinMaxGrids {
    pipelines: HashMap<(SampleKind, bool), GridPipeline>,
    slab_pipelines: HashMap<(wgpu::TextureFormat, bool), SlabPipeline>,
    grids: HashMap<u64, MinMaxGrid>,
}

/// What [`MinMaxGrids::ensure`] did to a grid (and `ZPairsSet::ensure` to a paired copy).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum GridUpdate {
    /// It was up to date.
    Unchanged,
    /// It is rebuilt on the GPU before the next march.
    Build,
    /// It was written from the host.
    Written,
}

/// What a grid is built from: a proxy's textures, or (in tests) any texture.
pub(crate) struct GridInput<'a> {
    /// The view bound at each brick slot (`TextureProxy::brick_view`).
    pub views: Vec<&'a wgpu::TextureView>,
    pub bricking: Bricking,
    /// Samples per axis, `[x, y, z]`.
    pub size: [u32; 3],
    /// The one texture holding all the data, where it can be copied from.
    pub copy_source: Option<&'a wgpu::Texture>,
    /// The largest slab the build copies at a time.
    pub slab_bytes: u64,
}

impl<'a> GridInput<'a> {
    fn of(proxy: &'a TextureProxy) -> Self {
        let [d, h, w] = proxy.layout().shape().padded();
        GridInput {
            views: (0..BRICK_SLOTS)
                .map(|slot| proxy.brick_view(slot))
                .collect(),
            bricking: proxy.bricking(),
            size: [w as u32, h as u32, d as u32],
            copy_source: proxy.copy_source(),
            slab_bytes: SLAB_BYTES,
        }
    }
}

impl MinMaxGrids {
    /// Makes sure `proxy`'s grid exists for its current texture, and marks it for a rebuild
    /// if the texture's content moved since it was built, unless `host` is its grid for the
    /// current content (computed while the data was staged, `host_grid`): that is written
    /// into the grid texture instead. Returns what it did.
    pub fn ensure(
        &mut self,
        device: &wgpu::Device,
        queue: &wgpu::Queue,
        proxy: &TextureProxy,
        host: Option<HostGridCells>,
    ) -> GridUpdate {
        let one_brick = proxy.bricking().count == [1; 3];
        let key = (proxy.sample_kind(), one_brick);
        let fresh = self
            .grids
            .get(&proxy.serial())
            .is_some_and(|g| g.generation == proxy.generation() && g.key == key);
        if !fresh {
            let mut grid = self.make(device, &GridInput::of(proxy), key);
            grid.generation = proxy.generation();
            grid.content = proxy.content();
            self.grids.insert(proxy.serial(), grid);
        }
        let grid = self.grids.get_mut(&proxy.serial()).expect("made above");
        if !fresh || grid.content != proxy.content() {
            grid.content = proxy.content();
            let host = host.filter(|h| h.content == proxy.content() && h.grid.count == grid.count);
            match host {
                Some(host) => {
                    grid.write(queue, &host.grid.cells);
                    grid.summary = Some(host.grid.summary);
                    grid.stale.store(false, Ordering::Relaxed);
                    return GridUpdate::Written;
                }
                None => {
                    grid.summary = None;
                    grid.stale.store(true, Ordering::Relaxed);
                    return GridUpdate::Build;
                }
            }
        }
        GridUpdate::Unchanged
    }

    /// A grid for `input` (generation and content 0), with the pipelines it needs.
    fn make(
        &mut self,
        device: &wgpu::Device,
        input: &GridInput<'_>,
        key: (SampleKind, bool),
    ) -> MinMaxGrid {
        self.pipelines
            .entry(key)
            .or_insert_with(|| GridPipeline::new(device, key));
        let slab = input
            .copy_source
            .and_then(|t| slab_plan(device, t, input.slab_bytes).map(|plan| (t, plan)));
        if let Some((texture, _)) = slab {
            let key = slab_key(texture);
            self.slab_pipelines
                .entry(key)
                .or_insert_with(|| SlabPipeline::new(device, key));
        }
        let slab = slab.map(|(t, plan)| (t, plan, &self.slab_pipelines[&slab_key(t)]));
        MinMaxGrid::new(device, &self.pipelines[&key], slab, input, key)
    }

    /// Drops the grids of proxies that no longer exist.
    pub fn retain(&mut self, live: impl Fn(u64) -> bool) {
        self.grids.retain(|&serial, _| live(serial));
    }

    /// The grid of the proxy with `serial` (after [`MinMaxGrids::ensure`]).
    pub fn get(&self, serial: u64) -> &MinMaxGrid {
        &self.grids[&serial]
    }

    /// Records the rebuild of the grid of `serial` if its texture changed since it was
    /// last built.
    pub fn record_build(&self, serial: u64, enc: &mut wgpu::CommandEncoder) {
        let grid = &self.grids[&serial];
        if !grid.stale.swap(false, Ordering::Relaxed) {
            return;
        }
        self.record(grid, enc);
    }

    fn record(&self, grid: &MinMaxGrid, enc: &mut wgpu::CommandEncoder) {
        let pipeline = &self.pipelines[&grid.key];
        let groups = grid.count.map(|c| c.div_ceil(WORKGROUP));
        match &grid.build {
            Build::Texture(group) => {
                let mut pass = enc.begin_compute_pass(&wgpu::ComputePassDescriptor {
                    label: Some("sluice volume grid"),
                    timestamp_writes: None,
                });
                pass.set_pipeline(&pipeline.build);
                pass.set_bind_group(0, group, &[]);
                pass.dispatch_workgroups(groups[0], groups[1], groups[2]);
            }
            Build::Slabs(slabs) => self.record_slabs(slabs, groups, enc),
        }
        let mut pass = enc.begin_compute_pass(&wgpu::ComputePassDescriptor {
            label: Some("sluice volume grid"),
            timestamp_writes: None,
        });
        pass.set_pipeline(&pipeline.dilate);
        pass.set_bind_group(0, &grid.dilate_group, &[]);
        pass.dispatch_workgroups(groups[0], groups[1], groups[2]);
    }

    /// Each slab: a copy of its planes into the buffer, then the pass over its cells (wgpu
    /// orders the copy after the previous slab's reads of the buffer).
    fn record_slabs(&self, slabs: &Slabs, groups: [u32; 3], enc: &mut wgpu::CommandEncoder) {
        let pipeline = &self.slab_pipelines[&slabs.key];
        let size = slabs.texture.size();
        for (i, &(first_layer, planes)) in slabs.slabs.iter().enumerate() {
            enc.copy_texture_to_buffer(
                wgpu::TexelCopyTextureInfo {
                    texture: &slabs.texture,
                    mip_level: 0,
                    origin: wgpu::Origin3d {
                        x: 0,
                        y: 0,
                        z: first_layer * GRID_CELL,
                    },
                    aspect: wgpu::TextureAspect::All,
                },
                wgpu::TexelCopyBufferInfo {
                    buffer: &slabs.buffer,
                    layout: wgpu::TexelCopyBufferLayout {
                        offset: 0,
                        bytes_per_row: Some(slabs.bytes_per_row),
                        rows_per_image: Some(size.height),
                    },
                },
                wgpu::Extent3d {
                    width: size.width,
                    height: size.height,
                    depth_or_array_layers: planes,
                },
            );
            let mut pass = enc.begin_compute_pass(&wgpu::ComputePassDescriptor {
                label: Some("sluice volume grid slab"),
                timestamp_writes: None,
            });
            pass.set_pipeline(&pipeline.build);
            let offset = i as u32 * slabs.params_stride;
            pass.set_bind_group(0, &slabs.group, &[offset]);
            let layers = planes.div_ceil(GRID_CELL);
            pass.dispatch_workgroups(groups[0], groups[1], layers.div_ceil(WORKGROUP));
        }
    }
}

/// How the slab build reads texels of `format`: bytes per texel, the type it compares them
/// in, and the WGSL expression of texel `k` of `word` in that type; `None` for formats it
/// does not read (several channels).
fn slab_decode(format: wgpu::TextureFormat) -> Option<(u32, &'static str, &'static str)> {
    use wgpu::TextureFormat as F;
    Some(match format {
        F::R8Unorm | F::R8Uint => (1, "u32", "(word >> (8u * k)) & 0xffu"),
        F::R8Sint => (1, "i32", "bitcast<i32>(word << (24u - 8u * k)) >> 24u"),
        F::R16Unorm | F::R16Uint => (2, "u32", "(word >> (16u * k)) & 0xffffu"),
        F::R16Sint => (2, "i32", "bitcast<i32>(word << (16u - 16u * k)) >> 16u"),
        F::R16Float => (2, "f32", "unpack2x16float(word)[k]"),
        F::R32Float => (4, "f32", "bitcast<f32>(word)"),
        F::R32Uint => (4, "u32", "word"),
        F::R32Sint => (4, "i32", "bitcast<i32>(word)"),
        _ => return None,
    })
}

/// The slab build's shader for `format` (one `slab_decode` knows); `full`: every cell holds
/// [`GRID_CELL`]^3 voxels.
fn slab_shader(format: wgpu::TextureFormat, full: bool) -> Option<String> {
    let (bytes, ty, decode) = slab_decode(format)?;
    let (low, high, skip) = match ty {
        "u32" => ("0u", "0xffffffffu", "false"),
        "i32" => ("i32(-2147483647 - 1)", "2147483647", "false"),
        _ => ("-3.4e38", "3.4e38", "is_nan(v)"),
    };
    Some(format!(
        "const CELL: u32 = {GRID_CELL}u;\nconst TEXEL_BYTES: u32 = {bytes}u;\nconst FULL: bool = {full};\n\
         alias V = {ty};\nconst V_LOW: V = {low};\nconst V_HIGH: V = {high};\n\
         fn decode(word: u32, k: u32) -> V {{ return {decode}; }}\n\
         fn skip(v: V) -> bool {{ return {skip}; }}\n\
         fn data_value(v: V) -> f32 {{ return f32(v); }}\n{}{SLAB_SHADER}",
        cell_plane(bytes)
    ))
}

/// `cell_plane(first)` of the slab shader written out: every word and texel of one plane
/// of a whole cell, `GRID_CELL` rows of `GRID_CELL` texels of `bytes` each, with no loop.
fn cell_plane(bytes: u32) -> String {
    let per_word = 4 / bytes;
    let mut out = String::from(
        "fn cell_plane(first: u32) -> PlaneRange {\n    var low = V_HIGH;\n    var high = V_LOW;\n    var any = false;\n",
    );
    for row in 0..GRID_CELL {
        for w in 0..GRID_CELL / per_word {
            out += &format!(
                "    {{\n        let word = words[first + {row}u * slab.row_words + {w}u];\n"
            );
            for k in 0..per_word {
                out += &format!(
                    "        let v{k} = decode(word, {k}u);\n        if (!skip(v{k})) {{ low = min(low, v{k}); high = max(high, v{k}); any = true; }}\n"
                );
            }
            out += "    }\n";
        }
    }
    out += "    return PlaneRange(low, high, any);\n}\n";
    out
}

/// What tells slab pipelines apart: the texture's format, and whether every cell is whole
/// (each side a multiple of [`GRID_CELL`]).
fn slab_key(texture: &wgpu::Texture) -> (wgpu::TextureFormat, bool) {
    let size = texture.size();
    let full = [size.width, size.height, size.depth_or_array_layers]
        .iter()
        .all(|n| n % GRID_CELL == 0);
    (texture.format(), full)
}

/// How a texture is copied out for the slab build.
struct SlabPlan {
    /// Rows of the buffer: the texture's, padded to wgpu's copy alignment.
    bytes_per_row: u32,
    /// Per slab: its first cell layer and its planes of voxels.
    slabs: Vec<(u32, u32)>,
}

/// The slabs of `texture` for the slab build. `None` where the format is not one it reads,
/// the texture cannot be copied from, or one cell layer is larger than a storage binding.
fn slab_plan(device: &wgpu::Device, texture: &wgpu::Texture, slab_bytes: u64) -> Option<SlabPlan> {
    let (texel, _, _) = slab_decode(texture.format())?;
    if !texture.usage().contains(wgpu::TextureUsages::COPY_SRC)
        || texture.dimension() != wgpu::TextureDimension::D3
    {
        return None;
    }
    let size = texture.size();
    let bytes_per_row = size
        .width
        .checked_mul(texel)?
        .checked_next_multiple_of(wgpu::COPY_BYTES_PER_ROW_ALIGNMENT)?;
    let layer = u64::from(bytes_per_row)
        .checked_mul(u64::from(size.height))?
        .checked_mul(u64::from(GRID_CELL))?;
    let limits = device.limits();
    if layer
        > limits
            .max_storage_buffer_binding_size
            .min(limits.max_buffer_size)
    {
        return None;
    }
    let layers = size.depth_or_array_layers.div_ceil(GRID_CELL);
    // At least one layer, at most all of them (so `layers_per_slab * GRID_CELL` fits).
    let layers_per_slab = (slab_bytes / layer).clamp(1, u64::from(layers)) as u32;
    let slabs = (0..layers)
        .step_by(layers_per_slab as usize)
        .map(|first| {
            let planes =
                (size.depth_or_array_layers - first * GRID_CELL).min(layers_per_slab * GRID_CELL);
            (first, planes)
        })
        .collect();
    Some(SlabPlan {
        bytes_per_row,
        slabs,
    })
}

impl SlabPipeline {
    fn new(device: &wgpu::Device, (format, full): (wgpu::TextureFormat, bool)) -> Self {
        let layout = device.create_bind_group_layout(&wgpu::BindGroupLayoutDescriptor {
            label: Some("sluice volume grid slab"),
            entries: &[
                wgpu::BindGroupLayoutEntry {
                    binding: 0,
                    visibility: wgpu::ShaderStages::COMPUTE,
                    ty: wgpu::BindingType::Buffer {
                        ty: wgpu::BufferBindingType::Uniform,
                        has_dynamic_offset: true,
                        min_binding_size: wgpu::BufferSize::new(size_of::<SlabParams>() as u64),
                    },
                    count: None,
                },
                wgpu::BindGroupLayoutEntry {
                    binding: 1,
                    visibility: wgpu::ShaderStages::COMPUTE,
                    ty: wgpu::BindingType::Buffer {
                        ty: wgpu::BufferBindingType::Storage { read_only: true },
                        has_dynamic_offset: false,
                        min_binding_size: None,
                    },
                    count: None,
                },
                storage_entry(12),
            ],
        });
        let source = slab_shader(format, full).expect("slab_plan checked the format");
        let module = device.create_shader_module(wgpu::ShaderModuleDescriptor {
            label: Some("sluice volume grid slab"),
            source: wgpu::ShaderSource::Wgsl(source.into()),
        });
        let build = crate::pipeline::compute_pipeline(
            device,
            "sluice volume grid slab",
            &layout,
            &module,
            "build",
        );
        SlabPipeline { layout, build }
    }
}

fn storage_entry(binding: u32) -> wgpu::BindGroupLayoutEntry {
    wgpu::BindGroupLayoutEntry {
        binding,
        visibility: wgpu::ShaderStages::COMPUTE,
        ty: wgpu::BindingType::StorageTexture {
            access: wgpu::StorageTextureAccess::WriteOnly,
            format: CELL_FORMAT,
            view_dimension: wgpu::TextureViewDimension::D3,
        },
        count: None,
    }
}

/// Layout entry of a grid read with `textureLoad` (the marcher's, and the dilate pass's).
pub(crate) fn grid_entry(binding: u32) -> wgpu::BindGroupLayoutEntry {
    wgpu::BindGroupLayoutEntry {
        binding,
        visibility: wgpu::ShaderStages::COMPUTE,
        ty: wgpu::BindingType::Texture {
            sample_type: wgpu::TextureSampleType::Float { filterable: false },
            view_dimension: wgpu::TextureViewDimension::D3,
            multisampled: false,
        },
        count: None,
    }
}

impl GridPipeline {
    fn new(device: &wgpu::Device, (kind, one_brick): (SampleKind, bool)) -> Self {
        let mut entries = vec![uniform_entry(
            size_of::<GridParams>(),
            wgpu::ShaderStages::COMPUTE,
        )];
        entries.extend(data_texture_entries(
            kind,
            TexDim::D3,
            one_brick,
            wgpu::ShaderStages::COMPUTE,
        ));
        entries.push(storage_entry(12));
        let build_layout = device.create_bind_group_layout(&wgpu::BindGroupLayoutDescriptor {
            label: Some("sluice volume grid build"),
            entries: &entries,
        });
        let dilate_layout = device.create_bind_group_layout(&wgpu::BindGroupLayoutDescriptor {
            label: Some("sluice volume grid dilate"),
            entries: &[grid_entry(13), storage_entry(14)],
        });
        let module = device.create_shader_module(wgpu::ShaderModuleDescriptor {
            label: Some("sluice volume grid"),
            source: wgpu::ShaderSource::Wgsl(
                sampled_shader_source(SHADER, kind, TexDim::D3, one_brick, false).into(),
            ),
        });
        let pipeline = |layout: &wgpu::BindGroupLayout, entry: &str| {
            crate::pipeline::compute_pipeline(device, "sluice volume grid", layout, &module, entry)
        };
        GridPipeline {
            build: pipeline(&build_layout, "build"),
            dilate: pipeline(&dilate_layout, "dilate"),
            build_layout,
            dilate_layout,
        }
    }
}

impl MinMaxGrid {
    fn new(
        device: &wgpu::Device,
        pipeline: &GridPipeline,
        slab: Option<(&wgpu::Texture, SlabPlan, &SlabPipeline)>,
        input: &GridInput<'_>,
        key: (SampleKind, bool),
    ) -> Self {
        let data_size = input.size;
        let count = data_size.map(|n| n.div_ceil(GRID_CELL).max(1));
        let cells = |label| {
            device
                .create_texture(&wgpu::TextureDescriptor {
                    label: Some(label),
                    size: wgpu::Extent3d {
                        width: count[0],
                        height: count[1],
                        depth_or_array_layers: count[2],
                    },
                    mip_level_count: 1,
                    sample_count: 1,
                    dimension: wgpu::TextureDimension::D3,
                    format: CELL_FORMAT,
                    usage: wgpu::TextureUsages::STORAGE_BINDING
                        | wgpu::TextureUsages::TEXTURE_BINDING
                        | wgpu::TextureUsages::COPY_DST
                        | TEST_USAGE,
                    view_formats: &[],
                })
                .create_view(&wgpu::TextureViewDescriptor::default())
        };
        let own = cells("sluice volume grid (own)");
        let view = cells("sluice volume grid");
        let params = GridParams {
            data_size: data_size.map(|n| n as i32),
            cell: GRID_CELL as i32,
            bricks: input.bricking.into(),
        };
        let build = match slab {
            Some((texture, plan, slab_pipeline)) => {
                Build::Slabs(Slabs::new(device, slab_pipeline, texture, plan, &own))
            }
            None => {
                let uniform = device.create_buffer_init(&wgpu::util::BufferInitDescriptor {
                    label: Some("sluice volume grid params"),
                    contents: bytemuck::bytes_of(&params),
                    usage: wgpu::BufferUsages::UNIFORM,
                });
                let mut entries = vec![wgpu::BindGroupEntry {
                    binding: 0,
                    resource: uniform.as_entire_binding(),
                }];
                entries.extend((0..data_slots(TexDim::D3, key.1)).map(|slot| {
                    wgpu::BindGroupEntry {
                        binding: brick_binding(slot),
                        resource: wgpu::BindingResource::TextureView(input.views[slot]),
                    }
                }));
                entries.push(wgpu::BindGroupEntry {
                    binding: 12,
                    resource: wgpu::BindingResource::TextureView(&own),
                });
                Build::Texture(device.create_bind_group(&wgpu::BindGroupDescriptor {
                    label: Some("sluice volume grid build"),
                    layout: &pipeline.build_layout,
                    entries: &entries,
                }))
            }
        };
        let dilate_group = device.create_bind_group(&wgpu::BindGroupDescriptor {
            label: Some("sluice volume grid dilate"),
            layout: &pipeline.dilate_layout,
            entries: &[
                wgpu::BindGroupEntry {
                    binding: 13,
                    resource: wgpu::BindingResource::TextureView(&own),
                },
                wgpu::BindGroupEntry {
                    binding: 14,
                    resource: wgpu::BindingResource::TextureView(&view),
                },
            ],
        });
        MinMaxGrid {
            generation: 0,
            content: 0,
            count,
            key,
            view,
            build,
            dilate_group,
            stale: AtomicBool::new(true),
            summary: None,
        }
    }
}

impl Slabs {
    fn new(
        device: &wgpu::Device,
        pipeline: &SlabPipeline,
        texture: &wgpu::Texture,
        plan: SlabPlan,
        own: &wgpu::TextureView,
    ) -> Self {
        let SlabPlan {
            bytes_per_row,
            slabs,
        } = plan;
        let size = texture.size();
        let planes = slabs.iter().map(|&(_, p)| p).max().unwrap_or(1);
        // slab_plan bounded one slab by the storage binding limit.
        let buffer = device.create_buffer(&wgpu::BufferDescriptor {
            label: Some("sluice volume grid slab"),
            size: u64::from(bytes_per_row) * u64::from(size.height) * u64::from(planes),
            usage: wgpu::BufferUsages::STORAGE | wgpu::BufferUsages::COPY_DST,
            mapped_at_creation: false,
        });
        let slab_params: Vec<SlabParams> = slabs
            .iter()
            .map(|&(first_layer, planes)| SlabParams {
                width: size.width,
                height: size.height,
                row_words: bytes_per_row / 4,
                plane_words: bytes_per_row / 4 * size.height,
                first_layer,
                planes,
                pad: [0; 2],
            })
            .collect();
        let (uniform, params_stride) = crate::pipeline::dynamic_uniforms(
            device,
            "sluice volume grid slab params",
            &slab_params,
        );
        let group = device.create_bind_group(&wgpu::BindGroupDescriptor {
            label: Some("sluice volume grid slab"),
            layout: &pipeline.layout,
            entries: &[
                wgpu::BindGroupEntry {
                    binding: 0,
                    resource: wgpu::BindingResource::Buffer(wgpu::BufferBinding {
                        buffer: &uniform,
                        offset: 0,
                        size: wgpu::BufferSize::new(size_of::<SlabParams>() as u64),
                    }),
                },
                wgpu::BindGroupEntry {
                    binding: 1,
                    resource: buffer.as_entire_binding(),
                },
                wgpu::BindGroupEntry {
                    binding: 12,
                    resource: wgpu::BindingResource::TextureView(own),
                },
            ],
        });
        Slabs {
            texture: texture.clone(),
            buffer,
            bytes_per_row,
            group,
            params_stride,
            slabs,
            key: slab_key(texture),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::host_grid::HostGrid;
    use wgpu::TextureFormat as F;

    /// The f16 bits of `v`, an integer of magnitude below 2048 (exact in f16).
    fn f16_bits(v: i32) -> u16 {
        if v == 0 {
            return 0;
        }
        let sign = if v < 0 { 0x8000u16 } else { 0 };
        let a = v.unsigned_abs();
        let e = 31 - a.leading_zeros();
        let mantissa = ((a << (10 - e)) & 0x3ff) as u16;
        sign | ((e as u16 + 15) << 10) | mantissa
    }

    /// Every format the slab build and the host grid read, with its sample kind.
    const FORMATS: [(F, SampleKind); 9] = [
        (F::R8Unorm, SampleKind::Unorm8),
        (F::R8Uint, SampleKind::Uint),
        (F::R8Sint, SampleKind::Sint),
        (F::R16Uint, SampleKind::Uint),
        (F::R16Sint, SampleKind::Sint),
        (F::R16Float, SampleKind::FilterFloat),
        (F::R32Float, SampleKind::Float),
        (F::R32Uint, SampleKind::Uint),
        (F::R32Sint, SampleKind::Sint),
    ];

    /// Texel `i` of a test volume, as its bytes and its value; `nan`: a NaN where the format
    /// has one (float formats also get NaN at some other texels).
    fn texel(format: F, i: usize, nan: bool) -> (Vec<u8>, f32) {
        let r = (i as u32).wrapping_mul(2_654_435_761).rotate_left(13);
        let nan = nan || r.is_multiple_of(17);
        match format {
            F::R8Unorm | F::R8Uint => (vec![r as u8], f32::from(r as u8)),
            F::R8Sint => (vec![r as u8], f32::from(r as u8 as i8)),
            F::R16Uint => ((r as u16).to_le_bytes().to_vec(), f32::from(r as u16)),
            F::R16Sint => ((r as i16).to_le_bytes().to_vec(), f32::from(r as i16)),
            F::R16Float if nan => (0x7e00u16.to_le_bytes().to_vec(), f32::NAN),
            F::R16Float => {
                let v = (r % 4000) as i32 - 2000;
                (f16_bits(v).to_le_bytes().to_vec(), v as f32)
            }
            F::R32Float if nan => (f32::NAN.to_le_bytes().to_vec(), f32::NAN),
            F::R32Float => {
                let v = (r % 100_000) as f32 * 0.37 - 18_000.0;
                (v.to_le_bytes().to_vec(), v)
            }
            F::R32Uint => ((r >> 4).to_le_bytes().to_vec(), (r >> 4) as f32),
            F::R32Sint => (
                ((r as i32) >> 4).to_le_bytes().to_vec(),
                ((r as i32) >> 4) as f32,
            ),
            _ => unreachable!("not a test format"),
        }
    }

    /// A test volume of `size` texels (`[x, y, z]`) as its bytes and its values, x fastest;
    /// float formats have NaN throughout the first cell (and at some other texels).
    fn test_volume(format: F, size: [usize; 3]) -> (Vec<u8>, Vec<f32>) {
        let texels = size[0] * size[1] * size[2];
        let mut bytes = Vec::new();
        let mut values = Vec::with_capacity(texels);
        for i in 0..texels {
            let (x, y, z) = (i % size[0], i / size[0] % size[1], i / size[0] / size[1]);
            let first = x < 8 && y < 8 && z < 8;
            let may_be_nan = matches!(format, F::R16Float | F::R32Float);
            let (b, v) = texel(format, i, first && may_be_nan);
            bytes.extend(b);
            values.push(v);
        }
        (bytes, values)
    }

    /// The grid computed on the CPU: each cell's (min, max) over its voxels, NaN left out
    /// ((+big, -big) when all are NaN), widened to its 26 neighbours.
    fn cpu_grid(values: &[f32], size: [usize; 3]) -> Vec<[f32; 2]> {
        let cell = GRID_CELL as usize;
        let count = size.map(|n| n.div_ceil(cell));
        let mut own = vec![[3.4e38f32, -3.4e38f32]; count[0] * count[1] * count[2]];
        for z in 0..size[2] {
            for y in 0..size[1] {
                for x in 0..size[0] {
                    let v = values[(z * size[1] + y) * size[0] + x];
                    if v.is_nan() {
                        continue;
                    }
                    let c = &mut own[((z / cell) * count[1] + y / cell) * count[0] + x / cell];
                    c[0] = c[0].min(v);
                    c[1] = c[1].max(v);
                }
            }
        }
        let mut widened = own.clone();
        for z in 0..count[2] {
            for y in 0..count[1] {
                for x in 0..count[0] {
                    let mut range = [3.4e38f32, -3.4e38f32];
                    for nz in z.saturating_sub(1)..=(z + 1).min(count[2] - 1) {
                        for ny in y.saturating_sub(1)..=(y + 1).min(count[1] - 1) {
                            for nx in x.saturating_sub(1)..=(x + 1).min(count[0] - 1) {
                                let c = own[(nz * count[1] + ny) * count[0] + nx];
                                range = [range[0].min(c[0]), range[1].max(c[1])];
                            }
                        }
                    }
                    widened[(z * count[1] + y) * count[0] + x] = range;
                }
            }
        }
        widened
    }

    /// Reads a grid back as (min, max) per cell, x fastest.
    fn read_grid(device: &wgpu::Device, queue: &wgpu::Queue, grid: &MinMaxGrid) -> Vec<[f32; 2]> {
        let [w, h, d] = grid.count;
        let bytes_per_row = (w * 16).next_multiple_of(wgpu::COPY_BYTES_PER_ROW_ALIGNMENT);
        let buffer = device.create_buffer(&wgpu::BufferDescriptor {
            label: None,
            size: u64::from(bytes_per_row * h * d),
            usage: wgpu::BufferUsages::COPY_DST | wgpu::BufferUsages::MAP_READ,
            mapped_at_creation: false,
        });
        let mut enc = device.create_command_encoder(&Default::default());
        enc.copy_texture_to_buffer(
            grid.view.texture().as_image_copy(),
            wgpu::TexelCopyBufferInfo {
                buffer: &buffer,
                layout: wgpu::TexelCopyBufferLayout {
                    offset: 0,
                    bytes_per_row: Some(bytes_per_row),
                    rows_per_image: Some(h),
                },
            },
            grid.view.texture().size(),
        );
        queue.submit([enc.finish()]);
        buffer
            .slice(..)
            .map_async(wgpu::MapMode::Read, |r| r.expect("map"));
        device
            .poll(wgpu::PollType::wait_indefinitely())
            .expect("poll");
        let data = buffer.slice(..).get_mapped_range().expect("mapped");
        let mut out = Vec::new();
        for row in data.chunks(bytes_per_row as usize) {
            for c in row[..w as usize * 16].chunks(16) {
                let f = |i: usize| f32::from_le_bytes(c[i * 4..i * 4 + 4].try_into().unwrap());
                out.push([f(0), f(1)]);
            }
        }
        out
    }

    /// Both builds, the slab build over several slabs and over one, give the grid a CPU
    /// computes, exactly, for every format the slab build reads, whole cells and cut ones.
    #[test]
    fn slab_and_texture_builds_equal_the_cpu_grid() {
        let renderer = crate::Renderer::new().expect("a device (lavapipe in CI)");
        let (device, queue) = (renderer.device(), renderer.queue());
        let mut grids = MinMaxGrids::default();
        for (format, kind) in FORMATS {
            for size in [[16usize, 24, 32], [21, 13, 19]] {
                let texels = size[0] * size[1] * size[2];
                let (bytes, values) = test_volume(format, size);
                let extent = wgpu::Extent3d {
                    width: size[0] as u32,
                    height: size[1] as u32,
                    depth_or_array_layers: size[2] as u32,
                };
                let texture = device.create_texture(&wgpu::TextureDescriptor {
                    label: None,
                    size: extent,
                    mip_level_count: 1,
                    sample_count: 1,
                    dimension: wgpu::TextureDimension::D3,
                    format,
                    usage: wgpu::TextureUsages::TEXTURE_BINDING
                        | wgpu::TextureUsages::COPY_DST
                        | wgpu::TextureUsages::COPY_SRC,
                    view_formats: &[],
                });
                let texel_bytes = bytes.len() / texels;
                queue.write_texture(
                    texture.as_image_copy(),
                    &bytes,
                    wgpu::TexelCopyBufferLayout {
                        offset: 0,
                        bytes_per_row: Some((size[0] * texel_bytes) as u32),
                        rows_per_image: Some(size[1] as u32),
                    },
                    extent,
                );
                let view = texture.create_view(&Default::default());
                let expected = cpu_grid(&values, size);
                let builds = [
                    ("slabs of one layer", Some(&texture), 1),
                    ("one slab", Some(&texture), SLAB_BYTES),
                    ("texture", None, SLAB_BYTES),
                ];
                for (name, copy_source, slab_bytes) in builds {
                    let input = GridInput {
                        views: vec![&view; BRICK_SLOTS],
                        bricking: Bricking {
                            size: extent_xyz(extent),
                            count: [1; 3],
                        },
                        size: extent_xyz(extent),
                        copy_source,
                        slab_bytes,
                    };
                    let grid = grids.make(device, &input, (kind, true));
                    let slabs = match &grid.build {
                        Build::Slabs(s) => s.slabs.len(),
                        Build::Texture(_) => 0,
                    };
                    match name {
                        "slabs of one layer" => assert_eq!(slabs, size[2].div_ceil(8)),
                        "one slab" => assert_eq!(slabs, 1),
                        _ => assert_eq!(slabs, 0),
                    }
                    let mut enc = device.create_command_encoder(&Default::default());
                    grids.record(&grid, &mut enc);
                    queue.submit([enc.finish()]);
                    let got = read_grid(device, queue, &grid);
                    assert_eq!(got.len(), expected.len());
                    for (i, (g, e)) in got.iter().zip(&expected).enumerate() {
                        assert!(
                            g[0].to_bits() == e[0].to_bits() && g[1].to_bits() == e[1].to_bits(),
                            "{format:?} {size:?} {name}: cell {i} is {g:?}, the CPU says {e:?}"
                        );
                    }
                }
            }
        }
    }

    /// The grid computed on the host while a volume is staged, fed in four pieces that cut
    /// cells on every axis (one piece's rows at addresses not aligned for the texel type),
    /// written into a grid texture, equals the CPU's grid bit for bit: the same grid the GPU
    /// builds give in the test above.
    #[test]
    fn host_grid_equals_the_cpu_grid() {
        use sluice_core::Region;
        let renderer = crate::Renderer::new().expect("a device (lavapipe in CI)");
        let (device, queue) = (renderer.device(), renderer.queue());
        let mut grids = MinMaxGrids::default();
        for (format, kind) in FORMATS {
            for size in [[16usize, 24, 32], [21, 13, 19]] {
                let [w, h, d] = size;
                let texels = w * h * d;
                let (bytes, values) = test_volume(format, size);
                let tb = bytes.len() / texels;
                let size_u32 = size.map(|n| n as u32);
                let mut host = HostGrid::new(format, size_u32).expect("a format it reads");
                // [plane, row, column] origins and sizes: z < 5; z >= 5 and y < 7; the rest
                // cut at x = 3.
                let pieces = [
                    Region {
                        origin: [0, 0, 0],
                        size: [5, h, w],
                    },
                    Region {
                        origin: [5, 0, 0],
                        size: [d - 5, 7, w],
                    },
                    Region {
                        origin: [5, 7, 0],
                        size: [d - 5, h - 7, 3],
                    },
                    Region {
                        origin: [5, 7, 3],
                        size: [d - 5, h - 7, w - 3],
                    },
                ];
                for (n, piece) in pieces.iter().enumerate() {
                    host.begin_piece(*piece);
                    for p in 0..piece.size[0] {
                        for r in 0..piece.size[1] {
                            let [z, y, x] =
                                [piece.origin[0] + p, piece.origin[1] + r, piece.origin[2]];
                            let at = ((z * h + y) * w + x) * tb;
                            let row = &bytes[at..at + piece.size[2] * tb];
                            if n == 3 {
                                // One byte in, so that wider texels are not aligned.
                                let mut shifted = vec![0u8; row.len() + 1];
                                shifted[1..].copy_from_slice(row);
                                host.row(p, r, &shifted[1..]);
                            } else {
                                host.row(p, r, row);
                            }
                        }
                    }
                    host.end_piece();
                }
                let finished = host.finish().expect("every texel seen");
                let cells = finished.cells;
                let extent = wgpu::Extent3d {
                    width: size_u32[0],
                    height: size_u32[1],
                    depth_or_array_layers: size_u32[2],
                };
                let texture = device.create_texture(&wgpu::TextureDescriptor {
                    label: None,
                    size: extent,
                    mip_level_count: 1,
                    sample_count: 1,
                    dimension: wgpu::TextureDimension::D3,
                    format,
                    usage: wgpu::TextureUsages::TEXTURE_BINDING,
                    view_formats: &[],
                });
                let view = texture.create_view(&Default::default());
                let input = GridInput {
                    views: vec![&view; BRICK_SLOTS],
                    bricking: Bricking {
                        size: size_u32,
                        count: [1; 3],
                    },
                    size: size_u32,
                    copy_source: None,
                    slab_bytes: SLAB_BYTES,
                };
                let grid = grids.make(device, &input, (kind, true));
                grid.write(queue, &cells);
                let got = read_grid(device, queue, &grid);
                let expected = cpu_grid(&values, size);
                assert_eq!(got.len(), expected.len());
                for (i, (g, e)) in got.iter().zip(&expected).enumerate() {
                    assert!(
                        g[0].to_bits() == e[0].to_bits() && g[1].to_bits() == e[1].to_bits(),
                        "{format:?} {size:?}: cell {i} is {g:?}, the CPU says {e:?}"
                    );
                }
                // The summary, from the values and the CPU grid.
                let highest = values
                    .iter()
                    .filter(|v| !v.is_nan())
                    .fold(-3.4e38f32, |a, &v| a.max(v));
                let filled: Vec<f32> = expected
                    .iter()
                    .filter(|e| e[0] <= e[1])
                    .map(|e| e[1])
                    .collect();
                let lowest_high = filled.iter().copied().reduce(f32::min).unwrap_or(-3.4e38);
                assert_eq!(
                    finished.summary,
                    GridSummary {
                        lowest_high,
                        highest,
                        any_empty: filled.len() < expected.len(),
                    },
                    "{format:?} {size:?}: the summary"
                );
            }
        }
    }

    /// A grid is only given where every texel was staged.
    #[test]
    fn host_grid_of_part_of_the_texture_is_none() {
        let mut host = HostGrid::new(F::R8Unorm, [16, 16, 16]).expect("reads u8");
        host.begin_piece(sluice_core::Region {
            origin: [0, 0, 0],
            size: [8, 16, 16],
        });
        for p in 0..8 {
            for r in 0..16 {
                host.row(p, r, &[7; 16]);
            }
        }
        assert!(host.finish().is_none());
        assert!(HostGrid::new(F::Rgba8Unorm, [16, 16, 16]).is_none());
    }

    fn extent_xyz(e: wgpu::Extent3d) -> [u32; 3] {
        [e.width, e.height, e.depth_or_array_layers]
    }
}
