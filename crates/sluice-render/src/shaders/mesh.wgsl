// Mesh visual. Vertex attributes are read from storage buffers by vertex index (the index
// buffer, when there is one, supplies it), so any subset of attributes needs one pipeline.
// Attributes: positions f32x3, normals f32x3, colours packed RGBA8, scalars f32,
// texture coordinates f32x2. The texture (an image source) is `data`, read like an Image.

struct Params {
    mvp: mat4x4<f32>,
    model: mat4x4<f32>,
    // Inverse transpose of the model matrix, for normals.
    normal_matrix: mat4x4<f32>,
    base_color: vec4<f32>,
    wire_color: vec4<f32>,
    // Direction the light travels, in world coordinates.
    light_dir: vec4<f32>,
    display: Display,
    // Bits: 1 normals, 2 colours, 4 scalars, 8 texture, 16 flat shading, 32 unlit.
    flags: u32,
    vertex_count: u32,
    ambient: f32,
    opacity: f32,
    texture_size: vec3<i32>,
    // Texture channels: 0 scalar through the colormap, 1 value + alpha, 2 RGB, 3 RGBA.
    texture_mode: u32,
    texture_alpha_scale: f32,
    _pad0: u32,
    _pad1: u32,
    _pad2: u32,
};

@group(0) @binding(0) var<uniform> params: Params;
@group(0) @binding(1) var data: texture_2d<SAMPLE_T>;
@group(0) @binding(3) var<storage, read> positions: array<f32>;
@group(0) @binding(4) var<storage, read> normals: array<f32>;
@group(0) @binding(5) var<storage, read> colors: array<u32>;
@group(0) @binding(6) var<storage, read> scalars: array<f32>;
@group(0) @binding(7) var<storage, read> texcoords: array<f32>;

const HAS_NORMALS: u32 = 1u;
const HAS_COLORS: u32 = 2u;
const HAS_SCALARS: u32 = 4u;
const HAS_TEXTURE: u32 = 8u;
const FLAT: u32 = 16u;
const UNLIT: u32 = 32u;
const NEAREST: u32 = 64u;

struct VertexOut {
    @builtin(position) position: vec4<f32>,
    @location(0) world: vec3<f32>,
    @location(1) normal: vec3<f32>,
    @location(2) color: vec4<f32>,
    @location(3) scalar: f32,
    @location(4) uv: vec2<f32>,
    // 1 at a vertex with a NaN position: any fragment it touches is discarded.
    @location(5) invalid: f32,
};

fn vec3_at(buffer_index: u32, i: u32) -> vec3<f32> {
    if (buffer_index == 0u) {
        return vec3<f32>(positions[3u * i], positions[3u * i + 1u], positions[3u * i + 2u]);
    }
    return vec3<f32>(normals[3u * i], normals[3u * i + 1u], normals[3u * i + 2u]);
}

@vertex
fn vs_main(@builtin(vertex_index) i: u32) -> VertexOut {
    var out: VertexOut;
    let p = vec3_at(0u, i);
    if (is_nan(p.x) || is_nan(p.y) || is_nan(p.z)) {
        out.position = vec4<f32>(0.0, 0.0, 0.5, 1.0);
        out.invalid = 1.0;
        return out;
    }
    out.invalid = 0.0;
    out.position = params.mvp * vec4<f32>(p, 1.0);
    out.world = (params.model * vec4<f32>(p, 1.0)).xyz;
    // Attributes are chosen with `select`, never with a branch on `params`: Mesa's lavapipe
    // (22.3) recompiles a vertex shader whose control flow depends on uniforms, on every
    // draw, and never frees the copies (about 150 KB of host memory per mesh per frame).
    // Reading an absent attribute's stand-in buffer is bounds-checked, and its value unused.
    let flags = params.flags;
    out.normal = select(
        vec3<f32>(0.0),
        (params.normal_matrix * vec4<f32>(vec3_at(1u, i), 0.0)).xyz,
        (flags & HAS_NORMALS) != 0u,
    );
    out.color = select(params.base_color, unpack4x8unorm(colors[i]), (flags & HAS_COLORS) != 0u);
    out.scalar = select(0.0, scalars[i], (flags & HAS_SCALARS) != 0u);
    out.uv = select(
        vec2<f32>(0.0),
        vec2<f32>(texcoords[2u * i], texcoords[2u * i + 1u]),
        (flags & HAS_TEXTURE) != 0u,
    );
    return out;
}

fn surface_color(in: VertexOut) -> vec4<f32> {
    let d = params.display;
    if ((params.flags & HAS_SCALARS) != 0u) {
        if (is_nan(in.scalar)) {
            return vec4<f32>(0.0);
        }
        return colormap(d, normalize_value(d, in.scalar));
    }
    if ((params.flags & HAS_TEXTURE) != 0u) {
        // Texture coordinates (0, 0) to (1, 1) cover the image; (0, 0) is its first sample's
        // corner (row 0, column 0).
        let p = vec3<f32>(in.uv * vec2<f32>(params.texture_size.xy), 0.5);
        var s: Sample;
        if ((params.flags & NEAREST) != 0u) {
            s = sample_nearest(p, params.texture_size);
        } else {
            s = sample_linear(p, params.texture_size);
        }
        if (!s.valid) {
            return vec4<f32>(0.0);
        }
        if (params.texture_mode == 0u) {
            return colormap(d, normalize_value(d, s.value.x));
        }
        if (params.texture_mode == 1u) {
            let c = colormap(d, normalize_value(d, s.value.x));
            return vec4<f32>(c.rgb, c.a * clamp(s.value.y * params.texture_alpha_scale, 0.0, 1.0));
        }
        let alpha = select(1.0, clamp(s.value.w * params.texture_alpha_scale, 0.0, 1.0), params.texture_mode == 3u);
        return vec4<f32>(normalize_value(d, s.value.x), normalize_value(d, s.value.y), normalize_value(d, s.value.z), alpha);
    }
    return in.color;
}

// Each fragment entry point comes twice: `fs_*` writes the colour and the depth as a
// colour (a pass with volumes, which read it), `fs_*_color` the colour alone (a pass
// without, where a CPU device (lavapipe) would still compute the second output for every
// fragment; alone this did not measure apart from the noise, see docs/measurements.md).
// Both take their colour from one function, whose alpha below 0 means "discard".

// The shaded colour of a fragment.
fn main_color(in: VertexOut) -> vec4<f32> {
    // The triangle's plane normal, pointing towards the eye: screen x, screen y (down) and
    // depth form a right-handed frame, so dx x dy points away from the eye. (Derivatives
    // first, in uniform control flow.)
    let towards_eye = -cross(dpdx(in.world), dpdy(in.world));
    if (in.invalid > 0.0) {
        return vec4<f32>(-1.0);
    }
    let base = surface_color(in);
    var n = towards_eye;
    if ((params.flags & FLAT) == 0u && (params.flags & HAS_NORMALS) != 0u) {
        // Smooth: the interpolated normal, turned to the eye's side (two-sided lighting).
        n = select(in.normal, -in.normal, dot(in.normal, towards_eye) < 0.0);
    }
    var shade = 1.0;
    if ((params.flags & UNLIT) == 0u && length(n) > 0.0) {
        let l = -normalize(params.light_dir.xyz);
        shade = params.ambient + (1.0 - params.ambient) * max(dot(normalize(n), l), 0.0);
    }
    let alpha = base.a * params.opacity;
    if (alpha <= 0.0) {
        return vec4<f32>(-1.0);
    }
    return vec4<f32>(base.rgb * shade, alpha);
}

@fragment
fn fs_main(in: VertexOut) -> OpaqueOut {
    let c = main_color(in);
    if (c.a < 0.0) {
        discard;
    }
    return OpaqueOut(c, pack_depth(in.position.z));
}

@fragment
fn fs_main_color(in: VertexOut) -> @location(0) vec4<f32> {
    let c = main_color(in);
    if (c.a < 0.0) {
        discard;
    }
    return c;
}

// Unlit triangles of one colour (no colours, scalars or texture): what fs_main draws then,
// with only the position and the NaN flag interpolated.
struct PlainOut {
    @builtin(position) position: vec4<f32>,
    @location(0) invalid: f32,
};

@vertex
fn vs_plain(@builtin(vertex_index) i: u32) -> PlainOut {
    var out: PlainOut;
    let p = vec3_at(0u, i);
    if (is_nan(p.x) || is_nan(p.y) || is_nan(p.z)) {
        out.position = vec4<f32>(0.0, 0.0, 0.5, 1.0);
        out.invalid = 1.0;
        return out;
    }
    out.invalid = 0.0;
    out.position = params.mvp * vec4<f32>(p, 1.0);
    return out;
}

// The base colour, or "discard".
fn plain_color(in: PlainOut) -> vec4<f32> {
    let alpha = params.base_color.a * params.opacity;
    if (in.invalid > 0.0 || alpha <= 0.0) {
        return vec4<f32>(-1.0);
    }
    return vec4<f32>(params.base_color.rgb, alpha);
}

@fragment
fn fs_plain(in: PlainOut) -> OpaqueOut {
    let c = plain_color(in);
    if (c.a < 0.0) {
        discard;
    }
    return OpaqueOut(c, pack_depth(in.position.z));
}

@fragment
fn fs_plain_color(in: PlainOut) -> @location(0) vec4<f32> {
    let c = plain_color(in);
    if (c.a < 0.0) {
        discard;
    }
    return c;
}

// `vs_plain` and `fs_plain` for positions known to hold no NaN, drawn with a colour of
// some alpha (`MeshProgram::Finite`): no NaN flag to interpolate and no discard, so that a
// CPU device (lavapipe) tests depth before shading and sets up one value less a triangle
// (alternated runs of the peers' 2M-triangle mesh: docs/measurements.md).
@vertex
fn vs_finite(@builtin(vertex_index) i: u32) -> @builtin(position) vec4<f32> {
    return params.mvp * vec4<f32>(vec3_at(0u, i), 1.0);
}

@fragment
fn fs_finite(@builtin(position) position: vec4<f32>) -> OpaqueOut {
    let alpha = params.base_color.a * params.opacity;
    return OpaqueOut(vec4<f32>(params.base_color.rgb, alpha), pack_depth(position.z));
}

@fragment
fn fs_finite_color(@builtin(position) position: vec4<f32>) -> @location(0) vec4<f32> {
    return vec4<f32>(params.base_color.rgb, params.base_color.a * params.opacity);
}

@fragment
fn fs_wire(in: VertexOut) -> OpaqueOut {
    if (in.invalid > 0.0) {
        discard;
    }
    return OpaqueOut(params.wire_color, pack_depth(in.position.z));
}

@fragment
fn fs_wire_color(in: VertexOut) -> @location(0) vec4<f32> {
    if (in.invalid > 0.0) {
        discard;
    }
    return params.wire_color;
}
