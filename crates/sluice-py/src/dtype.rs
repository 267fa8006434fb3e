//! numpy dtypes and sluice element types.

use numpy::{PyArrayDescr, PyArrayDescrMethods};
use pyo3::prelude::*;
use sluice_core::{ElementType, SourceError};

/// The element type of a numpy dtype; `UnsupportedDtype` naming it (as `<i8`, `>f4`, `|b1`,
/// ...) for what sluice cannot show: 64-bit integers, complex, bool, objects, non-native
/// byte order, structured types.
pub fn element_type(dtype: &Bound<'_, PyArrayDescr>) -> Result<ElementType, SourceError> {
    let kind = dtype.kind();
    let size = dtype.itemsize();
    let native = dtype.is_native_byteorder() != Some(false) && cfg!(target_endian = "little");
    let element = match (kind, size) {
        _ if !native || dtype.has_fields() || dtype.has_subarray() => None,
        (b'u', 1) => Some(ElementType::U8),
        (b'i', 1) => Some(ElementType::I8),
        (b'u', 2) => Some(ElementType::U16),
        (b'i', 2) => Some(ElementType::I16),
        (b'u', 4) => Some(ElementType::U32),
        (b'i', 4) => Some(ElementType::I32),
        (b'f', 2) => Some(ElementType::F16),
        (b'f', 4) => Some(ElementType::F32),
        (b'f', 8) => Some(ElementType::F64),
        _ => None,
    };
    element.ok_or_else(|| SourceError::UnsupportedDtype {
        dtype: descr_str(dtype),
    })
}

/// The dtype's numpy type string (`dtype.str`), or its repr if it has none.
pub fn descr_str(dtype: &Bound<'_, PyArrayDescr>) -> String {
    dtype
        .getattr("str")
        .and_then(|s| s.extract::<String>())
        .unwrap_or_else(|_| dtype.to_string())
}

/// The numpy dtype of an element type.
pub fn numpy_dtype<'py>(py: Python<'py>, element: ElementType) -> Bound<'py, PyArrayDescr> {
    match element {
        ElementType::U8 => numpy::dtype::<u8>(py),
        ElementType::I8 => numpy::dtype::<i8>(py),
        ElementType::U16 => numpy::dtype::<u16>(py),
        ElementType::I16 => numpy::dtype::<i16>(py),
        ElementType::U32 => numpy::dtype::<u32>(py),
        ElementType::I32 => numpy::dtype::<i32>(py),
        ElementType::F16 => {
            PyArrayDescr::new(py, "float16").unwrap_or_else(|_| numpy::dtype::<u16>(py))
        }
        ElementType::F32 => numpy::dtype::<f32>(py),
        ElementType::F64 => numpy::dtype::<f64>(py),
    }
}

/// Parses a dtype given as anything `numpy.dtype()` takes (`"uint16"`, `numpy.float32`,
/// `"<f4"`, a dtype).
pub fn parse_dtype(obj: &Bound<'_, PyAny>) -> PyResult<ElementType> {
    let descr = PyArrayDescr::new(obj.py(), obj)?;
    element_type(&descr).map_err(crate::errors::source_error)
}
