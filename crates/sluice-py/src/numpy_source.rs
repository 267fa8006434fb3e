//! `sluice.ArraySource`: a numpy array shown by reference.
//!
//! The source keeps a reference to the array (so its memory lives as long as the source) and
//! lends the renderer the array's own bytes: no copy on the host at all where each row's
//! samples are back to back (C-contiguous arrays and crops of them); other strides are
//! gathered sample by sample into the renderer's staging memory, never into a full copy.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use numpy::{PyUntypedArray, PyUntypedArrayMethods};
use parking_lot::RwLock;
use pyo3::exceptions::PyTypeError;
use pyo3::prelude::*;
use pyo3::types::PyDict;
use sluice_core::{
    check_read, ChangeLog, Changes, DataSource, HostView, Layout, LendOutcome, ReadRequest,
    ReadStatus, Region, Shape, SourceError, Version,
};

use crate::dtype::{element_type, numpy_dtype};
use crate::errors::{guard, source_error};
use crate::region::key_region;

/// How many region writes a source remembers before answering "everything changed".
const CHANGE_LOG_CAPACITY: usize = 1024;

/// The address of an array's first element.
#[derive(Clone, Copy)]
struct DataPtr(*const u8);

// SAFETY: the pointer is only dereferenced while the `NumpySource` holding it is alive, and the
// source holds a reference to the numpy array that owns (or keeps alive the owner of) the
// memory; numpy arrays cannot be resized or freed while referenced. Which thread reads the
// bytes does not matter to numpy.
unsafe impl Send for DataPtr {}
// SAFETY: as above; the pointer itself is never written after construction.
unsafe impl Sync for DataPtr {}

/// A `DataSource` over a numpy array's memory.
pub struct NumpySource {
    /// Keeps the memory alive; the array object itself is only touched with the GIL held.
    array: Py<PyUntypedArray>,
    data: DataPtr,
    layout: Layout,
    /// Byte strides of the three (padded) spatial axes, numpy order.
    strides: [isize; 3],
    /// Byte stride between channels.
    channel_stride: isize,
    /// Whether each row's samples are back to back and strides are non-negative, so that a
    /// region can be lent in place.
    lendable: bool,
    /// Whether the array's last axis is the channel axis.
    channel_axis: bool,
    log: RwLock<ChangeLog>,
    bytes_lent: AtomicU64,
    bytes_gathered: AtomicU64,
    label: String,
}

impl NumpySource {
    /// A source over `array`; with `channels`, its last axis holds 1 to 4 channels.
    pub fn new(array: &Bound<'_, PyUntypedArray>, channels: bool) -> Result<Self, SourceError> {
        let element = element_type(&array.dtype())?;
        let dims = array.shape().to_vec();
        let strides = array.strides().to_vec();
        let (spatial, channel_count, channel_stride) = if channels {
            match dims.split_last() {
                Some((&c, spatial)) if !spatial.is_empty() => {
                    (spatial.to_vec(), c, strides[dims.len() - 1])
                }
                _ => return Err(SourceError::UnsupportedDimensions { shape: dims }),
            }
        } else {
            (dims.clone(), 1, element.size() as isize)
        };
        let shape = Shape::new(&spatial)?;
        let layout = Layout::new(shape, element, channel_count)?;
        let mut padded = [0isize; 3];
        let n = spatial.len();
        padded[3 - n..].copy_from_slice(&strides[..n]);
        let sample_bytes = layout.sample_bytes() as isize;
        let lendable = padded.iter().all(|&s| s >= 0)
            && padded[2] == sample_bytes
            && (channel_count == 1 || channel_stride == element.size() as isize);
        // SAFETY: `as_array_ptr` is a live PyArrayObject (we hold `array`); reading its `data`
        // field does not touch the memory it points to.
        let data = unsafe { (*array.as_array_ptr()).fields.data } as *const u8;
        let label = format!(
            "ArraySource(numpy {} {:?})",
            crate::dtype::descr_str(&array.dtype()),
            dims
        );
        Ok(NumpySource {
            array: array.clone().unbind(),
            data: DataPtr(data),
            layout,
            strides: padded,
            channel_stride,
            lendable,
            channel_axis: channels,
            log: RwLock::new(ChangeLog::new(CHANGE_LOG_CAPACITY)),
            bytes_lent: AtomicU64::new(0),
            bytes_gathered: AtomicU64::new(0),
            label,
        })
    }

    /// Byte offset of sample `origin` (numpy order, padded to 3 axes) from the first element.
    fn offset(&self, origin: [usize; 3]) -> isize {
        (0..3).map(|a| origin[a] as isize * self.strides[a]).sum()
    }

    /// The lent view of `region`; only for lendable arrays and regions inside the layout.
    fn view(&self, region: Region) -> HostView<'_> {
        let sample_bytes = self.layout.sample_bytes();
        let row_bytes = region.size[2] * sample_bytes;
        let row_pitch = if region.size[1] > 1 {
            self.strides[1] as usize
        } else {
            row_bytes
        };
        let plane_pitch = if region.size[0] > 1 {
            self.strides[0] as usize
        } else {
            row_pitch * region.size[1]
        };
        let span =
            (region.size[0] - 1) * plane_pitch + (region.size[1] - 1) * row_pitch + row_bytes;
        let start = self.offset(region.origin);
        // SAFETY: the region lies inside the array (checked by the caller through
        // `check_read`) and strides are non-negative (`lendable`), so bytes `start..start +
        // span` are inside the array's memory, which `self.array` keeps alive. numpy code may
        // write these bytes concurrently (an in-place change the user then reports with
        // `mark_dirty`); sluice only reads them as plain bytes.
        let bytes = unsafe { std::slice::from_raw_parts(self.data.0.offset(start), span) };
        HostView {
            bytes,
            region,
            sample_bytes,
            row_pitch,
            plane_pitch,
        }
    }

    /// Copies `region` tightly packed into `dst` element by element (any strides).
    fn gather(&self, region: Region, dst: &mut [u8]) {
        let element = self.layout.element().size();
        let channels = self.layout.channels();
        let mut out = dst.chunks_exact_mut(element);
        for p in 0..region.size[0] {
            for r in 0..region.size[1] {
                for c in 0..region.size[2] {
                    let at = [
                        region.origin[0] + p,
                        region.origin[1] + r,
                        region.origin[2] + c,
                    ];
                    let sample = self.offset(at);
                    for ch in 0..channels {
                        let Some(d) = out.next() else { return };
                        let src = sample + ch as isize * self.channel_stride;
                        // SAFETY: `at` is inside the array (checked by the caller) and `ch`
                        // below the channel count, so `src..src + element` is one element of
                        // the array's memory, kept alive by `self.array`; `d` is `element`
                        // bytes of the caller's buffer, which cannot overlap numpy memory.
                        unsafe {
                            std::ptr::copy_nonoverlapping(
                                self.data.0.offset(src),
                                d.as_mut_ptr(),
                                element,
                            );
                        }
                    }
                }
            }
        }
    }

    fn record(&self, region: Option<Region>) -> Version {
        let mut log = self.log.write();
        match region {
            Some(r) => log.record(r),
            None => log.record_all(),
        }
    }
}

impl DataSource for NumpySource {
    fn layout(&self) -> Layout {
        self.layout.clone()
    }

    fn version(&self) -> Version {
        self.log.read().version()
    }

    fn changes_since(&self, since: Version) -> Changes {
        self.log.read().since(since)
    }

    fn read(&self, request: &ReadRequest<'_>, dst: &mut [u8]) -> Result<ReadStatus, SourceError> {
        check_read(&self.layout, request, dst.len())?;
        let _consistent = self.log.read();
        if self.lendable {
            self.view(request.region).copy_packed(dst);
        } else {
            self.gather(request.region, dst);
        }
        self.bytes_gathered
            .fetch_add(dst.len() as u64, Ordering::Relaxed);
        Ok(ReadStatus::Ready)
    }

    fn lend(
        &self,
        request: &ReadRequest<'_>,
        visit: &mut dyn FnMut(HostView<'_>),
    ) -> Result<LendOutcome, SourceError> {
        self.lend_many(std::slice::from_ref(request), &mut |_, view| visit(view))
    }

    fn lend_many(
        &self,
        requests: &[ReadRequest<'_>],
        visit: &mut dyn FnMut(usize, HostView<'_>),
    ) -> Result<LendOutcome, SourceError> {
        if !self.lendable {
            return Ok(LendOutcome::NotLendable);
        }
        for request in requests {
            let bytes = self.layout.region_bytes(&request.region);
            check_read(&self.layout, request, bytes)?;
        }
        // Writes through `src[...] = v` take the write lock: none lands between these views.
        let _consistent = self.log.read();
        for (i, request) in requests.iter().enumerate() {
            let view = self.view(request.region);
            self.bytes_lent.fetch_add(
                view.region.len() as u64 * view.sample_bytes as u64,
                Ordering::Relaxed,
            );
            visit(i, view);
        }
        Ok(LendOutcome::Lent)
    }

    fn label(&self) -> String {
        self.label.clone()
    }
}

/// A numpy array shown by reference.
///
/// `ArraySource(array, channels=False)`: every axis of `array` is spatial (2-D image or 3-D
/// volume, or 1-D for mesh data); with `channels=True` the last axis holds 1 to 4 channels
/// (`(h, w, 4)` RGBA). The source keeps `array` alive and never copies it.
#[pyclass(name = "ArraySource", module = "sluice", frozen)]
pub struct PyArraySource {
    pub(crate) inner: Arc<NumpySource>,
}

#[pymethods]
impl PyArraySource {
    #[new]
    #[pyo3(signature = (array, *, channels = false))]
    fn new(array: &Bound<'_, PyAny>, channels: bool) -> PyResult<Self> {
        let array = array.cast::<PyUntypedArray>().map_err(|_| {
            PyTypeError::new_err(format!(
                "ArraySource takes a numpy.ndarray, got {} (wrap it with numpy.asarray first)",
                array
                    .get_type()
                    .name()
                    .map(|n| n.to_string())
                    .unwrap_or_default()
            ))
        })?;
        guard(|| {
            let inner = NumpySource::new(array, channels).map_err(source_error)?;
            Ok(PyArraySource {
                inner: Arc::new(inner),
            })
        })
    }

    /// The numpy array the source shows (the same object, not a copy).
    #[getter]
    fn array(&self, py: Python<'_>) -> Py<PyUntypedArray> {
        self.inner.array.clone_ref(py)
    }

    /// Spatial shape, numpy order (without the channel axis).
    #[getter]
    fn shape(&self) -> Vec<usize> {
        self.inner.layout.shape().dims().to_vec()
    }

    /// Channels per sample (1 to 4).
    #[getter]
    fn channels(&self) -> usize {
        self.inner.layout.channels()
    }

    /// The element type as a numpy dtype.
    #[getter]
    fn dtype<'py>(&self, py: Python<'py>) -> Bound<'py, numpy::PyArrayDescr> {
        numpy_dtype(py, self.inner.layout.element())
    }

    /// The version: moves on every write and `mark_dirty`.
    #[getter]
    fn version(&self) -> u64 {
        self.inner.version().0
    }

    /// Whether the renderer reads the array's bytes in place (each row's samples back to
    /// back); otherwise it gathers them sample by sample.
    #[getter]
    fn lends_in_place(&self) -> bool {
        self.inner.lendable
    }

    /// Bytes handed to renderers: `lent` (read in place from the array's memory) and
    /// `copied` (gathered into a renderer's buffer).
    fn stats<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
        let d = PyDict::new(py);
        d.set_item("lent", self.inner.bytes_lent.load(Ordering::Relaxed))?;
        d.set_item("copied", self.inner.bytes_gathered.load(Ordering::Relaxed))?;
        Ok(d)
    }

    /// `src[y0:y1, x0:x1] = values`: writes into the array (numpy broadcasting rules) and marks
    /// only that region dirty.
    fn __setitem__(&self, key: &Bound<'_, PyAny>, value: &Bound<'_, PyAny>) -> PyResult<()> {
        let extra = usize::from(self.inner.channel_axis);
        let region = key_region(key, &self.inner.layout.shape(), extra)?;
        let array = self.inner.array.bind(key.py());
        // Hold the write lock across the numpy write: a frame never sees it half done.
        let mut log = self.inner.log.write();
        array.set_item(key, value)?;
        log.record(region);
        Ok(())
    }

    /// Reports an in-place change of the array made through numpy: `region` as an index
    /// (`numpy.s_[10:20, 0:64]`), or `None` for the whole array.
    #[pyo3(signature = (region = None))]
    fn mark_dirty(&self, region: Option<&Bound<'_, PyAny>>) -> PyResult<u64> {
        let region = match region {
            Some(key) => Some(key_region(key, &self.inner.layout.shape(), 1)?),
            None => None,
        };
        Ok(self.inner.record(region).0)
    }

    fn __repr__(&self) -> String {
        self.inner.label.clone()
    }
}
