//! A window (winit): a 2048 x 2048 field through a colormap, with a brush that paints into the
//! source every frame. Drag with the left button to pan, scroll to zoom about the cursor,
//! `Escape` to quit. The title shows frames per second and what the last frame uploaded and
//! redrew: a painted stroke uploads its chunk and redraws only the pixels around it.
//!
//! `cargo run --release --example viewer`
//!
//! With `SLUICE_VIEWER_FRAMES=N` it quits after N frames and writes the last one to
//! `target/sluice-out/viewer.png` (how it is checked without a screen, under Xvfb).
//!
//! sluice renders into a `RenderTarget`; the window shows it by drawing that target's texture
//! into the surface (a full-window triangle), so the same renderer serves windows and files.

use std::sync::Arc;
use std::time::Instant;

use sluice::ndarray::Array2;
use sluice::prelude::*;
use sluice::{wgpu, RenderTarget, RendererOptions};
use winit::application::ApplicationHandler;
use winit::event::{ElementState, MouseButton, MouseScrollDelta, WindowEvent};
use winit::event_loop::{ActiveEventLoop, ControlFlow, EventLoop};
use winit::keyboard::{Key, NamedKey};
use winit::window::{Window, WindowId};

type Res<T> = Result<T, Box<dyn std::error::Error>>;

const SIDE: usize = 2048;
const BRUSH: usize = 32;

const BLIT_WGSL: &str = r#"
@group(0) @binding(0) var frame: texture_2d<f32>;
struct Out { @builtin(position) pos: vec4<f32> };
@vertex fn vs(@builtin(vertex_index) i: u32) -> Out {
    let p = vec2<f32>(f32((i << 1u) & 2u), f32(i & 2u));
    return Out(vec4<f32>(p * 2.0 - 1.0, 0.0, 1.0));
}
@fragment fn fs(in: Out) -> @location(0) vec4<f32> {
    return textureLoad(frame, vec2<i32>(in.pos.xy), 0);
}
"#;

/// The field: smooth waves, values in about [-2, 2].
fn field() -> Array2<f32> {
    Array2::from_shape_fn((SIDE, SIDE), |(y, x)| {
        let (u, v) = (x as f32 / 97.0, y as f32 / 131.0);
        u.sin() + v.cos() + 0.5 * ((u + v) * 0.7).sin()
    })
}

/// Everything that lives as long as the window.
struct Viewer {
    window: Arc<Window>,
    surface: wgpu::Surface<'static>,
    config: wgpu::SurfaceConfiguration,
    renderer: Renderer,
    target: RenderTarget,
    blit: wgpu::RenderPipeline,
    blit_group: wgpu::BindGroup,
    scene: Scene,
    source: Arc<ArraySource>,
    camera: PanZoomCamera,
    cursor: Vec2,
    dragging: bool,
    frames: u64,
    since: Instant,
    since_frames: u64,
}

impl Viewer {
    fn new(window: Arc<Window>) -> Res<Self> {
        let options = RendererOptions::from_env()?;
        let mut desc = wgpu::InstanceDescriptor::new_without_display_handle();
        if let Some(backends) = options.backends {
            desc.backends = backends;
        }
        let instance = wgpu::Instance::new(desc);
        let surface = instance.create_surface(window.clone())?;
        let adapter = pollster::block_on(instance.request_adapter(&wgpu::RequestAdapterOptions {
            power_preference: wgpu::PowerPreference::HighPerformance,
            compatible_surface: Some(&surface),
            force_fallback_adapter: false,
            apply_limit_buckets: false,
        }))?;
        let (device, queue) =
            pollster::block_on(adapter.request_device(&wgpu::DeviceDescriptor {
                label: Some("sluice viewer"),
                required_limits: adapter.limits(),
                ..Default::default()
            }))?;
        let caps = surface.get_capabilities(&adapter);
        // A format without sRGB encoding: colormap entries reach the screen as in the PNGs.
        let format = caps
            .formats
            .iter()
            .copied()
            .find(|f| !f.is_srgb())
            .unwrap_or(caps.formats[0]);
        let size = window.inner_size();
        let config = wgpu::SurfaceConfiguration {
            usage: wgpu::TextureUsages::RENDER_ATTACHMENT,
            format,
            color_space: wgpu::SurfaceColorSpace::Auto,
            width: size.width.max(1),
            height: size.height.max(1),
            present_mode: wgpu::PresentMode::AutoVsync,
            desired_maximum_frame_latency: 2,
            alpha_mode: caps.alpha_modes[0],
            view_formats: vec![],
        };
        surface.configure(&device, &config);
        let module = device.create_shader_module(wgpu::ShaderModuleDescriptor {
            label: Some("viewer blit"),
            source: wgpu::ShaderSource::Wgsl(BLIT_WGSL.into()),
        });
        let blit = device.create_render_pipeline(&wgpu::RenderPipelineDescriptor {
            label: Some("viewer blit"),
            layout: None,
            vertex: wgpu::VertexState {
                module: &module,
                entry_point: Some("vs"),
                compilation_options: Default::default(),
                buffers: &[],
            },
            primitive: Default::default(),
            depth_stencil: None,
            multisample: Default::default(),
            fragment: Some(wgpu::FragmentState {
                module: &module,
                entry_point: Some("fs"),
                compilation_options: Default::default(),
                targets: &[Some(format.into())],
            }),
            multiview_mask: None,
            cache: None,
        });
        let renderer = Renderer::from_device(adapter, device, queue, &options);
        println!("adapter: {}", renderer.adapter_info().name);

        let source = Arc::new(ArraySource::new(field())?);
        let mut scene = Scene::new();
        scene.set_background([0.08, 0.08, 0.1, 1.0]);
        scene.add(
            Image::new(source.clone())
                .with_clim(-2.0, 2.5)?
                .with_colormap(Colormap::Viridis),
        );
        let target = renderer.create_target(config.width, config.height)?;
        let blit_group = Self::blit_group(&renderer, &blit, &target);
        let camera = PanZoomCamera::fit(
            Vec2::ZERO,
            Vec2::splat(SIDE as f32),
            [config.width, config.height],
        );
        Ok(Viewer {
            window,
            surface,
            config,
            renderer,
            target,
            blit,
            blit_group,
            scene,
            source,
            camera,
            cursor: Vec2::ZERO,
            dragging: false,
            frames: 0,
            since: Instant::now(),
            since_frames: 0,
        })
    }

    fn blit_group(
        renderer: &Renderer,
        blit: &wgpu::RenderPipeline,
        target: &RenderTarget,
    ) -> wgpu::BindGroup {
        let view = target.texture().create_view(&Default::default());
        renderer
            .device()
            .create_bind_group(&wgpu::BindGroupDescriptor {
                label: Some("viewer blit"),
                layout: &blit.get_bind_group_layout(0),
                entries: &[wgpu::BindGroupEntry {
                    binding: 0,
                    resource: wgpu::BindingResource::TextureView(&view),
                }],
            })
    }

    fn resize(&mut self, width: u32, height: u32) -> Res<()> {
        if width == 0 || height == 0 {
            return Ok(());
        }
        self.config.width = width;
        self.config.height = height;
        self.surface.configure(self.renderer.device(), &self.config);
        self.target = self.renderer.create_target(width, height)?;
        self.blit_group = Self::blit_group(&self.renderer, &self.blit, &self.target);
        Ok(())
    }

    /// Paints the brush along a circle, one stamp per frame.
    fn paint(&self) -> Res<()> {
        let t = self.frames as f32 * 0.05;
        let r = SIDE as f32 * 0.3;
        let c = SIDE as f32 / 2.0;
        let x = (c + r * t.cos()) as usize;
        let y = (c + r * (1.3 * t).sin()) as usize;
        let stamp = Array2::from_elem((BRUSH, BRUSH), 2.5f32 * (0.5 + 0.5 * (3.0 * t).sin()));
        self.source.write(&[y, x], stamp.view())?;
        Ok(())
    }

    fn redraw(&mut self) -> Res<()> {
        self.paint()?;
        let stats = self
            .renderer
            .render(&self.scene, &self.camera, &self.target)?;
        let frame = match self.surface.get_current_texture() {
            wgpu::CurrentSurfaceTexture::Success(frame)
            | wgpu::CurrentSurfaceTexture::Suboptimal(frame) => frame,
            other => {
                // Lost or outdated (a resize in flight): configure again, draw next time.
                let _ = other;
                self.surface.configure(self.renderer.device(), &self.config);
                return Ok(());
            }
        };
        let view = frame.texture.create_view(&Default::default());
        let mut encoder = self
            .renderer
            .device()
            .create_command_encoder(&Default::default());
        {
            let mut pass = encoder.begin_render_pass(&wgpu::RenderPassDescriptor {
                label: Some("viewer present"),
                color_attachments: &[Some(wgpu::RenderPassColorAttachment {
                    view: &view,
                    depth_slice: None,
                    resolve_target: None,
                    ops: wgpu::Operations {
                        load: wgpu::LoadOp::Clear(wgpu::Color::BLACK),
                        store: wgpu::StoreOp::Store,
                    },
                })],
                ..Default::default()
            });
            pass.set_pipeline(&self.blit);
            pass.set_bind_group(0, &self.blit_group, &[]);
            pass.draw(0..3, 0..1);
        }
        self.renderer.queue().submit([encoder.finish()]);
        self.window.pre_present_notify();
        self.renderer.queue().present(frame);
        self.frames += 1;
        self.since_frames += 1;
        let elapsed = self.since.elapsed().as_secs_f64();
        if elapsed >= 0.5 {
            self.window.set_title(&format!(
                "sluice viewer: {:.0} fps; last frame uploaded {} bytes, redrew {} of {} pixels",
                self.since_frames as f64 / elapsed,
                stats.bytes_uploaded,
                stats.pixels_drawn,
                u64::from(self.config.width) * u64::from(self.config.height)
            ));
            self.since = Instant::now();
            self.since_frames = 0;
        }
        Ok(())
    }
}

struct App {
    viewer: Option<Viewer>,
    /// Quit after this many frames (`SLUICE_VIEWER_FRAMES`), writing the last one to a PNG.
    stop_after: Option<u64>,
    error: Option<Box<dyn std::error::Error>>,
}

impl App {
    fn fail(&mut self, event_loop: &ActiveEventLoop, e: Box<dyn std::error::Error>) {
        self.error = Some(e);
        event_loop.exit();
    }
}

impl ApplicationHandler for App {
    fn resumed(&mut self, event_loop: &ActiveEventLoop) {
        if self.viewer.is_some() {
            return;
        }
        let attributes = Window::default_attributes()
            .with_title("sluice viewer")
            .with_inner_size(winit::dpi::LogicalSize::new(1024.0, 768.0));
        let made = event_loop
            .create_window(attributes)
            .map_err(Into::into)
            .and_then(|w| Viewer::new(Arc::new(w)));
        match made {
            Ok(viewer) => self.viewer = Some(viewer),
            Err(e) => self.fail(event_loop, e),
        }
    }

    fn window_event(&mut self, event_loop: &ActiveEventLoop, _: WindowId, event: WindowEvent) {
        let Some(viewer) = self.viewer.as_mut() else {
            return;
        };
        let viewport = [viewer.config.width, viewer.config.height];
        match event {
            WindowEvent::CloseRequested => event_loop.exit(),
            WindowEvent::KeyboardInput { event, .. }
                if event.logical_key == Key::Named(NamedKey::Escape) =>
            {
                event_loop.exit()
            }
            WindowEvent::Resized(size) => {
                if let Err(e) = viewer.resize(size.width, size.height) {
                    self.fail(event_loop, e);
                }
            }
            WindowEvent::MouseInput {
                state,
                button: MouseButton::Left,
                ..
            } => viewer.dragging = state == ElementState::Pressed,
            WindowEvent::CursorMoved { position, .. } => {
                let now = Vec2::new(position.x as f32, position.y as f32);
                if viewer.dragging {
                    viewer.camera.pan_pixels(now - viewer.cursor);
                }
                viewer.cursor = now;
            }
            WindowEvent::MouseWheel { delta, .. } => {
                let lines = match delta {
                    MouseScrollDelta::LineDelta(_, y) => y,
                    MouseScrollDelta::PixelDelta(p) => p.y as f32 / 40.0,
                };
                let cursor = viewer.cursor;
                viewer
                    .camera
                    .zoom_about(1.15f32.powf(lines), cursor, viewport);
            }
            WindowEvent::RedrawRequested => {
                if let Err(e) = viewer.redraw() {
                    self.fail(event_loop, e);
                    return;
                }
                if self.stop_after.is_some_and(|n| viewer.frames >= n) {
                    let saved = save_last_frame(viewer);
                    if let Err(e) = saved {
                        self.fail(event_loop, e);
                    } else {
                        event_loop.exit();
                    }
                }
            }
            _ => {}
        }
    }

    fn about_to_wait(&mut self, _: &ActiveEventLoop) {
        if let Some(viewer) = &self.viewer {
            viewer.window.request_redraw();
        }
    }
}

fn save_last_frame(viewer: &Viewer) -> Res<()> {
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("target/sluice-out");
    std::fs::create_dir_all(&dir)?;
    let path = dir.join("viewer.png");
    viewer.renderer.read_image(&viewer.target)?.save(&path)?;
    println!(
        "{} frames; the last one is in {}",
        viewer.frames,
        path.display()
    );
    Ok(())
}

fn main() -> Res<()> {
    let stop_after = match std::env::var("SLUICE_VIEWER_FRAMES") {
        Ok(v) => Some(
            v.trim()
                .parse()
                .map_err(|e| format!("SLUICE_VIEWER_FRAMES={v:?}: {e}"))?,
        ),
        Err(_) => None,
    };
    let event_loop = EventLoop::new()?;
    event_loop.set_control_flow(ControlFlow::Poll);
    let mut app = App {
        viewer: None,
        stop_after,
        error: None,
    };
    event_loop.run_app(&mut app)?;
    match app.error {
        Some(e) => Err(e),
        None => Ok(()),
    }
}
