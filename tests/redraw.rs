//! Partial redraws: a 2-D frame whose scene, camera and settings are as the target last showed
//! them redraws only the screen rectangle of the texels copied since. Every frame here is
//! compared, pixel for pixel (tolerance 0), with the same frame drawn whole into a second
//! target that is invalidated before each frame.

mod common;

use std::sync::Arc;

use common::{pixel_camera, renderer};
use sluice::ndarray::{Array2, Array3};
use sluice::prelude::*;
use sluice::{FrameStats, RenderTarget};

const W: u32 = 120;
const H: u32 = 90;

struct Pair {
    partial: RenderTarget,
    whole: RenderTarget,
}

impl Pair {
    fn new(r: &Renderer) -> Self {
        Pair {
            partial: r.create_target(W, H).unwrap(),
            whole: r.create_target(W, H).unwrap(),
        }
    }

    /// Draws the frame both ways, checks they agree, returns the partial frame's stats.
    fn frame(
        &self,
        r: &mut Renderer,
        scene: &Scene,
        camera: &dyn Camera,
        what: &str,
    ) -> FrameStats {
        let stats = r.render(scene, camera, &self.partial).unwrap();
        self.whole.invalidate();
        let whole_stats = r.render(scene, camera, &self.whole).unwrap();
        assert_eq!(
            whole_stats.pixels_drawn,
            u64::from(W * H),
            "{what}: invalidated"
        );
        let a = r.read_image(&self.partial).unwrap();
        let b = r.read_image(&self.whole).unwrap();
        let differing: Vec<_> = a
            .enumerate_pixels()
            .zip(b.pixels())
            .filter(|((_, _, p), q)| p != q)
            .map(|((x, y, p), q)| (x, y, p.0, q.0))
            .take(5)
            .collect();
        assert!(
            differing.is_empty(),
            "{what}: partial != whole at {differing:?}"
        );
        stats
    }
}

fn scalar(h: usize, w: usize) -> Arc<ArraySource> {
    Arc::new(
        ArraySource::new(Array2::from_shape_fn((h, w), |(y, x)| {
            ((x * 37 + y * 91) % 1000) as u16
        }))
        .unwrap(),
    )
}

#[test]
fn partial_redraws_equal_whole_frames() {
    let mut r = renderer();
    let base = scalar(48, 64);
    let overlay = Arc::new(
        ArraySource::with_channels(Array3::from_shape_fn((20, 30, 4), |(y, x, c)| {
            [200, (x * 8) as u8, (y * 12) as u8, 150][c]
        }))
        .unwrap(),
    );
    let mut scene = Scene::new();
    scene.set_background([0.1, 0.2, 0.3, 1.0]);
    let a = scene.add(
        Image::new(base.clone())
            .with_clim(0.0, 1000.0)
            .unwrap()
            .with_colormap(Colormap::Viridis)
            .with_interpolation(Interpolation::Linear),
    );
    // Scaled 1.5x and moved: texel borders fall between pixels.
    scene.set_transform(
        a,
        Mat4::from_translation(Vec3::new(7.0, 5.0, 0.0))
            * Mat4::from_scale(Vec3::new(1.5, 1.5, 1.0)),
    );
    let b = scene.add(Image::new(overlay.clone()).with_opacity(0.6).unwrap());
    scene.set_transform(b, Mat4::from_translation(Vec3::new(40.0, 30.0, 0.0)));
    let camera = pixel_camera(W, H);
    let pair = Pair::new(&r);
    let whole = u64::from(W * H);

    let first = pair.frame(&mut r, &scene, &camera, "first frame");
    assert_eq!(first.pixels_drawn, whole);

    // Small writes, under the overlay, at edges and corners: a few hundred pixels each.
    for (k, (y, x, h, w)) in [(10, 12, 4, 6), (0, 0, 3, 3), (45, 60, 3, 4), (20, 20, 8, 8)]
        .into_iter()
        .enumerate()
    {
        base.write(
            &[y, x],
            Array2::from_elem((h, w), (k as u16 + 1) * 97).view(),
        )
        .unwrap();
        let stats = pair.frame(&mut r, &scene, &camera, &format!("write {k}"));
        assert!(
            stats.pixels_drawn > 0 && stats.pixels_drawn < whole / 4,
            "write {k}: {} of {whole} pixels redrawn",
            stats.pixels_drawn
        );
    }
    // A write to the translucent overlay.
    overlay
        .write(&[5, 5], Array3::from_elem((3, 3, 4), 255u8).view())
        .unwrap();
    let stats = pair.frame(&mut r, &scene, &camera, "overlay write");
    assert!(stats.pixels_drawn > 0 && stats.pixels_drawn < whole / 4);

    // Nothing changed: nothing drawn, and the target still shows the frame.
    let stats = pair.frame(&mut r, &scene, &camera, "no change");
    assert_eq!((stats.pixels_drawn, stats.visuals_drawn), (0, 0));

    // A change uploaded by `Renderer::upload` before the frame is redrawn by it.
    base.write(&[30, 40], Array2::from_elem((5, 5), 3u16).view())
        .unwrap();
    r.upload(&scene).unwrap();
    let stats = pair.frame(&mut r, &scene, &camera, "after upload()");
    assert!(stats.pixels_drawn > 0 && stats.pixels_drawn < whole / 4);

    // Display settings, camera and background redraw everything.
    scene.image_mut(a).unwrap().set_clim(100.0, 900.0).unwrap();
    let stats = pair.frame(&mut r, &scene, &camera, "clim");
    assert_eq!(stats.pixels_drawn, whole);
    let moved = PanZoomCamera::new(Vec2::new(W as f32 / 2.0 + 3.0, H as f32 / 2.0), 1.0);
    let stats = pair.frame(&mut r, &scene, &moved, "camera");
    assert_eq!(stats.pixels_drawn, whole);
    scene.set_background([0.3, 0.2, 0.1, 1.0]);
    let stats = pair.frame(&mut r, &scene, &moved, "background");
    assert_eq!(stats.pixels_drawn, whole);
    // And a write after them is partial again.
    base.write(&[2, 50], Array2::from_elem((2, 2), 999u16).view())
        .unwrap();
    let stats = pair.frame(&mut r, &scene, &moved, "write after camera");
    assert!(stats.pixels_drawn > 0 && stats.pixels_drawn < whole / 4);
}

#[test]
fn each_target_redraws_what_changed_since_it_was_drawn() {
    // Two targets show one scene; a change drawn into the first must still reach the second.
    let mut r = renderer();
    let source = scalar(32, 32);
    let mut scene = Scene::new();
    scene.add(Image::new(source.clone()).with_clim(0.0, 1000.0).unwrap());
    let camera = pixel_camera(W, H);
    let first = Pair::new(&r);
    let second = Pair::new(&r);
    first.frame(&mut r, &scene, &camera, "first, first frame");
    second.frame(&mut r, &scene, &camera, "second, first frame");
    source
        .write(&[4, 4], Array2::from_elem((3, 3), 500u16).view())
        .unwrap();
    first.frame(&mut r, &scene, &camera, "first after write");
    source
        .write(&[20, 10], Array2::from_elem((2, 2), 800u16).view())
        .unwrap();
    let stats = second.frame(&mut r, &scene, &camera, "second after two writes");
    assert!(stats.pixels_drawn > 0 && stats.pixels_drawn < u64::from(W * H) / 4);
    first.frame(&mut r, &scene, &camera, "first after the second write");
}

#[test]
fn scenes_with_depth_redraw_whole_frames() {
    // Images at different depths (a 3-D scene) take the depth pass: always whole.
    let mut r = renderer();
    let source = scalar(16, 16);
    let mut scene = Scene::new();
    scene.add(Image::new(source.clone()).with_clim(0.0, 1000.0).unwrap());
    let near = scene.add(Image::new(scalar(8, 8)).with_clim(0.0, 1000.0).unwrap());
    scene.set_transform(near, Mat4::from_translation(Vec3::new(0.0, 0.0, 2.0)));
    let camera = common::Front { n: 16.0 };
    let pair = Pair::new(&r);
    pair.frame(&mut r, &scene, &camera, "3-D first");
    source
        .write(&[1, 1], Array2::from_elem((2, 2), 7u16).view())
        .unwrap();
    let stats = pair.frame(&mut r, &scene, &camera, "3-D write");
    assert_eq!(stats.pixels_drawn, u64::from(W * H));
}

#[test]
fn edits_seen_in_two_places_redraw_two_small_rectangles() {
    // One source shown by two images far apart: an edit damages two small rectangles, not
    // the box spanning both.
    let mut r = renderer();
    let source = scalar(32, 32);
    let mut scene = Scene::new();
    scene.add(Image::new(source.clone()).with_clim(0.0, 1000.0).unwrap());
    let right = scene.add(
        Image::new(source.clone())
            .with_clim(200.0, 800.0)
            .unwrap()
            .with_colormap(Colormap::Magma),
    );
    scene.set_transform(right, Mat4::from_translation(Vec3::new(80.0, 40.0, 0.0)));
    let camera = pixel_camera(W, H);
    let pair = Pair::new(&r);
    pair.frame(&mut r, &scene, &camera, "first");
    source
        .write(&[10, 10], Array2::from_elem((4, 4), 999u16).view())
        .unwrap();
    let stats = pair.frame(&mut r, &scene, &camera, "edit");
    // Each rectangle is the 4 x 4 edit, a texel and a pixel around it: 8 x 8 to 9 x 9.
    assert!(
        stats.pixels_drawn > 0 && stats.pixels_drawn <= 2 * 9 * 9,
        "{} pixels redrawn",
        stats.pixels_drawn
    );
}
