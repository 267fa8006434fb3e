// Volume visual: rays marched through a 3-D texture in a compute shader, one invocation per
// target pixel (each intersects its ray with the volume's box, so the camera may be inside
// the volume); the result is blended over the target by `volume_composite.wgsl`. Compute, not
// a fragment shader: on compute-first GPUs (H100/H200) the graphics pipeline has a small
// fraction of the chip.
// Positions are in voxel coordinates: voxel (z, y, x) covers [x, x+1] x [y, y+1] x [z, z+1].
// Rays stop at the depth of what the opaque pass drew, so meshes and images in front hide
// the volume behind them.
// Each mode and interpolation is a pipeline of its own: the constants `MODE` (as
// `params.mode`), `LINEAR` (as `params.linear`) and `USE_GRID` are put before this source
// (`volume_pipeline::MarchVariant`), since CPU devices run both sides of every branch.
// Without `USE_GRID` (data where the grid could skip nothing) a ray's samples go in chunks of
// `UNBOUNDED_CHUNK` with no grid reads.
// With `PAIRED` (8-bit data on CPU devices) linear samples come from the z-paired copy
// `data_pairs` (`volume_pairs.rs`, which declares it and `sample_paired_uvw`).

struct Params {
    // Voxel coordinates to clip space, and back.
    mvp: mat4x4<f32>,
    inv_mvp: mat4x4<f32>,
    display: Display,
    data_size: vec3<i32>,
    // 0: maximum intensity projection; 1: translucent; 2: isosurface (the shader reads the
    // constant `MODE`, equal to it).
    mode: u32,
    viewport: vec2<f32>,
    // Distance between samples along a ray, in voxels; 0: chosen per ray (one sample per
    // voxel along the ray's dominant axis, `1 / max |dir|`).
    step: f32,
    // 0: nearest; 1: trilinear (the shader reads the constant `LINEAR`, equal to it).
    linear: u32,
    // Translucent: opacity per voxel of distance at full colormap alpha and t = 1.
    attenuation: f32,
    // Isosurface: threshold in data units.
    threshold: f32,
    opacity: f32,
    max_steps: u32,
    bricks: Bricks,
    // The min/max grid (`grid`): cells per axis and the voxels per cell edge.
    grid_count: vec3<i32>,
    grid_cell: i32,
    // Translucent: normalized values below this map to colormap entries of alpha 0.
    zero_alpha_below: f32,
    // Maximum intensity: rays stop once their maximum reaches this (the high contrast limit,
    // or the data's largest value where it is known and lower).
    mip_stop: f32,
};

@group(0) @binding(0) var<uniform> params: Params;
@group(0) @binding(1) var data: texture_3d<SAMPLE_T>;
// Per cell of grid_cell^3 voxels: (min, max) over the voxels of the cell and of its 26
// neighbours (so every voxel a sample inside the cell interpolates from), NaN left out;
// min > max when all are NaN. Built by `volume_grid.wgsl` when the data changes.
@group(0) @binding(11) var grid: texture_3d<f32>;
// The opaque pass's depth, written as a colour (`OpaqueOut.depth`).
@group(2) @binding(0) var scene_depth: texture_2d<f32>;
@group(2) @binding(1) var marched: texture_storage_2d<rgba16float, write>;

// Workgroups go in tiles of 8 x 8 workgroups (64 x 64 pixels): dispatch row `tile.y` holds
// the `8 * groups.x` workgroups of one row of tiles (fewer rows in the last), tile after tile,
// row by row inside a tile. A CPU device runs workgroups in dispatch order, so rays close on
// screen, which read close voxels, run close in time and find them in its caches.
@compute @workgroup_size(8, 8)
fn cs_main(@builtin(workgroup_id) tile: vec3<u32>, @builtin(local_invocation_id) local: vec3<u32>) {
    let groups = (vec2<u32>(params.viewport) + vec2<u32>(7u)) / 8u;
    let rows = min(8u, groups.y - tile.y * 8u);
    if (tile.x >= groups.x * rows) {
        return;
    }
    let column = tile.x / (8u * rows);
    let within = tile.x - column * 8u * rows;
    let width = min(8u, groups.x - column * 8u);
    let group = vec2<u32>(column * 8u + within % width, tile.y * 8u + within / width);
    let id = group * 8u + local.xy;
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

    // The default step: one sample per voxel along the axis the ray moves fastest on, so
    // every plane of voxels across it is sampled once (a unit `dir` in voxel coordinates).
    let a = abs(dir);
    let step = select(params.step, 1.0 / max(max(a.x, a.y), a.z), params.step <= 0.0);
    // Samples i at t0 + (i + 0.5) * step for every such t before t1.
    let steps = min(u32(max(ceil((t1 - t0) / step - 0.5), 0.0)), params.max_steps);
    let first = origin + dir * (t0 + 0.5 * step);
    let inv_size = 1.0 / size;
    let ray = Ray(
        origin,
        dir,
        t0,
        steps,
        first,
        dir * step,
        first * inv_size,
        dir * step * inv_size,
        step,
        // Chunks span at most grid_cell - 2 voxels (see `chunk_span`).
        1u + u32(min(max(f32(params.grid_cell) - 2.0, 0.0) / step, 1024.0)),
    );
    if (MODE == 0u) {
        return march_mip(ray);
    }
    if (MODE == 1u) {
        return march_translucent(ray);
    }
    return march_iso(ray);
}

// A ray in voxel coordinates: samples i < steps at t0 + (i + 0.5) * step, all before the
// ray's end; their positions step by `delta` (voxels) and `delta_uvw` (normalized).
struct Ray {
    origin: vec3<f32>,
    dir: vec3<f32>,
    t0: f32,
    steps: u32,
    first: vec3<f32>,
    delta: vec3<f32>,
    first_uvw: vec3<f32>,
    delta_uvw: vec3<f32>,
    // Distance between samples, in voxels.
    step: f32,
    // Samples per chunk: one grid lookup bounds them all (`chunk_span`).
    chunk: u32,
};

fn sample_t(ray: Ray, i: u32) -> f32 {
    return ray.t0 + (f32(i) + 0.5) * ray.step;
}

fn sample_p(ray: Ray, i: u32) -> vec3<f32> {
    return ray.first + f32(i) * ray.delta;
}

// Sample i of the ray, nearest or linear.
fn value_at_sample(ray: Ray, i: u32) -> Sample {
    if (LINEAR) {
        if (PAIRED) {
            return sample_paired_uvw(ray.first_uvw + f32(i) * ray.delta_uvw);
        }
        return sample_linear_uvw(ray.first_uvw + f32(i) * ray.delta_uvw);
    }
    return sample_nearest(sample_p(ray, i), params.data_size);
}

// A chunk of a ray's samples and a range holding every value they can take: the (min, max)
// of one grid cell, and the index of the first sample past the chunk (at least one past
// `i`).
struct Span {
    range: vec2<f32>,
    end: u32,
};

// Samples per chunk without the grid. A maximum intensity ray tests whether it may stop
// once a chunk: a test every sample, a second way out of the sampling loop, cost CPU devices
// about an eighth of the peers' 512^3 march on lavapipe (docs/measurements.md), and samples
// past the stop cannot change the colour.
const UNBOUNDED_CHUNK: u32 = 32u;

// The chunk of samples from `i`: `ray.chunk` samples (fewer at the ray's end), bounded by
// the grid cell holding sample `i`. A cell's range covers its own voxels and its 26
// neighbours', that is every voxel within `grid_cell` voxels of the cell, and a linear
// sample reads voxels less than 1.5 voxels from it: so every sample within
// `grid_cell - 1.5` voxels of the cell is bounded by its range. The chunk's samples lie
// within `(chunk - 1) * step <= grid_cell - 2` voxels of sample `i`, which lies in the cell.
// One lookup per fixed-length chunk (not per cell crossed, at a different sample on each
// ray) keeps the rays of a SIMD group in step on CPU devices, where every lane of a group
// runs as long as the longest.
fn chunk_span(ray: Ray, i: u32) -> Span {
    if (!USE_GRID) {
        // Chunks of `UNBOUNDED_CHUNK` samples with no bounds (the marchers test a span's
        // range only with the grid; an infinite bound would be undefined where the shader
        // compiler may assume no infinities): the ray's stops are tested once a chunk.
        return Span(vec2<f32>(0.0), min(i + UNBOUNDED_CHUNK, ray.steps));
    }
    let p = sample_p(ray, i);
    let c = clamp(vec3<i32>(floor(p / f32(params.grid_cell))), vec3<i32>(0), params.grid_count - vec3<i32>(1));
    return Span(textureLoad(grid, c, 0).xy, min(i + ray.chunk, ray.steps));
}

// Maximum intensity: cells whose maximum cannot raise the running maximum are skipped, so
// are cells wholly below the colormap's low limit (they all give its first entry), and the
// ray stops once the maximum reaches the high limit or the data's largest value (nothing
// after changes the colour; `params.mip_stop`).
fn march_mip(ray: Ray) -> vec4<f32> {
    let d = params.display;
    var best = -3.4e38;
    var found = false;
    var i = 0u;
    loop {
        if (i >= ray.steps || best >= params.mip_stop) {
            break;
        }
        let span = chunk_span(ray, i);
        let r = span.range;
        if (USE_GRID && (r.y < r.x || r.y <= best)) {
            i = span.end;
            continue;
        }
        if (USE_GRID && r.y < min(d.clim.x, d.clim.y)) {
            best = max(best, r.x);
            found = true;
            i = span.end;
            continue;
        }
        for (; i < span.end; i = i + 1u) {
            let s = value_at_sample(ray, i);
            if (s.valid) {
                best = max(best, s.value.x);
                found = true;
            }
        }
    }
    if (!found) {
        return vec4<f32>(0.0);
    }
    let c = colormap(d, normalize_value(d, best));
    return vec4<f32>(c.rgb, c.a * params.opacity);
}

// Front-to-back compositing until the ray is (nearly) opaque; cells whose values all map
// to zero alpha (below the low limit, or to colormap entries of alpha 0) are skipped.
fn march_translucent(ray: Ray) -> vec4<f32> {
    let d = params.display;
    var color = vec3<f32>(0.0);
    var alpha = 0.0;
    var i = 0u;
    loop {
        if (i >= ray.steps || alpha > 0.995) {
            break;
        }
        let span = chunk_span(ray, i);
        let r = span.range;
        if (USE_GRID) {
            if (r.y < r.x) {
                i = span.end;
                continue;
            }
            // The cell's highest normalized value: at its high end, or at its low end where
            // the contrast limits are inverted.
            let top = max(normalize_value(d, r.x), normalize_value(d, r.y));
            if (top == 0.0 || top < params.zero_alpha_below) {
                i = span.end;
                continue;
            }
        }
        for (; i < span.end; i = i + 1u) {
            if (alpha > 0.995) {
                break;
            }
            let s = value_at_sample(ray, i);
            if (s.valid) {
                let v = normalize_value(d, s.value.x);
                let c = colormap(d, v);
                let a = 1.0 - exp(-params.attenuation * c.a * v * ray.step);
                color = color + (1.0 - alpha) * a * c.rgb;
                alpha = alpha + (1.0 - alpha) * a;
            }
        }
    }
    if (alpha <= 0.0) {
        return vec4<f32>(0.0);
    }
    return vec4<f32>(color / alpha, alpha * params.opacity);
}

// Isosurface: the first crossing of the threshold, refined linearly between samples,
// shaded by the data gradient with a light at the eye. Cells whose maximum is below the
// threshold are skipped. The crossing is shaded once, after the loop: CPU devices run every
// branch of a loop's body for every sample, so a shading inside it would cost its six
// gradient samples at every sample.
fn march_iso(ray: Ray) -> vec4<f32> {
    var previous = -3.4e38;
    var previous_t = ray.t0;
    // The sample before the current one was skipped (its value is needed for the
    // refinement only at a crossing).
    var skipped = false;
    var hit = false;
    var hit_t = 0.0;
    var hit_v = 0.0;
    var i = 0u;
    loop {
        if (i >= ray.steps || hit) {
            break;
        }
        let span = chunk_span(ray, i);
        let r = span.range;
        if (USE_GRID && (r.y < r.x || r.y < params.threshold)) {
            i = span.end;
            skipped = true;
            continue;
        }
        for (; i < span.end; i = i + 1u) {
            let t = sample_t(ray, i);
            let s = value_at_sample(ray, i);
            if (!s.valid) {
                continue;
            }
            let v = s.value.x;
            if (v >= params.threshold) {
                // `i` stays at the crossing's sample.
                hit = true;
                hit_t = t;
                hit_v = v;
                break;
            }
            previous = v;
            previous_t = t;
            skipped = false;
        }
    }
    if (!hit) {
        return vec4<f32>(0.0);
    }
    if (skipped && i > 0u) {
        let before = value_at_sample(ray, i - 1u);
        previous = select(-3.4e38, before.value.x, before.valid);
        previous_t = sample_t(ray, i - 1u);
    }
    return shade_iso(ray, hit_t, hit_v, previous, previous_t);
}

fn shade_iso(ray: Ray, t: f32, v: f32, previous: f32, previous_t: f32) -> vec4<f32> {
    let d = params.display;
    var t_hit = t;
    if (previous > -3.0e38 && v > previous) {
        t_hit = previous_t + (t - previous_t) * (params.threshold - previous) / (v - previous);
    }
    let p = ray.origin + ray.dir * t_hit;
    let h = 1.0;
    let g = vec3<f32>(
        sample_linear(p + vec3<f32>(h, 0.0, 0.0), params.data_size).value.x - sample_linear(p - vec3<f32>(h, 0.0, 0.0), params.data_size).value.x,
        sample_linear(p + vec3<f32>(0.0, h, 0.0), params.data_size).value.x - sample_linear(p - vec3<f32>(0.0, h, 0.0), params.data_size).value.x,
        sample_linear(p + vec3<f32>(0.0, 0.0, h), params.data_size).value.x - sample_linear(p - vec3<f32>(0.0, 0.0, h), params.data_size).value.x,
    );
    var diffuse = 1.0;
    if (length(g) > 0.0) {
        diffuse = abs(dot(normalize(g), ray.dir));
    }
    let c = colormap(d, normalize_value(d, params.threshold));
    return vec4<f32>(c.rgb * (0.25 + 0.75 * diffuse), c.a * params.opacity);
}
