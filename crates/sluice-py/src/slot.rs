//! Where a Python visual object's Rust visual lives: with the object until it is added to a
//! scene, then in that scene (the renderer keeps GPU state per visual identity, and a Rust
//! visual's clone is a new visual, so the scene must own the one visual the object names).

use std::sync::Arc;

use parking_lot::Mutex;
use pyo3::prelude::*;
use sluice_render::{Image, Mesh, NodeId, Scene, Visual, Volume};

use crate::errors::{guard, InternalError};

/// A scene shared by its Python object, the visuals in it, and renderers drawing it. Locked
/// only with the GIL released (see [`crate::renderer`]).
pub type SharedScene = Arc<Mutex<Scene>>;

/// A visual kind the scene can hand back by node.
pub trait SceneVisual: Into<Visual> + Clone + Send + Sync + 'static {
    /// The visual at `node`, if it is of this kind.
    fn get(scene: &Scene, node: NodeId) -> Option<&Self>;
    /// The visual at `node`, to change it.
    fn get_mut(scene: &mut Scene, node: NodeId) -> Option<&mut Self>;
}

impl SceneVisual for Image {
    fn get(scene: &Scene, node: NodeId) -> Option<&Self> {
        scene.image(node)
    }
    fn get_mut(scene: &mut Scene, node: NodeId) -> Option<&mut Self> {
        scene.image_mut(node)
    }
}

impl SceneVisual for Volume {
    fn get(scene: &Scene, node: NodeId) -> Option<&Self> {
        match scene.visual(node) {
            Some(Visual::Volume(v)) => Some(v),
            _ => None,
        }
    }
    fn get_mut(scene: &mut Scene, node: NodeId) -> Option<&mut Self> {
        scene.volume_mut(node)
    }
}

impl SceneVisual for Mesh {
    fn get(scene: &Scene, node: NodeId) -> Option<&Self> {
        match scene.visual(node) {
            Some(Visual::Mesh(m)) => Some(m),
            _ => None,
        }
    }
    fn get_mut(scene: &mut Scene, node: NodeId) -> Option<&mut Self> {
        scene.mesh_mut(node)
    }
}

/// The Rust visual of a Python visual object.
pub enum Slot<V> {
    /// Not in a scene yet: the object holds it.
    Free(V),
    /// Moved into `scene` at `node`.
    InScene {
        /// The scene holding it.
        scene: SharedScene,
        /// Its node.
        node: NodeId,
    },
}

impl<V: SceneVisual> Slot<V> {
    /// Runs `f` with the visual.
    pub fn read<R: Send>(&self, py: Python<'_>, f: impl FnOnce(&V) -> R + Send) -> PyResult<R> {
        match self {
            Slot::Free(v) => Ok(f(v)),
            Slot::InScene { scene, node } => py.detach(|| {
                guard(|| {
                    let s = scene.lock();
                    V::get(&s, *node).map(f).ok_or_else(lost)
                })
            }),
        }
    }

    /// Runs `f` with the visual, to change it.
    pub fn write<R: Send>(
        &mut self,
        py: Python<'_>,
        f: impl FnOnce(&mut V) -> R + Send,
    ) -> PyResult<R> {
        match self {
            Slot::Free(v) => Ok(f(v)),
            Slot::InScene { scene, node } => py.detach(|| {
                guard(|| {
                    let mut s = scene.lock();
                    V::get_mut(&mut s, *node).map(f).ok_or_else(lost)
                })
            }),
        }
    }

    /// Moves the visual into `scene` with `add`, which returns its node.
    pub fn attach(
        &mut self,
        py: Python<'_>,
        scene: &SharedScene,
        add: impl FnOnce(&mut Scene, Visual) -> NodeId + Send,
    ) -> PyResult<NodeId> {
        let Slot::Free(v) = self else {
            return Err(pyo3::exceptions::PyValueError::new_err(
                "this visual is already in a scene; make another visual of the same source to show it again",
            ));
        };
        let visual: Visual = v.clone().into();
        let node = py.detach(|| add(&mut scene.lock(), visual));
        *self = Slot::InScene {
            scene: scene.clone(),
            node,
        };
        Ok(node)
    }
}

fn lost() -> PyErr {
    InternalError::new_err("internal error in sluice: a visual's scene node is gone")
}
