//! `Mesh`: triangles whose every attribute is a source.

use std::fmt;

use sluice_core::SharedSource;

use super::display::display_methods;
use super::{debug_visual, DisplaySettings, IntoSource, Token};
use crate::colormap::Colormap;
use crate::visual::Interpolation;

/// How a [`Mesh`] is lit.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Shading {
    /// One normal per triangle (its plane), computed on the GPU.
    Flat,
    /// Normals interpolated across triangles: the `normals` source, or, when there is none,
    /// area-weighted vertex normals computed from positions and indices (host sources) and
    /// recomputed whenever they change.
    #[default]
    Smooth,
    /// No lighting: colours as they are.
    Unlit,
}

/// Where a mesh's colour comes from.
#[derive(Clone)]
enum Coloring {
    /// One colour for the whole mesh.
    Uniform([f32; 4]),
    /// Per-vertex colours: RGB or RGBA, u8 or float in [0, 1].
    Vertex(SharedSource),
    /// Per-vertex scalars through the colormap and contrast limits.
    Scalars(SharedSource),
    /// Texture coordinates (2 channels, (0, 0) to (1, 1) covering the image) into an image
    /// source, which is shared with every other visual showing it.
    Texture {
        texcoords: SharedSource,
        image: SharedSource,
    },
}

/// A triangle mesh. Every attribute is a 1-D source (with channels): positions (3 channels),
/// optional normals (3), colours (3 or 4), scalars (1), texture coordinates (2), and triangle
/// indices (1 channel, 3 per triangle, or 3 channels). Each goes through a buffer proxy with
/// the same rules as images: one GPU buffer per source however many meshes use it, and only
/// changed chunks uploaded.
///
/// Bad input is refused before anything reaches the GPU: indices are checked against the
/// vertex count (every changed index, before its upload), attribute lengths against the
/// vertex count, index counts against multiples of 3. Triangles with a NaN vertex position are
/// not drawn.
///
/// A clone is a new visual with the same sources and settings.
#[derive(Clone)]
pub struct Mesh {
    pub(crate) token: Token,
    display: DisplaySettings,
    positions: SharedSource,
    indices: Option<SharedSource>,
    normals: Option<SharedSource>,
    coloring: Coloring,
    shading: Shading,
    wireframe: Option<[f32; 4]>,
    light_direction: [f32; 3],
    ambient: f32,
}

impl Mesh {
    display_methods!("Mesh");

    /// A mesh of `positions` (f32 or other numbers, 3 channels), drawn as consecutive
    /// triangles unless indices are given; light gray, smooth shading.
    pub fn new(positions: impl IntoSource) -> Self {
        Mesh {
            token: Token::new(),
            display: DisplaySettings::new(Colormap::Viridis, Interpolation::Linear),
            positions: positions.into_source(),
            indices: None,
            normals: None,
            coloring: Coloring::Uniform([0.8, 0.8, 0.8, 1.0]),
            shading: Shading::Smooth,
            wireframe: None,
            light_direction: [0.3, 0.5, 1.0],
            ambient: 0.25,
        }
    }

    /// Triangle indices: integers, 1 channel (3 per triangle) or 3 channels (one triangle
    /// each).
    #[must_use]
    pub fn with_indices(mut self, indices: impl IntoSource) -> Self {
        self.indices = Some(indices.into_source());
        self
    }

    /// Per-vertex normals (3 channels).
    #[must_use]
    pub fn with_normals(mut self, normals: impl IntoSource) -> Self {
        self.normals = Some(normals.into_source());
        self
    }

    /// One colour (RGBA in [0, 1]) for the whole mesh.
    #[must_use]
    pub fn with_color(mut self, rgba: [f32; 4]) -> Self {
        self.coloring = Coloring::Uniform(rgba);
        self
    }

    /// Per-vertex colours (3 or 4 channels; u8, or floats in [0, 1]).
    #[must_use]
    pub fn with_vertex_colors(mut self, colors: impl IntoSource) -> Self {
        self.coloring = Coloring::Vertex(colors.into_source());
        self
    }

    /// Per-vertex scalars (1 channel) through the colormap and contrast limits.
    #[must_use]
    pub fn with_scalars(mut self, scalars: impl IntoSource) -> Self {
        self.coloring = Coloring::Scalars(scalars.into_source());
        self
    }

    /// An image source as texture, with per-vertex texture coordinates (2 channels). The
    /// image goes through the contrast limits and colormap (scalar images) or per channel
    /// (RGB/RGBA), like an [`crate::Image`].
    #[must_use]
    pub fn with_texture(mut self, texcoords: impl IntoSource, image: impl IntoSource) -> Self {
        self.coloring = Coloring::Texture {
            texcoords: texcoords.into_source(),
            image: image.into_source(),
        };
        self
    }

    /// The shading.
    #[must_use]
    pub fn with_shading(mut self, shading: Shading) -> Self {
        self.shading = shading;
        self
    }

    /// Draws the triangle edges over the mesh in `rgba`.
    #[must_use]
    pub fn with_wireframe(mut self, rgba: [f32; 4]) -> Self {
        self.wireframe = Some(rgba);
        self
    }

    /// The direction the light travels, in world coordinates (a directional light).
    #[must_use]
    pub fn with_light_direction(mut self, direction: [f32; 3]) -> Self {
        self.light_direction = direction;
        self
    }

    /// The ambient share of the lighting, `[0, 1]`.
    #[must_use]
    pub fn with_ambient(mut self, ambient: f32) -> Self {
        self.ambient = ambient;
        self
    }

    /// Sets the shading.
    pub fn set_shading(&mut self, shading: Shading) {
        self.shading = shading;
    }

    /// Shows or hides the wireframe.
    pub fn set_wireframe(&mut self, rgba: Option<[f32; 4]>) {
        self.wireframe = rgba;
    }

    /// The positions source.
    pub fn positions(&self) -> &SharedSource {
        &self.positions
    }

    /// The indices source, if any.
    pub fn indices(&self) -> Option<&SharedSource> {
        self.indices.as_ref()
    }

    /// The normals source, if any.
    pub fn normals(&self) -> Option<&SharedSource> {
        self.normals.as_ref()
    }

    /// The per-vertex colour source, if colours come from one.
    pub fn vertex_colors(&self) -> Option<&SharedSource> {
        match &self.coloring {
            Coloring::Vertex(s) => Some(s),
            _ => None,
        }
    }

    /// The scalar source, if colours come from scalars.
    pub fn scalars(&self) -> Option<&SharedSource> {
        match &self.coloring {
            Coloring::Scalars(s) => Some(s),
            _ => None,
        }
    }

    /// The texture coordinates and image, if the mesh is textured.
    pub fn texture(&self) -> Option<(&SharedSource, &SharedSource)> {
        match &self.coloring {
            Coloring::Texture { texcoords, image } => Some((texcoords, image)),
            _ => None,
        }
    }

    /// The uniform colour, if the mesh has one.
    pub fn color(&self) -> Option<[f32; 4]> {
        match self.coloring {
            Coloring::Uniform(c) => Some(c),
            _ => None,
        }
    }

    /// The contrast limits when none are set: the range of the scalar or texture source's
    /// element type.
    fn default_clim(&self) -> [f64; 2] {
        match &self.coloring {
            Coloring::Scalars(s) => s.layout().element().default_range(),
            Coloring::Texture { image, .. } => image.layout().element().default_range(),
            _ => [0.0, 1.0],
        }
    }

    /// The shading.
    pub fn shading(&self) -> Shading {
        self.shading
    }

    /// The wireframe colour, if shown.
    pub fn wireframe(&self) -> Option<[f32; 4]> {
        self.wireframe
    }

    /// The light direction.
    pub fn light_direction(&self) -> [f32; 3] {
        self.light_direction
    }

    /// The ambient share.
    pub fn ambient(&self) -> f32 {
        self.ambient
    }
}

impl fmt::Debug for Mesh {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let indices = self.indices.as_ref().map(|s| s.label());
        let more: [(&str, &dyn fmt::Debug); 3] = [
            ("indices", &indices),
            ("shading", &self.shading),
            ("wireframe", &self.wireframe),
        ];
        debug_visual(f, "Mesh", &self.positions, &self.display, &more)
    }
}
