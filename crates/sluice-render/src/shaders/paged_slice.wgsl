// Paged slice: an image showing a plane of a paged volume source (lazy, multiscale or over the
// dense path's limits; `draw/paged_slice.rs`). The rectangle of `size` plane units is mapped
// through `plane` to level-0 voxel coordinates; each fragment samples the level whose samples
// are no larger than the fragment's footprint there (its screen derivatives), then the
// visual's bias or lock, falling back to coarser resident pages (`paged3d.wgsl`), and colours
// the sample as the dense image does (one channel through the colormap, value + alpha, RGB or
// RGBA). MAX_LEVELS and SAMPLE_T are replaced when the pipeline is built.

struct Params {
    // Plane coordinates (u, v, 0, 1) to clip space.
    transform: mat4x4<f32>,
    // Plane coordinates to level-0 voxel coordinates (x = column, y = row, z = plane).
    plane: mat4x4<f32>,
    nan_color: vec4<f32>,
    display: Display,
    size: vec2<f32>,
    levels: u32,
    linear: u32,
    atlas_size: vec3<f32>,
    pad_atlas: u32,
    slot_per: vec2<u32>,
    slot_side: u32,
    window: u32,
    page: f32,
    border: f32,
    value_scale: f32,
    opacity: f32,
    // Level-0 samples (x, y, z).
    data_size: vec3<f32>,
    // 1: points outside the data are transparent (oblique planes).
    clip: u32,
    level_bias: i32,
    // The locked level, 0xffffffff for none.
    level_lock: u32,
    // 0: scalar through the colormap; 1: value + alpha; 2: RGB; 3: RGBA (`image_color`).
    mode: u32,
    // Multiplies the alpha of RGBA / value+alpha data (1 / type maximum).
    alpha_scale: f32,
    lv: array<Level, MAX_LEVELS>,
};

@group(0) @binding(0) var<uniform> params: Params;
@group(0) @binding(1) var atlas: texture_3d<SAMPLE_T>;
@group(0) @binding(3) var<storage, read> table: array<vec4<u32>>;
@group(0) @binding(4) var samp: sampler;

struct VertexOut {
    @builtin(position) position: vec4<f32>,
    // Level-0 voxel coordinates: `plane` is affine, so its product is made per vertex and
    // interpolated exactly (as in image.wgsl).
    @location(0) voxel: vec3<f32>,
};

@vertex
fn vs_main(@builtin(vertex_index) index: u32) -> VertexOut {
    var corners = array<vec2<f32>, 6>(
        vec2<f32>(0.0, 0.0), vec2<f32>(1.0, 0.0), vec2<f32>(0.0, 1.0),
        vec2<f32>(0.0, 1.0), vec2<f32>(1.0, 0.0), vec2<f32>(1.0, 1.0),
    );
    let local = corners[index] * params.size;
    var out: VertexOut;
    out.position = params.transform * vec4<f32>(local, 0.0, 1.0);
    out.voxel = (params.plane * vec4<f32>(local, 0.0, 1.0)).xyz;
    return out;
}

// The level whose samples are no larger than `footprint` level-0 samples, then the bias or
// lock: `visible_pages_plane`'s choice.
fn slice_level(footprint: f32) -> u32 {
    if (params.level_lock != 0xffffffffu) {
        return params.level_lock;
    }
    var l = 0u;
    for (var k = 1u; k < params.levels; k = k + 1u) {
        if (params.lv[k].ds <= footprint) {
            l = k;
        }
    }
    return u32(clamp(i32(l) + params.level_bias, 0, i32(params.levels) - 1));
}

@fragment
fn fs_main(in: VertexOut) -> OpaqueOut {
    let p = in.voxel;
    // Level-0 samples per pixel along the screen axis that magnifies the plane most.
    let footprint = min(length(dpdx(p)), length(dpdy(p)));
    if (params.clip == 1u && (any(p < vec3<f32>(0.0)) || any(p > params.data_size))) {
        discard;
    }
    let linear = params.linear == 1u;
    var found = PageSample(vec4<f32>(0.0), -1.0);
    for (var l = slice_level(footprint); l < params.levels; l = l + 1u) {
        found = sample_level(l, p, linear);
        if (found.state >= 0.0) {
            break;
        }
    }
    if (found.state < 0.0) {
        // Nothing resident covers this point yet (the coarsest level is still loading).
        discard;
    }
    let s = Sample(found.value, found.state > 0.0);
    let rgba = image_color(s, params.display, params.mode, params.alpha_scale, params.nan_color);
    let alpha = rgba.a * params.opacity;
    if (alpha <= 0.0) {
        discard;
    }
    return OpaqueOut(vec4<f32>(rgba.rgb, alpha), pack_depth(in.position.z));
}
