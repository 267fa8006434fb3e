//! `sluice.Renderer` and `sluice.Target`: frames drawn offscreen and read back as numpy.

use numpy::{PyArray1, PyArray3, PyArrayMethods, PyUntypedArrayMethods};
use parking_lot::Mutex;
use pyo3::exceptions::PyOSError;
use pyo3::prelude::*;
use pyo3::types::PyDict;
use sluice_render::{
    parse_backends, Counters, FrameStats, ImageDraw, RenderTarget, Renderer, RendererOptions,
};

use crate::camera::AnyCamera;
use crate::errors::{guard, render_error};
use crate::scene::PyScene;

/// An offscreen image a renderer draws into (RGBA8, sRGB).
#[pyclass(name = "Target", module = "sluice", frozen)]
pub struct PyTarget {
    pub(crate) inner: RenderTarget,
}

#[pymethods]
impl PyTarget {
    /// Width in pixels.
    #[getter]
    fn width(&self) -> u32 {
        self.inner.width()
    }

    /// Height in pixels.
    #[getter]
    fn height(&self) -> u32 {
        self.inner.height()
    }

    /// `(width, height)`.
    #[getter]
    fn size(&self) -> (u32, u32) {
        (self.inner.width(), self.inner.height())
    }

    /// Forgets what the target shows, so that the next frame redraws all of it (by default a
    /// frame redraws only what changed).
    fn invalidate(&self) {
        self.inner.invalidate();
    }

    fn __repr__(&self) -> String {
        format!("Target({}x{})", self.inner.width(), self.inner.height())
    }
}

/// One GPU device and, for every source a scene shows, one GPU copy of it kept up to date:
/// each frame uploads only what changed.
///
/// Calls lock the renderer with the GIL released, so that sources written in Python can run
/// while a frame is drawn, and so that Python threads may share one renderer.
#[pyclass(name = "Renderer", module = "sluice", frozen)]
pub struct PyRenderer {
    inner: Mutex<Renderer>,
}

#[pymethods]
impl PyRenderer {
    /// A renderer on the best adapter. `backend` (`"vulkan"`, `"gl"`, `"metal"`, `"dx12"`,
    /// `"all"`) and `adapter` (part of the adapter's name) default to `SLUICE_BACKEND` and
    /// `SLUICE_ADAPTER`; `upload_budget` caps the bytes uploaded per frame. With `cuda=True`
    /// the renderer shares its device with CUDA (needed to show `CudaSource`s; only in builds
    /// with CUDA support). With `interop=True` (Linux, Vulkan) it is made on the interop
    /// device, which `HostBufferSource`s import their arrays on (needed to show them).
    /// `image_draw` (`"auto"`, `"raster"`, `"compute"`; default `SLUICE_IMAGE_DRAW`, else
    /// `"auto"`) says how a frame of one image is drawn.
    #[new]
    #[pyo3(signature = (*, backend = None, adapter = None, upload_budget = None, cuda = false, interop = false, image_draw = None))]
    fn new(
        py: Python<'_>,
        backend: Option<&str>,
        adapter: Option<String>,
        upload_budget: Option<u64>,
        cuda: bool,
        interop: bool,
        image_draw: Option<&str>,
    ) -> PyResult<Self> {
        let mut options = RendererOptions::from_env().map_err(render_error)?;
        if let Some(d) = image_draw {
            options.image_draw = ImageDraw::parse(d).map_err(render_error)?;
        }
        if let Some(b) = backend {
            options.backends = Some(parse_backends(b).map_err(render_error)?);
        }
        if adapter.is_some() {
            options.adapter_name = adapter;
        }
        options.upload_budget = upload_budget;
        let inner = py.detach(|| guard(|| make_renderer(options, cuda, interop)))?;
        Ok(PyRenderer {
            inner: Mutex::new(inner),
        })
    }

    /// How a frame of one image is drawn on this adapter: `"raster"` or `"compute"`.
    fn image_draw(&self, py: Python<'_>) -> PyResult<&'static str> {
        self.with(py, |r| {
            Ok(match r.image_draw() {
                ImageDraw::Compute => "compute",
                _ => "raster",
            })
        })
    }

    /// The adapter in use: `name`, `backend`, `device_type`, `driver`.
    fn adapter_info<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
        let info = self.with(py, |r| Ok(r.adapter_info().clone()))?;
        let d = PyDict::new(py);
        d.set_item("name", &info.name)?;
        d.set_item("backend", format!("{:?}", info.backend))?;
        d.set_item("device_type", format!("{:?}", info.device_type))?;
        d.set_item("driver", format!("{} {}", info.driver, info.driver_info))?;
        Ok(d)
    }

    /// An offscreen target of `width` x `height` pixels.
    fn create_target(&self, py: Python<'_>, width: u32, height: u32) -> PyResult<PyTarget> {
        let inner = self.with(py, |r| r.create_target(width, height).map_err(render_error))?;
        Ok(PyTarget { inner })
    }

    /// Draws `scene` seen by `camera` into `target` and returns the frame as a `(height,
    /// width, 4)` uint8 array (RGBA); with `out`, into that array (see `read`).
    #[pyo3(signature = (scene, camera, target, out = None))]
    fn render<'py>(
        &self,
        py: Python<'py>,
        scene: PyRef<'_, PyScene>,
        camera: &Bound<'_, PyAny>,
        target: PyRef<'_, PyTarget>,
        out: Option<Bound<'py, PyArray3<u8>>>,
    ) -> PyResult<Bound<'py, PyAny>> {
        self.draw_frame(py, &scene, camera, &target)?;
        self.read(py, target, out)
    }

    /// Draws like `render` without reading the frame back; returns the frame's statistics
    /// (`bytes_uploaded`, `copies_issued`, `visuals_drawn`, `pixels_drawn`,
    /// `uploads_pending`).
    fn draw<'py>(
        &self,
        py: Python<'py>,
        scene: PyRef<'_, PyScene>,
        camera: &Bound<'_, PyAny>,
        target: PyRef<'_, PyTarget>,
    ) -> PyResult<Bound<'py, PyDict>> {
        let stats = self.draw_frame(py, &scene, camera, &target)?;
        frame_stats(py, stats)
    }

    /// Uploads what changed in the sources `scene` shows, without drawing.
    fn upload<'py>(
        &self,
        py: Python<'py>,
        scene: PyRef<'_, PyScene>,
    ) -> PyResult<Bound<'py, PyDict>> {
        let shared = scene.inner.clone();
        let stats = self.with(py, |r| r.upload(&shared.lock()).map_err(render_error))?;
        frame_stats(py, stats)
    }

    /// The target's pixels as a `(height, width, 4)` uint8 array, after the GPU finished
    /// drawing it. With `out`, a writable C-contiguous `(height, width, 4)` uint8 array, the
    /// pixels are written into it and it is returned: frames read one after another into one
    /// array skip a new array's allocation and first touch. Another shape is a `ValueError`
    /// naming both, and `out` is left as it was.
    #[pyo3(signature = (target, out = None))]
    fn read<'py>(
        &self,
        py: Python<'py>,
        target: PyRef<'_, PyTarget>,
        out: Option<Bound<'py, PyArray3<u8>>>,
    ) -> PyResult<Bound<'py, PyAny>> {
        let t = &target.inner;
        if let Some(out) = out {
            let [w, h] = t.size();
            let want = [h as usize, w as usize, 4];
            if out.shape() != want {
                return Err(pyo3::exceptions::PyValueError::new_err(format!(
                    "out has shape {:?}; the {w}x{h} target reads into a C-contiguous uint8 array of shape {want:?}",
                    out.shape()
                )));
            }
            {
                let mut rw = out
                    .try_readwrite()
                    .map_err(|e| pyo3::exceptions::PyValueError::new_err(format!("out: {e}")))?;
                let pixels = rw.as_slice_mut().map_err(|_| {
                    pyo3::exceptions::PyValueError::new_err(
                        "out must be C-contiguous and writable (np.ascontiguousarray makes such a copy)",
                    )
                })?;
                self.with(py, |r| r.read_into(t, pixels).map_err(render_error))?;
            }
            return Ok(out.into_any());
        }
        let image = self.with(py, |r| r.read_image(t).map_err(render_error))?;
        let (w, h) = (image.width() as usize, image.height() as usize);
        let flat = PyArray1::from_vec(py, image.into_raw());
        Ok(flat.reshape([h, w, 4])?.into_any())
    }

    /// Saves the target as a PNG file.
    fn save_png(
        &self,
        py: Python<'_>,
        target: PyRef<'_, PyTarget>,
        path: std::path::PathBuf,
    ) -> PyResult<()> {
        let t = &target.inner;
        let image = self.with(py, |r| r.read_image(t).map_err(render_error))?;
        py.detach(|| {
            image
                .save(&path)
                .map_err(|e| PyOSError::new_err(format!("{}: {e}", path.display())))
        })
    }

    /// What the proxy layer did (cumulative) and holds (now), as a dict of integers.
    fn counters<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
        let c = self.with(py, |r| Ok(r.counters()))?;
        counters_dict(py, &c)
    }

    /// Caps the bytes uploaded per frame (`None`: no cap).
    fn set_upload_budget(&self, py: Python<'_>, budget: Option<u64>) -> PyResult<()> {
        self.with(py, |r| {
            r.set_upload_budget(budget);
            Ok(())
        })
    }

    /// Whether a source asked for a redraw (data that was not ready is ready) since the last
    /// call.
    fn take_redraw_request(&self, py: Python<'_>) -> PyResult<bool> {
        self.with(py, |r| Ok(r.take_redraw_request()))
    }

    /// Waits until the GPU has finished all submitted work.
    fn wait_idle(&self, py: Python<'_>) -> PyResult<()> {
        self.with(py, |r| r.wait_idle().map_err(render_error))
    }

    /// The largest 2-D texture side of the device.
    #[getter]
    fn max_texture_dimension_2d(&self, py: Python<'_>) -> PyResult<u32> {
        self.with(py, |r| Ok(r.max_texture_dimension_2d()))
    }
}

impl PyRenderer {
    fn draw_frame(
        &self,
        py: Python<'_>,
        scene: &PyScene,
        camera: &Bound<'_, PyAny>,
        target: &PyTarget,
    ) -> PyResult<FrameStats> {
        let shared = scene.inner.clone();
        let camera = AnyCamera::extract(camera)?;
        let t = &target.inner;
        self.with(py, |r| {
            r.render(&shared.lock(), camera.as_dyn(), t)
                .map_err(render_error)
        })
    }

    /// Runs `f` on the renderer with the GIL released (and panics caught). The lock is only
    /// ever taken without the GIL, so a Python source that needs the GIL while a frame holds
    /// the lock cannot deadlock with a thread waiting for the lock.
    pub(crate) fn with<T: Send>(
        &self,
        py: Python<'_>,
        f: impl FnOnce(&mut Renderer) -> PyResult<T> + Send,
    ) -> PyResult<T> {
        py.detach(|| guard(|| f(&mut self.inner.lock())))
    }
}

fn make_renderer(options: RendererOptions, cuda: bool, interop: bool) -> PyResult<Renderer> {
    if interop && !cuda {
        #[cfg(target_os = "linux")]
        return crate::interop_device::renderer(&options);
        #[cfg(not(target_os = "linux"))]
        return Err(pyo3::exceptions::PyValueError::new_err(
            "Renderer(interop=True): GPU interop is Linux-only",
        ));
    }
    if cuda {
        #[cfg(all(feature = "cuda", target_os = "linux"))]
        return crate::cuda::renderer(&options);
        #[cfg(not(all(feature = "cuda", target_os = "linux")))]
        return Err(pyo3::exceptions::PyValueError::new_err(
            "Renderer(cuda=True): this build of sluice has no CUDA support (build sluice-py with feature `cuda`)",
        ));
    }
    Renderer::with_options(options).map_err(render_error)
}

pub(crate) fn frame_stats(py: Python<'_>, s: FrameStats) -> PyResult<Bound<'_, PyDict>> {
    let d = PyDict::new(py);
    d.set_item("bytes_uploaded", s.bytes_uploaded)?;
    d.set_item("copies_issued", s.copies_issued)?;
    d.set_item("visuals_drawn", s.visuals_drawn)?;
    d.set_item("pixels_drawn", s.pixels_drawn)?;
    d.set_item("uploads_pending", s.uploads_pending)?;
    Ok(d)
}

pub(crate) fn counters_dict<'py>(py: Python<'py>, c: &Counters) -> PyResult<Bound<'py, PyDict>> {
    let d = PyDict::new(py);
    for (name, value) in [
        ("bytes_uploaded", c.bytes_uploaded),
        ("derived_bytes_uploaded", c.derived_bytes_uploaded),
        ("device_bytes_copied", c.device_bytes_copied),
        ("copies_issued", c.copies_issued),
        ("compute_copies", c.compute_copies),
        ("textures_in_place", c.textures_in_place),
        ("in_place_fallbacks", c.in_place_fallbacks),
        ("textures_provided", c.textures_provided),
        ("resident_bytes", c.resident_bytes),
        ("textures_alive", c.textures_alive),
        ("buffers_alive", c.buffers_alive),
        ("textures_created", c.textures_created),
        ("staging_buffers_created", c.staging_buffers_created),
        ("bind_groups_created", c.bind_groups_created),
        ("staging_bytes", c.staging_bytes),
        ("mesh_draws_reordered", c.mesh_draws_reordered),
        ("mesh_draws_culled", c.mesh_draws_culled),
        ("mesh_culls_run", c.mesh_culls_run),
        ("image_draws_by_compute", c.image_draws_by_compute),
    ] {
        d.set_item(name, value)?;
    }
    Ok(d)
}
