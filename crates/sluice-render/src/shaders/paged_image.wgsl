// Paged image: a 2-D source held as pages in an atlas, found through a page table. Included
// after common.wgsl (normalize_value, colormap, has_nan). The texel type, the level count
// and the linear sampling function are filled in when the pipeline is built.
//
// Coordinates stay small at any zoom: the rectangle is drawn relative to an anchor (a level-0
// point near the view centre) and each level's position of that anchor is split on the CPU, in
// f64, into an integer page and a fraction inside it.

struct Level {
    // Page (x = column, y = row) holding the anchor; z: 1 when the level exists.
    anchor_page: vec4<i32>,
    // The anchor inside that page, in the level's samples; then 1 / downsample (x, y).
    anchor_frac: vec2<f32>,
    inv_downsample: vec2<f32>,
    // The level's samples relative to the anchor page's corner: [lo, hi) per axis.
    lo: vec2<f32>,
    hi: vec2<f32>,
};

struct Params {
    // Anchor-relative level-0 coordinates to clip space.
    transform: mat4x4<f32>,
    nan_color: vec4<f32>,
    display: Display,
    // The rectangle drawn, anchor-relative level-0 coordinates: (x0, y0, x1, y1).
    rect: vec4<f32>,
    // Atlas: slot extent (x, y), slots per atlas row, border.
    slot: vec4<i32>,
    // Atlas size in texels (x, y); page interior size (x, y).
    atlas_size: vec2<f32>,
    page: vec2<f32>,
    // Wanted level, number of levels, page-table window (entries per axis per level), mode.
    level: u32,
    levels: u32,
    window: u32,
    // 0: scalar through the colormap; 1: value + alpha; 2: RGB; 3: RGBA.
    mode: u32,
    // 0: nearest; 1: linear.
    linear: u32,
    alpha_scale: f32,
    opacity: f32,
    // What one texel read means in data units (255 for u8 data in a unorm atlas, else 1).
    value_scale: f32,
    lv: array<Level, MAX_LEVELS>,
};

@group(0) @binding(0) var<uniform> params: Params;
@group(0) @binding(1) var atlas: texture_2d<SAMPLE_T>;
@group(0) @binding(3) var table: texture_2d<u32>;
@group(0) @binding(4) var atlas_sampler: sampler;

struct VertexOut {
    @builtin(position) position: vec4<f32>,
    @location(0) rel: vec2<f32>,
};

@vertex
fn vs_main(@builtin(vertex_index) index: u32) -> VertexOut {
    var corners = array<vec2<f32>, 6>(
        vec2<f32>(0.0, 0.0), vec2<f32>(1.0, 0.0), vec2<f32>(0.0, 1.0),
        vec2<f32>(0.0, 1.0), vec2<f32>(1.0, 0.0), vec2<f32>(1.0, 1.0),
    );
    let r = params.rect;
    let rel = mix(r.xy, r.zw, corners[index]);
    var out: VertexOut;
    out.position = params.transform * vec4<f32>(rel, 0.0, 1.0);
    out.rel = rel;
    return out;
}

fn wrap(i: i32, n: i32) -> i32 {
    return ((i % n) + n) % n;
}

// The entry of page `pg` of level `l`: (slot, level of the page the slot holds, sides it was
// uploaded without a border), or slot -1 (look at the next coarser level), or -2 (no coarser
// level has anything here: stop). A missing page's entry may name the coarser resident page
// that covers it all (its level plus 1 in the low byte of the fourth field), so that one
// lookup finds the fallback, or say that no resident coarser page meets it (bit 31,
// `page_table::HOLE`).
fn lookup(l: u32, pg: vec2<i32>) -> vec3<i32> {
    let w = i32(params.window);
    let texel = vec2<i32>(wrap(pg.x, w), i32(l) * w + wrap(pg.y, w));
    let e = textureLoad(table, texel, 0);
    if (e.y != bitcast<u32>(pg.x) || e.z != bitcast<u32>(pg.y)) {
        return vec3<i32>(-1, 0, 0);
    }
    if (e.x == 0u) {
        return vec3<i32>(select(-1, -2, (e.w & 0x80000000u) != 0u), 0, 0);
    }
    let fallback = e.w & 255u;
    return vec3<i32>(i32(e.x) - 1, select(i32(l), i32(fallback) - 1, fallback != 0u), i32(e.w >> 8u));
}

// Level `l`'s sample coordinates of the point `rel`, clamped to the level's samples (sample
// centres for linear): the atlas's own clamping knows only the atlas's edges.
fn level_coords(l: u32, rel: vec2<f32>, half: f32) -> vec2<f32> {
    let lv = params.lv[l];
    let t = lv.anchor_frac + rel * lv.inv_downsample;
    return clamp(t, lv.lo + vec2<f32>(half), max(lv.lo + vec2<f32>(half), lv.hi - vec2<f32>(max(half, 1e-3))));
}

struct Found {
    // Atlas texel coordinates (continuous: texel i covers [i, i + 1)).
    pos: vec2<f32>,
    // The slot's first and last texel, for taps.
    lo: vec2<i32>,
    hi: vec2<i32>,
    ok: bool,
};

// Walks from the wanted level to coarser ones until a resident page holds the point.
fn find(rel: vec2<f32>) -> Found {
    var out: Found;
    out.ok = false;
    let half = select(0.0, 0.5, params.linear == 1u);
    for (var l = params.level; l < params.levels; l = l + 1u) {
        var t = level_coords(l, rel, half);
        var step = floor(t / params.page);
        let pg = params.lv[l].anchor_page.xy + vec2<i32>(step);
        let found = lookup(l, pg);
        let slot = found.x;
        if (slot == -2) {
            break;
        }
        if (slot >= 0) {
            if (u32(found.y) != l) {
                t = level_coords(u32(found.y), rel, half);
                step = floor(t / params.page);
            }
            var in_page = t - step * params.page;
            // Sides uploaded without their border (no view comes within a sample of them):
            // stay half a sample inside the interior there. Bits: rows before, rows after,
            // columns before, columns after.
            let sides = found.z;
            if (half > 0.0 && sides != 0) {
                let lo = vec2<f32>(select(-1e9, half, (sides & 4) != 0), select(-1e9, half, (sides & 1) != 0));
                let hi = vec2<f32>(select(1e9, params.page.x - half, (sides & 8) != 0), select(1e9, params.page.y - half, (sides & 2) != 0));
                in_page = clamp(in_page, lo, hi);
            }
            let per_row = params.slot.z;
            let origin = vec2<i32>(slot % per_row, slot / per_row) * params.slot.xy;
            out.pos = vec2<f32>(origin) + vec2<f32>(f32(params.slot.w)) + in_page;
            out.lo = origin;
            out.hi = origin + params.slot.xy - vec2<i32>(1);
            out.ok = true;
            return out;
        }
    }
    return out;
}

fn sample_nearest_in(f: Found) -> Sample {
    let v = vec4<f32>(textureLoad(atlas, clamp(vec2<i32>(floor(f.pos)), f.lo, f.hi), 0)) * params.value_scale;
    return Sample(v, !has_nan(v));
}

// Bilinear between texel centres of `f.pos` by four taps clamped to the slot's texels; NaN
// taps are left out and the weights renormalized, as the dense path's `sample_taps` does.
// `sample_linear_in` (filled in below when the pipeline is built,
// `paged/pipeline.rs`) takes one hardware sample first where the atlas is filterable.
fn sample_taps_in(f: Found) -> Sample {
    let q = f.pos - vec2<f32>(0.5);
    let base = floor(q);
    let fr = q - base;
    let i0 = vec2<i32>(base);
    var acc = vec4<f32>(0.0);
    var weight = 0.0;
    for (var k = 0u; k < 4u; k = k + 1u) {
        let o = vec2<i32>(i32(k & 1u), i32(k >> 1u));
        let w2 = select(vec2<f32>(1.0) - fr, fr, o == vec2<i32>(1));
        let w = w2.x * w2.y;
        if (w > 0.0) {
            let v = vec4<f32>(textureLoad(atlas, clamp(i0 + o, f.lo, f.hi), 0)) * params.value_scale;
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

LINEAR_SAMPLE

@fragment
fn fs_main(in: VertexOut) -> OpaqueOut {
    let f = find(in.rel);
    if (!f.ok) {
        // Nothing resident covers this point yet (the coarsest level is still loading).
        discard;
    }
    var s: Sample;
    if (params.linear == 0u) {
        s = sample_nearest_in(f);
    } else {
        s = sample_linear_in(f);
    }
    let rgba = image_color(s, params.display, params.mode, params.alpha_scale, params.nan_color);
    let alpha = rgba.a * params.opacity;
    if (alpha <= 0.0) {
        discard;
    }
    return OpaqueOut(vec4<f32>(rgba.rgb, alpha), pack_depth(in.position.z));
}
