// 3-D pages looked up in a page table and sampled in a 3-D atlas: shared by the paged volume
// marcher (`paged_volume.wgsl`) and the paged slice (`paged_slice.wgsl`). The including shader
// declares `params` (with `lv`, `page`, `window`, `slot_per`, `slot_side`, `border`,
// `atlas_size`, `hw` and `value_scale`), `atlas`, `table` and `samp`.

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

// One sample of level `l` at level-0 position `p`, or `ok = false` when its page is absent.
fn sample_level(l: u32, p: vec3<f32>, linear: bool) -> vec2<f32> {
    let lv = params.lv[l];
    let q = clamp((p - lv.offset) * lv.inv_ds, vec3<f32>(0.5), lv.size - vec3<f32>(0.5));
    let pg = min(vec3<u32>(floor(q / params.page)), lv.grid - vec3<u32>(1u));
    let w = params.window;
    let e = table[lv.table_base + ((pg.z % w) * w + (pg.y % w)) * w + (pg.x % w)];
    if (e.x == 0u || e.y != pg.x || e.z != pg.y || e.w != pg.z) {
        return vec2<f32>(0.0, -1.0);
    }
    let slot = e.x - 1u;
    let so = vec3<u32>(
        slot % params.slot_per.x,
        (slot / params.slot_per.x) % params.slot_per.y,
        slot / (params.slot_per.x * params.slot_per.y),
    ) * params.slot_side;
    let texel = vec3<f32>(so) + q - vec3<f32>(pg) * params.page + vec3<f32>(params.border);
    var v: f32;
    if (!linear) {
        v = textureLoad(atlas, vec3<i32>(floor(texel)), 0).x;
    } else if (params.hw == 1u) {
        v = textureSampleLevel(atlas, samp, texel / params.atlas_size, 0.0).x;
    } else {
        // Eight taps inside the slot (a format the device cannot filter).
        let base = texel - vec3<f32>(0.5);
        let i0 = vec3<i32>(floor(base));
        let fr = base - floor(base);
        var acc = 0.0;
        var weight = 0.0;
        for (var k = 0u; k < 8u; k = k + 1u) {
            let o = vec3<i32>(i32(k & 1u), i32((k >> 1u) & 1u), i32(k >> 2u));
            let w3 = select(vec3<f32>(1.0) - fr, fr, o == vec3<i32>(1));
            let wt = w3.x * w3.y * w3.z;
            if (wt > 0.0) {
                let t = textureLoad(atlas, i0 + o, 0).x;
                if (!is_nan(t)) {
                    acc = acc + wt * t;
                    weight = weight + wt;
                }
            }
        }
        if (weight == 0.0) {
            return vec2<f32>(0.0, 0.0);
        }
        v = acc / weight;
    }
    if (is_nan(v)) {
        return vec2<f32>(0.0, 0.0);
    }
    return vec2<f32>(v * params.value_scale, 1.0);
}
