//! Meshes: a generated surface, coloured by a scalar through a colormap, smooth-shaded, with
//! its wireframe; then a 1% edit of its vertices, which uploads about 1% of the bytes.
//!
//! Run with `cargo run --release --example mesh`; it prints where the PNGs went.

use std::path::PathBuf;
use std::sync::Arc;

use sluice::prelude::*;
use sluice::{Mesh, OrbitCamera, Shading};

const GRID: usize = 200;

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let out =
        PathBuf::from(std::env::var("SLUICE_OUT").unwrap_or_else(|_| "target/sluice-out".into()));
    std::fs::create_dir_all(&out)?;

    let height = |x: f32, y: f32| {
        let (u, v) = (x / GRID as f32 * 6.0 - 3.0, y / GRID as f32 * 6.0 - 3.0);
        25.0 * (-(u * u + v * v) / 3.0).exp() * (2.0 * u).cos() * (1.5 * v).sin()
    };
    // Vertices of a GRID x GRID lattice on the ground plane (x, z); height goes up, which is
    // -y in sluice's default 3-D view (rows of images grow downwards).
    let positions = Arc::new(ArraySource::with_channels(Array2::from_shape_fn(
        (GRID * GRID, 3),
        |(i, c)| {
            let (x, z) = ((i % GRID) as f32, (i / GRID) as f32);
            [x, -height(x, z), z][c]
        },
    ))?);
    let scalars = Arc::new(ArraySource::new(Array1::from_shape_fn(GRID * GRID, |i| {
        height((i % GRID) as f32, (i / GRID) as f32)
    }))?);
    let mut indices = Vec::with_capacity((GRID - 1) * (GRID - 1) * 6);
    for y in 0..GRID as u32 - 1 {
        for x in 0..GRID as u32 - 1 {
            let i = y * GRID as u32 + x;
            let g = GRID as u32;
            indices.extend_from_slice(&[i, i + 1, i + g + 1, i, i + g + 1, i + g]);
        }
    }
    let indices = Arc::new(ArraySource::new(Array1::from_vec(indices))?);

    let mut scene = Scene::new();
    let surface = Mesh::new(positions.clone())
        .with_indices(indices.clone())
        .with_scalars(scalars)
        .with_clim(-25.0, 25.0)?
        .with_colormap(Colormap::Viridis)
        .with_shading(Shading::Smooth)
        .with_light_direction([0.3, 1.0, 0.5]);
    scene.add(surface);

    let mut renderer = Renderer::with_options(RendererOptions::from_env()?)?;
    println!("adapter: {}", renderer.adapter_info().name);
    let target = renderer.create_target(640, 480)?;
    let g = GRID as f32;
    let camera = OrbitCamera::fit(
        Vec3::new(0.0, -25.0, 0.0),
        Vec3::new(g, 25.0, g),
        20.0,
        30.0,
    );
    renderer.render(&scene, &camera, &target)?;
    let path = out.join("mesh.png");
    renderer.read_image(&target)?.save(&path)?;
    println!("wrote {}", path.display());

    // The same surface as a wireframe, sharing the positions and indices buffers.
    let mut wire_scene = Scene::new();
    wire_scene.add(
        Mesh::new(positions.clone())
            .with_indices(indices)
            .with_color([0.15, 0.15, 0.2, 1.0])
            .with_shading(Shading::Flat)
            .with_wireframe([0.9, 0.9, 0.6, 1.0]),
    );
    let close = OrbitCamera::fit(
        Vec3::new(85.0, -20.0, 85.0),
        Vec3::new(115.0, 20.0, 115.0),
        20.0,
        30.0,
    );
    renderer.render(&wire_scene, &close, &target)?;
    let path = out.join("mesh-wireframe.png");
    renderer.read_image(&target)?.save(&path)?;
    println!("wrote {}", path.display());

    // Lift 1% of the vertices (400 of 40,000, one band of rows).
    let before = renderer.counters();
    positions.update::<f32>(Region::d1(GRID * 100, GRID * 2), |mut v| {
        for mut vertex in v.outer_iter_mut() {
            vertex[1] -= 4.0;
        }
    })?;
    renderer.render(&scene, &camera, &target)?;
    let path = out.join("mesh-edited.png");
    renderer.read_image(&target)?.save(&path)?;
    let d = renderer.counters().since(&before);
    println!(
        "edit of 1% of the vertices: {} of {} position bytes uploaded (the 1024-vertex chunks it touches); \
         smooth normals recomputed on the CPU: {} bytes; wrote {}",
        d.bytes_uploaded,
        GRID * GRID * 12,
        d.derived_bytes_uploaded,
        path.display()
    );
    Ok(())
}
