// The volume marcher's min/max grid, built on the GPU when the data changes: `build` takes
// the (min, max) of each cell's own voxels (NaN left out; (+big, -big) when all are NaN),
// `dilate` widens each cell's range to its 26 neighbours', so that it covers every voxel a
// sample inside the cell interpolates from. SAMPLE_T is replaced, and the sampling prelude
// (`fetch`) added, when the pipeline is built.

struct Params {
    data_size: vec3<i32>,
    // Voxels per cell edge.
    cell: i32,
    bricks: Bricks,
};

@group(0) @binding(0) var<uniform> params: Params;
@group(0) @binding(1) var data: texture_3d<SAMPLE_T>;
@group(0) @binding(12) var own: texture_storage_3d<rgba32float, write>;
@group(0) @binding(13) var own_read: texture_3d<f32>;
@group(0) @binding(14) var widened: texture_storage_3d<rgba32float, write>;

@compute @workgroup_size(4, 4, 4)
fn build(@builtin(global_invocation_id) id: vec3<u32>) {
    let cells = vec3<u32>(textureDimensions(own));
    if (any(id >= cells)) {
        return;
    }
    let lo = vec3<i32>(id) * params.cell;
    let hi = min(lo + vec3<i32>(params.cell), params.data_size);
    var low = 3.4e38;
    var high = -3.4e38;
    for (var z = lo.z; z < hi.z; z = z + 1) {
        for (var y = lo.y; y < hi.y; y = y + 1) {
            for (var x = lo.x; x < hi.x; x = x + 1) {
                let v = fetch(vec3<i32>(x, y, z)).x;
                if (!(MAY_BE_NAN && is_nan(v))) {
                    low = min(low, v);
                    high = max(high, v);
                }
            }
        }
    }
    textureStore(own, vec3<i32>(id), vec4<f32>(low, high, 0.0, 0.0));
}

@compute @workgroup_size(4, 4, 4)
fn dilate(@builtin(global_invocation_id) id: vec3<u32>) {
    let cells = vec3<i32>(textureDimensions(own_read));
    let c = vec3<i32>(id);
    if (any(c >= cells)) {
        return;
    }
    let lo = max(c - vec3<i32>(1), vec3<i32>(0));
    let hi = min(c + vec3<i32>(1), cells - vec3<i32>(1));
    var low = 3.4e38;
    var high = -3.4e38;
    for (var z = lo.z; z <= hi.z; z = z + 1) {
        for (var y = lo.y; y <= hi.y; y = y + 1) {
            for (var x = lo.x; x <= hi.x; x = x + 1) {
                let r = textureLoad(own_read, vec3<i32>(x, y, z), 0).xy;
                low = min(low, r.x);
                high = max(high, r.y);
            }
        }
    }
    textureStore(widened, c, vec4<f32>(low, high, 0.0, 0.0));
}
