//! `sluice.HostTarget`: a target whose frames are read in host memory, seen from numpy with no
//! copy (Linux). On a CPU device (lavapipe) the frame is drawn there in place, so a read is a
//! barrier and a wait; on a GPU it is copied into a `HostFrame`'s pages. See sluice-interop's
//! `HostTarget`.
//!
//! `render(renderer, scene, camera)` draws and reads, and returns a read-only
//! `(height, width, 4)` uint8 array over the pixels, whose base is the target (which owns the
//! memory: the pointer stays valid for the target's life). The next `render` or `draw` draws
//! into the same memory, so an array from an earlier frame shows the new one once it is read,
//! and is not to be looked at from another thread while a frame is drawn; copy it
//! (`np.array(a)`) to keep a frame.

use numpy::ndarray::{ArrayView3, ShapeBuilder};
use numpy::PyArray3;
use parking_lot::Mutex;
use pyo3::prelude::*;
use pyo3::types::PyDict;
use sluice_interop::HostTarget;

use crate::camera::AnyCamera;
use crate::interop_device::{interop, interop_error};
use crate::renderer::{frame_stats, PyRenderer};
use crate::scene::PyScene;

/// A render target whose frames are read in host memory (on the interop device: draw it with
/// a `Renderer(interop=True)`): drawn there in place on a CPU device, copied into imported
/// pages on a GPU; seen as a numpy array with no copy.
#[pyclass(name = "HostTarget", module = "sluice", frozen)]
pub struct PyHostTarget {
    /// Locked only with the GIL released: a draw holds it while Python sources may take the
    /// GIL back.
    inner: Mutex<HostTarget>,
    /// What never changes, read without the lock.
    width: u32,
    height: u32,
    in_place: bool,
    fallback: Option<String>,
}

#[pymethods]
impl PyHostTarget {
    /// A target of `width` x `height` pixels for `renderer` (a `Renderer(interop=True)`).
    /// `copied=True` never draws in place (each read copies), for comparing. A size of zero or
    /// past the device's limit, or a renderer of another device, is a `sluice.DeviceError`
    /// naming them.
    #[new]
    #[pyo3(signature = (renderer, width, height, *, copied = false))]
    fn new(
        py: Python<'_>,
        renderer: PyRef<'_, PyRenderer>,
        width: u32,
        height: u32,
        copied: bool,
    ) -> PyResult<Self> {
        let interop = interop()?;
        let target = renderer.with(py, |r| {
            if copied {
                HostTarget::copied(interop, r, width, height)
            } else {
                HostTarget::new(interop, r, width, height)
            }
            .map_err(interop_error)
        })?;
        Ok(PyHostTarget {
            width: target.width(),
            height: target.height(),
            in_place: target.is_in_place(),
            fallback: target.fallback_reason().map(str::to_owned),
            inner: Mutex::new(target),
        })
    }

    /// Draws `scene` through `camera` (GIL released) and returns the frame's statistics, as
    /// `Renderer.draw` does; the pixels are readable again after `read`.
    fn draw<'py>(
        &self,
        py: Python<'py>,
        renderer: PyRef<'_, PyRenderer>,
        scene: PyRef<'_, PyScene>,
        camera: &Bound<'_, PyAny>,
    ) -> PyResult<Bound<'py, PyDict>> {
        let stats = self.draw_frame(py, &renderer, &scene, camera)?;
        frame_stats(py, stats)
    }

    /// Waits until the last frame drawn is in host memory (GIL released) and returns the
    /// array over it (see `array`).
    fn read<'py>(
        this: Bound<'py, Self>,
        renderer: PyRef<'_, PyRenderer>,
    ) -> PyResult<Bound<'py, PyArray3<u8>>> {
        let py = this.py();
        {
            let target = &this.get().inner;
            renderer.with(py, |r| target.lock().read(r).map_err(interop_error))?;
        }
        Self::array(this)
    }

    /// `draw`, then `read`: the frame's pixels as a read-only array over the target's memory.
    fn render<'py>(
        this: Bound<'py, Self>,
        renderer: PyRef<'_, PyRenderer>,
        scene: PyRef<'_, PyScene>,
        camera: &Bound<'_, PyAny>,
    ) -> PyResult<Bound<'py, PyArray3<u8>>> {
        this.get()
            .draw_frame(this.py(), &renderer, &scene, camera)?;
        Self::read(this, renderer)
    }

    /// A read-only `(height, width, 4)` uint8 array over the last frame read (rows
    /// `bytes_per_row` bytes apart), no copy; it keeps the target alive. A
    /// `sluice.DeviceError` before the first read and after a `draw` until the next `read`.
    #[getter]
    fn array<'py>(this: Bound<'py, Self>) -> PyResult<Bound<'py, PyArray3<u8>>> {
        let py = this.py();
        let me = this.get();
        // The first pixel's address, where a frame was read (the lock taken without the GIL).
        // The row pitch is read with it: a copied target whose read failed goes on with
        // packed rows.
        let first = py.detach(|| {
            let target = me.inner.lock();
            let pitch = target.bytes_per_row() as usize;
            target.bytes().map(|b| (b.as_ptr() as usize, pitch))
        });
        let view = {
            let (w, h) = (me.width as usize, me.height as usize);
            let (first, pitch) = first.ok_or_else(|| {
                crate::errors::DeviceError::new_err(
                    "no frame to look at: read the target after drawing it",
                )
            })?;
            // SAFETY: `first` starts the target's `bytes()`, which run to at least the last
            // row's last pixel, rows `pitch` apart (read under the same lock), so the strided
            // view reads only them. The pointer outlives the lock: the memory belongs to the target (its
            // texture's mapping in place, or the frame's pages, which are never freed before
            // the target drops), and the array's base (below) keeps the target.
            unsafe {
                ArrayView3::from_shape_ptr((h, w, 4).strides((pitch, 4, 1)), first as *const u8)
            }
        };
        // SAFETY: the array's base is this target, which owns the memory `view` points at for
        // its whole life (see above), and the memory is never reallocated in place.
        let array = unsafe { PyArray3::borrow_from_array(&view, this.clone().into_any()) };
        let kwargs = PyDict::new(py);
        kwargs.set_item("write", false)?;
        array.call_method("setflags", (), Some(&kwargs))?;
        Ok(array)
    }

    /// Makes the next `draw` redraw the whole target.
    fn invalidate(&self, py: Python<'_>) {
        py.detach(|| self.inner.lock().invalidate());
    }

    /// Width in pixels.
    #[getter]
    fn width(&self) -> u32 {
        self.width
    }

    /// Height in pixels.
    #[getter]
    fn height(&self) -> u32 {
        self.height
    }

    /// Bytes from one row's start to the next.
    #[getter]
    fn bytes_per_row(&self, py: Python<'_>) -> u32 {
        py.detach(|| self.inner.lock().bytes_per_row())
    }

    /// Whether frames are drawn in host memory in place (no copy per read).
    #[getter]
    fn is_in_place(&self) -> bool {
        self.in_place
    }

    /// Why frames are copied rather than drawn in place; `None` in place.
    #[getter]
    fn fallback_reason(&self) -> Option<String> {
        self.fallback.clone()
    }

    fn __repr__(&self) -> String {
        format!(
            "HostTarget({}x{}, {})",
            self.width,
            self.height,
            if self.in_place { "in place" } else { "copied" }
        )
    }
}

impl PyHostTarget {
    /// Draws `scene` through `camera` into the target with the GIL released.
    fn draw_frame(
        &self,
        py: Python<'_>,
        renderer: &PyRenderer,
        scene: &PyScene,
        camera: &Bound<'_, PyAny>,
    ) -> PyResult<sluice_render::FrameStats> {
        let shared = scene.inner.clone();
        let camera = AnyCamera::extract(camera)?;
        let target = &self.inner;
        renderer.with(py, |r| {
            target
                .lock()
                .render(r, &shared.lock(), camera.as_dyn())
                .map_err(interop_error)
        })
    }
}
