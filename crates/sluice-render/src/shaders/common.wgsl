// Shared by the visuals' shaders: value normalization, colormap lookup, NaN tests and
// texel fetches. The including shader declares `data` (a texture of SAMPLE_T, 2-D or 3-D,
// read with textureLoad: interpolation is done here) and `lut` (the colormap, N x 1).

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
    if (d.gamma != 1.0 && t > 0.0) {
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

// Nearest sample at voxel coordinates `p` (x = column, y = row, z = plane; sample i covers
// [i, i + 1)), clamped to the data.
fn sample_nearest(p: vec3<f32>, size: vec3<i32>) -> Sample {
    let v = fetch(clamp(vec3<i32>(floor(p)), vec3<i32>(0), size - vec3<i32>(1)));
    return Sample(v, !has_nan(v));
}

// Trilinear (bilinear on 2-D textures: four taps) between sample centres, clamped at the
// edges; NaN samples are left out and the remaining weights renormalized. `DATA_3D` is
// declared with `fetch`.
fn sample_linear(p: vec3<f32>, size: vec3<i32>) -> Sample {
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

// What the opaque pass writes: the colour, and the fragment's depth again as a colour, which
// the volume marcher reads (GL backends can neither read depth textures in shaders nor render
// to float targets): 24 bits of depth packed into RGB8.
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
