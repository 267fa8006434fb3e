//! Rust errors as Python exceptions, and the boundary that turns panics into exceptions too.
//!
//! Bad input (shapes, regions, parameters) raises `ValueError`, wrong types `TypeError`, file
//! problems `OSError` (`FileNotFoundError`, ...); what is left (no GPU, a GPU error, a bug)
//! raises `sluice.SluiceError` or one of its subclasses. Every message is the Rust error's
//! message, with the numbers it names.

use std::panic::{catch_unwind, AssertUnwindSafe};

use pyo3::exceptions::{
    PyException, PyFileNotFoundError, PyOSError, PyPermissionError, PyTypeError, PyValueError,
};
use pyo3::prelude::*;
use sluice_core::SourceError;
use sluice_render::RenderError;

pyo3::create_exception!(
    sluice,
    SluiceError,
    PyException,
    "Base of sluice's own exceptions (errors that are neither bad values nor bad types)."
);
pyo3::create_exception!(
    sluice,
    DeviceError,
    SluiceError,
    "No GPU adapter, a device that could not be opened, or a GPU error."
);
pyo3::create_exception!(
    sluice,
    SourceReadError,
    SluiceError,
    "A source failed to give its data (a custom source raised, a CUDA call failed)."
);
pyo3::create_exception!(
    sluice,
    InternalError,
    SluiceError,
    "A bug in sluice (a Rust panic caught at the Python boundary): please report it."
);

/// The Python exception for a source error.
pub fn source_error(error: SourceError) -> PyErr {
    let message = error.to_string();
    match error {
        SourceError::UnsupportedDtype { .. } | SourceError::DtypeMismatch { .. } => {
            PyTypeError::new_err(message)
        }
        SourceError::Io { source, .. } => match source.kind() {
            std::io::ErrorKind::NotFound => PyFileNotFoundError::new_err(message),
            std::io::ErrorKind::PermissionDenied => PyPermissionError::new_err(message),
            _ => PyOSError::new_err(message),
        },
        // A custom Python source's own exception comes back as it was raised.
        SourceError::Custom(inner) => match inner.downcast::<PyErr>() {
            Ok(original) => *original,
            Err(_) => SourceReadError::new_err(message),
        },
        _ => PyValueError::new_err(message),
    }
}

/// The Python exception for a renderer error.
pub fn render_error(error: RenderError) -> PyErr {
    match error {
        RenderError::Source {
            source_label,
            error,
        } => {
            // Keep the exception class of the source's error, prefixed with which source.
            let inner = source_error(error);
            Python::attach(|py| {
                let message = format!("reading {source_label}: {}", inner.value(py));
                let new = PyErr::from_type(inner.get_type(py), message);
                new.set_cause(py, Some(inner));
                new
            })
        }
        RenderError::NoAdapter { .. } | RenderError::RequestDevice { .. } | RenderError::Gpu(_) => {
            DeviceError::new_err(error.to_string())
        }
        RenderError::InvalidOption { .. } => PyValueError::new_err(error.to_string()),
        _ => PyValueError::new_err(error.to_string()),
    }
}

/// Runs `f`, turning a panic into `sluice.InternalError` instead of letting it unwind into
/// the interpreter. Every entry point that reaches into the renderer or a source goes through
/// here.
pub fn guard<T>(f: impl FnOnce() -> PyResult<T>) -> PyResult<T> {
    match catch_unwind(AssertUnwindSafe(f)) {
        Ok(result) => result,
        Err(payload) => {
            let what = payload
                .downcast_ref::<&str>()
                .map(|s| s.to_string())
                .or_else(|| payload.downcast_ref::<String>().cloned())
                .unwrap_or_else(|| "a panic with no message".to_string());
            Err(InternalError::new_err(format!(
                "internal error in sluice (please report): {what}"
            )))
        }
    }
}

/// Registers the exception classes on the module.
pub fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    let py = m.py();
    m.add("SluiceError", py.get_type::<SluiceError>())?;
    m.add("DeviceError", py.get_type::<DeviceError>())?;
    m.add("SourceReadError", py.get_type::<SourceReadError>())?;
    m.add("InternalError", py.get_type::<InternalError>())?;
    Ok(())
}
