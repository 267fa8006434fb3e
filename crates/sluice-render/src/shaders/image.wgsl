// Image visual. The data texture is read with textureLoad (no sampler): interpolation, value
// normalization and the colormap lookup happen here, the same way for every element type.
// SAMPLE_T is replaced by f32, u32 or i32 when the pipeline is built.

struct Params {
    // Local image coordinates (x = column, y = row, in samples) to clip space.
    transform: mat4x4<f32>,
    // RGBA of NaN samples.
    nan_color: vec4<f32>,
    // Texture size in samples (width, height).
    size: vec2<f32>,
    // Contrast limits (lo, hi) in data units.
    clim: vec2<f32>,
    gamma: f32,
    // 0: scalar through the colormap; 1: value + alpha; 2: RGB; 3: RGBA.
    mode: u32,
    // 0: nearest; 1: linear.
    linear: u32,
    // Multiplies the alpha channel of RGBA / value+alpha data (1 / type maximum).
    alpha_scale: f32,
    opacity: f32,
    lut_size: u32,
    _pad0: u32,
    _pad1: u32,
};

@group(0) @binding(0) var<uniform> params: Params;
@group(0) @binding(1) var data: texture_2d<SAMPLE_T>;
@group(0) @binding(2) var lut: texture_2d<f32>;

struct VertexOut {
    @builtin(position) position: vec4<f32>,
    @location(0) coord: vec2<f32>,
};

@vertex
fn vs_main(@builtin(vertex_index) index: u32) -> VertexOut {
    var corners = array<vec2<f32>, 6>(
        vec2<f32>(0.0, 0.0), vec2<f32>(1.0, 0.0), vec2<f32>(0.0, 1.0),
        vec2<f32>(0.0, 1.0), vec2<f32>(1.0, 0.0), vec2<f32>(1.0, 1.0),
    );
    let local = corners[index] * params.size;
    var out: VertexOut;
    out.position = params.transform * vec4<f32>(local, 0.0, 1.0);
    out.coord = local;
    return out;
}

fn is_nan(x: f32) -> bool {
    // Bit test: comparisons with NaN may be folded away by shader compilers.
    let bits = bitcast<u32>(x);
    return (bits & 0x7f800000u) == 0x7f800000u && (bits & 0x007fffffu) != 0u;
}

fn has_nan(v: vec4<f32>) -> bool {
    return is_nan(v.x) || is_nan(v.y) || is_nan(v.z) || is_nan(v.w);
}

fn load(p: vec2<i32>) -> vec4<f32> {
    return vec4<f32>(textureLoad(data, p, 0));
}

struct Sample {
    value: vec4<f32>,
    valid: bool,
};

fn sample_at(coord: vec2<f32>) -> Sample {
    let last = vec2<i32>(params.size) - vec2<i32>(1);
    if (params.linear == 0u) {
        let v = load(clamp(vec2<i32>(floor(coord)), vec2<i32>(0), last));
        return Sample(v, !has_nan(v));
    }
    let q = coord - vec2<f32>(0.5);
    let base = floor(q);
    let f = q - base;
    let i0 = vec2<i32>(base);
    var acc = vec4<f32>(0.0);
    var weight = 0.0;
    for (var k = 0u; k < 4u; k = k + 1u) {
        let o = vec2<i32>(i32(k & 1u), i32(k >> 1u));
        let wx = select(1.0 - f.x, f.x, o.x == 1);
        let wy = select(1.0 - f.y, f.y, o.y == 1);
        let w = wx * wy;
        if (w > 0.0) {
            let v = load(clamp(i0 + o, vec2<i32>(0), last));
            if (!has_nan(v)) {
                acc = acc + w * v;
                weight = weight + w;
            }
        }
    }
    if (weight == 0.0) {
        return Sample(vec4<f32>(0.0), false);
    }
    return Sample(acc / weight, true);
}

fn normalize_value(v: f32) -> f32 {
    let span = params.clim.y - params.clim.x;
    var t: f32;
    if (span == 0.0) {
        t = select(0.0, 1.0, v >= params.clim.y);
    } else {
        t = clamp((v - params.clim.x) / span, 0.0, 1.0);
    }
    if (params.gamma != 1.0 && t > 0.0) {
        t = pow(t, params.gamma);
    }
    return t;
}

fn colormap(t: f32) -> vec4<f32> {
    let index = min(u32(t * f32(params.lut_size)), params.lut_size - 1u);
    return textureLoad(lut, vec2<i32>(i32(index), 0), 0);
}

@fragment
fn fs_main(in: VertexOut) -> @location(0) vec4<f32> {
    let s = sample_at(in.coord);
    var rgba: vec4<f32>;
    if (!s.valid) {
        rgba = params.nan_color;
    } else if (params.mode == 0u) {
        rgba = colormap(normalize_value(s.value.x));
    } else if (params.mode == 1u) {
        rgba = colormap(normalize_value(s.value.x));
        rgba.a = rgba.a * clamp(s.value.y * params.alpha_scale, 0.0, 1.0);
    } else {
        let alpha = select(1.0, clamp(s.value.w * params.alpha_scale, 0.0, 1.0), params.mode == 3u);
        rgba = vec4<f32>(
            normalize_value(s.value.x),
            normalize_value(s.value.y),
            normalize_value(s.value.z),
            alpha,
        );
    }
    return vec4<f32>(rgba.rgb, rgba.a * params.opacity);
}
