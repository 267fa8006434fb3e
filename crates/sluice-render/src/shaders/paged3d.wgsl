// 3-D pages looked up in a page table and sampled in a 3-D atlas: shared by the paged volume
// marcher (`paged_volume.wgsl`) and the paged slice (`paged_slice.wgsl`). The including shader
// declares `params` (with `lv`, `page`, `window`, `slot_per`, `slot_side`, `border`,
// `atlas_size` and `value_scale`), `atlas` (a `texture_3d<SAMPLE_T>`), `table` and `samp`.
// The linear sample inside a slot (`sample_linear_in`) and `MAY_BE_NAN` are filled in when the
// pipeline is built (`draw/paged_volume.rs`): the hardware's filter where the atlas is
// filterable, eight taps inside the slot otherwise (integer and non-filterable float atlases).

struct Level {
    // Level samples per level-0 sample, per axis (x, y, z), and level-0 samples per sample
    // (the largest axis): the ray step's unit.
    inv_ds: vec3<f32>,
    ds: f32,
    // Level-0 position of the level's first sample corner.
    offset: vec3<f32>,
    table_base: u32,
    // Samples of the level (x, y, z).
    size: vec3<f32>,
    pad0: u32,
    // Pages of the level (x, y, z).
    grid: vec3<u32>,
    pad1: u32,
};

// A sample of one level: its channels in data units, and its state: 1 a sample, 0 no valid
// sample here (NaN), -1 its page is absent.
struct PageSample {
    value: vec4<f32>,
    state: f32,
};

// One texel of the atlas in data units (an integer converted to f32, as the dense path's
// `fetch` does; a unorm texel times 255 or 65535).
fn atlas_texel(i: vec3<i32>) -> vec4<f32> {
    return vec4<f32>(textureLoad(atlas, i, 0)) * params.value_scale;
}

// Trilinear between texel centres of `texel` (atlas texel coordinates), by eight taps clamped
// to the slot's texels `lo..=hi`; NaN taps are left out and the weights renormalized, as the
// dense path's `sample_taps` does.
fn sample_taps_in(texel: vec3<f32>, lo: vec3<i32>, hi: vec3<i32>) -> Sample {
    let base = texel - vec3<f32>(0.5);
    let i0 = vec3<i32>(floor(base));
    let fr = base - floor(base);
    var acc = vec4<f32>(0.0);
    var weight = 0.0;
    for (var k = 0u; k < 8u; k = k + 1u) {
        let o = vec3<i32>(i32(k & 1u), i32((k >> 1u) & 1u), i32(k >> 2u));
        let w3 = select(vec3<f32>(1.0) - fr, fr, o == vec3<i32>(1));
        let wt = w3.x * w3.y * w3.z;
        if (wt > 0.0) {
            let t = atlas_texel(clamp(i0 + o, lo, hi));
            if (!(MAY_BE_NAN && has_nan(t))) {
                acc = acc + wt * t;
                weight = weight + wt;
            }
        }
    }
    if (weight == 0.0) {
        return Sample(vec4<f32>(0.0), false);
    }
    return Sample(acc / weight, true);
}

// The last two page lookups of this invocation: a ray's samples mostly stay in one page, and
// a level whose page is absent alternates with the coarser one standing in. Per entry the
// level (none: 0xffffffff), the page, and the slot's texel origin with the slot + 1
// (resident) or 0 (absent).
var<private> memo_level: vec2<u32> = vec2<u32>(0xffffffffu);
var<private> memo_page_a: vec3<u32>;
var<private> memo_page_b: vec3<u32>;
var<private> memo_slot_a: vec4<u32>;
var<private> memo_slot_b: vec4<u32>;

// Where page `pg` of level `l` (its table entries from `base`) lies in the atlas: its slot's
// texel origin and the slot + 1, or 0 in `w` if it is not resident.
fn page_slot(l: u32, pg: vec3<u32>, base: u32) -> vec4<u32> {
    if (memo_level.x == l && all(memo_page_a == pg)) {
        return memo_slot_a;
    }
    if (memo_level.y == l && all(memo_page_b == pg)) {
        return memo_slot_b;
    }
    let w = params.window;
    let e = table[base + ((pg.z % w) * w + (pg.y % w)) * w + (pg.x % w)];
    var found = vec4<u32>(0u);
    if (e.x != 0u && e.y == pg.x && e.z == pg.y && e.w == pg.z) {
        let slot = e.x - 1u;
        found = vec4<u32>(vec3<u32>(
            slot % params.slot_per.x,
            (slot / params.slot_per.x) % params.slot_per.y,
            slot / (params.slot_per.x * params.slot_per.y),
        ) * params.slot_side, e.x);
    }
    memo_level = vec2<u32>(l, memo_level.x);
    memo_page_b = memo_page_a;
    memo_slot_b = memo_slot_a;
    memo_page_a = pg;
    memo_slot_a = found;
    return found;
}

// One sample of level `l` at level-0 position `p`.
fn sample_level(l: u32, p: vec3<f32>, linear: bool) -> PageSample {
    let lv = params.lv[l];
    let q = clamp((p - lv.offset) * lv.inv_ds, vec3<f32>(0.5), lv.size - vec3<f32>(0.5));
    let pg = min(vec3<u32>(floor(q / params.page)), lv.grid - vec3<u32>(1u));
    let found = page_slot(l, pg, lv.table_base);
    if (found.w == 0u) {
        return PageSample(vec4<f32>(0.0), -1.0);
    }
    let so = found.xyz;
    let texel = vec3<f32>(so) + q - vec3<f32>(pg) * params.page + vec3<f32>(params.border);
    // The slot's texels: the page's interior and its border (a page at a level's edge has no
    // border there, but `q` stays half a sample inside the level, where that side's taps
    // weigh nothing).
    let lo = vec3<i32>(so);
    let hi = lo + vec3<i32>(i32(params.slot_side) - 1);
    var s: Sample;
    if (!linear) {
        let v = atlas_texel(clamp(vec3<i32>(floor(texel)), lo, hi));
        s = Sample(v, !(MAY_BE_NAN && has_nan(v)));
    } else {
        s = sample_linear_in(texel, lo, hi);
    }
    if (!s.valid) {
        return PageSample(vec4<f32>(0.0), 0.0);
    }
    return PageSample(s.value, 1.0);
}
