//! `sluice.LazySource`: a lazy chunked array (a dask array, a zarr array, or any object with
//! `.shape`, `.dtype`, `.chunks` and numpy-style indexing) read chunk by chunk on the loader
//! pool.
//!
//! Each chunk is read on a pool thread as `numpy.asarray(array[index])` with the GIL taken
//! only around that call (dask computes the chunk there, zarr reads and decodes it); the render
//! thread never waits for it: a frame shows the chunks that are in, and the renderer asks for
//! a redraw (`take_redraw_request`) as more arrive.

use std::sync::Arc;

use numpy::PyArrayDescr;
use pyo3::exceptions::{PyTypeError, PyValueError};
use pyo3::prelude::*;
use sluice_core::{
    ChunkFill, ChunkGrid, ChunkKey, ChunkLoader, DataSource, Layout, LazySource, Region, Shape,
    SourceError,
};

use crate::dtype::{element_type, numpy_dtype};
use crate::errors::{guard, source_error};
use crate::sources::{copy_region_into, region_index};

/// A `ChunkLoader` that indexes a Python array-like object.
struct PyArrayLoader {
    object: Py<PyAny>,
    layout: Layout,
    dtype: Py<PyArrayDescr>,
    label: String,
}

impl PyArrayLoader {
    fn new(object: &Bound<'_, PyAny>, channels: bool) -> PyResult<Self> {
        let py = object.py();
        let type_name = object.get_type().name()?.to_string();
        let shape: Vec<usize> = object.getattr("shape")?.extract()?;
        let dtype = PyArrayDescr::new(py, &object.getattr("dtype")?)?;
        let element = element_type(&dtype).map_err(source_error)?;
        let chunks = chunk_shape(&object.getattr("chunks")?, &shape)?;
        let (spatial, channel_count, spatial_chunks) = if channels {
            match (shape.split_last(), chunks.split_last()) {
                (Some((&c, s)), Some((&cc, sc))) if !s.is_empty() => {
                    if cc != c {
                        return Err(PyValueError::new_err(format!(
                            "the channel axis of {type_name} is split into chunks of {cc}; sluice needs each chunk to hold all {c} channels"
                        )));
                    }
                    (s.to_vec(), c, sc.to_vec())
                }
                _ => {
                    return Err(source_error(SourceError::UnsupportedDimensions { shape }));
                }
            }
        } else {
            (shape.clone(), 1, chunks)
        };
        let shape = Shape::new(&spatial).map_err(source_error)?;
        let grid = ChunkGrid::new(&spatial_chunks).map_err(source_error)?;
        let layout = Layout::new(shape, element, channel_count)
            .map_err(source_error)?
            .with_chunks(grid);
        Ok(PyArrayLoader {
            object: object.clone().unbind(),
            layout,
            dtype: dtype.unbind(),
            label: format!("{type_name} {spatial:?} (a lazy Python array)"),
        })
    }

    fn read(&self, py: Python<'_>, region: &Region, dst: &mut [u8]) -> PyResult<()> {
        let index = region_index(py, &self.layout, region)?;
        let part = self.object.bind(py).get_item(&index)?;
        let what = || Ok(format!("{}[{}]", self.label, index.repr()?));
        copy_region_into(
            py,
            part,
            self.dtype.bind(py),
            &self.layout,
            region,
            what,
            dst,
        )
    }
}

impl ChunkLoader for PyArrayLoader {
    fn layout(&self) -> Layout {
        self.layout.clone()
    }

    fn load(
        &self,
        _key: ChunkKey,
        region: Region,
        dst: &mut [u8],
    ) -> Result<ChunkFill, SourceError> {
        Python::attach(|py| self.read(py, &region, dst)).map_err(SourceError::custom)?;
        Ok(ChunkFill::Filled)
    }

    fn label(&self) -> String {
        self.label.clone()
    }
}

/// The chunk shape of `.chunks`: a tuple of ints (zarr), or a tuple of per-axis tuples of
/// block lengths (dask), which must be regular (all blocks but the last of one length).
fn chunk_shape(chunks: &Bound<'_, PyAny>, shape: &[usize]) -> PyResult<Vec<usize>> {
    if let Ok(c) = chunks.extract::<Vec<usize>>() {
        if c.len() == shape.len() {
            return Ok(c);
        }
    }
    let blocks: Vec<Vec<usize>> = chunks.extract().map_err(|_| {
        PyTypeError::new_err(
            "`.chunks` must be a tuple of chunk lengths (zarr) or of per-axis block lengths (dask)",
        )
    })?;
    if blocks.len() != shape.len() {
        return Err(PyValueError::new_err(format!(
            "`.chunks` has {} axes; the shape {shape:?} has {}",
            blocks.len(),
            shape.len()
        )));
    }
    blocks
        .iter()
        .enumerate()
        .map(|(axis, b)| {
            let first = b.first().copied().unwrap_or(0);
            let regular = b.len() < 2 || b[..b.len() - 1].iter().all(|&x| x == first);
            if !regular || b.last().is_some_and(|&l| l > first) {
                return Err(PyValueError::new_err(format!(
                    "axis {axis} has irregular chunks {b:?}; sluice needs regular chunks (rechunk first)"
                )));
            }
            Ok(first)
        })
        .collect()
}

/// A lazy chunked array read chunk by chunk on sluice's loader pool:
/// `LazySource(array, channels=False)`.
#[pyclass(name = "LazySource", module = "sluice", frozen)]
pub struct PyLazySource {
    pub(crate) inner: Arc<LazySource>,
    object: Py<PyAny>,
}

#[pymethods]
impl PyLazySource {
    #[new]
    #[pyo3(signature = (array, *, channels = false))]
    fn new(array: &Bound<'_, PyAny>, channels: bool) -> PyResult<Self> {
        Self::wrap(array, channels)
    }

    /// The array object read.
    #[getter]
    fn array(&self, py: Python<'_>) -> Py<PyAny> {
        self.object.clone_ref(py)
    }

    /// Spatial shape, numpy order.
    #[getter]
    fn shape(&self) -> Vec<usize> {
        self.inner.layout().shape().dims().to_vec()
    }

    /// The element type as a numpy dtype.
    #[getter]
    fn dtype<'py>(&self, py: Python<'py>) -> Bound<'py, PyArrayDescr> {
        numpy_dtype(py, self.inner.layout().element())
    }

    /// The chunk shape (spatial), the unit of loading.
    #[getter]
    fn chunks(&self) -> Vec<usize> {
        let n = self.inner.layout().shape().ndim();
        self.inner.layout().chunks().chunk_size()[3 - n..].to_vec()
    }

    /// Chunk reads done so far.
    #[getter]
    fn loader_calls(&self) -> u64 {
        self.inner.loader_calls()
    }
}

impl PyLazySource {
    /// Wraps an array-like object.
    pub fn wrap(array: &Bound<'_, PyAny>, channels: bool) -> PyResult<Self> {
        let loader = PyArrayLoader::new(array, channels)?;
        let inner = guard(|| LazySource::new(loader).map_err(source_error))?;
        Ok(PyLazySource {
            inner: Arc::new(inner),
            object: array.clone().unbind(),
        })
    }

    /// Whether `object` looks like a lazy chunked array.
    pub fn looks_lazy(object: &Bound<'_, PyAny>) -> PyResult<bool> {
        Ok(object.hasattr("chunks")?
            && object.hasattr("shape")?
            && object.hasattr("dtype")?
            && object.hasattr("__getitem__")?
            && !object.hasattr("read")?)
    }
}
