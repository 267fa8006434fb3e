//! The `sluice` command line: `view`, `render`, `info` and `demo stream`.
//!
//! A user's mistake (a missing file, a wrong `--shape`, an unsupported `--dtype`, a bad
//! `--clim`, a URL before Zarr support lands) ends the program with one line on stderr and
//! exit status 1; clap's own usage errors exit with status 2.

use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::Arc;
use std::time::{Duration, Instant};

use clap::{Args, Parser, Subcommand};
use sluice_core::ndarray::Array2;
use sluice_core::{ArraySource, DataSource};
use sluice_render::glam::Vec2;
use sluice_render::{Colormap, Image, OrbitCamera, PanZoomCamera, Renderer, Scene, VolumeMode};

use crate::error::ViewError;
use crate::input::{self, InputKind, OpenOptions};
use crate::layers::{Settings, ShowAs, View, ViewCamera};
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
        /// Close after this many frames (for scripts and tests).
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
    /// Files: .npy, .png, .tif/.tiff (multi-page: a volume), or raw with --shape and --dtype.
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

/// Renders `view` headless at `size` with `camera` (or the fitted one) into an image.
pub fn render_view(
    view: &View,
    size: [u32; 2],
    camera: Option<ViewCamera>,
) -> Result<image::RgbaImage, ViewError> {
    let mut renderer = Renderer::with_options(sluice_render::RendererOptions::from_env()?)?;
    let target = renderer.create_target(size[0], size[1])?;
    let camera = camera.unwrap_or_else(|| view.fit_camera(size));
    renderer.render(&view.scene, &camera, &target)?;
    Ok(renderer.read_image(&target)?)
}

/// Runs the command line on `std::env::args`, printing an error as one line.
pub fn main() -> ExitCode {
    let cli = Cli::parse();
    match run(cli) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("sluice: error: {e}");
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
        } => {
            let size = input::parse_size(&size)?;
            let settings = display.settings()?;
            let view = View::build(&inputs.open()?, &settings)?;
            let camera = camera.map(|c| parse_camera(&c, &view)).transpose()?;
            let image = render_view(&view, size, camera)?;
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
    let layout = input.source.layout();
    let kind = match InputKind::of(&input.name) {
        InputKind::Npy => "npy (memory-mapped)",
        InputKind::Png => "png (decoded)",
        InputKind::Tiff => "tiff (decoded)",
        InputKind::Zarr => "zarr",
        InputKind::Raw => "raw (memory-mapped)",
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
    for (i, level) in layout.levels().iter().enumerate() {
        let bytes = level.shape.len().saturating_mul(layout.sample_bytes());
        out.push_str(&format!(
            "  level {}: shape {:?}, {bytes} bytes\n",
            i + 1,
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
