//! Buffers the user owns, handed to a `HostBufferSource` whole and replaced per update: on
//! lavapipe (which has `VK_EXT_external_memory_host`) the GPU copies them straight from their
//! pages, with nothing staged; buffers that cannot be imported (small, misaligned) are copied
//! into the source's pages, and `host_only` is staged by the renderer, all with the same pixels.
#![cfg(target_os = "linux")]

mod common;

use std::sync::Arc;

use common::{assert_pixel, assert_triangles, render, render_pixels, Front};
use sluice::interop::{HostBuffer, HostBufferSource, Interop, MIN_IMPORT_BYTES};
use sluice::prelude::*;
use sluice::{Mesh, ReadRequest, RendererOptions, Shading};

fn interop() -> Interop {
    Interop::with_options(&RendererOptions::from_env().unwrap())
        .unwrap_or_else(|e| panic!("no Vulkan device with external memory: {e}"))
}

fn rgba_layout(height: usize, width: usize) -> Layout {
    Layout::new(Shape::d2(height, width).unwrap(), ElementType::U8, 4).unwrap()
}

fn pattern(x: usize, y: usize, frame: usize) -> [u8; 4] {
    [
        (x * 3 + y + 11 * frame) as u8,
        (y * 5 + 7 + frame) as u8,
        ((x ^ y) + 2 * frame) as u8,
        255,
    ]
}

/// An RGBA image of `pattern(.., frame)`, `height * width * 4` bytes.
fn image_bytes(height: usize, width: usize, frame: usize) -> Vec<u8> {
    (0..height * width)
        .flat_map(|i| pattern(i % width, i / width, frame))
        .collect()
}

#[track_caller]
fn assert_frame(img: &image::RgbaImage, frame: usize) {
    for y in 0..img.height() {
        for x in 0..img.width() {
            assert_pixel(img, x, y, pattern(x as usize, y as usize, frame), 0);
        }
    }
}

/// Whether renderers of `interop` draw 2-D host buffers in place (lavapipe) rather than copy
/// them. With `SLUICE_REQUIRE_IN_PLACE` (set by `.ci/run`, whose device is lavapipe) a device
/// where they would not fails the test rather than test the copy only.
fn samples_in_place(interop: &Interop) -> bool {
    let info = interop.adapter().get_info();
    let in_place = interop.draws_host_buffers_in_place();
    if std::env::var_os("SLUICE_REQUIRE_IN_PLACE").is_some_and(|v| v != "0") {
        assert!(
            in_place,
            "SLUICE_REQUIRE_IN_PLACE: host buffers would be copied on {} ({:?}, driver {:?})",
            info.name, info.device_type, info.driver
        );
    }
    in_place
}

/// A, B, A, ... handed over in turn: each frame shows the buffer just handed over, each
/// buffer is imported once (the import travels with it), the GPU copies from the user's own
/// pages and nothing is staged or copied on the host. Sizes: one from the heap (80 KiB, its
/// pages shared with other allocations), one mapped on its own (512 KiB). Sampling in place
/// is turned off here (see the next test).
#[test]
fn alternating_buffers_are_copied_from_their_own_pages() {
    alternate_buffers(false);
}

/// The same with sampling in place on (the default): on a CPU device each buffer handed over
/// is drawn from its pages by an image made over them, with nothing copied at all; on a GPU
/// the buffers are copied as above.
#[test]
fn alternating_buffers_are_drawn_in_place_on_cpu_devices() {
    alternate_buffers(true);
}

fn alternate_buffers(in_place: bool) {
    let interop = interop();
    let expect_in_place = in_place && samples_in_place(&interop);
    for (height, width) in [(128, 160), (512, 256)] {
        let bytes = height * width * 4;
        assert!(bytes >= MIN_IMPORT_BYTES);
        let layout = rgba_layout(height, width);
        let source = Arc::new(
            HostBufferSource::new(&interop, layout, image_bytes(height, width, 0)).unwrap(),
        );
        source.set_sample_in_place(in_place);
        assert_eq!(source.staged_reason(), None);
        assert!(source.is_imported(), "{:?}", source.fallback_reason());
        let mut renderer = interop.renderer();
        let mut scene = Scene::new();
        scene.add(Image::new(source.clone()));
        assert_frame(
            &render_pixels(&mut renderer, &scene, width as u32, height as u32),
            0,
        );

        let mut spare = HostBuffer::from(image_bytes(height, width, 1));
        let addresses = [source_address(&source), spare.as_ptr() as usize];
        for frame in 1..6 {
            let handed = spare.as_ptr() as usize;
            assert_eq!(handed, addresses[frame % 2], "the buffers alternate");
            spare = source.replace(spare).unwrap();
            assert!(source.is_imported(), "{:?}", source.fallback_reason());
            assert_eq!(spare.as_ptr() as usize, addresses[(frame + 1) % 2]);
            assert!(spare.is_imported(), "a handed-back buffer keeps its import");
            let img = render_pixels(&mut renderer, &scene, width as u32, height as u32);
            assert_frame(&img, frame % 2);
        }
        let stats = source.stats();
        assert_eq!(stats.buffers_handed, 6);
        assert_eq!(
            stats.imports_made, 2,
            "one import per buffer, not per update"
        );
        assert_eq!((stats.buffers_copied, stats.bytes_copied), (0, 0));
        let counters = renderer.counters();
        assert_eq!(counters.bytes_uploaded, 0, "nothing was staged");
        if expect_in_place {
            assert_eq!(source.in_place_refusal(), None);
            assert_eq!(stats.in_place_images, 6, "one image per hand-over");
            assert_eq!(
                (stats.gpu_copies, stats.gpu_bytes),
                (0, 0),
                "nothing copied"
            );
            assert_eq!(counters.device_bytes_copied, 0);
            assert_eq!(counters.textures_in_place, 6);
            assert_eq!(counters.in_place_fallbacks, 0);
        } else {
            assert_eq!(stats.in_place_images, 0);
            assert_eq!(stats.gpu_copies, 6, "one GPU copy per update");
            assert_eq!(stats.gpu_bytes, 6 * bytes as u64);
            assert_eq!(counters.device_bytes_copied, 6 * bytes as u64);
            assert_eq!(counters.textures_in_place, 0);
        }
    }
}

/// The address of the buffer a source shows, read back through `lend`.
fn source_address(source: &HostBufferSource) -> usize {
    let layout = source.layout();
    let mut address = 0;
    let request = ReadRequest::new(layout.shape().full_region(), sluice::noop_waker());
    let _ = source
        .lend(&request, &mut |view| address = view.bytes.as_ptr() as usize)
        .unwrap();
    address
}

/// A buffer is handed back only once the GPU copy that read it is done: a frame is submitted
/// without waiting, the buffer handed back is overwritten at once, and the frame read back
/// afterwards still shows the buffer's old contents.
#[test]
fn a_buffer_is_handed_back_only_after_its_copy_is_done() {
    hand_back_after_the_gpu(false);
}

/// The same for a buffer sampled in place (CPU devices): the frame in flight draws from the
/// buffer's pages themselves, so the hand-back waits for that frame.
#[test]
fn a_buffer_sampled_in_place_is_handed_back_only_after_its_frame_is_done() {
    hand_back_after_the_gpu(true);
}

fn hand_back_after_the_gpu(in_place: bool) {
    let interop = interop();
    let (height, width) = (1024, 1024);
    let source = Arc::new(
        HostBufferSource::new(
            &interop,
            rgba_layout(height, width),
            image_bytes(height, width, 0),
        )
        .unwrap(),
    );
    source.set_sample_in_place(in_place);
    let mut renderer = interop.renderer();
    let mut scene = Scene::new();
    scene.add(Image::new(source.clone()));
    let camera = common::pixel_camera(width as u32, height as u32);
    let target = renderer.create_target(width as u32, height as u32).unwrap();
    // The source shows X (frame 0); `spare` is Y (frame 1).
    let mut spare = HostBuffer::from(image_bytes(height, width, 1));
    for _ in 0..3 {
        let x = source.replace(spare).unwrap();
        assert!(source.is_imported(), "{:?}", source.fallback_reason());
        // Submitted, not waited for: the copy may still be reading Y.
        let _ = renderer.render(&scene, &camera, &target).unwrap();
        // X shown again; Y handed back only once its copy is done.
        let mut y = source.replace(x).unwrap();
        y.fill(0); // would show up as black if the copy had not finished
        assert_frame(&renderer.read_image(&target).unwrap(), 1);
        y.copy_from_slice(&image_bytes(height, width, 1));
        spare = y;
    }
    let counters = renderer.counters();
    assert_eq!(counters.bytes_uploaded, 0);
    let drawn_in_place = in_place && samples_in_place(&interop);
    assert_eq!(
        counters.textures_in_place,
        if drawn_in_place { 3 } else { 0 }
    );
    assert_eq!(
        source.stats().gpu_copies,
        if drawn_in_place { 0 } else { 3 }
    );
}

/// Buffers that cannot be imported (fewer bytes than MIN_IMPORT_BYTES; a first sample off a
/// sample boundary) are copied once into the source's own imported pages, say why, and show
/// the same pixels, also when they alternate with imported buffers in one source.
#[test]
fn buffers_that_cannot_be_imported_are_copied_with_the_same_pixels() {
    let interop = interop();
    // Small.
    let (height, width) = (16, 32);
    let source = Arc::new(
        HostBufferSource::new(
            &interop,
            rgba_layout(height, width),
            image_bytes(height, width, 0),
        )
        .unwrap(),
    );
    assert!(!source.is_imported());
    let reason = source.fallback_reason().unwrap();
    assert!(reason.contains("MIN_IMPORT_BYTES"), "{reason}");
    let mut renderer = interop.renderer();
    let mut scene = Scene::new();
    scene.add(Image::new(source.clone()));
    assert_frame(
        &render_pixels(&mut renderer, &scene, width as u32, height as u32),
        0,
    );
    let back = source.replace(image_bytes(height, width, 1)).unwrap();
    assert_eq!(&back[..], &image_bytes(height, width, 0)[..]);
    assert_frame(
        &render_pixels(&mut renderer, &scene, width as u32, height as u32),
        1,
    );
    let stats = source.stats();
    assert_eq!(stats.buffers_copied, 2);
    assert_eq!(stats.bytes_copied, 2 * (height * width * 4) as u64);
    assert_eq!(
        renderer.counters().bytes_uploaded,
        0,
        "the renderer staged nothing"
    );

    // Misaligned, alternating with imported buffers.
    let (height, width) = (128, 160);
    let bytes = height * width * 4;
    let misaligned = |frame: usize| {
        let mut v = vec![0u8; bytes + 1];
        v[1..].copy_from_slice(&image_bytes(height, width, frame));
        HostBuffer::with_offset(v, 1).unwrap()
    };
    let source = Arc::new(
        HostBufferSource::new(
            &interop,
            rgba_layout(height, width),
            image_bytes(height, width, 0),
        )
        .unwrap(),
    );
    let mut renderer = interop.renderer();
    let mut scene = Scene::new();
    scene.add(Image::new(source.clone()));
    assert_frame(
        &render_pixels(&mut renderer, &scene, width as u32, height as u32),
        0,
    );
    let imported = source.replace(misaligned(1)).unwrap();
    assert!(!source.is_imported());
    let reason = source.fallback_reason().unwrap();
    assert!(reason.contains("multiple of the 4 bytes"), "{reason}");
    assert_frame(
        &render_pixels(&mut renderer, &scene, width as u32, height as u32),
        1,
    );
    let back = source.replace(imported).unwrap();
    assert_eq!(back.offset(), 1);
    assert!(source.is_imported(), "{:?}", source.fallback_reason());
    assert_frame(
        &render_pixels(&mut renderer, &scene, width as u32, height as u32),
        0,
    );
    let _ = source.replace(misaligned(2)).unwrap();
    assert_frame(
        &render_pixels(&mut renderer, &scene, width as u32, height as u32),
        2,
    );
    let stats = source.stats();
    assert_eq!(
        (stats.buffers_copied, stats.bytes_copied),
        (2, 2 * bytes as u64)
    );
    assert_eq!(stats.imports_made, 1);
    assert_eq!(renderer.counters().bytes_uploaded, 0);
}

/// `host_only`: every buffer is staged by the renderer (its counters say so), same pixels.
#[test]
fn host_only_buffers_are_staged_by_the_renderer() {
    let interop = interop();
    let (height, width) = (128, 160);
    let bytes = (height * width * 4) as u64;
    let source = Arc::new(
        HostBufferSource::host_only(
            &interop,
            rgba_layout(height, width),
            image_bytes(height, width, 0),
        )
        .unwrap(),
    );
    assert!(source.staged_reason().unwrap().contains("host_only"));
    assert!(!source.is_imported());
    let mut renderer = interop.renderer();
    let mut scene = Scene::new();
    scene.add(Image::new(source.clone()));
    assert_frame(
        &render_pixels(&mut renderer, &scene, width as u32, height as u32),
        0,
    );
    let mut spare = HostBuffer::from(image_bytes(height, width, 1));
    for frame in 1..4 {
        spare = source.replace(spare).unwrap();
        assert_frame(
            &render_pixels(&mut renderer, &scene, width as u32, height as u32),
            frame % 2,
        );
    }
    assert_eq!(renderer.counters().bytes_uploaded, 4 * bytes, "all staged");
    let stats = source.stats();
    assert_eq!((stats.gpu_copies, stats.imports_made), (0, 0));
}

/// Typed vectors: f32 samples are imported as they are and come back as the same vector,
/// copied or drawn in place.
#[test]
fn typed_vectors_are_imported_and_come_back() {
    for in_place in [false, true] {
        typed_vectors_come_back(in_place);
    }
}

fn typed_vectors_come_back(in_place: bool) {
    let interop = interop();
    let (height, width) = (128, 256);
    let layout = Layout::new(Shape::d2(height, width).unwrap(), ElementType::F32, 1).unwrap();
    let a: Vec<f32> = (0..height * width).map(|i| i as f32 / 1e4).collect();
    let b: Vec<f32> = a.iter().map(|v| 1.0 - v).collect();
    let source = Arc::new(HostBufferSource::new(&interop, layout, a.clone()).unwrap());
    source.set_sample_in_place(in_place);
    assert!(source.is_imported(), "{:?}", source.fallback_reason());
    let mut renderer = interop.renderer();
    let mut scene = Scene::new();
    scene.add(Image::new(source.clone()).with_clim(0.0, 4.0).unwrap());
    let _ = render_pixels(&mut renderer, &scene, 64, 64);
    let back = source.replace(b).unwrap();
    let _ = render_pixels(&mut renderer, &scene, 64, 64);
    let back = back.into_vec::<u8>().expect_err("not a Vec<u8>");
    let back: Vec<f32> = back.into_vec().expect("the f32 vector back");
    assert_eq!(back, a);
    let drawn_in_place = in_place && samples_in_place(&interop);
    assert_eq!(
        (source.stats().gpu_copies, source.stats().in_place_images),
        if drawn_in_place { (0, 2) } else { (2, 0) },
        "{:?}",
        source.in_place_refusal()
    );
    assert_eq!(renderer.counters().bytes_uploaded, 0);
}

/// A buffer whose length does not match the layout is refused with the numbers, and handed
/// back unchanged; an offset past the end is refused too.
#[test]
fn wrong_lengths_are_refused_with_the_numbers() {
    let interop = interop();
    let layout = rgba_layout(128, 160);
    let err = HostBufferSource::new(&interop, layout.clone(), vec![0u8; 1000])
        .err()
        .expect("a short buffer is refused");
    let text = err.to_string();
    assert!(
        text.contains("1000") && text.contains(&(128 * 160 * 4).to_string()),
        "{text}"
    );
    let source = HostBufferSource::new(&interop, layout, vec![7u8; 128 * 160 * 4]).unwrap();
    let err = source.replace(vec![1u8; 128 * 160 * 4 + 4]).unwrap_err();
    let text = err.to_string();
    assert!(text.contains("81924") && text.contains("81920"), "{text}");
    assert!(text.contains("128") && text.contains("160"), "{text}");
    assert_eq!(err.buffer.len(), 81924, "the buffer comes back unchanged");
    assert!(err.buffer.iter().all(|&v| v == 1));
    let err = HostBuffer::with_offset(vec![0u8; 10], 11).unwrap_err();
    assert!(err.to_string().contains("11") && err.to_string().contains("10"));
    // The source still shows its first buffer.
    let mut first = 0;
    let request = ReadRequest::new(source.layout().shape().full_region(), sluice::noop_waker());
    let _ = source
        .lend(&request, &mut |view| first = view.bytes[0])
        .unwrap();
    assert_eq!(first, 7);
}

/// Mesh positions (1-D, 12-byte elements) are copied from the buffers' own pages into the
/// vertex buffer: 6,000 vertices (70 KiB), the first triangle the visible one and the rest
/// degenerate; A and B place it differently.
#[test]
fn mesh_positions_are_copied_from_their_own_pages() {
    let interop = interop();
    let n = 6000;
    let a_tri = [[4.0, 4.0], [28.0, 4.0], [4.0, 28.0]];
    let b_tri = [[28.0, 28.0], [28.0, 8.0], [8.0, 28.0]];
    let positions = |t: [[f32; 2]; 3]| {
        let mut p = vec![1.0f32; n * 3];
        for (i, v) in t.iter().enumerate() {
            p[i * 3..i * 3 + 3].copy_from_slice(&[v[0], v[1], 5.0]);
        }
        p
    };
    let layout = Layout::new(Shape::new(&[n]).unwrap(), ElementType::F32, 3).unwrap();
    let source = Arc::new(HostBufferSource::new(&interop, layout, positions(a_tri)).unwrap());
    assert_eq!(source.staged_reason(), None);
    assert!(source.is_imported(), "{:?}", source.fallback_reason());
    let mut renderer = interop.renderer();
    let mut scene = Scene::new();
    scene.add(
        Mesh::new(source.clone())
            .with_shading(Shading::Unlit)
            .with_color([1.0, 0.0, 0.0, 1.0]),
    );
    let cam = Front { n: 32.0 };
    assert_triangles(&render(&mut renderer, &scene, &cam, 32, 32), &[a_tri]);
    let mut spare = HostBuffer::from(positions(b_tri));
    for frame in 1..5 {
        spare = source.replace(spare).unwrap();
        assert!(source.is_imported(), "{:?}", source.fallback_reason());
        let want = if frame % 2 == 1 { b_tri } else { a_tri };
        assert_triangles(&render(&mut renderer, &scene, &cam, 32, 32), &[want]);
    }
    let c = renderer.counters();
    assert_eq!(c.bytes_uploaded, 0, "nothing went through host staging");
    assert_eq!(c.device_bytes_copied, 5 * (n * 12) as u64);
    let stats = source.stats();
    assert_eq!((stats.imports_made, stats.bytes_copied), (2, 0));
}

/// A volume in buffers the device imports: each buffer handed over is copied by the GPU from
/// its pages, and the grid follows it (on a CPU device computed from the pages and written,
/// on a GPU built there), so every frame equals a CPU march of the buffer just handed over,
/// on data whose spikes only show where the grid holds them.
#[test]
fn imported_volumes_keep_their_grid_with_each_buffer() {
    use sluice::ndarray::Array3;
    let interop = interop();
    let n = 64usize;
    let (clim, step) = ([40.0f32, 250.0], 0.8f32);
    let volume = |spikes: &[((usize, usize, usize), u8)]| {
        let mut data = Array3::<u8>::from_elem((n, n, n), 10);
        for &((z, y, x), v) in spikes {
            data[[z, y, x]] = v;
        }
        data
    };
    let frames = [
        volume(&[((50, 9, 5), 240), ((3, 40, 21), 150)]),
        volume(&[((12, 60, 33), 200), ((63, 0, 63), 90), ((30, 9, 5), 120)]),
    ];
    let layout = Layout::new(Shape::new(&[n, n, n]).unwrap(), ElementType::U8, 1).unwrap();
    let bytes = |d: &Array3<u8>| d.iter().copied().collect::<Vec<u8>>();
    let source = Arc::new(HostBufferSource::new(&interop, layout, bytes(&frames[0])).unwrap());
    assert!(source.is_imported(), "{:?}", source.fallback_reason());
    let mut renderer = interop.renderer();
    let cpu = renderer.adapter_info().device_type == sluice::wgpu::DeviceType::Cpu;
    let mut scene = Scene::new();
    scene.add(common::linear_gray_mip(source.clone(), clim, step));
    let camera = Front { n: n as f32 };
    let mut spare = HostBuffer::from(bytes(&frames[1]));
    for frame in 0..4 {
        if frame > 0 {
            spare = source.replace(spare).unwrap();
        }
        let img = render(&mut renderer, &scene, &camera, n as u32, n as u32);
        common::assert_linear_mip(
            &img,
            &frames[frame % 2],
            clim,
            step,
            &format!("frame {frame}: "),
        );
    }
    let counters = renderer.counters();
    assert_eq!(counters.bytes_uploaded, 0, "nothing was staged");
    let grids = (counters.volume_grids_written, counters.volume_grids_built);
    assert_eq!(grids, if cpu { (4, 0) } else { (0, 4) });
}

/// A buffer the driver cannot lay a linear image over as it lies (on lavapipe, RGBA8 rows of
/// 100 pixels, 400 bytes, which the driver pads to 448) is copied from its pages instead, with
/// the same pixels, and the refusal names both row pitches.
#[test]
fn buffers_whose_rows_the_driver_pads_are_copied_instead_of_drawn_in_place() {
    let interop = interop();
    let (height, width) = (200, 100);
    let source = Arc::new(
        HostBufferSource::new(
            &interop,
            rgba_layout(height, width),
            image_bytes(height, width, 0),
        )
        .unwrap(),
    );
    assert!(source.is_imported(), "{:?}", source.fallback_reason());
    let mut renderer = interop.renderer();
    let mut scene = Scene::new();
    scene.add(Image::new(source.clone()));
    assert_frame(
        &render_pixels(&mut renderer, &scene, width as u32, height as u32),
        0,
    );
    let _ = source.replace(image_bytes(height, width, 1)).unwrap();
    assert_frame(
        &render_pixels(&mut renderer, &scene, width as u32, height as u32),
        1,
    );
    let stats = source.stats();
    if samples_in_place(&interop) {
        let reason = source.in_place_refusal().expect("refused");
        assert!(
            reason.contains("rows 448 bytes apart") && reason.contains("rows are 400 bytes apart"),
            "{reason}"
        );
    }
    assert_eq!((stats.in_place_images, stats.gpu_copies), (0, 2));
    assert_eq!(renderer.counters().textures_in_place, 0);
}

/// Two renderers show one source: both draw the buffer handed over (one image over its pages,
/// shared), and the hand-back waits for both renderers' frames.
#[test]
fn two_renderers_draw_one_buffer_in_place() {
    let interop = interop();
    let (height, width) = (128, 256);
    let source = Arc::new(
        HostBufferSource::new(
            &interop,
            rgba_layout(height, width),
            image_bytes(height, width, 0),
        )
        .unwrap(),
    );
    let mut renderers = [interop.renderer(), interop.renderer()];
    let mut scene = Scene::new();
    scene.add(Image::new(source.clone()));
    let mut spare = HostBuffer::from(image_bytes(height, width, 1));
    for frame in 0..4 {
        if frame > 0 {
            spare = source.replace(spare).unwrap();
        }
        for renderer in &mut renderers {
            assert_frame(
                &render_pixels(renderer, &scene, width as u32, height as u32),
                frame % 2,
            );
        }
        // The buffer handed back is overwritten at once: neither renderer shows it again.
        spare.fill(0);
        spare.copy_from_slice(&image_bytes(height, width, (frame + 1) % 2));
    }
    if samples_in_place(&interop) {
        assert_eq!(
            source.stats().in_place_images,
            4,
            "one image per hand-over, shared"
        );
        for renderer in &mut renderers {
            assert_eq!(renderer.counters().textures_in_place, 4);
        }
    }
}

/// One thread hands buffers over and refills each one handed back at once; another renders.
/// Every buffer holds one colour, so a frame that read a buffer while it was refilled (handed
/// back too early) shows two. Every frame must show exactly one of the colours handed over.
/// The writer hands a buffer over once a frame has been drawn since its last one (so the two
/// interleave however loaded the machine is), then refills the one it got back in two halves.
#[test]
fn buffers_replaced_from_another_thread_are_never_drawn_after_their_hand_back() {
    use std::sync::atomic::{AtomicUsize, Ordering};

    let interop = interop();
    let (height, width) = (256, 256);
    let colour = |k: usize| [(k * 4) as u8, (k * 3 + 1) as u8, (250 - k) as u8, 255];
    let filled =
        move |k: usize| -> Vec<u8> { (0..height * width).flat_map(|_| colour(k)).collect() };
    let source =
        Arc::new(HostBufferSource::new(&interop, rgba_layout(height, width), filled(0)).unwrap());
    let mut renderer = interop.renderer();
    let mut scene = Scene::new();
    scene.add(Image::new(source.clone()));
    let updates = 60;
    let drawn = Arc::new(AtomicUsize::new(0));
    let writer = {
        let (source, drawn) = (source.clone(), drawn.clone());
        std::thread::spawn(move || {
            let mut spare = HostBuffer::from(filled(1));
            for (i, k) in (2..updates + 2).enumerate() {
                while drawn.load(Ordering::Acquire) <= i {
                    std::thread::sleep(std::time::Duration::from_micros(100));
                }
                let mut back = source.replace(spare).unwrap();
                // Refilled the moment it comes back, in two halves with a pause between, so
                // that a frame still reading it would catch it half old, half new.
                let half = back.len() / 2;
                for px in back[..half].chunks_exact_mut(4) {
                    px.copy_from_slice(&colour(k));
                }
                std::thread::sleep(std::time::Duration::from_micros(200));
                for px in back[half..].chunks_exact_mut(4) {
                    px.copy_from_slice(&colour(k));
                }
                spare = back;
            }
        })
    };
    let mut frames = 0;
    while !writer.is_finished() {
        let img = render_pixels(&mut renderer, &scene, width as u32, height as u32);
        let first = img.get_pixel(0, 0).0;
        assert!(
            (0..updates + 2).any(|k| colour(k) == first),
            "frame {frames}: {first:?} is no colour handed over"
        );
        for (x, y, px) in img.enumerate_pixels() {
            assert_eq!(
                px.0, first,
                "frame {frames}: two colours, at ({x}, {y}) and (0, 0)"
            );
        }
        frames += 1;
        drawn.store(frames, Ordering::Release);
    }
    writer.join().unwrap();
    let counters = renderer.counters();
    eprintln!(
        "{frames} frames, {} drawn in place, {} fell back to a copy",
        counters.textures_in_place, counters.in_place_fallbacks
    );
    assert!(
        frames >= updates,
        "{frames} frames for {updates} hand-overs"
    );
    if samples_in_place(&interop) {
        assert!(counters.textures_in_place > 0, "no frame drew in place");
    }
}

/// A 1-D source shown as an image (one row) is copied from its pages, with the same pixels:
/// lavapipe lays an image out over whole groups of four rows, so one row of 64 KiB needs
/// 256 KiB, more than the buffer's pages hold. The refusal names the image's size.
#[test]
fn a_1d_buffer_shown_as_an_image_is_copied_with_the_reason() {
    let interop = interop();
    let width = 16384; // 64 KiB of RGBA8: imported
    let layout = Layout::new(Shape::new(&[width]).unwrap(), ElementType::U8, 4).unwrap();
    let source =
        Arc::new(HostBufferSource::new(&interop, layout, image_bytes(1, width, 0)).unwrap());
    assert!(source.is_imported(), "{:?}", source.fallback_reason());
    let mut renderer = interop.renderer();
    let mut scene = Scene::new();
    scene.add(Image::new(source.clone()));
    // The first 256 samples, one pixel each.
    let (w, h) = (256u32, 1u32);
    let camera = common::pixel_camera(w, h);
    let target = renderer.create_target(w, h).unwrap();
    for frame in 0..2 {
        if frame > 0 {
            let _ = source.replace(image_bytes(1, width, frame)).unwrap();
        }
        renderer.render(&scene, &camera, &target).unwrap();
        let img = renderer.read_image(&target).unwrap();
        for x in 0..w {
            assert_pixel(&img, x, 0, pattern(x as usize, 0, frame), 0);
        }
    }
    let stats = source.stats();
    match source.in_place_refusal() {
        // lavapipe today: one row laid out over four (262144 bytes).
        Some(reason) => {
            assert!(reason.contains("16384 x 1"), "{reason}");
            assert_eq!((stats.in_place_images, stats.gpu_copies), (0, 2));
        }
        // A driver that lays a one-row image out as one row draws it in place (the pixels
        // above are then the image's), or a GPU copies it without asking.
        None if samples_in_place(&interop) => {
            assert_eq!((stats.in_place_images, stats.gpu_copies), (2, 0))
        }
        None => assert_eq!((stats.in_place_images, stats.gpu_copies), (0, 2)),
    }
}
