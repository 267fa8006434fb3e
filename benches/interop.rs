//! CUDA interop benchmark (`cargo bench --features cuda --bench interop`; on the NVIDIA
//! machine through `scripts/device-cuda.sh`).
//!
//! A 3840 x 2160 RGBA8 frame in CUDA memory (written by a CUDA kernel) is brought to a drawn
//! texture three ways, in one run on one device, alternating so that drift hits all alike:
//!
//! - **sluice**: a `CudaSource`; each frame publishes a new version and draws it: a
//!   device-to-device copy on the producer's stream into renderer memory, a GPU copy into the
//!   texture, the draw, ordered by a shared semaphore.
//! - **naive**: the frame copied to host memory (`cuMemcpyDtoH` into an `ArraySource`'s array)
//!   and uploaded the normal way (staging ring, `copy_buffer_to_texture`), then drawn.
//! - **ceiling**: a bare `cuMemcpyDtoD` of the same bytes (no texture, no draw).
//!
//! Each sluice and naive iteration ends with `Renderer::wait_idle` (latency per frame);
//! throughput runs draw `SLUICE_BENCH_BATCH` frames (default 20) before waiting. Medians of
//! `SLUICE_BENCH_ITERS` (default 15) timed iterations after `SLUICE_BENCH_WARMUP` (default 3)
//! are reported, with ratios: naive / sluice (target >= 50) and sluice / ceiling.
//! `SLUICE_BENCH_STRICT=1` makes a missed target exit with status 1. Without CUDA it says so
//! and exits 0 (2 with `SLUICE_REQUIRE_CUDA=1`).
//!
//! Then, with fewer iterations (`SLUICE_BENCH_VOLUME_ITERS`, default 5):
//!
//! - **volume**: a 512^3 f32 volume (512 MiB) written by a CUDA kernel, to a drawn MIP on a
//!   256 x 256 target: sluice (`CudaSource`, D2D + GPU copy into the 3-D texture + ray march)
//!   vs naive (`cuMemcpyDtoH` + host upload + ray march) vs a bare `cuMemcpyDtoD`.
//! - **mesh**: frames per second of a 10,000,002-vertex mesh (3,333,334 triangles; 120 MB of
//!   f32x3 positions) whose positions a CUDA kernel rewrites every frame, flat shaded on a
//!   256 x 256 target, `SLUICE_BENCH_MESH_FRAMES` (default 120) frames: positions in renderer
//!   memory the kernel writes in place (`CudaWritableSource`) and in user CUDA memory
//!   (`CudaSource`).
//!
//! `SLUICE_BENCH_ONLY=image,volume,mesh` (any subset) runs only those parts.
//!
//! `SLUICE_BENCH_ONLY=diag` (never part of the default run) prints the timing diagnostics of
//! `sluice::interop::cuda::diagnostics` instead: how long CUDA takes to fill a 4K texture each
//! way (linear copy, `cuMemcpy3D`, the surface kernels), frames in flight taken apart per path
//! and target size, and an emulated draw straight from staging. `scripts/device-cuda.sh remote
//! diag` runs it on the NVIDIA machine.

// Sharing memory by file descriptor is Linux-only.
#[cfg(not(target_os = "linux"))]
fn main() {
    println!("this example needs Linux (Vulkan memory shared by file descriptor)");
}

#[cfg(target_os = "linux")]
mod common;

#[cfg(target_os = "linux")]
fn main() -> Result<(), Box<dyn std::error::Error>> {
    linux::main()
}

#[cfg(target_os = "linux")]
mod linux {
    use std::sync::Arc;
    use std::time::{Duration, Instant};

    use sluice::interop::cuda::cudarc::driver::{CudaSlice, CudaStream};
    use sluice::interop::cuda::kernels::MeshGrid;
    use sluice::interop::cuda::{
        self, kernels, CudaArrayCopy, CudaInterop, CudaSource, CudaWritableSource,
    };
    use sluice::interop::{Interop, InteropError, Pitches, VulkanSource};
    use sluice::ndarray::Array3;
    use sluice::prelude::*;
    use sluice::{Mesh, RenderTarget, Residency, Shading, Volume};

    use crate::common::{env_usize, median, ms, Res};

    const WIDTH: usize = 3840;
    const HEIGHT: usize = 2160;
    const TARGET_SIDE: u32 = 512;
    const SPEEDUP_TARGET: f64 = 50.0;

    pub fn main() -> Res<()> {
        if std::env::args().any(|a| a == "--list") {
            return Ok(());
        }
        if let Err(e) = cuda::driver_available() {
            println!("interop bench: skipped: {e}");
            if std::env::var_os("SLUICE_REQUIRE_CUDA").is_some_and(|v| v != "0") {
                std::process::exit(2);
            }
            return Ok(());
        }
        let interop = Interop::with_options(&RendererOptions::from_env()?)?;
        // The bench's knob for the copy method (scripts/device-cuda.sh compares them).
        match std::env::var("SLUICE_CUDA_ARRAY_COPY").as_deref() {
            Ok("memcpy") => interop.set_cuda_array_copy(CudaArrayCopy::Memcpy3D),
            Ok("texel") => interop.set_cuda_array_copy(CudaArrayCopy::Texel),
            _ => {}
        }
        let cuda = interop.cuda()?;
        println!(
            "device: {} (Vulkan {}; CUDA ordinal {}, UUID {})",
            interop.identity().name,
            interop.identity().driver,
            cuda.context().ordinal(),
            cuda.device_uuid()
        );
        let only = std::env::var("SLUICE_BENCH_ONLY").unwrap_or_default();
        let listed = |part: &str| only.split(',').any(|p| p.trim() == part);
        let run = |part: &str| only.trim().is_empty() || listed(part);
        let mut met = true;
        if listed("diag") {
            diagnostics(&interop)?;
        }
        if run("image") {
            met &= image(&interop, &cuda)?;
        }
        if run("volume") {
            volume(&interop, &cuda)?;
        }
        if run("mesh") {
            mesh(&interop, &cuda)?;
        }
        if !met && std::env::var_os("SLUICE_BENCH_STRICT").is_some_and(|v| v != "0") {
            std::process::exit(1);
        }
        Ok(())
    }

    /// The CUDA paths' timing diagnostics, printed (see the module docs).
    fn diagnostics(interop: &Interop) -> Res<()> {
        println!("== timing diagnostics");
        println!("{}", cuda::diagnostics::array_fill_speed(interop)?);
        for row in cuda::diagnostics::in_flight_breakdown(interop)? {
            println!("{row}");
        }
        println!(
            "{}",
            cuda::diagnostics::emulated_draw_from_staging(interop)?
        );
        Ok(())
    }

    /// The data both paths start from, in fresh CUDA memory on `stream` (rows packed): the
    /// source sluice reads and a twin the naive path reads, both filled by the kernel `fill`
    /// launches, and a destination for the bare device-to-device copy. Returns once the
    /// kernels are done.
    fn kernel_frames(
        cuda: &CudaInterop,
        stream: &Arc<CudaStream>,
        layout: &Layout,
        fill: impl Fn(&Arc<CudaStream>, &mut CudaSlice<u8>) -> Result<(), InteropError>,
    ) -> Res<(Arc<CudaSource>, CudaSlice<u8>, CudaSlice<u8>)> {
        let bytes = layout.total_bytes();
        let source = Arc::new(CudaSource::from_slice(
            cuda,
            layout.clone(),
            Pitches::packed(layout),
            stream.alloc_zeros::<u8>(bytes)?,
        )?);
        source
            .write(|slice| fill(&slice.stream().clone(), slice))
            .ok_or("source owns its slice")??;
        let mut twin = stream.alloc_zeros::<u8>(bytes)?;
        fill(stream, &mut twin)?;
        let copy_dst = stream.alloc_zeros::<u8>(bytes)?;
        stream.synchronize()?;
        Ok((source, twin, copy_dst))
    }

    /// The 4K RGBA8 frame; returns whether the speedup target was met.
    fn image(interop: &Interop, cuda: &CudaInterop) -> Res<bool> {
        let iters = env_usize("SLUICE_BENCH_ITERS", 15)?.max(1);
        let warmup = env_usize("SLUICE_BENCH_WARMUP", 3)?;
        let batch = env_usize("SLUICE_BENCH_BATCH", 20)?.max(1);
        let layout = Layout::new(Shape::d2(HEIGHT, WIDTH)?, ElementType::U8, 4)?;
        let pitches = Pitches::packed(&layout);
        let bytes = layout.total_bytes();
        let stream = cuda.context().new_stream()?;
        let (source, twin, mut copy_dst) = kernel_frames(cuda, &stream, &layout, |s, slice| {
            kernels::fill_rgba8_slice(cuda, s, slice, &layout, pitches, 7)
        })?;

        let naive = Arc::new(ArraySource::with_channels(Array3::<u8>::zeros((
            HEIGHT, WIDTH, 4,
        )))?);
        let mut renderer = interop.renderer();
        let target = renderer.create_target(TARGET_SIDE, TARGET_SIDE)?;
        let camera = PanZoomCamera::fit(
            Vec2::ZERO,
            Vec2::new(WIDTH as f32, HEIGHT as f32),
            target.size(),
        );
        let mut sluice_scene = Scene::new();
        sluice_scene.add(Image::new(source.clone() as SharedSource));
        let mut naive_scene = Scene::new();
        naive_scene.add(Image::new(naive.clone() as SharedSource));
        let full = layout.shape().full_region();

        // CPU time of publish + render calls in the frames-in-flight runs.
        let cpu = std::cell::RefCell::new(Vec::new());
        let sluice_frame = |renderer: &mut Renderer, frames: usize| -> Res<Duration> {
            let start = Instant::now();
            for _ in 0..frames {
                let call = Instant::now();
                source.publish();
                let stats = renderer.render(&sluice_scene, &camera, &target)?;
                if frames > 1 {
                    cpu.borrow_mut().push(call.elapsed());
                }
                assert_eq!(
                    stats.bytes_uploaded, 0,
                    "the sluice path stages nothing on the host"
                );
            }
            renderer.wait_idle()?;
            Ok(start.elapsed() / frames as u32)
        };
        let naive_frame = |renderer: &mut Renderer, frames: usize| -> Res<Duration> {
            let start = Instant::now();
            for _ in 0..frames {
                naive.update::<u8>(full, |mut view| {
                    let host = view.as_slice_mut().expect("a whole array is contiguous");
                    stream.memcpy_dtoh(&twin, host).expect("cuMemcpyDtoH");
                })?;
                stream.synchronize()?;
                let stats = renderer.render(&naive_scene, &camera, &target)?;
                assert_eq!(
                    stats.bytes_uploaded as usize, bytes,
                    "the naive path uploads the frame"
                );
            }
            renderer.wait_idle()?;
            Ok(start.elapsed() / frames as u32)
        };
        // The frame alone: the same scene drawn again, whole, with nothing new to copy.
        let draw_only = |renderer: &mut Renderer, frames: usize| -> Res<Duration> {
            // A version another renderer published is taken first, untimed.
            renderer.render(&sluice_scene, &camera, &target)?;
            renderer.wait_idle()?;
            let start = Instant::now();
            for _ in 0..frames {
                target.invalidate();
                renderer.render(&sluice_scene, &camera, &target)?;
            }
            renderer.wait_idle()?;
            Ok(start.elapsed() / frames as u32)
        };
        let mut ceiling = |frames: usize| -> Res<Duration> {
            let start = Instant::now();
            for _ in 0..frames {
                stream.memcpy_dtod(&twin, &mut copy_dst)?;
            }
            stream.synchronize()?;
            Ok(start.elapsed() / frames as u32)
        };

        // Copy speed into memory the renderer exported (what the sluice path writes), against
        // plain CUDA memory (the ceiling): 20 copies per sync.
        let exported = CudaWritableSource::new(cuda, layout.clone())?;
        let into_exported = |per_write: bool| -> Res<Duration> {
            use sluice::interop::cuda::cudarc::driver::{result, DevicePtr};
            let start = Instant::now();
            let mut write = Some(exported.begin_write(&stream)?);
            for _ in 0..batch {
                let (src, _guard) = twin.device_ptr(&stream);
                let dst = write.as_ref().expect("open").ptr();
                // SAFETY: both are live device allocations of at least `bytes` bytes, on
                // this context; the stream is the one both are used on.
                unsafe { result::memcpy_dtod_async(dst, src, bytes, stream.cu_stream()) }?;
                if per_write {
                    write.take().expect("open").end()?;
                    write = Some(exported.begin_write(&stream)?);
                }
            }
            write.take().expect("open").end()?;
            stream.synchronize()?;
            Ok(start.elapsed() / batch as u32)
        };
        for _ in 0..3 {
            into_exported(false)?;
        }
        let mut plain = Vec::new();
        let mut exp = Vec::new();
        let mut exp_handoff = Vec::new();
        for _ in 0..iters {
            plain.push(ceiling(batch)?);
            exp.push(into_exported(false)?);
            exp_handoff.push(into_exported(true)?);
        }
        println!(
            "copy of the frame's bytes, {batch} per sync: into plain CUDA memory {:.3} ms, into \
             renderer-exported memory {:.3} ms, the same with a begin/end-write handoff each {:.3} ms",
            ms(median(&plain)),
            ms(median(&exp)),
            ms(median(&exp_handoff))
        );

        // Correctness first: both paths draw the kernel's pattern.
        for scene in [&sluice_scene, &naive_scene] {
            source.publish();
            naive.update::<u8>(full, |mut view| {
                stream
                    .memcpy_dtoh(&twin, view.as_slice_mut().expect("contiguous"))
                    .expect("cuMemcpyDtoH");
            })?;
            stream.synchronize()?;
            let full_target = renderer.create_target(WIDTH as u32, HEIGHT as u32)?;
            let pixel_camera =
                PanZoomCamera::new(Vec2::new(WIDTH as f32 / 2.0, HEIGHT as f32 / 2.0), 1.0);
            let _ = renderer.render(scene, &pixel_camera, &full_target)?;
            let img = renderer.read_image(&full_target)?;
            for (x, y) in [(0, 0), (1234, 567), (3839, 2159), (17, 2000)] {
                let got = img.get_pixel(x, y).0;
                let want = kernels::rgba8_pattern(x, y, 0, 7);
                if got != want {
                    return Err(
                        format!("pixel ({x}, {y}) is {got:?}, the kernel wrote {want:?}").into(),
                    );
                }
            }
        }

        // Where an in-flight sluice frame's time goes (not judged): the GPU copy and draw
        // alone, from a Vulkan buffer with no CUDA work in the frame; then the same with a CUDA
        // copy into that buffer before each frame and no ordering between the two APIs (those
        // frames may show torn data: only their time is of interest).
        let shared = CudaWritableSource::new(cuda, layout.clone())?;
        let Residency::Vulkan(mut memory) = shared.residency() else {
            return Err("a CudaWritableSource is in Vulkan memory".into());
        };
        memory.semaphore = None;
        let unordered = Arc::new(VulkanSource::new(layout.clone(), memory)?);
        let mut unordered_scene = Scene::new();
        unordered_scene.add(Image::new(unordered.clone() as SharedSource));
        // Semaphores of the renderer's device, to see what waiting on and signalling an
        // exportable timeline semaphore costs a submit (diagnostic 1: signal; 2: wait for a
        // value signalled from the host before; 3: wait for a value the host signals right
        // after the submit).
        let signalled = interop.create_semaphore()?;
        let waited = interop.create_semaphore()?;
        let waited_late = interop.create_semaphore()?;
        // 4: wait for a value CUDA signals on the stream (after its copy, if any); 5: the same,
        // and signal another semaphore CUDA imported (but never waits on) after the submit.
        let cuda_signalled = interop.create_semaphore()?;
        let cuda_side = diag::import_semaphore(cuda, cuda_signalled.export_fd()?)?;
        let signalled_back = interop.create_semaphore()?;
        let _imported_back = diag::import_semaphore(cuda, signalled_back.export_fd()?)?;
        let mut values = 0u64;
        let mut unordered_frames =
            |renderer: &mut Renderer, with_cuda: bool, semaphores: u8| -> Res<Duration> {
                use sluice::interop::cuda::cudarc::driver::{result, DevicePtr};
                let write = shared.begin_write(&stream)?;
                let start = Instant::now();
                for _ in 0..batch {
                    values += 1;
                    if semaphores == 1 {
                        signalled.signal_after_next_submit(values);
                    }
                    if semaphores == 2 {
                        waited.signal(values)?;
                        waited.wait_before_next_submit(values);
                    }
                    if semaphores == 3 {
                        waited_late.wait_before_next_submit(values);
                    }
                    if semaphores == 4 {
                        cuda_signalled.wait_before_next_submit(values);
                    }
                    if semaphores == 5 {
                        cuda_signalled.wait_before_next_submit(values);
                        signalled_back.signal_after_next_submit(values);
                    }
                    if with_cuda {
                        let (src, _guard) = twin.device_ptr(&stream);
                        // SAFETY: both are live device allocations of at least `bytes` bytes on
                        // this context; the stream is the one both are used on.
                        unsafe {
                            result::memcpy_dtod_async(write.ptr(), src, bytes, stream.cu_stream())
                        }?;
                    }
                    if semaphores == 4 {
                        diag::signal(&cuda_side, &stream, values)?;
                    }
                    if semaphores == 5 {
                        diag::signal(&cuda_side, &stream, values)?;
                    }
                    unordered.publish();
                    renderer.render(&unordered_scene, &camera, &target)?;
                    if semaphores == 3 {
                        waited_late.signal(values)?;
                    }
                }
                renderer.wait_idle()?;
                stream.synchronize()?;
                let per_frame = start.elapsed() / batch as u32;
                write.end()?;
                Ok(per_frame)
            };
        let (mut vulkan_only, mut both_unordered) = (Vec::new(), Vec::new());
        let (mut with_signal, mut with_wait, mut with_late) = (Vec::new(), Vec::new(), Vec::new());
        let (mut cuda_wait, mut cuda_copy_wait, mut both_ways) =
            (Vec::new(), Vec::new(), Vec::new());
        for i in 0..warmup + iters {
            let v = unordered_frames(&mut renderer, false, 0)?;
            let b = unordered_frames(&mut renderer, true, 0)?;
            let s1 = unordered_frames(&mut renderer, false, 1)?;
            let s2 = unordered_frames(&mut renderer, false, 2)?;
            let s3 = unordered_frames(&mut renderer, false, 3)?;
            let s4 = unordered_frames(&mut renderer, false, 4)?;
            let s5 = unordered_frames(&mut renderer, true, 4)?;
            let s6 = unordered_frames(&mut renderer, true, 5)?;
            if i >= warmup {
                both_ways.push(s6);
                cuda_wait.push(s4);
                cuda_copy_wait.push(s5);
                with_late.push(s3);
                vulkan_only.push(v);
                both_unordered.push(b);
                with_signal.push(s1);
                with_wait.push(s2);
            }
        }
        println!(
            "where a frame in flight goes: GPU copy + draw from a Vulkan buffer, no CUDA: {:.3} ms/frame; \
             with a CUDA copy into it before each frame, unordered: {:.3} ms/frame; \
             no CUDA, each submit signalling a shared timeline semaphore: {:.3} ms/frame; \
             no CUDA, each submit waiting for a shared semaphore value already reached: {:.3} ms/frame; \
             no CUDA, each submit waiting for a value the host signals just after it: {:.3} ms/frame; \
             each submit waiting for a value CUDA signals (nothing else on the stream): {:.3} ms/frame; \
             the same after a CUDA copy into the buffer: {:.3} ms/frame; \
             the same with the renderer signalling another semaphore CUDA imported after each frame: {:.3} ms/frame",
            ms(median(&vulkan_only)),
            ms(median(&both_unordered)),
            ms(median(&with_signal)),
            ms(median(&with_wait)),
            ms(median(&with_late)),
            ms(median(&cuda_wait)),
            ms(median(&cuda_copy_wait)),
            ms(median(&both_ways))
        );

        // Profiling (`device-cuda.sh remote profile`): only sluice frames in flight, for the
        // given seconds, so that a profile of the process is a profile of them.
        let profile_secs = env_usize("SLUICE_BENCH_PROFILE_SECS", 0)?;
        if profile_secs > 0 {
            let until = Instant::now() + Duration::from_secs(profile_secs as u64);
            let mut frames = Vec::new();
            while Instant::now() < until {
                frames.push(sluice_frame(&mut renderer, batch)?);
            }
            println!(
                "profiling: {} batches of {batch} sluice frames in flight, median {:.3} ms/frame, CPU of publish + render {:.3} ms/frame",
                frames.len(),
                ms(median(&frames)),
                ms(median(&cpu.take()))
            );
            return Ok(true);
        }

        // The staging path (a CUDA copy into a buffer, then a GPU copy into the texture), for
        // comparison, in a renderer of its own: its proxy stays on that path, as it does for a
        // user who turned the direct path off (a proxy switching paths remakes its texture).
        let mut staging_renderer = interop.renderer();
        let staging_target = staging_renderer.create_target(TARGET_SIDE, TARGET_SIDE)?;
        let mut staging_frame = |frames: usize| -> Res<Duration> {
            interop.set_direct_cuda_textures(false);
            let start = Instant::now();
            for _ in 0..frames {
                source.publish();
                staging_renderer.render(&sluice_scene, &camera, &staging_target)?;
            }
            staging_renderer.wait_idle()?;
            interop.set_direct_cuda_textures(true);
            Ok(start.elapsed() / frames as u32)
        };
        let (mut s_lat, mut n_lat, mut c_lat, mut s_thr, mut n_thr) =
            (Vec::new(), Vec::new(), Vec::new(), Vec::new(), Vec::new());
        let (mut d_lat, mut d_thr) = (Vec::new(), Vec::new());
        let (mut st_lat, mut st_thr) = (Vec::new(), Vec::new());
        // One bare copy and its synchronize: CUDA's round trip from enqueue to the host seeing
        // it done, on this machine.
        let mut single = Vec::new();
        for i in 0..warmup + iters {
            let s1 = sluice_frame(&mut renderer, 1)?;
            let n1 = naive_frame(&mut renderer, 1)?;
            let c1 = ceiling(1)?;
            let sb = sluice_frame(&mut renderer, batch)?;
            let st1 = staging_frame(1)?;
            let stb = staging_frame(batch)?;
            let nb = naive_frame(&mut renderer, batch.min(5))?;
            let d1 = draw_only(&mut renderer, 1)?;
            let db = draw_only(&mut renderer, batch)?;
            if i >= warmup {
                d_lat.push(d1);
                d_thr.push(db);
                st_lat.push(st1);
                st_thr.push(stb);
                s_lat.push(s1);
                n_lat.push(n1);
                c_lat.push(ceiling(batch)?.min(c1));
                single.push(c1);
                s_thr.push(sb);
                n_thr.push(nb);
            }
        }
        // Steady state (not judged): ten times the batch before one wait, so the pipeline's
        // fill and drain weigh a tenth as much.
        let mut steady = Vec::new();
        for _ in 0..3 {
            steady.push(sluice_frame(&mut renderer, batch * 10)?);
        }
        let steady = median(&steady);
        let (s_lat, n_lat, c_lat, s_thr, n_thr) = (
            median(&s_lat),
            median(&n_lat),
            median(&c_lat),
            median(&s_thr),
            median(&n_thr),
        );
        let (d_lat, d_thr) = (median(&d_lat), median(&d_thr));
        let single = median(&single);
        let gb = bytes as f64 / 1e9;
        println!("4K RGBA8 frame ({bytes} bytes) from CUDA memory to a drawn {TARGET_SIDE}x{TARGET_SIDE} target, medians of {iters}:");
        println!(
            "  sluice  (CUDA copy into the texture + draw), waiting each frame: {:8.3} ms",
            ms(s_lat)
        );
        println!(
            "  sluice, {batch} frames before waiting:                {:8.3} ms/frame",
            ms(s_thr)
        );
        println!(
            "  sluice, {} frames before waiting (steady state, not judged): {:.3} ms/frame ({:.1}x the naive frame in flight)",
            batch * 10,
            ms(steady),
            n_thr.as_secs_f64() / steady.as_secs_f64()
        );
        println!(
            "  sluice, staging path (D2D + GPU copy + draw): waiting each frame {:.3} ms; {batch} before waiting {:.3} ms/frame ({:.1}x the naive frame in flight)",
            ms(median(&st_lat)),
            ms(median(&st_thr)),
            n_thr.as_secs_f64() / median(&st_thr).as_secs_f64()
        );
        println!(
            "  sluice, CPU time of publish + render per frame (in flight): {:.3} ms",
            ms(median(&cpu.take()))
        );
        println!(
            "  sluice, frame with nothing new (draw only), waiting: {:8.3} ms; {batch} before waiting: {:.3} ms/frame",
            ms(d_lat),
            ms(d_thr)
        );
        println!(
            "  naive   (DtoH + upload + draw), waiting each frame: {:8.3} ms",
            ms(n_lat)
        );
        println!(
            "  naive, 5 frames before waiting:                     {:8.3} ms/frame",
            ms(n_thr)
        );
        println!(
            "  one bare cuMemcpyDtoD + stream synchronize (round trip): {:8.3} ms",
            ms(single)
        );
        println!(
            "  ceiling (bare cuMemcpyDtoD of the same bytes):      {:8.3} ms ({:.0} GB/s)",
            ms(c_lat),
            gb / c_lat.as_secs_f64()
        );
        let speedup = n_lat.as_secs_f64() / s_lat.as_secs_f64();
        let speedup_thr = n_thr.as_secs_f64() / s_thr.as_secs_f64();
        println!("  naive / sluice: {speedup:.1}x waiting each frame, {speedup_thr:.1}x in throughput (target >= {SPEEDUP_TARGET}x)");
        println!(
            "  sluice / ceiling: {:.1}x waiting each frame, {:.1}x in throughput",
            s_lat.as_secs_f64() / c_lat.as_secs_f64(),
            s_thr.as_secs_f64() / c_lat.as_secs_f64()
        );
        let met = speedup.max(speedup_thr) >= SPEEDUP_TARGET;
        println!("  target {}", if met { "met" } else { "MISSED" });
        Ok(met)
    }

    /// Raw CUDA semaphore calls for the bench's diagnostics (the library's own are private).
    mod diag {
        use std::mem::MaybeUninit;
        use std::os::fd::{AsRawFd, IntoRawFd, OwnedFd};

        use sluice::interop::cuda::cudarc::driver::{sys, CudaStream};
        use sluice::interop::cuda::CudaInterop;

        use super::Res;

        /// An imported semaphore, destroyed on drop (after the stream work that signals it:
        /// every diagnostic synchronizes its stream before returning).
        pub struct Semaphore(sys::CUexternalSemaphore);

        impl Drop for Semaphore {
            fn drop(&mut self) {
                // SAFETY: a live handle, destroyed once; no enqueued work still uses it (see
                // the type's note).
                let _ = unsafe { sys::cuDestroyExternalSemaphore(self.0) };
            }
        }

        pub fn import_semaphore(cuda: &CudaInterop, fd: OwnedFd) -> Res<Semaphore> {
            cuda.context().bind_to_thread()?;
            let desc = sys::CUDA_EXTERNAL_SEMAPHORE_HANDLE_DESC {
                type_: sys::CUexternalSemaphoreHandleType::CU_EXTERNAL_SEMAPHORE_HANDLE_TYPE_TIMELINE_SEMAPHORE_FD,
                handle: sys::CUDA_EXTERNAL_SEMAPHORE_HANDLE_DESC_st__bindgen_ty_1 {
                    fd: fd.as_raw_fd(),
                },
                flags: 0,
                reserved: [0; 16],
            };
            let mut semaphore = MaybeUninit::uninit();
            // SAFETY: `desc` is initialized and names an open fd we own, which CUDA owns once
            // the import succeeds.
            unsafe { sys::cuImportExternalSemaphore(semaphore.as_mut_ptr(), &desc) }.result()?;
            let _ = fd.into_raw_fd();
            // SAFETY: initialized by the successful call.
            Ok(Semaphore(unsafe { semaphore.assume_init() }))
        }

        pub fn signal(semaphore: &Semaphore, stream: &CudaStream, value: u64) -> Res<()> {
            // SAFETY: all-zero is a valid parameter block; only the fence value is set.
            let mut params: sys::CUDA_EXTERNAL_SEMAPHORE_SIGNAL_PARAMS =
                unsafe { std::mem::zeroed() };
            params.params.fence.value = value;
            // SAFETY: a live semaphore, an initialized parameter block and a live stream.
            unsafe {
                sys::cuSignalExternalSemaphoresAsync(&semaphore.0, &params, 1, stream.cu_stream())
            }
            .result()?;
            Ok(())
        }
    }

    /// Looks along +z at the box [0, n]^3, orthographic, filling the viewport.
    struct Front {
        n: f32,
    }

    impl Camera for Front {
        fn view_projection(&self, _viewport: [u32; 2]) -> Mat4 {
            let h = self.n / 2.0;
            let view = Mat4::look_to_rh(Vec3::new(h, h, -10.0), Vec3::Z, Vec3::NEG_Y);
            Mat4::orthographic_rh(-h, h, -h, h, 1.0, 10.0 + self.n + 10.0) * view
        }
    }

    /// Renders until no upload is pending (one frame unless a budget splits it).
    fn render_all(
        renderer: &mut Renderer,
        scene: &Scene,
        camera: &dyn Camera,
        target: &RenderTarget,
    ) -> Res<u64> {
        let mut bytes = 0;
        loop {
            let stats = renderer.render(scene, camera, target)?;
            bytes += stats.bytes_uploaded;
            if !stats.uploads_pending {
                return Ok(bytes);
            }
        }
    }

    /// A 512^3 f32 volume from CUDA memory to a drawn MIP.
    fn volume(interop: &Interop, cuda: &CudaInterop) -> Res<()> {
        const N: usize = 512;
        const FRAME: u32 = 11;
        let iters = env_usize("SLUICE_BENCH_VOLUME_ITERS", 5)?.max(1);
        let layout = Layout::new(Shape::new(&[N, N, N])?, ElementType::F32, 1)?;
        let pitches = Pitches::packed(&layout);
        let bytes = layout.total_bytes();
        let stream = cuda.context().new_stream()?;
        let (source, twin, mut copy_dst) = kernel_frames(cuda, &stream, &layout, |s, slice| {
            kernels::fill_f32_slice(cuda, s, slice, &layout, pitches, FRAME)
        })?;
        let naive = Arc::new(ArraySource::new(Array3::<f32>::zeros((N, N, N)))?);
        let full = layout.shape().full_region();
        let to_host = |naive: &ArraySource| -> Res<()> {
            naive.update::<f32>(full, |mut view| {
                let host = view.as_slice_mut().expect("a whole array is contiguous");
                stream
                    .memcpy_dtoh(&twin, bytemuck::cast_slice_mut::<f32, u8>(host))
                    .expect("cuMemcpyDtoH");
            })?;
            stream.synchronize()?;
            Ok(())
        };
        let volume = |s: SharedSource| -> Res<Volume> {
            Ok(Volume::new(s)
                .with_clim(0.0, 1.0)?
                .with_interpolation(Interpolation::Nearest)
                .with_colormap(Colormap::Viridis))
        };
        let mut sluice_scene = Scene::new();
        sluice_scene.add(volume(source.clone() as SharedSource)?);
        let mut naive_scene = Scene::new();
        naive_scene.add(volume(naive.clone() as SharedSource)?);
        let mut renderer = interop.renderer();
        renderer.set_upload_budget(None);
        let camera = Front { n: N as f32 };

        // Correctness: along every ray z runs over 512 values, so (x + 2y + 3z + frame) & 255
        // takes every residue and the MIP is 255/256 on every pixel, for both paths.
        let entries = Colormap::Viridis.entries();
        let top = ((255.0 / 256.0) * entries.len() as f32) as usize;
        let want = [
            entries[top.min(entries.len() - 1)],
            entries[top.saturating_sub(1)],
        ];
        to_host(&naive)?;
        let check_target = renderer.create_target(N as u32, N as u32)?;
        for (name, scene) in [("sluice", &sluice_scene), ("naive", &naive_scene)] {
            source.publish();
            render_all(&mut renderer, scene, &camera, &check_target)?;
            let img = renderer.read_image(&check_target)?;
            if let Some((x, y, p)) = img
                .enumerate_pixels()
                .find(|(_, _, p)| !want.contains(&p.0))
            {
                return Err(format!(
                    "volume, {name}: pixel ({x}, {y}) is {:?}, the CPU MIP gives {:?}",
                    p.0, want[0]
                )
                .into());
            }
        }

        let target = renderer.create_target(256, 256)?;
        // The staging path in a renderer of its own (see `image`).
        let mut staging_renderer = interop.renderer();
        staging_renderer.set_upload_budget(None);
        let staging_target = staging_renderer.create_target(256, 256)?;
        let (mut s_t, mut n_t, mut c_t) = (Vec::new(), Vec::new(), Vec::new());
        let mut st_t = Vec::new();
        for i in 0..iters + 1 {
            let start = Instant::now();
            source.publish();
            let staged = render_all(&mut renderer, &sluice_scene, &camera, &target)?;
            renderer.wait_idle()?;
            let s = start.elapsed();
            assert_eq!(staged, 0, "the sluice path stages nothing on the host");
            let start = Instant::now();
            to_host(&naive)?;
            let staged = render_all(&mut renderer, &naive_scene, &camera, &target)?;
            renderer.wait_idle()?;
            let n = start.elapsed();
            assert_eq!(staged as usize, bytes, "the naive path uploads the volume");
            let start = Instant::now();
            stream.memcpy_dtod(&twin, &mut copy_dst)?;
            stream.synchronize()?;
            let c = start.elapsed();
            interop.set_direct_cuda_textures(false);
            let start = Instant::now();
            source.publish();
            render_all(
                &mut staging_renderer,
                &sluice_scene,
                &camera,
                &staging_target,
            )?;
            staging_renderer.wait_idle()?;
            let st = start.elapsed();
            interop.set_direct_cuda_textures(true);
            if i > 0 {
                s_t.push(s);
                n_t.push(n);
                c_t.push(c);
                st_t.push(st);
            }
        }
        let (s, n, c) = (median(&s_t), median(&n_t), median(&c_t));
        println!("512^3 f32 volume ({bytes} bytes) from CUDA memory to a drawn 256x256 MIP, medians of {iters}, waiting each frame:");
        println!(
            "  sluice  (CUDA copy into the 3-D texture + ray march): {:9.3} ms",
            ms(s)
        );
        println!(
            "  sluice, staging path (D2D + GPU copy + ray march):    {:9.3} ms",
            ms(median(&st_t))
        );
        println!("  naive   (DtoH + upload + ray march):  {:9.3} ms", ms(n));
        println!(
            "  ceiling (bare cuMemcpyDtoD):          {:9.3} ms ({:.0} GB/s)",
            ms(c),
            bytes as f64 / 1e9 / c.as_secs_f64()
        );
        println!(
            "  naive / sluice: {:.1}x; sluice / ceiling: {:.1}x",
            n.as_secs_f64() / s.as_secs_f64(),
            s.as_secs_f64() / c.as_secs_f64()
        );
        Ok(())
    }

    /// Frames per second of a 10,000,002-vertex mesh whose positions a kernel rewrites each
    /// frame.
    fn mesh(interop: &Interop, cuda: &CudaInterop) -> Res<()> {
        const VERTICES: usize = 10_000_002;
        let frames = env_usize("SLUICE_BENCH_MESH_FRAMES", 120)?.max(1) as u32;
        let triangles = (VERTICES / 3) as u32;
        let grid = MeshGrid {
            side: (triangles as f64).sqrt().ceil() as u32,
            cell: 2,
        };
        let extent = ((grid.side + 1) * grid.cell) as f32;
        let layout = Layout::new(Shape::new(&[VERTICES])?, ElementType::F32, 3)?;
        let stream = cuda.context().new_stream()?;
        let mesh = |s: SharedSource| {
            Mesh::new(s)
                .with_shading(Shading::Flat)
                .with_color([0.3, 0.7, 1.0, 1.0])
        };
        let camera = Front { n: extent };

        // Renderer memory the kernel writes in place.
        let writable = Arc::new(CudaWritableSource::new(cuda, layout.clone())?);
        let mut renderer = interop.renderer();
        let target = renderer.create_target(256, 256)?;
        let mut scene = Scene::new();
        scene.add(mesh(writable.clone() as SharedSource));
        let frame_writable = |frame: u32, renderer: &mut Renderer| -> Res<()> {
            let write = writable.begin_write(&stream)?;
            kernels::fill_mesh_positions(&write, grid, frame)?;
            write.end()?;
            let stats = renderer.render(&scene, &camera, &target)?;
            assert_eq!(stats.bytes_uploaded, 0, "nothing staged on the host");
            Ok(())
        };
        for frame in 0..5 {
            frame_writable(frame, &mut renderer)?;
        }
        renderer.wait_idle()?;
        let start = Instant::now();
        for frame in 0..frames {
            frame_writable(frame, &mut renderer)?;
        }
        renderer.wait_idle()?;
        let writable_fps = frames as f64 / start.elapsed().as_secs_f64();
        let img = renderer.read_image(&target)?;
        let lit = img.pixels().filter(|p| p.0 != [0, 0, 0, 255]).count();
        drop(scene);
        drop(writable);

        // User CUDA memory, copied through the renderer's staging buffer.
        let user = Arc::new(CudaSource::from_slice(
            cuda,
            layout.clone(),
            Pitches::packed(&layout),
            stream.alloc_zeros::<u8>(layout.total_bytes())?,
        )?);
        let mut scene = Scene::new();
        scene.add(mesh(user.clone() as SharedSource));
        let frame_user = |frame: u32, renderer: &mut Renderer| -> Res<()> {
            user.write(|slice| {
                let s = slice.stream().clone();
                kernels::fill_mesh_positions_slice(cuda, &s, slice, &layout, grid, frame)
            })
            .ok_or("source owns its slice")??;
            let stats = renderer.render(&scene, &camera, &target)?;
            assert_eq!(stats.bytes_uploaded, 0, "nothing staged on the host");
            Ok(())
        };
        for frame in 0..5 {
            frame_user(frame, &mut renderer)?;
        }
        renderer.wait_idle()?;
        let start = Instant::now();
        for frame in 0..frames {
            frame_user(frame, &mut renderer)?;
        }
        renderer.wait_idle()?;
        let user_fps = frames as f64 / start.elapsed().as_secs_f64();

        println!(
            "{VERTICES}-vertex mesh ({} MB of f32x3 positions) rewritten by a CUDA kernel every frame, flat shaded, 256x256 target, {frames} frames:",
            VERTICES * 12 / 1_000_000
        );
        println!(
            "  renderer memory written in place (CudaWritableSource): {writable_fps:8.1} frames/s"
        );
        println!(
            "  user CUDA memory (CudaSource, D2D into staging):       {user_fps:8.1} frames/s"
        );
        // Each cell's lower-left half is covered, so about half the pixel centres are.
        println!("  ({lit} of 65536 pixels covered; about half expected)");
        if lit < 16_384 {
            return Err(format!("the mesh covers only {lit} of 65536 pixels").into());
        }
        Ok(())
    }
}
