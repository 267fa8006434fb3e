//! Where the chunks of the layers' lazy sources stand: what the status bar counts and what a
//! headless render waits for.
//!
//! A lazy source is drawn through the renderer's virtual texture (images, volumes and planes
//! of volumes alike): the renderer says what its view needs ([`Renderer::progress`]: the
//! chunks of the visible pages), turned into a [`ChunkProgress`] by [`from_paged`]. A lazy
//! source the renderer draws otherwise (a dense path that reads level 0 whole, a read of
//! chunks not yet resident queuing them) needs every level-0 chunk, and [`level0_progress`]
//! sums up their [`ChunkStatus`]es (every level-0 chunk counted as visible).

use std::sync::Arc;

use sluice_core::{ChunkKey, ChunkProgress, ChunkStatus, SharedSource};
use sluice_render::{Progress, Renderer, Scene, Visual};

/// Most level-0 chunks counted per source and frame: a dense level 0 fits in one texture (or
/// its bricks), so a source with more chunks than this is not drawn whole anyway.
pub const MAX_COUNTED_CHUNKS: usize = 1 << 18;

/// The level-0 chunks of `source` summed up, or `None` for a source that is not lazy (it
/// holds everything already) or has more than [`MAX_COUNTED_CHUNKS`] chunks.
pub fn level0_progress(source: &SharedSource) -> Option<ChunkProgress> {
    if !source.is_lazy() {
        return None;
    }
    let layout = source.layout();
    let grid = layout.chunks().grid_size(&layout.shape());
    let count = grid[0].checked_mul(grid[1])?.checked_mul(grid[2])?;
    if count > MAX_COUNTED_CHUNKS {
        return None;
    }
    let mut progress = ChunkProgress {
        visible_wanted: count,
        ..ChunkProgress::default()
    };
    for z in 0..grid[0] {
        for y in 0..grid[1] {
            for x in 0..grid[2] {
                let key = ChunkKey::new(0, [z, y, x]);
                match source.chunk_status(key) {
                    ChunkStatus::Ready | ChunkStatus::Empty => progress.visible_resident += 1,
                    ChunkStatus::Queued => progress.queued += 1,
                    ChunkStatus::Loading => progress.loading += 1,
                    ChunkStatus::Failed(failure) => progress.failed.push((key, failure)),
                    ChunkStatus::Unrequested => {}
                }
            }
        }
    }
    Some(progress)
}

/// Adds `more` to `total` (several sources' chunks in one sum).
pub fn add_progress(total: &mut ChunkProgress, more: ChunkProgress) {
    total.visible_wanted += more.visible_wanted;
    total.visible_resident += more.visible_resident;
    total.prefetch_wanted += more.prefetch_wanted;
    total.prefetch_resident += more.prefetch_resident;
    total.queued += more.queued;
    total.loading += more.loading;
    total.failed.extend(more.failed);
}

/// What is missing of `progress`, in words: "3 of the 12 chunks the frame shows not loaded
/// (2 queued, 1 loading, 0 failed, 0 not requested yet)".
pub fn describe_missing(progress: &ChunkProgress) -> String {
    let missing = progress.visible_wanted - progress.visible_resident;
    let unrequested =
        missing.saturating_sub(progress.queued + progress.loading + progress.failed.len());
    format!(
        "{missing} of the {} chunks the frame shows not loaded ({} queued, {} loading, {} failed, {unrequested} not requested yet)",
        progress.visible_wanted,
        progress.queued,
        progress.loading,
        progress.failed.len(),
    )
}

/// The chunks a paged visual's view needs, as of the renderer's last frame, as a
/// [`ChunkProgress`] (failed chunks are settled in `Progress` but not resident here).
pub fn from_paged(progress: &Progress) -> ChunkProgress {
    ChunkProgress {
        visible_wanted: progress.chunks_visible,
        visible_resident: progress
            .chunks_resident
            .saturating_sub(progress.failed.len()),
        queued: progress.chunks_queued,
        loading: progress.chunks_loading,
        failed: progress.failed.clone(),
        ..ChunkProgress::default()
    }
}

/// The chunks every lazy source `scene` draws needs, summed: a paged visual's from
/// `renderer`'s progress, other lazy sources' level 0 (each source once, however many
/// visuals show it).
pub fn scene_progress(scene: &Scene, renderer: &Renderer) -> ChunkProgress {
    let mut total = ChunkProgress::default();
    let mut seen: Vec<*const ()> = Vec::new();
    for (visual, _) in scene.draw_list() {
        if let Some(progress) = renderer.progress(visual) {
            add_progress(&mut total, from_paged(&progress));
            continue;
        }
        let source = match visual {
            Visual::Image(i) => i.source(),
            Visual::Volume(v) => v.source(),
            _ => continue,
        };
        let key = Arc::as_ptr(source) as *const ();
        if seen.contains(&key) {
            continue;
        }
        seen.push(key);
        if let Some(progress) = level0_progress(source) {
            add_progress(&mut total, progress);
        }
    }
    total
}
