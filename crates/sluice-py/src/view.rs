//! `sluice.view(scene)`: a window on a scene (sluice-view's [`Viewer`]), blocking, or on a
//! thread of its own (`block=False`) while the script keeps writing sources and changing
//! settings; each frame shows the scene as it is then ([`Viewer::show_shared`]).
//!
//! The window runs with the GIL released; Python-written sources take it only around their
//! calls, as with any renderer.

use std::sync::atomic::{AtomicBool, Ordering};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use numpy::{PyArray1, PyArrayMethods};
use parking_lot::Mutex;
use pyo3::exceptions::{PyTimeoutError, PyValueError};
use pyo3::prelude::*;
use pyo3::types::PyDict;
use sluice_view::shared::SharedViewControl;
use sluice_view::{ViewError, Viewer, ViewerReport};

use crate::errors::{guard, render_error, DeviceError, InternalError, SluiceError};
use crate::renderer::counters_dict;
use crate::scene::PyScene;

type Run = Result<ViewerReport, ViewError>;

/// Whether this process opened its window: winit allows one event loop per process, ever, and
/// sluice-view's `Viewer` makes a new one for each window.
static OPENED: AtomicBool = AtomicBool::new(false);

fn view_error(error: ViewError) -> PyErr {
    match error {
        ViewError::Render(e) => render_error(e),
        ViewError::Source(e) => crate::errors::source_error(e),
        other => DeviceError::new_err(other.to_string()),
    }
}

/// The report of a closed window as a dict: `frames`, `frames_rendered`, and `last_frame`
/// (the renderer's last target as `(h, w, 4)` uint8 RGBA) when `frames=` ended the run.
fn report_dict(py: Python<'_>, report: ViewerReport) -> PyResult<Bound<'_, PyDict>> {
    let d = PyDict::new(py);
    d.set_item("frames", report.frames)?;
    d.set_item("frames_rendered", report.frames_rendered)?;
    let last = match report.last_frame {
        Some(image) => {
            let (w, h) = image.dimensions();
            let flat = PyArray1::from_vec(py, image.into_raw());
            Some(flat.reshape([h as usize, w as usize, 4])?.into_any())
        }
        None => None,
    };
    d.set_item("last_frame", last)?;
    Ok(d)
}

/// A window running on its own thread: `sluice.view(scene, block=False)`.
#[pyclass(name = "ViewHandle", module = "sluice", frozen)]
pub struct PyViewHandle {
    control: SharedViewControl,
    thread: Mutex<Option<JoinHandle<Run>>>,
}

#[pymethods]
impl PyViewHandle {
    /// Asks the window for a frame: call it after writing into a source it shows (settings
    /// changed through the visual objects, and lazy chunks arriving, ask for one themselves
    /// only at the next frame; this schedules it now).
    fn redraw(&self) {
        self.control.request_redraw();
    }

    /// Closes the window at its next frame (`wait()` then returns its report).
    fn close(&self) {
        self.control.close();
    }

    /// Whether the window is still open.
    #[getter]
    fn is_open(&self) -> bool {
        self.thread
            .lock()
            .as_ref()
            .is_some_and(|t| !t.is_finished())
    }

    /// Frames the window has started so far.
    #[getter]
    fn frames(&self) -> u64 {
        self.control.frames()
    }

    /// The window renderer's counters as its last frame started (a dict, as
    /// `Renderer.counters()`).
    fn counters<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
        counters_dict(py, &self.control.counters())
    }

    /// Waits (GIL released) until the window is closed, by its user, `close()` or `frames=`,
    /// and returns its report; `timeout` (seconds) raises `TimeoutError` if it is still open
    /// then. The window's errors are raised here.
    #[pyo3(signature = (timeout = None))]
    fn wait<'py>(&self, py: Python<'py>, timeout: Option<f64>) -> PyResult<Bound<'py, PyDict>> {
        let deadline = match timeout {
            None => None,
            Some(t) => Some(
                Duration::try_from_secs_f64(t)
                    .map(|d| Instant::now() + d)
                    .map_err(|_| {
                        PyValueError::new_err(format!(
                            "timeout {t}: a number of seconds, 0 or more"
                        ))
                    })?,
            ),
        };
        let thread = self.thread.lock().take();
        let Some(thread) = thread else {
            return Err(PyValueError::new_err(
                "this window's report was taken by an earlier wait()",
            ));
        };
        let finished = py.detach(|| {
            while !thread.is_finished() {
                if deadline.is_some_and(|d| Instant::now() >= d) {
                    return Err(thread);
                }
                std::thread::sleep(Duration::from_millis(5));
            }
            Ok(thread)
        });
        let thread = match finished {
            Ok(t) => t,
            Err(t) => {
                *self.thread.lock() = Some(t);
                return Err(PyTimeoutError::new_err(format!(
                    "the window is still open after {} s",
                    timeout.unwrap_or_default()
                )));
            }
        };
        let run = thread.join().map_err(|_| {
            InternalError::new_err("internal error in sluice: the window thread panicked")
        })?;
        report_dict(py, run.map_err(view_error)?)
    }
}

/// Shows `scene` in a window with mouse cameras and a panel of layer controls.
///
/// `block=True` (default) runs until the window is closed and returns its report (a dict:
/// `frames`, `frames_rendered`, `last_frame`); `block=False` returns a `ViewHandle` at once,
/// the window running on its own thread. `frames`: close after that many frames (the last
/// one in the report); `controls=False` hides the panel and status bar. One window per
/// process (winit's limit): a second call raises `SluiceError`.
#[pyfunction]
#[pyo3(signature = (scene, *, block = true, title = "sluice".to_string(), size = (1280, 800), controls = true, frames = None))]
pub fn view(
    py: Python<'_>,
    scene: &Bound<'_, PyScene>,
    block: bool,
    title: String,
    size: (u32, u32),
    controls: bool,
    frames: Option<u64>,
) -> PyResult<Py<PyAny>> {
    if frames == Some(0) {
        return Err(PyValueError::new_err(
            "frames=0: a window draws at least one frame",
        ));
    }
    if OPENED.swap(true, Ordering::SeqCst) {
        return Err(SluiceError::new_err(
            "sluice.view opens one window per process: winit, under sluice's window, allows one event loop per process and this process made it already. Keep the first window open (block=False) and change its scene, or show the next scene from a new process",
        ));
    }
    // The viewer (its frame callback) stays on the thread that runs it.
    let make = move || {
        let mut viewer = Viewer::new().title(title).size(size.0, size.1);
        if !controls {
            viewer = viewer.without_controls();
        }
        if let Some(n) = frames {
            viewer = viewer.quit_after_frames(n);
        }
        let control = SharedViewControl::new(&viewer);
        (viewer, control)
    };
    let shared = scene.get().inner.clone();
    if block {
        let run = py.detach(|| {
            guard(|| {
                let (viewer, control) = make();
                Ok(viewer.show_shared(shared, &control))
            })
        })?;
        return Ok(report_dict(py, run.map_err(view_error)?)?
            .into_any()
            .unbind());
    }
    let (send, receive) = std::sync::mpsc::channel();
    let thread = std::thread::Builder::new()
        .name("sluice view".into())
        .spawn(move || {
            let (viewer, control) = make();
            let _ = send.send(control.clone());
            viewer.show_shared(shared, &control)
        })
        .map_err(|e| DeviceError::new_err(format!("starting the window thread: {e}")))?;
    let control = py.detach(move || receive.recv()).map_err(|_| {
        InternalError::new_err(
            "internal error in sluice: the window thread ended before it started",
        )
    })?;
    let handle = PyViewHandle {
        control,
        thread: Mutex::new(Some(thread)),
    };
    Ok(Py::new(py, handle)?.into_any())
}
