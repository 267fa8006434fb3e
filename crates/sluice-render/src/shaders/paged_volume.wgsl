// Paged volume: rays marched through a source's 3-D pages (`paged/volume.rs`). Per sample:
// the level whose samples match the ray step's footprint at the sample's distance, looked up in
// the page table; if that page is not resident, the next coarser level's, and so on. Inside a
// page the hardware filters, or eight taps do for integer and non-filterable float atlases
// (the 1-sample border makes it seamless across pages). The ray steps in units of the level
// it sampled. All three modes of the dense marcher. Positions are
// level-0 voxel coordinates, as in `volume.wgsl`.


struct Params {
    mvp: mat4x4<f32>,
    inv_mvp: mat4x4<f32>,
    display: Display,
    data_size: vec3<f32>,
    step: f32,
    viewport: vec2<f32>,
    levels: u32,
    // 1 for linear sampling (unread here: the pipeline's `LINEAR_MARCH` says it).
    linear: u32,
    atlas_size: vec3<f32>,
    pad_atlas: u32,
    slot_per: vec2<u32>,
    slot_side: u32,
    window: u32,
    eye: vec3<f32>,
    pixel_size: f32,
    pixel_spread: f32,
    page: f32,
    border: f32,
    max_steps: u32,
    opacity: f32,
    value_scale: f32,
    // 0: maximum intensity projection; 1: translucent; 2: isosurface.
    mode: u32,
    // Translucent: opacity per level-0 voxel of distance at full colormap alpha and t = 1;
    // isosurface: the threshold in data units.
    attenuation: f32,
    // The shortest level-0 step a depth-sample target allows (0: none).
    min_step: f32,
    // The visual's level bias, and its locked level (0xffffffff: none).
    level_bias: i32,
    level_lock: u32,
    pad: u32,
    lv: array<Level, MAX_LEVELS>,
};

@group(0) @binding(0) var<uniform> params: Params;
@group(0) @binding(1) var atlas: texture_3d<SAMPLE_T>;
@group(0) @binding(3) var<storage, read> table: array<vec4<u32>>;
@group(0) @binding(4) var samp: sampler;
// Per atlas slot, the (low, high) of the page it holds, in data units (border included, NaN
// left out; (3.4e38, -3.4e38) for a page with no value), then 1 where some texel is NaN.
@group(0) @binding(5) var<storage, read> page_ranges: array<vec4<f32>>;
@group(2) @binding(0) var scene_depth: texture_2d<f32>;
@group(2) @binding(1) var marched: texture_storage_2d<rgba16float, write>;

// The ray's step at level 0, in voxels: the one set, or with the default (`params.step` 0)
// one sample per voxel along the axis the ray moves fastest on, as the dense marcher
// chooses it. Set once per ray by `march`.
var<private> base_step: f32;

@compute @workgroup_size(8, 8)
fn cs_main(@builtin(global_invocation_id) id: vec3<u32>) {
    if (f32(id.x) >= params.viewport.x || f32(id.y) >= params.viewport.y) {
        return;
    }
    textureStore(marched, vec2<i32>(id.xy), march(vec2<f32>(id.xy) + vec2<f32>(0.5)));
}

fn unproject(ndc: vec3<f32>) -> vec3<f32> {
    let h = params.inv_mvp * vec4<f32>(ndc, 1.0);
    return h.xyz / h.w;
}

// The level whose samples are no larger than the footprint of a ray step at `p` (a pixel
// there, or the depth-sample target's step), before the visual's bias or lock.
fn footprint_level(p: vec3<f32>) -> u32 {
    let fp = max(params.pixel_size + params.pixel_spread * distance(p, params.eye), params.min_step);
    var l = 0u;
    for (var k = 1u; k < params.levels; k = k + 1u) {
        if (params.lv[k].ds <= fp) {
            l = k;
        }
    }
    return l;
}

// The level of `footprint_level` with the visual's bias or lock: the choice of
// `visible_pages_3d`, which wanted the pages.
fn wanted_level(p: vec3<f32>) -> u32 {
    if (params.level_lock != 0xffffffffu) {
        return params.level_lock;
    }
    return u32(clamp(i32(footprint_level(p)) + params.level_bias, 0, i32(params.levels) - 1));
}

struct Found {
    value: f32,
    // The level sampled; `levels` when no level has a resident page here.
    level: u32,
    valid: bool,
};

// Whether the march samples linearly: a constant of the pipeline (`draw/paged_volume.rs`
// makes one per interpolation), so that a CPU device, which computes both sides of a branch
// its lanes disagree on or cannot see through, compiles only the sample it takes.
override LINEAR_MARCH: bool = true;

// Tests only (`PagedVolumes::per_sample_spans`): every span ends at its first sample, so that
// each sample looks its page up as `sample_resident_as` does, and none is skipped: the
// marcher the spans and their skipping are compared with.
override PER_SAMPLE_SPANS: bool = false;

// The sample at `p` from the wanted level, else the nearest coarser resident one (`linear`
// or nearest).
fn sample_resident_as(p: vec3<f32>, linear: bool) -> Found {
    for (var l = wanted_level(p); l < params.levels; l = l + 1u) {
        let s = sample_level(l, p, linear);
        if (s.state >= 0.0) {
            return Found(s.value.x, l, s.state > 0.0);
        }
    }
    return Found(0.0, params.levels, false);
}

// A stretch of a ray whose samples all come from one page: the marchers look the page up
// once per span, not once per sample (on a CPU device the lookup cost more than the sample).
// Until `t_end` the wanted level stays, and so does the page of every level from it to the
// one sampled, so each sample of the span is the one `sample_resident_as` would take.
struct Span {
    t_end: f32,
    // The level sampled; `levels` when no level has a resident page here.
    level: u32,
    // Level sample coordinates of a level-0 position `p`: `(p - offset) * inv_ds`, clamped
    // to `0.5..=last`, as `sample_level` computes them; atlas texel = those + `shift`.
    inv_ds: vec3<f32>,
    offset: vec3<f32>,
    last: vec3<f32>,
    shift: vec3<f32>,
    // The slot's texels (as `sample_level` clamps its taps).
    lo: vec3<i32>,
    hi: vec3<i32>,
    // The page's values and NaN flag (`page_ranges`); no values where nothing is resident.
    range: vec4<f32>,
};

// The ray parameter past `t` at which the footprint level of `origin + dir * t` becomes
// coarser than `l` (the footprint grows with the distance from the eye), or 3.4e38 for
// never (the last level, a lock, no spread: an orthographic view).
fn level_change_t(origin: vec3<f32>, dir: vec3<f32>, t: f32, l: u32) -> f32 {
    if (params.level_lock != 0xffffffffu || l + 1u >= params.levels || params.pixel_spread <= 0.0) {
        return 3.4e38;
    }
    // distance(origin + dir * t', eye) = r: t' = -b + sqrt(b^2 - c).
    let r = (params.lv[l + 1u].ds - params.pixel_size) / params.pixel_spread;
    let w = origin - params.eye;
    let b = dot(w, dir);
    let disc = b * b - (dot(w, w) - r * r);
    if (disc < 0.0) {
        return 3.4e38;
    }
    return max(-b + sqrt(disc), t);
}

// The ray parameter at which `origin + dir * t` leaves page `pg` of level `lv` (a level's
// first and last pages reach past its edges, where coordinates are clamped).
fn page_exit_t(origin: vec3<f32>, dir: vec3<f32>, lv: Level, pg: vec3<u32>) -> f32 {
    let q0 = (origin - lv.offset) * lv.inv_ds;
    let qd = dir * lv.inv_ds;
    let low = vec3<f32>(pg) * params.page;
    let up = qd > vec3<f32>(0.0) & (pg + vec3<u32>(1u) < lv.grid);
    let down = qd < vec3<f32>(0.0) & (pg > vec3<u32>(0u));
    let te = select(select(vec3<f32>(3.4e38), (low - q0) / qd, down), (low + vec3<f32>(params.page) - q0) / qd, up);
    return min(te.x, min(te.y, te.z));
}

// The span of the ray `origin + dir * t` from `t`: its sampled level and page as
// `sample_resident_as` finds them, and where the first of the pages looked at, or the
// wanted level, changes.
fn span_at(origin: vec3<f32>, dir: vec3<f32>, t: f32) -> Span {
    let p = origin + dir * t;
    let footprint = footprint_level(p);
    var t_end = select(level_change_t(origin, dir, t, footprint), t, PER_SAMPLE_SPANS);
    var l = wanted_level(p);
    for (; l < params.levels; l = l + 1u) {
        let lv = params.lv[l];
        let q = clamp((p - lv.offset) * lv.inv_ds, vec3<f32>(0.5), lv.size - vec3<f32>(0.5));
        let pg = min(vec3<u32>(floor(q / params.page)), lv.grid - vec3<u32>(1u));
        t_end = min(t_end, page_exit_t(origin, dir, lv, pg));
        let found = page_slot(l, pg, lv.table_base);
        if (found.w != 0u) {
            let lo = vec3<i32>(found.xyz);
            return Span(
                t_end,
                l,
                lv.inv_ds,
                lv.offset,
                lv.size - vec3<f32>(0.5),
                vec3<f32>(found.xyz) - vec3<f32>(pg) * params.page + vec3<f32>(params.border),
                lo,
                lo + vec3<i32>(i32(params.slot_side) - 1),
                page_ranges[found.w - 1u],
            );
        }
    }
    return Span(t_end, params.levels, vec3<f32>(0.0), vec3<f32>(0.0), vec3<f32>(0.0), vec3<f32>(0.0), vec3<i32>(0), vec3<i32>(0), vec4<f32>(3.4e38, -3.4e38, 0.0, 0.0));
}

// The sample at `p` inside span `sp` (a position of its stretch of the ray), as
// `sample_resident_as(p, LINEAR_MARCH)` takes it.
fn span_sample(sp: Span, p: vec3<f32>) -> Found {
    if (sp.level >= params.levels) {
        return Found(0.0, params.levels, false);
    }
    let texel = clamp((p - sp.offset) * sp.inv_ds, vec3<f32>(0.5), sp.last) + sp.shift;
    var s: Sample;
    if (LINEAR_MARCH) {
        s = sample_linear_in(texel, sp.lo, sp.hi);
    } else {
        let v = atlas_texel(clamp(vec3<i32>(floor(texel)), sp.lo, sp.hi));
        s = Sample(v, !(MAY_BE_NAN && has_nan(v)));
    }
    return Found(s.value.x, sp.level, s.valid);
}

// The samples of span `sp` from `t` (at least one: the span at `t` may end at `t` where
// rounding put it), `step` apart, and not past `t1`.
fn span_samples(sp: Span, t: f32, step: f32, t1: f32) -> f32 {
    return max(ceil((min(sp.t_end, t1) - t) / step), 1.0);
}

// Whether every sample of span `sp` is left out of a translucent march: its values all map
// to zero opacity (at or below the low contrast limit, or above it where the limits are
// reversed), or none is resident.
fn span_transparent(sp: Span) -> bool {
    let d = params.display;
    let span = d.clim.y - d.clim.x;
    if (span > 0.0) {
        return sp.range.y <= d.clim.x;
    }
    if (span < 0.0) {
        return sp.range.x >= d.clim.x;
    }
    return sp.range.y < d.clim.y;
}

// The ray step of span `sp`: `base_step` in units of its level (the coarsest where nothing
// is resident).
fn span_step(sp: Span) -> f32 {
    return base_step * params.lv[min(sp.level, params.levels - 1u)].ds;
}

fn march(frag: vec2<f32>) -> vec4<f32> {
    let ndc_xy = vec2<f32>(frag.x / params.viewport.x * 2.0 - 1.0, 1.0 - frag.y / params.viewport.y * 2.0);
    let origin = unproject(vec3<f32>(ndc_xy, 0.0));
    let far = unproject(vec3<f32>(ndc_xy, 1.0));
    let dir = normalize(far - origin);
    let a = abs(dir);
    base_step = select(params.step, 1.0 / max(max(a.x, a.y), a.z), params.step <= 0.0);
    let depth = unpack_depth(textureLoad(scene_depth, vec2<i32>(frag), 0));
    let t_depth = dot(unproject(vec3<f32>(ndc_xy, depth)) - origin, dir);
    let size = params.data_size;
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
    // The first sample half a step of its level in, so that an axis-aligned ray samples a
    // coarse level at its sample centres.
    let first = wanted_level(origin + dir * t0);
    var t = t0 + 0.5 * base_step * params.lv[first].ds;
    if (params.mode == 1u) {
        return march_translucent(origin, dir, t, t1);
    }
    if (params.mode == 2u) {
        return march_iso(origin, dir, t, t1);
    }
    var best = -3.4e38;
    var found = false;
    var n = 0u;
    loop {
        if (t >= t1 || best >= max(d.clim.x, d.clim.y) || n >= params.max_steps) {
            break;
        }
        let sp = span_at(origin, dir, t);
        let step = span_step(sp);
        if (!PER_SAMPLE_SPANS && found && sp.range.y <= best) {
            // No sample of the span can raise the maximum: to the first sample past it.
            let k = span_samples(sp, t, step, t1);
            t = t + k * step;
            n = n + u32(k);
            continue;
        }
        // At least one sample a span (the span at `t` may end at `t` where rounding put it).
        loop {
            let s = span_sample(sp, origin + dir * t);
            if (s.valid) {
                best = max(best, s.value);
                found = true;
            }
            t = t + step;
            n = n + 1u;
            if (t >= sp.t_end || t >= t1 || best >= max(d.clim.x, d.clim.y) || n >= params.max_steps) {
                break;
            }
        }
    }
    if (!found) {
        return vec4<f32>(0.0);
    }
    let c = colormap(d, normalize_value(d, best));
    return vec4<f32>(c.rgb, c.a * params.opacity);
}

// Front-to-back compositing as the dense marcher's, each sample weighted by the length of
// its step (the step of the level it sampled).
fn march_translucent(origin: vec3<f32>, dir: vec3<f32>, start: f32, t1: f32) -> vec4<f32> {
    let d = params.display;
    var color = vec3<f32>(0.0);
    var alpha = 0.0;
    var t = start;
    var n = 0u;
    loop {
        if (t >= t1 || alpha > 0.995 || n >= params.max_steps) {
            break;
        }
        let sp = span_at(origin, dir, t);
        let step = span_step(sp);
        if (!PER_SAMPLE_SPANS && span_transparent(sp)) {
            let k = span_samples(sp, t, step, t1);
            t = t + k * step;
            n = n + u32(k);
            continue;
        }
        loop {
            let s = span_sample(sp, origin + dir * t);
            if (s.valid) {
                let v = normalize_value(d, s.value);
                let c = colormap(d, v);
                let a = 1.0 - exp(-params.attenuation * c.a * v * step);
                color = color + (1.0 - alpha) * a * c.rgb;
                alpha = alpha + (1.0 - alpha) * a;
            }
            t = t + step;
            n = n + 1u;
            if (t >= sp.t_end || t >= t1 || alpha > 0.995 || n >= params.max_steps) {
                break;
            }
        }
    }
    if (alpha <= 0.0) {
        return vec4<f32>(0.0);
    }
    return vec4<f32>(color / alpha, alpha * params.opacity);
}

// The first sample at or above the threshold, refined linearly between it and the sample
// before, shaded by the gradient (central differences one sample of the level apart) as the
// dense marcher does.
fn march_iso(origin: vec3<f32>, dir: vec3<f32>, start: f32, t1: f32) -> vec4<f32> {
    let d = params.display;
    let threshold = params.attenuation;
    var previous = -3.4e38;
    var previous_t = start;
    var t = start;
    var n = 0u;
    var hit = false;
    var t_hit = 0.0;
    var hit_level = 0u;
    loop {
        if (t >= t1 || hit || n >= params.max_steps) {
            break;
        }
        let sp = span_at(origin, dir, t);
        let step = span_step(sp);
        if (!PER_SAMPLE_SPANS && sp.range.y < threshold && sp.range.z == 0.0) {
            // No sample of the span reaches the threshold: to its last sample, which is
            // taken (a hit just past the span is refined from it; a page with NaN is
            // walked, since its last sample may be invalid and the one to refine from be
            // earlier).
            let k = span_samples(sp, t, step, t1);
            t = t + (k - 1.0) * step;
            n = n + u32(k) - 1u;
        }
        loop {
            let s = span_sample(sp, origin + dir * t);
            if (s.valid) {
                let v = s.value;
                if (v >= threshold) {
                    hit = true;
                    hit_level = min(s.level, params.levels - 1u);
                    t_hit = t;
                    if (previous > -3.0e38 && v > previous) {
                        t_hit = previous_t + (t - previous_t) * (threshold - previous) / (v - previous);
                    }
                    break;
                }
                previous = v;
                previous_t = t;
            }
            t = t + step;
            n = n + 1u;
            if (t >= sp.t_end || t >= t1 || n >= params.max_steps) {
                break;
            }
        }
    }
    if (!hit) {
        return vec4<f32>(0.0);
    }
    // Shaded once, after the march (a CPU device would run a shading inside the loop at
    // every sample).
    let p = origin + dir * t_hit;
    let h = params.lv[hit_level].ds;
    let g = vec3<f32>(
        sample_resident_as(p + vec3<f32>(h, 0.0, 0.0), true).value - sample_resident_as(p - vec3<f32>(h, 0.0, 0.0), true).value,
        sample_resident_as(p + vec3<f32>(0.0, h, 0.0), true).value - sample_resident_as(p - vec3<f32>(0.0, h, 0.0), true).value,
        sample_resident_as(p + vec3<f32>(0.0, 0.0, h), true).value - sample_resident_as(p - vec3<f32>(0.0, 0.0, h), true).value,
    );
    var diffuse = 1.0;
    if (length(g) > 0.0) {
        diffuse = abs(dot(normalize(g), dir));
    }
    let c = colormap(d, normalize_value(d, threshold));
    return vec4<f32>(c.rgb * (0.25 + 0.75 * diffuse), c.a * params.opacity);
}
