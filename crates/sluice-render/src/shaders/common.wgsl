// Shared by the visuals' shaders: value normalization, colormap lookup, NaN tests and
// sampling. The including shader declares `data` (a texture of SAMPLE_T, 2-D or 3-D); the
// sampling prelude (`sampling.rs`) follows this file.

// The colormap table (N x 1), in a bind group of its own that every visual's pipeline has
// as group 1 (`pipeline::COLORMAP_GROUP`): one group per table, made with the table and
// shared by all the visuals showing it, so that a colormap change binds another group
// instead of making one. Shaders that never look a colour up (the volume grid's) leave it
// out of their layout.
@group(1) @binding(0) var lut: texture_2d<f32>;

// How 3-D data is split into bricks (size and count per axis); one brick for most data.
struct Bricks {
    size: vec3<i32>,
    count: vec3<i32>,
};

struct Display {
    // Contrast limits (lo, hi) in data units.
    clim: vec2<f32>,
    gamma: f32,
    lut_size: u32,
};

// Whether `normalize_value` applies the gamma curve at all: the pipelines of images, paged
// images and dense volume marchers whose visual has gamma 1 set it false
// (`pipeline::gamma_constants`), so that the curve is compiled out there. CPU devices run a
// branch on a uniform for every pixel whichever way it goes; a constant leaves one side.
override GAMMA_CURVE: bool = true;

fn is_nan(x: f32) -> bool {
    // Bit test: comparisons with NaN may be folded away by shader compilers.
    let bits = bitcast<u32>(x);
    return (bits & 0x7f800000u) == 0x7f800000u && (bits & 0x007fffffu) != 0u;
}

fn has_nan(v: vec4<f32>) -> bool {
    return is_nan(v.x) || is_nan(v.y) || is_nan(v.z) || is_nan(v.w);
}

// t = clamp((v - lo) / (hi - lo), 0, 1) ^ gamma; +inf gives 1, -inf gives 0.
fn normalize_value(d: Display, v: f32) -> f32 {
    let span = d.clim.y - d.clim.x;
    var t: f32;
    if (span == 0.0) {
        t = select(0.0, 1.0, v >= d.clim.y);
    } else {
        t = clamp((v - d.clim.x) / span, 0.0, 1.0);
    }
    if (GAMMA_CURVE && d.gamma != 1.0 && t > 0.0) {
        t = pow(t, d.gamma);
    }
    return t;
}

// Entry min(floor(t * N), N - 1) of the colormap.
fn colormap(d: Display, t: f32) -> vec4<f32> {
    let index = min(u32(t * f32(d.lut_size)), d.lut_size - 1u);
    return textureLoad(lut, vec2<i32>(i32(index), 0), 0);
}

struct Sample {
    value: vec4<f32>,
    valid: bool,
};

// The sampling prelude (`sampling.rs`) declares, for the including shader's data:
// `DATA_3D`, `VALUE_SCALE`, `MAY_BE_NAN`, `FILTERED`, `fetch(p)` (one texel in data units)
// and `sample_hw(p, size)` (one hardware sample where `FILTERED`).

// Nearest sample at voxel coordinates `p` (x = column, y = row, z = plane; sample i covers
// [i, i + 1)), clamped to the data.
fn sample_nearest(p: vec3<f32>, size: vec3<i32>) -> Sample {
    let v = fetch(clamp(vec3<i32>(floor(p)), vec3<i32>(0), size - vec3<i32>(1)));
    return Sample(v, !(MAY_BE_NAN && has_nan(v)));
}

// Trilinear (bilinear on 2-D textures) between sample centres, clamped at the edges; NaN
// samples are left out and the remaining weights renormalized. One hardware sample where
// the data is filterable (`FILTERED`; a NaN result falls back to the taps), else
// `sample_taps`.
fn sample_linear(p: vec3<f32>, size: vec3<i32>) -> Sample {
    if (FILTERED) {
        return sample_hw(p, size);
    }
    return sample_taps(p, size);
}

// `sample_linear` by hand: four taps (2-D) or eight (3-D) through `fetch`.
fn sample_taps(p: vec3<f32>, size: vec3<i32>) -> Sample {
    let last = size - vec3<i32>(1);
    let q = p - vec3<f32>(0.5);
    let base = floor(q);
    let f = q - base;
    let i0 = vec3<i32>(base);
    var acc = vec4<f32>(0.0);
    var weight = 0.0;
    let taps = select(4u, 8u, DATA_3D);
    for (var k = 0u; k < taps; k = k + 1u) {
        let o = vec3<i32>(i32(k & 1u), i32((k >> 1u) & 1u), i32(k >> 2u));
        let w3 = select(vec3<f32>(1.0) - f, f, o == vec3<i32>(1));
        let w = w3.x * w3.y * w3.z;
        if (w > 0.0) {
            let v = fetch(clamp(i0 + o, vec3<i32>(0), last));
            if (!(MAY_BE_NAN && has_nan(v))) {
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

// Linear sample of any filterable 2-D float texture at normalized `uv` (0..1 over the
// texture; texel i's centre at (i + 0.5) / size), times `scale` (255 for unorm8 data): one
// hardware sample through `samp` (linear, clamp to edge); where that is NaN, the four taps
// by hand with NaN texels left out and the weights renormalized (`valid` false when all
// are NaN). The sampling prelude (`sampling.rs`) calls it for dense data that may hold NaN;
// the paged atlases clamp their taps to a slot instead (`sample_taps_in` in paged_image.wgsl
// and paged3d.wgsl).
fn sample_filtered_2d(tex: texture_2d<f32>, samp: sampler, uv: vec2<f32>, scale: f32) -> Sample {
    let v = textureSampleLevel(tex, samp, uv, 0.0) * scale;
    if (!has_nan(v)) {
        return Sample(v, true);
    }
    let size = vec2<i32>(textureDimensions(tex));
    let q = uv * vec2<f32>(size) - vec2<f32>(0.5);
    let base = floor(q);
    let f = q - base;
    let i0 = vec2<i32>(base);
    var acc = vec4<f32>(0.0);
    var weight = 0.0;
    for (var k = 0u; k < 4u; k = k + 1u) {
        let o = vec2<i32>(i32(k & 1u), i32(k >> 1u));
        let w2 = select(vec2<f32>(1.0) - f, f, o == vec2<i32>(1));
        let w = w2.x * w2.y;
        if (w > 0.0) {
            let t = textureLoad(tex, clamp(i0 + o, vec2<i32>(0), size - vec2<i32>(1)), 0) * scale;
            if (!has_nan(t)) {
                acc = acc + w * t;
                weight = weight + w;
            }
        }
    }
    if (weight == 0.0) {
        return Sample(vec4<f32>(0.0), false);
    }
    return Sample(acc / weight, true);
}

// `sample_filtered_2d` for a 3-D texture at normalized `uvw` (eight taps where NaN).
fn sample_filtered_3d(tex: texture_3d<f32>, samp: sampler, uvw: vec3<f32>, scale: f32) -> Sample {
    let v = textureSampleLevel(tex, samp, uvw, 0.0) * scale;
    if (!has_nan(v)) {
        return Sample(v, true);
    }
    let size = vec3<i32>(textureDimensions(tex));
    let q = uvw * vec3<f32>(size) - vec3<f32>(0.5);
    let base = floor(q);
    let f = q - base;
    let i0 = vec3<i32>(base);
    var acc = vec4<f32>(0.0);
    var weight = 0.0;
    for (var k = 0u; k < 8u; k = k + 1u) {
        let o = vec3<i32>(i32(k & 1u), i32((k >> 1u) & 1u), i32(k >> 2u));
        let w3 = select(vec3<f32>(1.0) - f, f, o == vec3<i32>(1));
        let w = w3.x * w3.y * w3.z;
        if (w > 0.0) {
            let t = textureLoad(tex, clamp(i0 + o, vec3<i32>(0), size - vec3<i32>(1)), 0) * scale;
            if (!has_nan(t)) {
                acc = acc + w * t;
                weight = weight + w;
            }
        }
    }
    if (weight == 0.0) {
        return Sample(vec4<f32>(0.0), false);
    }
    return Sample(acc / weight, true);
}

// What the opaque pass writes: the colour, and the fragment's depth again as a colour, which
// the volume marcher reads (GL backends can neither read depth textures in shaders nor render
// to float targets): 24 bits of depth packed into RGB8.
// An image sample's colour before opacity: the NaN colour where invalid; else by `mode`,
// 0 one channel through the colormap, 1 value and alpha (alpha times `alpha_scale`), 2 RGB,
// 3 RGBA (alpha times `alpha_scale`), each channel through clim and gamma. Shared by the dense
// and the paged image shaders.
fn image_color(s: Sample, d: Display, mode: u32, alpha_scale: f32, nan_color: vec4<f32>) -> vec4<f32> {
    if (!s.valid) {
        return nan_color;
    }
    if (mode == 0u) {
        return colormap(d, normalize_value(d, s.value.x));
    }
    if (mode == 1u) {
        var rgba = colormap(d, normalize_value(d, s.value.x));
        rgba.a = rgba.a * clamp(s.value.y * alpha_scale, 0.0, 1.0);
        return rgba;
    }
    let alpha = select(1.0, clamp(s.value.w * alpha_scale, 0.0, 1.0), mode == 3u);
    return vec4<f32>(
        normalize_value(d, s.value.x),
        normalize_value(d, s.value.y),
        normalize_value(d, s.value.z),
        alpha,
    );
}

struct OpaqueOut {
    @location(0) color: vec4<f32>,
    @location(1) depth: vec4<f32>,
};

fn pack_depth(depth: f32) -> vec4<f32> {
    let d = u32(clamp(depth, 0.0, 1.0) * 16777215.0);
    return vec4<f32>(vec3<f32>(vec3<u32>(d >> 16u, (d >> 8u) & 255u, d & 255u)) / 255.0, 1.0);
}

fn unpack_depth(c: vec4<f32>) -> f32 {
    let b = vec3<u32>(round(c.rgb * 255.0));
    return f32((b.x << 16u) | (b.y << 8u) | b.z) / 16777215.0;
}
