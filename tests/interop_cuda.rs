//! CUDA sources on an NVIDIA GPU: what a CUDA kernel wrote is what renders (pixels checked
//! against the kernel's documented pattern), a producer faster than the display never shows a
//! torn frame, and teardown in any order gives back the GPU memory (measured).
//!
//! Without the `cuda` feature, or without a CUDA driver, each test says on stderr that it
//! skipped and why; `SLUICE_REQUIRE_CUDA=1` (set by `scripts/device-cuda.sh`) turns a skip into
//! a failure. Errors that need no GPU (no driver, CUDA not enabled, memory of another device)
//! are checked everywhere.
#![cfg(target_os = "linux")]

mod common;

use std::io::Write;

/// Reports a skipped test where `cargo test` shows it (stderr is not captured when written to
/// directly), or fails it where CUDA is required.
fn skip(test: &str, reason: &str) {
    if std::env::var_os("SLUICE_REQUIRE_CUDA").is_some_and(|v| v != "0") {
        panic!("{test}: CUDA is required (SLUICE_REQUIRE_CUDA) but {reason}");
    }
    let _ = writeln!(std::io::stderr(), "SKIPPED {test}: {reason}");
}

#[cfg(not(feature = "cuda"))]
#[test]
fn cuda_tests_need_the_cuda_feature() {
    skip(
        "interop_cuda",
        "built without the `cuda` feature (run `cargo test --features cuda --test interop_cuda`)",
    );
}

#[cfg(feature = "cuda")]
mod cuda_tests {
    use std::sync::atomic::{AtomicBool, Ordering};
    use std::sync::Arc;
    use std::time::{Duration, Instant};

    use sluice::interop::cuda::{self, kernels, CudaInterop, CudaSource, CudaWritableSource};
    use sluice::interop::{Interop, InteropError, Pitches};
    use sluice::prelude::*;
    use sluice::{Changes, CudaMemory, DataSource, ReadRequest, ReadStatus, Residency};

    use sluice::interop::cuda::kernels::MeshGrid;
    use sluice::{Mesh, Shading, Volume};

    use super::common::{assert_triangles, expected_entry, render, render_pixels, Front};
    use super::skip;

    /// The interop device and its CUDA side, or `None` after reporting why the test skips.
    fn cuda_or_skip(test: &str) -> Option<(Interop, CudaInterop)> {
        if let Err(e) = cuda::driver_available() {
            skip(test, &e.to_string());
            return None;
        }
        let interop = Interop::with_options(&RendererOptions::from_env().unwrap())
            .expect("a Vulkan device with external memory");
        match interop.cuda() {
            Ok(cuda) => Some((interop, cuda)),
            Err(e) => {
                skip(test, &e.to_string());
                None
            }
        }
    }

    fn rgba(height: usize, width: usize) -> Layout {
        Layout::new(Shape::d2(height, width).unwrap(), ElementType::U8, 4).unwrap()
    }

    /// A source owning zeroed CUDA memory for `layout` at `pitches`, on a new stream.
    fn cuda_source(cuda: &CudaInterop, layout: &Layout, pitches: Pitches) -> Arc<CudaSource> {
        let stream = cuda.context().new_stream().unwrap();
        let slice = stream
            .alloc_zeros::<u8>(pitches.span(layout) as usize)
            .unwrap();
        Arc::new(CudaSource::from_slice(cuda, layout.clone(), pitches, slice).unwrap())
    }

    /// Fills an RGBA8 source with [`kernels::rgba8_pattern`] of `frame` on its stream, and
    /// publishes it.
    fn write_rgba_frame(cuda: &CudaInterop, source: &CudaSource, layout: &Layout, frame: u32) {
        let pitches = Pitches {
            row: source.memory().row_pitch,
            plane: source.memory().plane_pitch,
        };
        source
            .write(|slice| {
                let stream = slice.stream().clone();
                kernels::fill_rgba8_slice(cuda, &stream, slice, layout, pitches, frame)
            })
            .unwrap()
            .unwrap();
    }

    #[track_caller]
    fn assert_rgba_frame(img: &image::RgbaImage, frame: u32) {
        for (x, y, pixel) in img.enumerate_pixels() {
            let want = kernels::rgba8_pattern(x, y, 0, frame);
            assert_eq!(pixel.0, want, "frame {frame}, pixel ({x}, {y})");
        }
    }

    /// The frame (mod 256) a whole RGBA8 pattern image shows, or a description of the tear.
    fn frame_shown(img: &image::RgbaImage) -> Result<u32, String> {
        let frame = u32::from(img.get_pixel(0, 0).0[0]);
        for (x, y, pixel) in img.enumerate_pixels() {
            if pixel.0 != kernels::rgba8_pattern(x, y, 0, frame) {
                return Err(format!(
                    "pixel ({x}, {y}) is {:?}, but pixel (0, 0) says frame {frame}",
                    pixel.0
                ));
            }
        }
        Ok(frame)
    }

    #[test]
    fn user_cuda_memory_renders_what_the_kernel_wrote() {
        let Some((_interop, cuda)) = cuda_or_skip("user_cuda_memory_renders_what_the_kernel_wrote")
        else {
            return;
        };
        // 100 RGBA8 columns packed (400-byte rows), as PyTorch stores them: the renderer's
        // staging pitches them to 512.
        let layout = rgba(60, 100);
        let pitches = Pitches::packed(&layout);
        // Both paths: CUDA copying straight into a texture it maps as an array (the default),
        // and through a staging buffer and a copy on the renderer's queue.
        for direct in [true, false] {
            _interop.set_direct_cuda_textures(direct);
            let source = cuda_source(&cuda, &layout, pitches);
            let mut renderer = _interop.renderer();
            let mut scene = Scene::new();
            scene.add(Image::new(source.clone() as SharedSource));
            for frame in 0..3 {
                write_rgba_frame(&cuda, &source, &layout, frame);
                let img = render_pixels(&mut renderer, &scene, 100, 60);
                assert_rgba_frame(&img, frame);
            }
            let counters = renderer.counters();
            assert_eq!(
                counters.bytes_uploaded, 0,
                "nothing staged through the host"
            );
            assert_eq!(
                counters.textures_provided,
                if direct { 3 } else { 0 },
                "direct: {direct}"
            );
            assert_eq!(
                counters.device_bytes_copied,
                3 * layout.total_bytes() as u64
            );
        }
    }

    #[test]
    fn frames_in_flight_past_the_staging_pool_each_show_their_own_version() {
        let test = "frames_in_flight_past_the_staging_pool_each_show_their_own_version";
        let Some((interop, cuda)) = cuda_or_skip(test) else {
            return;
        };
        // 4K RGBA8 frames (33 MB): the renderer's 256 MiB of CUDA staging holds 8 of them, so
        // 20 frames drawn without waiting reuse buffers while earlier frames still read them.
        let layout = rgba(2160, 3840);
        let pitches = Pitches::packed(&layout);
        // Both paths: textures CUDA writes directly (a pool of 7 4K textures, each bound by
        // the proxy until the next frame) and staging buffers.
        for direct in [true, false] {
            interop.set_direct_cuda_textures(direct);
            let source = cuda_source(&cuda, &layout, pitches);
            let mut renderer = interop.renderer();
            let mut scene = Scene::new();
            scene.add(Image::new(source.clone() as SharedSource));
            // Whole frames, one sample per pixel: each draw then takes the GPU far longer
            // than the host needs to queue it, so later frames' copies come while earlier
            // frames still read their buffers.
            let camera = PanZoomCamera::new(Vec2::new(1920.0, 1080.0), 1.0);
            let targets: Vec<_> = (0..20)
                .map(|_| renderer.create_target(3840, 2160).unwrap())
                .collect();
            for (frame, target) in targets.iter().enumerate() {
                write_rgba_frame(&cuda, &source, &layout, frame as u32);
                renderer.render(&scene, &camera, target).unwrap();
            }
            for (frame, target) in targets.iter().enumerate() {
                let img = renderer.read_image(target).unwrap();
                // Every 7th row and column: 181,000 pixels a frame.
                for y in (0..2160).step_by(7) {
                    for x in (0..3840).step_by(7) {
                        let want = kernels::rgba8_pattern(x, y, 0, frame as u32);
                        assert_eq!(
                            img.get_pixel(x, y).0,
                            want,
                            "direct: {direct}, frame {frame}, pixel ({x}, {y})"
                        );
                    }
                }
            }
            let counters = renderer.counters();
            assert_eq!(counters.bytes_uploaded, 0);
            assert_eq!(counters.textures_provided, if direct { 20 } else { 0 });
        }
    }

    #[test]
    fn host_staging_is_an_explicit_opt_in_that_works_on_any_renderer() {
        let test = "host_staging_is_an_explicit_opt_in_that_works_on_any_renderer";
        let Some((_interop, cuda)) = cuda_or_skip(test) else {
            return;
        };
        let layout = rgba(40, 70);
        let pitches = Pitches::packed(&layout);
        let source = cuda_source(&cuda, &layout, pitches);
        write_rgba_frame(&cuda, &source, &layout, 11);
        // A renderer that cannot share memory refuses the source rather than stage it silently.
        let mut plain = super::common::renderer();
        let mut scene = Scene::new();
        scene.add(Image::new(source.clone() as SharedSource));
        let target = plain.create_target(70, 40).unwrap();
        let e = plain
            .render(&scene, &super::common::pixel_camera(70, 40), &target)
            .unwrap_err()
            .to_string();
        assert!(e.contains("never made silently"), "{e}");
        // Asked for, the host path works there.
        let staged = source.staged_through_host();
        assert!(staged.label().contains("staged through host memory"));
        let mut plain = super::common::renderer();
        let mut scene = Scene::new();
        scene.add(Image::new(Arc::new(staged) as SharedSource));
        let img = render_pixels(&mut plain, &scene, 70, 40);
        assert_rgba_frame(&img, 11);
        assert_eq!(plain.counters().bytes_uploaded, layout.total_bytes() as u64);
    }

    #[test]
    fn user_f32_memory_goes_through_the_colormap() {
        let Some((interop, cuda)) = cuda_or_skip("user_f32_memory_goes_through_the_colormap")
        else {
            return;
        };
        let layout = Layout::new(Shape::d2(16, 256).unwrap(), ElementType::F32, 1).unwrap();
        let pitches = Pitches::aligned(&layout);
        let source = cuda_source(&cuda, &layout, pitches);
        source
            .write(|slice| {
                let stream = slice.stream().clone();
                kernels::fill_f32_slice(&cuda, &stream, slice, &layout, pitches, 9)
            })
            .unwrap()
            .unwrap();
        let mut renderer = interop.renderer();
        let mut scene = Scene::new();
        scene.add(Image::new(source as SharedSource).with_colormap(Colormap::Viridis));
        let img = render_pixels(&mut renderer, &scene, 256, 16);
        for y in [0u32, 7, 15] {
            for x in 0..256u32 {
                let v = kernels::f32_pattern(x, y, 0, 9);
                let (want, near) = expected_entry(&Colormap::Viridis, v, [0.0, 1.0], 1.0);
                let got = img.get_pixel(x, y).0;
                assert!(
                    got == want || Some(got) == near,
                    "({x}, {y}) = {got:?}, want {want:?} for {v}"
                );
            }
        }
    }

    #[test]
    fn renderer_owned_memory_written_by_cuda_kernels() {
        let Some((interop, cuda)) = cuda_or_skip("renderer_owned_memory_written_by_cuda_kernels")
        else {
            return;
        };
        let layout = rgba(90, 130);
        let source = Arc::new(CudaWritableSource::new(&cuda, layout).unwrap());
        let stream = cuda.context().new_stream().unwrap();
        let mut renderer = interop.renderer();
        let mut scene = Scene::new();
        scene.add(Image::new(source.clone() as SharedSource));
        for frame in [3, 4, 200] {
            let write = source.begin_write(&stream).unwrap();
            assert!(source.begin_write(&stream).is_err(), "one write at a time");
            kernels::fill_rgba8(&write, frame).unwrap();
            write.end().unwrap();
            let img = render_pixels(&mut renderer, &scene, 130, 90);
            assert_rgba_frame(&img, frame);
        }
        assert_eq!(renderer.counters().bytes_uploaded, 0);
    }

    /// The triangles of [`kernels::mesh_position_pattern`] for `count` vertices, in screen
    /// coordinates under `Front`.
    fn pattern_triangles(count: u32, grid: MeshGrid, frame: u32) -> Vec<[[f32; 2]; 3]> {
        (0..count / 3)
            .map(|t| {
                [0, 1, 2].map(|c| {
                    let p = kernels::mesh_position_pattern(t * 3 + c, grid, frame);
                    [p[0], p[1]]
                })
            })
            .collect()
    }

    #[track_caller]
    fn assert_mesh(img: &image::RgbaImage, triangles: &[[[f32; 2]; 3]], what: &str) {
        assert_triangles(img, triangles);
        let red = img.pixels().filter(|p| p.0 == [255, 0, 0, 255]).count();
        assert!(red > 100, "{what}: only {red} pixels of the mesh drawn");
    }

    fn red_mesh(positions: SharedSource) -> Mesh {
        Mesh::new(positions)
            .with_shading(Shading::Unlit)
            .with_color([1.0, 0.0, 0.0, 1.0])
    }

    #[test]
    fn mesh_positions_a_cuda_kernel_wrote_draw_the_expected_triangles() {
        let test = "mesh_positions_a_cuda_kernel_wrote_draw_the_expected_triangles";
        let Some((interop, cuda)) = cuda_or_skip(test) else {
            return;
        };
        // 16 triangles on a 4 x 4 grid of 8-unit cells, shifted right by the frame.
        let grid = MeshGrid { side: 4, cell: 8 };
        let count = 48u32;
        let layout =
            Layout::new(Shape::new(&[count as usize]).unwrap(), ElementType::F32, 3).unwrap();
        let cam = Front { n: 32.0 };

        // User CUDA memory (a CudaSource): copied through the renderer's staging buffer.
        let stream = cuda.context().new_stream().unwrap();
        let slice = stream.alloc_zeros::<u8>(layout.total_bytes()).unwrap();
        let pitches = Pitches::packed(&layout);
        let user = Arc::new(CudaSource::from_slice(&cuda, layout.clone(), pitches, slice).unwrap());
        let mut renderer = interop.renderer();
        let mut scene = Scene::new();
        scene.add(red_mesh(user.clone() as SharedSource));
        for frame in [0, 3] {
            user.write(|slice| {
                let stream = slice.stream().clone();
                kernels::fill_mesh_positions_slice(&cuda, &stream, slice, &layout, grid, frame)
            })
            .unwrap()
            .unwrap();
            let img = render(&mut renderer, &scene, &cam, 32, 32);
            assert_mesh(
                &img,
                &pattern_triangles(count, grid, frame),
                &format!("CudaSource, frame {frame}"),
            );
        }
        assert_eq!(renderer.counters().bytes_uploaded, 0);

        // Renderer memory the kernel writes in place (a CudaWritableSource).
        let writable = Arc::new(CudaWritableSource::new(&cuda, layout.clone()).unwrap());
        let mut renderer = interop.renderer();
        let mut scene = Scene::new();
        scene.add(red_mesh(writable.clone() as SharedSource));
        for frame in [1, 6] {
            let write = writable.begin_write(&stream).unwrap();
            kernels::fill_mesh_positions(&write, grid, frame).unwrap();
            write.end().unwrap();
            let img = render(&mut renderer, &scene, &cam, 32, 32);
            assert_mesh(
                &img,
                &pattern_triangles(count, grid, frame),
                &format!("CudaWritableSource, frame {frame}"),
            );
        }
        assert_eq!(renderer.counters().bytes_uploaded, 0);
    }

    #[test]
    fn a_3d_cuda_source_renders_as_a_volume() {
        let Some((interop, cuda)) = cuda_or_skip("a_3d_cuda_source_renders_as_a_volume") else {
            return;
        };
        let n = 32usize;
        let layout = Layout::new(Shape::new(&[n, n, n]).unwrap(), ElementType::F32, 1).unwrap();
        // Packed, as PyTorch stores a contiguous tensor: the staging pitches rows to 256.
        let pitches = Pitches::packed(&layout);
        let source = cuda_source(&cuda, &layout, pitches);
        let frame = 5;
        source
            .write(|slice| {
                let stream = slice.stream().clone();
                kernels::fill_f32_slice(&cuda, &stream, slice, &layout, pitches, frame)
            })
            .unwrap()
            .unwrap();
        let mut renderer = interop.renderer();
        let mut scene = Scene::new();
        scene.add(
            Volume::new(source as SharedSource)
                .with_clim(0.0, 1.0)
                .unwrap()
                .with_interpolation(Interpolation::Nearest)
                .with_colormap(Colormap::Viridis),
        );
        let img = render(
            &mut renderer,
            &scene,
            &Front { n: n as f32 },
            n as u32,
            n as u32,
        );
        for y in 0..n as u32 {
            for x in 0..n as u32 {
                let max = (0..n as u32)
                    .map(|z| kernels::f32_pattern(x, y, z, frame))
                    .fold(0.0f32, f32::max);
                let (want, near) = expected_entry(&Colormap::Viridis, max, [0.0, 1.0], 1.0);
                let got = img.get_pixel(x, y).0;
                assert!(
                    got == want || Some(got) == near,
                    "pixel ({x}, {y}): {got:?}, MIP {max} -> {want:?}"
                );
            }
        }
        assert_eq!(renderer.counters().bytes_uploaded, 0);
        assert_eq!(
            renderer.counters().textures_provided,
            1,
            "CUDA wrote the 3-D texture directly"
        );
    }

    /// A CUDA thread writes frames into renderer-owned memory as fast as it can while the
    /// display draws and reads back: every frame shown is one whole frame.
    #[test]
    fn a_producer_faster_than_the_display_never_shows_a_torn_frame() {
        let test = "a_producer_faster_than_the_display_never_shows_a_torn_frame";
        let Some((interop, cuda)) = cuda_or_skip(test) else {
            return;
        };
        let (w, h) = (1024usize, 768usize);
        let writable = Arc::new(CudaWritableSource::new(&cuda, rgba(h, w)).unwrap());
        let user_layout = rgba(h, w);
        let pitches = Pitches::packed(&user_layout);
        let user_stream = cuda.context().new_stream().unwrap();
        let slice = user_stream
            .alloc_zeros::<u8>(pitches.span(&user_layout) as usize)
            .unwrap();
        let user =
            Arc::new(CudaSource::from_slice(&cuda, user_layout.clone(), pitches, slice).unwrap());

        let stop = Arc::new(AtomicBool::new(false));
        // Frames completed by the producer: the display starts once both sources hold one
        // (before that they hold zeros, which are no frame of the pattern).
        let produced = Arc::new(std::sync::atomic::AtomicU32::new(0));
        let producer = {
            let (writable, user, cuda, stop, produced) = (
                writable.clone(),
                user.clone(),
                cuda.clone(),
                stop.clone(),
                produced.clone(),
            );
            std::thread::spawn(move || {
                let stream = cuda.context().new_stream().unwrap();
                let mut frame = 0u32;
                while !stop.load(Ordering::Relaxed) {
                    frame += 1;
                    let write = writable.begin_write(&stream).unwrap();
                    kernels::fill_rgba8(&write, frame).unwrap();
                    write.end().unwrap();
                    user.write(|slice| {
                        let s = slice.stream().clone();
                        kernels::fill_rgba8_slice(&cuda, &s, slice, &user_layout, pitches, frame)
                    })
                    .unwrap()
                    .unwrap();
                    // Keep the queue of enqueued work short; a stream sync waits for this
                    // thread's own work only.
                    stream.synchronize().unwrap();
                    produced.store(frame, Ordering::Release);
                }
                frame
            })
        };
        let deadline = Instant::now() + Duration::from_secs(10);
        while produced.load(Ordering::Acquire) == 0 {
            assert!(
                Instant::now() < deadline,
                "the producer wrote no frame in 10 s"
            );
            std::thread::sleep(Duration::from_millis(1));
        }
        let mut renderer = interop.renderer();
        let mut shown = Vec::new();
        let start = Instant::now();
        for source in [
            writable.clone() as SharedSource,
            user.clone() as SharedSource,
        ] {
            let mut scene = Scene::new();
            scene.add(Image::new(source));
            // Until the first frame reaches the GPU (a write in progress makes the renderer
            // wait for the next one) the image is the background; after that every frame
            // must be one whole frame.
            let mut first = true;
            for _ in 0..30 {
                let img = render_pixels(&mut renderer, &scene, w as u32, h as u32);
                if first && img.pixels().all(|p| p.0 == [0, 0, 0, 255]) {
                    continue;
                }
                first = false;
                match frame_shown(&img) {
                    Ok(frame) => shown.push(frame),
                    Err(tear) => panic!("torn frame: {tear}"),
                }
            }
        }
        stop.store(true, Ordering::Relaxed);
        let produced = producer.join().unwrap();
        println!(
            "{test}: produced {produced} frames while drawing {} in {:?}; shown (mod 256): {shown:?}",
            shown.len(),
            start.elapsed()
        );
        assert!(produced > 1, "the producer ran");
    }

    /// GPU memory before and after: allocations of every path, then teardown in three orders.
    #[test]
    fn teardown_in_any_order_gives_back_gpu_memory() {
        let test = "teardown_in_any_order_gives_back_gpu_memory";
        let Some((_keep_interop, keep_cuda)) = cuda_or_skip(test) else {
            return;
        };
        let layout = rgba(2160, 3840);
        let frame_bytes = layout.total_bytes();
        let round = |order: usize| {
            // A device of its own, so that dropping the interop closes it (the shared one
            // stays open until the process exits).
            let interop = Interop::with_own_device(&RendererOptions::from_env().unwrap()).unwrap();
            let cuda = interop.cuda().unwrap();
            let stream = cuda.context().new_stream().unwrap();
            let pitches = Pitches::packed(&layout);
            let slice = stream
                .alloc_zeros::<u8>(pitches.span(&layout) as usize)
                .unwrap();
            let user =
                Arc::new(CudaSource::from_slice(&cuda, layout.clone(), pitches, slice).unwrap());
            let writable = Arc::new(CudaWritableSource::new(&cuda, layout.clone()).unwrap());
            let write = writable.begin_write(&stream).unwrap();
            kernels::fill_rgba8(&write, 1).unwrap();
            write.end().unwrap();
            let mut renderer = interop.renderer();
            let mut scene = Scene::new();
            scene.add(Image::new(user.clone() as SharedSource));
            scene.add(Image::new(writable.clone() as SharedSource));
            render_pixels(&mut renderer, &scene, 64, 64);
            renderer.wait_idle().unwrap();
            match order {
                0 => {
                    drop(scene);
                    drop(renderer);
                    drop((user, writable));
                    drop((cuda, interop));
                }
                1 => {
                    drop((cuda, interop));
                    drop((user, writable));
                    drop(renderer);
                    drop(scene);
                }
                _ => {
                    drop((user, writable));
                    drop((cuda, interop));
                    drop(scene);
                    drop(renderer);
                }
            }
            drop(stream);
        };
        let free = || keep_cuda.memory_info().unwrap().0 as i64;
        // A first round loads what stays loaded (driver state, the kernels' module).
        round(0);
        let before = free();
        for order in 0..3 {
            round(order);
            std::thread::sleep(Duration::from_millis(200));
            let after = free();
            println!(
                "{test}: order {order}: free GPU memory before {before} B, after {after} B (each round allocates over {} B)",
                3 * frame_bytes
            );
            assert!(
                (before - after).abs() < 16 << 20,
                "order {order}: {} bytes of GPU memory not given back",
                before - after
            );
        }
    }

    /// A source describing CUDA memory by hand, not through `CudaSource`.
    struct HandMade(CudaMemory, Layout);

    impl DataSource for HandMade {
        fn layout(&self) -> Layout {
            self.1.clone()
        }
        fn version(&self) -> Version {
            Version::INITIAL
        }
        fn changes_since(&self, since: Version) -> Changes {
            if since < Version::INITIAL {
                Changes::All
            } else {
                Changes::None
            }
        }
        fn residency(&self) -> Residency {
            Residency::Cuda(self.0)
        }
        fn read(
            &self,
            _: &ReadRequest<'_>,
            _: &mut [u8],
        ) -> Result<ReadStatus, sluice::SourceError> {
            Err(sluice::SourceError::Custom("device memory".into()))
        }
    }

    fn render_error(interop: &Interop, source: HandMade) -> String {
        let mut renderer = interop.renderer();
        let mut scene = Scene::new();
        scene.add(Image::new(Arc::new(source) as SharedSource));
        let target = renderer.create_target(8, 8).unwrap();
        renderer
            .render(&scene, &super::common::pixel_camera(8, 8), &target)
            .unwrap_err()
            .to_string()
    }

    fn hand_made(uuid: [u8; 16]) -> HandMade {
        let layout = rgba(8, 8);
        HandMade(
            CudaMemory {
                device_uuid: uuid,
                ptr: 0x1000,
                row_pitch: 32,
                plane_pitch: 256,
                stream: 0,
                ready_event: None,
            },
            layout,
        )
    }

    /// Runs everywhere: the CUDA settings belong to the `Interop` they are set on (and its
    /// clones), not to the device that `Interop`s on one adapter share, so one test's (or one
    /// part of a program's) choice does not change another's.
    #[test]
    fn cuda_settings_belong_to_the_interop_not_to_the_shared_device() {
        use sluice::interop::cuda::CudaArrayCopy;
        let options = RendererOptions::from_env().unwrap();
        let a = Interop::with_options(&options).expect("a Vulkan device with external memory");
        let b = Interop::with_options(&options).unwrap();
        assert!(a.device() == b.device(), "one device per adapter");
        a.set_direct_cuda_textures(false);
        a.set_cuda_array_copy(CudaArrayCopy::Texel);
        let clone = a.clone();
        assert!(!clone.direct_cuda_textures());
        assert_eq!(clone.cuda_array_copy(), CudaArrayCopy::Texel);
        assert!(b.direct_cuda_textures());
        assert_eq!(b.cuda_array_copy(), CudaArrayCopy::Wide);
    }

    /// Runs everywhere: the errors a machine without CUDA gives are clear.
    #[test]
    fn without_a_driver_or_cuda_enabled_the_errors_say_why() {
        let interop = Interop::with_options(&RendererOptions::from_env().unwrap())
            .expect("a Vulkan device with external memory");
        let e = render_error(&interop, hand_made(interop.device_uuid().0));
        assert!(e.contains("CUDA interop is not enabled"), "{e}");
        match cuda::driver_available() {
            Err(e) => {
                let text = e.to_string();
                assert!(text.contains("libcuda"), "{text}");
                let e = interop.cuda().unwrap_err();
                assert!(matches!(e, InteropError::NoCudaDriver(_)), "{e}");
            }
            // With a driver the no-driver half does not apply (not a skip: CUDA is here).
            Ok(()) => eprintln!(
                "without_a_driver_or_cuda_enabled_the_errors_say_why: the no-driver half does not \
                 apply, this machine has a CUDA driver"
            ),
        }
    }

    #[test]
    fn cuda_memory_of_another_device_or_described_by_hand_is_refused() {
        let test = "cuda_memory_of_another_device_or_described_by_hand_is_refused";
        let Some((interop, _cuda)) = cuda_or_skip(test) else {
            return;
        };
        let e = render_error(&interop, hand_made([7; 16]));
        assert!(e.contains("07070707-0707-0707-0707-070707070707"), "{e}");
        assert!(e.contains(&interop.device_uuid().to_string()), "{e}");
        let e = render_error(&interop, hand_made(interop.device_uuid().0));
        assert!(
            e.contains("must be shown through sluice's CudaSource"),
            "{e}"
        );
    }
}
