//! A window on a scene that other threads keep changing: [`Viewer::show_shared`], with a
//! [`SharedViewControl`] to ask for frames and to close the window from any thread. The
//! Python package's `sluice.view` is built on it.
//!
//! The window draws a mirror of the shared scene: one node per visible visual, at its world
//! transform, holding a clone of the visual (so the same sources: data written into them shows
//! at the next frame). Before every frame the mirror is brought in step with the shared scene
//! under its lock: transforms, the background, and settings the other thread changed since the
//! last frame (display settings, image slices and NaN colour, volume mode and step) are copied
//! onto the mirrored visuals in place (their GPU state and textures stay); visuals added,
//! removed or given another source are re-mirrored from that point of the drawing order.
//! Settings changed in the window's panel stay until the other thread changes the same visual.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;

use parking_lot::Mutex;
use sluice_core::SharedSource;
use sluice_render::glam::Mat4;
use sluice_render::{Counters, DisplaySettings, NodeId, Scene, Slice, Visual, VolumeMode};

use crate::error::ViewError;
use crate::window::{RedrawHandle, Viewer, ViewerReport};

/// Asks a window opened with [`Viewer::show_shared`] for a frame, or to close, from any
/// thread. Cloning shares the same window.
#[derive(Clone)]
pub struct SharedViewControl {
    redraw: RedrawHandle,
    close: Arc<AtomicBool>,
    frames: Arc<AtomicU64>,
    counters: Arc<Mutex<Counters>>,
}

impl SharedViewControl {
    /// A control for `viewer` (make it before [`Viewer::show_shared`] consumes the viewer).
    pub fn new(viewer: &Viewer) -> Self {
        SharedViewControl {
            redraw: viewer.redraw_handle(),
            close: Arc::new(AtomicBool::new(false)),
            frames: Arc::new(AtomicU64::new(0)),
            counters: Arc::new(Mutex::new(Counters::default())),
        }
    }

    /// Frames the window has started so far (each after its scene was brought in step).
    pub fn frames(&self) -> u64 {
        self.frames.load(Ordering::SeqCst)
    }

    /// The window renderer's counters as the last frame started (after the frame before).
    pub fn counters(&self) -> Counters {
        *self.counters.lock()
    }

    /// Schedules a frame (after writing into a source the window shows).
    pub fn request_redraw(&self) {
        self.redraw.request_redraw();
    }

    /// Closes the window (the frame being drawn ends first); [`Viewer::show_shared`] then
    /// returns its report.
    pub fn close(&self) {
        self.close.store(true, Ordering::SeqCst);
        self.redraw.close();
    }

    /// Whether [`SharedViewControl::close`] was called.
    pub fn close_requested(&self) -> bool {
        self.close.load(Ordering::SeqCst)
    }
}

/// What identifies a mirrored visual across frames: its kind and its (first) source.
#[derive(Clone, Copy, PartialEq, Eq)]
struct Key {
    kind: u8,
    source: usize,
}

fn key_of(visual: &Visual) -> Key {
    let address = |s: &SharedSource| Arc::as_ptr(s).cast::<()>() as usize;
    let (kind, source) = match visual {
        Visual::Image(i) => (0, address(i.source())),
        Visual::Volume(v) => (1, address(v.source())),
        Visual::Mesh(m) => (2, address(m.positions())),
        _ => (3, 0),
    };
    Key { kind, source }
}

/// The settings of a visual as last copied from the shared scene.
#[derive(Clone, PartialEq)]
enum Synced {
    Image {
        display: DisplaySettings,
        slice: Option<Slice>,
        nan_color: [f32; 4],
    },
    Volume {
        display: DisplaySettings,
        mode: VolumeMode,
        /// `None`: chosen per ray.
        step: Option<f32>,
    },
    /// Meshes (and visuals of later kinds): their settings are not mirrored.
    Other,
}

fn settings_of(visual: &Visual) -> Synced {
    match visual {
        Visual::Image(i) => Synced::Image {
            display: i.display().clone(),
            slice: i.slice(),
            nan_color: i.nan_color(),
        },
        Visual::Volume(v) => Synced::Volume {
            display: v.display().clone(),
            mode: v.mode(),
            step: (!v.is_auto_step()).then(|| v.step()),
        },
        _ => Synced::Other,
    }
}

struct Entry {
    key: Key,
    node: NodeId,
    synced: Synced,
    world: Mat4,
}

/// The window's scene kept in step with the shared one.
struct Mirror {
    scene: Scene,
    entries: Vec<Entry>,
}

impl Mirror {
    fn new(shared: &Scene) -> Self {
        let mut mirror = Mirror {
            scene: Scene::new(),
            entries: Vec::new(),
        };
        sync(&mut mirror.scene, &mut mirror.entries, shared);
        mirror
    }
}

/// Brings `window` (mirroring `shared` through `entries`) in step with `shared`.
fn sync(window: &mut Scene, entries: &mut Vec<Entry>, shared: &Scene) {
    if window.background() != shared.background() {
        window.set_background(shared.background());
    }
    let list = shared.draw_list();
    let mut kept = 0;
    for (visual, world) in &list {
        let Some(entry) = entries.get_mut(kept) else {
            break;
        };
        if entry.key != key_of(visual) {
            break;
        }
        if entry.world != *world {
            window.set_transform(entry.node, *world);
            entry.world = *world;
        }
        let now = settings_of(visual);
        if now != entry.synced {
            apply(window, entry.node, &now);
            entry.synced = now;
        }
        kept += 1;
    }
    for gone in entries.drain(kept..) {
        window.remove(gone.node);
    }
    for (visual, world) in &list[kept..] {
        let node = window.add((*visual).clone());
        window.set_transform(node, *world);
        entries.push(Entry {
            key: key_of(visual),
            node,
            synced: settings_of(visual),
            world: *world,
        });
    }
}

/// Copies `settings` onto the mirrored visual at `node`, keeping its identity.
fn apply(window: &mut Scene, node: NodeId, settings: &Synced) {
    match settings {
        Synced::Image {
            display,
            slice,
            nan_color,
        } => {
            if let Some(image) = window.image_mut(node) {
                image.set_display(display.clone());
                if let Some(s) = slice {
                    image.set_slice(*s);
                }
                // Checked when the shared visual took it.
                let _ = image.set_nan_color(*nan_color);
            }
        }
        Synced::Volume {
            display,
            mode,
            step,
        } => {
            if let Some(volume) = window.volume_mut(node) {
                volume.set_display(display.clone());
                // Both were checked when the shared visual took them.
                let _ = volume.set_mode(*mode);
                match step {
                    Some(step) => {
                        let _ = volume.set_step(*step);
                    }
                    None => volume.set_auto_step(),
                }
            }
        }
        Synced::Other => {}
    }
}

impl Viewer {
    /// Opens the window on `scene`, which other threads may keep changing (each frame shows
    /// it as it is then, see the module notes), and runs until the window is closed by its
    /// user, by `control` ([`SharedViewControl::close`]) or after
    /// [`Viewer::quit_after_frames`]. Replaces any [`Viewer::on_frame`] callback. The panel
    /// lists the visuals visible when the window opens, named by kind and drawing order.
    pub fn show_shared(
        self,
        scene: Arc<Mutex<Scene>>,
        control: &SharedViewControl,
    ) -> Result<ViewerReport, ViewError> {
        let mirror = Mirror::new(&scene.lock());
        let mut viewer = self;
        for (i, entry) in mirror.entries.iter().enumerate() {
            let kind = ["image", "volume", "mesh", "visual"][usize::from(entry.key.kind)];
            viewer = viewer.layer(entry.node, format!("{kind} {i}"));
        }
        let Mirror {
            scene: window,
            mut entries,
        } = mirror;
        let close = control.close.clone();
        let frames = control.frames.clone();
        let counters = control.counters.clone();
        let viewer = viewer.on_frame(move |frame| {
            *counters.lock() = frame.counters;
            frames.fetch_add(1, Ordering::SeqCst);
            if !close.load(Ordering::SeqCst) {
                sync(frame.scene, &mut entries, &scene.lock());
            }
        });
        if control.close_requested() {
            // Closed before it opened: the close sent then found no window.
            return Ok(ViewerReport::default());
        }
        viewer.show(window)
    }
}
