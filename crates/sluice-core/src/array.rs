//! `ArraySource`: an ndarray array held in host memory, written region by region.

use std::collections::HashMap;

use ndarray::{Array, ArrayView, ArrayViewD, ArrayViewMutD, Dimension, IxDyn};
use parking_lot::RwLock;

use crate::changes::{ChangeLog, Changes, Version};
use crate::element::{Element, ElementType};
use crate::error::SourceError;
use crate::layout::{ChunkGrid, Layout};
use crate::region::{Region, Shape};
use crate::rows::{empty_view, for_each_row, region_span, region_start_and_pitches};
use crate::source::{
    check_read, ConsumerId, DataSource, HostView, LendOutcome, ReadRequest, ReadStatus, Readable,
};

/// Whether a source keeps its host copy once the GPU has it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum HostCopyPolicy {
    /// Keep the host data (the default): the source can be read back, re-uploaded to a new
    /// renderer, and mutated in place.
    #[default]
    Keep,
    /// Free the host data once every renderer showing the source holds its current version on
    /// the GPU. Region writes still work afterwards: their bytes are kept until uploaded, then
    /// dropped. A renderer that starts showing the source after the release cannot upload it.
    ReleaseAfterUpload,
}

/// How many region changes a source remembers before answering "everything changed".
const CHANGE_LOG_CAPACITY: usize = 1024;

/// Host storage of one element type, seen as bytes.
trait HostVec: Send + Sync {
    fn bytes(&self) -> &[u8];
    fn bytes_mut(&mut self) -> &mut [u8];
}

impl<T: Element> HostVec for Vec<T> {
    fn bytes(&self) -> &[u8] {
        bytemuck::cast_slice(self)
    }
    fn bytes_mut(&mut self) -> &mut [u8] {
        bytemuck::cast_slice_mut(self)
    }
}

/// A write made after the host copy was released, kept until every consumer uploaded it.
struct PendingWrite {
    version: Version,
    region: Region,
    bytes: Vec<u8>,
}

struct State {
    layout: Layout,
    /// `None` once released.
    data: Option<Box<dyn HostVec>>,
    pending: Vec<PendingWrite>,
    log: ChangeLog,
    consumers: HashMap<ConsumerId, Version>,
    /// The version at which the host copy was released.
    released_at: Option<Version>,
}

/// A source over an ndarray array in host memory.
///
/// The array is moved in, not copied (unless it is not in standard C order, in which case it is
/// copied once into C order). Share the source as `Arc<ArraySource>`: any number of visuals
/// and renderers may show it, and any thread may write it while they do. Writes mark only the
/// written region dirty, so renderers upload only that.
///
/// Axes: by default every axis of the array is spatial (`[rows, cols]` for an image,
/// `[planes, rows, cols]` for a volume) with one channel. [`ArraySource::with_channels`] takes
/// the last axis as channels instead (`[rows, cols, 3]` for RGB).
pub struct ArraySource {
    policy: HostCopyPolicy,
    channel_axis: bool,
    state: RwLock<State>,
}

impl ArraySource {
    /// A scalar source: every axis of `array` is spatial (1 to 3 axes).
    pub fn new<T: Element, D: Dimension>(array: Array<T, D>) -> Result<Self, SourceError> {
        Self::build(array, false)
    }

    /// A multi-channel source: the last axis of `array` holds 1 to 4 channels, the others
    /// (1 to 3) are spatial. `[h, w, 3]` is an RGB image, `[n, 3]` a 1-D array of 3-vectors.
    pub fn with_channels<T: Element, D: Dimension>(
        array: Array<T, D>,
    ) -> Result<Self, SourceError> {
        Self::build(array, true)
    }

    /// The same source with another host-copy policy.
    #[must_use]
    pub fn with_policy(mut self, policy: HostCopyPolicy) -> Self {
        self.policy = policy;
        self
    }

    /// The same source with another chunk grid (the unit of dirty tracking).
    #[must_use]
    pub fn with_chunks(self, chunks: ChunkGrid) -> Self {
        {
            let mut s = self.state.write();
            s.layout = s.layout.clone().with_chunks(chunks);
        }
        self
    }

    fn build<T: Element, D: Dimension>(
        array: Array<T, D>,
        channel_axis: bool,
    ) -> Result<Self, SourceError> {
        let (layout, data) = Self::layout_and_data(array, channel_axis)?;
        Ok(ArraySource {
            policy: HostCopyPolicy::Keep,
            channel_axis,
            state: RwLock::new(State {
                layout,
                data: Some(data),
                pending: Vec::new(),
                log: ChangeLog::new(CHANGE_LOG_CAPACITY),
                consumers: HashMap::new(),
                released_at: None,
            }),
        })
    }

    fn layout_and_data<T: Element, D: Dimension>(
        array: Array<T, D>,
        channel_axis: bool,
    ) -> Result<(Layout, Box<dyn HostVec>), SourceError> {
        let dims = array.shape().to_vec();
        let (spatial, channels) = split_channels(&dims, channel_axis)?;
        let shape = Shape::new(spatial)?;
        let layout = Layout::new(shape, T::TYPE, channels)?;
        let data: Vec<T> = if array.is_standard_layout() {
            let (vec, offset) = array.into_raw_vec_and_offset();
            match offset {
                Some(0) | None if vec.len() == layout.shape().len() * channels => vec,
                // A sliced owner: its buffer holds more than its elements.
                _ => {
                    return Err(SourceError::ShapeMismatch {
                        expected: dims,
                        got: vec![vec.len()],
                    })
                }
            }
        } else {
            array.as_standard_layout().iter().copied().collect()
        };
        Ok((layout, Box::new(data)))
    }

    /// The host-copy policy.
    pub fn policy(&self) -> HostCopyPolicy {
        self.policy
    }

    /// Bytes this source holds in host memory now: the array, or after a release, the writes
    /// not yet uploaded.
    pub fn host_bytes(&self) -> usize {
        let s = self.state.read();
        s.data.as_ref().map_or(0, |d| d.bytes().len())
            + s.pending.iter().map(|p| p.bytes.len()).sum::<usize>()
    }

    /// Whether the host copy was released (see [`HostCopyPolicy::ReleaseAfterUpload`]).
    pub fn is_released(&self) -> bool {
        self.state.read().data.is_none()
    }

    /// Writes `data` at `origin` (spatial axes, numpy order) and marks only that region dirty.
    ///
    /// `data` has the source's spatial axes, plus the channel axis for a source made with
    /// [`ArraySource::with_channels`]. Returns the new version. On error nothing is written.
    pub fn write<T: Element, D: Dimension>(
        &self,
        origin: &[usize],
        data: ArrayView<'_, T, D>,
    ) -> Result<Version, SourceError> {
        let mut s = self.state.write();
        let region = self.check_write(&s.layout, T::TYPE, origin, data.shape())?;
        let packed = data.as_standard_layout();
        let src: &[u8] = bytemuck::cast_slice(packed.as_slice().unwrap_or(&[]));
        let sample_bytes = s.layout.sample_bytes();
        let shape = s.layout.shape();
        let state = &mut *s;
        match state.data.as_mut() {
            Some(data) => {
                let dst = data.bytes_mut();
                for_each_row(&shape, &region, sample_bytes, |a, p, n| {
                    dst[a..a + n].copy_from_slice(&src[p..p + n]);
                });
                Ok(state.log.record(region))
            }
            None => {
                let version = state.log.record(region);
                state.pending.push(PendingWrite {
                    version,
                    region,
                    bytes: src.to_vec(),
                });
                Ok(version)
            }
        }
    }

    /// Mutates `region` in place through `f`, which gets a view of exactly that region (with a
    /// trailing channel axis for multi-channel sources), and marks only it dirty.
    ///
    /// Fails if `T` is not the source's element type, the region is out of bounds or empty, or the host
    /// copy was released. Returns the new version.
    pub fn update<T: Element>(
        &self,
        region: Region,
        f: impl FnOnce(ArrayViewMutD<'_, T>),
    ) -> Result<Version, SourceError> {
        let mut s = self.state.write();
        check_type::<T>(s.layout.element())?;
        region.check_within(&s.layout.shape())?;
        if region.is_empty() {
            return Err(SourceError::EmptyShape {
                shape: region.size.to_vec(),
            });
        }
        let full = self.array_dims(&s.layout);
        let ndim = s.layout.shape().ndim();
        let state = &mut *s;
        let Some(data) = state.data.as_mut() else {
            return Err(SourceError::HostReleased { region });
        };
        let elems: &mut [T] = bytemuck::cast_slice_mut(data.bytes_mut());
        let mut view = ArrayViewMutD::from_shape(IxDyn(&full), elems)
            .expect("storage length matches the layout");
        view.slice_each_axis_inplace(|ax| {
            let a = ax.axis.index();
            if a < ndim {
                let axis = 3 - ndim + a;
                ndarray::Slice::from(region.origin[axis]..region.origin[axis] + region.size[axis])
            } else {
                ndarray::Slice::from(..)
            }
        });
        f(view);
        Ok(state.log.record(region))
    }

    /// Replaces all the data, possibly with a new shape or element type (same channel
    /// convention as at construction). Every renderer re-uploads it whole.
    pub fn replace<T: Element, D: Dimension>(
        &self,
        array: Array<T, D>,
    ) -> Result<Version, SourceError> {
        let (layout, data) = Self::layout_and_data(array, self.channel_axis)?;
        let mut s = self.state.write();
        let chunks = if layout.shape() == s.layout.shape() {
            s.layout.chunks()
        } else {
            layout.chunks()
        };
        s.layout = layout.with_chunks(chunks);
        let old = s.data.replace(data);
        s.pending.clear();
        s.released_at = None;
        let version = s.log.record_all();
        drop(s);
        // The previous array is freed on the dropping thread: unmapping its pages costs as
        // much as copying them.
        drop_host_data(old);
        Ok(version)
    }

    /// Calls `f` with a read-only view of the whole array (with the channel axis, if any).
    ///
    /// Fails if `T` is not the element type or the host copy was released.
    pub fn with_view<T: Element, R>(
        &self,
        f: impl FnOnce(ArrayViewD<'_, T>) -> R,
    ) -> Result<R, SourceError> {
        let s = self.state.read();
        check_type::<T>(s.layout.element())?;
        let Some(data) = s.data.as_ref() else {
            return Err(SourceError::HostReleased {
                region: s.layout.shape().full_region(),
            });
        };
        let elems: &[T] = bytemuck::cast_slice(data.bytes());
        let view = ArrayViewD::from_shape(IxDyn(&self.array_dims(&s.layout)), elems)
            .expect("storage length matches the layout");
        Ok(f(view))
    }

    fn array_dims(&self, layout: &Layout) -> Vec<usize> {
        let mut dims = layout.shape().dims().to_vec();
        if self.channel_axis {
            dims.push(layout.channels());
        }
        dims
    }

    fn check_write(
        &self,
        layout: &Layout,
        got: ElementType,
        origin: &[usize],
        data_dims: &[usize],
    ) -> Result<Region, SourceError> {
        if got != layout.element() {
            return Err(SourceError::DtypeMismatch {
                expected: layout.element(),
                got,
            });
        }
        let ndim = layout.shape().ndim();
        let (spatial, channels) = split_channels(data_dims, self.channel_axis)?;
        if spatial.len() != ndim || origin.len() != ndim || channels != layout.channels() {
            let mut expected = layout.shape().dims().to_vec();
            if self.channel_axis {
                expected.push(layout.channels());
            }
            return Err(SourceError::ShapeMismatch {
                expected,
                got: data_dims.to_vec(),
            });
        }
        if spatial.contains(&0) {
            return Err(SourceError::EmptyShape {
                shape: data_dims.to_vec(),
            });
        }
        let region = Region::new(origin, spatial)?;
        region.check_within(&layout.shape())?;
        Ok(region)
    }

    /// Frees what every consumer has: the whole host copy once all hold the current version
    /// (release policy), and pending writes all have uploaded.
    fn release_uploaded(&self, s: &mut State) {
        if self.policy != HostCopyPolicy::ReleaseAfterUpload || s.consumers.is_empty() {
            return;
        }
        let oldest = s
            .consumers
            .values()
            .copied()
            .min()
            .unwrap_or(Version::NEVER);
        if oldest >= s.log.version() && s.data.is_some() {
            // Called from the renderer's upload: the host copy is freed off its thread.
            drop_host_data(s.data.take());
            s.released_at = Some(s.log.version());
        }
        if s.data.is_none() {
            s.pending.retain(|p| p.version > oldest);
            if s.pending.is_empty() {
                s.pending = Vec::new();
            }
        }
    }
}

/// Frees host storage: large arrays on the dropping thread (see [`crate::dropper`]), small
/// ones here.
fn drop_host_data(data: Option<Box<dyn HostVec>>) {
    match data {
        Some(data) if data.bytes().len() >= crate::dropper::DEFER_BYTES => {
            crate::dropper::drop_later(data)
        }
        other => drop(other),
    }
}

fn check_type<T: Element>(expected: ElementType) -> Result<(), SourceError> {
    if T::TYPE == expected {
        Ok(())
    } else {
        Err(SourceError::DtypeMismatch {
            expected,
            got: T::TYPE,
        })
    }
}

/// Splits array dims into spatial axes and a channel count.
fn split_channels(dims: &[usize], channel_axis: bool) -> Result<(&[usize], usize), SourceError> {
    if !channel_axis {
        return Ok((dims, 1));
    }
    match dims.split_last() {
        Some((&c, spatial)) if !spatial.is_empty() => Ok((spatial, c)),
        _ => Err(SourceError::UnsupportedDimensions {
            shape: dims.to_vec(),
        }),
    }
}

/// Lends a region of the state: from the array, or after a release, from the pending write of
/// exactly that region.
fn lend_locked(
    s: &State,
    request: &ReadRequest<'_>,
    visit: &mut dyn FnMut(HostView<'_>),
) -> Result<LendOutcome, SourceError> {
    let region = request.region;
    let sample_bytes = s.layout.sample_bytes();
    // `check_read` only looks at the length; lending has no destination buffer.
    check_read(&s.layout, request, s.layout.region_bytes(&region))?;
    if region.is_empty() {
        visit(empty_view(region, sample_bytes));
        return Ok(LendOutcome::Lent);
    }
    if let Some(data) = s.data.as_ref() {
        let (start, row_pitch, plane_pitch) =
            region_start_and_pitches(&s.layout.shape(), &region, sample_bytes);
        let span = region_span(&region, row_pitch, plane_pitch, sample_bytes);
        visit(HostView {
            bytes: &data.bytes()[start..start + span],
            region,
            sample_bytes,
            row_pitch,
            plane_pitch,
        });
        return Ok(LendOutcome::Lent);
    }
    let pending = s.pending.iter().rev().find(|p| p.region == region);
    let Some(pending) = pending else {
        return Err(SourceError::HostReleased { region });
    };
    let row_pitch = region.size[2] * sample_bytes;
    visit(HostView {
        bytes: &pending.bytes,
        region,
        sample_bytes,
        row_pitch,
        plane_pitch: row_pitch * region.size[1],
    });
    Ok(LendOutcome::Lent)
}

impl DataSource for ArraySource {
    fn layout(&self) -> Layout {
        self.state.read().layout.clone()
    }

    fn version(&self) -> Version {
        self.state.read().log.version()
    }

    fn changes_since(&self, since: Version) -> Changes {
        let s = self.state.read();
        match (&s.data, s.released_at) {
            // Released: the writes kept since the release are the whole story, however many
            // (the bounded log could overflow into "everything", which cannot be served).
            (None, Some(released)) if since >= released => {
                if since >= s.log.version() {
                    Changes::None
                } else {
                    Changes::Regions(
                        s.pending
                            .iter()
                            .filter(|p| p.version > since)
                            .map(|p| p.region)
                            .collect(),
                    )
                }
            }
            _ => s.log.since(since),
        }
    }

    fn read(&self, request: &ReadRequest<'_>, dst: &mut [u8]) -> Result<ReadStatus, SourceError> {
        // One lock for the check and the copy: a `replace` in between could change the size.
        let s = self.state.read();
        check_read(&s.layout, request, dst.len())?;
        let outcome = lend_locked(&s, request, &mut |view| view.copy_packed(dst))?;
        debug_assert_eq!(outcome, LendOutcome::Lent);
        Ok(ReadStatus::Ready)
    }

    fn lend(
        &self,
        request: &ReadRequest<'_>,
        visit: &mut dyn FnMut(HostView<'_>),
    ) -> Result<LendOutcome, SourceError> {
        lend_locked(&self.state.read(), request, visit)
    }

    fn lend_many(
        &self,
        requests: &[ReadRequest<'_>],
        visit: &mut dyn FnMut(usize, HostView<'_>),
    ) -> Result<LendOutcome, SourceError> {
        // One read lock for all: no write lands between the regions.
        let s = self.state.read();
        for (i, request) in requests.iter().enumerate() {
            let _lent = lend_locked(&s, request, &mut |view| visit(i, view))?;
        }
        Ok(LendOutcome::Lent)
    }

    fn readable(&self) -> Readable {
        if self.state.read().data.is_some() {
            Readable::Everywhere
        } else {
            Readable::ChangedRegionsOnly
        }
    }

    fn attach(&self, consumer: ConsumerId) {
        self.state
            .write()
            .consumers
            .insert(consumer, Version::NEVER);
    }

    fn detach(&self, consumer: ConsumerId) {
        let mut s = self.state.write();
        s.consumers.remove(&consumer);
        self.release_uploaded(&mut s);
    }

    fn uploaded(&self, consumer: ConsumerId, version: Version) {
        let mut s = self.state.write();
        if let Some(v) = s.consumers.get_mut(&consumer) {
            *v = (*v).max(version);
        }
        self.release_uploaded(&mut s);
    }

    fn label(&self) -> String {
        let s = self.state.read();
        format!(
            "ArraySource({} {}x{})",
            s.layout.shape(),
            s.layout.element(),
            s.layout.channels()
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::source::noop_waker;
    use ndarray::{arr2, Array2, Array3};

    fn read_all(src: &ArraySource) -> Vec<u8> {
        let layout = src.layout();
        let region = layout.shape().full_region();
        let mut buf = vec![0; layout.region_bytes(&region)];
        let status = src
            .read(&ReadRequest::new(region, noop_waker()), &mut buf)
            .unwrap();
        assert_eq!(status, ReadStatus::Ready);
        buf
    }

    #[test]
    fn write_marks_only_the_region() {
        let src = ArraySource::new(Array2::<u8>::zeros((8, 8))).unwrap();
        let v0 = src.version();
        let v1 = src
            .write(&[2, 3], arr2(&[[1u8, 2], [3, 4]]).view())
            .unwrap();
        assert!(v1 > v0);
        assert_eq!(
            src.changes_since(v0),
            Changes::Regions(vec![Region::d2(2, 3, 2, 2)])
        );
        let all = read_all(&src);
        assert_eq!(&all[2 * 8 + 3..2 * 8 + 5], &[1, 2]);
        assert_eq!(&all[3 * 8 + 3..3 * 8 + 5], &[3, 4]);
        assert_eq!(all.iter().map(|&b| b as u32).sum::<u32>(), 10);
    }

    #[test]
    fn write_rejects_bad_input_without_changing_anything() {
        let src = ArraySource::new(Array2::<u16>::zeros((4, 4))).unwrap();
        let v = src.version();
        let e = src
            .write(&[3, 3], Array2::<u16>::ones((2, 2)).view())
            .unwrap_err();
        assert!(e.to_string().contains("out of bounds"), "{e}");
        let e = src
            .write(&[0, 0], Array2::<f32>::ones((2, 2)).view())
            .unwrap_err();
        assert!(e.to_string().contains("holds u16, the data is f32"), "{e}");
        let e = src
            .write(&[0, 0], Array3::<u16>::ones((1, 2, 2)).view())
            .unwrap_err();
        assert!(
            e.to_string().contains("expected [4, 4], got [1, 2, 2]"),
            "{e}"
        );
        assert_eq!(src.version(), v);
        assert!(read_all(&src).iter().all(|&b| b == 0));
    }

    #[test]
    fn channels_take_the_last_axis() {
        let src = ArraySource::with_channels(Array3::<u8>::zeros((2, 3, 3))).unwrap();
        let l = src.layout();
        assert_eq!((l.shape().dims(), l.channels()), (&[2usize, 3][..], 3));
        let e = ArraySource::with_channels(Array3::<u8>::zeros((2, 3, 5)))
            .err()
            .unwrap();
        assert!(e.to_string().contains("5 channels"), "{e}");
        let e = ArraySource::new(Array2::<u8>::zeros((0, 3))).err().unwrap();
        assert!(e.to_string().contains("[0, 3] is empty"), "{e}");
    }

    #[test]
    fn update_mutates_a_region_in_place() {
        let src = ArraySource::new(Array2::<f32>::zeros((4, 6))).unwrap();
        let v0 = src.version();
        src.update::<f32>(Region::d2(1, 2, 2, 3), |mut v| v.fill(7.0))
            .unwrap();
        assert_eq!(
            src.changes_since(v0),
            Changes::Regions(vec![Region::d2(1, 2, 2, 3)])
        );
        let total: f32 = src.with_view::<f32, _>(|v| v.sum()).unwrap();
        assert_eq!(total, 42.0);
    }

    #[test]
    fn non_standard_layout_is_copied_into_c_order() {
        let a = arr2(&[[1u8, 2, 3], [4, 5, 6]]).reversed_axes();
        let src = ArraySource::new(a).unwrap();
        assert_eq!(read_all(&src), vec![1, 4, 2, 5, 3, 6]);
    }

    #[test]
    fn released_sources_report_every_write_however_many() {
        let src = ArraySource::new(Array2::<u8>::zeros((8, 8)))
            .unwrap()
            .with_policy(HostCopyPolicy::ReleaseAfterUpload);
        let c = ConsumerId::next();
        src.attach(c);
        src.uploaded(c, src.version());
        assert!(src.is_released());
        let v = src.version();
        for i in 0..(CHANGE_LOG_CAPACITY + 10) {
            src.write(&[i % 8, 0], Array2::from_elem((1, 1), 1u8).view())
                .unwrap();
        }
        match src.changes_since(v) {
            Changes::Regions(r) => assert_eq!(r.len(), CHANGE_LOG_CAPACITY + 10),
            other => panic!("expected regions, got {other:?}"),
        }
    }

    #[test]
    fn release_frees_host_memory_and_keeps_later_writes_until_uploaded() {
        let src = ArraySource::new(Array2::<u8>::zeros((64, 64)))
            .unwrap()
            .with_policy(HostCopyPolicy::ReleaseAfterUpload);
        let a = ConsumerId::next();
        let b = ConsumerId::next();
        src.attach(a);
        src.attach(b);
        src.uploaded(a, src.version());
        assert!(!src.is_released(), "b has not uploaded yet");
        src.uploaded(b, src.version());
        assert!(src.is_released());
        assert_eq!(src.host_bytes(), 0);

        let before = src.version();
        src.write(&[1, 1], Array2::<u8>::from_elem((2, 2), 9).view())
            .unwrap();
        assert_eq!(src.readable(), Readable::ChangedRegionsOnly);
        assert_eq!(src.host_bytes(), 4);
        let mut buf = [0u8; 4];
        let _ = src
            .read(
                &ReadRequest::new(Region::d2(1, 1, 2, 2), noop_waker()),
                &mut buf,
            )
            .unwrap();
        assert_eq!(buf, [9; 4]);
        let e = src
            .read(
                &ReadRequest::new(Region::d2(0, 0, 2, 2), noop_waker()),
                &mut buf,
            )
            .unwrap_err();
        assert!(matches!(e, SourceError::HostReleased { .. }));
        assert!(src.changes_since(before) != Changes::None);
        src.uploaded(a, src.version());
        src.uploaded(b, src.version());
        assert_eq!(src.host_bytes(), 0);
    }
}
