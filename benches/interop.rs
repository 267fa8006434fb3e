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
//! Not measured yet: the 512^3 f32 volume and the 10,000,000-vertex mesh, which need the
//! Volume and Mesh visuals sluice does not have yet.

// Sharing memory by file descriptor is Linux-only.
#[cfg(not(target_os = "linux"))]
fn main() {
    println!("this example needs Linux (Vulkan memory shared by file descriptor)");
}

#[cfg(target_os = "linux")]
fn main() -> Result<(), Box<dyn std::error::Error>> {
    linux::main()
}

#[cfg(target_os = "linux")]
mod linux {
    use std::error::Error;
    use std::sync::Arc;
    use std::time::{Duration, Instant};

    use sluice::interop::cuda::{self, kernels, CudaSource};
    use sluice::interop::{Interop, Pitches};
    use sluice::ndarray::Array3;
    use sluice::prelude::*;

    type Res<T> = Result<T, Box<dyn Error>>;

    const WIDTH: usize = 3840;
    const HEIGHT: usize = 2160;
    const TARGET_SIDE: u32 = 512;
    const SPEEDUP_TARGET: f64 = 50.0;

    fn env_usize(name: &str, default: usize) -> usize {
        std::env::var(name)
            .ok()
            .and_then(|v| v.trim().parse().ok())
            .unwrap_or(default)
    }

    fn median(mut times: Vec<Duration>) -> Duration {
        times.sort();
        times[times.len() / 2]
    }

    fn ms(d: Duration) -> f64 {
        d.as_secs_f64() * 1e3
    }

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
        let iters = env_usize("SLUICE_BENCH_ITERS", 15).max(1);
        let warmup = env_usize("SLUICE_BENCH_WARMUP", 3);
        let batch = env_usize("SLUICE_BENCH_BATCH", 20).max(1);

        let interop = Interop::new()?;
        let cuda = interop.cuda()?;
        println!(
            "device: {} (Vulkan {}; CUDA ordinal {}, UUID {})",
            interop.identity().name,
            interop.identity().driver,
            cuda.context().ordinal(),
            cuda.device_uuid()
        );
        let layout = Layout::new(Shape::d2(HEIGHT, WIDTH)?, ElementType::U8, 4)?;
        let pitches = Pitches::packed(&layout);
        let bytes = layout.total_bytes();
        let stream = cuda.context().new_stream()?;

        // The frame, written by a CUDA kernel, in the source sluice reads and in a twin the naive
        // path reads.
        let source = Arc::new(CudaSource::from_slice(
            &cuda,
            layout.clone(),
            pitches,
            stream.alloc_zeros::<u8>(bytes)?,
        )?);
        source
            .write(|slice| {
                let s = slice.stream().clone();
                kernels::fill_rgba8_slice(&cuda, &s, slice, &layout, pitches, 7)
            })
            .ok_or("source owns its slice")??;
        let mut twin = stream.alloc_zeros::<u8>(bytes)?;
        kernels::fill_rgba8_slice(&cuda, &stream, &mut twin, &layout, pitches, 7)?;
        let mut copy_dst = stream.alloc_zeros::<u8>(bytes)?;
        stream.synchronize()?;

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

        let sluice_frame = |renderer: &mut Renderer, frames: usize| -> Res<Duration> {
            let start = Instant::now();
            for _ in 0..frames {
                source.publish();
                let stats = renderer.render(&sluice_scene, &camera, &target)?;
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
        let mut ceiling = |frames: usize| -> Res<Duration> {
            let start = Instant::now();
            for _ in 0..frames {
                stream.memcpy_dtod(&twin, &mut copy_dst)?;
            }
            stream.synchronize()?;
            Ok(start.elapsed() / frames as u32)
        };

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

        let (mut s_lat, mut n_lat, mut c_lat, mut s_thr, mut n_thr) =
            (Vec::new(), Vec::new(), Vec::new(), Vec::new(), Vec::new());
        for i in 0..warmup + iters {
            let s1 = sluice_frame(&mut renderer, 1)?;
            let n1 = naive_frame(&mut renderer, 1)?;
            let c1 = ceiling(1)?;
            let sb = sluice_frame(&mut renderer, batch)?;
            let nb = naive_frame(&mut renderer, batch.min(5))?;
            if i >= warmup {
                s_lat.push(s1);
                n_lat.push(n1);
                c_lat.push(ceiling(batch)?.min(c1));
                s_thr.push(sb);
                n_thr.push(nb);
            }
        }
        let (s_lat, n_lat, c_lat, s_thr, n_thr) = (
            median(s_lat),
            median(n_lat),
            median(c_lat),
            median(s_thr),
            median(n_thr),
        );
        let gb = bytes as f64 / 1e9;
        println!("4K RGBA8 frame ({bytes} bytes) from CUDA memory to a drawn {TARGET_SIDE}x{TARGET_SIDE} target, medians of {iters}:");
        println!(
            "  sluice  (D2D + GPU copy + draw), waiting each frame: {:8.3} ms",
            ms(s_lat)
        );
        println!(
            "  sluice, {batch} frames before waiting:                {:8.3} ms/frame",
            ms(s_thr)
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
        println!("  not measured: 512^3 f32 volume and 10,000,000-vertex mesh (no Volume or Mesh visual in sluice yet)");
        let met = speedup.max(speedup_thr) >= SPEEDUP_TARGET;
        println!("  target {}", if met { "met" } else { "MISSED" });
        if !met && std::env::var_os("SLUICE_BENCH_STRICT").is_some_and(|v| v != "0") {
            std::process::exit(1);
        }
        Ok(())
    }
}
