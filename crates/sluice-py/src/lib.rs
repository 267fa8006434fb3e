//! # sluice-py: sluice from Python
//!
//! The extension module `sluice._sluice` of the Python package `sluice` (built by maturin from
//! `python/pyproject.toml`, abi3 for CPython 3.11 and later). It promises:
//!
//! - numpy arrays are shown by reference: [`numpy_source`] lends the array's own memory to
//!   the renderer, and writes through `src[...] = v` mark only what they wrote;
//! - every error is a Python exception carrying the Rust message (`ValueError` for bad
//!   values, `TypeError` for bad types, `OSError` for files, `sluice.SluiceError` and its
//!   subclasses otherwise), and no call can crash the interpreter: panics are caught at the
//!   boundary ([`errors::guard`]);
//! - rendering releases the GIL; Python-implemented sources take it only around their calls.
//!
//! `unsafe` appears where numpy memory is read ([`numpy_source`]) or lent to the GPU
//! (`host_buffer_source`), where a frame's pages are shown to numpy (`host_frame`), where a
//! DLPack capsule is
//! consumed (`dlpack`), and where a CUDA tensor's
//! pointer becomes a source (`cuda`, feature `cuda`), each with its `SAFETY` argument.

mod bench;
mod camera;
#[cfg(all(feature = "cuda", target_os = "linux"))]
mod cuda;
mod custom_source;
mod dlpack;
mod dtype;
pub mod errors;
#[cfg(target_os = "linux")]
mod host_buffer_source;
#[cfg(target_os = "linux")]
mod host_frame;
#[cfg(target_os = "linux")]
mod host_target;
#[cfg(target_os = "linux")]
mod interop_device;
mod lazy_source;
mod mmap_source;
pub mod numpy_source;
mod region;
mod renderer;
mod scene;
mod settings;
mod slot;
mod sources;
mod view;
mod visuals;
mod zarr_source;

use pyo3::prelude::*;

/// Waits until the GPU devices sluice's renderers share have finished their work (the GIL
/// released meanwhile). The package registers it with `atexit`: the devices live as long as
/// the process, and Mesa's lavapipe was seen to crash in its exit handlers when the process
/// exited with a submission still running (`sluice_render::wait_for_devices`).
#[pyfunction]
fn _wait_for_devices(py: Python<'_>) {
    py.detach(sluice_render::wait_for_devices);
}

/// The `sluice._sluice` module.
#[pymodule]
fn _sluice(m: &Bound<'_, PyModule>) -> PyResult<()> {
    // Pipelines compiled by an earlier process come from the cache on disk
    // (`SLUICE_PIPELINE_CACHE=off` turns it off).
    #[cfg(target_os = "linux")]
    sluice_interop::install_pipeline_cache();
    errors::register(m)?;
    m.add_class::<numpy_source::PyArraySource>()?;
    m.add_class::<mmap_source::PyMmapSource>()?;
    #[cfg(target_os = "linux")]
    m.add_class::<host_buffer_source::PyHostBufferSource>()?;
    #[cfg(target_os = "linux")]
    m.add_class::<host_frame::PyHostFrame>()?;
    #[cfg(target_os = "linux")]
    m.add_class::<host_target::PyHostTarget>()?;
    m.add_class::<lazy_source::PyLazySource>()?;
    m.add_function(wrap_pyfunction!(mmap_source::open_npy, m)?)?;
    m.add_function(wrap_pyfunction!(mmap_source::open_raw, m)?)?;
    m.add_class::<zarr_source::PyZarrSource>()?;
    m.add_function(wrap_pyfunction!(zarr_source::open_zarr, m)?)?;
    m.add_class::<visuals::PyImage>()?;
    m.add_class::<visuals::PyVolume>()?;
    m.add_class::<visuals::PyMesh>()?;
    m.add_class::<scene::PyScene>()?;
    m.add_class::<camera::PyPanZoomCamera>()?;
    m.add_class::<camera::PyOrbitCamera>()?;
    m.add_class::<camera::PyFlyCamera>()?;
    m.add_class::<renderer::PyRenderer>()?;
    m.add_class::<renderer::PyTarget>()?;
    m.add_class::<view::PyViewHandle>()?;
    m.add_function(wrap_pyfunction!(view::view, m)?)?;
    #[cfg(all(feature = "cuda", target_os = "linux"))]
    cuda::register(m)?;
    m.add_function(wrap_pyfunction!(bench::_rust_full_update_frame, m)?)?;
    m.add_function(wrap_pyfunction!(dlpack::_dlpack_describe, m)?)?;
    m.add_function(wrap_pyfunction!(_wait_for_devices, m)?)?;
    m.add(
        "CUDA_SUPPORT",
        cfg!(all(feature = "cuda", target_os = "linux")),
    )?;
    Ok(())
}
