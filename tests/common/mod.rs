//! Shared helpers of the integration tests: a renderer on the adapter the environment picks
//! (never skipping when there is none), rendering to an image, and pixel comparisons.
#![allow(dead_code)]

use sluice::prelude::*;

/// A renderer, or a failed test: rendering tests never skip for want of an adapter.
pub fn renderer() -> Renderer {
    match Renderer::with_options(RendererOptions::from_env().unwrap()) {
        Ok(r) => r,
        Err(e) => panic!("no GPU adapter for the rendering tests: {e}"),
    }
}

/// A camera that maps world (0, 0)..(w, h) onto a w x h target pixel for pixel.
pub fn pixel_camera(w: u32, h: u32) -> PanZoomCamera {
    PanZoomCamera::new(Vec2::new(w as f32 / 2.0, h as f32 / 2.0), 1.0)
}

/// Renders `scene` into a fresh `w` x `h` target and reads it back.
pub fn render(
    renderer: &mut Renderer,
    scene: &Scene,
    camera: &dyn Camera,
    w: u32,
    h: u32,
) -> image::RgbaImage {
    let target = renderer.create_target(w, h).expect("target");
    let _ = renderer.render(scene, camera, &target).expect("render");
    renderer.read_image(&target).expect("read back")
}

/// Renders a scene where world units are target pixels.
pub fn render_pixels(renderer: &mut Renderer, scene: &Scene, w: u32, h: u32) -> image::RgbaImage {
    render(renderer, scene, &pixel_camera(w, h), w, h)
}

/// The colormap entry for value `v` through `clim` and `gamma`, computed on the CPU the way
/// the docs define it, in f32 like the shader. Also returns whether `t * N` lies within 1e-3
/// of an entry boundary (where GPU rounding may pick the neighbour).
pub fn expected_entry(
    cm: &Colormap,
    v: f32,
    clim: [f32; 2],
    gamma: f32,
) -> ([u8; 4], Option<[u8; 4]>) {
    let n = cm.entries().len();
    let t = ((v - clim[0]) / (clim[1] - clim[0])).clamp(0.0, 1.0);
    let t = if gamma != 1.0 && t > 0.0 {
        t.powf(gamma)
    } else {
        t
    };
    let x = t * n as f32;
    let i = (x.floor() as usize).min(n - 1);
    let frac = x - x.floor();
    let neighbour = if frac < 1e-3 && i > 0 {
        Some(cm.entries()[i - 1])
    } else if frac > 1.0 - 1e-3 && i + 1 < n {
        Some(cm.entries()[i + 1])
    } else {
        None
    };
    (cm.entries()[i], neighbour)
}

/// The largest difference of a channel between two pixels.
pub fn pixel_diff(p: &image::Rgba<u8>, q: &image::Rgba<u8>) -> u8 {
    p.0.iter()
        .zip(q.0)
        .map(|(u, v)| u.abs_diff(v))
        .max()
        .unwrap_or(0)
}

/// Asserts each channel of pixel (x, y) is within `tol` of `expected`.
#[track_caller]
pub fn assert_pixel(img: &image::RgbaImage, x: u32, y: u32, expected: [u8; 4], tol: u8) {
    let got = img.get_pixel(x, y).0;
    let ok = got.iter().zip(expected).all(|(&g, e)| g.abs_diff(e) <= tol);
    assert!(
        ok,
        "pixel ({x}, {y}) is {got:?}, expected {expected:?} within {tol}"
    );
}

/// Looks along +z at the box [0, n]^3 from the front, orthographic, one unit per pixel on an
/// n x n target; rows (y) go down the screen, depth (z) grows away from the eye.
pub struct Front {
    pub n: f32,
}

impl Camera for Front {
    fn view_projection(&self, _viewport: [u32; 2]) -> Mat4 {
        let h = self.n / 2.0;
        let view = Mat4::look_to_rh(Vec3::new(h, h, -10.0), Vec3::Z, Vec3::NEG_Y);
        Mat4::orthographic_rh(-h, h, -h, h, 1.0, 10.0 + self.n + 10.0) * view
    }
}

/// Whether pixel (x, y)'s centre lies inside triangle `t` (screen = world x, y under
/// `Front`) by more than a pixel (`Some(true)`), outside by more than one (`Some(false)`), or
/// on an edge (`None`).
pub fn in_triangle(x: u32, y: u32, t: [[f32; 2]; 3]) -> Option<bool> {
    let p = [x as f32 + 0.5, y as f32 + 0.5];
    let area =
        (t[1][0] - t[0][0]) * (t[2][1] - t[0][1]) - (t[1][1] - t[0][1]) * (t[2][0] - t[0][0]);
    let min = (0..3)
        .map(|i| {
            let (a, b) = (t[i], t[(i + 1) % 3]);
            let cross = (b[0] - a[0]) * (p[1] - a[1]) - (b[1] - a[1]) * (p[0] - a[0]);
            cross * area.signum() / (b[0] - a[0]).hypot(b[1] - a[1])
        })
        .fold(f32::INFINITY, f32::min);
    if min > 1.0 {
        Some(true)
    } else if min < -1.0 {
        Some(false)
    } else {
        None
    }
}

/// Pixels inside any of `triangles` (by more than a pixel) are unlit red, pixels outside all
/// of them (by more than a pixel) the black background; edges are not checked.
#[track_caller]
pub fn assert_triangles(img: &image::RgbaImage, triangles: &[[[f32; 2]; 3]]) {
    for y in 0..img.height() {
        for x in 0..img.width() {
            let inside: Vec<_> = triangles.iter().map(|&t| in_triangle(x, y, t)).collect();
            if inside.contains(&Some(true)) {
                assert_pixel(img, x, y, [255, 0, 0, 255], 1);
            } else if inside.iter().all(|&i| i == Some(false)) {
                assert_pixel(img, x, y, [0, 0, 0, 255], 0);
            }
        }
    }
}

/// Every pixel of `img` (a linear gray MIP of `data`, viewed along z by `Front`) equals a CPU
/// march of every sample at `step`: rays along z through voxel centres in x and y, so
/// trilinear is linear along z.
pub fn assert_linear_mip(
    img: &image::RgbaImage,
    data: &sluice::ndarray::Array3<u8>,
    clim: [f32; 2],
    step: f32,
    when: &str,
) {
    let n = data.shape()[0];
    // Samples at z = (i + 0.5) * step before the far face; voxel k's centre is k + 0.5,
    // clamped to the edge.
    let steps = ((n as f32 / step) - 0.5).ceil() as usize;
    for y in 0..n {
        for x in 0..n {
            let at = |k: f32| data[[(k.max(0.0) as usize).min(n - 1), y, x]] as f32;
            let max = (0..steps)
                .map(|i| {
                    let zf = (i as f32 + 0.5) * step - 0.5;
                    let (k, w) = (zf.floor(), zf - zf.floor());
                    at(k) * (1.0 - w) + at(k + 1.0) * w
                })
                .fold(f32::MIN, f32::max);
            let (want, near) = expected_entry(&Colormap::Gray, max, clim, 1.0);
            let got = img.get_pixel(x as u32, y as u32).0;
            // 2 levels: the hardware's filter weights are quantized (lavapipe: to 1/256).
            let close = |e: [u8; 4]| got.iter().zip(e).all(|(&g, e)| g.abs_diff(e) <= 2);
            assert!(
                close(want) || near.is_some_and(close),
                "{when}pixel ({x}, {y}): {got:?}, CPU MIP {max} -> {want:?}"
            );
        }
    }
}

/// A linear MIP of `source` through the gray colormap, with contrast limits `clim` and a
/// step of `step` voxels: what `assert_linear_mip` checks.
pub fn linear_gray_mip(
    source: impl sluice::IntoSource,
    clim: [f32; 2],
    step: f32,
) -> sluice::Volume {
    sluice::Volume::new(source)
        .with_interpolation(Interpolation::Linear)
        .with_clim(clim[0] as f64, clim[1] as f64)
        .unwrap()
        .with_step(step)
        .unwrap()
        .with_colormap(Colormap::Gray)
}

/// The RGBA8 pattern of frame `frame` at pixel `(x, y)`, for the readback tests: every
/// channel changes with the position and the frame.
pub fn frame_pattern(x: usize, y: usize, frame: usize) -> [u8; 4] {
    [
        (x * 3 + y + frame) as u8,
        (y * 5 + 7 * frame) as u8,
        ((x ^ y) + 2 * frame) as u8,
        255,
    ]
}

/// A `height` x `width` RGBA8 image of [`frame_pattern`] (rows, columns, channels).
pub fn frame_data(height: usize, width: usize, frame: usize) -> sluice::ndarray::Array3<u8> {
    sluice::ndarray::Array3::from_shape_fn((height, width, 4), |(y, x, c)| {
        frame_pattern(x, y, frame)[c]
    })
}

/// An interop device on the adapter the environment picks, or a failed test.
#[cfg(target_os = "linux")]
pub fn interop() -> sluice::interop::Interop {
    sluice::interop::Interop::with_options(&RendererOptions::from_env().unwrap())
        .unwrap_or_else(|e| panic!("no Vulkan device with external memory: {e}"))
}
