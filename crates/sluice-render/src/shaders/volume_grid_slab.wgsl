// The volume grid's `build` pass reading the data from a buffer instead of the texture: a
// slab of whole cell layers is copied from the texture into `words` (rows `row_words` words
// apart, planes `plane_words`), and each invocation takes one cell's (min, max) from it, a
// word (1, 2 or 4 texels) a load. Texture loads go one texel at a time, which CPU devices pay
// for per texel. Put before this source (`volume_grid::slab_shader`): `CELL` (voxels per cell
// edge), `TEXEL_BYTES`, `FULL` (every cell holds CELL^3 voxels: the loops have fixed trip
// counts), the type `V` texels are compared in (u32, i32 or f32, so integers are not
// converted per texel), `V_LOW` / `V_HIGH` (the ends of its range), `decode(word, k)` (texel
// k of a word), `skip(v)` (NaN, for float formats) and `data_value(v)` (the value in data
// units, as the texture path's `fetch` gives it: unorm texels as their integers), and
// `cell_plane(first)`, the `PlaneRange` of one plane of a whole cell.
// Standalone: no data texture, so not `common.wgsl` (whose sampling helpers need one).

struct Slab {
    // Texels per row and rows per plane.
    width: u32,
    height: u32,
    row_words: u32,
    plane_words: u32,
    // The slab's first cell layer along z, and how many planes of voxels it holds.
    first_layer: u32,
    planes: u32,
    pad: vec2<u32>,
};

@group(0) @binding(0) var<uniform> slab: Slab;
@group(0) @binding(1) var<storage, read> words: array<u32>;
@group(0) @binding(12) var own: texture_storage_3d<rgba32float, write>;

const PER_WORD: u32 = 4u / TEXEL_BYTES;
// Words per row of a cell (cells start on a word: CELL texels of at most 4 bytes, rows
// 256-byte aligned).
const CELL_WORDS: u32 = CELL / PER_WORD;

// A bit test, as `common.wgsl`'s (comparisons with NaN may be folded away).
fn is_nan(x: f32) -> bool {
    let bits = bitcast<u32>(x);
    return (bits & 0x7f800000u) == 0x7f800000u && (bits & 0x007fffffu) != 0u;
}

// The range of a whole cell's plane (CELL rows of CELL texels) starting at word `first`.
struct PlaneRange {
    low: V,
    high: V,
    any: bool,
};

@compute @workgroup_size(4, 4, 4)
fn build(@builtin(global_invocation_id) id: vec3<u32>) {
    let cells = vec3<u32>(textureDimensions(own));
    let layers = (slab.planes + CELL - 1u) / CELL;
    if (id.x >= cells.x || id.y >= cells.y || id.z >= layers) {
        return;
    }
    let lo = id * CELL;
    var low = V_HIGH;
    var high = V_LOW;
    var any = false;
    if (FULL) {
        // CPU devices pay a mask update per loop trip: the rows and texels of a plane are
        // written out (`cell_plane`, generated).
        for (var z = 0u; z < CELL; z = z + 1u) {
            let r = cell_plane((lo.z + z) * slab.plane_words + lo.y * slab.row_words + lo.x / PER_WORD);
            low = min(low, r.low);
            high = max(high, r.high);
            any = any || r.any;
        }
    } else {
        let hi = min(lo + vec3<u32>(CELL), vec3<u32>(slab.width, slab.height, slab.planes));
        let w1 = (hi.x + PER_WORD - 1u) / PER_WORD;
        for (var z = lo.z; z < hi.z; z = z + 1u) {
            for (var y = lo.y; y < hi.y; y = y + 1u) {
                let row = z * slab.plane_words + y * slab.row_words;
                for (var w = lo.x / PER_WORD; w < w1; w = w + 1u) {
                    let word = words[row + w];
                    for (var k = 0u; k < PER_WORD; k = k + 1u) {
                        let v = decode(word, k);
                        if (w * PER_WORD + k < hi.x && !skip(v)) {
                            low = min(low, v);
                            high = max(high, v);
                            any = true;
                        }
                    }
                }
            }
        }
    }
    // All NaN: (+big, -big), as the texture path.
    var range = vec2<f32>(3.4e38, -3.4e38);
    if (any) {
        range = vec2<f32>(data_value(low), data_value(high));
    }
    textureStore(own, vec3<i32>(vec3<u32>(id.xy, id.z + slab.first_layer)), vec4<f32>(range, 0.0, 0.0));
}
