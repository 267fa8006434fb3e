// Dense meshes: the triangles that cover no pixel centre of the target are left out of the
// draw (`mesh_cull.rs`). Such a triangle gives no fragment, so the pixels are the same; what
// goes is its vertex fetches and its setup in the rasterizer, which for sub-pixel triangles
// is most of the draw (lavapipe sets every triangle up on one thread; GPUs built for compute
// have few rasterizers).
//
// Four passes: `project` puts every vertex on the target as the mesh's vertex shaders do;
// `test` marks, per run of 32 triangles, those that may cover a pixel centre; `scan` turns
// the runs' counts into where their triangles go; `gather` writes the kept triangles' indices
// in their order (blending and equal depths see the same order as without), and `scan`
// writes the indirect draw's index count.

struct Cull {
    mvp: mat4x4<f32>,
    // Target size in pixels.
    viewport: vec2<f32>,
    triangles: u32,
    vertices: u32,
    // Runs of 32 triangles (ceil(triangles / 32)).
    runs: u32,
    // Distance in pixels by which every triangle is grown before it is tested: more than the
    // device's rasterizer moves a vertex when it snaps it to its sub-pixel grid
    // (`mesh_cull::margin`).
    margin: f32,
    _pad0: u32,
    _pad1: u32,
};

// Workgroups per dispatch row (`mesh_cull::ROW_GROUPS`) times their 64 invocations: the ids
// of a row of a dispatch too large for one.
const ROW_IDS: u32 = 65535u * 64u;

@group(0) @binding(0) var<uniform> cull: Cull;
@group(0) @binding(1) var<storage, read> positions: array<f32>;
@group(0) @binding(2) var<storage, read> indices: array<u32>;
// Per vertex: its position on the target in pixels and a bound on how far the vertex
// shader's rounding may put it from there (x, y; z: the bound), or NaN where it is behind the
// eye (or too far out to place to a fraction of a pixel): its triangles are kept.
@group(0) @binding(3) var<storage, read_write> placed: array<vec4<f32>>;
// Per run of 32 triangles: bit i set where triangle 32 * run + i is kept.
@group(0) @binding(4) var<storage, read_write> kept: array<u32>;
// Per run: the number of kept triangles before it.
@group(0) @binding(5) var<storage, read_write> before: array<u32>;
@group(0) @binding(6) var<storage, read_write> culled: array<u32>;
// draw_indexed_indirect's arguments: index count, instance count, first index, base vertex,
// first instance.
@group(0) @binding(7) var<storage, read_write> args: array<u32, 5>;

// Window coordinates beyond which a position is not placed (only vertices near the target
// are ever tested against its centres; this keeps the box tests of far ones meaningful).
const FAR_OUT: f32 = 65536.0;

// A bound on how far one output of `mvp * p` here and in a vertex shader may differ, against
// the sum of its terms' magnitudes, with or without fused multiply-adds (2^-21: twice the
// bound of one 4-term dot product's rounding).
const ROUNDING: f32 = 4.76837158e-7;

// `is_nan` of `common.wgsl` (a bit test: comparisons with NaN may be folded away), which
// this shader goes without.
fn nan(x: f32) -> bool {
    let bits = bitcast<u32>(x);
    return (bits & 0x7f800000u) == 0x7f800000u && (bits & 0x007fffffu) != 0u;
}

// Whether x is finite and within `FAR_OUT` of 0.
fn near(x: f32) -> bool {
    return !nan(x) && abs(x) < FAR_OUT;
}

fn id_of(g: vec3<u32>) -> u32 {
    return g.y * ROW_IDS + g.x;
}

@compute @workgroup_size(64)
fn project(@builtin(global_invocation_id) g: vec3<u32>) {
    let i = id_of(g);
    if (i >= cull.vertices) {
        return;
    }
    let p = vec3<f32>(positions[3u * i], positions[3u * i + 1u], positions[3u * i + 2u]);
    // As the vertex shaders do (`mesh.wgsl`): a vertex with a NaN coordinate is put at the
    // target's centre (its fragments are discarded there).
    var clip = vec4<f32>(0.0, 0.0, 0.5, 1.0);
    if (!(nan(p.x) || nan(p.y) || nan(p.z))) {
        clip = cull.mvp * vec4<f32>(p, 1.0);
    }
    let unplaced = vec4<f32>(bitcast<f32>(0x7fc00000u));
    if (nan(clip.w) || clip.w <= 0.0) {
        placed[i] = unplaced;
        return;
    }
    let ndc = clip.xy / clip.w;
    let win = vec2<f32>((ndc.x * 0.5 + 0.5) * cull.viewport.x, (0.5 - ndc.y * 0.5) * cull.viewport.y);
    // How far the vertex shader's clip position may lie from this one (each output within
    // `ROUNDING` of the sum of its terms' magnitudes), and where that puts the vertex: far
    // from the origin the terms cancel, and their rounding is no longer small.
    let m = cull.mvp;
    // (A NaN vertex's position is a constant, exact in both.)
    let q = select(abs(vec4<f32>(p, 1.0)), vec4<f32>(0.0), nan(p.x) || nan(p.y) || nan(p.z));
    let terms = abs(m[0]) * q.x + abs(m[1]) * q.y + abs(m[2]) * q.z + abs(m[3]) * q.w;
    let e = ROUNDING * terms;
    // The clip position's difference carried to the target, and the rounding of the divide
    // and the viewport transform, here and in the rasterizer (a few f32 steps of the window
    // coordinate and of the target's half size).
    let spread = 0.5 * cull.viewport * (e.xy + abs(ndc) * e.w) / clip.w
        + 8.0 * 1.1920929e-7 * (abs(win) + 0.5 * cull.viewport);
    let err = max(spread.x, spread.y) * 2.0;
    // A w that the vertex shader's rounding could take to 0 or below is not placed.
    let ok = near(win.x) && near(win.y) && !nan(err) && err < 0.25 && clip.w > 2.0 * e.w;
    placed[i] = select(unplaced, vec4<f32>(win, err, 0.0), ok);
}

// Whether the triangle a, b, c (pixels) may cover a pixel centre of the target: some centre
// lies inside it grown by `grow` (each edge moved out by it). A triangle whose grown box
// reaches no centre of the target is left out whatever its size; one whose grown box spans
// more than 2 centres across or down is kept without looking closer (the edge functions are
// then never evaluated far from the vertices, where their rounding grows); so is a sliver
// too thin for its orientation to be known. The centre tests are the same four for every
// triangle, which keeps the lanes of a CPU device's SIMD group together.
fn may_cover(a: vec2<f32>, b: vec2<f32>, c: vec2<f32>, grow: f32) -> bool {
    let lo_all = min(min(a, b), c) - vec2<f32>(grow);
    let hi_all = max(max(a, b), c) + vec2<f32>(grow);
    let lo = max(lo_all, vec2<f32>(0.0));
    let hi = min(hi_all, cull.viewport);
    // Centres (i + 0.5, j + 0.5) with lo <= centre <= hi.
    let first = ceil(lo - vec2<f32>(0.5));
    let last = floor(hi - vec2<f32>(0.5));
    if (last.x < first.x || last.y < first.y) {
        return false;
    }
    let span = floor(hi_all - vec2<f32>(0.5)) - ceil(lo_all - vec2<f32>(0.5));
    if (span.x > 1.0 || span.y > 1.0) {
        return true;
    }
    let e0 = b - a;
    let e1 = c - b;
    let e2 = a - c;
    let area = e0.x * (c.y - a.y) - e0.y * (c.x - a.x);
    if (abs(area) <= 9.5367432e-7 * (abs(e0.x * e2.y) + abs(e0.y * e2.x))) {
        return true;
    }
    let s = select(1.0, -1.0, area < 0.0);
    let m = -grow * vec3<f32>(length(e0), length(e1), length(e2));
    // The edge functions at the first centre, and their steps to the next along x and y.
    let p = first + vec2<f32>(0.5);
    let f = s * vec3<f32>(
        e0.x * (p.y - a.y) - e0.y * (p.x - a.x),
        e1.x * (p.y - b.y) - e1.y * (p.x - b.x),
        e2.x * (p.y - c.y) - e2.y * (p.x - c.x),
    );
    let dx = -s * vec3<f32>(e0.y, e1.y, e2.y);
    let dy = s * vec3<f32>(e0.x, e1.x, e2.x);
    let more_x = last.x > first.x;
    let more_y = last.y > first.y;
    return all(f >= m) || (more_x && all(f + dx >= m)) || (more_y && all(f + dy >= m))
        || (more_x && more_y && all(f + dx + dy >= m));
}

@compute @workgroup_size(64)
fn test(@builtin(global_invocation_id) g: vec3<u32>) {
    let run = id_of(g);
    if (run >= cull.runs) {
        return;
    }
    var bits = 0u;
    let end = min(32u, cull.triangles - 32u * run);
    for (var k = 0u; k < end; k = k + 1u) {
        let t = 32u * run + k;
        let i = vec3<u32>(indices[3u * t], indices[3u * t + 1u], indices[3u * t + 2u]);
        var keep = true;
        // An index past the vertices is left to the draw, as without culling.
        if (all(i < vec3<u32>(cull.vertices))) {
            let a = placed[i.x];
            let b = placed[i.y];
            let c = placed[i.z];
            let unplaced = nan(a.x) || nan(b.x) || nan(c.x);
            keep = unplaced || may_cover(a.xy, b.xy, c.xy, cull.margin + max(max(a.z, b.z), c.z));
        }
        bits = bits | (u32(keep) << k);
    }
    kept[run] = bits;
}

var<workgroup> partial: array<u32, 256>;

// One workgroup: each invocation counts a stretch of runs, the first adds the stretches up,
// then each writes its runs' starts.
@compute @workgroup_size(256)
fn scan(@builtin(local_invocation_index) l: u32) {
    let per = (cull.runs + 255u) / 256u;
    let start = min(l * per, cull.runs);
    let end = min(start + per, cull.runs);
    var sum = 0u;
    for (var r = start; r < end; r = r + 1u) {
        sum = sum + countOneBits(kept[r]);
    }
    partial[l] = sum;
    workgroupBarrier();
    if (l == 0u) {
        var total = 0u;
        for (var k = 0u; k < 256u; k = k + 1u) {
            let n = partial[k];
            partial[k] = total;
            total = total + n;
        }
        args[0] = 3u * total;
        args[1] = 1u;
        args[2] = 0u;
        args[3] = 0u;
        args[4] = 0u;
    }
    workgroupBarrier();
    var at = partial[l];
    for (var r = start; r < end; r = r + 1u) {
        before[r] = at;
        at = at + countOneBits(kept[r]);
    }
}

@compute @workgroup_size(64)
fn gather(@builtin(global_invocation_id) g: vec3<u32>) {
    let run = id_of(g);
    if (run >= cull.runs) {
        return;
    }
    var bits = kept[run];
    var out = 3u * before[run];
    loop {
        if (bits == 0u) {
            break;
        }
        let k = firstTrailingBit(bits);
        bits = bits & (bits - 1u);
        let t = 3u * (32u * run + k);
        culled[out] = indices[t];
        culled[out + 1u] = indices[t + 1u];
        culled[out + 2u] = indices[t + 2u];
        out = out + 3u;
    }
}
