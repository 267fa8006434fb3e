//! `sluice.Image`, `sluice.Volume`, `sluice.Mesh`: the Rust visuals with settings as
//! Python properties. Changing a setting uploads nothing; the next render shows it.

use pyo3::prelude::*;
use sluice_core::LevelPolicy;
use sluice_render::{Image, Mesh, Volume, VolumeMode};

use crate::errors::render_error;
use crate::settings;
use crate::slot::Slot;
use crate::sources::{shared_source, ArrayAxes};

/// A 2-D image of a source (or a plane of a 3-D source) through contrast limits, gamma and a
/// colormap.
#[pyclass(name = "Image", module = "sluice")]
pub struct PyImage {
    pub(crate) slot: Slot<Image>,
    source: Py<PyAny>,
}

#[pymethods]
impl PyImage {
    #[new]
    #[pyo3(signature = (source, *, clim = None, gamma = 1.0, colormap = None, interpolation = "nearest", nan_color = None, opacity = 1.0, slice = None, level_bias = 0, level_lock = None))]
    #[allow(clippy::too_many_arguments)]
    fn new(
        source: &Bound<'_, PyAny>,
        clim: Option<(f64, f64)>,
        gamma: f32,
        colormap: Option<&Bound<'_, PyAny>>,
        interpolation: &str,
        nan_color: Option<[f32; 4]>,
        opacity: f32,
        slice: Option<&Bound<'_, PyAny>>,
        level_bias: i32,
        level_lock: Option<usize>,
    ) -> PyResult<Self> {
        let py = source.py();
        let (shared, object) = shared_source(source, ArrayAxes::Image)?;
        let mut image = PyImage {
            slot: Slot::Free(Image::new(shared)),
            source: object,
        };
        image.set_clim(py, clim)?;
        image.set_gamma(py, gamma)?;
        if let Some(c) = colormap {
            image.set_colormap(py, c)?;
        }
        image.set_interpolation(py, interpolation)?;
        if let Some(c) = nan_color {
            image.set_nan_color(py, c)?;
        }
        image.set_opacity(py, opacity)?;
        image.set_slice(py, slice)?;
        image.set_level_bias(py, level_bias)?;
        image.set_level_lock(py, level_lock)?;
        Ok(image)
    }

    /// For multiscale sources: levels to draw coarser than the view needs (negative: finer),
    /// for slow links; clamped to the source's levels. Ignored while `level_lock` is set.
    #[getter]
    fn level_bias(&self, py: Python<'_>) -> PyResult<i32> {
        self.slot.read(py, |v| v.level_policy().bias)
    }

    #[setter]
    fn set_level_bias(&mut self, py: Python<'_>, bias: i32) -> PyResult<()> {
        self.slot
            .write(py, move |v| {
                v.set_level_policy(with_bias(v.level_policy(), bias))
            })?
            .map_err(render_error)
    }

    /// For multiscale sources: the level drawn whatever the zoom, or `None` (the level the
    /// view needs, then `level_bias`). A level the source does not have is a `ValueError`.
    #[getter]
    fn level_lock(&self, py: Python<'_>) -> PyResult<Option<usize>> {
        self.slot.read(py, |v| v.level_policy().lock)
    }

    #[setter]
    fn set_level_lock(&mut self, py: Python<'_>, lock: Option<usize>) -> PyResult<()> {
        self.slot
            .write(py, move |v| {
                v.set_level_policy(with_lock(v.level_policy(), lock))
            })?
            .map_err(render_error)
    }

    /// The source object shown.
    #[getter]
    fn source(&self, py: Python<'_>) -> Py<PyAny> {
        self.source.clone_ref(py)
    }

    #[setter]
    fn set_source(&mut self, source: &Bound<'_, PyAny>) -> PyResult<()> {
        let (shared, object) = shared_source(source, ArrayAxes::Image)?;
        self.slot
            .write(source.py(), move |v| v.set_source(shared))?;
        self.source = object;
        Ok(())
    }

    /// Contrast limits `(lo, hi)`; `None` for the element type's default range.
    #[getter]
    fn clim(&self, py: Python<'_>) -> PyResult<Option<(f64, f64)>> {
        self.slot.read(py, |v| v.clim().map(|[a, b]| (a, b)))
    }

    #[setter]
    fn set_clim(&mut self, py: Python<'_>, clim: Option<(f64, f64)>) -> PyResult<()> {
        let clim = clim.map(settings::clim).transpose()?;
        self.slot
            .write(py, move |v| match clim {
                Some((lo, hi)) => v.set_clim(lo, hi),
                None => {
                    v.reset_clim();
                    Ok(())
                }
            })?
            .map_err(render_error)
    }

    /// The contrast limits in use (the default range when none are set).
    #[getter]
    fn effective_clim(&self, py: Python<'_>) -> PyResult<(f64, f64)> {
        self.slot.read(py, |v| {
            let [a, b] = v.effective_clim();
            (a, b)
        })
    }

    /// Gamma applied after normalization.
    #[getter]
    fn gamma(&self, py: Python<'_>) -> PyResult<f32> {
        self.slot.read(py, |v| v.gamma())
    }

    #[setter]
    fn set_gamma(&mut self, py: Python<'_>, gamma: f32) -> PyResult<()> {
        let gamma = settings::positive("gamma", gamma)?;
        self.slot
            .write(py, move |v| v.set_gamma(gamma))?
            .map_err(render_error)
    }

    /// The colormap's name; set a name or an `(n, 3)` / `(n, 4)` table.
    #[getter]
    fn colormap(&self, py: Python<'_>) -> PyResult<String> {
        self.slot.read(py, |v| v.colormap().name().to_string())
    }

    #[setter]
    fn set_colormap(&mut self, py: Python<'_>, colormap: &Bound<'_, PyAny>) -> PyResult<()> {
        let colormap = settings::colormap(colormap)?;
        self.slot.write(py, move |v| v.set_colormap(colormap))
    }

    /// `"nearest"` or `"linear"`.
    #[getter]
    fn interpolation(&self, py: Python<'_>) -> PyResult<&'static str> {
        self.slot
            .read(py, |v| settings::interpolation_name(v.interpolation()))
    }

    #[setter]
    fn set_interpolation(&mut self, py: Python<'_>, interpolation: &str) -> PyResult<()> {
        let interpolation = settings::interpolation(interpolation)?;
        self.slot
            .write(py, move |v| v.set_interpolation(interpolation))
    }

    /// RGBA colour of NaN samples.
    #[getter]
    fn nan_color(&self, py: Python<'_>) -> PyResult<[f32; 4]> {
        self.slot.read(py, |v| v.nan_color())
    }

    #[setter]
    fn set_nan_color(&mut self, py: Python<'_>, rgba: [f32; 4]) -> PyResult<()> {
        self.slot
            .write(py, move |v| v.set_nan_color(rgba))?
            .map_err(render_error)
    }

    /// Opacity in `[0, 1]`.
    #[getter]
    fn opacity(&self, py: Python<'_>) -> PyResult<f32> {
        self.slot.read(py, |v| v.opacity())
    }

    #[setter]
    fn set_opacity(&mut self, py: Python<'_>, opacity: f32) -> PyResult<()> {
        let opacity = settings::unit("opacity", opacity)?;
        self.slot
            .write(py, move |v| v.set_opacity(opacity))?
            .map_err(render_error)
    }

    /// The plane of a 3-D source shown: `("z", i)`, `("y", i)`, `("x", i)` or
    /// `("oblique", origin, u, v, extent)`; `None` for the default (middle plane along z).
    #[getter]
    fn slice(&self, py: Python<'_>) -> PyResult<Option<Py<PyAny>>> {
        self.slot
            .read(py, |v| v.slice())?
            .map(|s| settings::slice_tuple(py, s))
            .transpose()
    }

    #[setter]
    fn set_slice(&mut self, py: Python<'_>, slice: Option<&Bound<'_, PyAny>>) -> PyResult<()> {
        if let Some(s) = slice {
            let s = settings::slice(s)?;
            self.slot.write(py, move |v| v.set_slice(s))?;
        }
        Ok(())
    }

    fn __repr__(&self, py: Python<'_>) -> PyResult<String> {
        self.slot.read(py, |v| format!("{:?}", v))
    }
}

/// A 3-D source ray-marched through a colormap.
#[pyclass(name = "Volume", module = "sluice")]
pub struct PyVolume {
    pub(crate) slot: Slot<Volume>,
    source: Py<PyAny>,
    /// The last translucent attenuation and iso threshold set (kept across mode changes).
    attenuation: f32,
    threshold: f64,
}

#[pymethods]
impl PyVolume {
    #[new]
    #[pyo3(signature = (source, *, mode = "mip", attenuation = 1.0, threshold = 0.5, clim = None, gamma = 1.0, colormap = None, step = None, interpolation = "linear", opacity = 1.0, depth_samples = Some(sluice_render::DEFAULT_DEPTH_SAMPLES), level_bias = 0, level_lock = None))]
    #[allow(clippy::too_many_arguments)]
    fn new(
        source: &Bound<'_, PyAny>,
        mode: &str,
        attenuation: f32,
        threshold: f64,
        clim: Option<(f64, f64)>,
        gamma: f32,
        colormap: Option<&Bound<'_, PyAny>>,
        step: Option<f32>,
        interpolation: &str,
        opacity: f32,
        depth_samples: Option<u32>,
        level_bias: i32,
        level_lock: Option<usize>,
    ) -> PyResult<Self> {
        let (shared, object) = shared_source(source, ArrayAxes::Spatial)?;
        let mut inner = Volume::new(shared)
            .with_gamma(settings::positive("gamma", gamma)?)
            .map_err(render_error)?
            .with_interpolation(settings::interpolation(interpolation)?)
            .with_opacity(settings::unit("opacity", opacity)?)
            .map_err(render_error)?;
        if let Some(c) = colormap {
            inner = inner.with_colormap(settings::colormap(c)?);
        }
        if let Some(c) = clim {
            let (lo, hi) = settings::clim(c)?;
            inner = inner.with_clim(lo, hi).map_err(render_error)?;
        }
        let py = source.py();
        let mut volume = PyVolume {
            slot: Slot::Free(inner),
            source: object,
            attenuation,
            threshold,
        };
        volume.set_mode_impl(py, mode, attenuation, threshold)?;
        volume.set_step(py, step)?;
        volume.set_depth_samples(py, depth_samples)?;
        volume.set_level_bias(py, level_bias)?;
        volume.set_level_lock(py, level_lock)?;
        Ok(volume)
    }

    /// For multiscale and lazy sources: levels to draw coarser than the view needs (negative:
    /// finer), for slow links; clamped to the source's levels. Ignored while `level_lock` is
    /// set.
    #[getter]
    fn level_bias(&self, py: Python<'_>) -> PyResult<i32> {
        self.slot.read(py, |v| v.level_policy().bias)
    }

    #[setter]
    fn set_level_bias(&mut self, py: Python<'_>, bias: i32) -> PyResult<()> {
        self.slot
            .write(py, move |v| {
                v.set_level_policy(with_bias(v.level_policy(), bias))
            })?
            .map_err(render_error)
    }

    /// For multiscale sources: the level drawn whatever the view, or `None`. A level the
    /// source does not have is a `ValueError`.
    #[getter]
    fn level_lock(&self, py: Python<'_>) -> PyResult<Option<usize>> {
        self.slot.read(py, |v| v.level_policy().lock)
    }

    #[setter]
    fn set_level_lock(&mut self, py: Python<'_>, lock: Option<usize>) -> PyResult<()> {
        self.slot
            .write(py, move |v| {
                v.set_level_policy(with_lock(v.level_policy(), lock))
            })?
            .map_err(render_error)
    }

    /// For lazy and multiscale sources: about how many samples a ray takes at most, which
    /// chooses the level drawn (the default 256; `None`: one sample per pixel, the finest
    /// level the screen can show). More samples draw finer levels and load more data.
    #[getter]
    fn depth_samples(&self, py: Python<'_>) -> PyResult<Option<u32>> {
        self.slot.read(py, |v| v.depth_samples())
    }

    #[setter]
    fn set_depth_samples(&mut self, py: Python<'_>, samples: Option<u32>) -> PyResult<()> {
        self.slot
            .write(py, move |v| v.set_depth_samples(samples))?
            .map_err(render_error)
    }

    /// The source object shown.
    #[getter]
    fn source(&self, py: Python<'_>) -> Py<PyAny> {
        self.source.clone_ref(py)
    }

    #[setter]
    fn set_source(&mut self, source: &Bound<'_, PyAny>) -> PyResult<()> {
        let (shared, object) = shared_source(source, ArrayAxes::Spatial)?;
        self.slot
            .write(source.py(), move |v| v.set_source(shared))?;
        self.source = object;
        Ok(())
    }

    /// `"mip"`, `"translucent"` or `"iso"`.
    #[getter]
    fn mode(&self, py: Python<'_>) -> PyResult<&'static str> {
        self.slot.read(py, |v| match v.mode() {
            VolumeMode::Mip => "mip",
            VolumeMode::Translucent { .. } => "translucent",
            VolumeMode::Iso { .. } => "iso",
        })
    }

    #[setter]
    fn set_mode(&mut self, py: Python<'_>, mode: &str) -> PyResult<()> {
        self.set_mode_impl(py, mode, self.attenuation, self.threshold)
    }

    /// Opacity per voxel at full value in `"translucent"` mode.
    #[getter]
    fn attenuation(&self) -> f32 {
        self.attenuation
    }

    #[setter]
    fn set_attenuation(&mut self, py: Python<'_>, attenuation: f32) -> PyResult<()> {
        let mode = self.mode(py)?;
        self.set_mode_impl(py, mode, attenuation, self.threshold)
    }

    /// The surface value (data units) in `"iso"` mode.
    #[getter]
    fn threshold(&self) -> f64 {
        self.threshold
    }

    #[setter]
    fn set_threshold(&mut self, py: Python<'_>, threshold: f64) -> PyResult<()> {
        let mode = self.mode(py)?;
        self.set_mode_impl(py, mode, self.attenuation, threshold)
    }

    /// Contrast limits in use.
    #[getter]
    fn clim(&self, py: Python<'_>) -> PyResult<(f64, f64)> {
        self.slot.read(py, |v| {
            let [a, b] = v.effective_clim();
            (a, b)
        })
    }

    #[setter]
    fn set_clim(&mut self, py: Python<'_>, clim: (f64, f64)) -> PyResult<()> {
        let (lo, hi) = settings::clim(clim)?;
        self.slot
            .write(py, move |v| v.set_clim(lo, hi))?
            .map_err(render_error)
    }

    /// Gamma applied after normalization.
    #[getter]
    fn gamma(&self, py: Python<'_>) -> PyResult<f32> {
        self.slot.read(py, |v| v.gamma())
    }

    /// The colormap's name; set a name or a table.
    #[getter]
    fn colormap(&self, py: Python<'_>) -> PyResult<String> {
        self.slot.read(py, |v| v.colormap().name().to_string())
    }

    #[setter]
    fn set_colormap(&mut self, py: Python<'_>, colormap: &Bound<'_, PyAny>) -> PyResult<()> {
        let colormap = settings::colormap(colormap)?;
        self.slot.write(py, move |v| v.set_colormap(colormap))
    }

    /// Ray step in voxels, or `None` for the automatic step (the default: about one sample
    /// per voxel along each ray, from the volume's shape and the ray's direction).
    #[getter]
    fn step(&self, py: Python<'_>) -> PyResult<Option<f32>> {
        self.slot
            .read(py, |v| (!v.is_auto_step()).then(|| v.step()))
    }

    #[setter]
    fn set_step(&mut self, py: Python<'_>, step: Option<f32>) -> PyResult<()> {
        match step {
            None => self.slot.write(py, |v| v.set_auto_step()),
            Some(step) => {
                let step = settings::positive("step", step)?;
                self.slot
                    .write(py, move |v| v.set_step(step))?
                    .map_err(render_error)
            }
        }
    }

    /// `"nearest"` or `"linear"`.
    #[getter]
    fn interpolation(&self, py: Python<'_>) -> PyResult<&'static str> {
        self.slot
            .read(py, |v| settings::interpolation_name(v.interpolation()))
    }

    /// Opacity in `[0, 1]`.
    #[getter]
    fn opacity(&self, py: Python<'_>) -> PyResult<f32> {
        self.slot.read(py, |v| v.opacity())
    }

    fn __repr__(&self, py: Python<'_>) -> PyResult<String> {
        self.slot.read(py, |v| format!("{:?}", v))
    }
}

impl PyVolume {
    fn set_mode_impl(
        &mut self,
        py: Python<'_>,
        mode: &str,
        attenuation: f32,
        threshold: f64,
    ) -> PyResult<()> {
        settings::positive("attenuation", attenuation)?;
        if !threshold.is_finite() {
            return Err(pyo3::exceptions::PyValueError::new_err(format!(
                "iso threshold {threshold} must be finite"
            )));
        }
        let mode = settings::volume_mode(mode, attenuation, threshold)?;
        self.slot
            .write(py, move |v| v.set_mode(mode))?
            .map_err(render_error)?;
        self.attenuation = attenuation;
        self.threshold = threshold;
        Ok(())
    }
}

/// A triangle mesh whose every attribute is a source (or a numpy array, wrapped by
/// reference: `(n, 3)` positions, `(m,)` or `(m, 3)` indices, ...).
#[pyclass(name = "Mesh", module = "sluice")]
pub struct PyMesh {
    pub(crate) slot: Slot<Mesh>,
    /// The attribute objects, kept so that properties return them.
    positions: Py<PyAny>,
}

#[pymethods]
impl PyMesh {
    #[new]
    #[pyo3(signature = (positions, *, indices = None, normals = None, color = None, vertex_colors = None, scalars = None, texcoords = None, texture = None, colormap = None, clim = None, shading = "smooth", wireframe = None, light_direction = None, ambient = None, opacity = 1.0))]
    #[allow(clippy::too_many_arguments)]
    fn new(
        positions: &Bound<'_, PyAny>,
        indices: Option<&Bound<'_, PyAny>>,
        normals: Option<&Bound<'_, PyAny>>,
        color: Option<[f32; 4]>,
        vertex_colors: Option<&Bound<'_, PyAny>>,
        scalars: Option<&Bound<'_, PyAny>>,
        texcoords: Option<&Bound<'_, PyAny>>,
        texture: Option<&Bound<'_, PyAny>>,
        colormap: Option<&Bound<'_, PyAny>>,
        clim: Option<(f64, f64)>,
        shading: &str,
        wireframe: Option<[f32; 4]>,
        light_direction: Option<[f32; 3]>,
        ambient: Option<f32>,
        opacity: f32,
    ) -> PyResult<Self> {
        let attribute = |o: &Bound<'_, PyAny>| shared_source(o, ArrayAxes::Attribute);
        let (shared, object) = attribute(positions)?;
        let mut mesh = Mesh::new(shared)
            .with_shading(settings::shading(shading)?)
            .with_opacity(settings::unit("opacity", opacity)?)
            .map_err(render_error)?;
        if let Some(i) = indices {
            mesh = mesh.with_indices(attribute(i)?.0);
        }
        if let Some(n) = normals {
            mesh = mesh.with_normals(attribute(n)?.0);
        }
        if let Some(c) = color {
            mesh = mesh.with_color(c);
        }
        if let Some(c) = vertex_colors {
            mesh = mesh.with_vertex_colors(attribute(c)?.0);
        }
        if let Some(s) = scalars {
            mesh = mesh.with_scalars(attribute(s)?.0);
        }
        match (texcoords, texture) {
            (Some(t), Some(image)) => {
                let (image, _) = shared_source(image, ArrayAxes::Image)?;
                mesh = mesh.with_texture(attribute(t)?.0, image);
            }
            (None, None) => {}
            _ => {
                return Err(pyo3::exceptions::PyValueError::new_err(
                    "a textured mesh needs both texcoords and texture",
                ))
            }
        }
        if let Some(c) = colormap {
            mesh = mesh.with_colormap(settings::colormap(c)?);
        }
        if let Some(c) = clim {
            let (lo, hi) = settings::clim(c)?;
            mesh = mesh.with_clim(lo, hi).map_err(render_error)?;
        }
        if let Some(w) = wireframe {
            mesh = mesh.with_wireframe(w);
        }
        if let Some(d) = light_direction {
            mesh = mesh.with_light_direction(d);
        }
        if let Some(a) = ambient {
            mesh = mesh.with_ambient(settings::unit("ambient", a)?);
        }
        Ok(PyMesh {
            slot: Slot::Free(mesh),
            positions: object,
        })
    }

    /// The positions source object.
    #[getter]
    fn positions(&self, py: Python<'_>) -> Py<PyAny> {
        self.positions.clone_ref(py)
    }

    /// Contrast limits for scalars.
    #[getter]
    fn clim(&self, py: Python<'_>) -> PyResult<(f64, f64)> {
        self.slot.read(py, |v| {
            let [a, b] = v.effective_clim();
            (a, b)
        })
    }

    #[setter]
    fn set_clim(&mut self, py: Python<'_>, clim: (f64, f64)) -> PyResult<()> {
        let (lo, hi) = settings::clim(clim)?;
        self.slot
            .write(py, move |v| v.set_clim(lo, hi))?
            .map_err(render_error)
    }

    /// The colormap's name; set a name or a table.
    #[getter]
    fn colormap(&self, py: Python<'_>) -> PyResult<String> {
        self.slot.read(py, |v| v.colormap().name().to_string())
    }

    #[setter]
    fn set_colormap(&mut self, py: Python<'_>, colormap: &Bound<'_, PyAny>) -> PyResult<()> {
        let colormap = settings::colormap(colormap)?;
        self.slot.write(py, move |v| v.set_colormap(colormap))
    }

    /// `"flat"`, `"smooth"` or `"unlit"`.
    #[getter]
    fn shading(&self, py: Python<'_>) -> PyResult<&'static str> {
        self.slot.read(py, |v| settings::shading_name(v.shading()))
    }

    #[setter]
    fn set_shading(&mut self, py: Python<'_>, shading: &str) -> PyResult<()> {
        let shading = settings::shading(shading)?;
        self.slot.write(py, move |v| v.set_shading(shading))
    }

    /// RGBA of the wireframe drawn over the triangles, or `None`.
    #[getter]
    fn wireframe(&self, py: Python<'_>) -> PyResult<Option<[f32; 4]>> {
        self.slot.read(py, |v| v.wireframe())
    }

    #[setter]
    fn set_wireframe(&mut self, py: Python<'_>, rgba: Option<[f32; 4]>) -> PyResult<()> {
        self.slot.write(py, move |v| v.set_wireframe(rgba))
    }

    /// The uniform colour, if the mesh has one.
    #[getter]
    fn color(&self, py: Python<'_>) -> PyResult<Option<[f32; 4]>> {
        self.slot.read(py, |v| v.color())
    }

    /// Opacity in `[0, 1]`.
    #[getter]
    fn opacity(&self, py: Python<'_>) -> PyResult<f32> {
        self.slot.read(py, |v| v.opacity())
    }

    fn __repr__(&self, py: Python<'_>) -> PyResult<String> {
        self.slot.read(py, |v| format!("{:?}", v))
    }
}

/// `policy` with another bias (its lock kept).
fn with_bias(policy: LevelPolicy, bias: i32) -> LevelPolicy {
    LevelPolicy { bias, ..policy }
}

/// `policy` with another lock (its bias kept).
fn with_lock(policy: LevelPolicy, lock: Option<usize>) -> LevelPolicy {
    LevelPolicy { lock, ..policy }
}
