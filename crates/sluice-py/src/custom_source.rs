//! Sources written in Python: any object with `shape`, `dtype` and `read(region)`.
//!
//! The protocol (see `sluice.Source` in the Python package for a base class):
//!
//! - `shape`: spatial shape, numpy order (1 to 3 axes); `dtype`: anything `numpy.dtype`
//!   takes; `channels` (optional, default 1);
//! - `read(index)`: the samples of `index` (a tuple of slices, one per spatial axis) as an
//!   array-like of exactly that shape (plus a channel axis when `channels > 1`);
//! - `version()` (optional, default 0): an integer from 0 up that grows on every change;
//! - `changes_since(version)` (optional): `None` (nothing), `"all"`, or a list of indices
//!   (tuples of slices) changed after `version`. Without it a new version means everything.
//!
//! Calls take the GIL only around the Python call; exceptions raised by the object come back
//! to the caller of `render` as they were raised.

use numpy::PyArrayDescr;
use pyo3::exceptions::PyTypeError;
use pyo3::prelude::*;
use pyo3::types::{PyList, PyString};
use sluice_core::{
    check_read, Changes, DataSource, Layout, ReadRequest, ReadStatus, Region, Shape, SourceError,
    Version,
};

use crate::dtype::element_type;
use crate::errors::source_error;
use crate::region::key_region;
use crate::sources::{copy_region_into, region_index};

/// A `DataSource` whose methods are a Python object's.
pub struct PythonSource {
    object: Py<PyAny>,
    layout: Layout,
    dtype: Py<PyArrayDescr>,
    label: String,
}

impl PythonSource {
    /// Wraps `object`, reading its `shape`, `dtype` and `channels` once.
    pub fn new(object: &Bound<'_, PyAny>) -> PyResult<Self> {
        let py = object.py();
        let type_name = object.get_type().name()?.to_string();
        let missing = |what: &str| {
            PyTypeError::new_err(format!(
                "{type_name} is not a sluice source: it has no `{what}` (a custom source needs shape, dtype and read(index))"
            ))
        };
        if !object.hasattr("read")? {
            return Err(missing("read"));
        }
        let shape: Vec<usize> = object
            .getattr("shape")
            .map_err(|_| missing("shape"))?
            .extract()?;
        let dtype = PyArrayDescr::new(py, &object.getattr("dtype").map_err(|_| missing("dtype"))?)?;
        let element = element_type(&dtype).map_err(source_error)?;
        let channels: usize = match object.getattr("channels") {
            Ok(c) => c.extract()?,
            Err(_) => 1,
        };
        let shape = Shape::new(&shape).map_err(source_error)?;
        let layout = Layout::new(shape, element, channels).map_err(source_error)?;
        Ok(PythonSource {
            object: object.clone().unbind(),
            layout,
            dtype: dtype.unbind(),
            label: format!("{type_name} (a Python source)"),
        })
    }

    fn read_into(&self, py: Python<'_>, region: &Region, dst: &mut [u8]) -> PyResult<()> {
        let index = region_index(py, &self.layout, region)?;
        let value = self
            .object
            .bind(py)
            .call_method1("read", (index.clone(),))?;
        let what = || Ok(format!("{}.read({})", self.label, index.repr()?));
        copy_region_into(
            py,
            value,
            self.dtype.bind(py),
            &self.layout,
            region,
            what,
            dst,
        )
    }

    fn changes(&self, py: Python<'_>, since: Version) -> PyResult<Changes> {
        if since == Version::NEVER {
            return Ok(Changes::All);
        }
        let object = self.object.bind(py);
        if !object.hasattr("changes_since")? {
            return Ok(if self.current(py)? == since {
                Changes::None
            } else {
                Changes::All
            });
        }
        let answer = object.call_method1("changes_since", (since.0 - 1,))?;
        if answer.is_none() {
            return Ok(Changes::None);
        }
        if let Ok(s) = answer.cast::<PyString>() {
            if s.to_str()? == "all" {
                return Ok(Changes::All);
            }
        }
        let list = answer.cast::<PyList>().map_err(|_| {
            PyTypeError::new_err(format!(
                "{}.changes_since must return None, \"all\" or a list of indices",
                self.label
            ))
        })?;
        let mut regions = Vec::with_capacity(list.len());
        for key in list.iter() {
            regions.push(key_region(&key, &self.layout.shape(), 0)?);
        }
        Ok(Changes::Regions(regions))
    }

    fn current(&self, py: Python<'_>) -> PyResult<Version> {
        let object = self.object.bind(py);
        if !object.hasattr("version")? {
            return Ok(Version::INITIAL);
        }
        let v = object.getattr("version")?;
        let v = if v.is_callable() { v.call0()? } else { v };
        // Python versions start at 0; sluice's at 1 (0 means "never uploaded").
        let v: u64 = v.extract()?;
        Ok(Version(v.saturating_add(1)))
    }
}

impl DataSource for PythonSource {
    fn layout(&self) -> Layout {
        self.layout.clone()
    }

    fn version(&self) -> Version {
        // An object whose version cannot be read is shown as it was: the error surfaces in
        // the next read.
        Python::attach(|py| self.current(py).unwrap_or(Version::INITIAL))
    }

    fn changes_since(&self, since: Version) -> Changes {
        Python::attach(|py| self.changes(py, since).unwrap_or(Changes::All))
    }

    fn read(&self, request: &ReadRequest<'_>, dst: &mut [u8]) -> Result<ReadStatus, SourceError> {
        check_read(&self.layout, request, dst.len())?;
        Python::attach(|py| self.read_into(py, &request.region, dst))
            .map_err(SourceError::custom)?;
        Ok(ReadStatus::Ready)
    }

    fn label(&self) -> String {
        self.label.clone()
    }
}
