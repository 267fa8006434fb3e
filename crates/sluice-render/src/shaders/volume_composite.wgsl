// Blends a volume's marched colours (non-premultiplied, from `volume.wgsl`) over the target.

@group(0) @binding(0) var marched: texture_2d<f32>;

@vertex
fn vs_main(@builtin(vertex_index) index: u32) -> @builtin(position) vec4<f32> {
    let uv = vec2<f32>(f32((index << 1u) & 2u), f32(index & 2u));
    return vec4<f32>(uv * 2.0 - 1.0, 0.0, 1.0);
}

@fragment
fn fs_main(@builtin(position) frag: vec4<f32>) -> @location(0) vec4<f32> {
    let c = textureLoad(marched, vec2<i32>(frag.xy), 0);
    if (c.a <= 0.0) {
        discard;
    }
    return c;
}
