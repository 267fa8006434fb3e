//! `sluice.HostBufferSource`: numpy arrays handed over whole, replaced per update, and copied
//! by the GPU straight from their pages (Linux, `VK_EXT_external_memory_host`; staged where the
//! driver lacks it). See sluice-interop's `HostBufferSource`.
//!
//! `replace(array)` keeps a reference to `array` (so its memory lives) and hands back the array
//! shown before once no GPU copy reads it any more. The two most recent arrays handed back stay
//! imported (their references kept here), so alternating two arrays imports each once.

use std::ptr::NonNull;
use std::sync::Arc;

use numpy::{PyArrayDescrMethods, PyUntypedArray, PyUntypedArrayMethods};
use parking_lot::Mutex;
use pyo3::exceptions::{PyTypeError, PyValueError};
use pyo3::prelude::*;
use pyo3::types::PyDict;
use sluice_core::{DataSource, Layout, Shape};
use sluice_interop::{HostBuffer, HostBufferSource};

use crate::dtype::{descr_str, element_type};
use crate::errors::{guard, source_error, SluiceError};
use crate::interop_device::{interop, interop_error};

/// Arrays handed back that stay imported, for their next hand-over.
const KEPT_IMPORTS: usize = 2;

/// The numpy array a [`HostBuffer`] lends, kept alive by this reference.
type Owner = Py<PyUntypedArray>;

#[pyclass(name = "HostBufferSource", module = "sluice", frozen)]
pub struct PyHostBufferSource {
    pub(crate) inner: Arc<HostBufferSource>,
    shape: Vec<usize>,
    dtype: String,
    dtype_name: String,
    kept: Mutex<Vec<HostBuffer>>,
    /// The byte range `[start, end)` of the array shown now: `replace` refuses an array over
    /// it (handing that array back as free to write would be false).
    shown: Mutex<(usize, usize)>,
}

fn as_array<'a, 'py>(object: &'a Bound<'py, PyAny>) -> PyResult<&'a Bound<'py, PyUntypedArray>> {
    object.cast::<PyUntypedArray>().map_err(|_| {
        PyTypeError::new_err(format!(
            "HostBufferSource takes a numpy.ndarray, got {}",
            object
                .get_type()
                .name()
                .map(|n| n.to_string())
                .unwrap_or_default()
        ))
    })
}

/// A buffer over `array`'s memory, holding a reference to it.
fn host_buffer(array: &Bound<'_, PyUntypedArray>) -> PyResult<HostBuffer> {
    if !array.is_c_contiguous() {
        return Err(PyValueError::new_err(format!(
            "HostBufferSource needs a C-contiguous array (its bytes are copied as they lie); got \
             shape {:?} with strides {:?}: pass numpy.ascontiguousarray(a)",
            array.shape(),
            array.strides()
        )));
    }
    let len = array.len() * array.dtype().itemsize();
    // SAFETY: `as_array_ptr` is a live PyArrayObject (we hold `array`); reading its `data`
    // field does not touch the memory it points to.
    let data = unsafe { (*array.as_array_ptr()).fields.data } as *mut u8;
    let ptr = NonNull::new(data)
        .or_else(|| (len == 0).then(NonNull::dangling))
        .ok_or_else(|| PyValueError::new_err("the array has no data pointer"))?;
    let owner: Owner = array.clone().unbind();
    // SAFETY: a C-contiguous array's `len` bytes at `data` are its buffer, which numpy keeps
    // allocated and in place (it refuses to resize an array others reference) while `owner`, a
    // reference to the array, lives. The buffer is never written through the HostBuffer (this
    // module only lends it); numpy code may write it while a source shows it, as with
    // `ArraySource`: sluice only reads it as plain bytes, and the docs tell users to write the
    // array handed back instead.
    Ok(unsafe { HostBuffer::from_raw_parts(ptr, len, owner) })
}

/// The byte range `[start, end)` an array's data occupies (its data pointer and length; the
/// memory is not touched).
fn byte_range(array: &Bound<'_, PyUntypedArray>) -> (usize, usize) {
    // SAFETY: `as_array_ptr` is a live PyArrayObject (we hold `array`); reading its `data`
    // field does not touch the memory it points to.
    let data = unsafe { (*array.as_array_ptr()).fields.data } as usize;
    let len = array.len().saturating_mul(array.dtype().itemsize());
    (data, data.saturating_add(len))
}

fn same_array(buffer: &HostBuffer, array: &Bound<'_, PyUntypedArray>) -> bool {
    buffer
        .owner::<Owner>()
        .is_some_and(|owner| owner.as_ptr() == array.as_ptr())
}

#[pymethods]
impl PyHostBufferSource {
    /// A source showing `array` (C-contiguous; 2-D, or 3-D with `channels` as the last axis,
    /// which defaults to true for a 3-D array of 3 or 4 entries on its last axis, as images
    /// take it), imported on the interop device where the driver allows it. Show it with
    /// renderers made by `Renderer(interop=True)`. `host_only=True` stages every array instead.
    /// On lavapipe a 2-D array is drawn straight from its own pages, with
    /// nothing copied; `sample_in_place=False` copies from them instead, as on a GPU.
    #[new]
    #[pyo3(signature = (array, *, channels = None, host_only = false, sample_in_place = true))]
    fn new(
        py: Python<'_>,
        array: &Bound<'_, PyAny>,
        channels: Option<bool>,
        host_only: bool,
        sample_in_place: bool,
    ) -> PyResult<Self> {
        let array = as_array(array)?;
        let dims = array.shape().to_vec();
        let channels = channels.unwrap_or(dims.len() == 3 && matches!(dims.last(), Some(3 | 4)));
        let element = element_type(&array.dtype()).map_err(source_error)?;
        let (spatial, count) = match (channels, dims.split_last()) {
            (true, Some((&c, spatial))) if !spatial.is_empty() => (spatial.to_vec(), c),
            (true, _) => {
                return Err(PyValueError::new_err(format!(
                    "channels=True needs an array of at least 2 axes, got shape {dims:?}"
                )))
            }
            (false, _) => (dims.clone(), 1),
        };
        let shape = Shape::new(&spatial).map_err(source_error)?;
        let layout = Layout::new(shape, element, count).map_err(source_error)?;
        let buffer = host_buffer(array)?;
        let interop = interop()?;
        let inner = py.detach(|| {
            guard(|| {
                if host_only {
                    HostBufferSource::host_only(interop, layout, buffer)
                } else {
                    HostBufferSource::new(interop, layout, buffer)
                }
                .map_err(interop_error)
            })
        })?;
        inner.set_sample_in_place(sample_in_place);
        let shown = Mutex::new(byte_range(array));
        Ok(PyHostBufferSource {
            inner: Arc::new(inner),
            shape: dims,
            dtype: descr_str(&array.dtype()),
            dtype_name: format!("{} ({})", array.dtype(), descr_str(&array.dtype())),
            kept: Mutex::new(Vec::new()),
            shown,
        })
    }

    /// Shows `array` from now on (same shape and dtype as the first, C-contiguous) and returns
    /// the array shown before, once no GPU copy or frame reads it any more: write your next
    /// data into that one. Do not write an array while the source shows it (on lavapipe
    /// frames are drawn from its pages, so such a write shows up in them). An array over the
    /// bytes of the one shown now (itself, or a view of it) is refused with a `ValueError`.
    fn replace(&self, py: Python<'_>, array: &Bound<'_, PyAny>) -> PyResult<Py<PyAny>> {
        let array = as_array(array)?;
        let dtype = descr_str(&array.dtype());
        if array.shape() != self.shape.as_slice() || dtype != self.dtype {
            return Err(PyValueError::new_err(format!(
                "HostBufferSource.replace needs an array of shape {:?} and dtype {}, like the \
                 first; got shape {:?} and dtype {} ({dtype})",
                self.shape,
                self.dtype_name,
                array.shape(),
                array.dtype()
            )));
        }
        let range = byte_range(array);
        let shown = *self.shown.lock();
        if range.0 < shown.1 && shown.0 < range.1 {
            return Err(PyValueError::new_err(format!(
                "HostBufferSource.replace: the array's bytes ({:#x}..{:#x}) overlap those of the \
                 array shown now ({:#x}..{:#x}); pass another array (the one the last replace \
                 handed back, written with the new data), since the array handed back is free \
                 to write and this one is not",
                range.0, range.1, shown.0, shown.1
            )));
        }
        let kept = {
            let mut kept = self.kept.lock();
            kept.iter()
                .position(|b| same_array(b, array))
                .map(|i| kept.remove(i))
        };
        let buffer = match kept {
            Some(buffer) => buffer,
            None => host_buffer(array)?,
        };
        let inner = self.inner.clone();
        let back = py.detach(move || inner.replace(buffer));
        let back = match back {
            Ok(back) => back,
            Err(e) => return Err(PyValueError::new_err(e.to_string())),
        };
        let previous = back
            .owner::<Owner>()
            .map(|owner| owner.clone_ref(py))
            .ok_or_else(|| SluiceError::new_err("HostBufferSource: a buffer of no array"))?;
        *self.shown.lock() = range;
        let mut kept = self.kept.lock();
        kept.push(back);
        if kept.len() > KEPT_IMPORTS {
            kept.remove(0);
        }
        Ok(previous.into_any())
    }

    /// Whether the array shown now is copied by the GPU from its own pages.
    #[getter]
    fn imported(&self) -> bool {
        self.inner.is_imported()
    }

    /// Why the array shown now is not copied from its own pages (`None` when it is).
    #[getter]
    fn fallback_reason(&self) -> Option<String> {
        self.inner.fallback_reason()
    }

    /// Why every array is staged (`None` where they are imported).
    #[getter]
    fn staged_reason(&self) -> Option<String> {
        self.inner.staged_reason().map(str::to_owned)
    }

    /// Why the last renderer that asked could not draw the array shown from its own pages
    /// (`None` if it could, or none asked; GPUs never ask).
    #[getter]
    fn in_place_refusal(&self) -> Option<String> {
        self.inner.in_place_refusal()
    }

    /// Counts so far: `buffers_handed`, `imports_made`, `buffers_copied`, `bytes_copied` (on
    /// the host, for arrays that could not be imported), `gpu_copies`, `gpu_bytes`, `waits`,
    /// `in_place_images` (arrays drawn from their own pages, lavapipe).
    fn stats<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
        let s = self.inner.stats();
        let d = PyDict::new(py);
        d.set_item("buffers_handed", s.buffers_handed)?;
        d.set_item("imports_made", s.imports_made)?;
        d.set_item("buffers_copied", s.buffers_copied)?;
        d.set_item("bytes_copied", s.bytes_copied)?;
        d.set_item("gpu_copies", s.gpu_copies)?;
        d.set_item("gpu_bytes", s.gpu_bytes)?;
        d.set_item("waits", s.waits)?;
        d.set_item("in_place_images", s.in_place_images)?;
        Ok(d)
    }

    /// The shape of the arrays.
    #[getter]
    fn shape(&self) -> Vec<usize> {
        self.shape.clone()
    }

    fn __repr__(&self) -> String {
        self.inner.label()
    }
}
