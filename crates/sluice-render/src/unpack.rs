//! GPU buffer to texture copies by a compute pass, for device-resident sources.
//!
//! A device-resident frame reaches its texture from a GPU buffer (memory shared with CUDA or
//! another process). `copy_buffer_to_texture` of a 3840 x 2160 RGBA8 frame takes 0.39 ms of
//! GPU time on an H200, whose copy path is a small part of the chip; a compute pass that reads
//! the buffer and stores texels takes 0.04 ms (`cargo bench --bench frames`). Textures of
//! device-resident sources are therefore created with `STORAGE_BINDING` where the format
//! allows it, and their copies go through [`Unpacker`] when the texel is a whole number of
//! 32-bit words and the buffer can be bound as storage; other copies use copy commands.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};

use parking_lot::Mutex;

/// Threads per workgroup along x and y (z is one plane per workgroup).
const GROUP: u32 = 16;

/// How the shader turns words at `src[i]`, `src[i + 1u]`, ... into the value it stores:
/// the WGSL storage format, the words per texel and the expression.
fn texel_code(format: wgpu::TextureFormat) -> Option<(&'static str, u32, &'static str)> {
    use wgpu::TextureFormat as F;
    Some(match format {
        F::Rgba8Unorm => ("rgba8unorm", 1, "unpack4x8unorm(src[i])"),
        F::Rgba8Snorm => ("rgba8snorm", 1, "unpack4x8snorm(src[i])"),
        F::Rgba8Uint => (
            "rgba8uint",
            1,
            "vec4<u32>(extractBits(src[i], 0u, 8u), extractBits(src[i], 8u, 8u), extractBits(src[i], 16u, 8u), extractBits(src[i], 24u, 8u))",
        ),
        F::Rgba8Sint => (
            "rgba8sint",
            1,
            "vec4<i32>(extractBits(bitcast<i32>(src[i]), 0u, 8u), extractBits(bitcast<i32>(src[i]), 8u, 8u), extractBits(bitcast<i32>(src[i]), 16u, 8u), extractBits(bitcast<i32>(src[i]), 24u, 8u))",
        ),
        F::R32Float => ("r32float", 1, "vec4<f32>(bitcast<f32>(src[i]), 0.0, 0.0, 1.0)"),
        F::R32Uint => ("r32uint", 1, "vec4<u32>(src[i], 0u, 0u, 1u)"),
        F::R32Sint => ("r32sint", 1, "vec4<i32>(bitcast<i32>(src[i]), 0, 0, 1)"),
        F::Rg32Float => (
            "rg32float",
            2,
            "vec4<f32>(bitcast<f32>(src[i]), bitcast<f32>(src[i + 1u]), 0.0, 1.0)",
        ),
        F::Rg32Uint => ("rg32uint", 2, "vec4<u32>(src[i], src[i + 1u], 0u, 1u)"),
        F::Rg32Sint => (
            "rg32sint",
            2,
            "vec4<i32>(bitcast<i32>(src[i]), bitcast<i32>(src[i + 1u]), 0, 1)",
        ),
        F::Rgba16Float => (
            "rgba16float",
            2,
            "vec4<f32>(unpack2x16float(src[i]), unpack2x16float(src[i + 1u]))",
        ),
        F::Rgba16Uint => (
            "rgba16uint",
            2,
            "vec4<u32>(extractBits(src[i], 0u, 16u), extractBits(src[i], 16u, 16u), extractBits(src[i + 1u], 0u, 16u), extractBits(src[i + 1u], 16u, 16u))",
        ),
        F::Rgba16Sint => (
            "rgba16sint",
            2,
            "vec4<i32>(extractBits(bitcast<i32>(src[i]), 0u, 16u), extractBits(bitcast<i32>(src[i]), 16u, 16u), extractBits(bitcast<i32>(src[i + 1u]), 0u, 16u), extractBits(bitcast<i32>(src[i + 1u]), 16u, 16u))",
        ),
        F::Rgba32Float => (
            "rgba32float",
            4,
            "bitcast<vec4<f32>>(vec4<u32>(src[i], src[i + 1u], src[i + 2u], src[i + 3u]))",
        ),
        F::Rgba32Uint => (
            "rgba32uint",
            4,
            "vec4<u32>(src[i], src[i + 1u], src[i + 2u], src[i + 3u])",
        ),
        F::Rgba32Sint => (
            "rgba32sint",
            4,
            "bitcast<vec4<i32>>(vec4<u32>(src[i], src[i + 1u], src[i + 2u], src[i + 3u]))",
        ),
        _ => return None,
    })
}

/// Whether textures of `format` can be filled by [`Unpacker`] on `device`: a word-sized texel
/// the shader knows, and storage binding allowed for the format.
pub(crate) fn supports(device: &wgpu::Device, format: wgpu::TextureFormat) -> bool {
    texel_code(format).is_some()
        && format
            .guaranteed_format_features(device.features())
            .allowed_usages
            .contains(wgpu::TextureUsages::STORAGE_BINDING)
}

fn shader(format: wgpu::TextureFormat, dimension: wgpu::TextureDimension) -> Option<String> {
    let (storage, words, value) = texel_code(format)?;
    let (texture, coord) = match dimension {
        wgpu::TextureDimension::D2 => ("texture_storage_2d", "p.origin.xy + id.xy"),
        wgpu::TextureDimension::D3 => ("texture_storage_3d", "p.origin + id"),
        wgpu::TextureDimension::D1 => return None,
    };
    Some(format!(
        "struct Params {{ origin: vec3<u32>, first: u32, size: vec3<u32>, row: u32, plane: u32 }};
@group(0) @binding(0) var<uniform> p: Params;
@group(0) @binding(1) var<storage, read> src: array<u32>;
@group(0) @binding(2) var dst: {texture}<{storage}, write>;
@compute @workgroup_size({GROUP}, {GROUP}, 1)
fn main(@builtin(global_invocation_id) id: vec3<u32>) {{
    if (any(id >= p.size)) {{ return; }}
    let i = p.first + id.z * p.plane + id.y * p.row + id.x * {words}u;
    textureStore(dst, {coord}, {value});
}}
"
    ))
}

/// Where a copy reads and writes, in the units the shader uses.
pub(crate) struct UnpackCopy<'a> {
    pub buffer: &'a wgpu::Buffer,
    /// Bytes before the first texel, and between rows and planes.
    pub first: u64,
    pub row_pitch: u64,
    pub plane_pitch: u64,
    pub texture: &'a wgpu::Texture,
    /// `[x, y, z]` in the texture.
    pub origin: [u32; 3],
    /// `[width, height, depth]` in texels.
    pub size: [u32; 3],
}

/// Frames a bind group stays cached after its last use. Device-resident sources rotate
/// through a few staging buffers, so the same copies come back within a few frames; a buffer
/// the source let go of is kept alive by its cached group for at most this many frames.
const KEEP_FRAMES: u64 = 8;

/// The uniforms of one copy: origin, first word, size, row and plane pitch in words.
type Params = [u32; 12];

/// A bind group (and its uniform buffer) for one copy, reused while the same buffer is copied
/// into the same texture the same way: building them costs more CPU time than the rest of a
/// device-resident frame (a buffer allocation, a view and a descriptor set).
struct CachedGroup {
    buffer: wgpu::Buffer,
    texture: wgpu::Texture,
    params: Params,
    group: wgpu::BindGroup,
    last_used: u64,
}

#[derive(Default)]
struct GroupCache {
    groups: Vec<CachedGroup>,
    frame: u64,
}

/// Compute pipelines that store texels read from a buffer, one per format and dimension,
/// built on first use, and the bind groups of recent copies.
pub(crate) struct Unpacker {
    pipelines: Mutex<HashMap<(wgpu::TextureFormat, wgpu::TextureDimension), wgpu::ComputePipeline>>,
    cache: Mutex<GroupCache>,
    /// Copies recorded as compute passes so far.
    recorded: AtomicU64,
}

impl Unpacker {
    pub fn new() -> Self {
        Unpacker {
            pipelines: Mutex::new(HashMap::new()),
            cache: Mutex::new(GroupCache::default()),
            recorded: AtomicU64::new(0),
        }
    }

    /// Called once per submitted frame: drops the bind groups not used in the last
    /// `KEEP_FRAMES` frames (and with them their hold on buffers and textures).
    pub fn frame_submitted(&self) {
        let mut cache = self.cache.lock();
        cache.frame += 1;
        let frame = cache.frame;
        cache.groups.retain(|g| g.last_used + KEEP_FRAMES >= frame);
    }

    /// Copies recorded as compute passes so far.
    pub fn recorded(&self) -> u64 {
        self.recorded.load(Ordering::Relaxed)
    }

    /// Records `copy` as a compute pass into `encoder` and returns true; or returns false
    /// (recording nothing) when this copy cannot go that way: a texture without
    /// `STORAGE_BINDING`, a buffer without `STORAGE` or over the binding limit, offsets or
    /// pitches that are not whole words, or a format the shader does not know.
    pub fn record(
        &self,
        device: &wgpu::Device,
        encoder: &mut wgpu::CommandEncoder,
        copy: &UnpackCopy<'_>,
    ) -> bool {
        let format = copy.texture.format();
        let dimension = copy.texture.dimension();
        let Some((_, words, _)) = texel_code(format) else {
            return false;
        };
        let limits = device.limits();
        let aligned = [copy.first, copy.row_pitch, copy.plane_pitch]
            .iter()
            .all(|v| v % 4 == 0);
        let in_words = |v: u64| u32::try_from(v / 4).ok();
        let (Some(first), Some(row), Some(plane)) = (
            in_words(copy.first),
            in_words(copy.row_pitch),
            in_words(copy.plane_pitch),
        ) else {
            return false;
        };
        let groups = [
            copy.size[0].div_ceil(GROUP),
            copy.size[1].div_ceil(GROUP),
            copy.size[2],
        ];
        let usable = aligned
            && copy
                .texture
                .usage()
                .contains(wgpu::TextureUsages::STORAGE_BINDING)
            && copy.buffer.usage().contains(wgpu::BufferUsages::STORAGE)
            && copy.buffer.size() <= limits.max_storage_buffer_binding_size
            && groups
                .iter()
                .all(|&g| g <= limits.max_compute_workgroups_per_dimension)
            && copy.size.iter().all(|&s| s > 0)
            && (row as u64) >= u64::from(copy.size[0]) * u64::from(words);
        if !usable {
            return false;
        }
        let mut pipelines = self.pipelines.lock();
        let pipeline = match pipelines.entry((format, dimension)) {
            std::collections::hash_map::Entry::Occupied(e) => e.into_mut(),
            std::collections::hash_map::Entry::Vacant(e) => {
                let Some(source) = shader(format, dimension) else {
                    return false;
                };
                let module = device.create_shader_module(wgpu::ShaderModuleDescriptor {
                    label: Some("sluice unpack"),
                    source: wgpu::ShaderSource::Wgsl(source.into()),
                });
                let _serial = crate::pipeline::pipeline_creation_lock();
                e.insert(
                    device.create_compute_pipeline(&wgpu::ComputePipelineDescriptor {
                        label: Some("sluice unpack"),
                        layout: None,
                        module: &module,
                        entry_point: Some("main"),
                        compilation_options: Default::default(),
                        cache: None,
                    }),
                )
            }
        };
        let params: Params = [
            copy.origin[0],
            copy.origin[1],
            copy.origin[2],
            first,
            copy.size[0],
            copy.size[1],
            copy.size[2],
            row,
            plane,
            0,
            0,
            0,
        ];
        let mut cache = self.cache.lock();
        let frame = cache.frame;
        let cached = cache
            .groups
            .iter_mut()
            .find(|g| &g.buffer == copy.buffer && &g.texture == copy.texture && g.params == params);
        let group = match cached {
            Some(cached) => {
                cached.last_used = frame;
                cached.group.clone()
            }
            None => {
                let group = bind_group(device, pipeline, copy, &params);
                cache.groups.push(CachedGroup {
                    buffer: copy.buffer.clone(),
                    texture: copy.texture.clone(),
                    params,
                    group: group.clone(),
                    last_used: frame,
                });
                group
            }
        };
        drop(cache);
        let mut pass = encoder.begin_compute_pass(&wgpu::ComputePassDescriptor {
            label: Some("sluice unpack"),
            timestamp_writes: None,
        });
        pass.set_pipeline(pipeline);
        pass.set_bind_group(0, &group, &[]);
        pass.dispatch_workgroups(groups[0], groups[1], groups[2]);
        self.recorded.fetch_add(1, Ordering::Relaxed);
        true
    }
}

/// The bind group of one copy: its uniforms, the buffer and a storage view of the texture.
fn bind_group(
    device: &wgpu::Device,
    pipeline: &wgpu::ComputePipeline,
    copy: &UnpackCopy<'_>,
    params: &Params,
) -> wgpu::BindGroup {
    let uniform = device.create_buffer(&wgpu::BufferDescriptor {
        label: Some("sluice unpack params"),
        size: size_of_val(params) as u64,
        usage: wgpu::BufferUsages::UNIFORM,
        mapped_at_creation: true,
    });
    uniform
        .slice(..)
        .get_mapped_range_mut()
        .expect("mapped at creation")
        .copy_from_slice(bytemuck::cast_slice(params));
    uniform.unmap();
    let view = copy.texture.create_view(&wgpu::TextureViewDescriptor {
        label: Some("sluice unpack target"),
        usage: Some(wgpu::TextureUsages::STORAGE_BINDING),
        ..Default::default()
    });
    device.create_bind_group(&wgpu::BindGroupDescriptor {
        label: Some("sluice unpack"),
        layout: &pipeline.get_bind_group_layout(0),
        entries: &[
            wgpu::BindGroupEntry {
                binding: 0,
                resource: uniform.as_entire_binding(),
            },
            wgpu::BindGroupEntry {
                binding: 1,
                resource: copy.buffer.as_entire_binding(),
            },
            wgpu::BindGroupEntry {
                binding: 2,
                resource: wgpu::BindingResource::TextureView(&view),
            },
        ],
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every shader variant is valid WGSL (checked by naga, no GPU needed).
    #[test]
    fn every_format_and_dimension_compiles() {
        use wgpu::naga;
        use wgpu::TextureFormat as F;
        let formats = [
            F::Rgba8Unorm,
            F::Rgba8Snorm,
            F::Rgba8Uint,
            F::Rgba8Sint,
            F::R32Float,
            F::R32Uint,
            F::R32Sint,
            F::Rg32Float,
            F::Rg32Uint,
            F::Rg32Sint,
            F::Rgba16Float,
            F::Rgba16Uint,
            F::Rgba16Sint,
            F::Rgba32Float,
            F::Rgba32Uint,
            F::Rgba32Sint,
        ];
        for format in formats {
            for dimension in [wgpu::TextureDimension::D2, wgpu::TextureDimension::D3] {
                let source = shader(format, dimension).expect("a known format");
                let module = naga::front::wgsl::parse_str(&source).unwrap_or_else(|e| {
                    panic!("{format:?} {dimension:?}: {}", e.emit_to_string(&source))
                });
                naga::valid::Validator::new(
                    naga::valid::ValidationFlags::all(),
                    naga::valid::Capabilities::all(),
                )
                .validate(&module)
                .unwrap_or_else(|e| panic!("{format:?} {dimension:?}: {e:?}"));
            }
        }
    }
}
