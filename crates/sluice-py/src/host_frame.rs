//! `sluice.HostFrame`: a target read back into host pages the GPU writes itself (Linux,
//! `VK_EXT_external_memory_host`; staged where the driver lacks it), seen from numpy with no
//! copy. See sluice-interop's `HostFrame`.
//!
//! `read(renderer, target)` has the GPU copy the target into the frame's pages and returns a
//! read-only `(height, width, 4)` uint8 array over them, whose base is the frame: the pages
//! live as long as any such array (sluice-interop keeps every page block a frame ever had until
//! the frame drops). The next `read` writes the same pages, so an array from the last one shows
//! the new frame; copy it (`np.array(a)`) to keep one.

use numpy::ndarray::{ArrayView3, ShapeBuilder};
use numpy::PyArray3;
use parking_lot::Mutex;
use pyo3::prelude::*;
use pyo3::types::PyDict;
use sluice_interop::HostFrame;

use crate::errors::guard;
use crate::interop_device::{interop, interop_error};
use crate::renderer::{PyRenderer, PyTarget};

/// A target's pixels in host memory the GPU copies into (on the interop device: read it from
/// a `Renderer(interop=True)`), seen as a numpy array with no copy.
#[pyclass(name = "HostFrame", module = "sluice", frozen)]
pub struct PyHostFrame {
    inner: Mutex<HostFrame>,
}

#[pymethods]
impl PyHostFrame {
    /// A frame the size of `target` (or of `width` x `height`) on the interop device.
    /// `staged=True` never imports (the renderer's readback copies into it), for comparing.
    #[new]
    #[pyo3(signature = (target = None, *, width = None, height = None, staged = false))]
    fn new(
        py: Python<'_>,
        target: Option<PyRef<'_, PyTarget>>,
        width: Option<u32>,
        height: Option<u32>,
        staged: bool,
    ) -> PyResult<Self> {
        let (w, h) = match (&target, width, height) {
            (Some(t), None, None) => (t.inner.width(), t.inner.height()),
            (None, Some(w), Some(h)) => (w, h),
            _ => {
                return Err(pyo3::exceptions::PyValueError::new_err(
                    "HostFrame(target) or HostFrame(width=, height=): one of the two",
                ))
            }
        };
        let interop = interop()?;
        let frame = py.detach(|| {
            guard(|| {
                if staged {
                    HostFrame::staged(interop, w, h)
                } else {
                    HostFrame::new(interop, w, h)
                }
                .map_err(interop_error)
            })
        })?;
        Ok(PyHostFrame {
            inner: Mutex::new(frame),
        })
    }

    /// Reads `target`, drawn by `renderer` (a `Renderer(interop=True)`, on the frame's
    /// device), into the frame, waits (GIL released), and returns the array over the frame's
    /// pages (see `array`). A target of another size or a renderer of another device is a
    /// `sluice.DeviceError` naming both.
    fn read<'py>(
        this: Bound<'py, Self>,
        renderer: PyRef<'_, PyRenderer>,
        target: PyRef<'_, PyTarget>,
    ) -> PyResult<Bound<'py, PyArray3<u8>>> {
        let py = this.py();
        {
            let frame = &this.get().inner;
            let t = &target.inner;
            renderer.with(py, |r| frame.lock().read(r, t).map_err(interop_error))?;
        }
        Self::array(this)
    }

    /// A read-only `(height, width, 4)` uint8 array over the frame's pages (rows
    /// `bytes_per_row` bytes apart), no copy. It shows what the last `read` wrote and keeps
    /// the frame alive.
    #[getter]
    fn array<'py>(this: Bound<'py, Self>) -> PyResult<Bound<'py, PyArray3<u8>>> {
        let py = this.py();
        let view = {
            let frame = this.get().inner.lock();
            let (w, h) = (frame.width() as usize, frame.height() as usize);
            let strides = (frame.bytes_per_row() as usize, 4, 1);
            let bytes = frame.bytes();
            // SAFETY: `bytes` holds `height * bytes_per_row` bytes and every row's `width * 4`
            // pixel bytes lie inside it, so the strided view reads only the slice. The pointer
            // outlives the lock: sluice-interop never frees a frame's pages before the frame
            // drops (it keeps replaced ones), and the array's base (below) keeps the frame.
            unsafe { ArrayView3::from_shape_ptr((h, w, 4).strides(strides), bytes.as_ptr()) }
        };
        // SAFETY: the array's base is this frame, which owns the memory `view` points at for
        // its whole life (see above), and the memory is never reallocated in place.
        let array = unsafe { PyArray3::borrow_from_array(&view, this.clone().into_any()) };
        let kwargs = PyDict::new(py);
        kwargs.set_item("write", false)?;
        array.call_method("setflags", (), Some(&kwargs))?;
        Ok(array)
    }

    /// Width in pixels.
    #[getter]
    fn width(&self) -> u32 {
        self.inner.lock().width()
    }

    /// Height in pixels.
    #[getter]
    fn height(&self) -> u32 {
        self.inner.lock().height()
    }

    /// Bytes from one row's start to the next (the width in bytes rounded up to 256 when
    /// imported).
    #[getter]
    fn bytes_per_row(&self) -> u32 {
        self.inner.lock().bytes_per_row()
    }

    /// Whether the GPU writes the frame's pages itself (no CPU copy per read).
    #[getter]
    fn is_imported(&self) -> bool {
        self.inner.lock().is_imported()
    }

    /// Why the frame is staged rather than imported; `None` when imported.
    #[getter]
    fn fallback_reason(&self) -> Option<String> {
        self.inner.lock().fallback_reason().map(str::to_owned)
    }

    fn __repr__(&self) -> String {
        let frame = self.inner.lock();
        format!(
            "HostFrame({}x{}, {})",
            frame.width(),
            frame.height(),
            if frame.is_imported() {
                "imported"
            } else {
                "staged"
            }
        )
    }
}
