//! `sluice.open_npy`, `sluice.open_raw`: files mapped read-only.

use std::path::PathBuf;
use std::sync::Arc;

use pyo3::prelude::*;
use sluice_core::{DataSource, Layout, MmapSource, Shape};

use crate::dtype::{numpy_dtype, parse_dtype};
use crate::errors::{guard, source_error};

/// A memory-mapped `.npy` or raw file; only the pages of regions a renderer uploads are read.
#[pyclass(name = "MmapSource", module = "sluice", frozen)]
pub struct PyMmapSource {
    pub(crate) inner: Arc<MmapSource>,
}

#[pymethods]
impl PyMmapSource {
    /// Spatial shape, numpy order.
    #[getter]
    fn shape(&self) -> Vec<usize> {
        self.inner.layout().shape().dims().to_vec()
    }

    /// Channels per sample.
    #[getter]
    fn channels(&self) -> usize {
        self.inner.layout().channels()
    }

    /// The element type as a numpy dtype.
    #[getter]
    fn dtype<'py>(&self, py: Python<'py>) -> Bound<'py, numpy::PyArrayDescr> {
        numpy_dtype(py, self.inner.layout().element())
    }

    /// The mapped file.
    #[getter]
    fn path(&self) -> PathBuf {
        self.inner.path().to_path_buf()
    }

    /// Bytes handed out so far (what was touched of the file).
    #[getter]
    fn bytes_read(&self) -> u64 {
        self.inner.bytes_read()
    }

    fn __repr__(&self) -> String {
        format!("MmapSource({})", self.inner.path().display())
    }
}

/// Maps a `.npy` file (C order, little-endian); with `channels=True` its last axis holds 1
/// to 4 channels.
#[pyfunction]
#[pyo3(signature = (path, *, channels = false))]
pub fn open_npy(path: PathBuf, channels: bool) -> PyResult<PyMmapSource> {
    guard(|| {
        let source = if channels {
            MmapSource::open_npy_with_channels(&path)
        } else {
            MmapSource::open_npy(&path)
        }
        .map_err(source_error)?;
        Ok(PyMmapSource {
            inner: Arc::new(source),
        })
    })
}

/// Maps a raw file of samples of `shape` (numpy order, 1 to 3 spatial axes) and `dtype`,
/// `channels` per sample, tightly packed little-endian from byte `offset` on.
#[pyfunction]
#[pyo3(signature = (path, shape, dtype, *, channels = 1, offset = 0))]
pub fn open_raw(
    path: PathBuf,
    shape: Vec<usize>,
    dtype: &Bound<'_, PyAny>,
    channels: usize,
    offset: u64,
) -> PyResult<PyMmapSource> {
    let element = parse_dtype(dtype)?;
    let bytes = shape
        .iter()
        .try_fold(channels.saturating_mul(element.size()), |acc, &d| {
            acc.checked_mul(d)
        });
    if bytes.is_none() {
        return Err(pyo3::exceptions::PyValueError::new_err(format!(
            "shape {shape:?} with {channels} channels of {element} does not fit in memory sizes"
        )));
    }
    guard(|| {
        let shape = Shape::new(&shape).map_err(source_error)?;
        let layout = Layout::new(shape, element, channels).map_err(source_error)?;
        let source = MmapSource::open_raw(&path, layout, offset).map_err(source_error)?;
        Ok(PyMmapSource {
            inner: Arc::new(source),
        })
    })
}
