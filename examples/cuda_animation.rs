//! CUDA kernels animate two images, a volume and a mesh every frame, and sluice draws them
//! without the CPU ever touching a pixel or a vertex:
//!
//! - left, RGBA8 written by a kernel straight into memory the renderer owns and exported to
//!   CUDA (`CudaWritableSource`, with an explicit begin/end-write handoff);
//! - right, an f32 field in CUDA memory the program owns (`CudaSource`), copied device to
//!   device on its stream and shown through a colormap;
//! - a 96^3 f32 volume in CUDA memory (`CudaSource`), drawn as a maximum intensity projection;
//! - a mesh of 20,000 triangles whose f32x3 positions a kernel rewrites in renderer memory
//!   (`CudaWritableSource`) every frame, flat shaded.
//!
//! Run on a machine with an NVIDIA GPU: `cargo run --release --features cuda --example
//! cuda_animation`. It writes PNG frames of each (`cuda_animation-*.png`, `cuda_volume-*.png`,
//! `cuda_mesh-*.png`) and prints where they went; without CUDA it says why and exits.

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

    use sluice::interop::cuda::kernels::MeshGrid;
    use sluice::interop::cuda::{self, kernels, CudaSource, CudaWritableSource};
    use sluice::interop::{Interop, Pitches};
    use sluice::prelude::*;
    use sluice::{Mesh, OrbitCamera, Shading, Volume};

    const SIDE: usize = 384;
    const FRAMES: u32 = 48;
    const SAVE_EVERY: u32 = 12;
    const VOLUME_SIDE: usize = 96;
    const MESH_GRID: MeshGrid = MeshGrid { side: 100, cell: 4 };
    const MESH_VERTICES: usize = 3 * 20_000;

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

        let interop = Interop::with_options(&RendererOptions::from_env()?)?;
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

        // A volume in CUDA memory the program owns.
        let cube = Layout::new(
            Shape::new(&[VOLUME_SIDE, VOLUME_SIDE, VOLUME_SIDE])?,
            ElementType::F32,
            1,
        )?;
        let cube_pitches = Pitches::packed(&cube);
        let volume = Arc::new(CudaSource::from_slice(
            &cuda,
            cube.clone(),
            cube_pitches,
            stream.alloc_zeros::<u8>(cube.total_bytes())?,
        )?);
        let mut volume_scene = Scene::new();
        volume_scene.add(
            Volume::new(volume.clone() as SharedSource)
                .with_clim(0.0, 1.0)?
                .with_colormap(Colormap::Inferno),
        );
        let volume_camera =
            OrbitCamera::fit(Vec3::ZERO, Vec3::splat(VOLUME_SIDE as f32), 35.0, 25.0);

        // Mesh positions in renderer memory a kernel writes.
        let positions = Layout::new(Shape::new(&[MESH_VERTICES])?, ElementType::F32, 3)?;
        let mesh = Arc::new(CudaWritableSource::new(&cuda, positions)?);
        let mut mesh_scene = Scene::new();
        mesh_scene.add(
            Mesh::new(mesh.clone() as SharedSource)
                .with_shading(Shading::Flat)
                .with_color([0.3, 0.7, 1.0, 1.0]),
        );
        let extent = ((MESH_GRID.side + 1) * MESH_GRID.cell) as f32;
        let mesh_camera = OrbitCamera::fit(Vec3::ZERO, Vec3::new(extent, extent, 9.0), 20.0, 35.0);

        let mut renderer = interop.renderer();
        let view_target = renderer.create_target(SIDE as u32, SIDE as u32)?;
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
            volume
                .write(|slice| {
                    let s = slice.stream().clone();
                    kernels::fill_f32_slice(&cuda, &s, slice, &cube, cube_pitches, frame * 4)
                })
                .ok_or("the source owns its slice")??;
            let write = mesh.begin_write(&stream)?;
            kernels::fill_mesh_positions(&write, MESH_GRID, frame)?;
            write.end()?;
            let save = frame % SAVE_EVERY == 0;
            for (name, scene, camera, target) in [
                ("cuda_animation", &scene, &camera as &dyn Camera, &target),
                ("cuda_volume", &volume_scene, &volume_camera, &view_target),
                ("cuda_mesh", &mesh_scene, &mesh_camera, &view_target),
            ] {
                let _ = renderer.render(scene, camera, target)?;
                if save {
                    let path = out_dir.join(format!("{name}-{frame:03}.png"));
                    renderer.read_image(target)?.save(&path)?;
                    println!("frame {frame} -> {}", path.display());
                }
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
