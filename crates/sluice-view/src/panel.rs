//! The egui side panel: a layer list (visibility, opacity) and per layer the contrast limits
//! over a histogram with auto-contrast, gamma, colormap, interpolation, volume mode and iso
//! threshold, the plane shown of a volume, the time point and channel of a multi-dimensional
//! Zarr store; and the status bar.
//!
//! Every control but the last two changes display settings only: what a frame uploads stays
//! zero (the status bar shows it). A time point or channel is other data: the layer's visual
//! draws the store's new selection, whose chunks load and upload.

use egui::{Color32, Rect, Sense, Stroke, Ui};
use sluice_core::ChunkProgress;
use sluice_render::{Colormap, Interpolation, Scene, VolumeMode};

use crate::layers::{self, Layer, LayerKind};

/// Percentiles auto-contrast sets the limits to.
pub const AUTO_CONTRAST_PERCENTILES: [f64; 2] = [0.5, 99.5];

/// Draws the controls of `layers` (nodes of `scene`); returns whether any setting changed.
pub fn layer_controls(ui: &mut Ui, scene: &mut Scene, layers: &mut [Layer]) -> bool {
    let mut changed = false;
    let mut moved = None;
    let count = layers.len();
    for (index, layer) in layers.iter_mut().enumerate() {
        ui.push_id(index, |ui| {
            ui.horizontal(|ui| {
                if ui
                    .add_enabled(index > 0, egui::Button::new("down"))
                    .on_hover_text("draw this layer under the one before it")
                    .clicked()
                {
                    moved = Some((index, index - 1));
                }
                if ui
                    .add_enabled(index + 1 < count, egui::Button::new("up"))
                    .on_hover_text("draw this layer over the one after it")
                    .clicked()
                {
                    moved = Some((index, index + 1));
                }
            });
            changed |= one_layer(ui, scene, layer);
        });
        ui.separator();
    }
    if let Some((from, to)) = moved {
        changed |= move_layer(scene, layers, from, to);
    }
    changed
}

/// Moves layer `from` to `to` in the list and their nodes to match: the two layers trade
/// places in the drawing order (later layers draw over earlier ones), and the next frame
/// shows it. The layers' nodes are siblings in the scene (`sluice view` adds every input at
/// the root, in the order of the list). Nothing is uploaded: the visuals and their textures
/// stay. Returns whether the order changed.
pub fn move_layer(scene: &mut Scene, layers: &mut [Layer], from: usize, to: usize) -> bool {
    if from >= layers.len() || to >= layers.len() || from == to {
        return false;
    }
    let (a, b) = (layers[from].node, layers[to].node);
    let (Some(order_a), Some(order_b)) = (scene.order(a), scene.order(b)) else {
        return false;
    };
    scene.set_order(a, order_b);
    scene.set_order(b, order_a);
    layers.swap(from, to);
    true
}

fn one_layer(ui: &mut Ui, scene: &mut Scene, layer: &mut Layer) -> bool {
    let node = layer.node;
    let mut changed = false;
    if ui
        .checkbox(&mut layer.visible, layer.name.as_str())
        .changed()
    {
        scene.set_visible(node, layer.visible);
        changed = true;
    }
    if let Some(mut opacity) = layers::opacity(scene, node) {
        if ui
            .add(egui::Slider::new(&mut opacity, 0.0..=1.0).text("opacity"))
            .changed()
        {
            changed |= applied(ui, layers::set_opacity(scene, node, opacity));
        }
    }

    // Contrast limits over the histogram.
    if let Some([mut lo, mut hi]) = layers::clim(scene, node) {
        let [min, max] = layer.stats.range;
        let (min, max) = (min.min(lo), max.max(hi));
        histogram(ui, &layer.stats.histogram, layer.stats.range, [lo, hi]);
        let lo_changed = ui
            .add(egui::Slider::new(&mut lo, min..=max).text("clim low"))
            .changed();
        let hi_changed = ui
            .add(egui::Slider::new(&mut hi, min..=max).text("clim high"))
            .changed();
        if (lo_changed || hi_changed) && lo < hi {
            changed |= applied(ui, layers::set_clim(scene, node, [lo, hi]));
        }
        if ui.button("auto contrast").clicked() {
            let [p_lo, p_hi] = AUTO_CONTRAST_PERCENTILES;
            let limits = layer.stats.percentiles(p_lo, p_hi);
            changed |= applied(ui, layers::set_clim(scene, node, limits));
        }
    }
    if let Some(mut gamma) = layers::gamma(scene, node) {
        if ui
            .add(
                egui::Slider::new(&mut gamma, 0.1..=5.0)
                    .logarithmic(true)
                    .text("gamma"),
            )
            .changed()
        {
            changed |= applied(ui, layers::set_gamma(scene, node, gamma));
        }
    }
    if let Some(current) = layers::colormap(scene, node) {
        let mut chosen = current.clone();
        egui::ComboBox::new("colormap", "colormap")
            .selected_text(current.name().to_string())
            .show_ui(ui, |ui| {
                for map in Colormap::builtins() {
                    let name = map.name().to_string();
                    ui.selectable_value(&mut chosen, map, name);
                }
            });
        if chosen != current {
            layers::set_colormap(scene, node, chosen);
            changed = true;
        }
    }
    if let Some(current) = layers::interpolation(scene, node) {
        let mut chosen = current;
        ui.horizontal(|ui| {
            ui.label("interpolation");
            ui.selectable_value(&mut chosen, Interpolation::Nearest, "nearest");
            ui.selectable_value(&mut chosen, Interpolation::Linear, "linear");
        });
        if chosen != current {
            layers::set_interpolation(scene, node, chosen);
            changed = true;
        }
    }
    if let Some(mode) = layers::mode(scene, node) {
        changed |= volume_mode(ui, scene, layer, mode);
    }
    changed |= store_selection(ui, scene, layer);
    if let (LayerKind::Plane { depth }, Some(mut z)) = (layer.kind, layers::plane(scene, node)) {
        if ui
            .add(egui::Slider::new(&mut z, 0..=depth.saturating_sub(1)).text("plane"))
            .changed()
        {
            layers::set_plane(scene, node, z);
            changed = true;
        }
    }
    changed
}

/// The time point and channel sliders of a store layer with a time axis or several channels
/// (several channels shown together as RGB(A) keep their selection: it is listed instead).
fn store_selection(ui: &mut Ui, scene: &mut Scene, layer: &mut Layer) -> bool {
    let Some(store) = layer.store.as_ref().filter(|s| s.is_multidimensional()) else {
        return false;
    };
    let selection = store.selection().clone();
    let (points, channels) = (store.time_points(), store.channel_count());
    let mut time = selection.time;
    let mut chosen = selection.channels.clone();
    if points > 1 {
        ui.add(egui::Slider::new(&mut time, 0..=points - 1).text("t"));
    }
    if channels > 1 {
        if let [mut c] = chosen[..] {
            ui.add(egui::Slider::new(&mut c, 0..=channels - 1).text("channel"));
            chosen = vec![c];
        } else {
            ui.label(format!("channels {chosen:?} as RGB(A)"));
        }
    }
    if time == selection.time && chosen == selection.channels {
        return false;
    }
    match layers::select(scene, layer, time, chosen) {
        Ok(()) => true,
        Err(e) => {
            ui.colored_label(Color32::YELLOW, e.to_string());
            false
        }
    }
}

fn volume_mode(ui: &mut Ui, scene: &mut Scene, layer: &Layer, mode: VolumeMode) -> bool {
    let [lo, hi] = layer.stats.range;
    let middle = 0.5 * (lo + hi);
    let mut kind = std::mem::discriminant(&mode);
    let mip = VolumeMode::Mip;
    let translucent = VolumeMode::Translucent { attenuation: 1.0 };
    let iso = VolumeMode::Iso { threshold: middle };
    ui.horizontal(|ui| {
        ui.label("mode");
        for (m, name) in [(&mip, "mip"), (&translucent, "translucent"), (&iso, "iso")] {
            let d = std::mem::discriminant(m);
            if ui.selectable_label(kind == d, name).clicked() {
                kind = d;
            }
        }
    });
    let mut next = if kind == std::mem::discriminant(&mode) {
        mode
    } else if kind == std::mem::discriminant(&mip) {
        mip
    } else if kind == std::mem::discriminant(&translucent) {
        translucent
    } else {
        iso
    };
    if let VolumeMode::Iso { threshold } = &mut next {
        let range = lo.min(*threshold)..=hi.max(*threshold);
        ui.add(egui::Slider::new(threshold, range).text("iso"));
    }
    if let VolumeMode::Translucent { attenuation } = &mut next {
        ui.add(
            egui::Slider::new(attenuation, 0.01..=20.0)
                .logarithmic(true)
                .text("attenuation"),
        );
    }
    next != mode && applied(ui, layers::set_mode(scene, layer.node, next))
}

/// Whether a setting was applied; a refused one (say, auto-contrast over data of one value,
/// whose limits are equal) keeps the layer as it was and says why under the control.
fn applied(ui: &mut Ui, result: Result<(), sluice_render::RenderError>) -> bool {
    match result {
        Ok(()) => true,
        Err(e) => {
            ui.colored_label(Color32::YELLOW, e.to_string());
            false
        }
    }
}

/// Bars of `counts` over `range`, with the contrast limits as vertical lines.
fn histogram(ui: &mut Ui, counts: &[u32], range: [f64; 2], clim: [f64; 2]) {
    let width = ui.available_width().max(64.0);
    let (rect, _) = ui.allocate_exact_size(egui::vec2(width, 48.0), Sense::hover());
    let painter = ui.painter_at(rect);
    painter.rect_filled(rect, 0.0, Color32::from_gray(24));
    let peak = counts.iter().copied().max().unwrap_or(0).max(1) as f32;
    let bar = rect.width() / counts.len().max(1) as f32;
    for (i, &c) in counts.iter().enumerate() {
        // Square-root heights keep small bins visible next to a dominant one.
        let h = (c as f32 / peak).sqrt() * rect.height();
        let x = rect.left() + i as f32 * bar;
        painter.rect_filled(
            Rect::from_min_max(
                egui::pos2(x, rect.bottom() - h),
                egui::pos2(x + bar, rect.bottom()),
            ),
            0.0,
            Color32::from_gray(160),
        );
    }
    let span = range[1] - range[0];
    if span > 0.0 {
        for v in clim {
            let x = rect.left() + ((v - range[0]) / span) as f32 * rect.width();
            painter.vline(x, rect.y_range(), Stroke::new(1.5, Color32::YELLOW));
        }
    }
}

/// What the status bar shows.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct Status {
    /// Time of the last frame (sluice render and egui), milliseconds.
    pub frame_ms: f64,
    /// Bytes of source data the last frame uploaded.
    pub bytes_uploaded: u64,
    /// Bytes of GPU memory source data holds now.
    pub resident_bytes: u64,
    /// Of those, the bytes held by pages of paged sources: what a GPU budget bounds.
    pub page_bytes: u64,
    /// The renderer's GPU budget for pages; `None` where the renderer has none.
    pub gpu_budget: Option<u64>,
    /// Pixels the last frame redrew.
    pub pixels_drawn: u64,
    /// Chunks of the layers' lazy sources (Zarr stores) that a frame shows, and of those:
    /// resident, loading (queued or being loaded), failed. All zero without lazy sources.
    pub chunks: ChunkCounts,
}

/// Chunks of the layers' lazy sources, summed (see [`crate::chunks::level0_progress`]).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ChunkCounts {
    /// Chunks a frame shows.
    pub wanted: usize,
    /// Of those, ready or empty.
    pub resident: usize,
    /// Of those, queued or being loaded.
    pub loading: usize,
    /// Of those, failed (they show the fill value).
    pub failed: usize,
}

impl From<&ChunkProgress> for ChunkCounts {
    fn from(p: &ChunkProgress) -> Self {
        ChunkCounts {
            wanted: p.visible_wanted + p.prefetch_wanted,
            resident: p.visible_resident + p.prefetch_resident,
            loading: p.queued + p.loading,
            failed: p.failed.len(),
        }
    }
}

/// The GPU memory part of the status bar: "resident 40.0 MiB, pages 12.0 of 512.0 MiB
/// budget", or "resident 12.0 MiB (no budget)".
pub fn memory_text(status: &Status) -> String {
    let mib = |b: u64| b as f64 / (1u64 << 20) as f64;
    match status.gpu_budget {
        Some(budget) => format!(
            "resident {:.1} MiB, pages {:.1} of {:.1} MiB budget",
            mib(status.resident_bytes),
            mib(status.page_bytes),
            mib(budget)
        ),
        None => format!("resident {:.1} MiB (no budget)", mib(status.resident_bytes)),
    }
}

/// The chunk part of the status bar, `None` without lazy sources: "chunks 30 / 36, 6
/// loading, 0 failed".
pub fn chunks_text(chunks: &ChunkCounts) -> Option<String> {
    (chunks.wanted > 0).then(|| {
        format!(
            "chunks {} / {}, {} loading, {} failed",
            chunks.resident, chunks.wanted, chunks.loading, chunks.failed
        )
    })
}

/// The status bar's line.
pub fn status_bar(ui: &mut Ui, status: &Status) {
    ui.horizontal(|ui| {
        ui.label(format!("frame {:.1} ms", status.frame_ms));
        ui.separator();
        ui.label(format!("uploaded {} B", status.bytes_uploaded));
        ui.separator();
        ui.label(memory_text(status));
        ui.separator();
        ui.label(format!("redrew {} px", status.pixels_drawn));
        ui.separator();
        if let Some(text) = chunks_text(&status.chunks) {
            if status.chunks.failed > 0 {
                ui.colored_label(Color32::YELLOW, text);
            } else {
                ui.label(text);
            }
            ui.separator();
        }
        ui.label("R: reset view   S: screenshot   Esc: quit");
    });
}
