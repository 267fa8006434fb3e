//! `sluice.view(scene)`: a window on a scene (sluice-view's [`Viewer`]), blocking, or on a
//! thread of its own (`block=False`) while the script keeps writing sources and changing
//! settings; each frame shows the scene as it is then ([`Viewer::show_shared`]).
//!
//! The window runs with the GIL released; Python-written sources take it only around their
//! calls, as with any renderer.
//!
//! winit allows one event loop per process and sluice-view keeps it on the thread that made
//! it, so every window of the process runs on one window thread, made by the first
//! `sluice.view`: one window at a time, as many one after another as the script likes.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::{Receiver, RecvTimeoutError, Sender};
use std::sync::OnceLock;
use std::time::{Duration, Instant};

use numpy::{PyArray1, PyArrayMethods};
use parking_lot::Mutex;
use pyo3::exceptions::{PyTimeoutError, PyValueError};
use pyo3::prelude::*;
use pyo3::types::PyDict;
use sluice_view::shared::SharedViewControl;
use sluice_view::{ViewError, Viewer, ViewerReport};

use crate::errors::{render_error, DeviceError, InternalError, SluiceError};
use crate::renderer::counters_dict;
use crate::scene::PyScene;

type Run = Result<ViewerReport, ViewError>;

/// Whether a window is open (on the window thread) now.
static OPEN: AtomicBool = AtomicBool::new(false);

/// A window to run on the window thread.
type Job = Box<dyn FnOnce() + Send>;

/// The window thread's queue, made with the thread by the first window.
static WINDOW_THREAD: OnceLock<Result<Sender<Job>, String>> = OnceLock::new();

/// Runs `job` on the window thread (made on first use); each job runs to its end before the
/// next starts, a panic in one caught so that the thread stays for the next.
fn on_window_thread(job: Job) -> PyResult<()> {
    let queue = WINDOW_THREAD.get_or_init(|| {
        let (send, receive) = std::sync::mpsc::channel::<Job>();
        std::thread::Builder::new()
            .name("sluice view".into())
            .spawn(move || {
                for job in receive {
                    let _ = std::panic::catch_unwind(std::panic::AssertUnwindSafe(job));
                }
            })
            .map(|_| send)
            .map_err(|e| format!("starting the window thread: {e}"))
    });
    let queue = queue
        .as_ref()
        .map_err(|e| DeviceError::new_err(e.clone()))?;
    queue
        .send(job)
        .map_err(|_| InternalError::new_err("internal error in sluice: the window thread is gone"))
}

/// Clears [`OPEN`] when the window's job ends, panicking or not.
struct Closed;

impl Drop for Closed {
    fn drop(&mut self) {
        OPEN.store(false, Ordering::SeqCst);
    }
}

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

/// Where a window's report stands: coming (from the window thread), arrived, or taken.
enum Outcome {
    Coming(Receiver<Run>),
    Arrived(Run),
    Taken,
}

impl Outcome {
    /// Moves a report that has arrived from `Coming` to `Arrived` (an error if the window's job
    /// ended without one: a panic there).
    fn poll(&mut self) {
        if let Outcome::Coming(receive) = self {
            match receive.try_recv() {
                Ok(run) => *self = Outcome::Arrived(run),
                Err(std::sync::mpsc::TryRecvError::Empty) => {}
                Err(std::sync::mpsc::TryRecvError::Disconnected) => {
                    *self = Outcome::Arrived(Err(ViewError::Window(
                        "internal error in sluice: the window ended without a report".into(),
                    )))
                }
            }
        }
    }
}

/// A window running on the window thread: `sluice.view(scene, block=False)`.
#[pyclass(name = "ViewHandle", module = "sluice", frozen)]
pub struct PyViewHandle {
    control: SharedViewControl,
    outcome: Mutex<Outcome>,
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
        let mut outcome = self.outcome.lock();
        outcome.poll();
        matches!(*outcome, Outcome::Coming(_))
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
        let outcome = std::mem::replace(&mut *self.outcome.lock(), Outcome::Taken);
        let run = match outcome {
            Outcome::Taken => {
                return Err(PyValueError::new_err(
                    "this window's report was taken by an earlier wait()",
                ))
            }
            Outcome::Arrived(run) => run,
            Outcome::Coming(receive) => {
                let (got, receive) = py.detach(move || {
                    let got = match deadline {
                        None => receive.recv().map_err(|_| RecvTimeoutError::Disconnected),
                        Some(d) => {
                            receive.recv_timeout(d.saturating_duration_since(Instant::now()))
                        }
                    };
                    (got, receive)
                });
                match got {
                    Ok(run) => run,
                    Err(RecvTimeoutError::Timeout) => {
                        *self.outcome.lock() = Outcome::Coming(receive);
                        return Err(PyTimeoutError::new_err(format!(
                            "the window is still open after {} s",
                            timeout.unwrap_or_default()
                        )));
                    }
                    Err(RecvTimeoutError::Disconnected) => {
                        return Err(InternalError::new_err(
                            "internal error in sluice: the window ended without a report",
                        ))
                    }
                }
            }
        };
        report_dict(py, run.map_err(view_error)?)
    }
}

/// Shows `scene` in a window with mouse cameras and a panel of layer controls.
///
/// `block=True` (default) runs until the window is closed and returns its report (a dict:
/// `frames`, `frames_rendered`, `last_frame`); `block=False` returns a `ViewHandle` at once,
/// the window running on the window thread. `frames`: close after that many frames (the last
/// one in the report); `controls=False` hides the panel and status bar. One window at a time
/// (all run on one thread: winit allows one event loop per process): a call while a window is
/// open raises `SluiceError`; once it is closed the next opens.
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
    if OPEN.swap(true, Ordering::SeqCst) {
        return Err(SluiceError::new_err(
            "a sluice window is open: one window at a time (winit allows one event loop per process, and every window runs on it). Close it (its close button, handle.close() or frames=) before showing the next scene, or change the open window's scene",
        ));
    }
    // The viewer (its frame callback) is made on the thread that runs it.
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
    let (send_control, control) = std::sync::mpsc::channel();
    let (send_report, report) = std::sync::mpsc::channel::<Run>();
    let started = on_window_thread(Box::new(move || {
        let closed = Closed;
        let (viewer, control) = make();
        let _ = send_control.send(control.clone());
        let run = viewer.show_shared(shared, &control);
        // Closed before the report goes: whoever gets it may open the next window at once.
        drop(closed);
        let _ = send_report.send(run);
    }));
    if let Err(e) = started {
        OPEN.store(false, Ordering::SeqCst);
        return Err(e);
    }
    let control = py.detach(move || control.recv()).map_err(|_| {
        InternalError::new_err("internal error in sluice: the window ended before it started")
    })?;
    if block {
        let run = py.detach(move || report.recv()).map_err(|_| {
            InternalError::new_err("internal error in sluice: the window ended without a report")
        })?;
        return Ok(report_dict(py, run.map_err(view_error)?)?
            .into_any()
            .unbind());
    }
    let handle = PyViewHandle {
        control,
        outcome: Mutex::new(Outcome::Coming(report)),
    };
    Ok(Py::new(py, handle)?.into_any())
}
