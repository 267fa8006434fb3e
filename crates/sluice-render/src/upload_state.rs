//! What a proxy has uploaded of its source and what is left: the change tracking shared by
//! texture and buffer proxies.

use sluice_core::{
    plan_chunked, plan_exact, Changes, ConsumerId, DataSource, Layout, Readable, Region, Version,
};

/// Above this fraction of dirty chunks, everything dirty is uploaded in one copy.
const FULL_UPLOAD_FRACTION: f64 = 0.5;

/// The version a proxy's GPU copy holds, and changes not uploaded yet (over budget, not ready,
/// or not planned yet).
pub(crate) struct UploadState {
    uploaded: Version,
    pending: Vec<Region>,
    /// An upload began in the frame being recorded, and its commands are not submitted yet.
    open: bool,
    /// The version to tell the source its GPU copy holds, once the frame that copied it is
    /// submitted ([`UploadState::submitted`]): a source that frees its host copy on the
    /// news must not do so while the copies could still be dropped unsubmitted.
    notify: Option<Version>,
    /// What was uploaded and pending when the open upload began: restored if its frame is
    /// lost ([`UploadState::lost`]), so the next frame asks the source again for exactly the
    /// changes since, which it still holds (it was not told of the lost version). `None`
    /// while no upload is open, or after a [`UploadState::reset`] in the open frame.
    before: Option<(Version, Vec<Region>)>,
}

/// What changed since the last upload.
pub(crate) struct Begun {
    /// The version the upload brings the GPU copy to.
    pub version: Version,
    /// The source's new layout, when everything changed and the layout with it: the proxy
    /// recreates its GPU resource before copying.
    pub new_layout: Option<Layout>,
}

impl UploadState {
    pub fn new() -> Self {
        UploadState {
            uploaded: Version::NEVER,
            pending: Vec::new(),
            open: false,
            notify: None,
            before: None,
        }
    }

    /// Gathers the changes since the last upload. `None` when the GPU copy is current.
    ///
    /// Reads the version before the changes, and the caller reads data after: a write in
    /// between is uploaded now or reported again next time, never lost.
    pub fn begin(&mut self, source: &dyn DataSource, layout: &Layout) -> Option<Begun> {
        let version = source.version();
        if version == self.uploaded && self.pending.is_empty() {
            return None;
        }
        if !self.open {
            self.before = Some((self.uploaded, self.pending.clone()));
        }
        let mut new_layout = None;
        match source.changes_since(self.uploaded) {
            Changes::None => {}
            Changes::Regions(regions) => self.pending.extend(regions),
            Changes::All => {
                let current = source.layout();
                self.pending.clear();
                self.pending.push(current.shape().full_region());
                if &current != layout {
                    new_layout = Some(current);
                }
            }
        }
        self.uploaded = version;
        self.open = true;
        Some(Begun {
            version,
            new_layout,
        })
    }

    /// The copies for everything pending, by chunk (or exactly the changed regions for sources
    /// that can serve nothing else); pending is empty afterwards.
    pub fn plan(&mut self, readable: Readable, layout: &Layout) -> Vec<Region> {
        let pending = std::mem::take(&mut self.pending);
        match readable {
            Readable::Everywhere => {
                plan_chunked(
                    &layout.shape(),
                    &layout.chunks(),
                    &pending,
                    FULL_UPLOAD_FRACTION,
                )
                .copies
            }
            Readable::ChangedRegionsOnly => plan_exact(&pending).copies,
        }
    }

    /// The regions known to have changed and not uploaded yet (after `begin`, before `plan`:
    /// exactly what the source reported, plus deferred copies).
    pub fn pending(&self) -> &[Region] {
        &self.pending
    }

    /// Leaves regions for a later frame.
    pub fn defer(&mut self, regions: impl IntoIterator<Item = Region>) {
        self.pending.extend(regions);
    }

    /// Forgets what was uploaded: the next upload is a full one. For failed uploads (rather
    /// than guess what is left) and for data that must be checked again.
    pub fn reset(&mut self) {
        self.uploaded = Version::NEVER;
        self.pending.clear();
        self.notify = None;
        self.before = None;
    }

    /// Ends an upload of `version`: once nothing is left, the source is told when the frame
    /// is submitted ([`UploadState::submitted`]). Returns whether uploads remain for a later
    /// frame.
    pub fn finish(&mut self, version: Version) -> bool {
        if self.pending.is_empty() {
            self.notify = Some(version);
        }
        !self.pending.is_empty()
    }

    /// The frame's commands were submitted: the copies recorded are real, and the source
    /// hears of the version they brought.
    pub fn submitted(&mut self, source: &dyn DataSource, consumer: ConsumerId) {
        self.open = false;
        self.before = None;
        if let Some(version) = self.notify.take() {
            source.uploaded(consumer, version);
        }
    }

    /// The frame being recorded was dropped unsubmitted (it panicked), or its commands were
    /// rejected: if an upload began in it, its copies are lost, and the state goes back to
    /// what it was before that upload (what was uploaded then, and what was pending), so the
    /// next frame uploads the changes since again. A source that frees its host copy once
    /// uploaded still holds those changes (it hears of a version only after its frame is
    /// submitted), where it could no longer serve everything. After a reset in the lost frame,
    /// everything is uploaded again. Returns whether an upload had begun.
    pub fn lost(&mut self) -> bool {
        let open = std::mem::replace(&mut self.open, false);
        if open {
            match self.before.take() {
                Some((uploaded, pending)) => {
                    self.uploaded = uploaded;
                    self.pending = pending;
                    self.notify = None;
                }
                None => self.reset(),
            }
        }
        open
    }
}
