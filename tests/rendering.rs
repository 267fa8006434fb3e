//! Rendering on a real GPU (Mesa's lavapipe in CI): pixels against values computed on the CPU.

mod common;

use std::sync::Arc;

use common::{assert_pixel, expected_entry, pixel_camera, render, render_pixels, renderer};
use sluice::prelude::*;
use sluice::{ndarray::Array3, RendererOptions, Slice};

/// Background of the scenes below (opaque black).
const BLACK: [u8; 4] = [0, 0, 0, 255];

#[test]
fn gradient_through_clim_and_colormap() {
    let mut r = renderer();
    // 256 columns, value = column + 0.25 (away from every LUT boundary for this clim).
    let data = Array2::from_shape_fn((8, 256), |(_, c)| c as f32 + 0.25);
    let source = Arc::new(ArraySource::new(data).unwrap());
    for (cm, clim, gamma) in [
        (Colormap::Viridis, [20.0f32, 220.0], 1.0f32),
        (Colormap::Magma, [0.0, 255.0], 2.0),
        (Colormap::Gray, [255.0, 0.0], 1.0),
    ] {
        let mut scene = Scene::new();
        scene.add(
            Image::new(source.clone())
                .with_clim(clim[0] as f64, clim[1] as f64)
                .unwrap()
                .with_gamma(gamma)
                .unwrap()
                .with_colormap(cm.clone()),
        );
        let img = render_pixels(&mut r, &scene, 256, 8);
        for x in 0..256 {
            let (want, near) = expected_entry(&cm, x as f32 + 0.25, clim, gamma);
            let got = img.get_pixel(x, 4).0;
            assert!(
                got == want || Some(got) == near,
                "{} clim {clim:?} gamma {gamma}: column {x} is {got:?}, expected {want:?}",
                cm.name()
            );
        }
    }
}

#[test]
fn integer_types_use_their_full_range_by_default() {
    let mut r = renderer();
    let cm = Colormap::Gray;
    // u8: value v maps to gray v exactly (clim [0, 255], 256 entries).
    let u8s =
        Arc::new(ArraySource::new(Array2::from_shape_fn((4, 256), |(_, c)| c as u8)).unwrap());
    let mut scene = Scene::new();
    scene.add(Image::new(u8s));
    let img = render_pixels(&mut r, &scene, 256, 4);
    for x in 0..256u32 {
        assert_pixel(&img, x, 1, [x as u8, x as u8, x as u8, 255], 0);
    }
    // u16 and i16 with explicit limits: compare with the CPU formula.
    let u16s = Arc::new(
        ArraySource::new(Array2::from_shape_fn((4, 64), |(_, c)| {
            (c * 1000 + 300) as u16
        }))
        .unwrap(),
    );
    let i16s = Arc::new(
        ArraySource::new(Array2::from_shape_fn((4, 64), |(_, c)| {
            (c as i16 - 32) * 900 + 77
        }))
        .unwrap(),
    );
    let mut scene = Scene::new();
    scene.add(Image::new(u16s).with_clim(0.0, 64000.0).unwrap());
    let below = scene.add(Image::new(i16s).with_clim(-30000.0, 30000.0).unwrap());
    scene.set_transform(below, Mat4::from_translation(Vec3::new(0.0, 4.0, 0.0)));
    let img = render_pixels(&mut r, &scene, 64, 8);
    for x in 0..64u32 {
        let (want, near) = expected_entry(&cm, (x * 1000 + 300) as f32, [0.0, 64000.0], 1.0);
        let got = img.get_pixel(x, 1).0;
        assert!(
            got == want || Some(got) == near,
            "u16 column {x}: {got:?} vs {want:?}"
        );
        let v = (x as f32 - 32.0) * 900.0 + 77.0;
        let (want, near) = expected_entry(&cm, v, [-30000.0, 30000.0], 1.0);
        let got = img.get_pixel(x, 5).0;
        assert!(
            got == want || Some(got) == near,
            "i16 column {x}: {got:?} vs {want:?}"
        );
    }
}

#[test]
fn f64_is_converted_on_upload_without_touching_the_callers_data() {
    let mut r = renderer();
    let data = Array2::from_shape_fn((4, 100), |(_, c)| c as f64 / 100.0 + 0.001);
    let source = Arc::new(ArraySource::new(data.clone()).unwrap());
    let mut scene = Scene::new();
    scene.add(Image::new(source.clone()).with_colormap(Colormap::Inferno));
    let img = render_pixels(&mut r, &scene, 100, 4);
    for x in 0..100 {
        let (want, near) = expected_entry(
            &Colormap::Inferno,
            (x as f64 / 100.0 + 0.001) as f32,
            [0.0, 1.0],
            1.0,
        );
        let got = img.get_pixel(x, 2).0;
        assert!(
            got == want || Some(got) == near,
            "column {x}: {got:?} vs {want:?}"
        );
    }
    source
        .with_view::<f64, _>(|v| assert_eq!(v, data.view().into_dyn()))
        .unwrap();
    assert_eq!(
        r.counters().resident_bytes,
        4 * 100 * 4,
        "f64 is held as f32 on the GPU"
    );
}

#[test]
fn rgb_and_rgba_sources() {
    let mut r = renderer();
    let colors = [[255u8, 0, 0], [0, 255, 0], [0, 0, 255], [10, 200, 90]];
    let rgb = Array3::from_shape_fn((2, 4, 3), |(_, c, k)| colors[c][k]);
    let rgb = Arc::new(ArraySource::with_channels(rgb).unwrap());
    // RGBA with alpha 255 and 51 (20 %), over the black background.
    let rgba = Array3::from_shape_fn((2, 4, 4), |(_, c, k)| {
        if k < 3 {
            colors[c][k]
        } else if c % 2 == 0 {
            255
        } else {
            51
        }
    });
    let rgba = Arc::new(ArraySource::with_channels(rgba).unwrap());
    // f32 RGB through clim [0, 2].
    let rgbf = Array3::from_shape_fn((2, 4, 3), |(_, c, k)| colors[c][k] as f32 / 255.0 * 2.0);
    let rgbf = Arc::new(ArraySource::with_channels(rgbf).unwrap());

    let mut scene = Scene::new();
    scene.add(Image::new(rgb));
    let b = scene.add(Image::new(rgba));
    scene.set_transform(b, Mat4::from_translation(Vec3::new(0.0, 2.0, 0.0)));
    let c = scene.add(Image::new(rgbf).with_clim(0.0, 2.0).unwrap());
    scene.set_transform(c, Mat4::from_translation(Vec3::new(0.0, 4.0, 0.0)));
    let img = render_pixels(&mut r, &scene, 4, 6);
    for (x, col) in colors.iter().enumerate() {
        let x = x as u32;
        assert_pixel(&img, x, 0, [col[0], col[1], col[2], 255], 0);
        let a = if x.is_multiple_of(2) { 1.0 } else { 0.2 };
        let blended = col.map(|v| (v as f32 * a).round() as u8);
        assert_pixel(&img, x, 3, [blended[0], blended[1], blended[2], 255], 1);
        assert_pixel(&img, x, 5, [col[0], col[1], col[2], 255], 1);
    }
}

#[test]
fn nearest_and_linear_interpolation() {
    let mut r = renderer();
    // Two samples, 0 and 1, stretched over 64 pixels: each sample covers 32 pixels.
    let source = Arc::new(
        ArraySource::new(Array2::from_shape_vec((1, 2), vec![0.0f32, 1.0]).unwrap()).unwrap(),
    );
    let mut scene = Scene::new();
    let id = scene.add(Image::new(source.clone()));
    scene.set_transform(id, Mat4::from_scale(Vec3::new(32.0, 4.0, 1.0)));
    let img = render_pixels(&mut r, &scene, 64, 4);
    for x in 0..64u32 {
        let v = if x < 32 { 0 } else { 255 };
        assert_pixel(&img, x, 2, [v, v, v, 255], 0);
    }
    scene
        .image_mut(id)
        .unwrap()
        .set_interpolation(Interpolation::Linear);
    let img = render_pixels(&mut r, &scene, 64, 4);
    for x in 0..64u32 {
        // Pixel centre in sample units, minus half a sample, clamped: the bilinear weight.
        let u = ((x as f32 + 0.5) / 32.0 - 0.5).clamp(0.0, 1.0);
        let (want, near) = expected_entry(&Colormap::Gray, u, [0.0, 1.0], 1.0);
        let got = img.get_pixel(x, 2).0;
        let close = got.iter().zip(want).all(|(&g, w)| g.abs_diff(w) <= 1);
        assert!(
            close || Some(got) == near,
            "linear column {x}: {got:?} vs {want:?}"
        );
    }
}

/// u8 data is read as unorm and interpolated by the hardware. Hardware filtering weighs with
/// reduced precision (8 fractional bits on most GPUs; lavapipe may filter 8-bit textures in
/// 8-bit arithmetic), so the tolerance is 2 grey levels: 1 for the filtered value (one unit
/// of the data) and 1 for the colormap entry that value then falls into.
#[test]
fn linear_u8_images_are_interpolated_within_one_data_unit() {
    let mut r = renderer();
    let values = [0u8, 200, 50, 255];
    let source = Arc::new(
        ArraySource::new(Array2::from_shape_vec((2, 2), values.to_vec()).unwrap()).unwrap(),
    );
    let mut scene = Scene::new();
    let id = scene.add(
        Image::new(source)
            .with_clim(0.0, 255.0)
            .unwrap()
            .with_interpolation(Interpolation::Linear),
    );
    scene.set_transform(id, Mat4::from_scale(Vec3::new(32.0, 32.0, 1.0)));
    let img = render_pixels(&mut r, &scene, 64, 64);
    let weight = |p: u32| ((p as f32 + 0.5) / 32.0 - 0.5).clamp(0.0, 1.0);
    for y in 0..64u32 {
        for x in 0..64u32 {
            let (u, v) = (weight(x), weight(y));
            let top = values[0] as f32 * (1.0 - u) + values[1] as f32 * u;
            let bottom = values[2] as f32 * (1.0 - u) + values[3] as f32 * u;
            let want = top * (1.0 - v) + bottom * v;
            let got = img.get_pixel(x, y).0;
            assert!(
                (got[0] as f32 - want).abs() <= 2.0 && got[3] == 255,
                "pixel ({x}, {y}): {got:?}, bilinear value {want}"
            );
        }
    }
}

/// f32 data is interpolated by the hardware where the device filters it; a NaN sample makes
/// that sample NaN, and the shader then takes the taps itself with NaN left out: the NaN does
/// not spread into its neighbour, and only where its neighbour has no weight left does the
/// pixel get the NaN colour.
#[test]
fn linear_interpolation_leaves_nan_samples_out() {
    let mut r = renderer();
    let source = Arc::new(
        ArraySource::new(Array2::from_shape_vec((1, 2), vec![1.0f32, f32::NAN]).unwrap()).unwrap(),
    );
    let mut scene = Scene::new();
    scene.set_background([0.0, 0.0, 1.0, 1.0]);
    let id = scene.add(Image::new(source).with_interpolation(Interpolation::Linear));
    scene.set_transform(id, Mat4::from_scale(Vec3::new(32.0, 4.0, 1.0)));
    let img = render_pixels(&mut r, &scene, 64, 4);
    for x in 0..64u32 {
        // The weight of sample 1 (NaN) is 1 from pixel 48 on: nothing valid is left there.
        let want = if x < 48 {
            [255, 255, 255, 255]
        } else {
            [0, 0, 255, 255]
        };
        assert_pixel(&img, x, 2, want, 0);
    }
}

#[test]
fn nan_and_infinities_render_as_documented() {
    let mut r = renderer();
    let values = vec![0.5f32, f32::NAN, f32::INFINITY, f32::NEG_INFINITY];
    let source =
        Arc::new(ArraySource::new(Array2::from_shape_vec((1, 4), values).unwrap()).unwrap());
    let cm = Colormap::Viridis;
    let mut scene = Scene::new();
    scene.set_background([0.0, 0.0, 1.0, 1.0]);
    let id = scene.add(Image::new(source.clone()).with_colormap(cm.clone()));
    let img = render_pixels(&mut r, &scene, 4, 1);
    let top = *cm.entries().last().unwrap();
    let bottom = cm.entries()[0];
    assert_pixel(&img, 0, 0, cm.entries()[128], 0);
    assert_pixel(&img, 1, 0, [0, 0, 255, 255], 0); // NaN: transparent, the background shows
    assert_pixel(&img, 2, 0, top, 0);
    assert_pixel(&img, 3, 0, bottom, 0);
    scene
        .image_mut(id)
        .unwrap()
        .set_nan_color([1.0, 0.0, 1.0, 1.0])
        .unwrap();
    let img = render_pixels(&mut r, &scene, 4, 1);
    assert_pixel(&img, 1, 0, [255, 0, 255, 255], 0);
}

#[test]
fn transforms_and_camera_place_a_pixel_where_expected() {
    let mut r = renderer();
    let red = Arc::new(
        ArraySource::with_channels(Array3::from_shape_vec((1, 1, 3), vec![255u8, 0, 0]).unwrap())
            .unwrap(),
    );
    let mut scene = Scene::new();
    let group = scene.add_group(None);
    scene.set_transform(group, Mat4::from_translation(Vec3::new(20.0, 0.0, 0.0)));
    let px = scene.add_child(group, Image::new(red));
    scene.set_transform(
        px,
        Mat4::from_translation(Vec3::new(10.0, 5.0, 0.0))
            * Mat4::from_scale(Vec3::new(4.0, 4.0, 1.0)),
    );
    // Camera: world point (32, 7) at the centre of a 100 x 60 target, 2 pixels per unit.
    let camera = PanZoomCamera::new(Vec2::new(32.0, 7.0), 2.0);
    let img = render(&mut r, &scene, &camera, 100, 60);
    // The pixel covers world [30, 34] x [5, 9]; on screen x = 50 + (wx - 32) * 2, y = 30 + (wy - 7) * 2.
    let (x0, x1, y0, y1) = (46u32, 54u32, 26u32, 34u32);
    for y in 0..60 {
        for x in 0..100 {
            let inside = (x0..x1).contains(&x) && (y0..y1).contains(&y);
            let want = if inside { [255, 0, 0, 255] } else { BLACK };
            assert_pixel(&img, x, y, want, 0);
        }
    }
    // Centred on world y = 5, y down puts the pixel's rows [5, 9] below the centre
    // (screen rows 30..38), y up above it (screen rows 22..30).
    let low = PanZoomCamera::new(Vec2::new(32.0, 5.0), 2.0);
    let img = render(&mut r, &scene, &low, 100, 60);
    assert_pixel(&img, 50, 33, [255, 0, 0, 255], 0);
    assert_pixel(&img, 50, 25, BLACK, 0);
    let img = render(&mut r, &scene, &low.with_y_up(), 100, 60);
    assert_pixel(&img, 50, 25, [255, 0, 0, 255], 0);
    assert_pixel(&img, 50, 33, BLACK, 0);
}

#[test]
fn shared_source_eight_visuals_one_texture_uploaded_once() {
    let mut r = renderer();
    let data = Array2::from_shape_fn((32, 32), |(y, x)| (y * 32 + x) as f32 / 1024.0);
    let bytes = 32 * 32 * 4;
    let source = Arc::new(ArraySource::new(data).unwrap());
    let mut scene = Scene::new();
    let maps = Colormap::builtins();
    for i in 0..8 {
        let image = Image::new(source.clone())
            .with_clim(0.0, 1.0 + i as f64)
            .unwrap()
            .with_colormap(maps[i % maps.len()].clone());
        let id = scene.add(image);
        scene.set_transform(
            id,
            Mat4::from_translation(Vec3::new(32.0 * i as f32, 0.0, 0.0)),
        );
    }
    let img = render_pixels(&mut r, &scene, 256, 32);
    let c = r.counters();
    assert_eq!((c.textures_alive, c.textures_created), (1, 1));
    assert_eq!(c.bytes_uploaded, bytes);
    assert_eq!(c.resident_bytes, bytes);
    for i in 0..8u32 {
        let v = (5 * 32 + 7) as f32 / 1024.0;
        let (want, near) = expected_entry(
            &maps[i as usize % maps.len()],
            v,
            [0.0, 1.0 + i as f32],
            1.0,
        );
        let got = img.get_pixel(32 * i + 7, 5).0;
        assert!(
            got == want || Some(got) == near,
            "visual {i}: {got:?} vs {want:?}"
        );
    }
    // Another frame uploads nothing; changing clim and colormap uploads nothing either.
    let before = r.counters();
    render_pixels(&mut r, &scene, 256, 32);
    assert_eq!(r.counters().since(&before).bytes_uploaded, 0);
}

#[test]
fn partial_write_uploads_the_region_and_matches_a_full_upload() {
    let mut r = renderer();
    let data = Array3::from_shape_fn((512, 512, 4), |(y, x, k)| {
        ((x * 3 + y * 5 + k * 50) % 256) as u8
    });
    let source = Arc::new(ArraySource::with_channels(data).unwrap());
    let mut scene = Scene::new();
    scene.add(Image::new(source.clone()));
    render_pixels(&mut r, &scene, 512, 512);
    let before = r.counters();
    let patch = Array3::from_shape_fn((256, 256, 4), |(y, x, k)| {
        ((x ^ y) as u8).wrapping_add(k as u8 * 60) | 1
    });
    source.write(&[128, 192], patch.view()).unwrap();
    let img = render_pixels(&mut r, &scene, 512, 512);
    let d = r.counters().since(&before);
    assert_eq!(
        d.bytes_uploaded,
        256 * 256 * 4,
        "a chunk-aligned 256x256 RGBA8 write uploads exactly its bytes"
    );
    assert_eq!(d.copies_issued, 1, "merged into one copy");
    // A fresh renderer uploads the whole source: the pictures must be identical.
    let mut fresh = renderer();
    let full = render_pixels(&mut fresh, &scene, 512, 512);
    assert_eq!(fresh.counters().bytes_uploaded, 512 * 512 * 4);
    assert!(img == full, "partial update differs from a full upload");
    // RGBA over the black background: colour times alpha.
    let (p, a) = (patch[[10, 20, 0]] as f32, patch[[10, 20, 3]] as f32);
    let want = (p * a / 255.0).round() as u8;
    let got = img.get_pixel(192 + 20, 128 + 10).0[0];
    assert!(got.abs_diff(want) <= 1, "{got} vs {want}");
}

#[test]
fn unaligned_writes_upload_their_chunks_only() {
    let mut r = renderer();
    let source = Arc::new(ArraySource::new(Array2::<u8>::zeros((512, 512))).unwrap());
    let mut scene = Scene::new();
    scene.add(Image::new(source.clone()));
    render_pixels(&mut r, &scene, 512, 512);
    let before = r.counters();
    // One pixel at (70, 130) and a 3x3 patch at (300, 10): two 64x64 chunks.
    source
        .write(&[70, 130], Array2::from_elem((1, 1), 200u8).view())
        .unwrap();
    source
        .write(&[300, 10], Array2::from_elem((3, 3), 100u8).view())
        .unwrap();
    let img = render_pixels(&mut r, &scene, 512, 512);
    let d = r.counters().since(&before);
    assert_eq!(d.bytes_uploaded, 2 * 64 * 64);
    assert_eq!(d.copies_issued, 2);
    assert_pixel(&img, 130, 70, [200, 200, 200, 255], 0);
    assert_pixel(&img, 11, 301, [100, 100, 100, 255], 0);
    assert_pixel(&img, 131, 70, BLACK, 0);
}

#[test]
fn changing_display_settings_uploads_nothing() {
    let mut r = renderer();
    let source = Arc::new(
        ArraySource::new(Array2::from_shape_fn((16, 16), |(y, x)| (x + y) as f32)).unwrap(),
    );
    let mut scene = Scene::new();
    let id = scene.add(Image::new(source));
    render_pixels(&mut r, &scene, 16, 16);
    let before = r.counters();
    let image = scene.image_mut(id).unwrap();
    image.set_clim(0.0, 30.0).unwrap();
    image.set_colormap(Colormap::Plasma);
    image.set_gamma(0.5).unwrap();
    let img = render_pixels(&mut r, &scene, 16, 16);
    // Counters is #[non_exhaustive]: the expected value is the counters now with the upload
    // fields zeroed.
    let mut unchanged = r.counters();
    unchanged.bytes_uploaded = 0;
    unchanged.copies_issued = 0;
    unchanged.textures_created = 0;
    unchanged.staging_buffers_created = 0;
    // No bind group either: the built-in tables and their groups are made with the renderer,
    // and the image's own group stays through the clim, the colormap and the gamma change
    // (the pipeline with the gamma curve compiled in has the same layout).
    unchanged.bind_groups_created = 0;
    // The one frame drawn since, counted where lone images are drawn by compute.
    unchanged.image_draws_by_compute = u64::from(r.image_draw() == sluice::ImageDraw::Compute);
    assert_eq!(r.counters().since(&before), unchanged);
    let (want, near) = expected_entry(&Colormap::Plasma, 10.0, [0.0, 30.0], 0.5);
    let got = img.get_pixel(4, 6).0;
    assert!(got == want || Some(got) == near);
}

#[test]
fn textures_live_from_first_draw_to_last_visual() {
    let mut r = renderer();
    let source = Arc::new(ArraySource::new(Array2::<u16>::zeros((64, 64))).unwrap());
    let mut scene = Scene::new();
    let a = scene.add(Image::new(source.clone()));
    let b = scene.add(Image::new(source.clone()));
    scene.set_visible(a, false);
    scene.set_visible(b, false);
    render_pixels(&mut r, &scene, 8, 8);
    assert_eq!(
        r.counters().textures_created,
        0,
        "a source never drawn is never uploaded"
    );
    scene.set_visible(a, true);
    scene.set_visible(b, true);
    render_pixels(&mut r, &scene, 8, 8);
    assert_eq!(r.counters().textures_alive, 1);
    scene.remove(a);
    assert_eq!(r.counters().textures_alive, 1, "b still shows the source");
    scene.remove(b);
    let c = r.counters();
    assert_eq!((c.textures_alive, c.resident_bytes), (0, 0));
    assert_eq!(
        Arc::strong_count(&source),
        1,
        "the renderer let go of the source"
    );
}

#[test]
fn set_source_switches_and_frees_the_old_texture() {
    let mut r = renderer();
    let a = Arc::new(ArraySource::new(Array2::from_elem((4, 4), 10u8)).unwrap());
    let b = Arc::new(ArraySource::new(Array2::from_elem((4, 4), 240u8)).unwrap());
    let mut scene = Scene::new();
    let id = scene.add(Image::new(a.clone()));
    let img = render_pixels(&mut r, &scene, 4, 4);
    assert_pixel(&img, 1, 1, [10, 10, 10, 255], 0);
    scene.image_mut(id).unwrap().set_source(b.clone());
    let img = render_pixels(&mut r, &scene, 4, 4);
    assert_pixel(&img, 1, 1, [240, 240, 240, 255], 0);
    let c = r.counters();
    assert_eq!((c.textures_alive, c.textures_created), (1, 2));
    assert_eq!(Arc::strong_count(&a), 1);
}

#[test]
fn replacing_with_a_new_shape_recreates_the_texture() {
    let mut r = renderer();
    let source = Arc::new(ArraySource::new(Array2::from_elem((4, 4), 10u8)).unwrap());
    let mut scene = Scene::new();
    scene.add(Image::new(source.clone()));
    render_pixels(&mut r, &scene, 8, 8);
    source
        .replace(Array2::from_shape_fn((8, 8), |(y, _)| y as u8 * 30))
        .unwrap();
    let img = render_pixels(&mut r, &scene, 8, 8);
    assert_pixel(&img, 6, 7, [210, 210, 210, 255], 0);
    assert_eq!(r.counters().resident_bytes, 64);
}

#[test]
fn staging_buffers_are_reused_across_frames() {
    let mut r = renderer();
    let source = Arc::new(ArraySource::with_channels(Array3::<u8>::zeros((256, 256, 4))).unwrap());
    let mut scene = Scene::new();
    scene.add(Image::new(source.clone()));
    let target = r.create_target(64, 64).unwrap();
    let cam = pixel_camera(64, 64);
    for frame in 0..12u8 {
        source
            .update::<u8>(Region::d2(0, 0, 256, 256), |mut v| v.fill(frame))
            .unwrap();
        let _ = r.render(&scene, &cam, &target).unwrap();
        r.wait_idle().unwrap();
    }
    let c = r.counters();
    assert_eq!(c.bytes_uploaded, 12 * 256 * 256 * 4);
    assert!(
        c.staging_buffers_created <= 2,
        "staging buffers created: {}",
        c.staging_buffers_created
    );
}

#[test]
fn upload_budget_spreads_a_large_change_over_frames() {
    let mut options = RendererOptions::from_env().unwrap();
    options.upload_budget = Some(64 * 1024);
    let mut r = Renderer::with_options(options).unwrap();
    let data = Array2::from_shape_fn((256, 256), |(y, x)| ((x + y) % 256) as f32);
    let source = Arc::new(ArraySource::new(data).unwrap());
    let mut scene = Scene::new();
    scene.add(Image::new(source.clone()).with_clim(0.0, 255.0).unwrap());
    let target = r.create_target(256, 256).unwrap();
    let cam = pixel_camera(256, 256);
    // The first upload (256 KiB) is spread too.
    let mut first_frames = 0;
    while r.render(&scene, &cam, &target).unwrap().uploads_pending {
        first_frames += 1;
        assert!(first_frames < 10);
    }
    assert_eq!(first_frames, 3, "256 KiB at 64 KiB per frame is 4 frames");
    // Rewrite three quarters (192 KiB of f32): most chunks are dirty, so the plan is one full
    // copy, which the budget cuts into chunk-row bands.
    source
        .update::<f32>(Region::d2(0, 0, 256, 192), |mut v| {
            v.mapv_inplace(|x| 255.0 - x)
        })
        .unwrap();
    let mut frames = 0;
    loop {
        let stats = r.render(&scene, &cam, &target).unwrap();
        frames += 1;
        assert!(stats.bytes_uploaded <= 64 * 1024);
        if !stats.uploads_pending {
            break;
        }
        assert!(frames < 10, "budgeted uploads never finished");
    }
    assert!(
        frames >= 2,
        "a 192 KiB change within a 64 KiB budget took {frames} frame(s)"
    );
    let img = r.read_image(&target).unwrap();
    let v = 255 - (10 + 20) as u8;
    assert_pixel(&img, 10, 20, [v, v, v, 255], 0);
}

/// An image over the device's texture limit is drawn through the virtual texture (pages of
/// what is in view) instead of being refused (it was `TextureTooLarge` before paging).
#[test]
fn an_image_over_the_texture_limit_is_paged() {
    let mut r = renderer();
    let limit = r.max_texture_dimension_2d() as usize;
    let value = |row: usize, c: usize| (c % 200 + row * 7) as u8;
    let wide = Arc::new(
        ArraySource::new(Array2::from_shape_fn((2, limit + 1), |(row, c)| {
            value(row, c)
        }))
        .unwrap(),
    );
    let mut scene = Scene::new();
    scene.add(Image::new(wide));
    let target = r.create_target(4, 4).unwrap();
    // The last four columns, one sample per pixel; rows 2 and 3 of the target show no data.
    let camera = PanZoomCamera::new(Vec2::new((limit + 1 - 2) as f32, 2.0), 1.0);
    let done = r
        .render_until_complete(&scene, &camera, &target, std::time::Duration::from_secs(60))
        .unwrap();
    assert!(done.complete, "{done:?}");
    let img = r.read_image(&target).unwrap();
    for x in 0..4u32 {
        for y in 0..2u32 {
            let v = value(y as usize, limit - 3 + x as usize);
            assert_pixel(&img, x, y, [v, v, v, 255], 0);
        }
        assert_pixel(&img, x, 3, BLACK, 0);
    }
    // The renderer stays usable.
    let ok = Arc::new(ArraySource::new(Array2::from_elem((4, 4), 99u8)).unwrap());
    let mut scene = Scene::new();
    scene.add(Image::new(ok));
    let img = render_pixels(&mut r, &scene, 4, 4);
    assert_pixel(&img, 0, 0, [99, 99, 99, 255], 0);
}

#[test]
fn bad_visual_parameters_are_clear_errors() {
    let mut r = renderer();
    let source = Arc::new(ArraySource::new(Array2::<f32>::zeros((4, 4))).unwrap());
    let volume = Arc::new(ArraySource::new(Array3::<f32>::zeros((2, 4, 4))).unwrap());
    let target = r.create_target(4, 4).unwrap();
    let cam = pixel_camera(4, 4);
    // Display settings are refused where they are set; a slice that does not fit the source
    // is refused when the frame meets the source.
    let cases: Vec<(Result<Image, RenderError>, &str)> = vec![
        (
            Image::new(source.clone()).with_clim(f64::NAN, 1.0),
            "clim [NaN, 1]",
        ),
        (Image::new(source.clone()).with_gamma(0.0), "gamma 0"),
        (Image::new(source.clone()).with_opacity(2.0), "opacity 2"),
        (
            Ok(Image::new(volume).with_slice(Slice::Z(5))),
            "Z(5) is outside shape (2, 4, 4): 0 to 1 allowed",
        ),
    ];
    for (image, needle) in cases {
        let e = match image {
            Err(e) => e.to_string(),
            Ok(image) => {
                let mut scene = Scene::new();
                scene.add(image);
                r.render(&scene, &cam, &target).unwrap_err().to_string()
            }
        };
        assert!(e.contains(needle), "{e:?} should mention {needle:?}");
    }
    let e = r.create_target(0, 10).unwrap_err().to_string();
    assert!(e.contains("0x10"), "{e}");
}

#[test]
fn a_user_lookup_table_maps_values_to_its_entries() {
    let mut r = renderer();
    // Four entries: t in [0, .25) red, [.25, .5) green, [.5, .75) blue, [.75, 1] white.
    let lut = Colormap::custom(
        "four",
        vec![
            [255, 0, 0, 255],
            [0, 255, 0, 255],
            [0, 0, 255, 255],
            [255, 255, 255, 255],
        ],
    )
    .unwrap();
    let source = Arc::new(
        ArraySource::new(Array2::from_shape_vec((1, 5), vec![0.0f32, 0.3, 0.6, 0.9, 1.0]).unwrap())
            .unwrap(),
    );
    let mut scene = Scene::new();
    scene.add(Image::new(source).with_colormap(lut.clone()));
    let img = render_pixels(&mut r, &scene, 5, 1);
    for (x, entry) in [0usize, 1, 2, 3, 3].into_iter().enumerate() {
        assert_pixel(&img, x as u32, 0, lut.entries()[entry], 0);
    }
}

/// 40 user tables alive at once each draw their own entries, and so do 40 new ones after
/// those were dropped (their GPU tables freed), and a change of a visual's colormap shows the
/// new one in the next frame of the same target (frames redraw only what changed), making no
/// bind group once both tables were shown (each table's group is shared, the visual's kept).
#[test]
fn many_user_lookup_tables_each_draw_their_own_entries() {
    let mut r = renderer();
    let source = Arc::new(
        ArraySource::new(Array2::from_shape_vec((1, 2), vec![0.0f32, 1.0]).unwrap()).unwrap(),
    );
    // Table k: two entries, low and high, distinct for every k and round.
    let table = |round: u8, k: u8| {
        Colormap::custom(
            format!("t{round}-{k}"),
            vec![[k, round, 10, 255], [200 - k, 50 + round, 20, 255]],
        )
        .unwrap()
    };
    for round in 0..2u8 {
        let tables: Vec<Colormap> = (0..40).map(|k| table(round, k)).collect();
        let mut scene = Scene::new();
        for (k, t) in tables.iter().enumerate() {
            let node = scene.add(Image::new(source.clone()).with_colormap(t.clone()));
            scene.set_transform(node, Mat4::from_translation(Vec3::new(0.0, k as f32, 0.0)));
        }
        let img = render(&mut r, &scene, &pixel_camera(2, 40), 2, 40);
        for (k, t) in tables.iter().enumerate() {
            assert_pixel(&img, 0, k as u32, t.entries()[0], 0);
            assert_pixel(&img, 1, k as u32, t.entries()[1], 0);
        }
    }
    // One visual switching between two tables, drawn into one target (frames redraw only
    // what changed): each frame shows the table it has then.
    let (a, b) = (table(7, 1), table(8, 2));
    let mut scene = Scene::new();
    let node = scene.add(Image::new(source.clone()).with_colormap(a.clone()));
    let target = r.create_target(2, 1).unwrap();
    let mut made = Vec::new();
    for t in [&a, &b, &a, &b] {
        let before = r.counters();
        scene.image_mut(node).unwrap().set_colormap(t.clone());
        r.render(&scene, &pixel_camera(2, 1), &target).unwrap();
        let img = r.read_image(&target).unwrap();
        assert_pixel(&img, 0, 0, t.entries()[0], 0);
        assert_pixel(&img, 1, 0, t.entries()[1], 0);
        made.push(r.counters().since(&before).bind_groups_created);
    }
    // The first frame: the image's group and a's table's; the second: b's table's; then none.
    assert_eq!(made, [2, 1, 0, 0]);
}

/// A 4 x 4 RGB source of one colour.
fn solid(rgb: [u8; 3]) -> Arc<ArraySource> {
    Arc::new(
        ArraySource::with_channels(Array3::from_shape_fn((4, 4, 3), |(_, _, c)| rgb[c])).unwrap(),
    )
}

#[test]
fn translucent_images_show_what_is_behind_them() {
    let mut r = renderer();
    // 2-D: a half-transparent red overlay listed before an opaque gray image still lies on
    // top of it (translucent visuals are drawn after opaque ones).
    let mut scene = Scene::new();
    scene.add(Image::new(solid([255, 0, 0])).with_opacity(0.5).unwrap());
    scene.add(Image::new(solid([100, 100, 100])));
    let img = render_pixels(&mut r, &scene, 4, 4);
    assert_pixel(&img, 1, 1, [178, 50, 50, 255], 1);
    // 3-D: a half-transparent red plane in front of an opaque blue one.
    let mut scene = Scene::new();
    let front = scene.add(Image::new(solid([255, 0, 0])).with_opacity(0.5).unwrap());
    scene.set_transform(front, Mat4::from_translation(Vec3::new(0.0, 0.0, 1.0)));
    let back = scene.add(Image::new(solid([0, 0, 255])));
    scene.set_transform(back, Mat4::from_translation(Vec3::new(0.0, 0.0, 3.0)));
    let img = render(&mut r, &scene, &common::Front { n: 4.0 }, 4, 4);
    assert_pixel(&img, 1, 1, [128, 0, 128, 255], 1);
}

#[test]
fn images_at_one_depth_draw_in_order_and_nearer_images_win_otherwise() {
    // A frame of images that all face the camera at one depth skips the depth buffer (a
    // cheaper pass); it must give what the depth test gives: the later image on top.
    let mut r = renderer();
    let mut scene = Scene::new();
    scene.add(Image::new(solid([255, 0, 0])));
    let second = scene.add(Image::new(solid([0, 255, 0])));
    scene.set_transform(second, Mat4::from_translation(Vec3::new(2.0, 0.0, 0.0)));
    let img = render_pixels(&mut r, &scene, 8, 4);
    assert_pixel(&img, 1, 1, [255, 0, 0, 255], 0);
    assert_pixel(&img, 3, 1, [0, 255, 0, 255], 0);
    assert_pixel(&img, 5, 1, [0, 255, 0, 255], 0);
    // At different depths the nearer image wins whatever the order: green (listed second)
    // lies behind red here, so the overlap stays red.
    scene.set_transform(second, Mat4::from_translation(Vec3::new(2.0, 0.0, 3.0)));
    let first = scene.add(Image::new(solid([0, 0, 255])));
    scene.set_transform(first, Mat4::from_translation(Vec3::new(0.0, 4.0, 5.0)));
    let img = render(&mut r, &scene, &common::Front { n: 8.0 }, 8, 8);
    // Front looks along +z at [0, 8]^2 with y down: pixel (x, y) shows world (x + 0.5, y + 0.5).
    assert_pixel(&img, 1, 1, [255, 0, 0, 255], 0);
    assert_pixel(&img, 3, 1, [255, 0, 0, 255], 0);
    assert_pixel(&img, 5, 1, [0, 255, 0, 255], 0);
    // Blue, farthest of all and listed last, shows where nothing else is.
    assert_pixel(&img, 1, 5, [0, 0, 255, 255], 0);
}

#[test]
fn reordering_siblings_changes_which_image_is_on_top_in_the_next_frame() {
    // Two images overlap at pixels 2 and 3; the later sibling draws on top. The same target
    // is drawn again after each reorder with no other change, so the partial redraw must
    // notice the new order on its own.
    let mut r = renderer();
    let mut scene = Scene::new();
    let red = scene.add(Image::new(solid([255, 0, 0])));
    let green = scene.add(Image::new(solid([0, 255, 0])));
    scene.set_transform(green, Mat4::from_translation(Vec3::new(2.0, 0.0, 0.0)));
    assert_eq!((scene.order(red), scene.order(green)), (Some(0), Some(1)));
    let target = r.create_target(8, 4).unwrap();
    let camera = pixel_camera(8, 4);
    r.render(&scene, &camera, &target).unwrap();
    assert_pixel(&r.read_image(&target).unwrap(), 3, 1, [0, 255, 0, 255], 0);
    assert!(scene.set_order(green, 0));
    assert_eq!((scene.order(green), scene.order(red)), (Some(0), Some(1)));
    r.render(&scene, &camera, &target).unwrap();
    let img = r.read_image(&target).unwrap();
    assert_pixel(&img, 3, 1, [255, 0, 0, 255], 0);
    assert_pixel(&img, 5, 1, [0, 255, 0, 255], 0);
    // An index past the end moves it last, on top again; an unknown node is refused.
    assert!(scene.set_order(green, 99));
    assert_eq!(scene.order(green), Some(1));
    r.render(&scene, &camera, &target).unwrap();
    assert_pixel(&r.read_image(&target).unwrap(), 3, 1, [0, 255, 0, 255], 0);
    assert!(scene.remove(red));
    assert!(!scene.set_order(red, 0));
    assert_eq!(scene.order(red), None);
}

#[test]
fn upload_alone_brings_sources_up_to_date_without_drawing() {
    let mut r = renderer();
    let source = Arc::new(ArraySource::new(Array2::from_elem((64, 64), 50u8)).unwrap());
    let mut scene = Scene::new();
    scene.add(Image::new(source.clone()));
    let stats = r.upload(&scene).unwrap();
    assert_eq!((stats.bytes_uploaded, stats.visuals_drawn), (64 * 64, 0));
    // The frame after draws what was uploaded and uploads nothing more.
    let target = r.create_target(64, 64).unwrap();
    let stats = r.render(&scene, &pixel_camera(64, 64), &target).unwrap();
    assert_eq!((stats.bytes_uploaded, stats.visuals_drawn), (0, 1));
    assert_pixel(&r.read_image(&target).unwrap(), 3, 3, [50, 50, 50, 255], 0);
}

/// A source replaced by one over the texture limit moves to the virtual texture, and back to
/// a dense texture when replaced by one that fits (before paging, the middle step was a
/// `TextureTooLarge` error).
#[test]
fn a_replacement_over_the_texture_limit_is_paged_then_dense_again() {
    let mut r = renderer();
    let source = Arc::new(ArraySource::new(Array2::from_elem((4, 4), 9u8)).unwrap());
    let mut scene = Scene::new();
    scene.add(Image::new(source.clone()));
    let target = r.create_target(4, 4).unwrap();
    let cam = pixel_camera(4, 4);
    r.render(&scene, &cam, &target).unwrap();
    let limit = r.max_texture_dimension_2d() as usize;
    source
        .replace(Array2::<u8>::from_elem((2, limit + 1), 33))
        .unwrap();
    for _ in 0..2 {
        let done = r
            .render_until_complete(&scene, &cam, &target, std::time::Duration::from_secs(60))
            .unwrap();
        assert!(done.complete && done.progress.len() == 1, "{done:?}");
        let img = r.read_image(&target).unwrap();
        assert_pixel(&img, 1, 1, [33, 33, 33, 255], 0);
        assert_pixel(&img, 1, 3, BLACK, 0);
    }
    // A fitting replacement recovers.
    source.replace(Array2::from_elem((4, 4), 77u8)).unwrap();
    r.render(&scene, &cam, &target).unwrap();
    assert_pixel(&r.read_image(&target).unwrap(), 1, 1, [77, 77, 77, 255], 0);
}

/// `read_into` fills the caller's buffer with the target's pixels (rows padded on the GPU or
/// not), and refuses a buffer of another length, naming both lengths and leaving it as it was.
#[test]
fn read_into_fills_the_callers_buffer_and_refuses_other_lengths() {
    let mut r = renderer();
    let mut scene = Scene::new();
    scene.add(Image::new(solid([10, 200, 30])));
    // 33 pixels: rows of 132 bytes, padded to 256 in the readback buffer; 64: not padded.
    for (w, h) in [(33u32, 7u32), (64, 5)] {
        let target = r.create_target(w, h).unwrap();
        r.render(&scene, &pixel_camera(w, h), &target).unwrap();
        let mut out = vec![1u8; (w * h * 4) as usize];
        r.read_into(&target, &mut out).unwrap();
        let img = image::RgbaImage::from_raw(w, h, out.clone()).unwrap();
        // The 4 x 4 source covers the top-left 4 x 4 pixels; the background the rest.
        for (x, y) in [(0, 0), (3, 3), (0, 3)] {
            assert_pixel(&img, x, y, [10, 200, 30, 255], 0);
        }
        for (x, y) in [(4, 0), (w - 1, h - 1), (0, 4)] {
            assert_pixel(&img, x, y, BLACK, 0);
        }
        assert_eq!(out, r.read_image(&target).unwrap().into_raw());

        let mut short = vec![9u8; (w * h * 4 - 1) as usize];
        let err = r.read_into(&target, &mut short).unwrap_err().to_string();
        let (needed, got) = (w * h * 4, w * h * 4 - 1);
        assert!(
            err.contains(&format!("{w}x{h}"))
                && err.contains(&format!("needs {needed} bytes"))
                && err.contains(&format!("has {got}")),
            "{err}"
        );
        assert!(
            short.iter().all(|&b| b == 9),
            "the refused buffer was written"
        );
    }
}
