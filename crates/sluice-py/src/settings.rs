//! Display settings from Python values: colormaps, interpolation, slices, modes, shading.

use numpy::{PyUntypedArray, PyUntypedArrayMethods};
use pyo3::exceptions::{PyTypeError, PyValueError};
use pyo3::prelude::*;
use pyo3::types::PyString;
use sluice_render::{Colormap, Interpolation, Shading, Slice, VolumeMode};

use crate::errors::render_error;

/// A colormap from a name (`"viridis"`, ...) or a table: an `(n, 3)` or `(n, 4)` array of
/// uint8, or of floats in `[0, 1]`, low values first.
pub fn colormap(value: &Bound<'_, PyAny>) -> PyResult<Colormap> {
    if let Ok(name) = value.cast::<PyString>() {
        let name = name.to_str()?;
        return Colormap::builtins()
            .into_iter()
            .find(|c| c.name().eq_ignore_ascii_case(name))
            .ok_or_else(|| {
                let names: Vec<String> = Colormap::builtins()
                    .iter()
                    .map(|c| c.name().to_string())
                    .collect();
                PyValueError::new_err(format!(
                    "unknown colormap {name:?}; built-in: {}, or give an (n, 3) or (n, 4) table",
                    names.join(", ")
                ))
            });
    }
    let py = value.py();
    let np = py.import("numpy")?;
    let table = np
        .call_method1("asarray", (value,))
        .map_err(|_| PyTypeError::new_err("a colormap is a name or an (n, 3) / (n, 4) table"))?
        .cast_into::<PyUntypedArray>()?;
    let shape = table.shape().to_vec();
    if shape.len() != 2 || !matches!(shape[1], 3 | 4) || shape[0] == 0 {
        return Err(PyValueError::new_err(format!(
            "a colormap table has shape (n, 3) or (n, 4) with n >= 1; got {shape:?}"
        )));
    }
    let kind: String = table.getattr("dtype")?.getattr("kind")?.extract()?;
    let bytes = match kind.as_str() {
        "u" | "i" => {
            let (lo, hi): (i64, i64) = (
                table.call_method0("min")?.extract()?,
                table.call_method0("max")?.extract()?,
            );
            if lo < 0 || hi > 255 {
                return Err(PyValueError::new_err(format!(
                    "an integer colormap table holds 0 to 255; this one spans {lo} to {hi}"
                )));
            }
            table.call_method1("astype", ("uint8",))?
        }
        "f" => {
            let finite: bool = np
                .call_method1("isfinite", (&table,))?
                .call_method0("all")?
                .extract()?;
            if !finite {
                return Err(PyValueError::new_err(
                    "a float colormap table holds finite values in [0, 1]; this one has NaN or inf",
                ));
            }
            np.call_method1("clip", (&table, 0.0, 1.0))?
                .call_method1("__mul__", (255.0,))?
                .call_method0("round")?
                .call_method1("astype", ("uint8",))?
        }
        other => {
            return Err(PyTypeError::new_err(format!(
                "a colormap table holds integers or floats, not dtype kind {other:?}"
            )))
        }
    };
    let rows: Vec<Vec<u8>> = bytes.call_method0("tolist")?.extract()?;
    let entries: Vec<[u8; 4]> = rows
        .iter()
        .map(|r| [r[0], r[1], r[2], r.get(3).copied().unwrap_or(255)])
        .collect();
    Colormap::custom("custom", entries).map_err(render_error)
}

/// `"nearest"` or `"linear"`.
pub fn interpolation(name: &str) -> PyResult<Interpolation> {
    match name.to_ascii_lowercase().as_str() {
        "nearest" => Ok(Interpolation::Nearest),
        "linear" => Ok(Interpolation::Linear),
        _ => Err(PyValueError::new_err(format!(
            "unknown interpolation {name:?}; use \"nearest\" or \"linear\""
        ))),
    }
}

/// The name of an interpolation.
pub fn interpolation_name(i: Interpolation) -> &'static str {
    match i {
        Interpolation::Nearest => "nearest",
        Interpolation::Linear => "linear",
    }
}

/// A slice: `("z", i)`, `("y", i)`, `("x", i)` or `("oblique", origin, u, v, extent)`.
pub fn slice(value: &Bound<'_, PyAny>) -> PyResult<Slice> {
    let bad = || {
        PyValueError::new_err(format!(
            "a slice is (\"z\" | \"y\" | \"x\", index) or (\"oblique\", origin, u, v, extent); got {}",
            value.repr().map(|r| r.to_string()).unwrap_or_default()
        ))
    };
    let axis: String = value
        .get_item(0)
        .map_err(|_| bad())?
        .extract()
        .map_err(|_| bad())?;
    match axis.to_ascii_lowercase().as_str() {
        a @ ("z" | "y" | "x") => {
            let (_, index): (String, usize) = value.extract().map_err(|_| bad())?;
            Ok(match a {
                "z" => Slice::Z(index),
                "y" => Slice::Y(index),
                _ => Slice::X(index),
            })
        }
        "oblique" => {
            let (_, origin, u, v, extent): (String, [f32; 3], [f32; 3], [f32; 3], [f32; 2]) =
                value.extract().map_err(|_| bad())?;
            Ok(Slice::Oblique {
                origin,
                u,
                v,
                extent,
            })
        }
        _ => Err(bad()),
    }
}

/// A slice as the tuple [`slice`] takes.
pub fn slice_tuple(py: Python<'_>, s: Slice) -> PyResult<Py<PyAny>> {
    Ok(match s {
        Slice::Z(i) => ("z", i).into_pyobject(py)?.into_any().unbind(),
        Slice::Y(i) => ("y", i).into_pyobject(py)?.into_any().unbind(),
        Slice::X(i) => ("x", i).into_pyobject(py)?.into_any().unbind(),
        Slice::Oblique {
            origin,
            u,
            v,
            extent,
        } => ("oblique", origin, u, v, extent)
            .into_pyobject(py)?
            .into_any()
            .unbind(),
    })
}

/// A volume mode: `"mip"`, `"translucent"` (with `attenuation`) or `"iso"` (with
/// `threshold`).
pub fn volume_mode(name: &str, attenuation: f32, threshold: f64) -> PyResult<VolumeMode> {
    match name.to_ascii_lowercase().as_str() {
        "mip" => Ok(VolumeMode::Mip),
        "translucent" => Ok(VolumeMode::Translucent { attenuation }),
        "iso" => Ok(VolumeMode::Iso { threshold }),
        _ => Err(PyValueError::new_err(format!(
            "unknown volume mode {name:?}; use \"mip\", \"translucent\" or \"iso\""
        ))),
    }
}

/// `"flat"`, `"smooth"` or `"unlit"`.
pub fn shading(name: &str) -> PyResult<Shading> {
    match name.to_ascii_lowercase().as_str() {
        "flat" => Ok(Shading::Flat),
        "smooth" => Ok(Shading::Smooth),
        "unlit" => Ok(Shading::Unlit),
        _ => Err(PyValueError::new_err(format!(
            "unknown shading {name:?}; use \"flat\", \"smooth\" or \"unlit\""
        ))),
    }
}

/// The name of a shading.
pub fn shading_name(s: Shading) -> &'static str {
    match s {
        Shading::Flat => "flat",
        Shading::Smooth => "smooth",
        Shading::Unlit => "unlit",
    }
}

/// Contrast limits: two finite numbers, `lo != hi`.
pub fn clim(value: (f64, f64)) -> PyResult<(f64, f64)> {
    let (lo, hi) = value;
    if !lo.is_finite() || !hi.is_finite() || lo == hi {
        return Err(PyValueError::new_err(format!(
            "contrast limits ({lo}, {hi}) must be two different finite numbers"
        )));
    }
    Ok((lo, hi))
}

/// A number that must be finite and positive (gamma, step).
pub fn positive(name: &str, value: f32) -> PyResult<f32> {
    if !(value.is_finite() && value > 0.0) {
        return Err(PyValueError::new_err(format!(
            "{name} {value} must be a finite number above 0"
        )));
    }
    Ok(value)
}

/// An opacity in `[0, 1]`.
pub fn unit(name: &str, value: f32) -> PyResult<f32> {
    if !(0.0..=1.0).contains(&value) {
        return Err(PyValueError::new_err(format!(
            "{name} {value} must be in [0, 1]"
        )));
    }
    Ok(value)
}
