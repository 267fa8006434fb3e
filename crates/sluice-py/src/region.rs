//! numpy-style keys (`src[y0:y1, x0:x1]`, `numpy.s_[...]`) as sluice regions.

use pyo3::exceptions::{PyTypeError, PyValueError};
use pyo3::prelude::*;
use pyo3::types::{PySlice, PyTuple};
use sluice_core::{Region, Shape};

/// The spatial region a key selects in `shape`: one entry per leading spatial axis (missing
/// trailing axes are whole), each a slice with step 1 or an integer; `extra` more entries are
/// allowed after the spatial ones (a channel index) and do not change the region.
///
/// Unlike numpy, a slice reaching past the end is an error naming the region and the shape
/// rather than being clipped: a write that lands elsewhere than asked is a bug.
pub fn key_region(key: &Bound<'_, PyAny>, shape: &Shape, extra: usize) -> PyResult<Region> {
    let dims = shape.dims();
    let entries: Vec<Bound<'_, PyAny>> = match key.cast::<PyTuple>() {
        Ok(t) => t.iter().collect(),
        Err(_) => vec![key.clone()],
    };
    if entries.len() > dims.len() + extra {
        return Err(PyValueError::new_err(format!(
            "index {} has {} entries; the source has shape {:?} ({} spatial axes{})",
            key.repr()?,
            entries.len(),
            dims,
            dims.len(),
            if extra > 0 { " and a channel axis" } else { "" }
        )));
    }
    let mut origin = vec![0usize; dims.len()];
    let mut size = dims.to_vec();
    for (axis, (entry, &len)) in entries.iter().zip(dims).enumerate() {
        let (start, stop) = axis_range(entry, len, axis, dims)?;
        origin[axis] = start;
        size[axis] = stop - start;
    }
    Region::new(&origin, &size).map_err(crate::errors::source_error)
}

/// `start..stop` of one axis of length `len`.
fn axis_range(
    entry: &Bound<'_, PyAny>,
    len: usize,
    axis: usize,
    dims: &[usize],
) -> PyResult<(usize, usize)> {
    let resolve = |i: isize| -> Option<usize> {
        if i < 0 {
            len.checked_sub(i.unsigned_abs())
        } else {
            Some(i as usize)
        }
    };
    if let Ok(slice) = entry.cast::<PySlice>() {
        let step: Option<isize> = slice.getattr("step")?.extract()?;
        if step.is_some_and(|s| s != 1) {
            return Err(PyValueError::new_err(format!(
                "slice {} on axis {axis} has step {}; sluice regions take step 1",
                entry.repr()?,
                step.unwrap_or(1)
            )));
        }
        let start: Option<isize> = slice.getattr("start")?.extract()?;
        let stop: Option<isize> = slice.getattr("stop")?.extract()?;
        let s = start.map_or(Some(0), resolve);
        let e = stop.map_or(Some(len), resolve);
        return match (s, e) {
            (Some(s), Some(e)) if s < e && e <= len => Ok((s, e)),
            _ => Err(PyValueError::new_err(format!(
                "slice {} on axis {axis} selects {}..{} of an axis of length {len} (shape {dims:?}): it must be non-empty and inside",
                entry.repr()?,
                fmt_bound(start, 0),
                fmt_bound(stop, len as isize),
            ))),
        };
    }
    if let Ok(i) = entry.extract::<isize>() {
        return match resolve(i) {
            Some(s) if s < len => Ok((s, s + 1)),
            _ => Err(PyValueError::new_err(format!(
                "index {i} on axis {axis} is out of bounds of an axis of length {len} (shape {dims:?})"
            ))),
        };
    }
    Err(PyTypeError::new_err(format!(
        "index entries must be integers or slices, got {} on axis {axis}",
        entry.get_type().name()?
    )))
}

fn fmt_bound(value: Option<isize>, default: isize) -> isize {
    value.unwrap_or(default)
}
