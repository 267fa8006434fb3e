//! What visuals accept as a source: a sluice source object, a numpy array (wrapped by
//! reference), or any object following the custom-source protocol.

use std::sync::Arc;

use numpy::{PyUntypedArray, PyUntypedArrayMethods};
use pyo3::prelude::*;
use sluice_core::SharedSource;

use crate::custom_source::PythonSource;
use crate::errors::{guard, source_error};
use crate::lazy_source::PyLazySource;
use crate::mmap_source::PyMmapSource;
use crate::numpy_source::{NumpySource, PyArraySource};

/// Which numpy axes an array passed straight to a visual has.
#[derive(Clone, Copy)]
pub enum ArrayAxes {
    /// The last axis is channels when it has 3 or 4 entries and there are 3 axes (an RGB(A)
    /// image); every axis is spatial otherwise.
    Image,
    /// Every axis is spatial (a volume).
    Spatial,
    /// A 2-D array is `(n, channels)`; a 1-D array scalars (mesh attributes).
    Attribute,
}

/// The shared source for `object`, and the Python object the visual keeps to return it.
pub fn shared_source(
    object: &Bound<'_, PyAny>,
    axes: ArrayAxes,
) -> PyResult<(SharedSource, Py<PyAny>)> {
    let py = object.py();
    if let Ok(s) = object.cast::<PyArraySource>() {
        return Ok((s.get().inner.clone(), object.clone().unbind()));
    }
    if let Ok(s) = object.cast::<PyLazySource>() {
        return Ok((s.get().inner.clone(), object.clone().unbind()));
    }
    if let Ok(s) = object.cast::<PyMmapSource>() {
        return Ok((s.get().inner.clone(), object.clone().unbind()));
    }
    if let Ok(s) = object.cast::<crate::zarr_source::PyZarrSource>() {
        return Ok((s.get().inner.clone(), object.clone().unbind()));
    }
    #[cfg(target_os = "linux")]
    if let Ok(s) = object.cast::<crate::host_buffer_source::PyHostBufferSource>() {
        return Ok((s.get().inner.clone(), object.clone().unbind()));
    }
    #[cfg(all(feature = "cuda", target_os = "linux"))]
    if let Ok(s) = object.cast::<crate::cuda::PyCudaSource>() {
        return Ok((s.get().shared(), object.clone().unbind()));
    }
    if let Ok(array) = object.cast::<PyUntypedArray>() {
        let channels = match axes {
            ArrayAxes::Image => array.ndim() == 3 && matches!(array.shape()[2], 3 | 4),
            ArrayAxes::Spatial => false,
            ArrayAxes::Attribute => array.ndim() == 2,
        };
        let source = guard(|| NumpySource::new(array, channels).map_err(source_error))?;
        let wrapper = Py::new(
            py,
            PyArraySource {
                inner: Arc::new(source),
            },
        )?;
        let shared: SharedSource = wrapper.get().inner.clone();
        return Ok((shared, wrapper.into_any()));
    }
    if PyLazySource::looks_lazy(object)? {
        let channels = matches!(axes, ArrayAxes::Attribute)
            && object.getattr("ndim")?.extract::<usize>()? == 2;
        let wrapper = Py::new(py, PyLazySource::wrap(object, channels)?)?;
        let shared: SharedSource = wrapper.get().inner.clone();
        return Ok((shared, wrapper.into_any()));
    }
    let source = PythonSource::new(object)?;
    Ok((Arc::new(source), object.clone().unbind()))
}

/// The numpy index (a tuple of slices, one per spatial axis) of `region` in a source of
/// `layout`.
pub fn region_index<'py>(
    py: Python<'py>,
    layout: &sluice_core::Layout,
    region: &sluice_core::Region,
) -> PyResult<Bound<'py, pyo3::types::PyTuple>> {
    let n = layout.shape().ndim();
    // `region` passed `check_read`, so its ends lie inside the level and fit `isize`.
    let slices = (3 - n..3).map(|a| {
        pyo3::types::PySlice::new(
            py,
            region.origin[a] as isize,
            (region.origin[a] + region.size[a]) as isize,
            1,
        )
    });
    pyo3::types::PyTuple::new(py, slices)
}

/// Copies `value`, what a Python source or lazy array gave for `region` (anything numpy turns
/// into an array of `dtype`), into `dst`: its shape must be the region's (channels last) and its
/// bytes exactly `dst`'s length. `what` names the call for the error ("x.read((...))").
pub fn copy_region_into(
    py: Python<'_>,
    value: Bound<'_, PyAny>,
    dtype: &Bound<'_, PyAny>,
    layout: &sluice_core::Layout,
    region: &sluice_core::Region,
    what: impl FnOnce() -> PyResult<String>,
    dst: &mut [u8],
) -> PyResult<()> {
    let array = py
        .import("numpy")?
        .call_method1("ascontiguousarray", (value, dtype))?
        .cast_into::<PyUntypedArray>()?;
    let n = layout.shape().ndim();
    let mut expected: Vec<usize> = region.size[3 - n..].to_vec();
    if layout.channels() > 1 {
        expected.push(layout.channels());
    }
    if array.shape() != expected.as_slice() {
        return Err(pyo3::exceptions::PyValueError::new_err(format!(
            "{} returned shape {:?}; expected {:?}",
            what()?,
            array.shape(),
            expected
        )));
    }
    let bytes = py
        .import("builtins")?
        .getattr("memoryview")?
        .call1((array,))?
        .call_method0("tobytes")?;
    let bytes: &[u8] = bytes.cast::<pyo3::types::PyBytes>()?.as_bytes();
    if bytes.len() != dst.len() {
        return Err(pyo3::exceptions::PyValueError::new_err(format!(
            "{} gave {} bytes for region {region}, which needs {}",
            what()?,
            bytes.len(),
            dst.len()
        )));
    }
    dst.copy_from_slice(bytes);
    Ok(())
}
