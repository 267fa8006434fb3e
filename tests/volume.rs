//! Volumes and slices on a real GPU: ray-marched pixels against CPU ray marches and known
//! geometry.

mod common;

use std::sync::Arc;

use common::{
    assert_linear_mip, assert_pixel, expected_entry, pixel_diff, render, renderer, Front,
};
use sluice::ndarray::Array3;
use sluice::prelude::*;
use sluice::{ChunkGrid, Counters, FlyCamera, OrbitCamera, Slice, Volume, VolumeMode};

const BG: [u8; 4] = [0, 0, 0, 255];

#[test]
fn mip_puts_known_bright_voxels_on_the_expected_pixels() {
    let n = 32;
    let mut data = Array3::<u8>::from_elem((n, n, n), 10);
    // (z, y, x) -> value: the brightest along each ray wins.
    let bright = [
        ((3, 5, 7), 200u8),
        ((20, 5, 7), 120),
        ((30, 25, 2), 90),
        ((0, 31, 31), 255),
    ];
    for &((z, y, x), v) in &bright {
        data[[z, y, x]] = v;
    }
    let source = Arc::new(ArraySource::new(data.clone()).unwrap());
    let mut scene = Scene::new();
    scene.add(
        Volume::new(source)
            .with_interpolation(Interpolation::Nearest)
            .with_colormap(Colormap::Viridis),
    );
    let mut r = renderer();
    let img = render(&mut r, &scene, &Front { n: n as f32 }, n as u32, n as u32);
    for y in 0..n {
        for x in 0..n {
            let max = (0..n).map(|z| data[[z, y, x]]).max().unwrap();
            let (want, near) = expected_entry(&Colormap::Viridis, max as f32, [0.0, 255.0], 1.0);
            let got = img.get_pixel(x as u32, y as u32).0;
            assert!(
                got == want || Some(got) == near,
                "pixel ({x}, {y}): {got:?}, MIP {max} -> {want:?}"
            );
        }
    }
}

/// Linear MIP through sparse data at a step of 0.8 voxel: the grid skips the chunks of
/// samples below the low limit and those that cannot beat the running maximum, and every
/// pixel still equals a CPU march of every sample (rays along z through voxel centres in x
/// and y, so trilinear is linear along z).
#[test]
fn linear_mip_with_skipped_chunks_matches_a_cpu_march() {
    let n = 32usize;
    let (clim, step) = ([40.0f32, 250.0], 0.8f32);
    // Below the low limit except for spikes in four columns, two cells (16 voxels) apart so
    // that no grid cell's range reaches two columns. Rays skip the chunks below the limit and
    // those that cannot beat a spike met before, and must still sample a spike beyond them
    // (26 voxels in after nothing, 27 after a lower one); a chunk reaching further from its
    // cell than the cell's range covers would skip those.
    let mut data = Array3::<u8>::from_elem((n, n, n), 10);
    // ((x, y), [(z, value)]).
    let spikes: [(_, &[(usize, u8)]); 4] = [
        ((5, 9), &[(26, 240)]),
        ((21, 9), &[(3, 150), (20, 120)]),
        ((5, 25), &[(30, 90), (1, 80)]),
        ((21, 25), &[(10, 180), (27, 230)]),
    ];
    for ((x, y), column) in spikes {
        for &(z, v) in column {
            data[[z, y, x]] = v;
        }
    }
    let source = Arc::new(ArraySource::new(data.clone()).unwrap());
    let mut scene = Scene::new();
    scene.add(common::linear_gray_mip(source, clim, step));
    let mut r = renderer();
    let img = render(&mut r, &scene, &Front { n: n as f32 }, n as u32, n as u32);
    assert_linear_mip(&img, &data, clim, step, "");
}

/// Inverted contrast limits (`lo > hi`) invert the colormap: a maximum intensity ray then
/// must not stop at the lower limit, nor take cells below the lower limit for the colormap's
/// first entry. Spikes (the grid marcher) and noise (the marcher without the grid), each
/// pixel against a CPU march.
#[test]
fn inverted_contrast_limits_give_the_cpu_march() {
    let n = 32usize;
    let step = 0.8f32;
    let mut spikes = Array3::<u8>::from_elem((n, n, n), 10);
    for ((x, y), z, v) in [((5, 9), 26, 240), ((21, 9), 3, 150), ((21, 25), 27, 230)] {
        spikes[[z, y, x]] = v;
    }
    let mut seed = 0x9E37_79B9_7F4A_7C15u64;
    let noise = Array3::from_shape_fn((n, n, n), |_| {
        seed ^= seed << 13;
        seed ^= seed >> 7;
        seed ^= seed << 17;
        (seed % 101) as u8
    });
    for (what, data, clim) in [
        ("spikes, ", spikes, [250.0f32, 40.0]),
        ("noise, ", noise, [100.0f32, 0.0]),
    ] {
        let source = Arc::new(ArraySource::new(data.clone()).unwrap());
        let mut scene = Scene::new();
        scene.add(common::linear_gray_mip(source, clim, step));
        let mut r = renderer();
        let img = render(&mut r, &scene, &Front { n: n as f32 }, n as u32, n as u32);
        assert_linear_mip(&img, &data, clim, step, what);
    }
}

/// The grid follows the data however it is uploaded: on a CPU device a whole upload writes
/// the grid computed while the volume was staged, a partial one (one chunk) builds it on
/// the device, as every upload does on a GPU; after each, every pixel equals a CPU march,
/// on data whose spikes only show where the grid holds them (the skipped-chunks case above).
#[test]
fn the_grid_follows_whole_and_partial_updates() {
    let n = 32usize;
    let (clim, step) = ([40.0f32, 250.0], 0.8f32);
    let mut data = Array3::<u8>::from_elem((n, n, n), 10);
    data[[26, 9, 5]] = 240;
    data[[3, 9, 21]] = 150;
    let source = Arc::new(
        ArraySource::new(data.clone())
            .unwrap()
            .with_chunks(ChunkGrid::new(&[16, 16, 16]).unwrap()),
    );
    let mut scene = Scene::new();
    scene.add(common::linear_gray_mip(source.clone(), clim, step));
    let mut r = renderer();
    let cpu = r.adapter_info().device_type == sluice::wgpu::DeviceType::Cpu;
    // (written on the host, built on the device) for a whole upload.
    let whole = if cpu { (1, 0) } else { (0, 1) };
    let grids = |c: Counters| (c.volume_grids_written, c.volume_grids_built);
    let camera = Front { n: n as f32 };

    let before = r.counters();
    let img = render(&mut r, &scene, &camera, n as u32, n as u32);
    assert_eq!(grids(r.counters().since(&before)), whole, "first frame");
    assert_linear_mip(&img, &data, clim, step, "first frame: ");

    // One chunk (z, y, x < 16): a spike where there was none, and one taken away.
    let mut corner = Array3::<u8>::from_elem((16, 16, 16), 10);
    corner[[12, 4, 6]] = 200;
    source.write(&[0, 0, 0], corner.view()).unwrap();
    data.slice_mut(sluice::ndarray::s![..16, ..16, ..16])
        .assign(&corner);
    let before = r.counters();
    let img = render(&mut r, &scene, &camera, n as u32, n as u32);
    let after = r.counters().since(&before);
    assert_eq!(after.bytes_uploaded, 16 * 16 * 16, "one chunk uploaded");
    assert_eq!(grids(after), (0, 1), "a partial upload");
    assert_linear_mip(&img, &data, clim, step, "after one chunk: ");

    // Everything again, the spikes elsewhere.
    data.fill(10);
    data[[30, 28, 27]] = 220;
    data[[7, 17, 2]] = 90;
    source.write(&[0, 0, 0], data.view()).unwrap();
    let before = r.counters();
    let img = render(&mut r, &scene, &camera, n as u32, n as u32);
    assert_eq!(grids(r.counters().since(&before)), whole, "a whole upload");
    assert_linear_mip(&img, &data, clim, step, "after a whole write: ");
}

/// Noise (every value from 0 to 100 in every cell's neighbourhood): the grid could skip no
/// cell, so on a CPU device, where the grid of a whole upload is computed on the host, rays
/// take every sample without looking it up (`volume_marches_without_grid`); the pixels
/// still equal a CPU march. Once a corner holds lower values (cells that a ray with a higher
/// maximum can skip), the grid is looked up again, with the same check. On a GPU the grid
/// is built on the device and always looked up.
#[test]
fn noise_is_marched_without_the_grid_and_a_dim_corner_with_it() {
    let n = 32usize;
    let (clim, step) = ([0.0f32, 255.0], 0.8f32);
    let mut data = noise(n, 0, 100);
    let source = Arc::new(ArraySource::new(data.clone()).unwrap());
    let mut scene = Scene::new();
    scene.add(common::linear_gray_mip(source.clone(), clim, step));
    let mut r = renderer();
    let cpu = r.adapter_info().device_type == sluice::wgpu::DeviceType::Cpu;
    let camera = Front { n: n as f32 };
    let marches = |c: Counters| (c.volume_grids_written, c.volume_marches_without_grid);

    let before = r.counters();
    let img = render(&mut r, &scene, &camera, n as u32, n as u32);
    let plain = if cpu { (1, 1) } else { (0, 0) };
    assert_eq!(marches(r.counters().since(&before)), plain, "noise");
    assert_linear_mip(&img, &data, clim, step, "noise: ");

    // Cell (0, 0, 0) and its neighbours (voxels below 16 on every axis) below 40.
    data.slice_mut(sluice::ndarray::s![..16, ..16, ..16])
        .mapv_inplace(|v| v % 40);
    source.write(&[0, 0, 0], data.view()).unwrap();
    let before = r.counters();
    let img = render(&mut r, &scene, &camera, n as u32, n as u32);
    let grid = if cpu { (1, 0) } else { (0, 0) };
    assert_eq!(marches(r.counters().since(&before)), grid, "a dim corner");
    assert_linear_mip(&img, &data, clim, step, "a dim corner: ");
}

/// Either marcher gives the same pixels in every mode: the same noise drawn after a whole
/// upload (on a CPU device without the grid, where it could skip nothing) and after a
/// partial one (the grid built on the device and looked up), bit for bit. Translucent and
/// isosurface settings are chosen so that no cell can be skipped.
#[test]
fn the_marcher_without_the_grid_draws_what_the_grid_marcher_draws() {
    let n = 32usize;
    let data = noise(n, 20, 200);
    let modes = [
        VolumeMode::Mip,
        VolumeMode::Translucent { attenuation: 0.05 },
        VolumeMode::Iso { threshold: 120.0 },
    ];
    let camera = OrbitCamera::fit(Vec3::ZERO, Vec3::splat(n as f32), 35.0, 25.0);
    for mode in modes {
        let source = Arc::new(
            ArraySource::new(data.clone())
                .unwrap()
                .with_chunks(ChunkGrid::new(&[16, 16, 16]).unwrap()),
        );
        let mut scene = Scene::new();
        scene.add(
            Volume::new(source.clone())
                .with_mode(mode)
                .unwrap()
                .with_clim(10.0, 220.0)
                .unwrap()
                .with_colormap(Colormap::Viridis)
                .with_step(0.7)
                .unwrap(),
        );
        let mut r = renderer();
        let cpu = r.adapter_info().device_type == sluice::wgpu::DeviceType::Cpu;
        let before = r.counters();
        let whole = render(&mut r, &scene, &camera, 64, 48);
        let plain = r.counters().since(&before).volume_marches_without_grid;
        assert_eq!(plain, u64::from(cpu), "{mode:?}: marches without the grid");
        // The same values again, one chunk: built on the device, looked up.
        let corner = data.slice(sluice::ndarray::s![..16, ..16, ..16]).to_owned();
        source.write(&[0, 0, 0], corner.view()).unwrap();
        let before = r.counters();
        let partial = render(&mut r, &scene, &camera, 64, 48);
        let after = r.counters().since(&before);
        assert_eq!(
            (after.volume_grids_built, after.volume_marches_without_grid),
            (1, 0),
            "{mode:?}: a partial upload"
        );
        let lit = whole.pixels().filter(|p| p.0 != BG).count();
        assert!(
            lit > 64 * 48 / 4,
            "{mode:?}: the volume covers {lit} pixels"
        );
        for (x, y, p) in whole.enumerate_pixels() {
            assert_eq!(
                p.0,
                partial.get_pixel(x, y).0,
                "{mode:?}: pixel ({x}, {y}) without the grid and with it"
            );
        }
    }
}

/// `n`^3 u8 values from `lo` to `hi` (inclusive), from a fixed linear congruential sequence.
fn noise(n: usize, lo: u8, hi: u8) -> Array3<u8> {
    let mut state = 12345u32;
    Array3::from_shape_fn((n, n, n), |_| {
        state = state.wrapping_mul(1664525).wrapping_add(1013904223);
        lo + ((state >> 24) % (u32::from(hi - lo) + 1)) as u8
    })
}

#[test]
fn iso_shows_the_known_sphere_radius() {
    let n = 48usize;
    let c = 24.0f32;
    let radius = 15.0f32;
    // Positive inside: radius - distance from the centre (voxel centres at i + 0.5).
    let data = Array3::from_shape_fn((n, n, n), |(z, y, x)| {
        let d = Vec3::new(x as f32 + 0.5 - c, y as f32 + 0.5 - c, z as f32 + 0.5 - c).length();
        radius - d
    });
    let source = Arc::new(ArraySource::new(data).unwrap());
    let mut scene = Scene::new();
    scene.add(
        Volume::new(source)
            .with_mode(VolumeMode::Iso { threshold: 0.0 })
            .unwrap()
            .with_clim(-1.0, 1.0)
            .unwrap()
            .with_colormap(Colormap::Gray),
    );
    let mut r = renderer();
    let img = render(&mut r, &scene, &Front { n: n as f32 }, n as u32, n as u32);
    let surface = expected_entry(&Colormap::Gray, 0.0, [-1.0, 1.0], 1.0).0;
    for y in 0..n {
        for x in 0..n {
            let d = ((x as f32 + 0.5 - c).powi(2) + (y as f32 + 0.5 - c).powi(2)).sqrt();
            let got = img.get_pixel(x as u32, y as u32).0;
            if d < radius - 1.0 {
                assert_ne!(
                    got, BG,
                    "pixel ({x}, {y}) at {d:.2} from the centre is inside the sphere"
                );
            } else if d > radius + 1.0 {
                assert_eq!(
                    got, BG,
                    "pixel ({x}, {y}) at {d:.2} from the centre is outside the sphere"
                );
            }
        }
    }
    // Facing the eye at the centre: full light, the colormap's colour at the threshold.
    assert_pixel(&img, 24, 24, surface, 3);
    // Towards the rim the surface turns away and darkens.
    let rim = img.get_pixel(24 + 13, 24).0[0];
    assert!(
        rim < surface[0] - 20,
        "rim {rim} should be darker than the centre {}",
        surface[0]
    );
}

/// The translucent march against the same march on the CPU, with gamma 1 and with a gamma
/// curve (a marcher compiled with and without `GAMMA_CURVE`; 1.3 keeps every sample's
/// colormap index at least 0.03 entries from an entry boundary).
#[test]
fn translucent_matches_a_cpu_ray_march() {
    let n = 8usize;
    let data = Array3::from_shape_fn((n, n, n), |(z, y, x)| {
        ((x * 7 + y * 13 + z * 29) % 17) as f32 / 16.0
    });
    let source = Arc::new(ArraySource::new(data.clone()).unwrap());
    let attenuation = 0.6f32;
    let step = 0.5f32;
    let cm = Colormap::Magma;
    let mut r = renderer();
    for gamma in [1.0f32, 1.3] {
        let mut scene = Scene::new();
        scene.add(
            Volume::new(source.clone())
                .with_mode(VolumeMode::Translucent { attenuation })
                .unwrap()
                .with_interpolation(Interpolation::Nearest)
                .with_step(step)
                .unwrap()
                .with_colormap(cm.clone())
                .with_gamma(gamma)
                .unwrap(),
        );
        let img = render(&mut r, &scene, &Front { n: n as f32 }, n as u32, n as u32);
        for (x, y) in [(0usize, 0usize), (3, 4), (7, 7), (5, 1)] {
            // The same march on the CPU: samples at z = (i + 0.5) * step, nearest voxel,
            // front-to-back compositing, the value through clim [0, 1] and the gamma curve.
            let (mut color, mut alpha) = ([0.0f32; 3], 0.0f32);
            let mut i = 0;
            loop {
                let z = (i as f32 + 0.5) * step;
                if z >= n as f32 || alpha > 0.995 {
                    break;
                }
                let t = data[[z as usize, y, x]].powf(gamma);
                let e = cm.entries()[((t * 256.0) as usize).min(255)];
                let a = 1.0 - (-attenuation * (e[3] as f32 / 255.0) * t * step).exp();
                for k in 0..3 {
                    color[k] += (1.0 - alpha) * a * e[k] as f32 / 255.0;
                }
                alpha += (1.0 - alpha) * a;
                i += 1;
            }
            // Blended over the black background: the accumulated colour.
            let want = [color[0], color[1], color[2]].map(|c| (c * 255.0).round() as u8);
            assert_pixel(
                &img,
                x as u32,
                y as u32,
                [want[0], want[1], want[2], 255],
                2,
            );
        }
    }
}

#[test]
fn slices_share_the_volume_texture_and_show_its_planes() {
    let n = (12usize, 10usize, 14usize); // (depth, height, width)
    let value = |z: usize, y: usize, x: usize| (z * 20 + y * 3 + x) as u16;
    let data = Array3::from_shape_fn(n, |(z, y, x)| value(z, y, x));
    let source = Arc::new(ArraySource::new(data).unwrap());
    let clim = [0.0, 300.0];
    let mut scene = Scene::new();
    let vol = scene.add(
        Volume::new(source.clone())
            .with_clim(clim[0], clim[1])
            .unwrap(),
    );
    scene.set_visible(vol, false);
    let z = scene.add(
        Image::new(source.clone())
            .with_clim(clim[0], clim[1])
            .unwrap()
            .with_slice(Slice::Z(5)),
    );
    let y = scene.add(
        Image::new(source.clone())
            .with_clim(clim[0], clim[1])
            .unwrap()
            .with_slice(Slice::Y(7)),
    );
    let x = scene.add(
        Image::new(source.clone())
            .with_clim(clim[0], clim[1])
            .unwrap()
            .with_slice(Slice::X(2)),
    );
    // Side by side: Z plane is 14 x 10, Y plane 14 x 12, X plane 10 x 12.
    scene.set_transform(y, Mat4::from_translation(Vec3::new(20.0, 0.0, 0.0)));
    scene.set_transform(x, Mat4::from_translation(Vec3::new(40.0, 0.0, 0.0)));
    let mut r = renderer();
    let cam = common::pixel_camera(60, 20);
    let img = render(&mut r, &scene, &cam, 60, 20);
    let check = |img: &image::RgbaImage, px: u32, py: u32, v: u16| {
        let (want, near) = expected_entry(&Colormap::Gray, v as f32, [0.0, 300.0], 1.0);
        let got = img.get_pixel(px, py).0;
        assert!(
            got == want || Some(got) == near,
            "({px}, {py}): {got:?} vs value {v} -> {want:?}"
        );
    };
    check(&img, 3, 4, value(5, 4, 3));
    check(&img, 20 + 9, 11, value(11, 7, 9));
    check(&img, 40 + 6, 8, value(8, 6, 2));
    let c = r.counters();
    assert_eq!((c.textures_alive, c.bytes_uploaded), (1, 12 * 10 * 14 * 2));

    // The volume joins: still one texture, nothing uploaded; moving slices uploads nothing.
    scene.set_visible(vol, true);
    render(&mut r, &scene, &cam, 60, 20);
    scene.image_mut(z).unwrap().set_slice(Slice::Z(9));
    let img = render(&mut r, &scene, &cam, 60, 20);
    check(&img, 3, 4, value(9, 4, 3));
    let c2 = r.counters();
    assert_eq!(
        (c2.textures_alive, c2.bytes_uploaded),
        (1, c.bytes_uploaded)
    );
}

#[test]
fn an_oblique_slice_shows_the_nearest_voxel_and_leaves_out_what_is_outside_the_data() {
    // A 12 x 10 x 14 volume cut by a tilted plane whose 20 x 16 rectangle reaches past the
    // data on every side: each pixel is the voxel under its centre (nearest), computed here
    // on the CPU, or the background where the centre is outside the data.
    let (d, h, w) = (12usize, 10usize, 14usize);
    let value = |z: usize, y: usize, x: usize| (z * 20 + y * 3 + x) as u16;
    let source = Arc::new(
        ArraySource::new(Array3::from_shape_fn((d, h, w), |(z, y, x)| value(z, y, x))).unwrap(),
    );
    let origin = [-2.25f32, -1.5, 1.3];
    let (u, v) = ([1.0f32, 0.0, 0.0], [0.0f32, 0.6, 0.8]);
    let extent = [20.0f32, 16.0];
    let mut scene = Scene::new();
    scene.add(
        Image::new(source)
            .with_clim(0.0, 300.0)
            .unwrap()
            .with_slice(Slice::Oblique {
                origin,
                u,
                v,
                extent,
            }),
    );
    let mut r = renderer();
    let img = render(&mut r, &scene, &common::pixel_camera(24, 20), 24, 20);
    let size = [w as f32, h as f32, d as f32];
    let (mut inside, mut outside) = (0, 0);
    for py in 0..20u32 {
        for px in 0..24u32 {
            let (a, b) = (px as f32 + 0.5, py as f32 + 0.5);
            let got = img.get_pixel(px, py).0;
            if a > extent[0] || b > extent[1] {
                assert_eq!(got, [0, 0, 0, 255], "({px}, {py}) is off the plane");
                continue;
            }
            let p: [f32; 3] = std::array::from_fn(|i| origin[i] + a * u[i] + b * v[i]);
            // Centres within 1e-3 of a voxel boundary or of the data's edge may go either way.
            if p.iter().any(|c| (c - c.round()).abs() < 1e-3) {
                continue;
            }
            if (0..3).any(|i| p[i] < 0.0 || p[i] > size[i]) {
                assert_eq!(
                    got,
                    [0, 0, 0, 255],
                    "({px}, {py}) at {p:?} is outside the data"
                );
                outside += 1;
                continue;
            }
            let [x, y, z] = p.map(|c| c.floor() as usize);
            let (want, near) =
                expected_entry(&Colormap::Gray, value(z, y, x) as f32, [0.0, 300.0], 1.0);
            assert!(
                got == want || Some(got) == near,
                "({px}, {py}) at {p:?}: {got:?}, want voxel ({z}, {y}, {x}) = {want:?}"
            );
            inside += 1;
        }
    }
    assert!(
        inside > 100 && outside > 50,
        "{inside} pixels inside, {outside} outside"
    );
}

#[test]
fn the_camera_may_be_inside_the_volume() {
    let source = Arc::new(ArraySource::new(Array3::<u8>::from_elem((16, 16, 16), 255)).unwrap());
    let mut scene = Scene::new();
    scene.add(Volume::new(source).with_colormap(Colormap::Gray));
    let mut r = renderer();
    for camera in [
        FlyCamera::new(Vec3::new(8.0, 8.0, 8.0), 0.05, 100.0),
        FlyCamera::new(Vec3::new(1.0, 2.0, 15.0), 0.05, 100.0),
    ] {
        let img = render(&mut r, &scene, &camera, 32, 32);
        for (x, y) in [(0, 0), (16, 16), (31, 31), (5, 27)] {
            assert_pixel(&img, x, y, [255, 255, 255, 255], 0);
        }
    }
    // Outside, perspective: the box covers the middle, not the corners.
    let outside = OrbitCamera::fit(Vec3::ZERO, Vec3::splat(16.0), 30.0, 20.0);
    let img = render(&mut r, &scene, &outside, 64, 64);
    assert_pixel(&img, 32, 32, [255, 255, 255, 255], 0);
    assert_pixel(&img, 0, 0, BG, 0);
}

#[test]
fn opaque_images_hide_the_volume_behind_them() {
    let source = Arc::new(ArraySource::new(Array3::<u8>::from_elem((16, 16, 16), 255)).unwrap());
    let red = Arc::new(
        ArraySource::with_channels(Array3::from_shape_fn((16, 8, 3), |(_, _, c)| {
            if c == 0 {
                255u8
            } else {
                0
            }
        }))
        .unwrap(),
    );
    let mut scene = Scene::new();
    scene.add(Volume::new(source));
    // A red 8 x 16 plane at z = -2 (in front of the volume) over the left half, and one at
    // z = 30 (behind it) over the right half.
    let front = scene.add(Image::new(red.clone()));
    scene.set_transform(front, Mat4::from_translation(Vec3::new(0.0, 0.0, -2.0)));
    let back = scene.add(Image::new(red));
    scene.set_transform(back, Mat4::from_translation(Vec3::new(8.0, 0.0, 30.0)));
    let mut r = renderer();
    let camera = Front { n: 16.0 };
    let img = render(&mut r, &scene, &camera, 16, 16);
    assert_pixel(&img, 3, 8, [255, 0, 0, 255], 0);
    assert_pixel(&img, 12, 8, [255, 255, 255, 255], 0);
}

#[test]
fn bad_volume_input_is_a_clear_error() {
    let mut r = renderer();
    let flat = Arc::new(ArraySource::new(Array2::<f32>::zeros((4, 4))).unwrap());
    let cube = Arc::new(ArraySource::new(Array3::<f32>::zeros((4, 4, 4))).unwrap());
    let rgb = Arc::new(
        ArraySource::with_channels(sluice::ndarray::Array4::<u8>::zeros((2, 2, 2, 3))).unwrap(),
    );
    let target = r.create_target(8, 8).unwrap();
    // The step and the mode's parameters are refused where they are set; sources a volume
    // cannot show, when the frame meets them.
    let cases: Vec<(Result<Volume, RenderError>, &str)> = vec![
        (
            Ok(Volume::new(flat)),
            "shape (4, 4) (2-D); a volume needs 3-D data",
        ),
        (Volume::new(cube.clone()).with_step(0.0), "step 0"),
        (
            Volume::new(cube.clone()).with_mode(VolumeMode::Iso {
                threshold: f64::NAN,
            }),
            "threshold NaN",
        ),
        (
            Volume::new(cube).with_mode(VolumeMode::Translucent { attenuation: -1.0 }),
            "attenuation -1",
        ),
        (Ok(Volume::new(rgb)), "3 channels per voxel"),
    ];
    for (volume, needle) in cases {
        let e = match volume {
            Err(e) => e.to_string(),
            Ok(volume) => {
                let mut scene = Scene::new();
                scene.add(volume);
                r.render(&scene, &Front { n: 4.0 }, &target)
                    .unwrap_err()
                    .to_string()
            }
        };
        assert!(e.contains(needle), "{e:?} should mention {needle:?}");
    }
}

/// Renders `scene` with both renderers and checks the pictures agree within 1 per channel
/// and show enough of the volume to compare.
///
/// Bricked data is always interpolated by hand (eight taps in f32). Where the device filters
/// 32-bit floats (`FLOAT32_FILTERABLE`, NVIDIA's), the whole texture is interpolated by the
/// hardware, whose weights have 8 fractional bits (1/256 of a texel; CUDA's programming guide
/// states this precision for linear filtering), so a sample may differ from the taps' by up to
/// 1/512 of the local value step per axis: enough to cross a colormap entry boundary. On such
/// a GPU (not a CPU device, which filters in f32 like the taps), up to 1 % of the pixels may differ by more than 1, each by at most one colormap entry's
/// step (the largest per-channel difference between neighbouring entries of `colormap`) plus
/// 1.
fn assert_bricked_equals_whole(
    bricked: &mut Renderer,
    whole: &mut Renderer,
    scene: &Scene,
    camera: &dyn Camera,
    colormap: &Colormap,
    what: &str,
) {
    let a = render(bricked, scene, camera, 96, 96);
    let b = render(whole, scene, camera, 96, 96);
    // A CPU device (lavapipe) filters floats in f32, as the taps do: no tolerance there.
    let hardware = whole
        .device()
        .features()
        .contains(sluice::wgpu::Features::FLOAT32_FILTERABLE)
        && whole.adapter_info().device_type != sluice::wgpu::DeviceType::Cpu;
    let entries = colormap.entries();
    let entry_step = entries
        .windows(2)
        .flat_map(|w| (0..3).map(move |c| w[0][c].abs_diff(w[1][c])))
        .max()
        .unwrap_or(0);
    let mut differing = 0;
    for (p, q) in a.pixels().zip(b.pixels()) {
        let d = pixel_diff(p, q);
        if d > 1 {
            differing += 1;
            assert!(
                hardware && d <= entry_step + 1,
                "{what}: pixel {:?} bricked against {:?} whole, {d} apart (hardware filtering: \
                 {hardware}, one colormap entry: {entry_step})",
                p.0,
                q.0
            );
        }
    }
    let allowed = if hardware { 96 * 96 / 100 } else { 0 };
    assert!(
        differing <= allowed,
        "{what}: {differing} pixels differ between bricked and whole (at most {allowed})"
    );
    assert!(
        a.pixels().filter(|p| p.0 != BG).count() > 300,
        "{what} drew too little to compare"
    );
}

#[test]
fn bricked_and_unbricked_volumes_render_the_same() {
    // 40^3 with bricks of at most 24 voxels per axis: 2 x 2 x 2 bricks of 20, meeting at 20.
    let n = 40usize;
    let data = Array3::from_shape_fn((n, n, n), |(z, y, x)| {
        let p = Vec3::new(x as f32, y as f32, z as f32) - Vec3::splat(19.5);
        (12.0 - p.length()) + 0.1 * ((x * 7 + y * 3 + z) % 11) as f32
    });
    let source = Arc::new(ArraySource::new(data).unwrap());
    let mut small = sluice::RendererOptions::from_env().unwrap();
    small.max_texture_dimension_3d = Some(24);
    let mut bricked = Renderer::with_options(small).unwrap();
    let mut whole = renderer();
    let camera = OrbitCamera::fit(Vec3::ZERO, Vec3::splat(n as f32), 35.0, 25.0);
    for mode in [
        VolumeMode::Mip,
        VolumeMode::Translucent { attenuation: 0.5 },
        VolumeMode::Iso { threshold: 0.0 },
    ] {
        let mut scene = Scene::new();
        scene.add(
            Volume::new(source.clone())
                .with_mode(mode)
                .unwrap()
                .with_clim(-5.0, 12.0)
                .unwrap()
                .with_colormap(Colormap::Viridis),
        );
        assert_bricked_equals_whole(
            &mut bricked,
            &mut whole,
            &scene,
            &camera,
            &Colormap::Viridis,
            &format!("{mode:?}"),
        );
        assert_eq!(bricked.counters().textures_alive, 8);
        assert_eq!(whole.counters().textures_alive, 1);
        assert_eq!(
            bricked.counters().resident_bytes,
            whole.counters().resident_bytes
        );
    }

    // Slices across the brick boundary, linear interpolation: identical too.
    let mut scene = Scene::new();
    for (i, slice) in [Slice::Z(20), Slice::Y(19), Slice::X(20)]
        .into_iter()
        .enumerate()
    {
        let id = scene.add(
            Image::new(source.clone())
                .with_slice(slice)
                .with_clim(-5.0, 12.0)
                .unwrap()
                .with_interpolation(Interpolation::Linear),
        );
        scene.set_transform(
            id,
            Mat4::from_translation(Vec3::new(42.0 * i as f32, 0.0, 0.0)),
        );
    }
    let cam = common::pixel_camera(126, 40);
    let a = render(&mut bricked, &scene, &cam, 126, 40);
    let b = render(&mut whole, &scene, &cam, 126, 40);
    assert!(a == b, "bricked slices differ");
}

#[test]
fn a_long_volume_is_bricked_along_its_long_axis_and_too_many_bricks_are_refused() {
    // 60 x 12 x 20 under a limit of 16: 4 x 1 x 2 bricks (z, y, x), 8 in all, any grid.
    let (d, h, w) = (60usize, 12usize, 20usize);
    let data = Array3::from_shape_fn((d, h, w), |(z, y, x)| {
        let p = Vec3::new(x as f32 - 9.5, y as f32 - 5.5, (z as f32 - 29.5) / 3.0);
        (6.0 - p.length()) + 0.1 * ((x * 5 + y * 3 + z) % 7) as f32
    });
    let source = Arc::new(ArraySource::new(data).unwrap());
    let mut small = sluice::RendererOptions::from_env().unwrap();
    small.max_texture_dimension_3d = Some(16);
    let mut bricked = Renderer::with_options(small.clone()).unwrap();
    let mut whole = renderer();
    let camera = OrbitCamera::fit(
        Vec3::ZERO,
        Vec3::new(w as f32, h as f32, d as f32),
        60.0,
        20.0,
    );
    for mode in [VolumeMode::Mip, VolumeMode::Iso { threshold: 1.0 }] {
        let mut scene = Scene::new();
        scene.add(
            Volume::new(source.clone())
                .with_mode(mode)
                .unwrap()
                .with_clim(-5.0, 6.5)
                .unwrap()
                .with_colormap(Colormap::Magma),
        );
        assert_bricked_equals_whole(
            &mut bricked,
            &mut whole,
            &scene,
            &camera,
            &Colormap::Magma,
            &format!("{mode:?}"),
        );
        assert_eq!(bricked.counters().textures_alive, 8);
    }

    // 40^3 under the same limit needs 3 x 3 x 3 = 27 bricks: a clear error, no panic.
    let cube = Arc::new(ArraySource::new(Array3::<u8>::zeros((40, 40, 40))).unwrap());
    let mut scene = Scene::new();
    scene.add(Volume::new(cube));
    let mut r = Renderer::with_options(small).unwrap();
    let target = r.create_target(8, 8).unwrap();
    let e = r.render(&scene, &camera, &target).unwrap_err().to_string();
    for needle in ["[40, 40, 40]", "limit of 16", "27 bricks", "8"] {
        assert!(e.contains(needle), "{e:?} should name {needle}");
    }
}

/// The default step (one sample per voxel along the ray's dominant axis) samples every voxel
/// centre of an axis-aligned ray, so trilinear MIP equals the CPU's maximum along z exactly;
/// an explicit step is honoured (2 voxels: only the odd planes are sampled).
#[test]
fn the_default_step_gives_the_cpu_mip_and_an_explicit_step_is_kept() {
    let n = 24usize;
    let data = Array3::<u8>::from_shape_fn((n, n, n), |(z, y, x)| {
        ((x * 7 + y * 13 + z * 29 + x * z * 3) % 251) as u8
    });
    let source = Arc::new(ArraySource::new(data.clone()).unwrap());
    let default = Volume::new(source.clone()).with_colormap(Colormap::Viridis);
    assert!(default.is_auto_step());
    let explicit = Volume::new(source)
        .with_colormap(Colormap::Viridis)
        .with_interpolation(Interpolation::Nearest)
        .with_step(2.0)
        .unwrap();
    assert!(!explicit.is_auto_step());
    let mut r = renderer();
    for (volume, planes) in [
        (default, (0..n).collect::<Vec<_>>()),
        (explicit, (1..n).step_by(2).collect()),
    ] {
        let mut scene = Scene::new();
        scene.add(volume);
        let img = render(&mut r, &scene, &Front { n: n as f32 }, n as u32, n as u32);
        for y in 0..n {
            for x in 0..n {
                let max = planes.iter().map(|&z| data[[z, y, x]]).max().unwrap();
                let (want, near) =
                    expected_entry(&Colormap::Viridis, max as f32, [0.0, 255.0], 1.0);
                let got = img.get_pixel(x as u32, y as u32).0;
                assert!(
                    got == want || Some(got) == near,
                    "pixel ({x}, {y}) of planes {planes:?}: {got:?}, MIP {max} -> {want:?}"
                );
            }
        }
    }
}

/// An orthographic camera looking along +z at the rectangle [0, w] x [0, h] (y down), one
/// world unit a pixel on a w x h target.
struct FrontRect {
    w: f32,
    h: f32,
}

impl Camera for FrontRect {
    fn view_projection(&self, _viewport: [u32; 2]) -> sluice::glam::Mat4 {
        use sluice::glam::{Mat4, Vec3};
        let (hw, hh) = (self.w / 2.0, self.h / 2.0);
        let view = Mat4::look_to_rh(Vec3::new(hw, hh, -10.0), Vec3::Z, Vec3::NEG_Y);
        Mat4::orthographic_rh(-hw, hw, -hh, hh, 1.0, 100.0) * view
    }
}

/// A target of several 64 x 64 tiles of rays with ragged last ones (150 x 90 pixels: tiles
/// 64, 64 and 22 wide, 64 and 26 high): every pixel shows the MIP of its own column of
/// voxels, so no ray is lost or marched twice by the tiled order of the marcher's workgroups.
#[test]
fn every_pixel_of_a_target_of_several_ray_tiles_gets_its_own_ray() {
    let (w, h, d) = (150usize, 90usize, 5usize);
    let data = Array3::<u8>::from_shape_fn((d, h, w), |(z, y, x)| {
        ((x * 7 + y * 13 + z * 29) as u32)
            .wrapping_mul(2_654_435_761)
            .rotate_left(8) as u8
    });
    let source = Arc::new(ArraySource::new(data.clone()).unwrap());
    let mut scene = Scene::new();
    scene.add(
        Volume::new(source)
            .with_interpolation(Interpolation::Nearest)
            .with_colormap(Colormap::Gray),
    );
    let mut r = renderer();
    let camera = FrontRect {
        w: w as f32,
        h: h as f32,
    };
    let img = render(&mut r, &scene, &camera, w as u32, h as u32);
    for y in 0..h {
        for x in 0..w {
            let max = (0..d).map(|z| data[[z, y, x]]).max().unwrap();
            let (want, near) = expected_entry(&Colormap::Gray, max as f32, [0.0, 255.0], 1.0);
            let got = img.get_pixel(x as u32, y as u32).0;
            assert!(
                got == want || Some(got) == near,
                "pixel ({x}, {y}): {got:?}, MIP {max} -> {want:?}"
            );
        }
    }
}

/// On a CPU device a linear 8-bit volume is marched through its z-paired copy (one bilinear
/// sample of a layer and a lerp along z, `RendererOptions::volume_pairs`), kept up to date
/// through every change: written from the host while a whole volume is staged (the first
/// upload too, the copy being made before it), built on the device after a partial write or
/// where the volume is added over a texture another visual uploaded (each build counted
/// once); a renderer with the option off marches the 3-D texture.
/// Both draw the same pixels within 1 level per channel (lavapipe interpolates 8-bit texels
/// with weights and results rounded to 8 bits; the paired lerp along z is in f32, so a sample
/// may differ by about a data level, here 1 of 255), from an oblique view of a volume whose copy
/// takes several slabs of the build (300 x 300 x 40: 18 planes a slab), so that each slab's
/// last plane is paired with the next slab's first. Nearest sampling never pairs, nor do GPUs.
/// (On a CPU device the tests that check linear u8 marches against the CPU, such as
/// `the_grid_follows_whole_and_partial_updates`, march the paired copy too.)
#[test]
fn an_8_bit_volume_is_marched_through_its_z_paired_copy_on_cpu_devices() {
    let (w, h, d) = (300usize, 300usize, 40usize);
    // Smooth in x and y with a ripple along z, and a little noise, from 0 to 255.
    let data = Array3::from_shape_fn((d, h, w), |(z, y, x)| {
        let base = 90.0
            + 60.0 * ((x as f32 / 23.0).sin() * (y as f32 / 31.0).cos())
            + 40.0 * (z as f32 * 0.9).sin();
        (base + ((x * 7 + y * 13 + z * 5) % 17) as f32).clamp(0.0, 255.0) as u8
    });
    let source = Arc::new(
        ArraySource::new(data.clone())
            .unwrap()
            .with_chunks(ChunkGrid::new(&[8, 150, 150]).unwrap()),
    );
    let mut paired = renderer();
    let cpu = paired.adapter_info().device_type == sluice::wgpu::DeviceType::Cpu;
    let mut options = sluice::RendererOptions::from_env().unwrap();
    options.volume_pairs = false;
    let mut plain = Renderer::with_options(options).unwrap();
    let camera = OrbitCamera::fit(
        Vec3::ZERO,
        Vec3::new(w as f32, h as f32, d as f32),
        35.0,
        25.0,
    );
    // (built on the device, written from the host, marches through the copy).
    let counts = |c: Counters| {
        (
            c.volume_pairs_built,
            c.volume_pairs_written,
            c.volume_marches_paired,
        )
    };
    let (size_w, size_h) = (96, 80);
    let compare = |a: &image::RgbaImage, b: &image::RgbaImage, what: &str| {
        let lit = a.pixels().filter(|p| p.0 != BG).count();
        assert!(lit > 96 * 80 / 4, "{what}: the volume covers {lit} pixels");
        for (x, y, p) in a.enumerate_pixels() {
            let q = b.get_pixel(x, y).0;
            assert!(
                p.0.iter().zip(q).all(|(&s, t)| s.abs_diff(t) <= 1),
                "{what}: pixel ({x}, {y}) paired {:?}, 3-D texture {q:?}",
                p.0
            );
        }
    };
    for mode in [
        VolumeMode::Mip,
        VolumeMode::Translucent { attenuation: 0.02 },
    ] {
        let mut scene = Scene::new();
        scene.add(
            Volume::new(source.clone())
                .with_mode(mode)
                .unwrap()
                .with_clim(0.0, 255.0)
                .unwrap()
                .with_colormap(Colormap::Gray)
                .with_step(0.8)
                .unwrap(),
        );
        let before = paired.counters();
        let a = render(&mut paired, &scene, &camera, size_w, size_h);
        let first = counts(paired.counters().since(&before));
        let before_plain = plain.counters();
        let b = render(&mut plain, &scene, &camera, size_w, size_h);
        assert_eq!(counts(plain.counters().since(&before_plain)), (0, 0, 0));
        compare(&a, &b, &format!("{mode:?}"));
        // Each scene's volume is the only user of its texture, which is uploaded again for
        // it: the copy is made before that first (whole) upload, which writes it.
        assert_eq!(
            first,
            if cpu { (0, 1, 1) } else { (0, 0, 0) },
            "{mode:?}: first frame"
        );
        let before = paired.counters();
        let again = render(&mut paired, &scene, &camera, size_w, size_h);
        let unchanged = counts(paired.counters().since(&before));
        assert_eq!(
            unchanged,
            if cpu { (0, 0, 1) } else { (0, 0, 0) },
            "{mode:?}: no change"
        );
        assert!(again == a, "{mode:?}: the same frame again");
    }

    // One chunk rewritten (planes 8 to 15, a quarter of x and y): built again, and both
    // renderers still agree.
    let mut scene = Scene::new();
    scene.add(
        Volume::new(source.clone())
            .with_mode(VolumeMode::Mip)
            .unwrap()
            .with_clim(0.0, 255.0)
            .unwrap()
            .with_colormap(Colormap::Gray)
            .with_step(0.8)
            .unwrap(),
    );
    render(&mut paired, &scene, &camera, size_w, size_h);
    render(&mut plain, &scene, &camera, size_w, size_h);
    let patch = Array3::from_shape_fn((8, 150, 150), |(z, y, x)| {
        ((x + 2 * y + 31 * z) % 256) as u8
    });
    source.write(&[8, 0, 0], patch.view()).unwrap();
    let before = paired.counters();
    let a = render(&mut paired, &scene, &camera, size_w, size_h);
    let after = paired.counters().since(&before);
    assert_eq!(after.bytes_uploaded, 8 * 150 * 150, "one chunk uploaded");
    assert_eq!(
        counts(after),
        if cpu { (1, 0, 1) } else { (0, 0, 0) },
        "after one chunk"
    );
    let b = render(&mut plain, &scene, &camera, size_w, size_h);
    compare(&a, &b, "after one chunk");

    // A whole write: the host writes the copy while it stages the volume, nothing is built.
    let mut whole = data.clone();
    whole.mapv_inplace(|v| v.saturating_add(20));
    source.write(&[0, 0, 0], whole.view()).unwrap();
    let before = paired.counters();
    let a = render(&mut paired, &scene, &camera, size_w, size_h);
    let after = paired.counters().since(&before);
    assert_eq!(
        after.bytes_uploaded,
        (w * h * d) as u64,
        "the whole volume uploaded"
    );
    assert_eq!(
        counts(after),
        if cpu { (0, 1, 1) } else { (0, 0, 0) },
        "after a whole write"
    );
    let pair_bytes = if cpu { 2 * (w * h * d) as u64 } else { 0 };
    assert_eq!(
        after.derived_bytes_uploaded, pair_bytes,
        "the pairs uploaded"
    );
    let b = render(&mut plain, &scene, &camera, size_w, size_h);
    compare(&a, &b, "after a whole write");

    // A volume added over a texture another visual already uploaded: its copy is made with
    // no upload to write it, so it is built on the device, once.
    let other = Arc::new(ArraySource::new(data.clone()).unwrap());
    let mut scene = Scene::new();
    scene.add(Image::new(other.clone()).with_slice(Slice::Z(5)));
    render(&mut paired, &scene, &camera, size_w, size_h);
    scene.add(
        Volume::new(other.clone())
            .with_mode(VolumeMode::Mip)
            .unwrap()
            .with_clim(0.0, 255.0)
            .unwrap()
            .with_colormap(Colormap::Gray)
            .with_step(0.8)
            .unwrap(),
    );
    for (frame, want) in [(1, (1, 0, 1)), (2, (0, 0, 1))] {
        let before = paired.counters();
        let a = render(&mut paired, &scene, &camera, size_w, size_h);
        let after = paired.counters().since(&before);
        let b = render(&mut plain, &scene, &camera, size_w, size_h);
        compare(&a, &b, &format!("frame {frame} over an uploaded texture"));
        assert_eq!(
            after.bytes_uploaded, 0,
            "frame {frame} over an uploaded texture"
        );
        let want = if cpu { want } else { (0, 0, 0) };
        assert_eq!(
            counts(after),
            want,
            "frame {frame} over an uploaded texture"
        );
    }
    // Then a partial write: built again, reported again.
    other.write(&[0, 0, 0], patch.view()).unwrap();
    let before = paired.counters();
    let a = render(&mut paired, &scene, &camera, size_w, size_h);
    let b = render(&mut plain, &scene, &camera, size_w, size_h);
    compare(&a, &b, "a partial write after");
    let want = if cpu { (1, 0, 1) } else { (0, 0, 0) };
    assert_eq!(
        counts(paired.counters().since(&before)),
        want,
        "a partial write after"
    );

    // Nearest samples read the 3-D texture.
    let mut scene = Scene::new();
    scene.add(
        Volume::new(source.clone())
            .with_mode(VolumeMode::Mip)
            .unwrap()
            .with_interpolation(Interpolation::Nearest),
    );
    let before = paired.counters();
    render(&mut paired, &scene, &camera, size_w, size_h);
    assert_eq!(
        counts(paired.counters().since(&before)),
        (0, 0, 0),
        "nearest"
    );
}

/// The paired copy follows the texture through what happens around it: a volume switched to
/// nearest while its source is replaced by data of another shape (a new texture), then back
/// to linear, marches the copy of the new data (pixels against a renderer that does not
/// pair, within 1 level: one data level, as in the test above); a nearest volume sharing the source with a linear one leaves the
/// host-written copy to it (written, not built again); and once no linear volume uses the
/// copy, whole uploads stop writing it.
#[test]
fn the_paired_copy_follows_replacements_and_its_users() {
    let make = |n: usize, seed: usize| {
        Array3::from_shape_fn((n, n + 3, n + 5), |(z, y, x)| {
            (40.0
                + 30.0 * ((x + seed) as f32 / 7.0).sin()
                + 25.0 * ((z * 3 + y) as f32 / 5.0).cos()) as u8
        })
    };
    let source = Arc::new(ArraySource::new(make(24, 0)).unwrap());
    let mut paired = renderer();
    let cpu = paired.adapter_info().device_type == sluice::wgpu::DeviceType::Cpu;
    let mut options = sluice::RendererOptions::from_env().unwrap();
    options.volume_pairs = false;
    let mut plain = Renderer::with_options(options).unwrap();
    let camera = OrbitCamera::fit(Vec3::ZERO, Vec3::splat(32.0), 35.0, 25.0);
    let counts = |c: Counters| {
        (
            c.volume_pairs_built,
            c.volume_pairs_written,
            c.volume_marches_paired,
        )
    };
    let agree = |a: &image::RgbaImage, b: &image::RgbaImage, what: &str| {
        assert!(
            a.pixels().filter(|p| p.0 != BG).count() > 64 * 48 / 8,
            "{what}: covered"
        );
        for (x, y, p) in a.enumerate_pixels() {
            let q = b.get_pixel(x, y).0;
            assert!(
                p.0.iter().zip(q).all(|(&s, t)| s.abs_diff(t) <= 1),
                "{what}: pixel ({x}, {y}) paired {:?}, 3-D texture {q:?}",
                p.0
            );
        }
    };
    let mut scene = Scene::new();
    let id = scene.add(
        Volume::new(source.clone())
            .with_clim(0.0, 255.0)
            .unwrap()
            .with_step(0.8)
            .unwrap(),
    );
    let a = render(&mut paired, &scene, &camera, 64, 48);
    agree(&a, &render(&mut plain, &scene, &camera, 64, 48), "first");

    // Nearest, and new data of another shape: a new texture while nothing marches the copy.
    scene
        .volume_mut(id)
        .unwrap()
        .set_interpolation(Interpolation::Nearest);
    source.replace(make(30, 11)).unwrap();
    render(&mut paired, &scene, &camera, 64, 48);
    render(&mut plain, &scene, &camera, 64, 48);
    scene
        .volume_mut(id)
        .unwrap()
        .set_interpolation(Interpolation::Linear);
    let before = paired.counters();
    let a = render(&mut paired, &scene, &camera, 64, 48);
    let after = counts(paired.counters().since(&before));
    assert_eq!(
        after,
        if cpu { (1, 0, 1) } else { (0, 0, 0) },
        "back to linear"
    );
    agree(
        &a,
        &render(&mut plain, &scene, &camera, 64, 48),
        "back to linear",
    );

    // A nearest volume before the linear one, on the same source: the whole write's copy is
    // the linear one's to take.
    let mut both = Scene::new();
    both.add(
        Volume::new(source.clone())
            .with_interpolation(Interpolation::Nearest)
            .with_opacity(0.0)
            .unwrap(),
    );
    both.add(
        Volume::new(source.clone())
            .with_clim(0.0, 255.0)
            .unwrap()
            .with_step(0.8)
            .unwrap(),
    );
    render(&mut paired, &both, &camera, 64, 48);
    source.replace(make(30, 23)).unwrap();
    let before = paired.counters();
    let a = render(&mut paired, &both, &camera, 64, 48);
    let after = counts(paired.counters().since(&before));
    assert_eq!(
        after,
        if cpu { (0, 1, 1) } else { (0, 0, 0) },
        "nearest first"
    );
    agree(
        &a,
        &render(&mut plain, &both, &camera, 64, 48),
        "nearest first",
    );

    // Only nearest volumes left: after a few renders the copy goes, and whole uploads stop
    // writing it.
    drop(both);
    scene
        .volume_mut(id)
        .unwrap()
        .set_interpolation(Interpolation::Nearest);
    for _ in 0..10 {
        render(&mut paired, &scene, &camera, 64, 48);
    }
    source.replace(make(30, 5)).unwrap();
    let before = paired.counters();
    render(&mut paired, &scene, &camera, 64, 48);
    let after = paired.counters().since(&before);
    assert_eq!(after.bytes_uploaded, 30 * 33 * 35, "the volume uploaded");
    assert_eq!(after.derived_bytes_uploaded, 0, "no pairs written");
}
