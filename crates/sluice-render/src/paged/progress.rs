//! What a paged visual still misses: its visible pages and chunks, resident or not, and the
//! failures with their chunk keys.

use sluice_core::{ChunkFailure, ChunkKey, PageKey};

/// How far one paged visual's view is from complete, as of the last frame.
///
/// *Visible* pages are those of the level the view wants (about one data sample per pixel)
/// and of the coarsest level (what nothing can fall back below), that meet the view. The view
/// is complete when all of them are on the GPU. A page whose chunks failed is uploaded with
/// the source's fill value where those chunks lie, and counts as resident; its chunks are
/// listed in `failed`.
#[derive(Clone, Debug, Default)]
#[non_exhaustive]
pub struct Progress {
    /// The source's label.
    pub source_label: String,
    /// The level the view wants.
    pub level: usize,
    /// Visible pages wanted.
    pub pages_visible: usize,
    /// Of those, on the GPU.
    pub pages_resident: usize,
    /// Visible pages not yet on the GPU.
    pub missing_pages: Vec<PageKey>,
    /// Storage chunks the visible pages need.
    pub chunks_visible: usize,
    /// Of those, on the host (ready, empty or failed: settled).
    pub chunks_resident: usize,
    /// Of those, waiting for a loader (or a retry's backoff).
    pub chunks_queued: usize,
    /// Of those, being loaded now.
    pub chunks_loading: usize,
    /// Of those, failed after every attempt: the key and why. They show the fill value until
    /// the source's `retry_failed` (or [`crate::Renderer::retry_failed`]).
    pub failed: Vec<(ChunkKey, ChunkFailure)>,
}

impl Progress {
    /// Whether every visible page is on the GPU.
    pub fn is_complete(&self) -> bool {
        self.pages_resident == self.pages_visible
    }
}

/// What [`crate::Renderer::render_until_complete`] got to.
#[derive(Clone, Debug, Default)]
#[non_exhaustive]
pub struct Completion {
    /// Whether every paged visual's view is complete and no upload is pending.
    pub complete: bool,
    /// Visibility passes run (frames without drawing, one per wake or upload), before the
    /// one draw at the end.
    pub frames: u32,
    /// The last frame's progress of every paged visual (the incomplete ones say what is
    /// missing).
    pub progress: Vec<Progress>,
}
