//! The GPU side of [`crate::Volume`]: uniform block and pipelines.

use std::collections::HashMap;

use glam::Mat4;
use sluice_core::Layout;

use crate::format::SampleKind;
use crate::image_pipeline::{
    data_texture_entries, lut_entry, shader_source, BrickParams, DisplayParams, TexDim,
};
use crate::proxy::Bricking;
use crate::target::TARGET_FORMAT;
use crate::visual::{Interpolation, Volume, VolumeMode};

const SHADER: &str = include_str!("shaders/volume.wgsl");

/// Upper bound of samples along one ray (a 4096-voxel diagonal at half-voxel steps).
const MAX_STEPS: u32 = 16384;

/// The uniform block of `shaders/volume.wgsl` (`Params`), 224 bytes.
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, bytemuck::Pod, bytemuck::Zeroable)]
pub(crate) struct VolumeParams {
    mvp: [[f32; 4]; 4],
    inv_mvp: [[f32; 4]; 4],
    display: DisplayParams,
    data_size: [i32; 3],
    mode: u32,
    viewport: [f32; 2],
    step: f32,
    linear: u32,
    attenuation: f32,
    threshold: f32,
    opacity: f32,
    max_steps: u32,
    bricks: BrickParams,
}

impl VolumeParams {
    pub fn new(
        volume: &Volume,
        layout: &Layout,
        mvp: Mat4,
        viewport: [u32; 2],
        lut_size: usize,
        bricking: Bricking,
    ) -> Self {
        let [d, h, w] = layout.shape().padded();
        let clim = volume.effective_clim();
        let (mode, attenuation, threshold) = match volume.mode() {
            VolumeMode::Mip => (0, 0.0, 0.0),
            VolumeMode::Translucent { attenuation } => (1, attenuation, 0.0),
            VolumeMode::Iso { threshold } => (2, 0.0, threshold as f32),
        };
        VolumeParams {
            mvp: mvp.to_cols_array_2d(),
            inv_mvp: mvp.inverse().to_cols_array_2d(),
            display: DisplayParams {
                clim: [clim[0] as f32, clim[1] as f32],
                gamma: volume.gamma(),
                lut_size: lut_size as u32,
            },
            data_size: [w as i32, h as i32, d as i32],
            mode,
            viewport: [viewport[0] as f32, viewport[1] as f32],
            step: volume.step(),
            linear: u32::from(volume.interpolation() == Interpolation::Linear),
            attenuation,
            threshold,
            opacity: volume.opacity(),
            max_steps: MAX_STEPS,
            bricks: bricking.into(),
        }
    }
}

pub(crate) struct VolumePipelines {
    by_kind: HashMap<SampleKind, (wgpu::BindGroupLayout, wgpu::RenderPipeline)>,
    depth_layout: wgpu::BindGroupLayout,
}

impl VolumePipelines {
    /// No pipeline yet: each is built on first use.
    pub fn new(device: &wgpu::Device) -> Self {
        VolumePipelines {
            by_kind: HashMap::new(),
            depth_layout: depth_layout(device),
        }
    }

    /// The layout of the scene-depth bind group (group 1).
    pub fn depth_layout(&self) -> &wgpu::BindGroupLayout {
        &self.depth_layout
    }

    /// Builds the pipeline for `kind` if it does not exist yet.
    pub fn ensure(&mut self, device: &wgpu::Device, kind: SampleKind) {
        if !self.by_kind.contains_key(&kind) {
            let built = Self::build(device, kind, &self.depth_layout);
            self.by_kind.insert(kind, built);
        }
    }

    fn build(
        device: &wgpu::Device,
        kind: SampleKind,
        depth_layout: &wgpu::BindGroupLayout,
    ) -> (wgpu::BindGroupLayout, wgpu::RenderPipeline) {
        let mut entries = vec![
            wgpu::BindGroupLayoutEntry {
                binding: 0,
                visibility: wgpu::ShaderStages::FRAGMENT,
                ty: wgpu::BindingType::Buffer {
                    ty: wgpu::BufferBindingType::Uniform,
                    has_dynamic_offset: false,
                    min_binding_size: wgpu::BufferSize::new(size_of::<VolumeParams>() as u64),
                },
                count: None,
            },
            lut_entry(),
        ];
        entries.extend(data_texture_entries(
            kind,
            TexDim::D3,
            wgpu::ShaderStages::FRAGMENT,
        ));
        let layout = device.create_bind_group_layout(&wgpu::BindGroupLayoutDescriptor {
            label: Some("sluice volume"),
            entries: &entries,
        });
        let module = device.create_shader_module(wgpu::ShaderModuleDescriptor {
            label: Some("sluice volume shader"),
            source: wgpu::ShaderSource::Wgsl(shader_source(SHADER, kind, TexDim::D3).into()),
        });
        let pipeline_layout = device.create_pipeline_layout(&wgpu::PipelineLayoutDescriptor {
            label: Some("sluice volume"),
            bind_group_layouts: &[Some(&layout), Some(depth_layout)],
            immediate_size: 0,
        });
        let pipeline = device.create_render_pipeline(&wgpu::RenderPipelineDescriptor {
            label: Some("sluice volume"),
            layout: Some(&pipeline_layout),
            vertex: wgpu::VertexState {
                module: &module,
                entry_point: Some("vs_main"),
                compilation_options: Default::default(),
                buffers: &[],
            },
            primitive: wgpu::PrimitiveState::default(),
            depth_stencil: None,
            multisample: wgpu::MultisampleState::default(),
            fragment: Some(wgpu::FragmentState {
                module: &module,
                entry_point: Some("fs_main"),
                compilation_options: Default::default(),
                targets: &[Some(wgpu::ColorTargetState {
                    format: TARGET_FORMAT,
                    blend: Some(wgpu::BlendState::ALPHA_BLENDING),
                    write_mask: wgpu::ColorWrites::ALL,
                })],
            }),
            multiview_mask: None,
            cache: None,
        });
        (layout, pipeline)
    }

    pub fn layout(&self, kind: SampleKind) -> &wgpu::BindGroupLayout {
        &self.by_kind[&kind].0
    }

    pub fn pipeline(&self, kind: SampleKind) -> &wgpu::RenderPipeline {
        &self.by_kind[&kind].1
    }
}

/// The layout of the bind group through which volumes read the opaque pass's depth.
fn depth_layout(device: &wgpu::Device) -> wgpu::BindGroupLayout {
    device.create_bind_group_layout(&wgpu::BindGroupLayoutDescriptor {
        label: Some("sluice scene depth"),
        entries: &[wgpu::BindGroupLayoutEntry {
            binding: 0,
            visibility: wgpu::ShaderStages::FRAGMENT,
            ty: wgpu::BindingType::Texture {
                sample_type: wgpu::TextureSampleType::Depth,
                view_dimension: wgpu::TextureViewDimension::D2,
                multisampled: false,
            },
            count: None,
        }],
    })
}
