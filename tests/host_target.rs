//! Targets whose frames are read in host memory (`HostTarget`): on a CPU device (lavapipe)
//! drawn there in place, a linear image in mapped memory; elsewhere copied into a `HostFrame`.
//! Every pixel is compared with the pattern drawn at one texel per pixel (nearest, computed on
//! the CPU), and every frame with an ordinary target of the same scene read by
//! `Renderer::read_into`, tolerance 0 (the same device and pipelines draw both: the same
//! bytes). Odd widths, frames over frames, partial redraws (what a frame keeps of the one
//! before), volumes and meshes (the depth and marched planes made around the texture), the
//! copied path, when the pixels may be looked at, and the errors.
#![cfg(target_os = "linux")]

mod common;

use std::sync::Arc;

use common::{frame_data as data, frame_pattern as pattern, interop, pixel_camera};

use sluice::interop::{HostTarget, Interop, InteropError};
use sluice::prelude::*;
use sluice::RendererOptions;

/// Whether the interop device is a CPU device, where targets are drawn in place.
fn cpu(interop: &Interop) -> bool {
    interop.adapter().get_info().device_type == sluice::wgpu::DeviceType::Cpu
}

/// Checks that `host` is in place on CPU devices and says why not elsewhere.
#[track_caller]
fn assert_in_place_where_it_can(interop: &Interop, host: &HostTarget) {
    if cpu(interop) {
        assert!(host.is_in_place(), "{:?}", host.fallback_reason());
        assert_eq!(host.fallback_reason(), None);
    } else {
        assert!(!host.is_in_place());
        assert!(
            host.fallback_reason().unwrap().contains("across the bus"),
            "{:?}",
            host.fallback_reason()
        );
    }
}

/// Checks every pixel of `host`'s last frame against `expected(x, y)` and its packed bytes
/// against `packed` (an ordinary target's `read_into`).
#[track_caller]
fn assert_frame(host: &HostTarget, expected: impl Fn(usize, usize) -> [u8; 4], packed: &[u8]) {
    let (w, h) = (host.width() as usize, host.height() as usize);
    let bytes = host.bytes().expect("a frame was read");
    assert!(bytes.len() >= host.bytes_per_row() as usize * (h - 1) + w * 4);
    assert!(host.bytes_per_row() as usize >= w * 4);
    for y in 0..h {
        let row = host.row(y as u32).expect("a row inside the frame");
        assert_eq!(row.len(), w * 4);
        for x in 0..w {
            assert_eq!(&row[x * 4..x * 4 + 4], &expected(x, y), "pixel ({x}, {y})");
        }
    }
    assert_eq!(
        host.to_packed().as_deref(),
        Some(packed),
        "the host target and an ordinary target's read_into agree"
    );
    assert!(host.row(h as u32).is_none(), "no row past the last");
}

/// Two sizes (64 wide, and 100 wide whose rows the driver may pad), three frames each: a whole
/// new image, then a 16 x 8 region written (a partial redraw over the frame before, which the
/// target keeps across reads), then a whole image again.
#[test]
fn frames_are_drawn_in_host_memory_as_an_ordinary_target_draws_them() {
    let interop = interop();
    let mut renderer = interop.renderer();
    for (height, width) in [(48usize, 64usize), (37, 100)] {
        let source = Arc::new(ArraySource::with_channels(data(height, width, 0)).unwrap());
        let mut scene = Scene::new();
        scene.add(Image::new(source.clone()));
        let mut host = HostTarget::new(&interop, &renderer, width as u32, height as u32).unwrap();
        assert_in_place_where_it_can(&interop, &host);
        let plain = renderer.create_target(width as u32, height as u32).unwrap();
        let camera = pixel_camera(width as u32, height as u32);
        let mut packed = vec![0u8; width * height * 4];
        let mut draw = |renderer: &mut Renderer, host: &mut HostTarget| {
            host.render(renderer, &scene, &camera).unwrap();
            host.read(renderer).unwrap();
            renderer.render(&scene, &camera, &plain).unwrap();
            renderer.read_into(&plain, &mut packed).unwrap();
            packed.clone()
        };

        let packed0 = draw(&mut renderer, &mut host);
        assert_frame(&host, |x, y| pattern(x, y, 0), &packed0);

        // A region of frame 1 over frame 0: only it is redrawn.
        let region = data(height, width, 1)
            .slice(sluice::ndarray::s![8..16, 4..20, ..])
            .to_owned();
        source.write(&[8, 4], region.view()).unwrap();
        let packed1 = draw(&mut renderer, &mut host);
        let patched = |x: usize, y: usize| {
            let inside = (8..16).contains(&y) && (4..20).contains(&x);
            pattern(x, y, usize::from(inside))
        };
        assert_frame(&host, patched, &packed1);

        source.replace(data(height, width, 2)).unwrap();
        let packed2 = draw(&mut renderer, &mut host);
        assert_frame(&host, |x, y| pattern(x, y, 2), &packed2);
    }
}

/// A volume over a mesh: the target's depth, depth-as-colour and marched planes are made
/// around the texture; the frame equals an ordinary target's byte for byte.
#[test]
fn volumes_and_meshes_draw_into_a_host_target_as_into_an_ordinary_one() {
    let interop = interop();
    let mut renderer = interop.renderer();
    let n = 24usize;
    let volume = Array3::from_shape_fn((n, n, n), |(z, y, x)| {
        let d = [x, y, z].map(|v| v as f32 - n as f32 / 2.0);
        (255.0 - 18.0 * (d[0] * d[0] + d[1] * d[1] + d[2] * d[2]).sqrt()).max(0.0) as u8
    });
    let mut scene = Scene::new();
    scene.add(
        Volume::new(Arc::new(ArraySource::new(volume).unwrap())).with_colormap(Colormap::Viridis),
    );
    let triangle = Array2::from_shape_vec(
        (3, 3),
        vec![0.0f32, 0.0, 12.0, 24.0, 0.0, 12.0, 12.0, 24.0, 12.0],
    )
    .unwrap();
    scene.add(
        sluice::Mesh::new(Arc::new(ArraySource::with_channels(triangle).unwrap()))
            .with_color([1.0, 0.2, 0.1, 1.0]),
    );
    let camera = OrbitCamera::fit(Vec3::ZERO, Vec3::splat(n as f32), 35.0, 25.0);
    let (w, h) = (72u32, 56u32);
    let mut host = HostTarget::new(&interop, &renderer, w, h).unwrap();
    assert_in_place_where_it_can(&interop, &host);
    host.render(&mut renderer, &scene, &camera).unwrap();
    host.read(&renderer).unwrap();
    let plain = renderer.create_target(w, h).unwrap();
    renderer.render(&scene, &camera, &plain).unwrap();
    let mut packed = vec![0u8; (w * h * 4) as usize];
    renderer.read_into(&plain, &mut packed).unwrap();
    let lit = packed.chunks(4).filter(|p| p[3] != 0).count();
    assert!(
        lit > (w * h / 8) as usize,
        "the scene covers the view: {lit} pixels"
    );
    assert_eq!(host.to_packed().as_deref(), Some(&packed[..]));
}

/// The pixels are there between a read and the next render, and only then; a second read
/// with nothing drawn between gives the same frame; the copied target (what a GPU gets) reads
/// the same pixels.
#[test]
fn pixels_are_readable_from_a_read_to_the_next_render_and_copied_targets_agree() {
    let interop = interop();
    let mut renderer = interop.renderer();
    let (height, width) = (20usize, 30usize);
    let source = Arc::new(ArraySource::with_channels(data(height, width, 5)).unwrap());
    let mut scene = Scene::new();
    scene.add(Image::new(source));
    let camera = pixel_camera(width as u32, height as u32);
    let mut host = HostTarget::new(&interop, &renderer, width as u32, height as u32).unwrap();
    let mut copied = HostTarget::copied(&interop, &renderer, width as u32, height as u32).unwrap();
    assert!(!copied.is_in_place());
    assert!(copied.fallback_reason().unwrap().contains("on request"));
    for target in [&mut host, &mut copied] {
        assert_eq!(target.bytes(), None, "nothing read yet");
        target.read(&renderer).unwrap();
        assert!(
            target.bytes().unwrap()[..width * 4].iter().all(|&b| b == 0),
            "a new target reads transparent black"
        );
        target.render(&mut renderer, &scene, &camera).unwrap();
        assert_eq!(target.bytes(), None, "a frame is being drawn");
        assert_eq!(target.row(0), None);
        assert_eq!(target.to_packed(), None);
        target.read(&renderer).unwrap();
        let first = target.to_packed().unwrap();
        target.read(&renderer).unwrap();
        assert_eq!(target.to_packed().unwrap(), first, "read again");
        target.invalidate();
        target.render(&mut renderer, &scene, &camera).unwrap();
        target.read(&renderer).unwrap();
        assert_eq!(target.to_packed().unwrap(), first, "redrawn whole");
    }
    let expected: Vec<u8> = (0..height)
        .flat_map(|y| (0..width).flat_map(move |x| pattern(x, y, 5)))
        .collect();
    assert_eq!(host.to_packed().unwrap(), expected);
    assert_eq!(copied.to_packed().unwrap(), expected);
}

/// A host target may move to and be shared with other threads (Python, render threads).
#[test]
fn a_host_target_is_send_and_sync() {
    fn send_sync<T: Send + Sync>() {}
    send_sync::<HostTarget>();
}

/// Errors name the numbers: no pixels, past the device's limit; a renderer on another device.
#[test]
fn bad_sizes_and_other_devices_are_refused_naming_them() {
    let interop = interop();
    let renderer = interop.renderer();
    let e = HostTarget::new(&interop, &renderer, 0, 16).unwrap_err();
    assert!(e.to_string().contains("0x16"), "{e}");
    let limit = renderer.device().limits().max_texture_dimension_2d;
    let e = HostTarget::new(&interop, &renderer, limit + 1, 4).unwrap_err();
    assert!(
        e.to_string().contains(&format!("{}x4", limit + 1))
            && e.to_string().contains(&limit.to_string()),
        "{e}"
    );

    let other = Renderer::with_options(RendererOptions::from_env().unwrap()).unwrap();
    let e = HostTarget::new(&interop, &other, 8, 8).unwrap_err();
    assert!(
        matches!(e, InteropError::HostFrame { .. }) && e.to_string().contains("device"),
        "{e}"
    );
    let mut host = HostTarget::new(&interop, &renderer, 8, 8).unwrap();
    let e = host.read(&other).unwrap_err();
    assert!(e.to_string().contains("device"), "{e}");
    assert_eq!(host.bytes(), None, "a refused read reads nothing");
}

/// `Renderer::target_on_texture` (what the host target builds on) refuses a texture that
/// cannot be a target's colour texture, naming what differs, and draws into one that can.
#[test]
fn a_target_on_a_texture_made_elsewhere_checks_the_texture() {
    let mut renderer = Renderer::with_options(RendererOptions::from_env().unwrap()).unwrap();
    let device = renderer.device().clone();
    let texture = |format, usage, layers| {
        device.create_texture(&sluice::wgpu::TextureDescriptor {
            label: None,
            size: sluice::wgpu::Extent3d {
                width: 40,
                height: 30,
                depth_or_array_layers: layers,
            },
            mip_level_count: 1,
            sample_count: 1,
            dimension: sluice::wgpu::TextureDimension::D2,
            format,
            usage,
            view_formats: &[],
        })
    };
    use sluice::wgpu::{TextureFormat as F, TextureUsages as U};
    let e = renderer
        .target_on_texture(texture(F::Bgra8Unorm, sluice::TARGET_USAGE, 1))
        .unwrap_err();
    assert!(
        e.to_string().contains("40x30") && e.to_string().contains("Bgra8Unorm"),
        "{e}"
    );
    let e = renderer
        .target_on_texture(texture(F::Rgba8Unorm, U::RENDER_ATTACHMENT, 1))
        .unwrap_err();
    assert!(e.to_string().contains("usage"), "{e}");
    let e = renderer
        .target_on_texture(texture(F::Rgba8Unorm, sluice::TARGET_USAGE, 2))
        .unwrap_err();
    assert!(e.to_string().contains("2 layers"), "{e}");

    let target = renderer
        .target_on_texture(texture(F::Rgba8Unorm, sluice::TARGET_USAGE, 1))
        .unwrap();
    assert_eq!(target.size(), [40, 30]);
    let source = Arc::new(ArraySource::with_channels(data(30, 40, 9)).unwrap());
    let mut scene = Scene::new();
    scene.add(Image::new(source));
    renderer
        .render(&scene, &pixel_camera(40, 30), &target)
        .unwrap();
    let image = renderer.read_image(&target).unwrap();
    for (x, y, p) in image.enumerate_pixels() {
        assert_eq!(p.0, pattern(x as usize, y as usize, 9), "pixel ({x}, {y})");
    }
}

/// A target dropped right after a render that drew nothing (nothing changed since the frame
/// read): the barrier back to drawing, which wgpu does not track, is waited for by the drop,
/// and the device goes on working.
#[test]
fn a_target_dropped_after_a_render_that_drew_nothing_leaves_the_device_working() {
    let interop = interop();
    let mut renderer = interop.renderer();
    let source = Arc::new(ArraySource::with_channels(data(12, 16, 1)).unwrap());
    let mut scene = Scene::new();
    scene.add(Image::new(source));
    let camera = pixel_camera(16, 12);
    for _ in 0..3 {
        let mut host = HostTarget::new(&interop, &renderer, 16, 12).unwrap();
        host.render(&mut renderer, &scene, &camera).unwrap();
        host.read(&renderer).unwrap();
        let stats = host.render(&mut renderer, &scene, &camera).unwrap();
        assert_eq!(stats.visuals_drawn, 0, "nothing changed: nothing drawn");
        drop(host);
    }
    let mut host = HostTarget::new(&interop, &renderer, 16, 12).unwrap();
    host.render(&mut renderer, &scene, &camera).unwrap();
    host.read(&renderer).unwrap();
    let expected: Vec<u8> = (0..12)
        .flat_map(|y| (0..16).flat_map(move |x| pattern(x, y, 1)))
        .collect();
    assert_eq!(host.to_packed().unwrap(), expected);
}
