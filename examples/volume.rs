//! Volumes: one memory-mapped volume shown as a maximum intensity projection, translucent,
//! as an isosurface, and as three orthogonal slices, all from one 3-D texture uploaded once.
//!
//! Run with `cargo run --release --example volume`; it prints where the PNGs went.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use sluice::prelude::*;
use sluice::{npy_header, OrbitCamera, Slice, Volume, VolumeMode};

const N: usize = 128;

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let out =
        PathBuf::from(std::env::var("SLUICE_OUT").unwrap_or_else(|_| "target/sluice-out".into()));
    std::fs::create_dir_all(&out)?;
    let npy = out.join("cells.npy");
    write_cells(&npy)?;
    let source: SharedSource = Arc::new(MmapSource::open_npy(&npy)?);

    let mut renderer = Renderer::with_options(RendererOptions::from_env()?)?;
    println!("adapter: {}", renderer.adapter_info().name);
    let target = renderer.create_target(512, 512)?;
    let camera = OrbitCamera::fit(Vec3::ZERO, Vec3::splat(N as f32), 35.0, 25.0);

    let modes = [
        ("mip", VolumeMode::Mip, Colormap::Magma),
        (
            "translucent",
            VolumeMode::Translucent { attenuation: 0.08 },
            Colormap::Viridis,
        ),
        ("iso", VolumeMode::Iso { threshold: 0.45 }, Colormap::Plasma),
    ];
    // One volume visual whose mode and colormap change: the texture is uploaded once.
    let mut scene = Scene::new();
    let volume = scene.add(Volume::new(source.clone()).with_clim(0.0, 1.0)?);
    for (name, mode, colormap) in modes {
        let v = scene.volume_mut(volume).expect("a volume");
        v.set_mode(mode)?;
        v.set_colormap(colormap);
        renderer.render(&scene, &camera, &target)?;
        let path = out.join(format!("volume-{name}.png"));
        renderer.read_image(&target)?.save(&path)?;
        println!("wrote {}", path.display());
    }

    // Three slices through the centre, side by side, from the same texture (the volume stays
    // in the scene, hidden, so its texture is kept).
    scene.set_visible(volume, false);
    let half = N / 2;
    for (i, slice) in [Slice::Z(half), Slice::Y(half), Slice::X(half)]
        .into_iter()
        .enumerate()
    {
        let id = scene.add(
            Image::new(source.clone())
                .with_slice(slice)
                .with_clim(0.0, 1.0)?
                .with_colormap(Colormap::Magma),
        );
        scene.set_transform(
            id,
            Mat4::from_translation(Vec3::new(i as f32 * (N as f32 + 8.0), 0.0, 0.0)),
        );
    }
    let target = renderer.create_target((3 * N + 16) as u32, N as u32)?;
    let camera = PanZoomCamera::fit(
        Vec2::ZERO,
        Vec2::new((3 * N + 16) as f32, N as f32),
        target.size(),
    );
    renderer.render(&scene, &camera, &target)?;
    let path = out.join("volume-slices.png");
    renderer.read_image(&target)?.save(&path)?;
    println!("wrote {}", path.display());
    let c = renderer.counters();
    println!(
        "one {N}^3 f32 texture for 3 volume modes and 3 slices: {} bytes uploaded, {} texture(s) alive",
        c.bytes_uploaded, c.textures_alive
    );
    Ok(())
}

/// A volume of soft blobs ("cells") with a faint background, as a little-endian f32 .npy.
fn write_cells(path: &Path) -> std::io::Result<()> {
    let centres: Vec<[f32; 4]> = (0..24)
        .map(|i| {
            let f = i as f32;
            [
                20.0 + (f * 37.0) % 88.0,
                20.0 + (f * 53.0) % 88.0,
                20.0 + (f * 71.0) % 88.0,
                6.0 + (f * 13.0) % 9.0,
            ]
        })
        .collect();
    let mut f = std::io::BufWriter::new(std::fs::File::create(path)?);
    f.write_all(&npy_header(ElementType::F32, &[N, N, N]))?;
    for z in 0..N {
        for y in 0..N {
            for x in 0..N {
                let p = [x as f32, y as f32, z as f32];
                let mut v =
                    0.03 * (1.0 + (p[0] * 0.2).sin() * (p[1] * 0.15).cos() * (p[2] * 0.1).sin());
                for c in &centres {
                    let d2 = (p[0] - c[0]).powi(2) + (p[1] - c[1]).powi(2) + (p[2] - c[2]).powi(2);
                    v += (-d2 / (c[3] * c[3])).exp();
                }
                f.write_all(&v.min(1.0).to_le_bytes())?;
            }
        }
    }
    f.flush()
}
