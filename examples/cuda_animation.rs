//! CUDA kernels animate two images every frame, and sluice draws them without the CPU ever
//! touching a pixel:
//!
//! - left, RGBA8 written by a kernel straight into memory the renderer owns and exported to
//!   CUDA (`CudaWritableSource`, with an explicit begin/end-write handoff);
//! - right, an f32 field in CUDA memory the program owns (`CudaSource`), copied device to
//!   device on its stream and shown through a colormap.
//!
//! Run on a machine with an NVIDIA GPU: `cargo run --release --features cuda --example
//! cuda_animation`. It writes PNG frames and prints where they went; without CUDA it says why
//! and exits. (Volumes and meshes join once sluice has Volume and Mesh visuals: the sources and
//! the upload path already take 3-D layouts.)

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
    use std::path::PathBuf;
    use std::sync::Arc;

    use sluice::interop::cuda::{self, kernels, CudaSource, CudaWritableSource};
    use sluice::interop::{Interop, Pitches};
    use sluice::prelude::*;

    const SIDE: usize = 384;
    const FRAMES: u32 = 48;
    const SAVE_EVERY: u32 = 12;

    pub fn main() -> Result<(), Box<dyn std::error::Error>> {
        if let Err(e) = cuda::driver_available() {
            if std::env::var_os("SLUICE_REQUIRE_CUDA").is_some_and(|v| v != "0") {
                return Err(e.into());
            }
            println!("cuda_animation: nothing to do here: {e}");
            return Ok(());
        }
        let out_dir = PathBuf::from(
            std::env::var("SLUICE_OUT").unwrap_or_else(|_| "target/sluice-out".into()),
        );
        std::fs::create_dir_all(&out_dir)?;

        let interop = Interop::new()?;
        let cuda = interop.cuda()?;
        println!(
            "{} (UUID {}), CUDA device {}",
            interop.identity().name,
            interop.device_uuid(),
            cuda.context().ordinal()
        );
        let stream = cuda.context().new_stream()?;

        let rgba = Layout::new(Shape::d2(SIDE, SIDE)?, ElementType::U8, 4)?;
        let written = Arc::new(CudaWritableSource::new(&cuda, rgba)?);

        let field = Layout::new(Shape::d2(SIDE, SIDE)?, ElementType::F32, 1)?;
        let pitches = Pitches::packed(&field);
        let owned = Arc::new(CudaSource::from_slice(
            &cuda,
            field.clone(),
            pitches,
            stream.alloc_zeros::<u8>(pitches.span(&field) as usize)?,
        )?);

        let mut scene = Scene::new();
        scene.add(Image::new(written.clone() as SharedSource));
        let right =
            scene.add(Image::new(owned.clone() as SharedSource).with_colormap(Colormap::Viridis));
        scene.set_transform(
            right,
            Mat4::from_translation(Vec3::new(SIDE as f32 + 8.0, 0.0, 0.0)),
        );

        let mut renderer = interop.renderer();
        let (w, h) = (2 * SIDE as u32 + 8, SIDE as u32);
        let target = renderer.create_target(w, h)?;
        let camera = PanZoomCamera::fit(Vec2::ZERO, Vec2::new(w as f32, h as f32), target.size());
        for frame in 0..FRAMES {
            let write = written.begin_write(&stream)?;
            kernels::fill_rgba8(&write, frame * 3)?;
            write.end()?;
            owned
                .write(|slice| {
                    let s = slice.stream().clone();
                    kernels::fill_f32_slice(&cuda, &s, slice, &field, pitches, frame * 2)
                })
                .ok_or("the source owns its slice")??;
            let _ = renderer.render(&scene, &camera, &target)?;
            if frame % SAVE_EVERY == 0 {
                let path = out_dir.join(format!("cuda_animation-{frame:03}.png"));
                renderer.read_image(&target)?.save(&path)?;
                println!("frame {frame} -> {}", path.display());
            }
        }
        renderer.wait_idle()?;
        let counters = renderer.counters();
        println!(
            "{FRAMES} frames; bytes staged through the host: {}; GPU copies: {}",
            counters.bytes_uploaded, counters.copies_issued
        );
        Ok(())
    }
}
