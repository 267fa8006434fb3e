//! Meshes on a real GPU: covered pixels and shaded colours against CPU geometry and lighting,
//! buffer sharing and partial updates measured by the counters.

mod common;

use std::sync::Arc;

use common::{assert_pixel, expected_entry, in_triangle, render, renderer, Front};
use sluice::ndarray::Array3;
use sluice::prelude::*;
use sluice::{Mesh, Shading};

const BG: [u8; 4] = [0, 0, 0, 255];

fn vertices(points: &[[f32; 3]]) -> Arc<ArraySource> {
    let flat: Vec<f32> = points.iter().flatten().copied().collect();
    Arc::new(
        ArraySource::with_channels(Array2::from_shape_vec((points.len(), 3), flat).unwrap())
            .unwrap(),
    )
}

/// Pixel centres strictly inside the triangle (4, 4), (28, 4), (4, 28) by more than a pixel,
/// or outside by more than a pixel.
fn inside(x: u32, y: u32) -> Option<bool> {
    in_triangle(x, y, [[4.0, 4.0], [28.0, 4.0], [4.0, 28.0]])
}

#[test]
fn a_triangle_covers_the_expected_pixels_with_the_expected_shade() {
    let tri = vertices(&[[4.0, 4.0, 5.0], [28.0, 4.0, 5.0], [4.0, 28.0, 5.0]]);
    let base = [0.2f32, 0.6, 1.0, 1.0];
    // Light travelling along (0, 0.6, 0.8): the surface faces the eye (normal (0, 0, -1)),
    // so the diffuse term is 0.8 and the shade 0.25 + 0.75 * 0.8 = 0.85.
    let shade = 0.25 + 0.75 * 0.8;
    let want =
        [base[0] * shade, base[1] * shade, base[2] * shade].map(|c| (c * 255.0).round() as u8);
    let mut r = renderer();
    for shading in [Shading::Flat, Shading::Smooth] {
        let mut scene = Scene::new();
        scene.add(
            Mesh::new(tri.clone())
                .with_color(base)
                .with_shading(shading)
                .with_light_direction([0.0, 0.6, 0.8]),
        );
        let img = render(&mut r, &scene, &Front { n: 32.0 }, 32, 32);
        for y in 0..32 {
            for x in 0..32 {
                match inside(x, y) {
                    Some(true) => assert_pixel(&img, x, y, [want[0], want[1], want[2], 255], 1),
                    Some(false) => assert_pixel(&img, x, y, BG, 0),
                    None => {}
                }
            }
        }
    }
}

#[test]
fn scalars_colours_and_textures() {
    let tri = vertices(&[[4.0, 4.0, 5.0], [28.0, 4.0, 5.0], [4.0, 28.0, 5.0]]);
    let mut r = renderer();
    let cam = Front { n: 32.0 };
    // Scalars through clim and colormap, unlit: the colormap entry exactly.
    let scalars = Arc::new(ArraySource::new(Array1::from_vec(vec![5.0f32, 5.0, 5.0])).unwrap());
    let mut scene = Scene::new();
    scene.add(
        Mesh::new(tri.clone())
            .with_scalars(scalars)
            .with_clim(0.0, 10.0)
            .unwrap()
            .with_colormap(Colormap::Viridis)
            .with_shading(Shading::Unlit),
    );
    let img = render(&mut r, &scene, &cam, 32, 32);
    assert_pixel(&img, 10, 10, Colormap::Viridis.entries()[128], 0);
    // Per-vertex colours: u8 RGB.
    let red = Arc::new(
        ArraySource::with_channels(
            Array2::from_shape_vec((3, 3), vec![255u8, 0, 0, 255, 0, 0, 255, 0, 0]).unwrap(),
        )
        .unwrap(),
    );
    let mut scene = Scene::new();
    scene.add(
        Mesh::new(tri.clone())
            .with_vertex_colors(red)
            .with_shading(Shading::Unlit),
    );
    let img = render(&mut r, &scene, &cam, 32, 32);
    assert_pixel(&img, 10, 10, [255, 0, 0, 255], 0);
    // A textured quad: a 2 x 2 RGB image, each quarter of the quad one texel (checked where
    // bilinear sampling clamps to one texel).
    let colors = [[255u8, 0, 0], [0, 255, 0], [0, 0, 255], [255, 255, 0]];
    let image = Arc::new(
        ArraySource::with_channels(Array3::from_shape_fn((2, 2, 3), |(y, x, c)| {
            colors[y * 2 + x][c]
        }))
        .unwrap(),
    );
    let quad = vertices(&[
        [0.0, 0.0, 5.0],
        [32.0, 0.0, 5.0],
        [32.0, 32.0, 5.0],
        [0.0, 32.0, 5.0],
    ]);
    let uv = Arc::new(
        ArraySource::with_channels(
            Array2::from_shape_vec((4, 2), vec![0.0f32, 0.0, 1.0, 0.0, 1.0, 1.0, 0.0, 1.0])
                .unwrap(),
        )
        .unwrap(),
    );
    let indices = Arc::new(ArraySource::new(Array1::from_vec(vec![0u32, 1, 2, 0, 2, 3])).unwrap());
    let mut scene = Scene::new();
    scene.add(
        Mesh::new(quad)
            .with_indices(indices)
            .with_texture(uv, image.clone())
            .with_shading(Shading::Unlit),
    );
    // The same image as an Image elsewhere: one texture for both.
    let img_id = scene.add(Image::new(image));
    scene.set_transform(img_id, Mat4::from_translation(Vec3::new(100.0, 100.0, 0.0)));
    let img = render(&mut r, &scene, &cam, 32, 32);
    for (i, (x, y)) in [(7u32, 7u32), (24, 7), (7, 24), (24, 24)]
        .into_iter()
        .enumerate()
    {
        let c = colors[i];
        assert_pixel(&img, x, y, [c[0], c[1], c[2], 255], 1);
    }
    let counters = r.counters();
    assert_eq!(
        counters.textures_alive, 1,
        "mesh texture and image share one texture"
    );
}

#[test]
fn shared_positions_are_one_buffer_and_small_changes_upload_little() {
    // 409,599 vertices (4.9 MB of f32 positions, 136,533 triangles), 400 chunks of 1024.
    let n = 409_599usize;
    let positions = Arc::new(
        ArraySource::with_channels(Array2::from_shape_fn((n, 3), |(i, c)| {
            let t = (i / 3) as f32;
            [
                4.0 + (i % 3) as f32 * 10.0,
                4.0 + (t % 20.0),
                5.0 + (i % 7) as f32,
            ][c]
        }))
        .unwrap(),
    );
    let mut scene = Scene::new();
    scene.add(Mesh::new(positions.clone()).with_shading(Shading::Flat));
    scene.add(
        Mesh::new(positions.clone())
            .with_shading(Shading::Unlit)
            .with_color([1.0, 0.0, 0.0, 1.0]),
    );
    let mut r = renderer();
    let cam = Front { n: 32.0 };
    render(&mut r, &scene, &cam, 32, 32);
    let c = r.counters();
    assert_eq!(c.buffers_alive, 1, "two meshes, one positions buffer");
    assert_eq!(c.bytes_uploaded, (n * 12) as u64);
    // Change 1% of the vertices (one chunk): about 1% of the bytes go up.
    let before = r.counters();
    positions
        .update::<f32>(Region::d1(8192, 4096), |mut v| v.mapv_inplace(|p| p + 0.5))
        .unwrap();
    render(&mut r, &scene, &cam, 32, 32);
    let d = r.counters().since(&before);
    assert_eq!(
        d.bytes_uploaded,
        4096 * 12,
        "1% of the vertices -> {} of {} bytes",
        d.bytes_uploaded,
        n * 12
    );
}

#[test]
fn wireframe_draws_the_edges() {
    let tri = vertices(&[[4.0, 4.5, 5.0], [28.0, 4.5, 5.0], [4.0, 28.0, 5.0]]);
    let mut scene = Scene::new();
    scene.add(
        Mesh::new(tri)
            .with_color([0.0, 0.0, 1.0, 1.0])
            .with_shading(Shading::Unlit)
            .with_wireframe([1.0, 1.0, 1.0, 1.0]),
    );
    let img = render(&mut renderer(), &scene, &Front { n: 32.0 }, 32, 32);
    assert_pixel(&img, 14, 4, [255, 255, 255, 255], 0);
    assert_pixel(&img, 10, 12, [0, 0, 255, 255], 0);
}

#[test]
fn triangles_with_a_nan_vertex_are_not_drawn() {
    let pts = vertices(&[
        [4.0, 4.0, 5.0],
        [12.0, 4.0, 5.0],
        [4.0, 12.0, 5.0],
        [20.0, 20.0, 5.0],
        [f32::NAN, 28.0, 5.0],
        [20.0, 28.0, 5.0],
    ]);
    let mut scene = Scene::new();
    scene.add(
        Mesh::new(pts)
            .with_color([1.0, 1.0, 1.0, 1.0])
            .with_shading(Shading::Unlit),
    );
    let img = render(&mut renderer(), &scene, &Front { n: 32.0 }, 32, 32);
    assert_pixel(&img, 5, 5, [255, 255, 255, 255], 0);
    let lit = img.pixels().filter(|p| p.0 != BG).count();
    assert!(
        lit < 40,
        "only the valid triangle (32 pixels) is drawn, found {lit}"
    );
}

/// On a CPU device positions are scanned for NaN as they are staged, and a one-colour mesh
/// whose positions hold none is drawn without the per-vertex NaN test
/// (`mesh_draws_without_nan_test`). A NaN written into one chunk turns the test back on at
/// once (its triangle disappears); taking it out again in one chunk keeps the test (the
/// rest of the buffer was not scanned again), a whole write without NaN drops it. On a GPU
/// the test is always on. The pixels are checked at every step.
#[test]
fn a_nan_written_into_clean_positions_hides_its_triangle_at_once() {
    let points = [
        [4.0f32, 4.0, 5.0],
        [12.0, 4.0, 5.0],
        [4.0, 12.0, 5.0],
        [20.0, 20.0, 5.0],
        [28.0, 20.0, 5.0],
        [20.0, 28.0, 5.0],
    ];
    let flat: Vec<f32> = points.iter().flatten().copied().collect();
    let positions = Arc::new(
        ArraySource::with_channels(Array2::from_shape_vec((6, 3), flat).unwrap())
            .unwrap()
            .with_chunks(sluice::ChunkGrid::new(&[3]).unwrap()),
    );
    let mut scene = Scene::new();
    scene.add(
        Mesh::new(positions.clone())
            .with_color([1.0, 1.0, 1.0, 1.0])
            .with_shading(Shading::Unlit),
    );
    let mut r = renderer();
    let cpu = r.adapter_info().device_type == sluice::wgpu::DeviceType::Cpu;
    let cam = Front { n: 32.0 };
    let white = [255, 255, 255, 255];
    // Draws, checks the second triangle's pixels and the fast path's count.
    let mut step = |second: bool, fast: bool, what: &str| {
        let before = r.counters();
        let img = render(&mut r, &scene, &cam, 32, 32);
        let d = r.counters().since(&before);
        assert_eq!(
            d.mesh_draws_without_nan_test,
            u64::from(cpu && fast),
            "{what}"
        );
        assert_pixel(&img, 5, 5, white, 0);
        assert_pixel(&img, 21, 21, if second { white } else { BG }, 0);
        let lit = img.pixels().filter(|p| p.0 != BG).count();
        let range = if second { 56..80 } else { 28..40 };
        assert!(range.contains(&lit), "{what}: {lit} pixels drawn");
        d.bytes_uploaded
    };
    step(true, true, "no NaN");
    let vertex = |x: f32| {
        positions
            .update::<f32>(Region::d1(4, 1), |mut v| v[[0, 0]] = x)
            .unwrap();
    };
    vertex(f32::NAN);
    assert_eq!(step(false, false, "a NaN in one chunk"), 3 * 12);
    vertex(28.0);
    assert_eq!(step(true, false, "the NaN taken out"), 3 * 12);
    positions
        .update::<f32>(Region::d1(0, 6), |mut v| v.mapv_inplace(|p| p + 0.0))
        .unwrap();
    assert_eq!(step(true, true, "a whole write without NaN"), 6 * 12);
}

#[test]
fn bad_mesh_input_is_a_clear_error_before_upload() {
    let tri = vertices(&[[0.0, 0.0, 1.0], [1.0, 0.0, 1.0], [0.0, 1.0, 1.0]]);
    let idx = |v: Vec<u32>| Arc::new(ArraySource::new(Array1::from_vec(v)).unwrap());
    let two = vertices(&[[0.0, 0.0, 1.0], [1.0, 0.0, 1.0]]);
    let short_scalars = Arc::new(ArraySource::new(Array1::from_vec(vec![1.0f32, 2.0])).unwrap());
    let cases: Vec<(Mesh, &str)> = vec![
        (
            Mesh::new(tri.clone()).with_indices(idx(vec![0, 1, 3])),
            "index 3 at position 2 is out of range for 3 vertices",
        ),
        (
            Mesh::new(tri.clone()).with_indices(idx(vec![0, 1, 2, 0])),
            "4 indices is not a whole number of triangles",
        ),
        (
            Mesh::new(tri.clone()).with_scalars(short_scalars),
            "scalars have shape (2,) but positions have 3 vertices",
        ),
        (Mesh::new(two), "2 vertices without indices"),
        (
            Mesh::new(Arc::new(
                ArraySource::new(Array2::<f32>::zeros((3, 3))).unwrap(),
            )),
            "positions are 1-D with 2 or 3 channels",
        ),
    ];
    let mut r = renderer();
    let target = r.create_target(8, 8).unwrap();
    for (mesh, needle) in cases {
        let mut scene = Scene::new();
        scene.add(mesh);
        let before = r.counters();
        let e = r
            .render(&scene, &Front { n: 8.0 }, &target)
            .unwrap_err()
            .to_string();
        assert!(e.contains(needle), "{e:?} should mention {needle:?}");
        if needle.starts_with("index") {
            // The bad indices never reached the GPU.
            assert!(
                r.counters().since(&before).bytes_uploaded <= 36,
                "indices were uploaded"
            );
        }
    }
    let e = Colormap::custom("empty", Vec::new())
        .unwrap_err()
        .to_string();
    assert!(e.contains("0 entries"), "{e}");
}

#[test]
fn an_opaque_one_colour_mesh_replaces_what_is_under_it_and_a_translucent_one_blends() {
    // A grey quad behind (z 20) and a triangle in front (z 5, nearer the eye). An opaque
    // one-colour mesh is drawn with blending off: its pixels are its colour exactly, as the
    // blend would give (source x 1 + destination x 0); at alpha 0.5 it blends over the grey.
    let quad = vertices(&[
        [0.0, 0.0, 20.0],
        [32.0, 0.0, 20.0],
        [32.0, 32.0, 20.0],
        [0.0, 32.0, 20.0],
    ]);
    let indices = Arc::new(ArraySource::new(Array1::from_vec(vec![0u32, 1, 2, 0, 2, 3])).unwrap());
    let tri = vertices(&[[4.0, 4.0, 5.0], [28.0, 4.0, 5.0], [4.0, 28.0, 5.0]]);
    let mut r = renderer();
    let cam = Front { n: 32.0 };
    for alpha in [1.0f32, 0.5] {
        let mut scene = Scene::new();
        scene.add(
            Mesh::new(quad.clone())
                .with_indices(indices.clone())
                .with_color([0.4, 0.4, 0.4, 1.0])
                .with_shading(Shading::Unlit),
        );
        scene.add(
            Mesh::new(tri.clone())
                .with_color([0.2, 0.4, 0.6, alpha])
                .with_shading(Shading::Unlit),
        );
        let before = r.counters().mesh_draws_without_nan_test;
        let img = render(&mut r, &scene, &cam, 32, 32);
        // The program without the NaN test needs positions known to hold no NaN, which only
        // CPU devices scan for as they stage them (`BufferProxy::nan_free`); GPUs draw the
        // NaN-testing program, with the same pixels.
        let cpu = r.adapter_info().device_type == sluice::wgpu::DeviceType::Cpu;
        assert_eq!(
            r.counters().mesh_draws_without_nan_test - before,
            if cpu { 2 } else { 0 }
        );
        let grey = (0.4f32 * 255.0).round();
        let want = [0.2f32, 0.4, 0.6].map(|c| (c * 255.0).round() * alpha + grey * (1.0 - alpha));
        let want = [want[0], want[1], want[2], 255.0].map(|v| v.round() as u8);
        // Opaque: exact; blended: within 1 (the blend rounds once more).
        assert_pixel(&img, 10, 10, want, if alpha == 1.0 { 0 } else { 1 });
        assert_pixel(&img, 30, 30, [102, 102, 102, 255], 0);
    }
}

#[test]
fn mesh_display_settings_apply_gamma_opacity_and_nearest_sampling() {
    let tri = vertices(&[[4.0, 4.0, 5.0], [28.0, 4.0, 5.0], [4.0, 28.0, 5.0]]);
    let mut r = renderer();
    let cam = Front { n: 32.0 };
    // Gamma on scalars: t = 0.5 ^ 0.5, as the CPU computes it.
    let scalars = Arc::new(ArraySource::new(Array1::from_vec(vec![5.0f32, 5.0, 5.0])).unwrap());
    let mut scene = Scene::new();
    scene.add(
        Mesh::new(tri.clone())
            .with_scalars(scalars)
            .with_clim(0.0, 10.0)
            .unwrap()
            .with_gamma(0.5)
            .unwrap()
            .with_colormap(Colormap::Viridis)
            .with_shading(Shading::Unlit),
    );
    let img = render(&mut r, &scene, &cam, 32, 32);
    let (want, near) = expected_entry(&Colormap::Viridis, 5.0, [0.0, 10.0], 0.5);
    let got = img.get_pixel(10, 10).0;
    assert!(got == want || Some(got) == near, "{got:?} vs {want:?}");

    // Opacity 0.5: red over the black background, blended by the alpha.
    let mut scene = Scene::new();
    scene.add(
        Mesh::new(tri)
            .with_color([1.0, 0.0, 0.0, 1.0])
            .with_opacity(0.5)
            .unwrap()
            .with_shading(Shading::Unlit),
    );
    let img = render(&mut r, &scene, &cam, 32, 32);
    assert_pixel(&img, 10, 10, [128, 0, 0, 255], 1);

    // Nearest sampling of a 2 x 2 texture: just left of the middle of the quad the first
    // texel alone (linear sampling would mix in a quarter and more of its neighbour).
    let colors = [[255u8, 0, 0], [0, 255, 0], [0, 0, 255], [255, 255, 0]];
    let image = Arc::new(
        ArraySource::with_channels(Array3::from_shape_fn((2, 2, 3), |(y, x, c)| {
            colors[y * 2 + x][c]
        }))
        .unwrap(),
    );
    let quad = vertices(&[
        [0.0, 0.0, 5.0],
        [32.0, 0.0, 5.0],
        [32.0, 32.0, 5.0],
        [0.0, 32.0, 5.0],
    ]);
    let uv = Arc::new(
        ArraySource::with_channels(
            Array2::from_shape_vec((4, 2), vec![0.0f32, 0.0, 1.0, 0.0, 1.0, 1.0, 0.0, 1.0])
                .unwrap(),
        )
        .unwrap(),
    );
    let indices = Arc::new(ArraySource::new(Array1::from_vec(vec![0u32, 1, 2, 0, 2, 3])).unwrap());
    let mut scene = Scene::new();
    let id = scene.add(
        Mesh::new(quad)
            .with_indices(indices)
            .with_texture(uv, image)
            .with_interpolation(Interpolation::Nearest)
            .with_shading(Shading::Unlit),
    );
    let img = render(&mut r, &scene, &cam, 32, 32);
    assert_pixel(&img, 15, 7, [255, 0, 0, 255], 0);
    // Linear (the default) mixes the neighbour in at the same pixel.
    scene
        .mesh_mut(id)
        .unwrap()
        .set_interpolation(Interpolation::Linear);
    let img = render(&mut r, &scene, &cam, 32, 32);
    let mixed = img.get_pixel(15, 7).0;
    assert!(
        mixed[1] > 64 && mixed[0] < 200,
        "{mixed:?} should mix red and green"
    );
}

/// The vertices of a `g` x `g` grid over 0..32, z a ripple about 10.
fn grid_points(g: u32) -> Vec<[f32; 3]> {
    let s = 32.0 / (g - 1) as f32;
    (0..g * g)
        .map(|i| {
            let (x, y) = ((i % g) as f32 * s, (i / g) as f32 * s);
            [x, y, 10.0 + 3.0 * (x * 0.4).sin() * (y * 0.3).cos()]
        })
        .collect()
}

/// A `g` x `g` grid over 0..32 (z a ripple about 10), its quads' first triangles, then
/// their second ones (the order numpy code stacking two triangle arrays makes): positions
/// and indices.
fn grid_in_two_halves(g: u32) -> (Arc<ArraySource>, Vec<u32>) {
    let points = grid_points(g);
    let quads: Vec<u32> = (0..g - 1)
        .flat_map(|r| (0..g - 1).map(move |c| r * g + c))
        .collect();
    let first = quads.iter().flat_map(|&q| [q, q + 1, q + 1 + g]);
    let second = quads.iter().flat_map(|&q| [q, q + 1 + g, q + g]);
    (vertices(&points), first.chain(second).collect())
}

/// On CPU devices an opaque one-colour mesh draws its triangles reordered for vertex reuse
/// (`RendererOptions::mesh_reorder`): every pixel equals the given order's (tolerance 0:
/// one colour, and the depth test keeps the nearest fragment whatever came first), after the
/// indices change too; a translucent mesh keeps the given order.
#[test]
fn reordered_triangles_draw_the_pixels_of_the_given_order() {
    let (positions, indices) = grid_in_two_halves(90);
    let index_source = Arc::new(ArraySource::new(Array1::from_vec(indices.clone())).unwrap());
    let options = RendererOptions::from_env().unwrap();
    let mut reordering = Renderer::with_options(options.clone()).unwrap();
    let mut given = Renderer::with_options(RendererOptions {
        mesh_reorder: false,
        ..options
    })
    .unwrap();
    let cpu = reordering.adapter_info().device_type == sluice::wgpu::DeviceType::Cpu;
    let cam = OrbitCamera::fit(Vec3::ZERO, Vec3::new(32.0, 32.0, 16.0), 40.0, 50.0);
    // The whole grid; its halves swapped; every quad's first triangle only (already in an
    // order that reuses vertices: kept); the whole grid again; translucent (kept).
    let half = indices.len() / 2;
    let swapped = [&indices[half..], &indices[..half]].concat();
    let first_half = indices[..half].to_vec();
    for (step, alpha, new_indices, reorders) in [
        (0, 1.0f32, None, true),
        (1, 1.0, Some(swapped), true),
        (2, 1.0, Some(first_half), false),
        (3, 1.0, Some(indices.clone()), true),
        (4, 0.5, None, false),
    ] {
        if let Some(new) = new_indices {
            index_source.replace(Array1::from_vec(new)).unwrap();
        }
        let mut scene = Scene::new();
        scene.add(
            Mesh::new(positions.clone())
                .with_indices(index_source.clone())
                .with_color([0.9, 0.5, 0.1, alpha])
                .with_shading(Shading::Unlit),
        );
        let before = reordering.counters();
        let a = render(&mut reordering, &scene, &cam, 96, 80);
        let counted = reordering.counters().since(&before);
        let b = render(&mut given, &scene, &cam, 96, 80);
        let lit = b.pixels().filter(|p| p[3] != 0).count();
        assert!(
            lit > 96 * 80 / 4,
            "step {step}: the mesh covers {lit} pixels"
        );
        let differing = a.pixels().zip(b.pixels()).filter(|(p, q)| p != q).count();
        assert_eq!(
            differing, 0,
            "step {step}: pixels differing from the given order"
        );
        let expected = u64::from(cpu && reorders);
        assert_eq!(
            counted.mesh_draws_reordered, expected,
            "step {step}: draws in the reordered order"
        );
        assert_eq!(given.counters().mesh_draws_reordered, 0);
    }
}

/// A dense mesh leaves out of its draw the triangles that cover no pixel centre
/// (`RendererOptions::mesh_cull`, found on the device before the draw): every pixel equals
/// the whole draw's (tolerance 0: a left-out triangle gives no fragment, and the kept ones
/// keep their order), for a 200 x 200 grid (79,202 triangles, most under a tenth of a pixel
/// here) drawn as one opaque colour, translucent (blending sees the order), smoothly shaded
/// with vertex colours, textured, with NaN vertices (their triangles' fragments discarded), seen from
/// inside the grid's box (vertices behind the eye: their triangles are kept) and zoomed in so
/// that most of it lies off the target (triangles off the target are left out). A renderer
/// with the option off, and a mesh under 65,536 triangles, draw every triangle.
/// (`mesh_cull`'s unit test checks which triangles the cull keeps.)
#[test]
fn dense_meshes_leave_out_the_triangles_that_cover_no_pixel_centre() {
    let g = 200u32;
    let (positions, indices) = grid_in_two_halves(g);
    let index_source = Arc::new(ArraySource::new(Array1::from_vec(indices.clone())).unwrap());
    let options = RendererOptions::from_env().unwrap();
    let mut culling = Renderer::with_options(options.clone()).unwrap();
    let mut whole = Renderer::with_options(RendererOptions {
        mesh_cull: false,
        ..options
    })
    .unwrap();
    let n = (g * g) as usize;
    let colors = Arc::new(
        ArraySource::with_channels(Array2::from_shape_fn((n, 4), |(i, c)| {
            ((i * 37 + c * 91) % 256) as u8
        }))
        .unwrap(),
    );
    let with_nan = {
        let mut p = grid_points(g);
        for i in (0..n).step_by(23) {
            p[i][i % 3] = f32::NAN;
        }
        vertices(&p)
    };
    // Texture coordinates across the grid, and a 16 x 16 scalar image.
    let uv = Arc::new(
        ArraySource::with_channels(Array2::from_shape_fn((n, 2), |(i, c)| {
            let k = if c == 0 {
                i % g as usize
            } else {
                i / g as usize
            };
            k as f32 / (g - 1) as f32
        }))
        .unwrap(),
    );
    let image = Arc::new(
        ArraySource::new(Array2::from_shape_fn((16, 16), |(y, x)| (x * 16 + y) as u8)).unwrap(),
    );
    let orbit = OrbitCamera::fit(Vec3::ZERO, Vec3::new(32.0, 32.0, 16.0), 40.0, 50.0);
    let mut inside = orbit;
    inside.target = Vec3::new(16.0, 16.0, 10.0);
    inside.distance = 6.0;
    inside.near = 0.05;
    let mut zoomed = orbit;
    zoomed.distance *= 0.3;
    zoomed.near = 0.05;
    let on_grid = |p: &Arc<ArraySource>| Mesh::new(p.clone()).with_indices(index_source.clone());
    let unlit =
        |p: &Arc<ArraySource>, rgba| on_grid(p).with_color(rgba).with_shading(Shading::Unlit);
    let coloured = |shading| {
        on_grid(&positions)
            .with_vertex_colors(colors.clone())
            .with_shading(shading)
    };
    let meshes: Vec<(&str, Mesh, &OrbitCamera)> = vec![
        ("opaque", unlit(&positions, [0.9, 0.5, 0.1, 1.0]), &orbit),
        (
            "translucent",
            unlit(&positions, [0.9, 0.5, 0.1, 0.5]),
            &orbit,
        ),
        ("smooth, vertex colours", coloured(Shading::Smooth), &orbit),
        (
            "NaN vertices",
            unlit(&with_nan, [0.2, 0.7, 0.3, 1.0]),
            &orbit,
        ),
        ("eye inside", coloured(Shading::Flat), &inside),
        (
            "textured",
            on_grid(&positions)
                .with_texture(uv.clone(), image.clone())
                .with_shading(Shading::Smooth),
            &orbit,
        ),
        (
            "mostly off the target",
            unlit(&positions, [0.9, 0.5, 0.1, 1.0]),
            &zoomed,
        ),
    ];
    for (what, mesh, camera) in meshes {
        let mut scene = Scene::new();
        scene.add(mesh);
        let before = (culling.counters(), whole.counters());
        let a = render(&mut culling, &scene, camera, 96, 80);
        let b = render(&mut whole, &scene, camera, 96, 80);
        let lit = b.pixels().filter(|p| p.0 != BG).count();
        assert!(lit > 96 * 80 / 8, "{what}: the mesh covers {lit} pixels");
        let differing = a.pixels().zip(b.pixels()).filter(|(p, q)| p != q).count();
        assert_eq!(differing, 0, "{what}: pixels differing from the whole draw");
        assert_eq!(
            culling.counters().since(&before.0).mesh_draws_culled,
            1,
            "{what}: culled draws"
        );
        assert_eq!(whole.counters().since(&before.1).mesh_draws_culled, 0);
    }
    // The cull runs again only when what it depends on changes: not for a frame of the same
    // mesh, view and target size; for new positions, a new view, another target size.
    let moving = Arc::new(
        ArraySource::with_channels(
            Array2::from_shape_vec((n, 3), grid_points(g).concat()).unwrap(),
        )
        .unwrap(),
    );
    let mut scene = Scene::new();
    scene.add(
        on_grid(&moving)
            .with_vertex_colors(colors.clone())
            .with_shading(Shading::Smooth),
    );
    let mut turned = orbit;
    turned.azimuth += 0.4;
    let shifted: Vec<f32> = grid_points(g)
        .iter()
        .flat_map(|[x, y, z]| [x + 3.0, y * 0.8, z * 1.5])
        .collect();
    for (step, camera, size, new_positions, runs) in [
        (0, &orbit, (96, 80), None, 1),
        (1, &orbit, (96, 80), None, 0),
        (2, &orbit, (96, 80), Some(shifted), 1),
        (3, &orbit, (96, 80), None, 0),
        (4, &turned, (96, 80), None, 1),
        (5, &turned, (80, 96), None, 1),
        (6, &turned, (80, 96), None, 0),
    ] {
        if let Some(p) = new_positions {
            moving
                .replace(Array2::from_shape_vec((n, 3), p).unwrap())
                .unwrap();
        }
        let before = culling.counters();
        let a = render(&mut culling, &scene, camera, size.0, size.1);
        let b = render(&mut whole, &scene, camera, size.0, size.1);
        let counted = culling.counters().since(&before);
        let differing = a.pixels().zip(b.pixels()).filter(|(p, q)| p != q).count();
        assert_eq!(
            differing, 0,
            "step {step}: pixels differing from the whole draw"
        );
        assert_eq!(
            (counted.mesh_draws_culled, counted.mesh_culls_run),
            (1, runs),
            "step {step}: culled draws and runs of the cull"
        );
    }
    // Under 65,536 triangles: drawn whole.
    let (small, small_indices) = grid_in_two_halves(100);
    let mut scene = Scene::new();
    scene.add(
        Mesh::new(small)
            .with_indices(Arc::new(
                ArraySource::new(Array1::from_vec(small_indices)).unwrap(),
            ))
            .with_shading(Shading::Unlit),
    );
    let before = culling.counters();
    render(&mut culling, &scene, &orbit, 96, 80);
    assert_eq!(culling.counters().since(&before).mesh_draws_culled, 0);
}
