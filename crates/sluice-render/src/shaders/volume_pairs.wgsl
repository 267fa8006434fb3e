// The z-paired copy of an 8-bit volume (`volume_pairs.rs`): texel (x, y) of layer z holds the
// voxels (x, y, z) and (x, y, z + 1) (the last layer repeats its own voxel), so that one
// bilinear sample of a layer and one lerp give the trilinear value. One invocation turns
// sixteen voxels of a plane (a vec4 of words), and the sixteen under them in the next plane,
// into thirty-two bytes of pairs. Planes are read from a buffer the texture was copied into
// (rows of `row_words` words, planes of `plane_words`), pairs written to one copied into the
// paired texture; rows in both are whole vec4s (256-byte copy alignment).

struct Slab {
    row_words: u32,
    plane_words: u32,
    out_row_words: u32,
    out_plane_words: u32,
    // vec4s per row that hold voxels (ceil(width / 16)), rows per plane, planes to pair.
    quads_x: u32,
    height: u32,
    planes: u32,
    // The last plane in `src` (a plane's pair partner is the next one, clamped to it).
    last: u32,
};

@group(0) @binding(0) var<uniform> slab: Slab;
@group(0) @binding(1) var<storage, read> src: array<vec4<u32>>;
@group(0) @binding(2) var<storage, read_write> dst: array<vec4<u32>>;

// Bytes a0 b0 a1 b1 of two words (little endian) ...
fn low(a: vec4<u32>, b: vec4<u32>) -> vec4<u32> {
    return (a & vec4<u32>(0xffu)) | ((b & vec4<u32>(0xffu)) << vec4<u32>(8u))
        | ((a & vec4<u32>(0xff00u)) << vec4<u32>(8u)) | ((b & vec4<u32>(0xff00u)) << vec4<u32>(16u));
}

// ... and a2 b2 a3 b3.
fn high(a: vec4<u32>, b: vec4<u32>) -> vec4<u32> {
    return ((a >> vec4<u32>(16u)) & vec4<u32>(0xffu)) | (((b >> vec4<u32>(16u)) & vec4<u32>(0xffu)) << vec4<u32>(8u))
        | ((a >> vec4<u32>(8u)) & vec4<u32>(0xff0000u)) | (b & vec4<u32>(0xff000000u));
}

@compute @workgroup_size(64)
fn pair(@builtin(global_invocation_id) g: vec3<u32>) {
    if (g.x >= slab.quads_x || g.y >= slab.height || g.z >= slab.planes) {
        return;
    }
    let row = (g.y * slab.row_words) / 4u + g.x;
    let a = src[(g.z * slab.plane_words) / 4u + row];
    let b = src[(min(g.z + 1u, slab.last) * slab.plane_words) / 4u + row];
    let lo = low(a, b);
    let hi = high(a, b);
    // Words 0 and 1 pair a.x with b.x, 2 and 3 a.y with b.y, ...
    let o = (g.z * slab.out_plane_words + g.y * slab.out_row_words) / 4u + 2u * g.x;
    dst[o] = vec4<u32>(lo.x, hi.x, lo.y, hi.y);
    dst[o + 1u] = vec4<u32>(lo.z, hi.z, lo.w, hi.w);
}
