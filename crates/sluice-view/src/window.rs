//! The window: winit 0.30 with an egui side panel (egui-winit, egui-wgpu) around the
//! renderer's target, which egui shows as a texture (no blit shader of our own).
//!
//! The event loop sleeps (`ControlFlow::Wait`) until input arrives, egui asks for a repaint, a
//! source wakes the renderer, or a [`RedrawHandle`] is used from another thread: a window left
//! alone costs no CPU and no GPU work.
//!
//! winit allows one event loop per process. The loop is made the first time a thread opens a
//! window, kept by that thread, and run again for each of its later windows
//! (`run_app_on_demand`), one window at a time: a script can show one scene, close it and
//! show the next. Another thread cannot make a second loop (its `show` is an error saying so).

use std::cell::RefCell;
use std::path::PathBuf;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use parking_lot::Mutex;
use sluice_render::glam::{Vec2, Vec3};
use sluice_render::{wgpu, Counters, FrameStats, RenderTarget, Renderer, RendererOptions, Scene};
use winit::application::ApplicationHandler;
use winit::event::WindowEvent;
use winit::event_loop::{ActiveEventLoop, ControlFlow, EventLoop, EventLoopProxy};
use winit::platform::run_on_demand::EventLoopExtRunOnDemand;
use winit::window::{Window, WindowId};

use crate::error::ViewError;
use crate::layers::{Layer, View, ViewCamera};
use crate::panel::{self, Status};

/// What another thread asks of a running window through its [`RedrawHandle`], naming the run
/// of the event loop it is for (a wake sent as one window closed is not for the next).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Wake {
    /// Draw a frame.
    Redraw(u64),
    /// Close the window.
    Close(u64),
}

thread_local! {
    /// This thread's event loop, once it opened a window: run again for its next windows.
    static EVENT_LOOP: RefCell<Option<EventLoop<Wake>>> = const { RefCell::new(None) };
}

/// Runs of event loops so far (each window is one).
static RUNS: AtomicU64 = AtomicU64::new(0);

/// Schedules a frame of a running (or soon running) [`Viewer`], or closes it, from any thread:
/// call [`RedrawHandle::request_redraw`] after writing into a source the viewer shows.
#[derive(Clone, Default)]
pub struct RedrawHandle {
    state: Arc<Mutex<HandleState>>,
}

/// Where the window of a [`RedrawHandle`] stands, under one lock: a close asked for before the
/// window's loop runs is kept for it (another thread may close a window whose thread is still
/// getting ready to open it).
#[derive(Default)]
struct HandleState {
    /// The loop's proxy and run while the window runs.
    proxy: Option<RunProxy>,
    /// [`RedrawHandle::close`] came while no loop ran (before the window opened; one after
    /// it closed is never read: a viewer shows one window).
    close_pending: bool,
}

/// A proxy of the event loop and the run of it that the window is.
type RunProxy = (EventLoopProxy<Wake>, u64);

impl RedrawHandle {
    /// Asks the window for a frame; does nothing before the window opens or after it closed.
    pub fn request_redraw(&self) {
        if let Some((proxy, run)) = self.state.lock().proxy.as_ref() {
            // Fails only once the loop is gone: the window is closed then anyway.
            let _ = proxy.send_event(Wake::Redraw(*run));
        }
    }

    /// Closes the window as its user would: the frame being drawn ends, then [`Viewer::show`]
    /// returns its report. Asked before the window opens, the window closes as it opens,
    /// drawing no frame; after it closed, this does nothing.
    pub fn close(&self) {
        let mut state = self.state.lock();
        match state.proxy.as_ref() {
            // Fails only once the loop is gone: the window is closed then anyway.
            Some((proxy, run)) => drop(proxy.send_event(Wake::Close(*run))),
            None => state.close_pending = true,
        }
    }

    /// The run `run` of the loop starts: wakes go to it from now on. Whether a close came
    /// before it (the run then closes at once).
    fn start(&self, proxy: EventLoopProxy<Wake>, run: u64) -> bool {
        let mut state = self.state.lock();
        state.proxy = Some((proxy, run));
        std::mem::take(&mut state.close_pending)
    }

    /// The run ended: later wakes do nothing.
    fn end(&self) {
        self.state.lock().proxy = None;
    }
}

/// What a per-frame callback sees and may change.
pub struct Frame<'a> {
    /// The scene shown; change settings or sources here.
    pub scene: &'a mut Scene,
    /// Frames drawn before this one.
    pub index: u64,
    /// What the previous frame did.
    pub last: FrameStats,
    /// The renderer's counters after the previous frame.
    pub counters: Counters,
    /// Set to draw another frame right after this one (an animation).
    pub animate: bool,
}

type FrameCallback = Box<dyn FnMut(&mut Frame<'_>)>;

/// What a closed window reports.
#[derive(Debug, Default)]
pub struct ViewerReport {
    /// Frames drawn.
    pub frames: u64,
    /// Frames in which the renderer drew anything.
    pub frames_rendered: u64,
    /// The part of the last presented window image that shows the scene (read back from the
    /// window's surface), when [`Viewer::quit_after_frames`] ended the run and the surface
    /// allows reading back.
    pub last_window_image: Option<image::RgbaImage>,
    /// The last frame of the renderer's target, when [`Viewer::quit_after_frames`] ended the
    /// run.
    pub last_frame: Option<image::RgbaImage>,
    /// The camera of the last frame.
    pub camera: Option<ViewCamera>,
}

/// A window showing a scene, with mouse cameras and a side panel of layer controls.
///
/// ```no_run
/// use std::sync::Arc;
/// use sluice_core::{ndarray::Array2, ArraySource};
/// use sluice_render::{Image, Scene};
/// use sluice_view::Viewer;
///
/// let source = Arc::new(ArraySource::new(Array2::<f32>::zeros((256, 256)))?);
/// let mut scene = Scene::new();
/// let node = scene.add(Image::new(source));
/// Viewer::new().layer(node, "zeros").show(scene)?;
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
pub struct Viewer {
    title: String,
    size: [u32; 2],
    quit_after: Option<u64>,
    save_last: Option<PathBuf>,
    named: Vec<(sluice_render::NodeId, String)>,
    on_frame: Option<FrameCallback>,
    handle: RedrawHandle,
    controls: bool,
}

impl Default for Viewer {
    fn default() -> Self {
        Viewer::new()
    }
}

impl Viewer {
    /// A 1280 x 800 window titled "sluice" with the control panel.
    pub fn new() -> Self {
        Viewer {
            title: "sluice".into(),
            size: [1280, 800],
            quit_after: None,
            save_last: None,
            named: Vec::new(),
            on_frame: None,
            handle: RedrawHandle::default(),
            controls: true,
        }
    }

    /// The window's title.
    #[must_use]
    pub fn title(mut self, title: impl Into<String>) -> Self {
        self.title = title.into();
        self
    }

    /// The window's inner size in logical pixels.
    #[must_use]
    pub fn size(mut self, width: u32, height: u32) -> Self {
        self.size = [width.max(1), height.max(1)];
        self
    }

    /// Closes the window after `frames` complete frames, keeping the last one in the report
    /// (how it is checked without a person: under Xvfb). A frame is complete when it left
    /// nothing to load: no upload pending and no chunk of a lazy source (a Zarr store)
    /// queued or loading; frames drawn while a store loads are drawn but not counted, so the
    /// last frame shows all the data.
    #[must_use]
    pub fn quit_after_frames(mut self, frames: u64) -> Self {
        self.quit_after = Some(frames);
        self
    }

    /// With [`Viewer::quit_after_frames`], also writes the last frame to `path` as PNG.
    #[must_use]
    pub fn save_last_frame(mut self, path: impl Into<PathBuf>) -> Self {
        self.save_last = Some(path.into());
        self
    }

    /// Lists `node` of the scene in the control panel as `name`.
    #[must_use]
    pub fn layer(mut self, node: sluice_render::NodeId, name: impl Into<String>) -> Self {
        self.named.push((node, name.into()));
        self
    }

    /// Hides the control panel and status bar: the window shows the scene only.
    #[must_use]
    pub fn without_controls(mut self) -> Self {
        self.controls = false;
        self
    }

    /// Calls `f` before every frame (to change the scene or write sources).
    #[must_use]
    pub fn on_frame(mut self, f: impl FnMut(&mut Frame<'_>) + 'static) -> Self {
        self.on_frame = Some(Box::new(f));
        self
    }

    /// A handle that schedules a frame from any thread.
    pub fn redraw_handle(&self) -> RedrawHandle {
        self.handle.clone()
    }

    /// Opens the window on `scene` and runs until it is closed; the camera is fitted to the
    /// layers named with [`Viewer::layer`], or to every image and volume in the scene.
    pub fn show(self, scene: Scene) -> Result<ViewerReport, ViewError> {
        let mut layers = Vec::new();
        let mut max = Vec3::ZERO;
        for (node, name) in &self.named {
            let (kind, extent, source) = match scene.visual(*node) {
                Some(sluice_render::Visual::Image(i)) => {
                    let [_, h, w] = i.source().layout().shape().padded();
                    let kind = match (i.slice(), i.source().layout().shape().padded()[0]) {
                        (Some(_), depth) => crate::layers::LayerKind::Plane { depth },
                        _ => crate::layers::LayerKind::Image,
                    };
                    (kind, Vec3::new(w as f32, h as f32, 0.0), i.source().clone())
                }
                Some(sluice_render::Visual::Volume(v)) => {
                    let [d, h, w] = v.source().layout().shape().padded();
                    (
                        crate::layers::LayerKind::Volume,
                        Vec3::new(w as f32, h as f32, d as f32),
                        v.source().clone(),
                    )
                }
                _ => continue,
            };
            max = max.max(extent);
            layers.push(Layer {
                name: name.clone(),
                node: *node,
                kind,
                visible: true,
                stats: crate::layers::Stats::scan(&source),
                extent,
                store: None,
            });
        }
        if layers.is_empty() {
            for (visual, transform) in scene.draw_list() {
                let corner = match visual {
                    sluice_render::Visual::Image(i) => {
                        let [_, h, w] = i.source().layout().shape().padded();
                        Vec3::new(w as f32, h as f32, 0.0)
                    }
                    sluice_render::Visual::Volume(v) => {
                        let [d, h, w] = v.source().layout().shape().padded();
                        Vec3::new(w as f32, h as f32, d as f32)
                    }
                    _ => continue,
                };
                max = max.max(transform.transform_point3(corner));
            }
        }
        let view = View {
            scene,
            layers,
            bounds: (Vec3::ZERO, max.max(Vec3::new(1.0, 1.0, 0.0))),
        };
        self.show_view(view)
    }

    /// Opens the window on a [`View`] (layers with their statistics, as the command line
    /// builds them) and runs until it is closed.
    ///
    /// The first window of a thread makes the process's event loop (winit allows one); later
    /// windows of the same thread run it again. From another thread once the loop exists,
    /// this is an error ([`ViewError::Window`]) saying so.
    pub fn show_view(self, view: View) -> Result<ViewerReport, ViewError> {
        if self.handle.state.lock().close_pending {
            // Closed before it opened: no window, and no event loop made for it. (A close
            // arriving after this look is taken by `start` below.)
            return Ok(ViewerReport::default());
        }
        let mut event_loop = match EVENT_LOOP.with(|l| l.borrow_mut().take()) {
            Some(event_loop) => event_loop,
            None => new_event_loop()?,
        };
        event_loop.set_control_flow(ControlFlow::Wait);
        let run_id = RUNS.fetch_add(1, Ordering::Relaxed);
        let handle = self.handle.clone();
        let closed = handle.start(event_loop.create_proxy(), run_id);
        let mut app = App {
            viewer: self,
            view: Some(view),
            window: None,
            run: run_id,
            closed: false,
            error: None,
            report: ViewerReport::default(),
        };
        let run = if closed {
            // Closed before it opened: no window, and the loop stays as it was for the next.
            Ok(())
        } else {
            event_loop.run_app_on_demand(&mut app)
        };
        handle.end();
        // The window is gone (closed before the loop exited); the loop stays for the next.
        drop(app.window.take());
        EVENT_LOOP.with(|l| *l.borrow_mut() = Some(event_loop));
        run.map_err(|e| ViewError::Window(e.to_string()))?;
        match app.error {
            Some(e) => Err(e),
            None => Ok(app.report),
        }
    }
}

/// The process's event loop, made on this thread.
fn new_event_loop() -> Result<EventLoop<Wake>, ViewError> {
    let mut builder = EventLoop::<Wake>::with_user_event();
    #[cfg(all(unix, not(target_vendor = "apple"), not(target_os = "android")))]
    {
        // The loop may run off the main thread (tests, Python's block=False); X11 and
        // Wayland allow it.
        use winit::platform::x11::EventLoopBuilderExtX11;
        builder.with_any_thread(true);
    }
    builder.build().map_err(|e| match e {
        winit::error::EventLoopError::RecreationAttempt => ViewError::Window(format!(
            "{e}: winit allows one event loop per process and another thread of this process made it; open windows from that thread ({:?} asked)",
            std::thread::current().name().unwrap_or("an unnamed thread")
        )),
        e => ViewError::Window(e.to_string()),
    })
}

struct App {
    viewer: Viewer,
    view: Option<View>,
    window: Option<WindowState>,
    /// This window's run of the event loop (wakes for other runs are dropped).
    run: u64,
    /// The window was closed (or asked to close before it opened): no window opens after.
    closed: bool,
    error: Option<ViewError>,
    report: ViewerReport,
}

/// Everything that lives as long as the window.
struct WindowState {
    window: Arc<Window>,
    surface: wgpu::Surface<'static>,
    config: wgpu::SurfaceConfiguration,
    renderer: Renderer,
    target: RenderTarget,
    texture_id: egui::TextureId,
    egui_ctx: egui::Context,
    egui_state: egui_winit::State,
    egui_renderer: egui_wgpu::Renderer,
    view: View,
    camera: ViewCamera,
    /// Whether the camera was moved by the mouse since it was last fitted; until then it
    /// follows the central area's size (the panel takes its room after the first frame).
    camera_moved: bool,
    /// The central area's size in physical pixels at the last frame.
    viewport: [u32; 2],
    /// The central area's rectangle in physical pixels at the last frame.
    viewport_rect: [u32; 4],
    status: Status,
    last: FrameStats,
    counters: Counters,
    /// Frames drawn so far.
    frames: u64,
    /// Of those, frames that left nothing to load (see [`Viewer::quit_after_frames`]).
    complete_frames: u64,
    /// egui's texture changes not applied yet.
    pending_textures: egui::TexturesDelta,
    /// The scene's part of the last presented image, when the surface can be read back.
    last_surface: Option<image::RgbaImage>,
}

impl App {
    fn fail(&mut self, event_loop: &ActiveEventLoop, e: ViewError) {
        self.error = Some(e);
        self.close(event_loop);
    }

    /// Closes the window, then ends this run of the event loop: a window dropped before the
    /// loop exits leaves no event behind for the next window's run.
    fn close(&mut self, event_loop: &ActiveEventLoop) {
        self.closed = true;
        self.window = None;
        event_loop.exit();
    }
}

impl ApplicationHandler<Wake> for App {
    fn resumed(&mut self, event_loop: &ActiveEventLoop) {
        if self.window.is_some() || self.closed {
            return;
        }
        let Some(view) = self.view.take() else {
            return;
        };
        let attributes = Window::default_attributes()
            .with_title(self.viewer.title.clone())
            .with_inner_size(winit::dpi::LogicalSize::new(
                self.viewer.size[0] as f64,
                self.viewer.size[1] as f64,
            ));
        let made = event_loop
            .create_window(attributes)
            .map_err(|e| ViewError::Window(e.to_string()))
            .and_then(|w| WindowState::new(Arc::new(w), view, &self.viewer));
        match made {
            Ok(state) => {
                state.window.request_redraw();
                self.window = Some(state);
            }
            Err(e) => self.fail(event_loop, e),
        }
    }

    fn new_events(&mut self, event_loop: &ActiveEventLoop, cause: winit::event::StartCause) {
        // egui asked for a repaint later (an animation, a tooltip): that time has come. Back to
        // sleeping until the next event, or a past deadline would keep the loop spinning.
        if let winit::event::StartCause::ResumeTimeReached { .. } = cause {
            event_loop.set_control_flow(ControlFlow::Wait);
            if let Some(state) = &self.window {
                state.window.request_redraw();
            }
        }
    }

    fn user_event(&mut self, event_loop: &ActiveEventLoop, wake: Wake) {
        match wake {
            Wake::Close(run) if run == self.run => self.close(event_loop),
            Wake::Redraw(run) if run == self.run => {
                if let Some(state) = &self.window {
                    state.window.request_redraw();
                }
            }
            Wake::Close(_) | Wake::Redraw(_) => {}
        }
    }

    fn window_event(&mut self, event_loop: &ActiveEventLoop, id: WindowId, event: WindowEvent) {
        let Some(state) = self.window.as_mut() else {
            return;
        };
        if state.window.id() != id {
            return;
        }
        // egui-winit answers "repaint" to a redraw itself: asking again there would draw
        // forever. Whether the frame needs a next one is decided at its end instead.
        if !matches!(event, WindowEvent::RedrawRequested) {
            let response = state.egui_state.on_window_event(&state.window, &event);
            if response.repaint {
                state.window.request_redraw();
            }
        }
        match event {
            WindowEvent::CloseRequested => self.close(event_loop),
            WindowEvent::Resized(size) => state.resize(size.width, size.height),
            WindowEvent::RedrawRequested => {
                let outcome = state.frame(&mut self.viewer, event_loop);
                self.report.frames += 1;
                match outcome {
                    Err(e) => self.fail(event_loop, e),
                    Ok(drew) => {
                        if drew {
                            self.report.frames_rendered += 1;
                        }
                        if self
                            .viewer
                            .quit_after
                            .is_some_and(|n| state.complete_frames >= n)
                        {
                            let finished = state.finish(&self.viewer, &mut self.report);
                            match finished {
                                Err(e) => self.fail(event_loop, e),
                                Ok(()) => self.close(event_loop),
                            }
                        }
                    }
                }
            }
            _ => {}
        }
    }
}

impl WindowState {
    fn new(window: Arc<Window>, view: View, viewer: &Viewer) -> Result<Self, ViewError> {
        let options = RendererOptions::from_env()?;
        let mut desc = wgpu::InstanceDescriptor::new_without_display_handle();
        if let Some(backends) = options.backends {
            desc.backends = backends;
        }
        let instance = wgpu::Instance::new(desc);
        let surface = instance
            .create_surface(window.clone())
            .map_err(|e| ViewError::Window(format!("creating the surface: {e}")))?;
        let adapter = pollster::block_on(instance.request_adapter(&wgpu::RequestAdapterOptions {
            power_preference: wgpu::PowerPreference::HighPerformance,
            compatible_surface: Some(&surface),
            force_fallback_adapter: false,
            apply_limit_buckets: false,
        }))
        .map_err(|e| ViewError::Window(format!("no adapter can present to the window: {e}")))?;
        let (device, queue) = pollster::block_on(adapter.request_device(&wgpu::DeviceDescriptor {
            label: Some("sluice viewer"),
            required_limits: adapter.limits(),
            ..Default::default()
        }))
        .map_err(|e| ViewError::Window(format!("opening the device: {e}")))?;
        let caps = surface.get_capabilities(&adapter);
        // A format without sRGB encoding: egui-wgpu passes a non-sRGB texture's bytes through
        // unchanged there, so colormap entries reach the screen as in the PNGs.
        let format = caps
            .formats
            .iter()
            .copied()
            .find(|f| !f.is_srgb())
            .or_else(|| caps.formats.first().copied())
            .ok_or_else(|| ViewError::Window("the surface offers no format".into()))?;
        let size = window.inner_size();
        let mut usage = wgpu::TextureUsages::RENDER_ATTACHMENT;
        if viewer.quit_after.is_some() && caps.usages.contains(wgpu::TextureUsages::COPY_SRC) {
            usage |= wgpu::TextureUsages::COPY_SRC;
        }
        let config = wgpu::SurfaceConfiguration {
            usage,
            format,
            color_space: wgpu::SurfaceColorSpace::Auto,
            width: size.width.max(1),
            height: size.height.max(1),
            present_mode: wgpu::PresentMode::AutoVsync,
            desired_maximum_frame_latency: 2,
            alpha_mode: caps
                .alpha_modes
                .first()
                .copied()
                .unwrap_or(wgpu::CompositeAlphaMode::Auto),
            view_formats: vec![],
        };
        surface.configure(&device, &config);
        let renderer = Renderer::from_device(adapter, device, queue, &options);
        let proxy = viewer.handle.clone();
        renderer.set_redraw_notify(Some(Arc::new(move || proxy.request_redraw())));
        let target = renderer.create_target(config.width, config.height)?;
        let mut egui_renderer = egui_wgpu::Renderer::new(
            renderer.device(),
            format,
            egui_wgpu::RendererOptions {
                dithering: false,
                ..Default::default()
            },
        );
        let texture_id = egui_renderer.register_native_texture(
            renderer.device(),
            &target.texture().create_view(&Default::default()),
            wgpu::FilterMode::Nearest,
        );
        let egui_ctx = egui::Context::default();
        let egui_state = egui_winit::State::new(
            egui_ctx.clone(),
            egui::ViewportId::ROOT,
            &window,
            Some(window.scale_factor() as f32),
            None,
            Some(renderer.max_texture_dimension_2d() as usize),
        );
        let viewport = [config.width, config.height];
        let camera = view.fit_camera(viewport);
        Ok(WindowState {
            window,
            surface,
            config,
            renderer,
            target,
            texture_id,
            egui_ctx,
            egui_state,
            egui_renderer,
            view,
            camera,
            camera_moved: false,
            viewport,
            viewport_rect: [0, 0, viewport[0], viewport[1]],
            status: Status::default(),
            last: FrameStats::default(),
            counters: Counters::default(),
            frames: 0,
            complete_frames: 0,
            pending_textures: egui::TexturesDelta::default(),
            last_surface: None,
        })
    }

    fn resize(&mut self, width: u32, height: u32) {
        if width == 0 || height == 0 {
            return;
        }
        self.config.width = width;
        self.config.height = height;
        self.surface.configure(self.renderer.device(), &self.config);
        self.window.request_redraw();
    }

    /// The target at the central area's size (made again when that changed).
    fn fit_target(&mut self, size: [u32; 2]) -> Result<(), ViewError> {
        let size = [size[0].max(1), size[1].max(1)];
        if self.target.size() == size {
            return Ok(());
        }
        self.target = self.renderer.create_target(size[0], size[1])?;
        self.egui_renderer.update_egui_texture_from_wgpu_texture(
            self.renderer.device(),
            &self.target.texture().create_view(&Default::default()),
            wgpu::FilterMode::Nearest,
            self.texture_id,
        );
        Ok(())
    }

    /// One frame: egui's pass (controls change the scene), the scene into the target, egui
    /// onto the surface. Returns whether the renderer drew anything.
    fn frame(
        &mut self,
        viewer: &mut Viewer,
        event_loop: &ActiveEventLoop,
    ) -> Result<bool, ViewError> {
        let started = Instant::now();
        let mut animate = false;
        if let Some(on_frame) = viewer.on_frame.as_mut() {
            let mut frame = Frame {
                scene: &mut self.view.scene,
                index: self.frames,
                last: self.last,
                counters: self.counters,
                animate: false,
            };
            on_frame(&mut frame);
            animate = frame.animate;
        }
        let raw_input = self.egui_state.take_egui_input(&self.window);
        let controls = viewer.controls;
        let status = self.status;
        let texture_id = self.texture_id;
        let target_size = self.target.size();
        let mut central = egui::Rect::NOTHING;
        let mut drag = (Vec2::ZERO, false);
        let mut scroll = (0.0f32, Vec2::ZERO);
        let mut keys = (false, false, false);
        let view = &mut self.view;
        let output = self.egui_ctx.run_ui(raw_input, |ui| {
            if controls {
                egui::Panel::left("sluice layers")
                    .resizable(true)
                    .default_size(260.0)
                    .show(ui, |ui| {
                        egui::ScrollArea::vertical().show(ui, |ui| {
                            panel::layer_controls(ui, &mut view.scene, &mut view.layers);
                        });
                    });
                egui::Panel::bottom("sluice status").show(ui, |ui| panel::status_bar(ui, &status));
            }
            egui::CentralPanel::default()
                .frame(egui::Frame::NONE)
                .show(ui, |ui| {
                    let rect = ui.available_rect_before_wrap();
                    central = rect;
                    let response = ui.allocate_rect(rect, egui::Sense::click_and_drag());
                    let ppp = ui.ctx().pixels_per_point();
                    let d = response.drag_delta() * ppp;
                    if d != egui::Vec2::ZERO {
                        let pan = response.dragged_by(egui::PointerButton::Secondary)
                            || ui.input(|i| i.modifiers.shift);
                        drag = (Vec2::new(d.x, d.y), pan);
                    }
                    if response.hovered() {
                        let (lines, pointer) =
                            ui.input(|i| (i.smooth_scroll_delta.y / 50.0, i.pointer.hover_pos()));
                        if lines != 0.0 {
                            let at = pointer.map_or(rect.center(), |p| p) - rect.min;
                            scroll = (lines, Vec2::new(at.x * ppp, at.y * ppp));
                        }
                    }
                    // The target at one texel per physical pixel of the area.
                    let shown = egui::vec2(target_size[0] as f32, target_size[1] as f32) / ppp;
                    ui.painter().image(
                        texture_id,
                        egui::Rect::from_min_size(rect.min, shown),
                        egui::Rect::from_min_max(egui::pos2(0.0, 0.0), egui::pos2(1.0, 1.0)),
                        egui::Color32::WHITE,
                    );
                });
            if !ui.ctx().egui_wants_keyboard_input() {
                keys = ui.input(|i| {
                    (
                        i.key_pressed(egui::Key::R),
                        i.key_pressed(egui::Key::S),
                        i.key_pressed(egui::Key::Escape),
                    )
                });
            }
        });
        let ppp = output.pixels_per_point;
        let px = |v: f32| (v * ppp).round().max(0.0) as u32;
        self.viewport = [px(central.width()).max(1), px(central.height()).max(1)];
        self.viewport_rect = [
            px(central.min.x),
            px(central.min.y),
            self.viewport[0],
            self.viewport[1],
        ];
        let viewport = self.viewport;
        let resized = self.target.size() != viewport;
        self.fit_target(viewport)?;
        if keys.0 {
            self.camera_moved = false;
        }
        if !self.camera_moved {
            self.camera = self.view.fit_camera(viewport);
        }
        if drag.0 != Vec2::ZERO {
            self.camera.drag(drag.0, drag.1, viewport);
            self.camera_moved = true;
        }
        if scroll.0 != 0.0 {
            self.camera.scroll(scroll.0, scroll.1, viewport);
            self.camera_moved = true;
        }
        if keys.2 {
            event_loop.exit();
        }

        let stats = self
            .renderer
            .render(&self.view.scene, &self.camera, &self.target)?;
        if keys.1 {
            self.screenshot()?;
        }
        self.egui_state
            .handle_platform_output(&self.window, output.platform_output);
        let chunks = crate::chunks::scene_progress(&self.view.scene, &self.renderer);
        let complete = !stats.uploads_pending && chunks.queued + chunks.loading == 0;
        if complete {
            self.complete_frames += 1;
        }
        // The last frame of a counted run is read back from the surface for the report.
        let last_counted = complete && viewer.quit_after.is_some_and(|n| self.complete_frames >= n);
        self.present(output.shapes, output.textures_delta, ppp, last_counted)?;
        self.last = stats;
        self.frames += 1;
        self.counters = self.renderer.counters();
        self.status = Status {
            frame_ms: started.elapsed().as_secs_f64() * 1e3,
            bytes_uploaded: stats.bytes_uploaded,
            resident_bytes: self.counters.resident_bytes,
            gpu_budget: Some(self.counters.gpu_budget),
            page_bytes: self.counters.page_bytes_resident,
            pixels_drawn: stats.pixels_drawn,
            chunks: (&chunks).into(),
        };
        let repaint = output
            .viewport_output
            .get(&egui::ViewportId::ROOT)
            .map_or(Duration::MAX, |v| v.repaint_delay);
        // A run that ends after N frames draws them back to back.
        let counting = viewer.quit_after.is_some();
        if animate
            || counting
            || resized
            || stats.uploads_pending
            || self.renderer.take_redraw_request()
            || repaint.is_zero()
        {
            event_loop.set_control_flow(ControlFlow::Wait);
            self.window.request_redraw();
        } else if repaint < Duration::from_secs(3600) {
            event_loop.set_control_flow(ControlFlow::WaitUntil(Instant::now() + repaint));
        } else {
            event_loop.set_control_flow(ControlFlow::Wait);
        }
        Ok(stats.pixels_drawn > 0)
    }

    /// Draws egui (which shows the target) onto the surface and presents it; with `read_back`,
    /// keeps the scene's part of the presented image for the report.
    fn present(
        &mut self,
        shapes: Vec<egui::epaint::ClippedShape>,
        textures: egui::TexturesDelta,
        ppp: f32,
        read_back: bool,
    ) -> Result<(), ViewError> {
        // Texture changes wait here until a frame applies them (a surface may be unavailable).
        self.pending_textures.append(textures);
        let frame = match self.surface.get_current_texture() {
            wgpu::CurrentSurfaceTexture::Success(frame)
            | wgpu::CurrentSurfaceTexture::Suboptimal(frame) => frame,
            _ => {
                // Lost or outdated (a resize in flight): configure again, draw next time.
                self.surface.configure(self.renderer.device(), &self.config);
                self.window.request_redraw();
                return Ok(());
            }
        };
        let device = self.renderer.device().clone();
        let queue = self.renderer.queue().clone();
        let paint_jobs = self.egui_ctx.tessellate(shapes, ppp);
        let screen = egui_wgpu::ScreenDescriptor {
            size_in_pixels: [self.config.width, self.config.height],
            pixels_per_point: ppp,
        };
        let mut textures = std::mem::take(&mut self.pending_textures);
        for (id, deltas) in textures.set.drain() {
            for delta in deltas {
                self.egui_renderer
                    .update_texture(&device, &queue, id, &delta);
            }
        }
        let mut encoder = device.create_command_encoder(&wgpu::CommandEncoderDescriptor {
            label: Some("sluice viewer egui"),
        });
        let mut commands =
            self.egui_renderer
                .update_buffers(&device, &queue, &mut encoder, &paint_jobs, &screen);
        let view = frame.texture.create_view(&Default::default());
        {
            let mut pass = encoder
                .begin_render_pass(&wgpu::RenderPassDescriptor {
                    label: Some("sluice viewer egui"),
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
                })
                .forget_lifetime();
            self.egui_renderer.render(&mut pass, &paint_jobs, &screen);
        }
        commands.push(encoder.finish());
        queue.submit(commands);
        for id in textures.free.drain() {
            self.egui_renderer.free_texture(&id);
        }
        self.last_surface = None;
        if read_back && self.config.usage.contains(wgpu::TextureUsages::COPY_SRC) {
            self.last_surface = Some(read_texture(
                &device,
                &queue,
                &frame.texture,
                self.viewport_rect,
                self.config.format,
            )?);
        }
        self.window.pre_present_notify();
        queue.present(frame);
        Ok(())
    }

    /// Writes the target to `sluice-screenshot-N.png` in the working directory (key S).
    fn screenshot(&self) -> Result<(), ViewError> {
        let image = self.renderer.read_image(&self.target)?;
        let mut n = 1;
        let path = loop {
            let p = PathBuf::from(format!("sluice-screenshot-{n}.png"));
            if !p.exists() {
                break p;
            }
            n += 1;
        };
        image.save(&path).map_err(|e| ViewError::WritePng {
            path: path.clone(),
            reason: e.to_string(),
        })?;
        println!("screenshot: {}", path.display());
        Ok(())
    }

    fn finish(&mut self, viewer: &Viewer, report: &mut ViewerReport) -> Result<(), ViewError> {
        let image = self.renderer.read_image(&self.target)?;
        if let Some(path) = &viewer.save_last {
            if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
                std::fs::create_dir_all(dir).map_err(|source| ViewError::Io {
                    path: dir.to_path_buf(),
                    source,
                })?;
            }
            image.save(path).map_err(|e| ViewError::WritePng {
                path: path.clone(),
                reason: e.to_string(),
            })?;
        }
        report.last_frame = Some(image);
        report.last_window_image = self.last_surface.take();
        report.camera = Some(self.camera);
        Ok(())
    }
}

/// Reads `rect` (`[x, y, width, height]`, clamped to the texture) of a presented texture back
/// as RGBA, swapping channels of BGRA formats.
fn read_texture(
    device: &wgpu::Device,
    queue: &wgpu::Queue,
    texture: &wgpu::Texture,
    [x, y, w, h]: [u32; 4],
    format: wgpu::TextureFormat,
) -> Result<image::RgbaImage, ViewError> {
    let x = x.min(texture.width().saturating_sub(1));
    let y = y.min(texture.height().saturating_sub(1));
    let w = w.min(texture.width() - x).max(1);
    let h = h.min(texture.height() - y).max(1);
    let row = u64::from(w) * 4;
    let padded = row.next_multiple_of(u64::from(wgpu::COPY_BYTES_PER_ROW_ALIGNMENT));
    let buffer = device.create_buffer(&wgpu::BufferDescriptor {
        label: Some("sluice window readback"),
        size: padded * u64::from(h),
        usage: wgpu::BufferUsages::MAP_READ | wgpu::BufferUsages::COPY_DST,
        mapped_at_creation: false,
    });
    let mut encoder = device.create_command_encoder(&Default::default());
    encoder.copy_texture_to_buffer(
        wgpu::TexelCopyTextureInfo {
            texture,
            mip_level: 0,
            origin: wgpu::Origin3d { x, y, z: 0 },
            aspect: wgpu::TextureAspect::All,
        },
        wgpu::TexelCopyBufferInfo {
            buffer: &buffer,
            layout: wgpu::TexelCopyBufferLayout {
                offset: 0,
                bytes_per_row: Some(padded as u32),
                rows_per_image: Some(h),
            },
        },
        wgpu::Extent3d {
            width: w,
            height: h,
            depth_or_array_layers: 1,
        },
    );
    queue.submit([encoder.finish()]);
    let (tx, rx) = std::sync::mpsc::channel();
    buffer.map_async(wgpu::MapMode::Read, .., move |r| {
        let _ = tx.send(r);
    });
    device
        .poll(wgpu::PollType::wait_indefinitely())
        .map_err(|e| ViewError::Window(format!("waiting for the window readback: {e}")))?;
    rx.recv()
        .map_err(|_| ViewError::Window("window readback never finished".into()))?
        .map_err(|e| ViewError::Window(format!("mapping the window readback: {e}")))?;
    let bgra = matches!(
        format,
        wgpu::TextureFormat::Bgra8Unorm | wgpu::TextureFormat::Bgra8UnormSrgb
    );
    let mut pixels = Vec::with_capacity((row * u64::from(h)) as usize);
    {
        let mapped = buffer
            .get_mapped_range(..)
            .map_err(|e| ViewError::Window(format!("reading the window back: {e}")))?;
        for r in 0..h as usize {
            let start = r * padded as usize;
            for px in mapped[start..start + row as usize].chunks_exact(4) {
                if bgra {
                    pixels.extend_from_slice(&[px[2], px[1], px[0], px[3]]);
                } else {
                    pixels.extend_from_slice(px);
                }
            }
        }
    }
    buffer.unmap();
    image::RgbaImage::from_raw(w, h, pixels)
        .ok_or_else(|| ViewError::Window("window readback size mismatch".into()))
}
