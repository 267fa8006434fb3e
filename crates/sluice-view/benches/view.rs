//! The viewer's costs (`cargo bench -p sluice-view --bench view`), each a ratio against a
//! ceiling measured in the same run, on the same device:
//!
//! 1. idle: a frame of the window's renderer with nothing changed, against a whole frame of
//!    the same scene. The window does not even run this frame (it sleeps in
//!    `ControlFlow::Wait` until something happens); the ratio shows that if it did, the
//!    renderer would draw nothing (0 pixels).
//! 2. control change: a colormap change drawn (the renderer's frame plus the panel's egui
//!    pass, into an offscreen texture of the window's size) against the ceiling "the egui
//!    pass, then the same scene rendered offscreen from scratch (target invalidated)",
//!    measured in that order as the window runs them. Must be at most 1.0. The ceiling's egui
//!    pass is the change's: it shows a colormap name the pass before it did not (the layer's
//!    colormap is set to another name for the pass and put back before the frame, so the
//!    renderer sees nothing change), since egui lays out text it did not show last frame and
//!    a changed control shows new text; the ratio against an egui pass with nothing new in it
//!    is printed too. Both are measured
//!    back to back in each iteration, and the figure is the median of the iterations' ratios:
//!    on a shared machine the load moves between iterations, and a ratio of medians taken over
//!    different iterations measures that movement (it is printed too, with the ratio of the
//!    fastest iterations, which the load can only slow down). The ceiling is measured in the
//!    window's order because a renderer frame right after an egui pass costs more than one
//!    right after another frame (wgpu frees what the egui pass left; on lavapipe 0.24 against
//!    0.12 ms with nothing to draw): the control row prints that, and the ratio against the
//!    pass and the frame measured apart is printed as well. A colormap change makes nothing on
//!    the GPU side: every colormap table has a bind group of its own, made with the table, so
//!    the visual's group stays and the frame binds another table's.
//! 3. first frame: what `sluice view` does before its first frame of a 4096 x 4096 f32 `.npy`
//!    (open, scan for the histogram, build the scene, upload and draw), against what
//!    `examples/tour.rs` does for the same image offscreen (an `ArraySource` in memory, its
//!    first frame). Must be at most 1.5. The window's creation is not part of either.
//!
//! Medians of `SLUICE_BENCH_ITERS` (default 10) after one warm-up.

use std::io::Write;
use std::sync::Arc;
use std::time::{Duration, Instant};

use sluice_core::ndarray::Array2;
use sluice_core::{npy_header, ArraySource, ElementType};
use sluice_render::glam::Vec2;
use sluice_render::{wgpu, Colormap, Image, PanZoomCamera, Renderer, Scene, TARGET_FORMAT};
use sluice_view::input::{self, OpenOptions};
use sluice_view::{layers, panel, Settings, View};

type Res<T> = Result<T, Box<dyn std::error::Error>>;

const WINDOW: [u32; 2] = [1024, 768];
const SIDE: usize = 4096;

fn median(mut v: Vec<Duration>) -> Duration {
    v.sort();
    v[v.len() / 2]
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1e3
}

/// One egui pass of the side panel, drawn into `texture`, waited for.
struct EguiPass {
    ctx: egui::Context,
    renderer: egui_wgpu::Renderer,
    view: wgpu::TextureView,
}

impl EguiPass {
    fn new(device: &wgpu::Device) -> Self {
        let texture = device.create_texture(&wgpu::TextureDescriptor {
            label: Some("bench egui"),
            size: wgpu::Extent3d {
                width: WINDOW[0],
                height: WINDOW[1],
                depth_or_array_layers: 1,
            },
            mip_level_count: 1,
            sample_count: 1,
            dimension: wgpu::TextureDimension::D2,
            format: TARGET_FORMAT,
            usage: wgpu::TextureUsages::RENDER_ATTACHMENT,
            view_formats: &[],
        });
        EguiPass {
            ctx: egui::Context::default(),
            renderer: egui_wgpu::Renderer::new(device, TARGET_FORMAT, Default::default()),
            view: texture.create_view(&Default::default()),
        }
    }

    /// The pass alone: the panel's UI, painted, waited for.
    fn run(&mut self, r: &Renderer, view: &mut View) -> Res<()> {
        let output = self.ui(view);
        self.paint(r, output);
        r.wait_idle()?;
        Ok(())
    }

    /// The CPU half, as the window runs it before the renderer's frame: the panel's UI (where
    /// controls change the scene).
    fn ui(&mut self, view: &mut View) -> egui::FullOutput {
        let input = egui::RawInput {
            screen_rect: Some(egui::Rect::from_min_size(
                egui::Pos2::ZERO,
                egui::vec2(WINDOW[0] as f32, WINDOW[1] as f32),
            )),
            ..Default::default()
        };
        self.ctx.run_ui(input, |ui| {
            egui::Panel::left("layers").show(ui, |ui| {
                panel::layer_controls(ui, &mut view.scene, &mut view.layers);
            });
        })
    }

    /// The GPU half, as the window's `present` does after the renderer's frame: tessellate,
    /// update textures and buffers, record and submit the pass (not waited for).
    fn paint(&mut self, r: &Renderer, output: egui::FullOutput) {
        let jobs = self.ctx.tessellate(output.shapes, output.pixels_per_point);
        let (device, queue) = (r.device(), r.queue());
        let mut textures = output.textures_delta;
        for (id, deltas) in textures.set.drain() {
            for delta in deltas {
                self.renderer.update_texture(device, queue, id, &delta);
            }
        }
        for id in textures.free.drain() {
            self.renderer.free_texture(&id);
        }
        let screen = egui_wgpu::ScreenDescriptor {
            size_in_pixels: WINDOW,
            pixels_per_point: output.pixels_per_point,
        };
        let mut encoder = device.create_command_encoder(&Default::default());
        let mut commands =
            self.renderer
                .update_buffers(device, queue, &mut encoder, &jobs, &screen);
        {
            let mut pass = encoder
                .begin_render_pass(&wgpu::RenderPassDescriptor {
                    label: Some("bench egui"),
                    color_attachments: &[Some(wgpu::RenderPassColorAttachment {
                        view: &self.view,
                        depth_slice: None,
                        resolve_target: None,
                        ops: wgpu::Operations {
                            load: wgpu::LoadOp::Clear(wgpu::Color::BLACK),
                            store: wgpu::StoreOp::Store,
                        },
                    })],
                    ..Default::default()
                })
                .forget_lifetime();
            self.renderer.render(&mut pass, &jobs, &screen);
        }
        commands.push(encoder.finish());
        queue.submit(commands);
    }
}

/// A control change's path as the window runs it: the colormap of the first layer set to
/// `map`, the panel's egui pass, then the renderer's frame, waited for. Returns the time to the
/// end of the egui pass, the whole time, and the frame's stats.
fn colormap_path(
    renderer: &mut Renderer,
    egui_pass: &mut EguiPass,
    view: &mut View,
    map: Colormap,
    camera: &dyn sluice_render::Camera,
    target: &sluice_render::RenderTarget,
) -> Res<(Duration, Duration, sluice_render::FrameStats)> {
    let start = Instant::now();
    layers::set_colormap(&mut view.scene, view.layers[0].node, map);
    egui_pass.run(renderer, view)?;
    let egui = start.elapsed();
    let stats = renderer.render(&view.scene, camera, target)?;
    renderer.wait_idle()?;
    Ok((egui, start.elapsed(), stats))
}

fn main() -> Res<()> {
    let iters: usize = std::env::var("SLUICE_BENCH_ITERS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(10)
        .max(1);
    let dir = tempfile::tempdir()?;
    let npy = dir.path().join("big.npy");
    let field = Array2::from_shape_fn((SIDE, SIDE), |(y, x)| {
        ((x as f32 / 97.0).sin() + (y as f32 / 131.0).cos()) * 0.5
    });
    {
        let mut f = std::io::BufWriter::new(std::fs::File::create(&npy)?);
        f.write_all(&npy_header(ElementType::F32, &[SIDE, SIDE]))?;
        for v in field.iter() {
            f.write_all(&v.to_le_bytes())?;
        }
    }
    let mut renderer = Renderer::with_options(sluice_render::RendererOptions::from_env()?)?;
    println!(
        "sluice view bench; adapter: {}",
        renderer.adapter_info().name
    );

    // 3. First frame: `sluice view`'s path against tour's.
    let mut view_times = Vec::new();
    let mut tour_times = Vec::new();
    for i in 0..=iters {
        let start = Instant::now();
        let inputs = vec![input::open(
            npy.to_str().ok_or("path")?,
            &OpenOptions::default(),
        )?];
        let view = View::build(&inputs, &Settings::default())?;
        let target = renderer.create_target(WINDOW[0], WINDOW[1])?;
        renderer.render(&view.scene, &view.fit_camera(WINDOW), &target)?;
        renderer.wait_idle()?;
        let t_view = start.elapsed();
        drop(view);

        let start = Instant::now();
        let source = Arc::new(ArraySource::new(field.clone())?);
        let mut scene = Scene::new();
        scene.add(Image::new(source).with_clim(-1.0, 1.0)?);
        let target = renderer.create_target(WINDOW[0], WINDOW[1])?;
        let camera = PanZoomCamera::fit(Vec2::ZERO, Vec2::splat(SIDE as f32), WINDOW);
        renderer.render(&scene, &camera, &target)?;
        renderer.wait_idle()?;
        let t_tour = start.elapsed();
        drop(scene);
        if i > 0 {
            view_times.push(t_view);
            tour_times.push(t_tour);
        }
    }
    let (v, t) = (median(view_times), median(tour_times));
    println!(
        "first frame of a {SIDE}x{SIDE} f32 .npy: sluice view path {:.1} ms, tour path {:.1} ms \
         (includes the array copy), ratio {:.2} (limit 1.5)",
        ms(v),
        ms(t),
        ms(v) / ms(t)
    );

    // 1 and 2: the window's scene, drawn at the window's size.
    let inputs = vec![input::open(
        npy.to_str().ok_or("path")?,
        &OpenOptions::default(),
    )?];
    let mut view = View::build(&inputs, &Settings::default())?;
    let target = renderer.create_target(WINDOW[0], WINDOW[1])?;
    let camera = view.fit_camera(WINDOW);
    renderer.render(&view.scene, &camera, &target)?;
    renderer.wait_idle()?;
    let mut egui_pass = EguiPass::new(renderer.device());
    egui_pass.run(&renderer, &mut view)?;

    let (mut idle, mut full, mut change, mut egui_only) = (vec![], vec![], vec![], vec![]);
    // The ceiling in the window's order: an egui pass, then the whole offscreen frame.
    let mut ceiling = Vec::new();
    // The control: the change's path (set the colormap, egui pass, the renderer's frame) with
    // the colormap the image already has, so nothing changes and nothing is drawn: the
    // renderer's frame right after an egui pass, with nothing to do.
    let mut same = Vec::new();
    // The change's two halves: its egui pass, and the renderer's frame after it.
    let (mut change_egui, mut change_render) = (vec![], vec![]);
    let (mut paired, mut paired_apart, mut paired_plain) = (Vec::new(), Vec::new(), Vec::new());
    // The ceiling's egui pass with nothing new in it, then the whole frame.
    let mut ceiling_plain = Vec::new();
    let mut idle_pixels = 0;
    let maps = [Colormap::Viridis, Colormap::Magma];
    // Shown by the ceiling's egui pass: names neither the pass before it nor the change's
    // pass after it shows.
    let shown = [Colormap::Inferno, Colormap::Plasma];
    for i in 0..=iters {
        let start = Instant::now();
        let stats = renderer.render(&view.scene, &camera, &target)?;
        renderer.wait_idle()?;
        let t_idle = start.elapsed();
        idle_pixels += stats.pixels_drawn;

        target.invalidate();
        let start = Instant::now();
        renderer.render(&view.scene, &camera, &target)?;
        renderer.wait_idle()?;
        let t_full = start.elapsed();

        let start = Instant::now();
        egui_pass.run(&renderer, &mut view)?;
        let t_egui = start.elapsed();

        let start = Instant::now();
        egui_pass.run(&renderer, &mut view)?;
        target.invalidate();
        renderer.render(&view.scene, &camera, &target)?;
        renderer.wait_idle()?;
        let t_ceiling_plain = start.elapsed();

        let node = view.layers[0].node;
        let current = layers::colormap(&view.scene, node).ok_or("the layer has a colormap")?;
        let start = Instant::now();
        layers::set_colormap(&mut view.scene, node, shown[i % 2].clone());
        egui_pass.run(&renderer, &mut view)?;
        layers::set_colormap(&mut view.scene, node, current);
        target.invalidate();
        let stats = renderer.render(&view.scene, &camera, &target)?;
        renderer.wait_idle()?;
        let t_ceiling = start.elapsed();
        if stats.bytes_uploaded != 0 {
            return Err(format!(
                "the ceiling's frame uploaded {} bytes",
                stats.bytes_uploaded
            )
            .into());
        }

        let (t_change_egui, t_change, stats) = colormap_path(
            &mut renderer,
            &mut egui_pass,
            &mut view,
            maps[i % 2].clone(),
            &camera,
            &target,
        )?;
        if stats.bytes_uploaded != 0 {
            return Err(
                format!("a colormap change uploaded {} bytes", stats.bytes_uploaded).into(),
            );
        }

        let (t_same_egui, t_same_all, stats) = colormap_path(
            &mut renderer,
            &mut egui_pass,
            &mut view,
            maps[i % 2].clone(),
            &camera,
            &target,
        )?;
        let t_same = t_same_all - t_same_egui;
        if stats.pixels_drawn != 0 {
            return Err(format!(
                "setting the same colormap again drew {} pixels",
                stats.pixels_drawn
            )
            .into());
        }
        if i > 0 {
            paired.push(t_change.as_secs_f64() / t_ceiling.as_secs_f64());
            paired_apart.push(t_change.as_secs_f64() / (t_full + t_egui).as_secs_f64());
            paired_plain.push(t_change.as_secs_f64() / t_ceiling_plain.as_secs_f64());
            ceiling_plain.push(t_ceiling_plain);
            idle.push(t_idle);
            full.push(t_full);
            change.push(t_change);
            egui_only.push(t_egui);
            ceiling.push(t_ceiling);
            change_egui.push(t_change_egui);
            change_render.push(t_change - t_change_egui);
            same.push(t_same);
        }
    }
    let least = |v: &[Duration]| ms(v.iter().copied().min().unwrap_or_default());
    let middle = |mut v: Vec<f64>| {
        v.sort_by(f64::total_cmp);
        v[v.len() / 2]
    };
    let minima = least(&change) / least(&ceiling);
    let (change_egui, change_render, same) =
        (median(change_egui), median(change_render), median(same));
    let (idle, full, change, egui_only, ceiling) = (
        median(idle),
        median(full),
        median(change),
        median(egui_only),
        median(ceiling),
    );
    println!(
        "nothing changed: {:.2} ms and {idle_pixels} pixels drawn in all, whole frame {:.2} ms, \
         ratio {:.3}",
        ms(idle),
        ms(full),
        ms(idle) / ms(full)
    );
    println!(
        "control change: {:.2} ms (0 bytes uploaded), ceiling (the egui pass, showing a name it \
         did not show before, then the whole offscreen frame) {:.2} ms; median of the iterations' ratios {:.3} (limit 1.0); ratio \
         of the medians {:.3}, of the fastest iterations {minima:.3}",
        ms(change),
        ms(ceiling),
        middle(paired),
        ms(change) / ms(ceiling),
    );
    println!(
        "  against an egui pass with nothing new in it, then the whole frame ({:.2} ms): median \
         of the iterations' ratios {:.3}",
        ms(median(ceiling_plain)),
        middle(paired_plain)
    );
    println!(
        "  against the two measured apart (the whole frame right after another frame {:.2} ms, \
         the egui pass {:.2} ms): median of the iterations' ratios {:.3}",
        ms(full),
        ms(egui_only),
        middle(paired_apart)
    );
    println!(
        "  the change's halves (medians): its egui pass {:.3} ms against the egui pass alone \
         {:.3}; the renderer's frame after it {:.3} ms against the whole offscreen frame {:.3}",
        ms(change_egui),
        ms(egui_only),
        ms(change_render),
        ms(full)
    );
    println!(
        "  the renderer's frame right after an egui pass with nothing to draw (the same \
         colormap set again): {:.3} ms, against {:.3} right after another frame",
        ms(same),
        ms(idle)
    );
    Ok(())
}
