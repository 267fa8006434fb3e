// Volume visual: rays marched through a 3-D texture in a compute shader, one invocation per
// target pixel (each intersects its ray with the volume's box, so the camera may be inside
// the volume); the result is blended over the target by `volume_composite.wgsl`. Compute, not
// a fragment shader: on compute-first GPUs (H100/H200) the graphics pipeline has a small
// fraction of the chip.
// Positions are in voxel coordinates: voxel (z, y, x) covers [x, x+1] x [y, y+1] x [z, z+1].
// Rays stop at the depth of what the opaque pass drew, so meshes and images in front hide
// the volume behind them.

struct Params {
    // Voxel coordinates to clip space, and back.
    mvp: mat4x4<f32>,
    inv_mvp: mat4x4<f32>,
    display: Display,
    data_size: vec3<i32>,
    // 0: maximum intensity projection; 1: translucent; 2: isosurface.
    mode: u32,
    viewport: vec2<f32>,
    // Distance between samples along a ray, in voxels.
    step: f32,
    // 0: nearest; 1: trilinear.
    linear: u32,
    // Translucent: opacity per voxel of distance at full colormap alpha and t = 1.
    attenuation: f32,
    // Isosurface: threshold in data units.
    threshold: f32,
    opacity: f32,
    max_steps: u32,
    bricks: Bricks,
};

@group(0) @binding(0) var<uniform> params: Params;
@group(0) @binding(1) var data: texture_3d<SAMPLE_T>;
@group(0) @binding(2) var lut: texture_2d<f32>;
// The opaque pass's depth, written as a colour (`OpaqueOut.depth`).
@group(1) @binding(0) var scene_depth: texture_2d<f32>;
@group(1) @binding(1) var marched: texture_storage_2d<rgba16float, write>;

@compute @workgroup_size(8, 8)
fn cs_main(@builtin(global_invocation_id) id: vec3<u32>) {
    if (f32(id.x) >= params.viewport.x || f32(id.y) >= params.viewport.y) {
        return;
    }
    let c = march(vec2<f32>(id.xy) + vec2<f32>(0.5));
    textureStore(marched, vec2<i32>(id.xy), c);
}

fn unproject(ndc: vec3<f32>) -> vec3<f32> {
    let h = params.inv_mvp * vec4<f32>(ndc, 1.0);
    return h.xyz / h.w;
}

fn value_at(p: vec3<f32>) -> Sample {
    if (params.linear == 1u) {
        return sample_linear(p, params.data_size);
    }
    return sample_nearest(p, params.data_size);
}

// The colour of the ray through pixel centre `frag` (non-premultiplied; alpha 0: nothing).
fn march(frag: vec2<f32>) -> vec4<f32> {
    let ndc_xy = vec2<f32>(frag.x / params.viewport.x * 2.0 - 1.0, 1.0 - frag.y / params.viewport.y * 2.0);
    let origin = unproject(vec3<f32>(ndc_xy, 0.0));
    let far = unproject(vec3<f32>(ndc_xy, 1.0));
    let dir = normalize(far - origin);
    // Stop at what the opaque pass drew.
    let depth = unpack_depth(textureLoad(scene_depth, vec2<i32>(frag), 0));
    let t_depth = dot(unproject(vec3<f32>(ndc_xy, depth)) - origin, dir);

    // Slab intersection with the box [0, data_size].
    let size = vec3<f32>(params.data_size);
    let inv = 1.0 / dir;
    let ta = (vec3<f32>(0.0) - origin) * inv;
    let tb = (size - origin) * inv;
    let t_enter = max(max(min(ta.x, tb.x), min(ta.y, tb.y)), min(ta.z, tb.z));
    let t_exit = min(min(max(ta.x, tb.x), max(ta.y, tb.y)), max(ta.z, tb.z));
    let t0 = max(t_enter, 0.0);
    let t1 = min(t_exit, t_depth);
    if (t1 <= t0) {
        return vec4<f32>(0.0);
    }

    let d = params.display;
    let steps = min(u32(ceil((t1 - t0) / params.step)), params.max_steps);
    if (params.mode == 0u) {
        var best = -3.4e38;
        var found = false;
        for (var i = 0u; i < steps; i = i + 1u) {
            let t = t0 + (f32(i) + 0.5) * params.step;
            if (t >= t1) {
                break;
            }
            let s = value_at(origin + dir * t);
            if (s.valid) {
                best = max(best, s.value.x);
                found = true;
            }
        }
        if (!found) {
            return vec4<f32>(0.0);
        }
        let c = colormap(d, normalize_value(d, best));
        return vec4<f32>(c.rgb, c.a * params.opacity);
    }
    if (params.mode == 1u) {
        var color = vec3<f32>(0.0);
        var alpha = 0.0;
        for (var i = 0u; i < steps; i = i + 1u) {
            let t = t0 + (f32(i) + 0.5) * params.step;
            if (t >= t1 || alpha > 0.995) {
                break;
            }
            let s = value_at(origin + dir * t);
            if (s.valid) {
                let v = normalize_value(d, s.value.x);
                let c = colormap(d, v);
                let a = 1.0 - exp(-params.attenuation * c.a * v * params.step);
                color = color + (1.0 - alpha) * a * c.rgb;
                alpha = alpha + (1.0 - alpha) * a;
            }
        }
        if (alpha <= 0.0) {
            return vec4<f32>(0.0);
        }
        return vec4<f32>(color / alpha, alpha * params.opacity);
    }
    // Isosurface: the first crossing of the threshold, refined linearly between samples,
    // shaded by the data gradient with a light at the eye.
    var previous = -3.4e38;
    var previous_t = t0;
    for (var i = 0u; i < steps; i = i + 1u) {
        let t = t0 + (f32(i) + 0.5) * params.step;
        if (t >= t1) {
            break;
        }
        let s = value_at(origin + dir * t);
        if (!s.valid) {
            continue;
        }
        let v = s.value.x;
        if (v >= params.threshold) {
            var t_hit = t;
            if (previous > -3.0e38 && v > previous) {
                t_hit = previous_t + (t - previous_t) * (params.threshold - previous) / (v - previous);
            }
            let p = origin + dir * t_hit;
            let h = 1.0;
            let g = vec3<f32>(
                sample_linear(p + vec3<f32>(h, 0.0, 0.0), params.data_size).value.x - sample_linear(p - vec3<f32>(h, 0.0, 0.0), params.data_size).value.x,
                sample_linear(p + vec3<f32>(0.0, h, 0.0), params.data_size).value.x - sample_linear(p - vec3<f32>(0.0, h, 0.0), params.data_size).value.x,
                sample_linear(p + vec3<f32>(0.0, 0.0, h), params.data_size).value.x - sample_linear(p - vec3<f32>(0.0, 0.0, h), params.data_size).value.x,
            );
            var diffuse = 1.0;
            if (length(g) > 0.0) {
                diffuse = abs(dot(normalize(g), dir));
            }
            let c = colormap(d, normalize_value(d, params.threshold));
            return vec4<f32>(c.rgb * (0.25 + 0.75 * diffuse), c.a * params.opacity);
        }
        previous = v;
        previous_t = t;
    }
    return vec4<f32>(0.0);
}
