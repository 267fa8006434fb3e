//! A long session (`cargo bench --bench soak`): the soak workload of tests/common/soak.rs for
//! `SLUICE_SOAK_FRAMES` frames (default 5000), sampled every `SLUICE_SOAK_SAMPLE` frames
//! (default 500). Every frame adds a visual of every kind in turn (images, volumes, flat,
//! smooth-wireframe-scalar and textured meshes, each on fresh sources) and removes the oldest,
//! writes a region of a shown source, swaps an image's source every 7 frames and replaces one
//! of the pair every 50 (dropping the old one), and every 25 frames draws into a new target
//! that is then dropped.
//!
//! Prints the process's resident memory (RSS) and the renderer's counters at each sample, and
//! judges: RSS growth from the first sample to the last, per 1000 frames, against a ceiling of
//! 4 MB per 1000 frames; and the counters of what the renderer holds (textures, buffers, their
//! bytes) back at zero once everything is dropped.

#[path = "../tests/common/soak.rs"]
mod soak;

mod common;

use common::{env_usize, Res, Verdicts};
use sluice::prelude::*;

/// Allowed RSS growth after the first sample, per 1000 frames.
const CEILING_PER_1000: f64 = 4.0;

fn main() -> Res<()> {
    let frames = env_usize("SLUICE_SOAK_FRAMES", 5000)?;
    let every = env_usize("SLUICE_SOAK_SAMPLE", 500)?.max(1);
    let mut renderer = Renderer::with_options(RendererOptions::from_env()?)?;
    println!(
        "soak: {frames} frames on {} ({:?}), sampled every {every}",
        renderer.adapter_info().name,
        renderer.adapter_info().backend
    );
    println!(
        "  {:>6} {:>10} {:>9} {:>8} {:>12} {:>12} {:>16}",
        "frame", "rss MB", "textures", "buffers", "resident B", "staging B", "bytes uploaded"
    );
    let start = std::time::Instant::now();
    let run = soak::run(&mut renderer, frames, every, |s| {
        println!(
            "  {:>6} {:>10.1} {:>9} {:>8} {:>12} {:>12} {:>16}",
            s.frame,
            s.rss as f64 / 1e6,
            s.counters.textures_alive,
            s.counters.buffers_alive,
            s.counters.resident_bytes,
            s.counters.staging_bytes,
            s.counters.bytes_uploaded
        )
    })?;
    let d = run.dropped;
    println!(
        "  dropped {:>10.1} {:>9} {:>8} {:>12} {:>12} {:>16}  ({:.1} s)",
        run.dropped_rss as f64 / 1e6,
        d.textures_alive,
        d.buffers_alive,
        d.resident_bytes,
        d.staging_bytes,
        d.bytes_uploaded,
        start.elapsed().as_secs_f64()
    );
    let (first, last) = (run.samples[0], *run.samples.last().ok_or("no samples")?);
    let span = (last.frame - first.frame).max(1) as f64;
    let per_1000 = (last.rss as f64 - first.rss as f64) / 1e6 / span * 1000.0;
    let mut v = Verdicts {
        lines: Vec::new(),
        failed: 0,
    };
    v.judge(
        &format!(
            "RSS growth, frames {}..{}, per 1000 frames",
            first.frame, last.frame
        ),
        format!("{per_1000:.2} MB"),
        &format!("<= {CEILING_PER_1000} MB"),
        per_1000 <= CEILING_PER_1000,
    );
    v.judge(
        "textures, buffers, resident bytes after dropping all",
        format!(
            "{}, {}, {}",
            d.textures_alive, d.buffers_alive, d.resident_bytes
        ),
        "0, 0, 0",
        (d.textures_alive, d.buffers_alive, d.resident_bytes) == (0, 0, 0),
    );
    v.finish("soak", false);
    Ok(())
}
