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

// The colour of the data at voxel coordinates `p`, opacity applied; alpha 0 where nothing is
// drawn (outside the data with IMAGE_CLIP, or a fully transparent colour: NaN by default).
// IMAGE_CLIP (samples outside the data are transparent: oblique planes), IMAGE_LINEAR and
// IMAGE_MODE are constants of the pipeline (`ImageVariant`): one side of each choice is
// compiled (CPU devices would run both sides of a branch on a uniform, and a discard there
// costs lavapipe a fifth of a fitted 1024^2 draw even where it is never taken).
fn shade(p: vec3<f32>) -> vec4<f32> {
    if (IMAGE_CLIP && (any(p < vec3<f32>(0.0)) || any(p > vec3<f32>(params.data_size)))) {
        return vec4<f32>(0.0);
    }
    var s: Sample;
    if (!IMAGE_LINEAR) {
        s = sample_nearest(p, params.data_size);
    } else {
        s = sample_linear(p, params.data_size);
    }
    let rgba = image_color(s, params.display, IMAGE_MODE, params.alpha_scale, params.nan_color);
    return vec4<f32>(rgba.rgb, rgba.a * params.opacity);
}

@fragment
fn fs_main(in: VertexOut) -> OpaqueOut {
    let color = shade(in.voxel);
    if (color.a <= 0.0) {
        // Leave colour and depth to what is behind.
        discard;
    }
    return OpaqueOut(color, pack_depth(in.position.z));
}

// The compute path (`ImageDraw::Compute`, `draw::image::record_compute`): a frame whose only
// visual is this image, one invocation per pixel of the rectangles to draw (workgroup z picks
// the rectangle). Each finds the image point under its pixel centre and writes that point's
// colour over the background, or the background where the image does not cover the centre:
// what the rasterizer, the blend and the clear give, without the rasterizer.
struct Frame {
    // Pixel centre in normalized device coordinates to local coordinates, homogeneous:
    // (x', y', s) = to_local * (ndc x, ndc y, 1), the local point (x' / s, y' / s).
    to_local: mat3x3<f32>,
    // Rows z and w of `params.transform`: a local point's clip-space depth and w.
    clip_z: vec4<f32>,
    clip_w: vec4<f32>,
    background: vec4<f32>,
    // The rectangles to draw, (x, y, width, height) in pixels; `count` of them.
    rects: array<vec4<u32>, MAX_RECTS>,
    target_size: vec2<f32>,
    count: u32,
    // 1: alpha blending over the background; 0: the colour replaces it.
    blend: u32,
};

@group(2) @binding(0) var<uniform> frame: Frame;
@group(2) @binding(1) var frame_out: texture_storage_2d<rgba8unorm, write>;

@compute @workgroup_size(8, 8)
fn cs_main(@builtin(global_invocation_id) id: vec3<u32>) {
    if (id.z >= frame.count) {
        return;
    }
    let rect = frame.rects[id.z];
    if (any(id.xy >= rect.zw)) {
        return;
    }
    let pixel = rect.xy + id.xy;
    let ndc = vec2<f32>(
        (f32(pixel.x) + 0.5) / frame.target_size.x * 2.0 - 1.0,
        1.0 - (f32(pixel.y) + 0.5) / frame.target_size.y * 2.0,
    );
    var color = frame.background;
    let h = frame.to_local * vec3<f32>(ndc, 1.0);
    if (h.z != 0.0) {
        let local = h.xy / h.z;
        let point = vec4<f32>(local, 0.0, 1.0);
        let w = dot(frame.clip_w, point);
        let z = dot(frame.clip_z, point);
        // In front of the camera, between the near and far planes (the rasterizer clips
        // there), and on the rectangle.
        let on = w > 0.0 && z >= 0.0 && z <= w && all(local >= vec2<f32>(0.0))
            && all(local < params.size);
        if (on) {
            let c = shade((params.plane * point).xyz);
            if (c.a > 0.0) {
                if (frame.blend == 1u) {
                    // wgpu's ALPHA_BLENDING: colour by source alpha, alpha "over".
                    let rgb = c.rgb * c.a + color.rgb * (1.0 - c.a);
                    color = vec4<f32>(rgb, c.a + color.a * (1.0 - c.a));
                } else {
                    color = c;
                }
            }
        }
    }
    textureStore(frame_out, vec2<i32>(pixel), color);
}
