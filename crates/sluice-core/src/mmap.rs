//! `MmapSource`: a read-only memory map of a `.npy` or raw file.
//!
//! This module holds sluice-core's one `unsafe` block: mapping a file (see the `SAFETY` note
//! in `MmapSource::map`).

use std::fs::File;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};

use memmap2::Mmap;

use crate::changes::{Changes, Version};
use crate::error::SourceError;
use crate::layout::Layout;
use crate::npy::parse_header;
use crate::region::Shape;
use crate::rows::{empty_view, region_span, region_start_and_pitches};
use crate::source::{check_read, DataSource, HostView, LendOutcome, ReadRequest, ReadStatus};

/// A read-only memory-mapped file: a `.npy` array or raw samples with an explicit layout.
///
/// Nothing is read at open time beyond the header: pages are touched only when a renderer
/// uploads the regions that lie on them, so a file far larger than RAM can be shown a part at
/// a time. [`MmapSource::bytes_read`] counts what was handed out. The version never moves:
/// a mapped file is treated as immutable (modifying it while mapped is undefined behaviour).
pub struct MmapSource {
    path: PathBuf,
    map: Mmap,
    offset: usize,
    layout: Layout,
    bytes_read: AtomicU64,
}

impl MmapSource {
    /// Maps a `.npy` file (format 1.0 to 3.0, C order, little-endian); every axis is spatial.
    pub fn open_npy(path: impl AsRef<Path>) -> Result<Self, SourceError> {
        Self::npy(path.as_ref(), false)
    }

    /// Maps a `.npy` file whose last axis holds 1 to 4 channels (`[h, w, 3]` for RGB).
    pub fn open_npy_with_channels(path: impl AsRef<Path>) -> Result<Self, SourceError> {
        Self::npy(path.as_ref(), true)
    }

    /// Maps a raw file holding `layout`'s samples tightly packed (C order, channels
    /// interleaved, little-endian) from byte `offset` on.
    pub fn open_raw(
        path: impl AsRef<Path>,
        layout: Layout,
        offset: u64,
    ) -> Result<Self, SourceError> {
        let path = path.as_ref();
        let map = Self::map(path)?;
        let offset = Self::check_size(path, &map, offset, &layout)?;
        Ok(MmapSource {
            path: path.to_path_buf(),
            map,
            offset,
            layout,
            bytes_read: AtomicU64::new(0),
        })
    }

    fn npy(path: &Path, channel_axis: bool) -> Result<Self, SourceError> {
        let map = Self::map(path)?;
        let npy_error = |reason: String| SourceError::Npy {
            path: path.to_path_buf(),
            reason,
        };
        let header = parse_header(&map).map_err(npy_error)?;
        let mut dims = header.shape.clone();
        let channels = if channel_axis {
            if dims.len() < 2 {
                return Err(npy_error(format!(
                    "shape {} has no channel axis after its spatial axes (opened with channels)",
                    tuple(&dims)
                )));
            }
            dims.pop().unwrap_or(1)
        } else {
            1
        };
        // Shape errors name the file and the shape the header declares.
        let layout = Shape::new(&dims)
            .and_then(|shape| Layout::new(shape, header.element, channels))
            .map_err(|e| npy_error(format!("shape {}: {e}", tuple(&header.shape))))?;
        let offset = Self::check_size(path, &map, header.data_offset as u64, &layout)?;
        Ok(MmapSource {
            path: path.to_path_buf(),
            map,
            offset,
            layout,
            bytes_read: AtomicU64::new(0),
        })
    }

    fn map(path: &Path) -> Result<Mmap, SourceError> {
        let io = |source| SourceError::Io {
            path: path.to_path_buf(),
            source,
        };
        let file = File::open(path).map_err(io)?;
        let metadata = file.metadata().map_err(io)?;
        if !metadata.is_file() {
            return Err(io(std::io::Error::other("not a regular file")));
        }
        // An empty file maps to an empty map (memmap2 maps no pages for it): the header parser
        // and the size check say that it is empty.
        // SAFETY: the map is read-only and private to this source. Its contract (documented on
        // `MmapSource`) is that the file is not modified or truncated while mapped; sluice never
        // writes through it.
        unsafe { Mmap::map(&file) }.map_err(io)
    }

    /// Refuses a file that holds less than `layout` needs after `offset` (the numbers in the
    /// error); returns the offset as an index into the map.
    fn check_size(
        path: &Path,
        map: &Mmap,
        offset: u64,
        layout: &Layout,
    ) -> Result<usize, SourceError> {
        // `Layout::new` bounds the total by `isize::MAX`, so it fits in u64.
        let needed = layout.total_bytes() as u64;
        let file_bytes = map.len() as u64;
        let fits = offset
            .checked_add(needed)
            .is_some_and(|end| end <= file_bytes);
        if !fits {
            return Err(SourceError::Truncated {
                path: path.to_path_buf(),
                file_bytes,
                needed_bytes: needed,
                offset,
            });
        }
        // offset <= file_bytes = map.len(), a usize.
        Ok(offset as usize)
    }

    /// The mapped file.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Bytes of sample data handed out (read or lent) so far: what uploads touched.
    pub fn bytes_read(&self) -> u64 {
        self.bytes_read.load(Ordering::Relaxed)
    }
}

/// A shape in numpy's notation, `(3,)` or `(2, 3)`.
fn tuple(dims: &[usize]) -> String {
    match dims {
        [n] => format!("({n},)"),
        dims => format!(
            "({})",
            dims.iter()
                .map(|d| d.to_string())
                .collect::<Vec<_>>()
                .join(", ")
        ),
    }
}

impl DataSource for MmapSource {
    fn layout(&self) -> Layout {
        self.layout.clone()
    }

    fn version(&self) -> Version {
        Version::INITIAL
    }

    fn changes_since(&self, since: Version) -> Changes {
        if since >= Version::INITIAL {
            Changes::None
        } else {
            Changes::All
        }
    }

    fn read(&self, request: &ReadRequest<'_>, dst: &mut [u8]) -> Result<ReadStatus, SourceError> {
        check_read(&self.layout, request, dst.len())?;
        let outcome = self.lend(request, &mut |view| view.copy_packed(dst))?;
        debug_assert_eq!(outcome, LendOutcome::Lent);
        Ok(ReadStatus::Ready)
    }

    fn lend(
        &self,
        request: &ReadRequest<'_>,
        visit: &mut dyn FnMut(HostView<'_>),
    ) -> Result<LendOutcome, SourceError> {
        let region = request.region;
        let sample_bytes = self.layout.sample_bytes();
        check_read(&self.layout, request, self.layout.region_bytes(&region))?;
        if region.is_empty() {
            visit(empty_view(region, sample_bytes));
            return Ok(LendOutcome::Lent);
        }
        let (start, row_pitch, plane_pitch) =
            region_start_and_pitches(&self.layout.shape(), &region, sample_bytes);
        let span = region_span(&region, row_pitch, plane_pitch, sample_bytes);
        let start = self.offset + start;
        self.bytes_read
            .fetch_add((region.len() * sample_bytes) as u64, Ordering::Relaxed);
        visit(HostView {
            bytes: &self.map[start..start + span],
            region,
            sample_bytes,
            row_pitch,
            plane_pitch,
        });
        Ok(LendOutcome::Lent)
    }

    fn label(&self) -> String {
        format!("MmapSource({})", self.path.display())
    }
}
