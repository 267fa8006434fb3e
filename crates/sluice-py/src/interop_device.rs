//! The process's interop device (Linux): renderers made with `Renderer(interop=True)` or
//! `Renderer(cuda=True)`, `HostBufferSource`s and `CudaSource`s share it (a device-resident
//! source can only be shown by renderers of its device).

use std::sync::OnceLock;

use sluice_interop::{Interop, InteropError};
use sluice_render::{Renderer, RendererOptions};

use pyo3::prelude::*;

use crate::errors::DeviceError;

static INTEROP: OnceLock<Interop> = OnceLock::new();

/// The interop device, opened on first use on the adapter the environment picks.
pub fn interop() -> PyResult<&'static Interop> {
    if let Some(i) = INTEROP.get() {
        return Ok(i);
    }
    let options = RendererOptions::from_env().map_err(crate::errors::render_error)?;
    let made = Interop::with_options(&options).map_err(interop_error)?;
    Ok(INTEROP.get_or_init(|| made))
}

/// An interop failure as `sluice.DeviceError`, with the Rust message.
pub fn interop_error(e: InteropError) -> PyErr {
    DeviceError::new_err(e.to_string())
}

/// A renderer on the interop device.
pub fn renderer(options: &RendererOptions) -> PyResult<Renderer> {
    Ok(interop()?.renderer_with_options(options))
}
