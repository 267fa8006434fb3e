//! Visuals: what a scene shows. They name sources and hold per-visual display state only
//! (contrast limits, colormap, interpolation); GPU resources belong to the renderer.

pub(crate) mod display;
mod image;
mod mesh;
mod volume;

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

pub use display::DisplaySettings;
pub(crate) use image::check_level_policy;
pub use image::{Image, Interpolation, Slice};
pub use mesh::{Mesh, Shading};
pub use volume::{Volume, VolumeMode, DEFAULT_DEPTH_SAMPLES};

/// A visual in a scene.
#[derive(Clone, Debug)]
#[non_exhaustive]
pub enum Visual {
    /// A 2-D image, or a plane of a 3-D source.
    Image(Image),
    /// A ray-marched 3-D source.
    Volume(Volume),
    /// A triangle mesh.
    Mesh(Mesh),
}

impl Visual {
    /// The colormap the visual looks its colours up in.
    pub(crate) fn colormap(&self) -> &crate::Colormap {
        match self {
            Visual::Image(image) => image.colormap(),
            Visual::Volume(volume) => volume.colormap(),
            Visual::Mesh(mesh) => mesh.colormap(),
        }
    }
}

impl From<Mesh> for Visual {
    fn from(mesh: Mesh) -> Self {
        Visual::Mesh(mesh)
    }
}

impl From<Volume> for Visual {
    fn from(volume: Volume) -> Self {
        Visual::Volume(volume)
    }
}

impl From<Image> for Visual {
    fn from(image: Image) -> Self {
        Visual::Image(image)
    }
}

/// Identity and liveness of one visual. The renderer keeps per-visual GPU state under the id
/// and watches the token through a `Weak`: once the visual is dropped, its state (and, if it
/// was the last user, the source's texture) is freed.
#[derive(Debug)]
pub(crate) struct VisualToken {
    pub id: u64,
}

impl VisualToken {
    pub fn new() -> Arc<Self> {
        static NEXT: AtomicU64 = AtomicU64::new(1);
        Arc::new(VisualToken {
            id: NEXT.fetch_add(1, Ordering::Relaxed),
        })
    }
}

/// A visual's token. Cloning a visual makes a new visual, so a clone of this is a new token.
#[derive(Debug)]
pub(crate) struct Token(Arc<VisualToken>);

impl Token {
    pub fn new() -> Self {
        Token(VisualToken::new())
    }
}

impl Clone for Token {
    fn clone(&self) -> Self {
        Token::new()
    }
}

impl std::ops::Deref for Token {
    type Target = Arc<VisualToken>;

    fn deref(&self) -> &Arc<VisualToken> {
        &self.0
    }
}

/// Accepted by visual constructors: an `Arc` of any source, or an already shared
/// `Arc<dyn DataSource>`.
pub trait IntoSource {
    /// The source as a shared trait object.
    fn into_source(self) -> sluice_core::SharedSource;
}

impl<S: sluice_core::DataSource> IntoSource for Arc<S> {
    fn into_source(self) -> sluice_core::SharedSource {
        self
    }
}

impl IntoSource for sluice_core::SharedSource {
    fn into_source(self) -> sluice_core::SharedSource {
        self
    }
}

/// `Debug` of a visual: its kind, its (first) source's label, its display settings, then
/// `more` fields.
pub(crate) fn debug_visual(
    f: &mut std::fmt::Formatter<'_>,
    kind: &str,
    source: &sluice_core::SharedSource,
    display: &DisplaySettings,
    more: &[(&str, &dyn std::fmt::Debug)],
) -> std::fmt::Result {
    let mut s = f.debug_struct(kind);
    s.field("source", &source.label()).field("display", display);
    for (name, value) in more {
        s.field(name, value);
    }
    s.finish()
}
