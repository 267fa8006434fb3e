//! `sluice.Scene`: the Rust scene, shared with the visuals in it and the renderers drawing
//! it.
//!
//! Adding a visual moves its Rust visual into the scene; the Python object then changes it
//! there, so `image.clim = ...` after adding shows at the next render and the renderer keeps
//! the visual's GPU state (and its source's texture) from frame to frame.

use glam::Mat4;
use parking_lot::Mutex;
use pyo3::exceptions::{PyIndexError, PyTypeError, PyValueError};
use pyo3::prelude::*;
use sluice_render::{NodeId, Scene, Visual};

use crate::errors::guard;
use crate::slot::{SharedScene, Slot};
use crate::visuals::{PyImage, PyMesh, PyVolume};

struct Node {
    id: NodeId,
    parent: Option<usize>,
    /// The Python visual object at this node, if any.
    visual: Option<Py<PyAny>>,
}

/// A tree of nodes, each with a local transform (applied after its parent's), some holding a
/// visual. Visuals are drawn in tree order (parents before children, siblings in the order
/// added), later ones over earlier ones.
#[pyclass(name = "Scene", module = "sluice", frozen)]
pub struct PyScene {
    pub(crate) inner: SharedScene,
    nodes: Mutex<Vec<Option<Node>>>,
}

#[pymethods]
impl PyScene {
    #[new]
    #[pyo3(signature = (*, background = (0.0, 0.0, 0.0, 1.0)))]
    fn new(background: (f32, f32, f32, f32)) -> Self {
        let mut scene = Scene::new();
        scene.set_background(background.into());
        PyScene {
            inner: std::sync::Arc::new(Mutex::new(scene)),
            nodes: Mutex::new(Vec::new()),
        }
    }

    /// Adds a visual (an `Image`, `Volume` or `Mesh`) under `parent` (a node id; the root by
    /// default), with an optional 4x4 `transform`; returns its node id. A visual is in at most
    /// one scene.
    #[pyo3(signature = (visual, *, parent = None, transform = None))]
    fn add(
        &self,
        visual: &Bound<'_, PyAny>,
        parent: Option<usize>,
        transform: Option<&Bound<'_, PyAny>>,
    ) -> PyResult<usize> {
        let py = visual.py();
        let transform = transform.map(matrix).transpose()?;
        let parent_id = self.parent_id(parent)?;
        let add = move |scene: &mut Scene, v: Visual| {
            let id = match parent_id {
                Some(p) => scene.add_child(p, v),
                None => scene.add(v),
            };
            if let Some(m) = transform {
                scene.set_transform(id, m);
            }
            id
        };
        let id = if let Ok(v) = visual.cast::<PyImage>() {
            v.borrow_mut().slot.attach(py, &self.inner, add)?
        } else if let Ok(v) = visual.cast::<PyVolume>() {
            v.borrow_mut().slot.attach(py, &self.inner, add)?
        } else if let Ok(v) = visual.cast::<PyMesh>() {
            v.borrow_mut().slot.attach(py, &self.inner, add)?
        } else {
            return Err(PyTypeError::new_err(format!(
                "Scene.add takes an Image, Volume or Mesh, got {}",
                visual.get_type().name()?
            )));
        };
        Ok(self.push(id, parent, Some(visual.clone().unbind())))
    }

    /// Adds an empty node (to group children under one transform); returns its id.
    #[pyo3(signature = (*, parent = None, transform = None))]
    fn add_group(
        &self,
        py: Python<'_>,
        parent: Option<usize>,
        transform: Option<&Bound<'_, PyAny>>,
    ) -> PyResult<usize> {
        let transform = transform.map(matrix).transpose()?;
        let parent_id = self.parent_id(parent)?;
        let id = self.with(py, move |s| {
            let id = s.add_group(parent_id);
            if let Some(m) = transform {
                s.set_transform(id, m);
            }
            id
        })?;
        Ok(self.push(id, parent, None))
    }

    /// Sets a node's local transform: a 4x4 matrix `m` acting on column vectors
    /// (`world = m @ [x, y, z, 1]`).
    fn set_transform(
        &self,
        py: Python<'_>,
        node: usize,
        transform: &Bound<'_, PyAny>,
    ) -> PyResult<()> {
        let m = matrix(transform)?;
        let id = self.id(node)?;
        self.with(py, move |s| {
            s.set_transform(id, m);
        })
    }

    /// A node's local transform as a 4x4 nested list (row-major, acting on column vectors).
    fn transform(&self, py: Python<'_>, node: usize) -> PyResult<[[f32; 4]; 4]> {
        let id = self.id(node)?;
        let m = self.with(py, move |s| s.transform(id).unwrap_or(Mat4::IDENTITY))?;
        Ok(m.transpose().to_cols_array_2d())
    }

    /// Moves a node to `(x, y, z)`: its transform becomes that translation.
    #[pyo3(signature = (node, x, y, z = 0.0))]
    fn set_position(&self, py: Python<'_>, node: usize, x: f32, y: f32, z: f32) -> PyResult<()> {
        let id = self.id(node)?;
        self.with(py, move |s| {
            s.set_transform(id, Mat4::from_translation(glam::Vec3::new(x, y, z)));
        })
    }

    /// Shows or hides a node and its children.
    fn set_visible(&self, py: Python<'_>, node: usize, visible: bool) -> PyResult<()> {
        let id = self.id(node)?;
        self.with(py, move |s| {
            s.set_visible(id, visible);
        })
    }

    /// Removes a node and its children. Their visual objects keep their settings and may be
    /// added again.
    fn remove(&self, py: Python<'_>, node: usize) -> PyResult<()> {
        self.id(node)?;
        let doomed: Vec<(NodeId, Option<Py<PyAny>>)> = {
            let mut nodes = self.nodes.lock();
            let mut doomed = vec![node];
            let mut i = 0;
            while i < doomed.len() {
                let n = doomed[i];
                doomed.extend(nodes.iter().enumerate().filter_map(|(c, entry)| {
                    entry.as_ref().filter(|e| e.parent == Some(n)).map(|_| c)
                }));
                i += 1;
            }
            doomed
                .into_iter()
                .filter_map(|i| nodes[i].take())
                .map(|n| (n.id, n.visual))
                .collect()
        };
        // Give each removed visual object its visual back (same settings), then drop the
        // nodes from the Rust scene.
        let ids: Vec<NodeId> = doomed.iter().map(|(id, _)| *id).collect();
        let copies: Vec<Option<Visual>> = self.with(py, move |s| {
            ids.iter().map(|&id| s.visual(id).cloned()).collect()
        })?;
        for ((_, object), copy) in doomed.iter().zip(copies) {
            let (Some(object), Some(copy)) = (object, copy) else {
                continue;
            };
            let object = object.bind(py);
            match copy {
                Visual::Image(v) => {
                    if let Ok(o) = object.cast::<PyImage>() {
                        o.borrow_mut().slot = Slot::Free(v);
                    }
                }
                Visual::Volume(v) => {
                    if let Ok(o) = object.cast::<PyVolume>() {
                        o.borrow_mut().slot = Slot::Free(v);
                    }
                }
                Visual::Mesh(v) => {
                    if let Ok(o) = object.cast::<PyMesh>() {
                        o.borrow_mut().slot = Slot::Free(v);
                    }
                }
                _ => {}
            }
        }
        let top = doomed.first().map(|(id, _)| *id);
        self.with(py, move |s| {
            if let Some(id) = top {
                s.remove(id);
            }
        })
    }

    /// The background colour (RGBA in [0, 1]).
    #[getter]
    fn background(&self, py: Python<'_>) -> PyResult<(f32, f32, f32, f32)> {
        self.with(py, |s| s.background().into())
    }

    #[setter]
    fn set_background(&self, py: Python<'_>, rgba: (f32, f32, f32, f32)) -> PyResult<()> {
        self.with(py, move |s| s.set_background(rgba.into()))
    }

    /// The visual objects in the scene, in the order added.
    #[getter]
    fn visuals(&self, py: Python<'_>) -> Vec<Py<PyAny>> {
        self.nodes
            .lock()
            .iter()
            .flatten()
            .filter_map(|n| n.visual.as_ref().map(|v| v.clone_ref(py)))
            .collect()
    }

    fn __len__(&self) -> usize {
        self.nodes.lock().iter().flatten().count()
    }
}

impl PyScene {
    /// Runs `f` on the Rust scene with the GIL released.
    fn with<R: Send>(&self, py: Python<'_>, f: impl FnOnce(&mut Scene) -> R + Send) -> PyResult<R> {
        py.detach(|| guard(|| Ok(f(&mut self.inner.lock()))))
    }

    fn id(&self, node: usize) -> PyResult<NodeId> {
        let nodes = self.nodes.lock();
        nodes
            .get(node)
            .and_then(Option::as_ref)
            .map(|n| n.id)
            .ok_or_else(|| {
                PyIndexError::new_err(format!(
                    "node {node} is not in the scene ({} node ids given out; removed nodes are gone)",
                    nodes.len()
                ))
            })
    }

    fn parent_id(&self, parent: Option<usize>) -> PyResult<Option<NodeId>> {
        parent.map(|p| self.id(p)).transpose()
    }

    fn push(&self, id: NodeId, parent: Option<usize>, visual: Option<Py<PyAny>>) -> usize {
        let mut nodes = self.nodes.lock();
        nodes.push(Some(Node { id, parent, visual }));
        nodes.len() - 1
    }
}

fn matrix(m: &Bound<'_, PyAny>) -> PyResult<Mat4> {
    let np = m.py().import("numpy")?;
    let a = np.call_method1("asarray", (m, "float64"))?;
    let shape: Vec<usize> = a.getattr("shape")?.extract()?;
    if shape != [4, 4] {
        return Err(PyValueError::new_err(format!(
            "a transform is a 4x4 matrix; got shape {shape:?}"
        )));
    }
    let rows: Vec<Vec<f64>> = a.call_method0("tolist")?.extract()?;
    if rows.iter().flatten().any(|v| !v.is_finite()) {
        return Err(PyValueError::new_err(
            "a transform holds finite numbers only",
        ));
    }
    let mut cols = [[0.0f32; 4]; 4];
    for (r, row) in rows.iter().enumerate() {
        for (c, v) in row.iter().enumerate() {
            cols[c][r] = *v as f32;
        }
    }
    Ok(Mat4::from_cols_array_2d(&cols))
}
