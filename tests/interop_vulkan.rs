//! Vulkan external memory on a real driver (Mesa's lavapipe in CI): memory one device exports
//! is imported by another, drawn, and the pixels compared with the bytes written. These tests
//! never skip: a driver without `VK_KHR_external_memory_fd` fails them.
#![cfg(target_os = "linux")]

mod common;

use std::sync::Arc;
use std::time::Duration;

use common::{assert_pixel, assert_triangles, render, render_pixels, Front};
use sluice::interop::{Interop, InteropError, Pitches, VulkanSource};
use sluice::prelude::*;
use sluice::{Mesh, RendererOptions, Shading, TimelineSemaphore, Volume};

fn interop() -> Interop {
    Interop::with_options(&RendererOptions::from_env().unwrap())
        .unwrap_or_else(|e| panic!("no Vulkan device with external memory: {e}"))
}

/// An `Interop` on a device of its own (not the adapter's shared one): memory one device
/// exports and another imports goes between two devices.
fn own_interop() -> Interop {
    let interop = Interop::with_own_device(&RendererOptions::from_env().unwrap())
        .unwrap_or_else(|e| panic!("no Vulkan device with external memory: {e}"));
    assert!(interop.device() != self::interop().device());
    interop
}

fn rgba_layout(height: usize, width: usize) -> Layout {
    Layout::new(Shape::d2(height, width).unwrap(), ElementType::U8, 4).unwrap()
}

/// The colour the test producers write at (x, y) of frame `frame`.
fn pattern(x: usize, y: usize, frame: usize) -> [u8; 4] {
    [
        (x * 3 + y + frame) as u8,
        (y * 5 + 7) as u8,
        ((x ^ y) + 2 * frame) as u8,
        255,
    ]
}

/// The bytes of frame `frame` of `layout` at `pitches` from byte `offset`, with every byte
/// outside the samples set to 0xAB (so a copy that reads padding shows it).
fn frame_bytes(layout: &Layout, pitches: Pitches, offset: usize, frame: usize) -> Vec<u8> {
    let shape = layout.shape();
    let mut bytes = vec![0xAB; offset + pitches.span(layout) as usize];
    for y in 0..shape.height() {
        for x in 0..shape.width() {
            let at = offset + y * pitches.row + x * 4;
            bytes[at..at + 4].copy_from_slice(&pattern(x, y, frame));
        }
    }
    // Buffer writes are whole words.
    bytes.resize(bytes.len().next_multiple_of(4), 0xAB);
    bytes
}

/// Writes `bytes` into `buffer` with the producer's own queue and waits for it: without
/// shared semaphores the producer finishes its GPU work before publishing.
fn produce(producer: &Interop, buffer: &wgpu::Buffer, bytes: &[u8]) {
    producer.queue().write_buffer(buffer, 0, bytes);
    producer.queue().submit([]);
    producer
        .device()
        .poll(wgpu::PollType::wait_indefinitely())
        .unwrap();
}

#[track_caller]
fn assert_frame(img: &image::RgbaImage, frame: usize) {
    for y in 0..img.height() {
        for x in 0..img.width() {
            assert_pixel(img, x, y, pattern(x as usize, y as usize, frame), 0);
        }
    }
}

#[test]
fn memory_exported_by_one_device_renders_on_another() {
    let producer = interop();
    let display = own_interop();
    assert_eq!(producer.device_uuid(), display.device_uuid());
    // 60 RGBA8 columns: 240-byte rows, padded to 256; taller than one 64-row chunk.
    let layout = rgba_layout(160, 60);
    let pitches = Pitches::aligned(&layout);
    assert_eq!(pitches.row, 256);
    let exported = producer.export_buffer(pitches.span(&layout)).unwrap();
    produce(
        &producer,
        exported.buffer(),
        &frame_bytes(&layout, pitches, 0, 0),
    );

    let source = Arc::new(VulkanSource::new(layout, exported.memory(0, pitches).unwrap()).unwrap());
    let mut renderer = display.renderer();
    // A budget smaller than the frame does not split a GPU-side copy over frames (a later
    // frame could copy the rest from newer data).
    renderer.set_upload_budget(Some(1024));
    let mut scene = Scene::new();
    scene.add(Image::new(source.clone()));
    let img = render_pixels(&mut renderer, &scene, 60, 160);
    assert_frame(&img, 0);
    let counters = renderer.counters();
    assert_eq!(
        counters.bytes_uploaded, 0,
        "nothing went through host staging"
    );
    assert_eq!(counters.copies_issued, 1);
}

#[test]
fn new_frames_are_copied_once_each_after_publish() {
    let producer = interop();
    let display = own_interop();
    let layout = rgba_layout(16, 64);
    let pitches = Pitches::aligned(&layout);
    let exported = producer.export_buffer(pitches.span(&layout)).unwrap();
    let source =
        Arc::new(VulkanSource::new(layout.clone(), exported.memory(0, pitches).unwrap()).unwrap());
    let mut renderer = display.renderer();
    let mut scene = Scene::new();
    scene.add(Image::new(source.clone()));
    for frame in 0..3 {
        produce(
            &producer,
            exported.buffer(),
            &frame_bytes(&layout, pitches, 0, frame),
        );
        source.publish();
        let img = render_pixels(&mut renderer, &scene, 64, 16);
        assert_frame(&img, frame);
        // Unpublished writes are not copied: the frame shown stays whole.
        let before = renderer.counters().copies_issued;
        render_pixels(&mut renderer, &scene, 64, 16);
        assert_eq!(renderer.counters().copies_issued, before, "frame {frame}");
    }
}

#[test]
fn unaligned_pitches_and_offsets_are_copied_row_by_row() {
    let producer = interop();
    let display = own_interop();
    let layout = rgba_layout(20, 30);
    // 120-byte rows 132 bytes apart, starting 8 bytes in: nothing is 256-aligned.
    let pitches = Pitches {
        row: 132,
        plane: 132 * 20,
    };
    let offset = 8;
    let exported = producer
        .export_buffer(offset as u64 + pitches.span(&layout))
        .unwrap();
    produce(
        &producer,
        exported.buffer(),
        &frame_bytes(&layout, pitches, offset, 5),
    );
    let source =
        VulkanSource::new(layout, exported.memory(offset as u64, pitches).unwrap()).unwrap();
    let mut renderer = display.renderer();
    let mut scene = Scene::new();
    scene.add(Image::new(Arc::new(source)));
    let img = render_pixels(&mut renderer, &scene, 30, 20);
    assert_frame(&img, 5);
}

#[test]
fn a_renderer_reads_memory_its_own_device_exported() {
    let interop = interop();
    let layout = Layout::new(Shape::d2(8, 128).unwrap(), ElementType::U16, 1).unwrap();
    let pitches = Pitches::aligned(&layout);
    let exported = interop.export_buffer(pitches.span(&layout)).unwrap();
    let values: Vec<u16> = (0..8 * 128).map(|i| (i % 128) as u16 * 500).collect();
    let mut bytes = vec![0u8; pitches.span(&layout) as usize];
    for (i, v) in values.iter().enumerate() {
        let at = (i / 128) * pitches.row + (i % 128) * 2;
        bytes[at..at + 2].copy_from_slice(&v.to_le_bytes());
    }
    produce(&interop, exported.buffer(), &bytes);
    let source = VulkanSource::new(layout, exported.memory(0, pitches).unwrap()).unwrap();
    let mut renderer = interop.renderer();
    let mut scene = Scene::new();
    scene.add(
        Image::new(Arc::new(source))
            .with_clim(0.0, 63500.0)
            .unwrap(),
    );
    let img = render_pixels(&mut renderer, &scene, 128, 8);
    for x in 0..128u32 {
        let (want, near) =
            common::expected_entry(&Colormap::Gray, x as f32 * 500.0, [0.0, 63500.0], 1.0);
        let got = img.get_pixel(x, 3).0;
        assert!(
            got == want || Some(got) == near,
            "column {x}: {got:?} vs {want:?}"
        );
    }
}

#[test]
fn memory_smaller_than_the_layout_is_refused_with_its_sizes() {
    let interop = interop();
    let layout = rgba_layout(16, 64);
    let exported = interop.export_buffer(1000).unwrap();
    let memory = exported.memory(0, Pitches::aligned(&layout)).unwrap();
    let allocation = memory.allocation_size;
    let e = VulkanSource::new(layout.clone(), memory).err().unwrap();
    let text = e.to_string();
    assert!(
        matches!(e, InteropError::AllocationTooSmall { needed: 4096, .. }),
        "{text}"
    );
    assert!(
        text.contains("4096") && text.contains(&allocation.to_string()),
        "{text}"
    );

    let e = VulkanSource::new(
        layout,
        exported
            .memory(
                0,
                Pitches {
                    row: 128,
                    plane: 2048,
                },
            )
            .unwrap(),
    )
    .err()
    .unwrap();
    assert!(
        e.to_string()
            .contains("row pitch of 128 bytes is less than one row of 256 bytes"),
        "{e}"
    );
}

#[test]
fn memory_of_another_device_is_refused_with_both_uuids() {
    let interop = interop();
    let layout = rgba_layout(4, 64);
    let pitches = Pitches::aligned(&layout);
    let exported = interop.export_buffer(pitches.span(&layout)).unwrap();
    let mut memory = exported.memory(0, pitches).unwrap();
    memory.device_uuid = [0x5A; 16];
    let source = VulkanSource::new(layout, memory).unwrap();
    let mut renderer = interop.renderer();
    let mut scene = Scene::new();
    scene.add(Image::new(Arc::new(source)));
    let target = renderer.create_target(64, 4).unwrap();
    let e = renderer
        .render(&scene, &common::pixel_camera(64, 4), &target)
        .unwrap_err()
        .to_string();
    assert!(e.contains("5a5a5a5a-5a5a-5a5a-5a5a-5a5a5a5a5a5a"), "{e}");
    assert!(e.contains(&interop.device_uuid().to_string()), "{e}");
}

#[test]
fn a_renderer_without_interop_refuses_device_memory() {
    let interop = interop();
    let layout = rgba_layout(4, 64);
    let pitches = Pitches::aligned(&layout);
    let exported = interop.export_buffer(pitches.span(&layout)).unwrap();
    let source = VulkanSource::new(layout, exported.memory(0, pitches).unwrap()).unwrap();
    let mut renderer = common::renderer();
    let mut scene = Scene::new();
    scene.add(Image::new(Arc::new(source)));
    let target = renderer.create_target(64, 4).unwrap();
    let e = renderer
        .render(&scene, &common::pixel_camera(64, 4), &target)
        .unwrap_err()
        .to_string();
    assert!(
        e.contains("no device upload path") && e.contains("never made silently"),
        "{e}"
    );
}

#[test]
fn the_gl_backend_is_refused_by_name() {
    let options = RendererOptions {
        backends: Some(wgpu::Backends::GL),
        ..RendererOptions::default()
    };
    let e = Interop::with_options(&options).unwrap_err();
    assert!(matches!(e, InteropError::VulkanNotRequested { .. }), "{e}");
    assert!(e.to_string().contains("GL"), "{e}");
}

/// With `VK_KHR_external_semaphore_fd` the renderer waits for the producer's value and
/// signals its own; without it (lavapipe) a source carrying a semaphore is refused and the
/// error names the extension.
#[test]
fn timeline_semaphores_order_reads_where_the_driver_shares_them() {
    let producer = interop();
    let display = own_interop();
    let layout = rgba_layout(8, 64);
    let pitches = Pitches::aligned(&layout);
    let exported = producer.export_buffer(pitches.span(&layout)).unwrap();
    produce(
        &producer,
        exported.buffer(),
        &frame_bytes(&layout, pitches, 0, 2),
    );
    let mut memory = exported.memory(0, pitches).unwrap();
    let mut renderer = display.renderer();
    let target = renderer.create_target(64, 8).unwrap();
    let camera = common::pixel_camera(64, 8);

    if !display.supports_shared_semaphores() {
        let fd = std::fs::File::open("/dev/null").unwrap();
        memory.semaphore = Some(TimelineSemaphore {
            fd: Arc::new(fd.into()),
            wait_value: 1,
            signal_value: Some(2),
        });
        let source = VulkanSource::new(layout, memory).unwrap();
        let mut scene = Scene::new();
        scene.add(Image::new(Arc::new(source)));
        let e = renderer
            .render(&scene, &camera, &target)
            .unwrap_err()
            .to_string();
        assert!(e.contains("VK_KHR_external_semaphore_fd"), "{e}");
        return;
    }
    let semaphore = producer.create_semaphore().unwrap();
    memory.semaphore = Some(TimelineSemaphore {
        fd: Arc::new(semaphore.export_fd().unwrap()),
        wait_value: 1,
        signal_value: Some(2),
    });
    let source = VulkanSource::new(layout, memory).unwrap();
    let mut scene = Scene::new();
    scene.add(Image::new(Arc::new(source)));
    semaphore.signal(1).unwrap();
    let _ = renderer.render(&scene, &camera, &target).unwrap();
    assert_frame(&renderer.read_image(&target).unwrap(), 2);
    assert!(
        semaphore.wait(2, Duration::from_secs(10)).unwrap(),
        "the renderer signals 2 after reading"
    );
}

#[test]
fn teardown_in_any_order_leaves_the_devices_usable() {
    let producer = interop();
    let layout = rgba_layout(8, 64);
    let pitches = Pitches::aligned(&layout);
    for order in 0..3 {
        let display = own_interop();
        let exported = producer.export_buffer(pitches.span(&layout)).unwrap();
        produce(
            &producer,
            exported.buffer(),
            &frame_bytes(&layout, pitches, 0, order),
        );
        let source = Arc::new(
            VulkanSource::new(layout.clone(), exported.memory(0, pitches).unwrap()).unwrap(),
        );
        let mut renderer = display.renderer();
        let mut scene = Scene::new();
        scene.add(Image::new(source.clone()));
        assert_frame(&render_pixels(&mut renderer, &scene, 64, 8), order);
        match order {
            0 => {
                drop(exported);
                drop(scene);
                drop(source);
                drop(renderer);
                drop(display);
            }
            1 => {
                drop(display);
                drop(renderer);
                drop(exported);
                drop(source);
            }
            _ => {
                drop(source);
                drop(renderer);
                drop(scene);
                drop(display);
                drop(exported);
            }
        }
    }
    // The producer still works after all of it.
    let exported = producer.export_buffer(4096).unwrap();
    produce(&producer, exported.buffer(), &[7; 4096]);
}

fn f32_bytes(values: &[[f32; 3]]) -> Vec<u8> {
    values
        .iter()
        .flatten()
        .flat_map(|v| v.to_le_bytes())
        .collect()
}

#[test]
fn mesh_positions_in_shared_memory_draw_and_partial_updates_copy_only_their_range() {
    let producer = interop();
    let display = own_interop();
    // 1024 triangles (3 chunks of 1024 vertices): the first is the visible one, the others
    // are degenerate (zero area, never drawn) until the last is moved.
    let n = 3072;
    let first = [[4.0, 4.0], [28.0, 4.0], [4.0, 28.0]];
    let last = [[28.0, 28.0], [28.0, 8.0], [8.0, 28.0]];
    let mut positions = vec![[1.0f32, 1.0, 5.0]; n];
    for (i, p) in first.iter().enumerate() {
        positions[i] = [p[0], p[1], 5.0];
    }
    let layout = Layout::new(Shape::new(&[n]).unwrap(), ElementType::F32, 3).unwrap();
    let pitches = Pitches::packed(&layout);
    let exported = producer.export_buffer(pitches.span(&layout)).unwrap();
    produce(&producer, exported.buffer(), &f32_bytes(&positions));
    let source = Arc::new(VulkanSource::new(layout, exported.memory(0, pitches).unwrap()).unwrap());
    let mut renderer = display.renderer();
    let mut scene = Scene::new();
    scene.add(
        Mesh::new(source.clone())
            .with_shading(Shading::Unlit)
            .with_color([1.0, 0.0, 0.0, 1.0]),
    );
    let cam = Front { n: 32.0 };
    let img = render(&mut renderer, &scene, &cam, 32, 32);
    assert_triangles(&img, &[first]);
    let c = renderer.counters();
    assert_eq!(c.bytes_uploaded, 0, "nothing went through host staging");
    assert_eq!(c.device_bytes_copied, (n * 12) as u64);

    // The producer moves the last triangle (in the last chunk) and publishes that chunk only.
    // It also scribbles over the first triangle without publishing it: a copy of more than
    // the published range would show that.
    let before = renderer.counters();
    for (i, p) in last.iter().enumerate() {
        positions[n - 3 + i] = [p[0], p[1], 5.0];
    }
    let mut written = positions.clone();
    written[0] = [30.0, 30.0, 5.0];
    produce(&producer, exported.buffer(), &f32_bytes(&written));
    source.publish_region(Region::d1(2048, 1024)).unwrap();
    let img = render(&mut renderer, &scene, &cam, 32, 32);
    assert_triangles(&img, &[first, last]);
    let d = renderer.counters().since(&before);
    assert_eq!(d.device_bytes_copied, 1024 * 12, "one chunk of positions");
    assert_eq!(d.copies_issued, 1);
    assert_eq!(d.bytes_uploaded, 0);

    // Regions outside the layout are refused.
    assert!(source.publish_region(Region::d1(3000, 100)).is_err());
}

/// Draws `volume` (of an n^3 source) as a viridis MIP seen from the front on an n x n target,
/// checks every pixel against the maximum of `value(z, y, x)` along z through `clim`, and
/// returns the renderer's counters.
fn assert_front_mip(
    display: &Interop,
    volume: Volume,
    n: usize,
    clim: [f32; 2],
    value: impl Fn(usize, usize, usize) -> f32,
) -> sluice::Counters {
    let mut renderer = display.renderer();
    let mut scene = Scene::new();
    scene.add(volume.with_colormap(Colormap::Viridis));
    let img = render(
        &mut renderer,
        &scene,
        &Front { n: n as f32 },
        n as u32,
        n as u32,
    );
    for y in 0..n {
        for x in 0..n {
            let max = (0..n).map(|z| value(z, y, x)).fold(f32::MIN, f32::max);
            let (want, near) = common::expected_entry(&Colormap::Viridis, max, clim, 1.0);
            let got = img.get_pixel(x as u32, y as u32).0;
            assert!(
                got == want || Some(got) == near,
                "pixel ({x}, {y}): {got:?}, MIP {max} -> {want:?}"
            );
        }
    }
    renderer.counters()
}

#[test]
fn a_3d_source_in_shared_memory_renders_as_a_volume() {
    let producer = interop();
    let display = own_interop();
    let n = 16;
    let layout = Layout::new(Shape::new(&[n, n, n]).unwrap(), ElementType::U8, 1).unwrap();
    // Rows padded to 256 bytes: one copy command for the whole volume.
    let pitches = Pitches::aligned(&layout);
    let mut data = vec![10u8; n * n * n];
    let at = |z: usize, y: usize, x: usize| (z * n + y) * n + x;
    for &((z, y, x), v) in &[
        ((3, 5, 7), 200u8),
        ((12, 5, 7), 120),
        ((15, 11, 2), 90),
        ((0, 15, 15), 255),
        ((8, 8, 8), 60),
    ] {
        data[at(z, y, x)] = v;
    }
    let mut bytes = vec![0xABu8; pitches.span(&layout) as usize];
    for z in 0..n {
        for y in 0..n {
            let row = z * pitches.plane + y * pitches.row;
            bytes[row..row + n].copy_from_slice(&data[at(z, y, 0)..at(z, y, 0) + n]);
        }
    }
    bytes.resize(bytes.len().next_multiple_of(4), 0xAB);
    let exported = producer.export_buffer(pitches.span(&layout)).unwrap();
    produce(&producer, exported.buffer(), &bytes);
    let source = Arc::new(VulkanSource::new(layout, exported.memory(0, pitches).unwrap()).unwrap());
    let volume = Volume::new(source).with_interpolation(Interpolation::Nearest);
    let c = assert_front_mip(&display, volume, n, [0.0, 255.0], |z, y, x| {
        f32::from(data[at(z, y, x)])
    });
    assert_eq!(c.bytes_uploaded, 0, "nothing went through host staging");
    assert_eq!(c.copies_issued, 1, "one command for the whole volume");
    // u8 textures (r8uint) cannot be storage: a copy command, not a compute pass.
    assert_eq!(c.compute_copies, 0);
}

#[test]
fn an_f32_volume_in_shared_memory_is_stored_by_a_compute_pass() {
    // f32 (an r32float texture, storable) at unaligned 72-byte rows: the compute path takes
    // it in one pass, where copy commands would need one per row.
    let producer = interop();
    let display = own_interop();
    let n = 16;
    let layout = Layout::new(Shape::new(&[n, n, n]).unwrap(), ElementType::F32, 1).unwrap();
    let pitches = Pitches {
        row: 72,
        plane: 72 * n,
    };
    let at = |z: usize, y: usize, x: usize| (z * n + y) * n + x;
    let mut data = vec![0.25f32; n * n * n];
    for &((z, y, x), v) in &[
        ((3, 5, 7), 2.0f32),
        ((12, 5, 7), 1.5),
        ((15, 11, 2), -1.0),
        ((0, 15, 15), 3.5),
        ((8, 8, 8), 0.75),
    ] {
        data[at(z, y, x)] = v;
    }
    let mut bytes = vec![0xABu8; pitches.span(&layout) as usize];
    for z in 0..n {
        for y in 0..n {
            for x in 0..n {
                let i = z * pitches.plane + y * pitches.row + 4 * x;
                bytes[i..i + 4].copy_from_slice(&data[at(z, y, x)].to_le_bytes());
            }
        }
    }
    bytes.resize(bytes.len().next_multiple_of(4), 0xAB);
    let exported = producer.export_buffer(bytes.len() as u64).unwrap();
    produce(&producer, exported.buffer(), &bytes);
    let source = Arc::new(VulkanSource::new(layout, exported.memory(0, pitches).unwrap()).unwrap());
    let volume = Volume::new(source)
        .with_interpolation(Interpolation::Nearest)
        .with_clim(0.0, 4.0)
        .unwrap();
    let c = assert_front_mip(&display, volume, n, [0.0, 4.0], |z, y, x| data[at(z, y, x)]);
    assert_eq!(c.bytes_uploaded, 0, "nothing went through host staging");
    assert_eq!(
        (c.copies_issued, c.compute_copies),
        (1, 1),
        "one compute pass for the whole volume"
    );
}

#[test]
fn device_indices_draw_and_attributes_a_texture_cannot_hold_are_refused_as_images() {
    let interop = interop();
    // A quad from 4 shared vertices and 2 triangles of u32x3 indices, both in shared memory.
    let corners = [
        [4.0f32, 4.0, 5.0],
        [28.0, 4.0, 5.0],
        [28.0, 28.0, 5.0],
        [4.0, 28.0, 5.0],
    ];
    let vertices = Layout::new(Shape::new(&[4]).unwrap(), ElementType::F32, 3).unwrap();
    let indices = Layout::new(Shape::new(&[2]).unwrap(), ElementType::U32, 3).unwrap();
    let shared = |layout: &Layout, bytes: &[u8]| {
        let pitches = Pitches::packed(layout);
        let exported = interop.export_buffer(pitches.span(layout)).unwrap();
        produce(&interop, exported.buffer(), bytes);
        let memory = exported.memory(0, pitches).unwrap();
        // The source's memory keeps its fd; the exported buffer may go.
        Arc::new(VulkanSource::new(layout.clone(), memory).unwrap())
    };
    let positions = shared(&vertices, &f32_bytes(&corners));
    let index_bytes: Vec<u8> = [0u32, 1, 2, 0, 2, 3]
        .iter()
        .flat_map(|i| i.to_le_bytes())
        .collect();
    let triangles = shared(&indices, &index_bytes);
    let mut renderer = interop.renderer();
    let mut scene = Scene::new();
    scene.add(
        Mesh::new(positions.clone())
            .with_indices(triangles)
            .with_shading(Shading::Unlit)
            .with_color([1.0, 0.0, 0.0, 1.0]),
    );
    let img = render(&mut renderer, &scene, &Front { n: 32.0 }, 32, 32);
    let quad = [
        [[4.0, 4.0], [28.0, 4.0], [28.0, 28.0]],
        [[4.0, 4.0], [28.0, 28.0], [4.0, 28.0]],
    ];
    assert_triangles(&img, &quad);
    let c = renderer.counters();
    assert_eq!(c.bytes_uploaded, 0);
    assert_eq!(c.device_bytes_copied, 4 * 12 + 2 * 12);

    // f32x3 is a vertex attribute, not a texture format: as an image it is refused, by name.
    let mut scene = Scene::new();
    scene.add(Image::new(positions));
    let target = renderer.create_target(4, 1).unwrap();
    let e = renderer
        .render(&scene, &common::pixel_camera(4, 1), &target)
        .unwrap_err()
        .to_string();
    assert!(
        e.contains("f32 data with 3 channels would need conversion"),
        "{e}"
    );
}

/// Reads all of a 2-D or 3-D texture back, rows packed.
fn read_texture(interop: &Interop, texture: &wgpu::Texture, texel: u32) -> Vec<u8> {
    let size = texture.size();
    let row = (size.width * texel).next_multiple_of(wgpu::COPY_BYTES_PER_ROW_ALIGNMENT);
    let rows = size.height * size.depth_or_array_layers;
    let buffer = interop.device().create_buffer(&wgpu::BufferDescriptor {
        label: None,
        size: u64::from(row * rows),
        usage: wgpu::BufferUsages::COPY_DST | wgpu::BufferUsages::MAP_READ,
        mapped_at_creation: false,
    });
    let mut encoder = interop.device().create_command_encoder(&Default::default());
    encoder.copy_texture_to_buffer(
        texture.as_image_copy(),
        wgpu::TexelCopyBufferInfo {
            buffer: &buffer,
            layout: wgpu::TexelCopyBufferLayout {
                offset: 0,
                bytes_per_row: Some(row),
                rows_per_image: Some(size.height),
            },
        },
        size,
    );
    interop.queue().submit([encoder.finish()]);
    buffer
        .slice(..)
        .map_async(wgpu::MapMode::Read, |r| r.unwrap());
    interop
        .device()
        .poll(wgpu::PollType::wait_indefinitely())
        .unwrap();
    let mapped = buffer.slice(..).get_mapped_range().unwrap();
    let width = (size.width * texel) as usize;
    mapped
        .chunks(row as usize)
        .flat_map(|r| r[..width].to_vec())
        .collect()
}

#[test]
fn exported_textures_hold_what_is_written_and_export_their_memory() {
    let interop = interop();
    for (format, dimension, size, texel) in [
        (
            wgpu::TextureFormat::Rgba8Uint,
            wgpu::TextureDimension::D2,
            [70, 30, 1],
            4,
        ),
        (
            wgpu::TextureFormat::R32Float,
            wgpu::TextureDimension::D3,
            [20, 12, 9],
            4,
        ),
        (
            wgpu::TextureFormat::Rg16Sint,
            wgpu::TextureDimension::D2,
            [33, 5, 1],
            4,
        ),
    ] {
        let extent = wgpu::Extent3d {
            width: size[0],
            height: size[1],
            depth_or_array_layers: size[2],
        };
        let exported = interop
            .export_texture(format, extent, dimension)
            .unwrap_or_else(|e| panic!("{format:?}: {e}"));
        let texture = exported.texture();
        assert_eq!(
            (texture.format(), texture.size(), texture.dimension()),
            (format, extent, dimension)
        );
        assert!(exported.allocation_size() >= u64::from(size[0] * size[1] * size[2] * texel));
        let _fd = exported.export_fd().unwrap();
        let bytes: Vec<u8> = (0..size[0] * size[1] * size[2] * texel)
            .map(|i| (i * 7 + i / 13) as u8)
            .collect();
        interop.queue().write_texture(
            texture.as_image_copy(),
            &bytes,
            wgpu::TexelCopyBufferLayout {
                offset: 0,
                bytes_per_row: Some(size[0] * texel),
                rows_per_image: Some(size[1]),
            },
            extent,
        );
        assert_eq!(read_texture(&interop, texture, texel), bytes, "{format:?}");
    }
}

#[test]
fn textures_that_cannot_be_exported_are_refused_with_their_format_and_size() {
    let interop = interop();
    let extent = |w, h, d| wgpu::Extent3d {
        width: w,
        height: h,
        depth_or_array_layers: d,
    };
    let refused = |format, size, dimension| {
        interop
            .export_texture(format, size, dimension)
            .unwrap_err()
            .to_string()
    };
    let e = refused(
        wgpu::TextureFormat::Rgba8Unorm,
        extent(16, 16, 1),
        wgpu::TextureDimension::D2,
    );
    assert!(e.contains("Rgba8Unorm") && e.contains("16x16x1"), "{e}");
    let e = refused(
        wgpu::TextureFormat::R8Uint,
        extent(16, 16, 4),
        wgpu::TextureDimension::D2,
    );
    assert!(e.contains("16x16x4") && e.contains("one layer"), "{e}");
    let e = refused(
        wgpu::TextureFormat::R8Uint,
        extent(0, 16, 1),
        wgpu::TextureDimension::D2,
    );
    assert!(e.contains("0x16x1"), "{e}");
    let e = refused(
        wgpu::TextureFormat::R8Uint,
        extent(1 << 20, 4, 1),
        wgpu::TextureDimension::D2,
    );
    assert!(e.contains("1048576x4x1") && e.contains("largest"), "{e}");
}
