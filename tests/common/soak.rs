//! The long-session workload shared by the soak test (tests/soak.rs, short) and the soak
//! bench (benches/soak.rs, thousands of frames): every frame adds one visual of every kind in
//! turn and removes the oldest, swaps and drops sources, writes a region, and now and then
//! makes and drops a target. Samples the process's resident memory and the renderer's
//! counters every few hundred frames; at the end drops everything and reads the counters
//! again.
#![allow(dead_code)]

use std::sync::Arc;

use sluice::prelude::*;
use sluice::{Counters, Mesh, NodeId, Shading};

/// Resident memory of this process now, in bytes (`/proc/self/statm`; 0 where there is none).
pub fn rss_bytes() -> u64 {
    let page = 4096;
    std::fs::read_to_string("/proc/self/statm")
        .ok()
        .and_then(|s| s.split_whitespace().nth(1)?.parse::<u64>().ok())
        .map_or(0, |pages| pages * page)
}

/// One sample of a soak run.
#[derive(Clone, Copy, Debug)]
pub struct Sample {
    /// Frames rendered so far.
    pub frame: usize,
    /// Resident memory, bytes.
    pub rss: u64,
    /// The renderer's counters then.
    pub counters: Counters,
}

/// What a run measured.
pub struct Soak {
    /// Samples, every `sample_every` frames (and after the last frame).
    pub samples: Vec<Sample>,
    /// Counters after every visual, source and target was dropped.
    pub dropped: Counters,
    /// Resident memory then.
    pub dropped_rss: u64,
}

const SIDE: u32 = 64;
/// Churned visuals alive at a time.
const ALIVE: usize = 5;

fn u8_image(h: usize, w: usize, seed: usize) -> Arc<ArraySource> {
    Arc::new(
        ArraySource::new(Array2::from_shape_fn((h, w), |(r, c)| {
            ((r * 7 + c * 3 + seed) % 251) as u8
        }))
        .expect("image"),
    )
}

fn triangles(n: usize, seed: usize) -> (Arc<ArraySource>, Arc<ArraySource>) {
    // A fan of n triangles over the target, at depth 5.
    let mut pos = vec![32.0f32, 32.0, 5.0];
    for k in 0..=n {
        let a = (k + seed) as f32 * std::f32::consts::TAU / n as f32;
        pos.extend([32.0 + 28.0 * a.cos(), 32.0 + 28.0 * a.sin(), 5.0]);
    }
    let vertices = pos.len() / 3;
    let idx: Vec<u32> = (0..n as u32).flat_map(|k| [0, k + 1, k + 2]).collect();
    (
        Arc::new(
            ArraySource::with_channels(Array2::from_shape_vec((vertices, 3), pos).expect("pos"))
                .expect("positions"),
        ),
        Arc::new(ArraySource::new(Array1::from_vec(idx)).expect("indices")),
    )
}

/// A visual of kind `k % 5`, each on fresh sources (dropped with the visual).
fn churned(k: usize, shared_texture: &Arc<ArraySource>) -> sluice::Visual {
    match k % 5 {
        0 => Image::new(u8_image(16, 24, k))
            .with_colormap(Colormap::Viridis)
            .into(),
        1 => Volume::new(Arc::new(
            ArraySource::new(Array3::from_shape_fn((8, 8, 8), |(z, y, x)| {
                ((x + y + z + k) * 9 % 256) as u8
            }))
            .expect("volume"),
        ))
        .into(),
        2 => {
            let (pos, idx) = triangles(12, k);
            Mesh::new(pos)
                .with_indices(idx)
                .with_shading(Shading::Flat)
                .with_color([0.9, 0.3, 0.2, 1.0])
                .into()
        }
        3 => {
            let (pos, idx) = triangles(10, k);
            let vertices = pos.layout().shape().len();
            let scalars = Arc::new(
                ArraySource::new(Array1::from_shape_fn(vertices, |v| v as f32)).expect("scalars"),
            );
            Mesh::new(pos)
                .with_indices(idx)
                .with_scalars(scalars)
                .with_clim(0.0, vertices as f64)
                .expect("increasing limits")
                .with_shading(Shading::Smooth)
                .with_wireframe([1.0, 1.0, 1.0, 1.0])
                .into()
        }
        _ => {
            let (pos, idx) = triangles(8, k);
            let vertices = pos.layout().shape().len();
            let uv = Arc::new(
                ArraySource::with_channels(Array2::from_shape_fn((vertices, 2), |(v, c)| {
                    ((v * (c + 1)) % 7) as f32 / 7.0
                }))
                .expect("uv"),
            );
            // The texture is shared with the swapped image: sources outlive visuals.
            Mesh::new(pos)
                .with_indices(idx)
                .with_texture(uv, shared_texture.clone())
                .into()
        }
    }
}

/// Runs the workload for `frames` frames on `renderer`, sampling every `sample_every`.
pub fn run(
    renderer: &mut Renderer,
    frames: usize,
    sample_every: usize,
    mut on_sample: impl FnMut(&Sample),
) -> Result<Soak, RenderError> {
    let camera = PanZoomCamera::fit(Vec2::ZERO, Vec2::splat(SIDE as f32), [SIDE, SIDE]);
    let mut scene = Scene::new();
    let target = renderer.create_target(SIDE, SIDE)?;
    // A source written every frame, and an image whose source is swapped and replaced.
    let written = Arc::new(ArraySource::new(Array2::<f32>::zeros((64, 64))).expect("written"));
    scene.add(Image::new(written.clone()).with_clim(0.0, 1.0)?);
    let mut swap = [u8_image(32, 32, 1), u8_image(32, 32, 2)];
    let swapped = scene.add(Image::new(swap[0].clone()));
    let mut alive: Vec<NodeId> = Vec::new();
    let mut samples = Vec::new();
    let mut sample = |renderer: &mut Renderer, frame: usize, samples: &mut Vec<Sample>| {
        // Let the GPU finish so what it freed is freed.
        let _ = renderer.wait_idle();
        let s = Sample {
            frame,
            rss: rss_bytes(),
            counters: renderer.counters(),
        };
        on_sample(&s);
        samples.push(s);
    };
    for f in 0..frames {
        alive.push(scene.add(churned(f, &swap[1])));
        if alive.len() > ALIVE {
            scene.remove(alive.remove(0));
        }
        let patch = Array2::from_elem((8, 8), (f % 10) as f32 / 10.0);
        written
            .write(&[(f * 8) % 56, (f * 5) % 56], patch.view())
            .expect("write");
        if f % 7 == 0 {
            if let Some(image) = scene.image_mut(swapped) {
                image.set_source(swap[(f / 7) % 2].clone());
            }
        }
        if f % 50 == 49 {
            // A new source replaces one of the pair; the old one is dropped.
            swap[(f / 50) % 2] = u8_image(32, 32, f);
        }
        renderer.render(&scene, &camera, &target)?;
        if f % 25 == 0 {
            let side = 24 + (f % 48) as u32;
            let extra = renderer.create_target(side, side)?;
            renderer.render(&scene, &camera, &extra)?;
        }
        if (f + 1) % sample_every == 0 || f + 1 == frames {
            sample(renderer, f + 1, &mut samples);
        }
    }
    drop(scene);
    drop(swap);
    drop(written);
    renderer.render(&Scene::new(), &camera, &target)?;
    let _ = renderer.wait_idle();
    Ok(Soak {
        samples,
        dropped: renderer.counters(),
        dropped_rss: rss_bytes(),
    })
}
