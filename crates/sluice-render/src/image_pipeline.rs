//! The GPU side of [`crate::Image`]: uniform block, bind group layouts and pipelines.

use std::collections::HashMap;

use sluice_core::{ElementType, Layout};

use crate::format::SampleKind;
use crate::target::TARGET_FORMAT;
use crate::visual::{Image, Interpolation};

const SHADER: &str = include_str!("shaders/image.wgsl");

/// The uniform block of `shaders/image.wgsl` (`Params`), 128 bytes.
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, bytemuck::Pod, bytemuck::Zeroable)]
pub(crate) struct ImageParams {
    transform: [[f32; 4]; 4],
    nan_color: [f32; 4],
    size: [f32; 2],
    clim: [f32; 2],
    gamma: f32,
    mode: u32,
    linear: u32,
    alpha_scale: f32,
    opacity: f32,
    lut_size: u32,
    pad: [u32; 2],
}

impl ImageParams {
    /// Parameters for drawing `image`, whose texture holds `layout`, with `transform` from its
    /// local coordinates to clip space.
    pub fn new(image: &Image, layout: &Layout, transform: glam::Mat4, lut_size: usize) -> Self {
        let shape = layout.shape();
        let clim = image.effective_clim();
        ImageParams {
            transform: transform.to_cols_array_2d(),
            nan_color: image.nan_color(),
            size: [shape.width() as f32, shape.height() as f32],
            clim: [clim[0] as f32, clim[1] as f32],
            gamma: image.gamma(),
            mode: match layout.channels() {
                1 => 0,
                2 => 1,
                3 => 2,
                _ => 3,
            },
            linear: u32::from(image.interpolation() == Interpolation::Linear),
            alpha_scale: alpha_scale(layout.element()),
            opacity: image.opacity(),
            lut_size: lut_size as u32,
            pad: [0; 2],
        }
    }
}

/// 1 / the value of an opaque alpha for `element`.
fn alpha_scale(element: ElementType) -> f32 {
    match element {
        ElementType::U8 => 1.0 / u8::MAX as f32,
        ElementType::I8 => 1.0 / i8::MAX as f32,
        ElementType::U16 => 1.0 / u16::MAX as f32,
        ElementType::I16 => 1.0 / i16::MAX as f32,
        ElementType::U32 => 1.0 / u32::MAX as f32,
        ElementType::I32 => 1.0 / i32::MAX as f32,
        ElementType::F16 | ElementType::F32 | ElementType::F64 => 1.0,
    }
}

pub(crate) struct ImagePipelines {
    by_kind: HashMap<SampleKind, (wgpu::BindGroupLayout, wgpu::RenderPipeline)>,
}

impl ImagePipelines {
    pub fn new(device: &wgpu::Device) -> Self {
        let by_kind = SampleKind::ALL
            .into_iter()
            .map(|kind| (kind, Self::build(device, kind)))
            .collect();
        ImagePipelines { by_kind }
    }

    fn build(
        device: &wgpu::Device,
        kind: SampleKind,
    ) -> (wgpu::BindGroupLayout, wgpu::RenderPipeline) {
        let texture_entry = |binding, sample_type| wgpu::BindGroupLayoutEntry {
            binding,
            visibility: wgpu::ShaderStages::FRAGMENT,
            ty: wgpu::BindingType::Texture {
                sample_type,
                view_dimension: wgpu::TextureViewDimension::D2,
                multisampled: false,
            },
            count: None,
        };
        let layout = device.create_bind_group_layout(&wgpu::BindGroupLayoutDescriptor {
            label: Some("sluice image"),
            entries: &[
                wgpu::BindGroupLayoutEntry {
                    binding: 0,
                    visibility: wgpu::ShaderStages::VERTEX_FRAGMENT,
                    ty: wgpu::BindingType::Buffer {
                        ty: wgpu::BufferBindingType::Uniform,
                        has_dynamic_offset: false,
                        min_binding_size: wgpu::BufferSize::new(size_of::<ImageParams>() as u64),
                    },
                    count: None,
                },
                texture_entry(1, kind.texture_sample_type()),
                texture_entry(2, wgpu::TextureSampleType::Float { filterable: false }),
            ],
        });
        let module = device.create_shader_module(wgpu::ShaderModuleDescriptor {
            label: Some("sluice image shader"),
            source: wgpu::ShaderSource::Wgsl(SHADER.replace("SAMPLE_T", kind.wgsl()).into()),
        });
        let pipeline_layout = device.create_pipeline_layout(&wgpu::PipelineLayoutDescriptor {
            label: Some("sluice image"),
            bind_group_layouts: &[Some(&layout)],
            immediate_size: 0,
        });
        let pipeline = device.create_render_pipeline(&wgpu::RenderPipelineDescriptor {
            label: Some("sluice image"),
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
