//! Frames of one dense image drawn by a compute pass (`ImageDraw::Compute`) against colours
//! computed here on the CPU, and against the rasterizer's frames of the same scenes: placed,
//! clipped and blended as the rasterizer does, partial redraws included; frames the compute
//! path cannot draw go to the rasterizer.

mod common;

use std::sync::Arc;

use common::{expected_entry, pixel_camera, pixel_diff, render};
use sluice::prelude::*;
use sluice::ImageDraw;

/// A renderer drawing lone images by `draw`.
fn renderer_drawing(draw: ImageDraw) -> Renderer {
    let mut options = RendererOptions::from_env().unwrap();
    options.image_draw = draw;
    match Renderer::with_options(options) {
        Ok(r) => r,
        Err(e) => panic!("no GPU adapter for the rendering tests: {e}"),
    }
}

/// A renderer for each way of drawing lone images, with the way.
fn both() -> [(ImageDraw, Renderer); 2] {
    [ImageDraw::Raster, ImageDraw::Compute].map(|d| (d, renderer_drawing(d)))
}

const BG: [f32; 4] = [0.2, 0.4, 0.6, 1.0];

fn unorm(v: f32) -> u8 {
    (v.clamp(0.0, 1.0) * 255.0).round() as u8
}

/// The RGBA8 test pattern: varied colours, alpha 0 on a diagonal band, else alpha 96 to 255.
fn rgba(y: usize, x: usize) -> [u8; 4] {
    let a = if (x + 2 * y) % 11 < 2 {
        0
    } else {
        96 + ((x * 13 + y * 7) % 160) as u8
    };
    [
        (x * 37 + y * 11) as u8,
        (y * 29 + 5) as u8,
        (x * y % 251) as u8,
        a,
    ]
}

#[test]
fn a_translucent_rgba_image_is_placed_and_blended_as_on_the_cpu() {
    // A 40 x 30 RGBA8 image at opacity 0.7, moved by a fraction of a pixel so that no pixel
    // centre lies on a texel boundary, on a 64 x 48 target with a coloured background. Every
    // pixel: the background where the image does not cover its centre (and where the texel's
    // alpha is 0), else the texel blended over the background with alpha times opacity.
    let (h, w) = (30usize, 40usize);
    let data = Array3::from_shape_fn((h, w, 4), |(y, x, c)| rgba(y, x)[c]);
    let source = Arc::new(ArraySource::with_channels(data).unwrap());
    let offset = Vec2::new(5.3, 7.6);
    let opacity = 0.7f32;
    // A background with alpha below 1, so that the alpha's blend ("over") shows.
    const BG: [f32; 4] = [0.2, 0.4, 0.6, 0.5];
    for (draw, mut r) in both() {
        let mut scene = Scene::new();
        scene.set_background(BG);
        let id = scene.add(Image::new(source.clone()).with_opacity(opacity).unwrap());
        scene.set_transform(id, Mat4::from_translation(offset.extend(0.0)));
        let img = render(&mut r, &scene, &pixel_camera(64, 48), 64, 48);
        let mut covered = 0;
        for py in 0..48u32 {
            for px in 0..64u32 {
                let local = Vec2::new(px as f32 + 0.5, py as f32 + 0.5) - offset;
                let bg = BG.map(unorm);
                let want =
                    if local.x < 0.0 || local.y < 0.0 || local.x >= w as f32 || local.y >= h as f32
                    {
                        bg
                    } else {
                        covered += 1;
                        let t = rgba(local.y as usize, local.x as usize);
                        let a = t[3] as f32 / 255.0 * opacity;
                        if a <= 0.0 {
                            bg
                        } else {
                            let mut out = [0u8; 4];
                            for c in 0..3 {
                                out[c] = unorm(t[c] as f32 / 255.0 * a + BG[c] * (1.0 - a));
                            }
                            // Alpha "over" (wgpu's ALPHA_BLENDING).
                            out[3] = unorm(a + BG[3] * (1.0 - a));
                            out
                        }
                    };
                let got = img.get_pixel(px, py);
                // Tolerance 1: blending may round the other way.
                assert!(
                    pixel_diff(got, &image::Rgba(want)) <= 1,
                    "{draw:?} ({px}, {py}), local {local}: {:?}, want {want:?}",
                    got.0
                );
            }
        }
        assert_eq!(covered, 40 * 30);
        let by_compute = r.counters().image_draws_by_compute;
        assert_eq!(
            by_compute,
            u64::from(draw == ImageDraw::Compute),
            "{draw:?}"
        );
    }
}

#[test]
fn partial_redraws_by_compute_show_the_new_data_and_keep_the_rest() {
    // A 2-D u16 image filling a 96 x 64 target, gray; writes of a few texels redraw only
    // their screen rectangles (counted), by compute, and every pixel then shows the data as
    // it is now (CPU colours).
    let (h, w) = (64usize, 96usize);
    let value = |y: usize, x: usize| ((x * 7 + y * 13) % 1000) as u16;
    let base =
        Arc::new(ArraySource::new(Array2::from_shape_fn((h, w), |(y, x)| value(y, x))).unwrap());
    let mut scene = Scene::new();
    scene.add(Image::new(base.clone()).with_clim(0.0, 1000.0).unwrap());
    let mut r = renderer_drawing(ImageDraw::Compute);
    let target = r.create_target(w as u32, h as u32).unwrap();
    let camera = pixel_camera(w as u32, h as u32);
    let mut now = Array2::from_shape_fn((h, w), |(y, x)| value(y, x));
    let marker = [255u8, 0, 255, 255];
    let check = |r: &Renderer, now: &Array2<u16>, what: &str| {
        let img = r.read_image(&target).unwrap();
        for ((y, x), v) in now.indexed_iter() {
            if what != "first frame" && (x, y) == (48, 40) {
                assert_eq!(
                    img.get_pixel(48, 40).0,
                    marker,
                    "{what}: the marker was redrawn"
                );
                continue;
            }
            let (want, near) = expected_entry(&Colormap::Gray, *v as f32, [0.0, 1000.0], 1.0);
            let got = img.get_pixel(x as u32, y as u32).0;
            assert!(
                got == want || Some(got) == near,
                "{what}: ({x}, {y}) value {v}: {got:?}, want {want:?}"
            );
        }
    };
    let first = r.render(&scene, &camera, &target).unwrap();
    assert_eq!(first.pixels_drawn, (w * h) as u64);
    check(&r, &now, "first frame");
    // A marker pixel written into the target behind the renderer's back, far from every write
    // below: a partial redraw leaves it, a whole one would paint it over.
    // (The target has no COPY_DST: a one-invocation compute pass stores it.)
    let device = r.device();
    let module = device.create_shader_module(sluice::wgpu::ShaderModuleDescriptor {
        label: Some("marker"),
        source: sluice::wgpu::ShaderSource::Wgsl(
            "@group(0) @binding(0) var t: texture_storage_2d<rgba8unorm, write>;
             @compute @workgroup_size(1) fn main() {
                 textureStore(t, vec2<i32>(48, 40), vec4<f32>(1.0, 0.0, 1.0, 1.0));
             }"
            .into(),
        ),
    });
    let pipeline = device.create_compute_pipeline(&sluice::wgpu::ComputePipelineDescriptor {
        label: Some("marker"),
        layout: None,
        module: &module,
        entry_point: Some("main"),
        compilation_options: Default::default(),
        cache: None,
    });
    let view = target.texture().create_view(&Default::default());
    let group = device.create_bind_group(&sluice::wgpu::BindGroupDescriptor {
        label: Some("marker"),
        layout: &pipeline.get_bind_group_layout(0),
        entries: &[sluice::wgpu::BindGroupEntry {
            binding: 0,
            resource: sluice::wgpu::BindingResource::TextureView(&view),
        }],
    });
    let mut encoder = device.create_command_encoder(&Default::default());
    {
        let mut pass = encoder.begin_compute_pass(&Default::default());
        pass.set_pipeline(&pipeline);
        pass.set_bind_group(0, &group, &[]);
        pass.dispatch_workgroups(1, 1, 1);
    }
    r.queue().submit([encoder.finish()]);
    for (k, (y, x, bh, bw)) in [(3, 4, 5, 6), (0, 0, 2, 2), (60, 90, 4, 6)]
        .into_iter()
        .enumerate()
    {
        let patch = Array2::from_elem((bh, bw), 100 * k as u16 + 333);
        base.write(&[y, x], patch.view()).unwrap();
        now.slice_mut(sluice::ndarray::s![y..y + bh, x..x + bw])
            .assign(&patch);
        let stats = r.render(&scene, &camera, &target).unwrap();
        assert!(
            stats.pixels_drawn >= (bh * bw) as u64 && stats.pixels_drawn < (w * h / 4) as u64,
            "write {k}: {} pixels redrawn",
            stats.pixels_drawn
        );
        check(&r, &now, &format!("write {k}"));
    }
    // Two writes far apart in one frame: two rectangles, one dispatch.
    base.write(&[1, 90], Array2::from_elem((2, 3), 7u16).view())
        .unwrap();
    base.write(&[55, 2], Array2::from_elem((3, 2), 999u16).view())
        .unwrap();
    now.slice_mut(sluice::ndarray::s![1..3, 90..93]).fill(7);
    now.slice_mut(sluice::ndarray::s![55..58, 2..4]).fill(999);
    let stats = r.render(&scene, &camera, &target).unwrap();
    assert!(stats.pixels_drawn < (w * h / 4) as u64, "{stats:?}");
    check(&r, &now, "two writes");
    assert_eq!(r.counters().image_draws_by_compute, 5);
}

#[test]
fn compute_and_raster_frames_agree_under_zoom_linear_nan_slices_and_perspective() {
    // Scenes drawn by both renderers; pixels compared with each other. Where a pixel centre
    // lies on a texel boundary or an edge, the two may pick either side (and then differ by a
    // texel or the background): at most 1 % of the pixels may differ by more than 2.
    let f = Array2::from_shape_fn((50, 70), |(y, x)| {
        if (x * 3 + y) % 17 == 0 {
            f32::NAN
        } else {
            ((x as f32 * 0.21).sin() + (y as f32 * 0.13).cos()) * 40.0
        }
    });
    let scalar = Arc::new(ArraySource::new(f).unwrap());
    let volume = Arc::new(
        ArraySource::new(Array3::from_shape_fn((20, 24, 28), |(z, y, x)| {
            (z * 9 + y * 5 + x * 3) as u8
        }))
        .unwrap(),
    );
    // One image over the background per case, and the camera it is seen through.
    let cases: Vec<(&str, Image, Box<dyn Camera>)> = vec![
        (
            "zoomed 2.37x, viridis, NaN transparent",
            Image::new(scalar.clone())
                .with_clim(-80.0, 80.0)
                .unwrap()
                .with_colormap(Colormap::Viridis),
            Box::new(PanZoomCamera::new(Vec2::new(31.3, 22.9), 2.37)),
        ),
        (
            "linear, gray, minified",
            Image::new(scalar.clone())
                .with_clim(-80.0, 80.0)
                .unwrap()
                .with_interpolation(Interpolation::Linear)
                .with_nan_color([1.0, 0.0, 1.0, 1.0])
                .unwrap(),
            Box::new(PanZoomCamera::new(Vec2::new(40.03, 30.17), 0.61)),
        ),
        (
            "Y slice of a volume, linear",
            Image::new(volume.clone())
                .with_slice(Slice::Y(9))
                .with_interpolation(Interpolation::Linear),
            Box::new(PanZoomCamera::new(Vec2::new(14.07, 10.11), 2.1)),
        ),
        (
            "oblique slice, clipped to the data",
            Image::new(volume.clone()).with_slice(Slice::Oblique {
                origin: [-3.0, 2.0, -1.5],
                u: [0.8, 0.0, 0.6],
                v: [0.0, 1.0, 0.0],
                extent: [40.0, 30.0],
            }),
            Box::new(PanZoomCamera::new(Vec2::new(20.13, 15.29), 1.9)),
        ),
        (
            "perspective, facing the image",
            Image::new(scalar.clone()).with_clim(-80.0, 80.0).unwrap(),
            Box::new(FlyCamera::new(Vec3::new(33.3, 21.7, -40.0), 0.5, 200.0)),
        ),
        (
            "perspective, the near plane cutting the image",
            Image::new(scalar.clone()).with_clim(-80.0, 80.0).unwrap(),
            Box::new({
                // 0.3 in front of the image, turned 50 degrees from facing it: the near
                // plane (0.5) cuts the image, the far part shrinks towards its horizon.
                let mut cam = FlyCamera::new(Vec3::new(20.3, 25.1, -0.3), 0.5, 200.0);
                cam.turn(0.87, 0.0);
                cam
            }),
        ),
    ];
    let [(_, mut raster), (_, mut compute)] = both();
    for (what, image, camera) in cases {
        let mut scene = Scene::new();
        scene.set_background(BG);
        scene.add(image);
        let a = render(&mut raster, &scene, camera.as_ref(), 120, 90);
        let before = compute.counters().image_draws_by_compute;
        let b = render(&mut compute, &scene, camera.as_ref(), 120, 90);
        assert_eq!(
            compute.counters().image_draws_by_compute,
            before + 1,
            "{what}: not drawn by compute"
        );
        let differing: Vec<_> = a
            .enumerate_pixels()
            .zip(b.pixels())
            .filter(|((_, _, p), q)| pixel_diff(p, q) > 2)
            .map(|((x, y, p), q)| (x, y, p.0, q.0))
            .collect();
        assert!(
            differing.len() <= 120 * 90 / 100,
            "{what}: {} pixels differ, first {:?}",
            differing.len(),
            &differing[..differing.len().min(5)]
        );
        let background = a.pixels().filter(|p| p.0 == BG.map(unorm)).count();
        let drawn = 120 * 90 - background;
        assert!(
            drawn > 120 * 90 / 10,
            "{what}: only {drawn} pixels of the image"
        );
    }
}

#[test]
fn frames_the_compute_path_cannot_draw_go_to_the_rasterizer() {
    // Two images, or one image into a target whose texture cannot be storage: drawn by the
    // rasterizer, as the CPU colours show; the counter of compute frames does not move.
    let source = Arc::new(
        ArraySource::new(Array2::from_shape_fn((16, 16), |(y, x)| (x * 16 + y) as u8)).unwrap(),
    );
    let mut r = renderer_drawing(ImageDraw::Compute);
    assert_eq!(r.image_draw(), ImageDraw::Compute);
    let mut scene = Scene::new();
    scene.add(Image::new(source.clone()));
    let right = scene.add(Image::new(source.clone()));
    scene.set_transform(right, Mat4::from_translation(Vec3::new(16.0, 0.0, 0.0)));
    let img = render(&mut r, &scene, &pixel_camera(32, 16), 32, 16);
    let check = |img: &image::RgbaImage, px: u32, py: u32| {
        let v = ((px % 16) * 16 + py) as f32;
        let (want, near) = expected_entry(&Colormap::Gray, v, [0.0, 255.0], 1.0);
        let got = img.get_pixel(px, py).0;
        assert!(
            got == want || Some(got) == near,
            "({px}, {py}): {got:?}, want {want:?}"
        );
    };
    for (px, py) in [(0, 0), (5, 9), (15, 15), (16, 0), (27, 3), (31, 15)] {
        check(&img, px, py);
    }
    assert_eq!(r.counters().image_draws_by_compute, 0);

    let texture = r.device().create_texture(&sluice::wgpu::TextureDescriptor {
        label: Some("no storage"),
        size: sluice::wgpu::Extent3d {
            width: 16,
            height: 16,
            depth_or_array_layers: 1,
        },
        mip_level_count: 1,
        sample_count: 1,
        dimension: sluice::wgpu::TextureDimension::D2,
        format: sluice::TARGET_FORMAT,
        usage: sluice::TARGET_USAGE,
        view_formats: &[],
    });
    let target = r.target_on_texture(texture).unwrap();
    let mut one = Scene::new();
    one.add(Image::new(source));
    r.render(&one, &pixel_camera(16, 16), &target).unwrap();
    let img = r.read_image(&target).unwrap();
    for (px, py) in [(0, 0), (5, 9), (15, 15)] {
        check(&img, px, py);
    }
    assert_eq!(r.counters().image_draws_by_compute, 0);
    // The same scene into a target the renderer made: by compute.
    render(&mut r, &one, &pixel_camera(16, 16), 16, 16);
    assert_eq!(r.counters().image_draws_by_compute, 1);
}
