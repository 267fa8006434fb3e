//! A short long session: the soak workload (tests/common/soak.rs; `cargo bench --bench soak`
//! runs it for thousands of frames) for a few hundred frames. Fails if resident memory grows
//! by more than `GROWTH_BOUND` after warm-up, or if anything the renderer holds for sources
//! (textures, buffers, their bytes) is not back to zero once every visual, source and target
//! is dropped.

mod common;
#[path = "common/soak.rs"]
mod soak;

/// Frames before the first measured sample (pipelines, colormaps, staging, allocator pools).
const WARM_UP: usize = 60;
const FRAMES: usize = 240;
/// Allowed RSS growth from the end of warm-up to the last frame. The mesh leak this guards
/// against grew it by ~150 KB per mesh per frame: about 80 MB over these 180 frames.
const GROWTH_BOUND: u64 = 16 << 20;

#[test]
fn memory_stays_flat_and_counters_return_to_zero() {
    let mut renderer = common::renderer();
    let soak = soak::run(&mut renderer, FRAMES, WARM_UP / 2, |s| {
        eprintln!(
            "frame {:4}: rss {:7.1} MB, textures {}, buffers {}, resident {} B, staging {} B",
            s.frame,
            s.rss as f64 / 1e6,
            s.counters.textures_alive,
            s.counters.buffers_alive,
            s.counters.resident_bytes,
            s.counters.staging_bytes
        )
    })
    .expect("soak frames render");
    let warm = soak
        .samples
        .iter()
        .find(|s| s.frame >= WARM_UP)
        .expect("a sample after warm-up");
    let last = soak.samples.last().expect("samples");
    let growth = last.rss.saturating_sub(warm.rss);
    assert!(
        growth <= GROWTH_BOUND,
        "RSS grew by {:.1} MB from frame {} to frame {} (bound {} MB)",
        growth as f64 / 1e6,
        warm.frame,
        last.frame,
        GROWTH_BOUND >> 20
    );
    // While visuals are alive the counters are not zero (the test would prove nothing).
    assert!(last.counters.textures_alive > 0 && last.counters.buffers_alive > 0);
    let d = soak.dropped;
    assert_eq!(
        (d.textures_alive, d.buffers_alive, d.resident_bytes),
        (0, 0, 0),
        "after dropping everything: {d:?}"
    );
    eprintln!(
        "dropped: rss {:.1} MB, {d:?}",
        soak.dropped_rss as f64 / 1e6
    );
}
