//! The cameras: `PanZoomCamera`, `OrbitCamera`, `FlyCamera`, as in Rust (angles in radians).

use glam::{Vec2, Vec3};
use pyo3::exceptions::PyTypeError;
use pyo3::prelude::*;
use sluice_render::{Camera, FlyCamera, OrbitCamera, PanZoomCamera, Projection};

/// A 2-D camera panning and zooming over the xy plane; `zoom` is screen pixels per world
/// unit, world y points down unless `y_up`.
#[pyclass(name = "PanZoomCamera", module = "sluice")]
#[derive(Clone)]
pub struct PyPanZoomCamera {
    pub(crate) inner: PanZoomCamera,
}

#[pymethods]
impl PyPanZoomCamera {
    #[new]
    #[pyo3(signature = (center = (0.0, 0.0), zoom = 1.0, *, y_up = false))]
    fn new(center: (f32, f32), zoom: f32, y_up: bool) -> Self {
        let mut inner = PanZoomCamera::new(Vec2::new(center.0, center.1), zoom);
        inner.y_up = y_up;
        PyPanZoomCamera { inner }
    }

    /// A camera showing the world rectangle `min..max` whole in a viewport of `(w, h)` pixels.
    #[staticmethod]
    fn fit(min: (f32, f32), max: (f32, f32), viewport: (u32, u32)) -> Self {
        PyPanZoomCamera {
            inner: PanZoomCamera::fit(min.into(), max.into(), [viewport.0, viewport.1]),
        }
    }

    /// World point at the viewport's centre.
    #[getter]
    fn center(&self) -> (f32, f32) {
        self.inner.center.into()
    }

    #[setter]
    fn set_center(&mut self, c: (f32, f32)) {
        self.inner.center = c.into();
    }

    /// Screen pixels per world unit.
    #[getter]
    fn zoom(&self) -> f32 {
        self.inner.zoom
    }

    #[setter]
    fn set_zoom(&mut self, zoom: f32) {
        self.inner.zoom = zoom;
    }

    /// Whether world y points up the screen.
    #[getter]
    fn y_up(&self) -> bool {
        self.inner.y_up
    }

    #[setter]
    fn set_y_up(&mut self, y_up: bool) {
        self.inner.y_up = y_up;
    }

    /// Moves the view by `(dx, dy)` screen pixels.
    fn pan_pixels(&mut self, delta: (f32, f32)) {
        self.inner.pan_pixels(delta.into());
    }

    /// Zooms by `factor` keeping the world point under screen pixel `anchor` in place.
    fn zoom_about(&mut self, factor: f32, anchor: (f32, f32), viewport: (u32, u32)) {
        self.inner
            .zoom_about(factor, anchor.into(), [viewport.0, viewport.1]);
    }

    /// The world point under a screen pixel position.
    fn screen_to_world(&self, screen: (f32, f32), viewport: (u32, u32)) -> (f32, f32) {
        self.inner
            .screen_to_world(screen.into(), [viewport.0, viewport.1])
            .into()
    }

    /// The screen pixel position of a world point.
    fn world_to_screen(&self, world: (f32, f32), viewport: (u32, u32)) -> (f32, f32) {
        self.inner
            .world_to_screen(world.into(), [viewport.0, viewport.1])
            .into()
    }

    fn __repr__(&self) -> String {
        format!("{:?}", self.inner)
    }
}

/// A camera orbiting a target point (turntable), perspective or orthographic.
#[pyclass(name = "OrbitCamera", module = "sluice")]
#[derive(Clone)]
pub struct PyOrbitCamera {
    pub(crate) inner: OrbitCamera,
}

#[pymethods]
impl PyOrbitCamera {
    /// A perspective camera looking at the box `min..max` whole, at the given azimuth and
    /// elevation in degrees.
    #[staticmethod]
    #[pyo3(signature = (min, max, azimuth_degrees = 0.0, elevation_degrees = 0.0))]
    fn fit(
        min: (f32, f32, f32),
        max: (f32, f32, f32),
        azimuth_degrees: f32,
        elevation_degrees: f32,
    ) -> Self {
        PyOrbitCamera {
            inner: OrbitCamera::fit(min.into(), max.into(), azimuth_degrees, elevation_degrees),
        }
    }

    /// The same camera with an orthographic projection.
    fn orthographic(&self) -> Self {
        PyOrbitCamera {
            inner: self.inner.orthographic(),
        }
    }

    /// Turns the camera about the target (radians).
    fn orbit(&mut self, d_azimuth: f32, d_elevation: f32) {
        self.inner.orbit(d_azimuth, d_elevation);
    }

    /// Moves the eye towards (`factor` < 1) or away from the target.
    fn dolly(&mut self, factor: f32) {
        self.inner.dolly(factor);
    }

    /// The eye position.
    #[getter]
    fn eye(&self) -> (f32, f32, f32) {
        self.inner.eye().into()
    }

    /// The point looked at.
    #[getter]
    fn target(&self) -> (f32, f32, f32) {
        self.inner.target.into()
    }

    #[setter]
    fn set_target(&mut self, t: (f32, f32, f32)) {
        self.inner.target = t.into();
    }

    /// Distance from target to eye.
    #[getter]
    fn distance(&self) -> f32 {
        self.inner.distance
    }

    /// Azimuth, radians.
    #[getter]
    fn azimuth(&self) -> f32 {
        self.inner.azimuth
    }

    #[setter]
    fn set_azimuth(&mut self, a: f32) {
        self.inner.azimuth = a;
    }

    /// Elevation, radians.
    #[getter]
    fn elevation(&self) -> f32 {
        self.inner.elevation
    }

    #[setter]
    fn set_elevation(&mut self, e: f32) {
        self.inner.elevation = e;
    }

    fn __repr__(&self) -> String {
        format!("{:?}", self.inner)
    }
}

/// A first-person camera: a position and a heading (yaw, pitch in radians).
#[pyclass(name = "FlyCamera", module = "sluice")]
#[derive(Clone)]
pub struct PyFlyCamera {
    pub(crate) inner: FlyCamera,
}

#[pymethods]
impl PyFlyCamera {
    #[new]
    #[pyo3(signature = (position, near = 0.1, far = 1000.0, *, fov_y_degrees = 60.0))]
    fn new(position: (f32, f32, f32), near: f32, far: f32, fov_y_degrees: f32) -> Self {
        let mut inner = FlyCamera::new(position.into(), near, far);
        inner.projection = Projection::Perspective { fov_y_degrees };
        PyFlyCamera { inner }
    }

    /// Eye position.
    #[getter]
    fn position(&self) -> (f32, f32, f32) {
        self.inner.position.into()
    }

    #[setter]
    fn set_position(&mut self, p: (f32, f32, f32)) {
        self.inner.position = Vec3::from(p);
    }

    /// Heading about the up axis, radians.
    #[getter]
    fn yaw(&self) -> f32 {
        self.inner.yaw
    }

    /// Heading above the horizontal plane, radians.
    #[getter]
    fn pitch(&self) -> f32 {
        self.inner.pitch
    }

    /// The unit view direction.
    #[getter]
    fn forward(&self) -> (f32, f32, f32) {
        self.inner.forward().into()
    }

    /// Moves along the view direction.
    fn move_forward(&mut self, distance: f32) {
        self.inner.move_forward(distance);
    }

    /// Turns the heading (radians).
    fn turn(&mut self, d_yaw: f32, d_pitch: f32) {
        self.inner.turn(d_yaw, d_pitch);
    }

    fn __repr__(&self) -> String {
        format!("{:?}", self.inner)
    }
}

/// A camera taken from any of the Python camera classes.
#[derive(Clone, Copy)]
pub enum AnyCamera {
    /// 2-D.
    PanZoom(PanZoomCamera),
    /// Orbiting.
    Orbit(OrbitCamera),
    /// First person.
    Fly(FlyCamera),
}

impl AnyCamera {
    /// Extracts a camera, or a `TypeError` naming what was given.
    pub fn extract(object: &Bound<'_, PyAny>) -> PyResult<Self> {
        if let Ok(c) = object.cast::<PyPanZoomCamera>() {
            return Ok(AnyCamera::PanZoom(c.borrow().inner));
        }
        if let Ok(c) = object.cast::<PyOrbitCamera>() {
            return Ok(AnyCamera::Orbit(c.borrow().inner));
        }
        if let Ok(c) = object.cast::<PyFlyCamera>() {
            return Ok(AnyCamera::Fly(c.borrow().inner));
        }
        Err(PyTypeError::new_err(format!(
            "a camera is a PanZoomCamera, OrbitCamera or FlyCamera, got {}",
            object.get_type().name()?
        )))
    }

    /// As the renderer takes it.
    pub fn as_dyn(&self) -> &dyn Camera {
        match self {
            AnyCamera::PanZoom(c) => c,
            AnyCamera::Orbit(c) => c,
            AnyCamera::Fly(c) => c,
        }
    }
}
