//! How shaders read the data textures: the WGSL prelude each visual's shader is assembled
//! with (texel fetch, hardware or hand interpolation), and the linear sampler.
//!
//! The prelude defines, for one texture kind and arrangement:
//!
//! - `DATA_3D`, `VALUE_SCALE` (what a texel is multiplied by to give the data's value: 255
//!   for u8 held as unorm), `MAY_BE_NAN` (float textures) and `FILTERED` (the hardware
//!   interpolates: a filterable format in one texture);
//! - `fetch(p)`: one texel in data units at integer voxel coordinates, from whichever brick
//!   holds it;
//! - `sample_hw(p, size)`: with `FILTERED`, one `textureSampleLevel` through `data_sampler`
//!   (binding [`SAMPLER_BINDING`]), falling back to hand taps where the result is NaN (the
//!   NaN samples are then left out, as the hand path always does);
//! - for 3-D data, `sample_linear_uvw(uvw)`: the same at normalized coordinates (the hand
//!   path scales them by `params.data_size`), for loops that step through them.
//!
//! `shaders/common.wgsl` builds `sample_nearest` and `sample_linear` on these, and also has
//! `sample_filtered_2d` / `sample_filtered_3d`, which take the texture and sampler as
//! arguments (for textures other than `data`, such as a paged atlas).

use crate::bricking::{brick_binding, BRICK_SLOTS};
use crate::format::SampleKind;
use crate::pipeline::TexDim;

/// The binding of the linear sampler in group 0 (after the brick slots).
pub(crate) const SAMPLER_BINDING: u32 = 10;

/// Whether a texture of `kind` in `one_brick` texture (3-D data over the device's limit is
/// cut into several) is interpolated by the hardware.
pub(crate) fn hardware_filtered(kind: SampleKind, one_brick: bool) -> bool {
    kind.filterable() && one_brick
}

/// The WGSL prelude for data of `kind` and `dim`, in one texture or in brick slots;
/// `allow_filter`: the shader binds `data_sampler` when the data is filterable.
pub(crate) fn prelude(
    kind: SampleKind,
    dim: TexDim,
    one_brick: bool,
    allow_filter: bool,
) -> String {
    let filtered = allow_filter && hardware_filtered(kind, one_brick);
    let scale = kind.value_scale();
    let mut out = format!(
        "const DATA_3D: bool = {};\nconst VALUE_SCALE: f32 = {scale:.1};\nconst MAY_BE_NAN: bool = {};\nconst FILTERED: bool = {filtered};\n",
        dim == TexDim::D3,
        kind.may_be_nan(),
    );
    // A unorm texel times 255 (65535) is the integer again, up to rounding.
    let texel = |load: &str| {
        if scale == 1.0 {
            format!("vec4<f32>({load})")
        } else {
            format!("round(vec4<f32>({load}) * VALUE_SCALE)")
        }
    };
    match (dim, one_brick) {
        (TexDim::D2, _) => {
            out += &format!(
                "fn fetch(p: vec3<i32>) -> vec4<f32> {{ return {}; }}\n",
                texel("textureLoad(data, p.xy, 0)")
            );
        }
        (TexDim::D3, true) => {
            out += &format!(
                "fn fetch(p: vec3<i32>) -> vec4<f32> {{ return {}; }}\n",
                texel("textureLoad(data, p, 0)")
            );
        }
        (TexDim::D3, false) => out += &brick_fetch(kind, &texel),
    }
    if filtered {
        let (uv, filtered_fn) = match dim {
            TexDim::D2 => ("p.xy / vec2<f32>(size.xy)", "sample_filtered_2d"),
            TexDim::D3 => ("p / vec3<f32>(size)", "sample_filtered_3d"),
        };
        out += &format!(
            "@group(0) @binding({SAMPLER_BINDING}) var data_sampler: sampler;\n\
             fn sample_hw(p: vec3<f32>, size: vec3<i32>) -> Sample {{\n\
             \x20   let uv = {uv};\n\
             \x20   if (MAY_BE_NAN) {{ return {filtered_fn}(data, data_sampler, uv, VALUE_SCALE); }}\n\
             \x20   return Sample(textureSampleLevel(data, data_sampler, uv, 0.0) * VALUE_SCALE, true);\n}}\n"
        );
    } else {
        out += "fn sample_hw(p: vec3<f32>, size: vec3<i32>) -> Sample { return sample_taps(p, size); }\n";
    }
    if dim == TexDim::D3 {
        // Linear at normalized coordinates, for loops that step through them (the marcher).
        if filtered {
            out += "fn sample_linear_uvw(uvw: vec3<f32>) -> Sample {\n\
                    \x20   if (MAY_BE_NAN) { return sample_filtered_3d(data, data_sampler, uvw, VALUE_SCALE); }\n\
                    \x20   return Sample(textureSampleLevel(data, data_sampler, uvw, 0.0) * VALUE_SCALE, true);\n}\n";
        } else {
            out += "fn sample_linear_uvw(uvw: vec3<f32>) -> Sample {\n\
                    \x20   return sample_taps(uvw * vec3<f32>(params.data_size), params.data_size);\n}\n";
        }
    }
    out
}

/// `fetch` over brick slots: 3-D data may be split into up to 8 bricks in any grid
/// (8 x 1 x 1 to 2 x 2 x 2): `data` is brick slot 0 and `brick1`..`brick7` the others, slot
/// `x + cx (y + cy z)` for brick coordinates (x, y, z) in a grid of (cx, cy, cz);
/// `params.bricks` gives brick size and count. Each texel is loaded from the one brick that
/// holds it, so bricks need no overlap and hand interpolation across their borders is
/// seamless.
fn brick_fetch(kind: SampleKind, texel: &dyn Fn(&str) -> String) -> String {
    let mut out = String::new();
    for slot in 1..BRICK_SLOTS {
        out += &format!(
            "@group(0) @binding({}) var brick{slot}: texture_3d<{}>;\n",
            brick_binding(slot),
            kind.wgsl()
        );
    }
    out += "fn fetch(p: vec3<i32>) -> vec4<f32> {\n";
    out += "    let b = min(p / params.bricks.size, params.bricks.count - vec3<i32>(1));\n";
    out += "    let q = p - b * params.bricks.size;\n";
    out += "    let c = params.bricks.count;\n";
    out += "    switch (b.x + c.x * (b.y + c.y * b.z)) {\n";
    out += &format!(
        "        case 0: {{ return {}; }}\n",
        texel("textureLoad(data, q, 0)")
    );
    for slot in 1..BRICK_SLOTS - 1 {
        out += &format!(
            "        case {slot}: {{ return {}; }}\n",
            texel(&format!("textureLoad(brick{slot}, q, 0)"))
        );
    }
    out += &format!(
        "        default: {{ return {}; }}\n",
        texel(&format!("textureLoad(brick{}, q, 0)", BRICK_SLOTS - 1))
    );
    out += "    }\n}\n";
    out
}

/// Layout entry of the linear sampler.
pub(crate) fn sampler_entry(visibility: wgpu::ShaderStages) -> wgpu::BindGroupLayoutEntry {
    wgpu::BindGroupLayoutEntry {
        binding: SAMPLER_BINDING,
        visibility,
        ty: wgpu::BindingType::Sampler(wgpu::SamplerBindingType::Filtering),
        count: None,
    }
}

/// The sampler of hardware interpolation: linear, clamped to the edge (as the hand taps
/// are), one mip level.
pub(crate) fn linear_sampler(device: &wgpu::Device) -> wgpu::Sampler {
    device.create_sampler(&wgpu::SamplerDescriptor {
        label: Some("sluice linear"),
        address_mode_u: wgpu::AddressMode::ClampToEdge,
        address_mode_v: wgpu::AddressMode::ClampToEdge,
        address_mode_w: wgpu::AddressMode::ClampToEdge,
        mag_filter: wgpu::FilterMode::Linear,
        min_filter: wgpu::FilterMode::Linear,
        ..Default::default()
    })
}
