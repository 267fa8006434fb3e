// Image visual: a rectangle of `size` samples in its local coordinates, mapped through
// `plane` to voxel coordinates of the data (the identity for 2-D data; an axis-aligned plane
// of a volume for slices). TEXTURE_DIM and SAMPLE_T are replaced, and IMAGE_MODE,
// IMAGE_LINEAR and IMAGE_CLIP declared, when the pipeline is built.

struct Params {
    // Local coordinates (x, y in samples) to clip space.
    transform: mat4x4<f32>,
    // Local coordinates to data voxel coordinates (x = column, y = row, z = plane); affine
    // (last row 0, 0, 0, 1).
    plane: mat4x4<f32>,
    nan_color: vec4<f32>,
    display: Display,
    // Extent of the rectangle in local units (samples).
    size: vec2<f32>,
    // 0: scalar through the colormap; 1: value + alpha; 2: RGB; 3: RGBA.
    mode: u32,
    // 0: nearest; 1: linear.
    linear: u32,
    // Data size in samples (x, y, z).
    data_size: vec3<i32>,
    // Multiplies the alpha of RGBA / value+alpha data (1 / type maximum).
    alpha_scale: f32,
    opacity: f32,
    _pad0: u32,
    _pad1: u32,
    _pad2: u32,
    bricks: Bricks,
};

@group(0) @binding(0) var<uniform> params: Params;
@group(0) @binding(1) var data: TEXTURE_DIM<SAMPLE_T>;

struct VertexOut {
    @builtin(position) position: vec4<f32>,
    // Data voxel coordinates. `plane` is affine, so interpolating its result is exact: the
    // product is made per vertex, not per pixel (on lavapipe that is a fifth of a fitted
    // 1024^2 draw).
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

@fragment
fn fs_main(in: VertexOut) -> OpaqueOut {
    let p = in.voxel;
    // IMAGE_CLIP (samples outside the data are transparent: oblique planes), IMAGE_LINEAR and
    // IMAGE_MODE are constants of the pipeline (`ImageVariant`): one side of each choice is
    // compiled (CPU devices would run both sides of a branch on a uniform, and a discard
    // there costs lavapipe a fifth of a fitted 1024^2 draw even where it is never taken).
    if (IMAGE_CLIP && (any(p < vec3<f32>(0.0)) || any(p > vec3<f32>(params.data_size)))) {
        discard;
    }
    var s: Sample;
    if (!IMAGE_LINEAR) {
        s = sample_nearest(p, params.data_size);
    } else {
        s = sample_linear(p, params.data_size);
    }
    let rgba = image_color(s, params.display, IMAGE_MODE, params.alpha_scale, params.nan_color);
    let alpha = rgba.a * params.opacity;
    if (alpha <= 0.0) {
        // Fully transparent (NaN by default): leave colour and depth to what is behind.
        discard;
    }
    return OpaqueOut(vec4<f32>(rgba.rgb, alpha), pack_depth(in.position.z));
}
