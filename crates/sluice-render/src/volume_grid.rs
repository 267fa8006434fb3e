//! The volume marcher's coarse min/max grid: per cell of [`GRID_CELL`]^3 voxels, the range
//! of values any sample inside the cell interpolates from, built on the GPU by two compute
//! passes (`shaders/volume_grid.wgsl`) whenever the source's texture changes. The marcher
//! skips the cells that cannot change a ray's result (see `shaders/volume.wgsl`).
//!
//! A grid belongs to a source's texture, not to a visual: volumes sharing a source share it.

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, Ordering};

use wgpu::util::DeviceExt;

use crate::bricking::{brick_binding, BrickParams};
use crate::format::SampleKind;
use crate::pipeline::TexDim;
use crate::pipeline::{data_slots, data_texture_entries, sampled_shader_source, uniform_entry};
use crate::proxy::TextureProxy;

const SHADER: &str = include_str!("shaders/volume_grid.wgsl");

/// Voxels per grid cell edge: 8 keeps the grid small (1/512 of the voxels) while skipping
/// at a resolution close to the data's.
pub(crate) const GRID_CELL: u32 = 8;

/// The binding of the grid in the marcher's group 0.
pub(crate) const GRID_BINDING: u32 = 11;

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

/// One source texture's grid.
pub(crate) struct MinMaxGrid {
    /// The proxy generation and content the grid was made and built for.
    generation: u64,
    content: u64,
    count: [u32; 3],
    key: (SampleKind, bool),
    view: wgpu::TextureView,
    build_group: wgpu::BindGroup,
    dilate_group: wgpu::BindGroup,
    /// Set when the texture's content moved; the next recorded volume pass rebuilds first.
    stale: AtomicBool,
}

impl MinMaxGrid {
    /// Cells per axis, `[x, y, z]`.
    pub fn count(&self) -> [u32; 3] {
        self.count
    }

    /// The grid (cells of (min, max) in `.xy`) as the marcher binds it.
    pub fn view(&self) -> &wgpu::TextureView {
        &self.view
    }
}

struct GridPipeline {
    build_layout: wgpu::BindGroupLayout,
    build: wgpu::ComputePipeline,
    dilate_layout: wgpu::BindGroupLayout,
    dilate: wgpu::ComputePipeline,
}

/// The grids of the sources volumes show, keyed by proxy serial, and their pipelines.
#[derive(Default)]
pub(crate) struct MinMaxGrids {
    pipelines: HashMap<(SampleKind, bool), GridPipeline>,
    grids: HashMap<u64, MinMaxGrid>,
}

impl MinMaxGrids {
    /// Makes sure `proxy`'s grid exists for its current texture, and marks it for a rebuild
    /// if the texture's content moved since it was built.
    pub fn ensure(&mut self, device: &wgpu::Device, proxy: &TextureProxy) {
        let one_brick = proxy.bricking().count == [1; 3];
        let key = (proxy.sample_kind(), one_brick);
        let fresh = self
            .grids
            .get(&proxy.serial())
            .is_some_and(|g| g.generation == proxy.generation() && g.key == key);
        if !fresh {
            let pipeline = self
                .pipelines
                .entry(key)
                .or_insert_with(|| GridPipeline::new(device, key));
            let grid = MinMaxGrid::new(device, pipeline, proxy, key);
            self.grids.insert(proxy.serial(), grid);
        }
        let grid = self.grids.get_mut(&proxy.serial()).expect("made above");
        if !fresh || grid.content != proxy.content() {
            grid.content = proxy.content();
            grid.stale.store(true, Ordering::Relaxed);
        }
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
        let pipeline = &self.pipelines[&grid.key];
        let mut pass = enc.begin_compute_pass(&wgpu::ComputePassDescriptor {
            label: Some("sluice volume grid"),
            timestamp_writes: None,
        });
        let groups = grid.count.map(|c| c.div_ceil(WORKGROUP));
        pass.set_pipeline(&pipeline.build);
        pass.set_bind_group(0, &grid.build_group, &[]);
        pass.dispatch_workgroups(groups[0], groups[1], groups[2]);
        pass.set_pipeline(&pipeline.dilate);
        pass.set_bind_group(0, &grid.dilate_group, &[]);
        pass.dispatch_workgroups(groups[0], groups[1], groups[2]);
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
            let pipeline_layout = device.create_pipeline_layout(&wgpu::PipelineLayoutDescriptor {
                label: Some("sluice volume grid"),
                bind_group_layouts: &[Some(layout)],
                immediate_size: 0,
            });
            let _serial = crate::pipeline::pipeline_creation_lock();
            device.create_compute_pipeline(&wgpu::ComputePipelineDescriptor {
                label: Some("sluice volume grid"),
                layout: Some(&pipeline_layout),
                module: &module,
                entry_point: Some(entry),
                compilation_options: Default::default(),
                cache: None,
            })
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
        proxy: &TextureProxy,
        key: (SampleKind, bool),
    ) -> Self {
        let [d, h, w] = proxy.layout().shape().padded();
        let data_size = [w as u32, h as u32, d as u32];
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
                        | wgpu::TextureUsages::TEXTURE_BINDING,
                    view_formats: &[],
                })
                .create_view(&wgpu::TextureViewDescriptor::default())
        };
        let own = cells("sluice volume grid (own)");
        let view = cells("sluice volume grid");
        let params = GridParams {
            data_size: data_size.map(|n| n as i32),
            cell: GRID_CELL as i32,
            bricks: proxy.bricking().into(),
        };
        let uniform = device.create_buffer_init(&wgpu::util::BufferInitDescriptor {
            label: Some("sluice volume grid params"),
            contents: bytemuck::bytes_of(&params),
            usage: wgpu::BufferUsages::UNIFORM,
        });
        let mut entries = vec![wgpu::BindGroupEntry {
            binding: 0,
            resource: uniform.as_entire_binding(),
        }];
        entries.extend(
            (0..data_slots(TexDim::D3, key.1)).map(|slot| wgpu::BindGroupEntry {
                binding: brick_binding(slot),
                resource: wgpu::BindingResource::TextureView(proxy.brick_view(slot)),
            }),
        );
        entries.push(wgpu::BindGroupEntry {
            binding: 12,
            resource: wgpu::BindingResource::TextureView(&own),
        });
        let build_group = device.create_bind_group(&wgpu::BindGroupDescriptor {
            label: Some("sluice volume grid build"),
            layout: &pipeline.build_layout,
            entries: &entries,
        });
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
            generation: proxy.generation(),
            content: proxy.content(),
            count,
            key,
            view,
            build_group,
            dilate_group,
            stale: AtomicBool::new(true),
        }
    }
}
