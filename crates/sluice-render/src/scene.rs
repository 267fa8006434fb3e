//! The scene graph: nodes with parent/child transforms, some holding visuals.

use glam::Mat4;

use crate::visual::{Image, Mesh, Visual, Volume};

/// A node of a [`Scene`].
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct NodeId(usize);

#[derive(Debug)]
struct Node {
    parent: Option<NodeId>,
    children: Vec<NodeId>,
    transform: Mat4,
    visual: Option<Visual>,
    visible: bool,
}

/// A tree of nodes. Each node has a local transform (applied after its parent's) and may hold
/// a visual; visuals are drawn in tree order (parents before children, siblings in insertion
/// order), later ones over earlier ones.
#[derive(Debug)]
pub struct Scene {
    nodes: Vec<Option<Node>>,
    roots: Vec<NodeId>,
    background: [f32; 4],
}

impl Default for Scene {
    fn default() -> Self {
        Scene::new()
    }
}

impl Scene {
    /// An empty scene on a black background.
    pub fn new() -> Self {
        Scene {
            nodes: Vec::new(),
            roots: Vec::new(),
            background: [0.0, 0.0, 0.0, 1.0],
        }
    }

    /// Sets the background colour (RGBA in `[0, 1]`).
    pub fn set_background(&mut self, rgba: [f32; 4]) {
        self.background = rgba;
    }

    /// The background colour.
    pub fn background(&self) -> [f32; 4] {
        self.background
    }

    fn insert(&mut self, parent: Option<NodeId>, visual: Option<Visual>) -> NodeId {
        let id = NodeId(self.nodes.len());
        self.nodes.push(Some(Node {
            parent,
            children: Vec::new(),
            transform: Mat4::IDENTITY,
            visual,
            visible: true,
        }));
        match parent.and_then(|p| self.node_mut(p)) {
            Some(p) => p.children.push(id),
            None => self.roots.push(id),
        }
        id
    }

    fn node(&self, id: NodeId) -> Option<&Node> {
        self.nodes.get(id.0).and_then(Option::as_ref)
    }

    fn node_mut(&mut self, id: NodeId) -> Option<&mut Node> {
        self.nodes.get_mut(id.0).and_then(Option::as_mut)
    }

    /// Adds a visual at the root.
    pub fn add(&mut self, visual: impl Into<Visual>) -> NodeId {
        self.insert(None, Some(visual.into()))
    }

    /// Adds a visual under `parent` (at the root if `parent` was removed).
    pub fn add_child(&mut self, parent: NodeId, visual: impl Into<Visual>) -> NodeId {
        let parent = self.node(parent).map(|_| parent);
        self.insert(parent, Some(visual.into()))
    }

    /// Adds an empty node (a group) under `parent`, or at the root.
    pub fn add_group(&mut self, parent: Option<NodeId>) -> NodeId {
        let parent = parent.filter(|&p| self.node(p).is_some());
        self.insert(parent, None)
    }

    /// Sets a node's local transform. Returns false if the node does not exist.
    pub fn set_transform(&mut self, id: NodeId, transform: Mat4) -> bool {
        self.node_mut(id).map(|n| n.transform = transform).is_some()
    }

    /// A node's local transform.
    pub fn transform(&self, id: NodeId) -> Option<Mat4> {
        self.node(id).map(|n| n.transform)
    }

    /// A node's transform to world coordinates (its ancestors' and its own).
    pub fn world_transform(&self, id: NodeId) -> Option<Mat4> {
        let mut node = self.node(id)?;
        let mut m = node.transform;
        while let Some(parent) = node.parent.and_then(|p| self.node(p)) {
            m = parent.transform * m;
            node = parent;
        }
        Some(m)
    }

    /// Shows or hides a node and its descendants.
    pub fn set_visible(&mut self, id: NodeId, visible: bool) -> bool {
        self.node_mut(id).map(|n| n.visible = visible).is_some()
    }

    /// The visual at a node.
    pub fn visual(&self, id: NodeId) -> Option<&Visual> {
        self.node(id).and_then(|n| n.visual.as_ref())
    }

    /// The visual at a node, to change it.
    pub fn visual_mut(&mut self, id: NodeId) -> Option<&mut Visual> {
        self.node_mut(id).and_then(|n| n.visual.as_mut())
    }

    /// The image at a node, if the node holds one.
    pub fn image(&self, id: NodeId) -> Option<&Image> {
        match self.visual(id) {
            Some(Visual::Image(image)) => Some(image),
            _ => None,
        }
    }

    /// The image at a node, to change it.
    pub fn image_mut(&mut self, id: NodeId) -> Option<&mut Image> {
        match self.visual_mut(id) {
            Some(Visual::Image(image)) => Some(image),
            _ => None,
        }
    }

    /// The volume at a node, to change it.
    pub fn volume_mut(&mut self, id: NodeId) -> Option<&mut Volume> {
        match self.visual_mut(id) {
            Some(Visual::Volume(volume)) => Some(volume),
            _ => None,
        }
    }

    /// The mesh at a node, to change it.
    pub fn mesh_mut(&mut self, id: NodeId) -> Option<&mut Mesh> {
        match self.visual_mut(id) {
            Some(Visual::Mesh(mesh)) => Some(mesh),
            _ => None,
        }
    }

    /// Removes a node and its descendants, dropping their visuals. Returns false if it did
    /// not exist.
    pub fn remove(&mut self, id: NodeId) -> bool {
        let Some(node) = self.nodes.get_mut(id.0).and_then(Option::take) else {
            return false;
        };
        match node.parent.and_then(|p| self.node_mut(p)) {
            Some(p) => p.children.retain(|&c| c != id),
            None => self.roots.retain(|&r| r != id),
        }
        for child in node.children {
            self.remove(child);
        }
        true
    }

    /// The siblings of `id` (its parent's children, or the roots), in drawing order.
    fn siblings_mut(&mut self, id: NodeId) -> Option<&mut Vec<NodeId>> {
        match self.node(id)?.parent {
            Some(p) => self.node_mut(p).map(|n| &mut n.children),
            None => Some(&mut self.roots),
        }
    }

    /// The position of `id` among its siblings (0 is drawn first, under the others).
    pub fn order(&self, id: NodeId) -> Option<usize> {
        let siblings = match self.node(id)?.parent {
            Some(p) => &self.node(p)?.children,
            None => &self.roots,
        };
        siblings.iter().position(|&c| c == id)
    }

    /// Moves `id` to position `index` among its siblings (0: drawn first, under the others;
    /// an index past the end moves it last, over the others). Its children move with it. The
    /// next frame redraws what the new order changes. Returns false if `id` does not exist.
    pub fn set_order(&mut self, id: NodeId, index: usize) -> bool {
        let Some(siblings) = self.siblings_mut(id) else {
            return false;
        };
        let Some(at) = siblings.iter().position(|&c| c == id) else {
            return false;
        };
        siblings.remove(at);
        let index = index.min(siblings.len());
        siblings.insert(index, id);
        true
    }

    /// Visible visuals in drawing order, with their world transforms.
    pub fn draw_list(&self) -> Vec<(&Visual, Mat4)> {
        let mut out = Vec::new();
        let mut stack: Vec<(NodeId, Mat4)> = self
            .roots
            .iter()
            .rev()
            .map(|&r| (r, Mat4::IDENTITY))
            .collect();
        while let Some((id, parent)) = stack.pop() {
            let Some(node) = self.node(id) else { continue };
            if !node.visible {
                continue;
            }
            let world = parent * node.transform;
            if let Some(v) = &node.visual {
                out.push((v, world));
            }
            stack.extend(node.children.iter().rev().map(|&c| (c, world)));
        }
        out
    }
}
