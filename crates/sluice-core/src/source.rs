//! The `DataSource` trait: what any data must say so that sluice can show it.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::task::Waker;

use crate::changes::{Changes, Version};
use crate::chunk::{ChunkKey, ChunkProgress, ChunkStatus, ChunkWant};
use crate::error::SourceError;
use crate::layout::Layout;
use crate::region::Region;
use crate::residency::Residency;

/// A source of data to show: a host array, a memory-mapped file, a lazy chunked store, device
/// memory, or anything a user implements.
///
/// Sources know nothing of GPUs. They describe their [`Layout`], report a [`Version`] that moves
/// on every change and what changed since a version, say where the bytes live
/// ([`Residency`]), and hand bytes out: copied into a caller's buffer ([`DataSource::read`]) or
/// lent as a host slice without a copy ([`DataSource::lend`]). Sources are shared as
/// `Arc<dyn DataSource>` by any number of visuals and renderers, and may be written from any
/// thread while a renderer reads them.
///
/// # Contract
///
/// - `version()` never goes backwards. A change must be visible in the data *before* the
///   version that reports it is: a consumer that reads the version, then the changes, then the
///   data, never misses a change (it may see newer data than the version, which is harmless).
/// - `changes_since(v)` covers every change after `v` up to at least the current version;
///   [`Changes::All`] is always a correct answer.
/// - One `read` or `lend` call shows one consistent version of the region it covers: no write
///   is seen half done.
/// - `read` and `lend` never block on I/O. A source whose bytes are not in memory yet answers
///   [`ReadStatus::Pending`], keeps the request's waker, and wakes it when the bytes are there.
pub trait DataSource: Send + Sync + 'static {
    /// What the data looks like. Cheap to call; it only changes together with a version whose
    /// changes are [`Changes::All`].
    fn layout(&self) -> Layout;

    /// The current version of the data.
    fn version(&self) -> Version;

    /// What changed after `since`. See the trait's contract.
    fn changes_since(&self, since: Version) -> Changes;

    /// Where the data lives. Host unless the source says otherwise.
    fn residency(&self) -> Residency {
        Residency::Host
    }

    /// Copies `request.region` of `request.level`, tightly packed (C order, channels
    /// interleaved, little-endian), into `dst`, which is exactly
    /// `layout.region_bytes(region)` bytes long.
    ///
    /// Returns [`ReadStatus::Pending`] (leaving `dst` unspecified) when the data is not ready;
    /// the source then wakes `request.waker` once it is.
    fn read(&self, request: &ReadRequest<'_>, dst: &mut [u8]) -> Result<ReadStatus, SourceError>;

    /// Lends the bytes of `request.region` in place, without a copy, by calling `visit` once
    /// with a [`HostView`] of them; returns [`LendOutcome::NotLendable`] without calling
    /// `visit` where the source cannot (procedural data, data not in memory).
    ///
    /// The view is only valid inside `visit`; a source may hold a read lock meanwhile, so
    /// `visit` must be short and must not call back into the source.
    fn lend(
        &self,
        request: &ReadRequest<'_>,
        visit: &mut dyn FnMut(HostView<'_>),
    ) -> Result<LendOutcome, SourceError> {
        let _ = (request, visit);
        Ok(LendOutcome::NotLendable)
    }

    /// Lends several regions from one consistent version of the data: `visit(i, view)` for
    /// each request `i` in order, with no write landing between them. A consumer uses it to
    /// upload one frame's copies so that a write spanning several copies is never seen half
    /// done. Sources that hold a lock implement it by taking the lock once; the default lends
    /// one region at a time (consistent per region only). Returns
    /// [`LendOutcome::NotLendable`] without calling `visit` if the source cannot lend.
    fn lend_many(
        &self,
        requests: &[ReadRequest<'_>],
        visit: &mut dyn FnMut(usize, HostView<'_>),
    ) -> Result<LendOutcome, SourceError> {
        for (i, request) in requests.iter().enumerate() {
            if self.lend(request, &mut |view| visit(i, view))? == LendOutcome::NotLendable {
                return Ok(LendOutcome::NotLendable);
            }
        }
        Ok(LendOutcome::Lent)
    }

    /// Which regions can be read now. Sources that released their host copy can only give the
    /// regions written since; consumers then upload exactly those.
    fn readable(&self) -> Readable {
        Readable::Everywhere
    }

    /// A consumer (one renderer's GPU copy) starts showing this source.
    fn attach(&self, consumer: ConsumerId) {
        let _ = consumer;
    }

    /// A consumer stops showing this source.
    fn detach(&self, consumer: ConsumerId) {
        let _ = consumer;
    }

    /// A consumer's GPU copy now holds `version`. Sources with a release-after-upload host copy
    /// policy free their host memory once every attached consumer holds the current version.
    fn uploaded(&self, consumer: ConsumerId, version: Version) {
        let _ = (consumer, version);
    }

    /// Whether the source loads chunks on demand ([`DataSource::request_chunks`]): a renderer
    /// then asks for the chunks it sees instead of reading the whole shape. False by default.
    fn is_lazy(&self) -> bool {
        false
    }

    /// States the whole set of chunks `consumer` wants now, replacing its previous set: chunks
    /// that left the set and have not started loading are dropped. Never blocks; `waker` is
    /// woken (from a loader thread) whenever one of the source's chunks becomes ready, empty or
    /// failed. Sources that hold everything in memory need not implement it.
    fn request_chunks(
        &self,
        consumer: ConsumerId,
        wants: &[ChunkWant],
        waker: &Waker,
    ) -> Result<(), SourceError> {
        let _ = (consumer, wants, waker);
        Ok(())
    }

    /// Where chunk `key` stands. Never blocks. Sources that hold everything in memory answer
    /// [`ChunkStatus::Ready`] (the default).
    fn chunk_status(&self, key: ChunkKey) -> ChunkStatus {
        let _ = key;
        ChunkStatus::Ready
    }

    /// `consumer`'s wanted set summed up: visible and prefetch chunks wanted and resident,
    /// queued, loading, failed with their errors. Empty by default.
    fn chunk_progress(&self, consumer: ConsumerId) -> ChunkProgress {
        let _ = consumer;
        ChunkProgress::default()
    }

    /// Forgets every failed chunk, so that the next request for it loads it again.
    fn retry_failed(&self) {}

    /// A short human-readable name for errors and logs.
    fn label(&self) -> String {
        std::any::type_name::<Self>()
            .rsplit("::")
            .next()
            .unwrap_or("source")
            .to_string()
    }
}

/// A source shared by visuals and renderers.
pub type SharedSource = Arc<dyn DataSource>;

/// What to read: a region of a level.
#[derive(Clone, Debug)]
pub struct ReadRequest<'a> {
    /// The multiscale level (0 = finest).
    pub level: usize,
    /// The samples to read, in that level's coordinates.
    pub region: Region,
    /// Woken when a request answered [`ReadStatus::Pending`] can be served.
    pub waker: &'a Waker,
}

impl<'a> ReadRequest<'a> {
    /// A request for `region` of level 0.
    pub fn new(region: Region, waker: &'a Waker) -> Self {
        ReadRequest {
            level: 0,
            region,
            waker,
        }
    }
}

/// The answer to a [`DataSource::read`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[must_use]
pub enum ReadStatus {
    /// The buffer holds the region.
    Ready,
    /// Not ready yet; the request's waker is woken when it is.
    Pending,
}

/// Whether [`DataSource::lend`] lent the bytes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[must_use]
pub enum LendOutcome {
    /// `visit` was called with the region's bytes.
    Lent,
    /// The source cannot lend; use [`DataSource::read`].
    NotLendable,
}

/// Which regions a source can serve right now.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Readable {
    /// Any region.
    Everywhere,
    /// Only the regions reported by `changes_since` (the host copy was released).
    ChangedRegionsOnly,
}

/// Host bytes of a region, lent in place: rows of `row_bytes()` bytes, `row_pitch` apart,
/// planes `plane_pitch` apart, starting at `bytes[0]`.
#[derive(Clone, Copy, Debug)]
pub struct HostView<'a> {
    /// Bytes from the region's first sample to (at least) the end of its last row.
    pub bytes: &'a [u8],
    /// The region the view covers.
    pub region: Region,
    /// Bytes per sample (element size times channels).
    pub sample_bytes: usize,
    /// Bytes between row starts.
    pub row_pitch: usize,
    /// Bytes between plane starts.
    pub plane_pitch: usize,
}

impl<'a> HostView<'a> {
    /// The view of `region` inside `packed`, all of `layout`'s level 0 packed in C order
    /// (`[planes, rows, columns]`, channels interleaved): what a source holding its data that
    /// way lends. `region` must lie inside the shape (see [`check_read`]); `None` if `packed`
    /// is shorter than the region's last row needs.
    pub fn of_packed(packed: &'a [u8], layout: &Layout, region: Region) -> Option<Self> {
        let sample_bytes = layout.sample_bytes();
        if region.is_empty() {
            return Some(crate::rows::empty_view(region, sample_bytes));
        }
        let (start, row_pitch, plane_pitch) =
            crate::rows::region_start_and_pitches(&layout.shape(), &region, sample_bytes);
        let span = crate::rows::region_span(&region, row_pitch, plane_pitch, sample_bytes);
        Some(HostView {
            bytes: packed.get(start..start.checked_add(span)?)?,
            region,
            sample_bytes,
            row_pitch,
            plane_pitch,
        })
    }

    /// Bytes of one row of the region.
    pub fn row_bytes(&self) -> usize {
        self.region.size[2] * self.sample_bytes
    }

    /// Row `row` of plane `plane` of the region (both relative to the region).
    pub fn row(&self, plane: usize, row: usize) -> &'a [u8] {
        let start = plane * self.plane_pitch + row * self.row_pitch;
        &self.bytes[start..start + self.row_bytes()]
    }

    /// Whether all rows are back to back, so the region is one contiguous slice.
    pub fn is_contiguous(&self) -> bool {
        let rows = self.region.size[1];
        self.row_pitch == self.row_bytes()
            && (self.region.size[0] == 1 || self.plane_pitch == rows * self.row_pitch)
    }

    /// Copies the region tightly packed into `dst` (exactly `region.len() * sample_bytes`).
    ///
    /// # Panics
    /// If `dst` or the view's bytes are shorter than the region needs; sources check the
    /// destination with [`check_read`] before lending into it.
    pub fn copy_packed(&self, dst: &mut [u8]) {
        let row_bytes = self.row_bytes();
        if self.region.is_empty() {
            return;
        }
        if self.is_contiguous() {
            let n = self.region.len() * self.sample_bytes;
            dst[..n].copy_from_slice(&self.bytes[..n]);
            return;
        }
        let mut out = dst.chunks_exact_mut(row_bytes);
        for p in 0..self.region.size[0] {
            for r in 0..self.region.size[1] {
                if let Some(d) = out.next() {
                    d.copy_from_slice(self.row(p, r));
                }
            }
        }
    }
}

/// Identifies one consumer of a source (one renderer's GPU copy of it).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct ConsumerId(u64);

impl ConsumerId {
    /// A fresh id, never returned before in this process.
    pub fn next() -> Self {
        static NEXT: AtomicU64 = AtomicU64::new(1);
        ConsumerId(NEXT.fetch_add(1, Ordering::Relaxed))
    }
}

/// A waker that does nothing, for reads of sources that never answer pending.
pub fn noop_waker() -> &'static Waker {
    Waker::noop()
}

/// Checks a read request against a layout: the level exists, the region lies inside it and
/// `dst_len` is exactly the region's packed size. Sources call this first.
///
/// An empty region (an axis of size 0) whose origin lies inside the level, or at its end,
/// passes with `dst_len` 0: reading it is a no-op that answers [`ReadStatus::Ready`], lending
/// it calls `visit` once with an empty view. This is sluice's one rule for empty regions;
/// every built-in source and the proxy layer follow it.
pub fn check_read(
    layout: &Layout,
    request: &ReadRequest<'_>,
    dst_len: usize,
) -> Result<(), SourceError> {
    let levels = layout.levels();
    let Some(level) = levels.get(request.level) else {
        return Err(SourceError::NoSuchLevel {
            level: request.level,
            levels: levels.len(),
        });
    };
    request.region.check_within(&level.shape)?;
    // Inside the level, so the count fits unless a coarser level is larger than level 0.
    let expected = layout
        .checked_region_bytes(&request.region)
        .ok_or_else(|| SourceError::TooLarge {
            shape: level.shape.dims().to_vec(),
            element: Some(layout.element()),
            channels: layout.channels(),
        })?;
    if dst_len != expected {
        return Err(SourceError::BufferSize {
            region: request.region,
            expected,
            got: dst_len,
        });
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::element::ElementType;
    use crate::region::Shape;

    #[test]
    fn a_view_of_packed_bytes_starts_at_the_region_and_spans_its_rows() {
        // 2 planes x 3 rows x 4 columns of u16 x 2 channels: 4 bytes a sample.
        let layout = Layout::new(Shape::new(&[2, 3, 4]).unwrap(), ElementType::U16, 2).unwrap();
        let packed: Vec<u8> = (0..layout.total_bytes()).map(|i| i as u8).collect();
        let region = Region {
            origin: [1, 1, 2],
            size: [1, 2, 2],
        };
        let v = HostView::of_packed(&packed, &layout, region).unwrap();
        assert_eq!((v.sample_bytes, v.row_pitch, v.plane_pitch), (4, 16, 48));
        // Plane 1, row 1, column 2: byte 48 + 16 + 8; to the end of row 2's two samples.
        assert_eq!(v.bytes[0], 72);
        assert_eq!(v.bytes.len(), 16 + 8);
        // Too short for the region: None, never a panic.
        assert!(HostView::of_packed(&packed[..90], &layout, region).is_none());
        let empty = Region {
            origin: [0, 0, 0],
            size: [0, 3, 4],
        };
        assert!(HostView::of_packed(&[], &layout, empty)
            .unwrap()
            .bytes
            .is_empty());
    }
}
