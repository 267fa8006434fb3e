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
