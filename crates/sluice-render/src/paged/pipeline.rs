//! The paged image's GPU side: its uniform block, bind group layout and pipelines (one shader
//! per atlas sample kind and filterability).

use std::collections::HashMap;

use crate::format::SampleKind;
use crate::pipeline::{
    gamma_constants, gamma_curve, render_pipeline, uniform_entry, DisplayParams, PassKind,
    PipelineSpec, ShaderParts,
};

use super::format::AtlasFormat;

const COMMON: &str = include_str!("../shaders/common.wgsl");
const SHADER: &str = include_str!("../shaders/paged_image.wgsl");

/// Levels a paged source may have (the uniform block holds one entry per level).
pub(crate) const MAX_LEVELS: usize = 32;

/// `Level` in `shaders/paged_image.wgsl`.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, bytemuck::Pod, bytemuck::Zeroable)]
pub(crate) struct LevelParams {
    pub anchor_page: [i32; 4],
    pub anchor_frac: [f32; 2],
    pub inv_downsample: [f32; 2],
    pub lo: [f32; 2],
    pub hi: [f32; 2],
}

/// `Params` in `shaders/paged_image.wgsl`.
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, bytemuck::Pod, bytemuck::Zeroable)]
pub(crate) struct PagedParams {
    pub transform: [[f32; 4]; 4],
    pub nan_color: [f32; 4],
    pub display: DisplayParams,
    pub rect: [f32; 4],
    pub slot: [i32; 4],
    pub atlas_size: [f32; 2],
    pub page: [f32; 2],
    pub level: u32,
    pub levels: u32,
    pub window: u32,
    pub mode: u32,
    pub linear: u32,
    pub alpha_scale: f32,
    pub opacity: f32,
    pub value_scale: f32,
    pub lv: [LevelParams; MAX_LEVELS],
}

/// What selects a paged shader.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub(crate) struct ShaderKey {
    pub kind: SampleKind,
    pub filterable: bool,
}

impl ShaderKey {
    pub fn of(format: &AtlasFormat) -> Self {
        ShaderKey {
            kind: format.kind,
            filterable: format.filterable,
        }
    }
}

struct Shader {
    layout: wgpu::BindGroupLayout,
    pipeline_layout: wgpu::PipelineLayout,
    module: wgpu::ShaderModule,
    /// By pass, depth write (opacity 1) and gamma curve (`GAMMA_CURVE`, gamma other than 1).
    pipelines: HashMap<(PassKind, bool, bool), wgpu::RenderPipeline>,
}

/// The paged image pipelines, each built on first use.
#[derive(Default)]
pub(crate) struct PagedPipelines {
    shaders: HashMap<ShaderKey, Shader>,
}

/// The linear sample inside a slot: four taps of the slot (`sample_taps_in` in
/// `shaders/paged_image.wgsl`) with NaN taps left out and the weights renormalized, as the
/// dense path samples. Where the atlas is filterable, one hardware sample first (a 1-sample
/// border makes it exact inside a page), and the taps only where it is NaN: a NaN texel whose
/// weight is not zero makes the filter NaN, and hardware that rounds its weights (NVIDIA keeps
/// 8 bits of the position between texels) may weigh a close NaN texel zero, so without the
/// taps whether a sample beside NaN counts would turn on that rounding.
fn linear_wgsl(filterable: bool) -> &'static str {
    if filterable {
        "fn sample_linear_in(f: Found) -> Sample {
    let v = textureSampleLevel(atlas, atlas_sampler, f.pos / params.atlas_size, 0.0) * params.value_scale;
    if (!has_nan(v)) {
        return Sample(v, true);
    }
    return sample_taps_in(f);
}"
    } else {
        "fn sample_linear_in(f: Found) -> Sample {
    return sample_taps_in(f);
}"
    }
}

fn shader_source(key: ShaderKey) -> String {
    // common.wgsl's dense samplers name the sampling prelude's declarations (`DATA_3D`,
    // `VALUE_SCALE`, `MAY_BE_NAN`, `FILTERED`, `fetch`, `sample_hw`: see `sampling.rs`); the
    // paged shader never calls them (it samples its atlas itself), but they must resolve.
    let fetch = "const DATA_3D: bool = false;\nconst VALUE_SCALE: f32 = 1.0;\nconst MAY_BE_NAN: bool = true;\nconst FILTERED: bool = false;\nfn fetch(p: vec3<i32>) -> vec4<f32> { return vec4<f32>(textureLoad(atlas, p.xy, 0)); }\nfn sample_hw(p: vec3<f32>, size: vec3<i32>) -> Sample { return sample_taps(p, size); }\n";
    let body = SHADER
        .replace("SAMPLE_T", key.kind.wgsl())
        .replace("MAX_LEVELS", &MAX_LEVELS.to_string())
        .replace("LINEAR_SAMPLE", linear_wgsl(key.filterable));
    format!("{COMMON}\n{body}\n{fetch}")
}

fn texture_entry(binding: u32, sample_type: wgpu::TextureSampleType) -> wgpu::BindGroupLayoutEntry {
    wgpu::BindGroupLayoutEntry {
        binding,
        visibility: wgpu::ShaderStages::FRAGMENT,
        ty: wgpu::BindingType::Texture {
            sample_type,
            view_dimension: wgpu::TextureViewDimension::D2,
            multisampled: false,
        },
        count: None,
    }
}

impl PagedPipelines {
    fn build(
        device: &wgpu::Device,
        colormap_layout: &wgpu::BindGroupLayout,
        key: ShaderKey,
    ) -> Shader {
        let sample_type = match key.kind {
            SampleKind::Float => wgpu::TextureSampleType::Float {
                filterable: key.filterable,
            },
            kind => kind.texture_sample_type(),
        };
        let entries = [
            uniform_entry(
                size_of::<PagedParams>(),
                wgpu::ShaderStages::VERTEX_FRAGMENT,
            ),
            texture_entry(1, sample_type),
            texture_entry(3, wgpu::TextureSampleType::Uint),
            wgpu::BindGroupLayoutEntry {
                binding: 4,
                visibility: wgpu::ShaderStages::FRAGMENT,
                ty: wgpu::BindingType::Sampler(if key.filterable {
                    wgpu::SamplerBindingType::Filtering
                } else {
                    wgpu::SamplerBindingType::NonFiltering
                }),
                count: None,
            },
        ];
        let parts = ShaderParts::new(
            device,
            "sluice paged image",
            &entries,
            shader_source(key),
            &[colormap_layout],
        );
        Shader {
            layout: parts.layout,
            pipeline_layout: parts.pipeline_layout,
            module: parts.module,
            pipelines: HashMap::new(),
        }
    }

    /// Builds the shader and bind group layout of `key` where missing; group 1 of its
    /// pipelines is `colormap_layout`.
    pub fn ensure_shader(
        &mut self,
        device: &wgpu::Device,
        colormap_layout: &wgpu::BindGroupLayout,
        key: ShaderKey,
    ) {
        self.shaders
            .entry(key)
            .or_insert_with(|| Self::build(device, colormap_layout, key));
    }

    /// The bind group layout of `key` (after [`PagedPipelines::ensure_shader`]).
    pub fn layout(&self, key: ShaderKey) -> &wgpu::BindGroupLayout {
        &self.shaders[&key].layout
    }

    /// Builds the pipeline of `key` for a `pass`, opacity and gamma, where missing: the
    /// gamma curve is compiled out for gamma 1 (`GAMMA_CURVE`, as for dense images).
    pub fn ensure_pass(
        &mut self,
        device: &wgpu::Device,
        colormap_layout: &wgpu::BindGroupLayout,
        key: ShaderKey,
        (pass, opacity, gamma): (PassKind, f32, f32),
    ) {
        let shader = self
            .shaders
            .entry(key)
            .or_insert_with(|| Self::build(device, colormap_layout, key));
        let depth_write = opacity >= 1.0;
        let curve = gamma_curve(gamma);
        shader
            .pipelines
            .entry((pass, depth_write, curve))
            .or_insert_with(|| {
                render_pipeline(
                    device,
                    PipelineSpec {
                        label: "sluice paged image",
                        constants: &gamma_constants(curve),
                        layout: &shader.pipeline_layout,
                        module: &shader.module,
                        topology: wgpu::PrimitiveTopology::TriangleList,
                        depth: pass.depth(depth_write),
                        fragment_entry: "fs_main",
                        targets: &pass.targets(depth_write),
                    },
                )
            });
    }

    /// The pipeline of `key` for a `pass`, opacity and gamma (after
    /// [`PagedPipelines::ensure_pass`]).
    pub fn pipeline(
        &self,
        key: ShaderKey,
        pass: PassKind,
        opacity: f32,
        gamma: f32,
    ) -> Option<&wgpu::RenderPipeline> {
        self.shaders
            .get(&key)?
            .pipelines
            .get(&(pass, opacity >= 1.0, gamma_curve(gamma)))
    }
}

#[cfg(test)]
mod tests {
    use super::{shader_source, ShaderKey};
    use crate::format::SampleKind;
    use wgpu::naga;

    /// The paged image shader is valid WGSL for every atlas kind, filterable or not (naga, no
    /// GPU needed).
    #[test]
    fn the_paged_image_shader_compiles_for_every_atlas_kind() {
        for kind in SampleKind::ALL {
            for filterable in [false, kind.filterable()] {
                let key = ShaderKey { kind, filterable };
                let source = shader_source(key);
                let module = naga::front::wgsl::parse_str(&source)
                    .unwrap_or_else(|e| panic!("{key:?}: {}", e.emit_to_string(&source)));
                naga::valid::Validator::new(
                    naga::valid::ValidationFlags::all(),
                    naga::valid::Capabilities::all(),
                )
                .validate(&module)
                .unwrap_or_else(|e| panic!("{key:?}: {e:?}"));
            }
        }
    }
}
