//! Layers: the inputs of a view placed in one [`Scene`], each with the statistics its controls
//! need (a histogram, percentiles), and the camera that looks at them.
//!
//! Every call to a visual's setters lives in the "settings" functions at the end of this file,
//! so a change to those setters is made in one place.

use sluice_core::{noop_waker, read_element, ReadRequest, ReadStatus, Region, SharedSource};
use sluice_render::glam::{Mat4, Vec2, Vec3};
use sluice_render::{
    Camera, Colormap, DisplaySettings, Image, Interpolation, NodeId, OrbitCamera, PanZoomCamera,
    Projection, RenderError, Scene, Slice, Visual, Volume, VolumeMode,
};

use crate::error::ViewError;
use crate::input::Input;
use crate::store::ZarrInput;

/// How an input is shown.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum ShowAs {
    /// From its dimensions: 2-D as an image, 3-D as a volume.
    #[default]
    Auto,
    /// As an image; a 3-D input shows one plane (the middle one at first).
    Image,
    /// As a ray-marched volume (3-D inputs only).
    Volume,
}

/// Display settings given for every layer at the start (the command line's flags).
#[derive(Clone, Debug, Default)]
pub struct Settings {
    /// How inputs are shown.
    pub show_as: ShowAs,
    /// Contrast limits; without them, float data gets its range and integers their type's.
    pub clim: Option<[f64; 2]>,
    /// Colormap; gray without it.
    pub colormap: Option<Colormap>,
    /// Volume rendering mode; maximum intensity projection without it.
    pub mode: Option<VolumeMode>,
    /// Side by side (left to right) instead of layered on top of each other.
    pub grid: bool,
}

/// What a layer shows.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum LayerKind {
    /// A 2-D image.
    Image,
    /// One plane of a 3-D input, along axis 0, of `depth` planes.
    Plane {
        /// Planes along axis 0.
        depth: usize,
    },
    /// A ray-marched volume.
    Volume,
}

/// Pixels between side-by-side layers of a grid.
pub const GRID_GAP: f32 = 16.0;

/// Bins of a layer's histogram.
pub const HISTOGRAM_BINS: usize = 64;

/// Most samples kept for a layer's statistics: enough for percentiles to a fraction of a bin.
const MAX_STAT_SAMPLES: usize = 1 << 18;

/// A sample of a layer's values: range, histogram and sorted values for percentiles.
#[derive(Clone, Debug, Default)]
pub struct Stats {
    /// Smallest and largest finite value seen (`[0, 1]` when none).
    pub range: [f64; 2],
    /// Counts of [`HISTOGRAM_BINS`] equal bins over `range`.
    pub histogram: Vec<u32>,
    sorted: Vec<f64>,
}

impl Stats {
    /// Reads an evenly spaced subset of rows of `source` (all of it when small) and
    /// summarizes their finite values. A source that is not ready gives empty statistics.
    pub fn scan(source: &SharedSource) -> Stats {
        let layout = source.layout();
        let [depth, rows, cols] = layout.shape().padded();
        let total_rows = depth.saturating_mul(rows);
        let row_samples = cols.saturating_mul(layout.channels()).max(1);
        let wanted_rows = (MAX_STAT_SAMPLES / row_samples).clamp(1, total_rows.max(1));
        let sample_bytes = layout.sample_bytes();
        let element = layout.element();
        let elem_bytes = element.size();
        let mut values = Vec::with_capacity(wanted_rows.saturating_mul(row_samples));
        let mut row = vec![0u8; cols.saturating_mul(sample_bytes)];
        for i in 0..wanted_rows {
            let r = i * total_rows / wanted_rows;
            let region = Region {
                origin: [r / rows.max(1), r % rows.max(1), 0],
                size: [1, 1, cols],
            };
            let request = ReadRequest::new(region, noop_waker());
            match source.read(&request, &mut row) {
                Ok(ReadStatus::Ready) => {}
                _ => return Stats::from_values(Vec::new()),
            }
            values.extend(
                row.chunks_exact(elem_bytes)
                    .map(|b| read_element(element, b))
                    .filter(|v| v.is_finite()),
            );
        }
        Stats::from_values(values)
    }

    /// Summarizes `values` (finite ones).
    pub(crate) fn from_values(mut values: Vec<f64>) -> Stats {
        values.sort_by(f64::total_cmp);
        let range = match (values.first(), values.last()) {
            (Some(&lo), Some(&hi)) => [lo, hi],
            _ => [0.0, 1.0],
        };
        let mut histogram = vec![0u32; HISTOGRAM_BINS];
        let width = range[1] - range[0];
        for &v in &values {
            let bin = if width > 0.0 {
                (((v - range[0]) / width) * HISTOGRAM_BINS as f64) as usize
            } else {
                0
            };
            histogram[bin.min(HISTOGRAM_BINS - 1)] += 1;
        }
        Stats {
            range,
            histogram,
            sorted: values,
        }
    }

    /// The values below which `lo` and `hi` percent of the samples lie (auto-contrast);
    /// `range` when there are no samples.
    pub fn percentiles(&self, lo: f64, hi: f64) -> [f64; 2] {
        if self.sorted.is_empty() {
            return self.range;
        }
        let at = |p: f64| {
            let i = ((p / 100.0) * (self.sorted.len() - 1) as f64).round() as usize;
            self.sorted[i.min(self.sorted.len() - 1)]
        };
        let (a, b) = (at(lo), at(hi));
        if a < b {
            [a, b]
        } else {
            self.range
        }
    }
}

/// One input shown in a view.
#[derive(Clone, Debug)]
pub struct Layer {
    /// The input's name.
    pub name: String,
    /// Its node in the view's scene.
    pub node: NodeId,
    /// What it shows.
    pub kind: LayerKind,
    /// Whether it is drawn.
    pub visible: bool,
    /// Its values' statistics, for the contrast controls.
    pub stats: Stats,
    /// Its size in world units: `[x, y, z]`.
    pub extent: Vec3,
    /// The Zarr store it shows, for a store (the t / channel controls select from it).
    pub store: Option<ZarrInput>,
}

/// A scene of layers and the box they fill.
pub struct View {
    /// The scene drawn.
    pub scene: Scene,
    /// Its layers, in the order added.
    pub layers: Vec<Layer>,
    /// The world box holding every layer.
    pub bounds: (Vec3, Vec3),
}

impl View {
    /// Places `inputs` in a scene as `settings` say.
    pub fn build(inputs: &[Input], settings: &Settings) -> Result<View, ViewError> {
        let mut scene = Scene::new();
        scene.set_background([0.0, 0.0, 0.0, 1.0]);
        let mut layers = Vec::new();
        let mut cursor_x = 0.0f32;
        let mut max = Vec3::ZERO;
        for input in inputs {
            let layout = input.source.layout();
            let [d, h, w] = layout.shape().padded();
            let three_d = layout.shape().ndim() == 3;
            let kind = match (settings.show_as, three_d) {
                (ShowAs::Volume, false) => {
                    return Err(ViewError::Unshowable {
                        name: input.name.clone(),
                        reason: format!(
                            "a volume needs 3 axes, the data has shape {:?}",
                            layout.shape().dims()
                        ),
                    })
                }
                (ShowAs::Auto | ShowAs::Volume, true) => LayerKind::Volume,
                (ShowAs::Image, true) => LayerKind::Plane { depth: d },
                (_, false) => LayerKind::Image,
            };
            if kind == LayerKind::Volume && layout.channels() != 1 {
                return Err(ViewError::Unshowable {
                    name: input.name.clone(),
                    reason: format!(
                        "a volume needs one channel, the data has {}",
                        layout.channels()
                    ),
                });
            }
            // A store's source is lazy (nothing is resident yet): its statistics come from
            // chunks of its coarsest level, read now.
            let stats = match &input.store {
                Some(store) => store.sample_stats()?,
                // A file behind a lazy pyramid: its map reads at once.
                None => Stats::scan(input.mapped.as_ref().unwrap_or(&input.source)),
            };
            let clim = settings.clim.unwrap_or_else(|| {
                if layout.element().is_float() {
                    stats.range
                } else {
                    layout.element().default_range()
                }
            });
            let colormap = settings.colormap.clone().unwrap_or(Colormap::Gray);
            let visual: Visual = match kind {
                LayerKind::Volume => Volume::new(input.source.clone())
                    .with_clim(clim[0], clim[1])?
                    .with_colormap(colormap)
                    .with_mode(settings.mode.unwrap_or(VolumeMode::Mip))?
                    .into(),
                LayerKind::Plane { depth } => Image::new(input.source.clone())
                    .with_slice(Slice::Z(depth / 2))
                    .with_clim(clim[0], clim[1])?
                    .with_colormap(colormap)
                    .into(),
                LayerKind::Image => Image::new(input.source.clone())
                    .with_clim(clim[0], clim[1])?
                    .with_colormap(colormap)
                    .into(),
            };
            let node = scene.add(visual);
            let extent = match kind {
                LayerKind::Volume => Vec3::new(w as f32, h as f32, d as f32),
                _ => Vec3::new(w as f32, h as f32, 0.0),
            };
            if settings.grid {
                scene.set_transform(node, Mat4::from_translation(Vec3::new(cursor_x, 0.0, 0.0)));
                cursor_x += extent.x + GRID_GAP;
                max = max.max(Vec3::new(cursor_x - GRID_GAP, extent.y, extent.z));
            } else {
                max = max.max(extent);
            }
            layers.push(Layer {
                name: input.name.clone(),
                node,
                kind,
                visible: true,
                stats,
                extent,
                store: input.store.clone(),
            });
        }
        Ok(View {
            scene,
            layers,
            bounds: (Vec3::ZERO, max),
        })
    }

    /// Whether a volume is shown (then the camera orbits).
    pub fn is_3d(&self) -> bool {
        self.layers.iter().any(|l| l.kind == LayerKind::Volume)
    }

    /// The camera showing every layer whole in `viewport`.
    pub fn fit_camera(&self, viewport: [u32; 2]) -> ViewCamera {
        let (min, max) = self.bounds;
        if self.is_3d() {
            ViewCamera::Orbit(OrbitCamera::fit(min, max, 30.0, 20.0))
        } else {
            ViewCamera::Flat(PanZoomCamera::fit(min.truncate(), max.truncate(), viewport))
        }
    }
}

/// The camera of a view: pan and zoom in 2-D, orbit, zoom and pan in 3-D.
#[derive(Clone, Copy, Debug)]
pub enum ViewCamera {
    /// A 2-D scene.
    Flat(PanZoomCamera),
    /// A scene with a volume.
    Orbit(OrbitCamera),
}

impl Camera for ViewCamera {
    fn view_projection(&self, viewport: [u32; 2]) -> Mat4 {
        match self {
            ViewCamera::Flat(c) => c.view_projection(viewport),
            ViewCamera::Orbit(c) => c.view_projection(viewport),
        }
    }
}

impl ViewCamera {
    /// A mouse drag of `delta` screen pixels: pans a 2-D view; orbits a 3-D view, or pans it
    /// when `pan` (right button or shift).
    pub fn drag(&mut self, delta: Vec2, pan: bool, viewport: [u32; 2]) {
        match self {
            ViewCamera::Flat(c) => c.pan_pixels(delta),
            ViewCamera::Orbit(c) if pan => {
                let fov = match c.projection {
                    Projection::Perspective { fov_y_degrees } => fov_y_degrees,
                    _ => 30.0,
                };
                let world_per_pixel =
                    2.0 * c.distance * (fov.to_radians() * 0.5).tan() / viewport[1].max(1) as f32;
                let inverse = c.view().inverse();
                let right = inverse.x_axis.truncate();
                let up = inverse.y_axis.truncate();
                c.target += (-right * delta.x + up * delta.y) * world_per_pixel;
            }
            ViewCamera::Orbit(c) => c.orbit(-delta.x * 0.01, delta.y * 0.01),
        }
    }

    /// A scroll of `lines` (positive: zoom in) with the cursor at `cursor`.
    pub fn scroll(&mut self, lines: f32, cursor: Vec2, viewport: [u32; 2]) {
        let factor = 1.15f32.powf(lines);
        match self {
            ViewCamera::Flat(c) => c.zoom_about(factor, cursor, viewport),
            ViewCamera::Orbit(c) => c.dolly(1.0 / factor),
        }
    }
}

// Settings: the only calls to visuals' setters.

/// The display settings (contrast limits, gamma, colormap, interpolation, opacity) of a layer.
fn display(scene: &Scene, node: NodeId) -> Option<&DisplaySettings> {
    match scene.visual(node)? {
        Visual::Image(i) => Some(i.display()),
        Visual::Volume(v) => Some(v.display()),
        Visual::Mesh(m) => Some(m.display()),
        _ => None,
    }
}

/// Changes a layer's display settings with `change`, which validates the new value; on an
/// error the layer keeps its settings. A node with no visual is left alone.
fn change_display(
    scene: &mut Scene,
    node: NodeId,
    change: impl FnOnce(&mut DisplaySettings) -> Result<(), RenderError>,
) -> Result<(), RenderError> {
    let Some(mut settings) = display(scene, node).cloned() else {
        return Ok(());
    };
    change(&mut settings)?;
    match scene.visual_mut(node) {
        Some(Visual::Image(i)) => i.set_display(settings),
        Some(Visual::Volume(v)) => v.set_display(settings),
        Some(Visual::Mesh(m)) => m.set_display(settings),
        _ => {}
    }
    Ok(())
}

/// The colormap of a layer.
pub fn colormap(scene: &Scene, node: NodeId) -> Option<Colormap> {
    display(scene, node).map(|d| d.colormap().clone())
}

/// Sets a layer's colormap.
pub fn set_colormap(scene: &mut Scene, node: NodeId, map: Colormap) {
    let _infallible = change_display(scene, node, |d| {
        d.set_colormap(map);
        Ok(())
    });
}

/// The contrast limits of a layer (the element type's range where none were set).
pub fn clim(scene: &Scene, node: NodeId) -> Option<[f64; 2]> {
    match scene.visual(node)? {
        Visual::Image(i) => Some(i.effective_clim()),
        Visual::Volume(v) => Some(v.effective_clim()),
        Visual::Mesh(m) => Some(m.effective_clim()),
        _ => None,
    }
}

/// Sets a layer's contrast limits; limits that are not finite or not increasing are refused.
pub fn set_clim(scene: &mut Scene, node: NodeId, [lo, hi]: [f64; 2]) -> Result<(), RenderError> {
    change_display(scene, node, |d| d.set_clim(lo, hi))
}

/// The gamma of a layer.
pub fn gamma(scene: &Scene, node: NodeId) -> Option<f32> {
    display(scene, node).map(DisplaySettings::gamma)
}

/// Sets a layer's gamma (positive and finite).
pub fn set_gamma(scene: &mut Scene, node: NodeId, gamma: f32) -> Result<(), RenderError> {
    change_display(scene, node, |d| d.set_gamma(gamma))
}

/// The opacity of a layer.
pub fn opacity(scene: &Scene, node: NodeId) -> Option<f32> {
    display(scene, node).map(DisplaySettings::opacity)
}

/// Sets a layer's opacity (0 to 1).
pub fn set_opacity(scene: &mut Scene, node: NodeId, opacity: f32) -> Result<(), RenderError> {
    change_display(scene, node, |d| d.set_opacity(opacity))
}

/// The interpolation of a layer.
pub fn interpolation(scene: &Scene, node: NodeId) -> Option<Interpolation> {
    display(scene, node).map(DisplaySettings::interpolation)
}

/// Sets a layer's interpolation.
pub fn set_interpolation(scene: &mut Scene, node: NodeId, interpolation: Interpolation) {
    let _infallible = change_display(scene, node, |d| {
        d.set_interpolation(interpolation);
        Ok(())
    });
}

/// The rendering mode of a volume layer.
pub fn mode(scene: &Scene, node: NodeId) -> Option<VolumeMode> {
    match scene.visual(node)? {
        Visual::Volume(v) => Some(v.mode()),
        _ => None,
    }
}

/// Sets a volume layer's rendering mode.
pub fn set_mode(scene: &mut Scene, node: NodeId, mode: VolumeMode) -> Result<(), RenderError> {
    match scene.visual_mut(node) {
        Some(Visual::Volume(v)) => v.set_mode(mode),
        _ => Ok(()),
    }
}

/// The plane a plane layer shows.
pub fn plane(scene: &Scene, node: NodeId) -> Option<usize> {
    match scene.visual(node)? {
        Visual::Image(i) => match i.slice()? {
            Slice::Z(z) => Some(z),
            _ => None,
        },
        _ => None,
    }
}

/// Shows plane `z` of a plane layer.
pub fn set_plane(scene: &mut Scene, node: NodeId, z: usize) {
    if let Some(Visual::Image(i)) = scene.visual_mut(node) {
        i.set_slice(Slice::Z(z));
    }
}

/// Shows time point `time` and `channels` of a store layer: the layer's visual draws the new
/// selection's lazy source (its display settings stay; the data is uploaded as its chunks
/// load). The layer keeps its statistics (reading new ones would block the window on the
/// store). A layer without a store is left alone.
pub fn select(
    scene: &mut Scene,
    layer: &mut Layer,
    time: u64,
    channels: Vec<u64>,
) -> Result<(), ViewError> {
    let Some(store) = &layer.store else {
        return Ok(());
    };
    let (store, source) = store.select(time, channels)?;
    match scene.visual_mut(layer.node) {
        Some(Visual::Image(i)) => i.set_source(source),
        Some(Visual::Volume(v)) => v.set_source(source),
        _ => {}
    }
    layer.store = Some(store);
    Ok(())
}
