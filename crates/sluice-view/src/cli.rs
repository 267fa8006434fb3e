//! The `sluice` command line: `view`, `render`, `info` and `demo stream`.
//!
//! A user's mistake (a missing file, a wrong `--shape`, an unsupported `--dtype`, a bad
//! `--clim`, an unreachable URL, a store without the time point or channel asked for) ends the
//! program with one line on stderr and exit status 1; clap's own usage errors exit with
//! status 2.

use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::Arc;
use std::time::{Duration, Instant};

use clap::{Args, Parser, Subcommand};
use sluice_core::ndarray::Array2;
use sluice_core::{ArraySource, DataSource, SharedSource};
use sluice_render::glam::Vec2;
use sluice_render::{Colormap, Image, OrbitCamera, PanZoomCamera, Renderer, Scene, VolumeMode};

use crate::chunks;
use crate::error::ViewError;
use crate::input::{self, InputKind, OpenOptions};
use crate::layers::{Settings, ShowAs, View, ViewCamera};
use crate::progress::Progress;
use crate::window::Viewer;

/// Look at data: images, volumes, files, live sources.
#[derive(Parser, Debug)]
#[command(
    name = "sluice",
    version,
    about = "Look at data on the GPU: view, render, describe."
)]
pub struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand, Debug)]
enum Command {
    /// Shows inputs in a window: 2-D as images, 3-D as volumes (layered, or side by side).
    View {
        #[command(flatten)]
        inputs: InputArgs,
        #[command(flatten)]
        display: DisplayArgs,
        /// Close after this many complete frames (for scripts and tests; frames drawn while a
        /// Zarr store's chunks load do not count).
        #[arg(long)]
        frames: Option<u64>,
        /// With --frames, write the last frame here as PNG.
        #[arg(long)]
        save: Option<PathBuf>,
    },
    /// Renders inputs headless into a PNG.
    Render {
        #[command(flatten)]
        inputs: InputArgs,
        #[command(flatten)]
        display: DisplayArgs,
        /// The PNG to write.
        #[arg(long)]
        out: PathBuf,
        /// Image size WIDTHxHEIGHT.
        #[arg(long, default_value = "800x600")]
        size: String,
        /// 2-D: CENTER_X,CENTER_Y,ZOOM (screen pixels per data pixel); 3-D: AZIMUTH,ELEVATION
        /// in degrees. Without it the view fits the data.
        #[arg(long)]
        camera: Option<String>,
        /// Seconds to wait for the chunks of Zarr stores before giving up (the PNG is written
        /// only once every chunk it shows has loaded).
        #[arg(long, default_value_t = 120)]
        timeout: u64,
    },
    /// Prints layout, element type, chunk grid, levels and the bytes each needs.
    Info {
        #[command(flatten)]
        inputs: InputArgs,
    },
    /// Demonstrations.
    Demo {
        #[command(subcommand)]
        demo: Demo,
    },
}

#[derive(Subcommand, Debug)]
enum Demo {
    /// A 1024 x 1024 source written from another thread at 60 Hz; only the changed region is
    /// uploaded. Prints the upload counters once a second.
    Stream {
        /// Close after this many frames.
        #[arg(long)]
        frames: Option<u64>,
    },
}

#[derive(Args, Debug)]
struct InputArgs {
    /// Files: .npy, .png, .tif/.tiff (multi-page: a volume), raw with --shape and --dtype;
    /// Zarr / OME-Zarr stores: a directory, http(s):// or s3:// URL.
    #[arg(required = true)]
    paths: Vec<String>,
    /// Shape of raw files, numpy order: ROWS,COLS or PLANES,ROWS,COLS.
    #[arg(long)]
    shape: Option<String>,
    /// Element type of raw files: u8, i8, u16, i16, u32, i32, f16, f32, f64.
    #[arg(long)]
    dtype: Option<String>,
    /// Bytes to skip at the start of raw files.
    #[arg(long, default_value_t = 0)]
    offset: u64,
    /// Zarr stores with a time axis: the time point shown (default 0).
    #[arg(long = "t")]
    time: Option<u64>,
    /// Zarr stores with a channel axis: the channel shown (default 0), or 3 or 4 channels
    /// C1,C2,C3[,C4] shown as RGB(A).
    #[arg(long)]
    channel: Option<String>,
    /// .npy and raw files: draw through a lazy pyramid (chunks read as the view needs them,
    /// coarser levels computed from finer ones): auto (files over 512 MiB, or a side over
    /// 16,384 for images or 2,048 for volumes), always or never.
    #[arg(long, value_parser = ["auto", "always", "never"], default_value = "auto")]
    pyramid: String,
}

#[derive(Args, Debug)]
struct DisplayArgs {
    /// Show 3-D inputs as a volume or as an image of one plane (default: from dimensions).
    #[arg(long = "as", value_parser = ["auto", "image", "volume"], default_value = "auto")]
    show_as: String,
    /// Contrast limits LO,HI.
    #[arg(long)]
    clim: Option<String>,
    /// Colormap: gray, viridis, magma, inferno, plasma, cividis.
    #[arg(long)]
    colormap: Option<String>,
    /// Volume rendering mode: mip, translucent, iso.
    #[arg(long)]
    mode: Option<String>,
    /// The iso surface value (with --mode iso; default: the middle of the contrast limits).
    #[arg(long)]
    iso: Option<f64>,
    /// Side by side instead of layered.
    #[arg(long)]
    grid: bool,
}

impl InputArgs {
    fn open(&self) -> Result<Vec<input::Input>, ViewError> {
        let options = OpenOptions {
            shape: self.shape.as_deref().map(input::parse_shape).transpose()?,
            dtype: self.dtype.as_deref().map(input::parse_dtype).transpose()?,
            offset: self.offset,
            time: self.time,
            channels: self.channel.as_deref().map(parse_channels).transpose()?,
            pyramid: input::PyramidChoice::parse(&self.pyramid)?,
        };
        self.paths
            .iter()
            .map(|p| input::open(p, &options))
            .collect()
    }
}

impl DisplayArgs {
    fn settings(&self) -> Result<Settings, ViewError> {
        let clim = self.clim.as_deref().map(input::parse_clim).transpose()?;
        let colormap = self.colormap.as_deref().map(parse_colormap).transpose()?;
        let mode = match self.mode.as_deref() {
            None => None,
            Some("mip") => Some(VolumeMode::Mip),
            Some("translucent") => Some(VolumeMode::Translucent { attenuation: 1.0 }),
            Some("iso") => {
                let threshold = self
                    .iso
                    .or(clim.map(|[lo, hi]| 0.5 * (lo + hi)))
                    .unwrap_or(0.5);
                Some(VolumeMode::Iso { threshold })
            }
            Some(other) => {
                return Err(ViewError::BadArgument {
                    option: "--mode",
                    value: other.to_string(),
                    reason: "one of mip, translucent, iso".into(),
                })
            }
        };
        let show_as = match self.show_as.as_str() {
            "image" => ShowAs::Image,
            "volume" => ShowAs::Volume,
            _ => ShowAs::Auto,
        };
        Ok(Settings {
            show_as,
            clim,
            colormap,
            mode,
            grid: self.grid,
        })
    }
}

/// Parses `--channel`: one channel index, or 3 or 4 of them separated by commas.
pub fn parse_channels(text: &str) -> Result<Vec<u64>, ViewError> {
    let bad = |reason: String| ViewError::BadArgument {
        option: "--channel",
        value: text.to_string(),
        reason,
    };
    let channels = text
        .split(',')
        .map(|c| {
            c.trim()
                .parse::<u64>()
                .map_err(|e| bad(format!("{c:?} is not a channel index: {e}")))
        })
        .collect::<Result<Vec<_>, _>>()?;
    if !matches!(channels.len(), 1 | 3 | 4) {
        return Err(bad(format!(
            "one channel, or 3 or 4 shown as RGB(A); got {}",
            channels.len()
        )));
    }
    Ok(channels)
}

/// A built-in colormap by name (case-insensitive).
pub fn parse_colormap(name: &str) -> Result<Colormap, ViewError> {
    let names: Vec<String> = Colormap::builtins()
        .iter()
        .map(|m| m.name().to_string())
        .collect();
    Colormap::builtins()
        .into_iter()
        .find(|m| m.name().eq_ignore_ascii_case(name.trim()))
        .ok_or_else(|| ViewError::BadArgument {
            option: "--colormap",
            value: name.to_string(),
            reason: format!("unknown colormap; one of {}", names.join(", ")),
        })
}

/// Parses `--camera` for `view` (2-D: `CX,CY,ZOOM`; 3-D: `AZIMUTH,ELEVATION`).
pub fn parse_camera(text: &str, view: &View) -> Result<ViewCamera, ViewError> {
    let numbers: Result<Vec<f32>, _> = text.split(',').map(|s| s.trim().parse::<f32>()).collect();
    let bad = |reason: &str| ViewError::BadArgument {
        option: "--camera",
        value: text.to_string(),
        reason: reason.to_string(),
    };
    let numbers = numbers
        .ok()
        .filter(|n| n.iter().all(|v| v.is_finite()))
        .ok_or_else(|| bad("needs finite numbers separated by commas"))?;
    if view.is_3d() {
        let [azimuth, elevation] = numbers[..] else {
            return Err(bad("a volume's camera is AZIMUTH,ELEVATION in degrees"));
        };
        let (min, max) = view.bounds;
        Ok(ViewCamera::Orbit(OrbitCamera::fit(
            min, max, azimuth, elevation,
        )))
    } else {
        let [x, y, zoom] = numbers[..] else {
            return Err(bad("an image's camera is CENTER_X,CENTER_Y,ZOOM"));
        };
        if zoom <= 0.0 {
            return Err(bad("ZOOM must be above 0"));
        }
        Ok(ViewCamera::Flat(PanZoomCamera::new(Vec2::new(x, y), zoom)))
    }
}

/// How long [`render_view`] waits for lazy sources' chunks.
pub const DEFAULT_RENDER_TIMEOUT: Duration = Duration::from_secs(120);

/// Renders `view` headless at `size` with `camera` (or the fitted one) into an image, once
/// every chunk the frame shows has loaded (waiting at most [`DEFAULT_RENDER_TIMEOUT`]).
pub fn render_view(
    view: &View,
    size: [u32; 2],
    camera: Option<ViewCamera>,
) -> Result<image::RgbaImage, ViewError> {
    render_view_within(view, size, camera, DEFAULT_RENDER_TIMEOUT)
}

/// [`render_view`] waiting at most `timeout` for lazy sources (Zarr stores).
///
/// It renders, and while a frame leaves uploads pending or chunks of a layer's level 0 are
/// queued or loading, waits for the renderer to be woken (a chunk arrived) and renders again. A
/// chunk that failed (after the loader pool's retries) is an error naming it, as is a
/// timeout, naming what had not arrived: the PNG is written complete or not at all.
pub fn render_view_within(
    view: &View,
    size: [u32; 2],
    camera: Option<ViewCamera>,
    timeout: Duration,
) -> Result<image::RgbaImage, ViewError> {
    let mut renderer = Renderer::with_options(sluice_render::RendererOptions::from_env()?)?;
    let (woken, wakes) = std::sync::mpsc::channel::<()>();
    renderer.set_redraw_notify(Some(Arc::new(move || {
        let _ = woken.send(());
    })));
    let target = renderer.create_target(size[0], size[1])?;
    let camera = camera.unwrap_or_else(|| view.fit_camera(size));
    let sources: Vec<(&str, sluice_render::NodeId, SharedSource)> = view
        .layers
        .iter()
        .filter_map(|l| layer_source(&view.scene, l.node).map(|s| (l.name.as_str(), l.node, s)))
        .collect();
    let started = Instant::now();
    // Drawn only once chunks are waited for (and only on a terminal).
    let mut bar: Option<Progress> = None;
    loop {
        let stats = renderer.render(&view.scene, &camera, &target)?;
        let mut complete = !stats.uploads_pending;
        let mut needed = sluice_core::ChunkProgress::default();
        for (name, node, source) in &sources {
            // A paged visual's view (what the renderer says it needs), else level 0.
            let paged = view.scene.visual(*node).and_then(|v| renderer.progress(v));
            let Some(progress) = paged
                .as_ref()
                .map(chunks::from_paged)
                .or_else(|| chunks::level0_progress(source))
            else {
                continue;
            };
            chunks::add_progress(&mut needed, progress.clone());
            if let Some((key, failure)) = progress.failed.first() {
                return Err(ViewError::ChunksFailed {
                    input: name.to_string(),
                    count: progress.failed.len(),
                    level: key.level,
                    index: key.index,
                    reason: failure.error.to_string(),
                });
            }
            // Chunks nobody asked for do not hold the frame up: the renderer reads what it
            // draws, and a read queues what is missing (a frame that found some missing says
            // so in `uploads_pending`).
            if progress.queued + progress.loading > 0 || paged.is_some_and(|p| !p.is_complete()) {
                complete = false;
                if started.elapsed() >= timeout {
                    return Err(ViewError::NotResident {
                        input: name.to_string(),
                        missing: chunks::describe_missing(&progress),
                        seconds: timeout.as_secs(),
                    });
                }
            }
        }
        if complete {
            break;
        }
        if needed.visible_wanted > 0 {
            bar.get_or_insert_with(|| Progress::chunks("loading the view's chunks"))
                .set(needed.visible_resident as u64, needed.visible_wanted as u64);
        }
        let left = timeout.saturating_sub(started.elapsed());
        if left.is_zero() {
            return Err(ViewError::NotResident {
                input: sources.first().map_or("the scene", |s| s.0).to_string(),
                missing: "uploads still pending".into(),
                seconds: timeout.as_secs(),
            });
        }
        // Woken when a chunk settles; the short bound also catches a wake that came before
        // this wait began.
        let _ = wakes.recv_timeout(left.min(Duration::from_millis(50)));
        renderer.take_redraw_request();
    }
    Ok(renderer.read_image(&target)?)
}

/// The source a layer's visual draws.
fn layer_source(scene: &Scene, node: sluice_render::NodeId) -> Option<SharedSource> {
    match scene.visual(node)? {
        sluice_render::Visual::Image(i) => Some(i.source().clone()),
        sluice_render::Visual::Volume(v) => Some(v.source().clone()),
        _ => None,
    }
}

/// Runs the command line on `std::env::args`, printing an error as one line.
pub fn main() -> ExitCode {
    let cli = Cli::parse();
    let result = run(cli);
    // Everything `run` made is dropped; let the devices finish before the process exits.
    sluice_render::wait_for_devices();
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            // One line, whatever the message holds (a remote error may carry several).
            let line = e
                .to_string()
                .split_whitespace()
                .collect::<Vec<_>>()
                .join(" ");
            eprintln!("sluice: error: {line}");
            ExitCode::FAILURE
        }
    }
}

/// Runs a parsed command line.
pub fn run(cli: Cli) -> Result<(), ViewError> {
    match cli.command {
        Command::View {
            inputs,
            display,
            frames,
            save,
        } => {
            let settings = display.settings()?;
            let view = View::build(&inputs.open()?, &settings)?;
            let mut viewer = Viewer::new().title(format!("sluice: {}", inputs.paths.join(" ")));
            if let Some(n) = frames {
                viewer = viewer.quit_after_frames(n);
                if let Some(path) = save {
                    viewer = viewer.save_last_frame(path);
                }
            }
            viewer.show_view(view)?;
            Ok(())
        }
        Command::Render {
            inputs,
            display,
            out,
            size,
            camera,
            timeout,
        } => {
            let size = input::parse_size(&size)?;
            let settings = display.settings()?;
            let view = View::build(&inputs.open()?, &settings)?;
            let camera = camera.map(|c| parse_camera(&c, &view)).transpose()?;
            let image = render_view_within(&view, size, camera, Duration::from_secs(timeout))?;
            image.save(&out).map_err(|e| ViewError::WritePng {
                path: out.clone(),
                reason: e.to_string(),
            })?;
            println!("wrote {} ({} x {})", out.display(), size[0], size[1]);
            Ok(())
        }
        Command::Info { inputs } => {
            for input in inputs.open()? {
                print!("{}", info(&input));
            }
            Ok(())
        }
        Command::Demo {
            demo: Demo::Stream { frames },
        } => demo_stream(frames),
    }
}

/// What `sluice info` prints for one input.
pub fn info(input: &input::Input) -> String {
    if let Some(store) = &input.store {
        return format!("{}\n{}", input.name, store.describe());
    }
    let layout = input.source.layout();
    let lazy = if input.mapped.is_some() {
        ", drawn through a lazy pyramid"
    } else {
        ""
    };
    let kind = match InputKind::of(&input.name) {
        InputKind::Npy => format!("npy (memory-mapped{lazy})"),
        InputKind::Png => "png (decoded)".to_string(),
        InputKind::Tiff => "tiff (decoded)".to_string(),
        InputKind::Zarr => "zarr".to_string(),
        InputKind::Raw => format!("raw (memory-mapped{lazy})"),
    };
    let chunks = layout.chunks();
    let grid = chunks.grid_size(&layout.shape());
    let ndim = layout.shape().ndim();
    let mut out = format!(
        "{}\n  format: {kind}\n  shape: {:?}\n  element: {:?} x {} channel(s)\n  chunks: {:?} in a grid of {:?}\n  level 0: {} bytes\n",
        input.name,
        layout.shape().dims(),
        layout.element(),
        layout.channels(),
        &chunks.chunk_size()[3 - ndim..],
        &grid[3 - ndim..],
        layout.total_bytes(),
    );
    // `levels()` starts with level 0, described above.
    for (i, level) in layout.levels().iter().enumerate().skip(1) {
        let bytes = level.shape.len().saturating_mul(layout.sample_bytes());
        out.push_str(&format!(
            "  level {i}: shape {:?}, {bytes} bytes\n",
            level.shape.dims()
        ));
    }
    out
}

/// `sluice demo stream`: a writer thread paints a moving block into a source at 60 Hz and
/// wakes the window; the window uploads only the changed chunks.
fn demo_stream(frames: Option<u64>) -> Result<(), ViewError> {
    const SIDE: usize = 1024;
    const BLOCK: usize = 48;
    let field = Array2::from_shape_fn((SIDE, SIDE), |(y, x)| {
        ((x as f32 / 61.0).sin() + (y as f32 / 83.0).cos()) * 0.25 + 0.5
    });
    let source = Arc::new(ArraySource::new(field)?);
    let full_bytes = source.layout().total_bytes();
    let mut scene = Scene::new();
    let node = scene.add(
        Image::new(source.clone())
            .with_clim(0.0, 1.5)?
            .with_colormap(Colormap::Magma),
    );
    let mut viewer = Viewer::new()
        .title("sluice demo stream")
        .layer(node, "stream");
    if let Some(n) = frames {
        viewer = viewer.quit_after_frames(n);
    }
    let handle = viewer.redraw_handle();
    let stop = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let writer = {
        let (source, stop) = (source.clone(), stop.clone());
        std::thread::spawn(move || -> Result<(), sluice_core::SourceError> {
            let mut t = 0.0f32;
            while !stop.load(std::sync::atomic::Ordering::Acquire) {
                let c = (SIDE - BLOCK) as f32 / 2.0;
                let x = (c + c * 0.8 * t.cos()) as usize;
                let y = (c + c * 0.8 * (1.7 * t).sin()) as usize;
                let block = Array2::from_elem((BLOCK, BLOCK), 1.0 + 0.5 * (3.0 * t).sin());
                source.write(&[y, x], block.view())?;
                handle.request_redraw();
                t += 1.0 / 60.0;
                std::thread::sleep(Duration::from_millis(16));
            }
            Ok(())
        })
    };
    let mut since = Instant::now();
    let mut since_counters = None;
    let mut since_frames = 0u64;
    let viewer = viewer.on_frame(move |frame| {
        since_frames += 1;
        let base = *since_counters.get_or_insert(frame.counters);
        if since.elapsed() >= Duration::from_secs(1) {
            let d = frame.counters.since(&base);
            println!(
                "{since_frames} frames: uploaded {} bytes in {} copies (the whole image is {full_bytes} bytes)",
                d.bytes_uploaded, d.copies_issued
            );
            since = Instant::now();
            since_counters = Some(frame.counters);
            since_frames = 0;
        }
    });
    let shown = viewer.show(scene);
    stop.store(true, std::sync::atomic::Ordering::Release);
    let written = writer
        .join()
        .map_err(|_| ViewError::Window("the writer thread panicked".into()))?;
    shown?;
    written?;
    Ok(())
}
