//! sluice's side of the peer comparison with pygfx and VisPy (`cargo bench --bench peers`, or
//! `just bench-peers`).
//!
//! The peers' harness (the `peers/` folder beside this repository: `bench_pygfx.py`,
//! `bench_vispy.py`, `results.md`) defines the cases; this binary runs each of them through
//! sluice with the same definitions and writes the same JSON schema, so that the harness's
//! `run.sh` can run the three libraries alternately and print one side-by-side table:
//!
//! ```sh
//! cargo bench --bench peers --no-run          # build first, so the rounds time no compiling
//! bash ../shared/peers/run.sh --rounds 3 -- cargo bench -q --bench peers --
//! ```
//!
//! The definitions, as the peers have them:
//!
//! - a 1024 x 1024 offscreen target; a timed iteration is a data update plus one frame read
//!   back to host memory: on a CPU device (lavapipe) the frame is drawn in place in mapped
//!   host memory (`HostTarget`) and a read is a barrier and a wait; elsewhere
//!   `HostFrame::read`, the GPU's copy into imported host pages, waited for, into one of a
//!   few frames handed back when dropped, as a frame loop reuses its buffer; without an
//!   interop device `Renderer::read_into` into such buffers. The readback case times
//!   `Renderer::read_image` (a new image per read), `read_into`, `HostFrame::read` and
//!   `HostTarget::read` alternately;
//! - 3 warm-ups and 10 timed iterations (volumes 2 and 10), min / median / max in ms;
//! - two pre-generated data sets A and B, alternating, so every update changes the data; each
//!   carries a marker that every frame is checked for, outside the timer (a red or green block
//!   in the centre of an RGBA image, white or black for float data, a mid-gray or bright MIP,
//!   a mesh covering the whole view or only its central quarter);
//! - each timed iteration is followed by a timed frame with nothing changed (`render_only`);
//!   their per-iteration difference is the update's cost (`update_cost`);
//! - `upload_only`: the update and the uploads without drawing (`Renderer::upload`), against
//!   the same call with nothing changed;
//! - `uploaded_per_update`: the renderer's byte counters over one extra update and frame;
//! - `first_frame`: a fresh process (this binary with `--child first_frame`) from spawn to its
//!   first 1024^2 RGBA8 image frame read back and checked;
//! - `shared_source` memory: a fresh process per row reports its RSS after the scene, a frame
//!   and a few updates; 8 visuals are compared with 1.
//!
//! sluice redraws only the screen rectangles that changed (nothing when nothing did). That is
//! its default and its design, so each 2-D case is measured that way, and again with the
//! suffix `_full_redraw`, where `RenderTarget::invalidate` makes every frame redraw the whole
//! target: the peers' work, and the comparison that counts.
//!
//! The full updates are also given as `full_update_2d/rgba8_4096_host_buffer` and
//! `f32_2048_host_buffer` (each with `_full_redraw`): the same A/B data held in two
//! `HostBuffer`s handed to a `HostBufferSource` in turn, so that the GPU copies from the user's
//! own pages with no host copy (`VK_EXT_external_memory_host`; where the driver lacks it the
//! source stages, and `host_buffer.staged_reason` says so). They run on a renderer of their own
//! from an `Interop` on the same adapter; a variant that cannot run records its `error` in its
//! place and costs the other cases nothing. `shared_source/8x_rgba8_2048_shared_host_buffer`
//! (and `_full_redraw`) shows one `HostBufferSource` in the 8 tiles. `mesh_update/mesh_1000000v_host_buffer` does the
//! same for the mesh's positions (copied into the vertex buffer from the buffers' pages), and
//! `volume_3d/u8_256^3_host_buffer` (and `512^3`) for the volumes (copied into the 3-D texture).
//! On a CPU device the 2-D host-buffer cases draw each buffer straight from its pages (an
//! image over them, nothing copied: `host_buffer.in_place_images`);
//! `SLUICE_PEERS_IN_PLACE=0` copies from the pages instead, as on a GPU. The mesh's
//! triangles that cover no pixel centre are left out of its draw (`mesh_draws_culled`,
//! `RendererOptions::mesh_cull`); `SLUICE_PEERS_MESH_CULL=0` draws every one.
//!
//! Options: `--out FILE` (the JSON; without it, stdout), `--quick` (the peers' small sizes,
//! a smoke test), `--only a,b` (benchmark names), `--iters N`. A table goes to stderr. The
//! adapter follows `SLUICE_BACKEND` / `SLUICE_ADAPTER` like every other bench.
//!
//! Frames are drawn in place in host memory on a CPU interop device (`HostTarget`), read back
//! into `HostFrame`s (pages the GPU copies into) on other interop devices;
//! `SLUICE_PEERS_READBACK=host_frame` uses `HostFrame`s on CPU devices too, and
//! `SLUICE_PEERS_READBACK=read_into` reads with `Renderer::read_into` everywhere. For
//! diagnosis: `SLUICE_PEERS_FRESH_CTX=1` gives every benchmark a renderer (and device) of its
//! own, `SLUICE_PEERS_FRESH_TARGET=1` a new target, `SLUICE_PEERS_VOLUMES=256,512` picks the
//! volume sizes. `SLUICE_PEERS_VOLUME_VIEW=vispy` (the default) or `pygfx` frames the volume
//! as that peer does (the two cover 44.6 % and 58.5 % of the frame);
//! `SLUICE_PEERS_VOLUME_STEP=1.5` samples rays every 1.5 voxels instead of the peers' 0.8
//! (to split a frame into its per-sample and fixed costs).

use std::cell::RefCell;
use std::collections::BTreeMap;
use std::error::Error;
use std::io::Write;
use std::process::Command;
use std::rc::Rc;
use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use serde_json::{json, Value};
use sluice::ndarray::ArrayD;
use sluice::prelude::*;
use sluice::{Counters, RendererOptions};

type Res<T> = Result<T, Box<dyn Error>>;

/// The target's side, as the peers' canvas.
const CANVAS: u32 = 1024;

/// The sizes of one run: the peers' "full" and "quick" configurations.
#[derive(Clone, Debug)]
struct Config {
    warmup: usize,
    iters: usize,
    rgba_size: usize,
    f32_size: usize,
    partial_region: usize,
    volumes: Vec<usize>,
    volume_view: VolumeView,
    /// Distance between a ray's samples, in voxels (the peers' 0.8).
    volume_step: f32,
    mesh_grid: usize,
    shared_size: usize,
    shared_n: usize,
    first_frame_runs: usize,
    first_frame_size: usize,
    mem_updates: usize,
}

impl Config {
    fn full() -> Self {
        Config {
            warmup: 3,
            iters: 10,
            rgba_size: 4096,
            f32_size: 2048,
            partial_region: 256,
            volumes: vec![256, 512],
            volume_view: VolumeView::Vispy,
            volume_step: 0.8,
            mesh_grid: 1000,
            shared_size: 2048,
            shared_n: 8,
            first_frame_runs: 5,
            first_frame_size: 1024,
            mem_updates: 3,
        }
    }

    fn quick() -> Self {
        Config {
            warmup: 1,
            iters: 5,
            rgba_size: 1024,
            f32_size: 512,
            partial_region: 128,
            volumes: vec![64],
            volume_view: VolumeView::Vispy,
            volume_step: 0.8,
            mesh_grid: 200,
            shared_size: 512,
            shared_n: 8,
            first_frame_runs: 2,
            first_frame_size: 1024,
            mem_updates: 2,
        }
    }

    fn to_json(&self) -> Value {
        json!({
            "canvas": [CANVAS, CANVAS], "warmup": self.warmup, "iters": self.iters,
            "rgba_size": self.rgba_size, "f32_size": self.f32_size,
            "partial_region": self.partial_region, "volumes": self.volumes,
            "volume_view": self.volume_view.name(), "volume_step": self.volume_step,
            "mesh_grid": self.mesh_grid, "shared_size": self.shared_size,
            "shared_n": self.shared_n, "first_frame_runs": self.first_frame_runs,
            "first_frame_size": self.first_frame_size, "mem_updates": self.mem_updates,
        })
    }
}

/// What the command line asked for.
struct Args {
    out: Option<String>,
    quick: bool,
    only: Option<Vec<String>>,
    iters: Option<usize>,
    child: Option<String>,
    /// `--key value` pairs after `--child`.
    child_args: BTreeMap<String, String>,
}

fn parse_args() -> Res<Args> {
    let mut args = Args {
        out: None,
        quick: false,
        only: None,
        iters: None,
        child: None,
        child_args: BTreeMap::new(),
    };
    let mut it = std::env::args().skip(1);
    while let Some(a) = it.next() {
        let mut value = |name: &str| it.next().ok_or_else(|| format!("{name} needs a value"));
        match a.as_str() {
            // Cargo passes --bench to harness-less bench binaries.
            "--bench" => {}
            "--quick" => args.quick = true,
            "--out" => args.out = Some(value("--out")?),
            "--only" => {
                args.only = Some(value("--only")?.split(',').map(str::to_owned).collect());
            }
            "--iters" => {
                let v = value("--iters")?;
                args.iters = Some(
                    v.parse()
                        .map_err(|e| format!("--iters {v:?} is not a count: {e}"))?,
                );
            }
            "--child" => args.child = Some(value("--child")?),
            other if other.starts_with("--") && args.child.is_some() => {
                let v = value(other)?;
                args.child_args.insert(other[2..].to_owned(), v);
            }
            other => return Err(format!("unknown argument {other:?}").into()),
        }
    }
    Ok(args)
}

fn main() -> Res<()> {
    let args = parse_args()?;
    // Pipelines compiled once are kept on disk for the next process (first_frame's children
    // among them); see RendererOptions::pipeline_cache_dir.
    sluice::interop::install_pipeline_cache();
    if let Some(child) = &args.child {
        return match child.as_str() {
            "first_frame" => child_first_frame(&args.child_args),
            "mem" => child_mem(&args.child_args),
            other => Err(format!("unknown child mode {other:?}").into()),
        };
    }
    let mut cfg = if args.quick {
        Config::quick()
    } else {
        Config::full()
    };
    if let Some(n) = args.iters {
        cfg.iters = n;
    }
    if let Ok(v) = std::env::var("SLUICE_PEERS_VOLUMES") {
        cfg.volumes = v.split(',').filter_map(|n| n.parse().ok()).collect();
    }
    match std::env::var("SLUICE_PEERS_VOLUME_VIEW").as_deref() {
        Err(_) | Ok("vispy") => {}
        Ok("pygfx") => cfg.volume_view = VolumeView::Pygfx,
        Ok(other) => {
            return Err(
                format!("SLUICE_PEERS_VOLUME_VIEW={other:?}: expected vispy or pygfx").into(),
            )
        }
    }
    if let Ok(v) = std::env::var("SLUICE_PEERS_VOLUME_STEP") {
        cfg.volume_step = v
            .parse()
            .map_err(|e| format!("SLUICE_PEERS_VOLUME_STEP={v:?}: {e}"))?;
    }
    let wanted = |name: &str| {
        args.only
            .as_ref()
            .is_none_or(|o| o.iter().any(|x| x == name))
    };

    let started = Instant::now();
    let loadavg_at_start = loadavg();
    let mut ctx = Ctx::new()?;
    let info = ctx.renderer.adapter_info().clone();
    let readback = ctx.readback();
    // How lone images are drawn here (`ImageDraw`; `SLUICE_IMAGE_DRAW` chooses).
    let image_draw = format!("{:?}", ctx.renderer.image_draw());
    let mut results = serde_json::Map::new();
    let mut contention = serde_json::Map::new();
    let mut errors = Vec::new();

    type Bench = fn(&mut Ctx, &Config) -> Res<Value>;
    let benches: [(&str, Bench); 7] = [
        ("readback", bench_readback),
        ("full_update_2d", bench_full_update_2d),
        ("partial_update_2d", bench_partial_update_2d),
        ("volume_3d", bench_volume_3d),
        ("mesh_update", bench_mesh_update),
        ("shared_source", bench_shared_source),
        ("first_frame", bench_first_frame),
    ];
    for (name, bench) in benches {
        if !wanted(name) {
            continue;
        }
        eprintln!("peers: {name}");
        let monitor = CpuMonitor::start();
        if std::env::var_os("SLUICE_PEERS_FRESH_CTX").is_some() {
            // A diagnosis: each benchmark on a renderer (and device) of its own.
            ctx = Ctx::new()?;
        }
        if std::env::var_os("SLUICE_PEERS_FRESH_TARGET").is_some() {
            ctx.target = ctx.renderer.create_target(CANVAS, CANVAS)?;
            ctx.frames.borrow_mut().1.clear();
            if let Some(interop) = ctx.interop.clone() {
                ctx.host = in_place_target(&interop, &ctx.renderer)?;
            }
        }
        match bench(&mut ctx, &cfg) {
            Ok(v) => {
                results.insert(name.into(), v);
            }
            Err(e) => {
                eprintln!("peers: {name} failed: {e}");
                errors.push(json!({"benchmark": name, "error": e.to_string()}));
            }
        }
        contention.insert(name.into(), monitor.finish());
    }

    let doc = json!({
        "library": "sluice",
        "mode": if args.quick { "quick" } else { "full" },
        "date_utc": utc_now(),
        "host": {
            "platform": platform(),
            "cpu_count": std::thread::available_parallelism().map(|n| n.get()).unwrap_or(1),
            "loadavg_at_start": loadavg_at_start,
            "loadavg_at_end": loadavg(),
        },
        "config": cfg.to_json(),
        "readback": readback,
        "versions": {"sluice": env!("CARGO_PKG_VERSION"), "wgpu": "30 (see Cargo.lock)"},
        "adapter": format!("{} | {} {} | backend={:?} type={:?}", info.name, info.driver,
            info.driver_info, info.backend, info.device_type),
        "adapter_info": {
            "name": info.name, "driver": info.driver, "driver_info": info.driver_info,
            "backend": format!("{:?}", info.backend),
            "device_type": format!("{:?}", info.device_type),
        },
        "image_draw": image_draw,
        "contention": contention,
        "results": results,
        "errors": errors,
        "total_runtime_s": round(started.elapsed().as_secs_f64(), 1),
    });
    print_table(&doc);
    let text = serde_json::to_string_pretty(&doc)?;
    match &args.out {
        Some(path) => {
            std::fs::write(path, text + "\n").map_err(|e| format!("cannot write {path}: {e}"))?
        }
        None => println!("{text}"),
    }
    if !doc["errors"].as_array().is_none_or(Vec::is_empty) {
        return Err("some benchmarks failed (see errors in the JSON)".into());
    }
    Ok(())
}

// ------------------------------------------------------------------ the frame and timing --

/// One renderer and one 1024 x 1024 target, reused by every case (as the peers reuse a
/// canvas per case; a new scene per case).
struct Ctx {
    renderer: Renderer,
    target: RenderTarget,
    /// The interop device the renderer is on, when frames are read into `HostFrame`s.
    interop: Option<sluice::interop::Interop>,
    /// Frame buffers handed back by dropped frames, read into again.
    frames: FramePool,
    /// On a CPU interop device, the target frames are drawn into and read from: drawn in
    /// place in mapped host memory (`HostTarget`), so a read is a barrier and a wait.
    host: Option<Rc<RefCell<sluice::interop::HostTarget>>>,
}

/// How frames are read back: into `HostFrame`s (imported pages the GPU writes) where the
/// device can, unless `SLUICE_PEERS_READBACK=read_into` asks for `Renderer::read_into`.
fn host_frames_wanted() -> bool {
    std::env::var("SLUICE_PEERS_READBACK").as_deref() != Ok("read_into")
}

/// Whether frames are drawn in place in host memory where the device allows it (a CPU
/// device), unless `SLUICE_PEERS_READBACK=host_frame` (or `read_into`) asks otherwise.
fn in_place_wanted() -> bool {
    host_frames_wanted() && std::env::var("SLUICE_PEERS_READBACK").as_deref() != Ok("host_frame")
}

/// A target drawn in place in host memory for `ctx`'s renderer, where `interop`'s device
/// allows it and `in_place_wanted`.
fn in_place_target(
    interop: &sluice::interop::Interop,
    renderer: &Renderer,
) -> Res<Option<Rc<RefCell<sluice::interop::HostTarget>>>> {
    if !in_place_wanted() {
        return Ok(None);
    }
    let target = sluice::interop::HostTarget::new(interop, renderer, CANVAS, CANVAS)?;
    Ok(target.is_in_place().then(|| Rc::new(RefCell::new(target))))
}

impl Ctx {
    /// The bench's context: on an `Interop` device with `HostFrame` readback where there is
    /// one (and `host_frames_wanted`), else a plain renderer reading with `read_into`.
    fn new() -> Res<Self> {
        let options = bench_options()?;
        if host_frames_wanted() {
            if let Ok(interop) = sluice::interop::Interop::with_options(&options) {
                return Ctx::on_interop(&interop, &options);
            }
        }
        Ctx::on(Renderer::with_options(options)?)
    }

    /// A context on `renderer`, reading frames with `Renderer::read_into`.
    fn on(renderer: Renderer) -> Res<Self> {
        let target = renderer.create_target(CANVAS, CANVAS)?;
        Ok(Ctx {
            renderer,
            target,
            interop: None,
            frames: FramePool::default(),
            host: None,
        })
    }

    /// A context on a renderer of `interop`, reading frames into `HostFrame`s (unless
    /// `SLUICE_PEERS_READBACK=read_into`).
    fn on_interop(interop: &sluice::interop::Interop, options: &RendererOptions) -> Res<Self> {
        let mut ctx = Ctx::on(interop.renderer_with_options(options))?;
        if host_frames_wanted() {
            ctx.interop = Some(interop.clone());
            ctx.host = in_place_target(interop, &ctx.renderer)?;
        }
        Ok(ctx)
    }

    /// How this context reads frames back, for the JSON.
    fn readback(&self) -> &'static str {
        match (&self.host, &self.interop) {
            (Some(_), _) => {
                "HostTarget::read (drawn in place in mapped host memory on a CPU device: a barrier and a wait)"
            }
            (None, Some(_)) => "HostFrame::read (copy into imported host pages, wait)",
            (None, None) => "Renderer::read_into (copy to a buffer, map, wait, copy out)",
        }
    }

    /// One frame read back to host memory; with `full`, the whole target is redrawn.
    fn draw(&mut self, scene: &Scene, camera: &dyn Camera, full: bool) -> Res<Frame> {
        if let Some(host) = &self.host {
            let mut target = host.borrow_mut();
            if full {
                target.invalidate();
            }
            target.render(&mut self.renderer, scene, camera)?;
            target.read(&self.renderer)?;
            return Ok(Frame {
                pixels: Some(Pixels::Target(host.clone())),
                pool: self.frames.clone(),
            });
        }
        if full {
            self.target.invalidate();
        }
        self.renderer.render(scene, camera, &self.target)?;
        let [w, h] = self.target.size();
        if let Some(interop) = &self.interop {
            let kept = self.frames.borrow_mut().1.pop();
            let mut frame = match kept {
                Some(frame) => frame,
                None => sluice::interop::HostFrame::for_target(interop, &self.target)?,
            };
            frame.read(&self.renderer, &self.target)?;
            return Ok(Frame {
                pixels: Some(Pixels::Host(frame)),
                pool: self.frames.clone(),
            });
        }
        let mut pixels = self.frames.borrow_mut().0.pop().unwrap_or_default();
        pixels.resize(w as usize * h as usize * 4, 0);
        self.renderer.read_into(&self.target, &mut pixels)?;
        let image = image::RgbaImage::from_raw(w, h, pixels).ok_or("frame size")?;
        Ok(Frame {
            pixels: Some(Pixels::Image(image)),
            pool: self.frames.clone(),
        })
    }

    /// What the renderer's counters say one call of `f` uploaded; `textures` says whether
    /// the case's sources are textures (images, volumes) or buffers (meshes), since the
    /// counters do not split the two.
    fn account(&mut self, textures: bool, f: impl FnOnce(&mut Ctx) -> Res<()>) -> Res<Value> {
        let before = self.renderer.counters();
        f(self)?;
        let d: Counters = self.renderer.counters().since(&before);
        let (tex, buf) = if textures {
            (d.bytes_uploaded, 0)
        } else {
            (0, d.bytes_uploaded)
        };
        Ok(json!({
            "texture_upload_bytes": tex,
            "buffer_upload_bytes": buf,
            "bytes_uploaded": d.bytes_uploaded,
            "derived_bytes_uploaded": d.derived_bytes_uploaded,
            "device_bytes_copied": d.device_bytes_copied,
            "copies_issued": d.copies_issued,
            "textures_created": d.textures_created,
            "staging_buffers_created": d.staging_buffers_created,
        }))
    }
    /// What the counters say one more update (`update(prepared)`) and frame uploaded.
    #[allow(clippy::too_many_arguments)]
    fn account_update<P>(
        &mut self,
        textures: bool,
        scene: &Scene,
        camera: &dyn Camera,
        full: bool,
        prepared: P,
        update: impl FnOnce(P) -> Res<()>,
    ) -> Res<Value> {
        self.account(textures, |ctx| {
            update(prepared)?;
            ctx.draw(scene, camera, full)?;
            Ok(())
        })
    }
}

/// Buffers of frames read back, handed back when their frames are dropped: plain buffers
/// (`read_into`) and `HostFrame`s.
type FramePool = Rc<RefCell<(Vec<Vec<u8>>, Vec<sluice::interop::HostFrame>)>>;

/// Where a frame's pixels were read to.
enum Pixels {
    Image(image::RgbaImage),
    Host(sluice::interop::HostFrame),
    /// The context's in-place target (read until the next frame is drawn).
    Target(Rc<RefCell<sluice::interop::HostTarget>>),
}

/// One frame read back (RGBA8, row 0 at the top); its buffer goes back to the context's
/// pool when it is dropped.
struct Frame {
    pixels: Option<Pixels>,
    pool: FramePool,
}

impl Drop for Frame {
    fn drop(&mut self) {
        match self.pixels.take() {
            Some(Pixels::Image(image)) => self.pool.borrow_mut().0.push(image.into_raw()),
            Some(Pixels::Host(frame)) => self.pool.borrow_mut().1.push(frame),
            Some(Pixels::Target(_)) | None => {}
        }
    }
}

impl Frame {
    fn pixels(&self) -> &Pixels {
        self.pixels.as_ref().expect("taken only on drop")
    }
    fn px(&self, y: u32, x: u32) -> [u8; 4] {
        match self.pixels() {
            Pixels::Image(image) => image.get_pixel(x, y).0,
            Pixels::Host(frame) => {
                let row = frame.row(y).expect("a row of the frame");
                let x = x as usize * 4;
                [row[x], row[x + 1], row[x + 2], row[x + 3]]
            }
            Pixels::Target(target) => {
                let target = target.borrow();
                let row = target.row(y).expect("a row of the frame read");
                let x = x as usize * 4;
                [row[x], row[x + 1], row[x + 2], row[x + 3]]
            }
        }
    }
    fn h(&self) -> u32 {
        match self.pixels() {
            Pixels::Image(image) => image.height(),
            Pixels::Host(frame) => frame.height(),
            Pixels::Target(target) => target.borrow().height(),
        }
    }
    fn w(&self) -> u32 {
        match self.pixels() {
            Pixels::Image(image) => image.width(),
            Pixels::Host(frame) => frame.width(),
            Pixels::Target(target) => target.borrow().width(),
        }
    }
}

/// Timings of one case in the peers' form.
struct Paired {
    timing: Vec<f64>,
    render_only: Vec<f64>,
    cpu: Vec<f64>,
    failures: Vec<String>,
}

/// The buffer of a `HostBufferSource` case that is not shown, with the variant it holds:
/// each update hands it over and keeps the one handed back (which holds the other variant).
struct Spare(std::cell::RefCell<Option<(usize, sluice::interop::HostBuffer)>>);

impl Spare {
    /// Holds `buffer`, variant 0.
    fn new(buffer: sluice::interop::HostBuffer) -> Self {
        Spare(std::cell::RefCell::new(Some((0, buffer))))
    }

    fn take(&self) -> Option<(usize, sluice::interop::HostBuffer)> {
        self.0.borrow_mut().take()
    }

    /// Shows `held` through `source` and keeps the buffer handed back.
    fn hand_over(
        &self,
        source: &sluice::interop::HostBufferSource,
        held: Option<(usize, sluice::interop::HostBuffer)>,
    ) -> Res<()> {
        let (variant, buffer) = held.ok_or("no spare buffer")?;
        let back = source.replace(buffer).map_err(|e| e.to_string())?;
        *self.0.borrow_mut() = Some((1 - variant, back));
        Ok(())
    }
}

/// The peers' `measure_paired`: each iteration times `update(prepare(variant)) + draw()`,
/// then `draw()` alone; `prepare` (making the owned arrays an update moves into a source, as
/// the peers pre-generate theirs) and `check` (on every frame) run outside both timers.
fn measure_paired<P>(
    warmup: usize,
    iters: usize,
    mut prepare: impl FnMut(usize) -> P,
    mut update: impl FnMut(P) -> Res<()>,
    mut draw: impl FnMut() -> Res<Frame>,
    check: impl Fn(&Frame, Option<usize>) -> Option<String>,
) -> Res<Paired> {
    let mut p = Paired {
        timing: Vec::new(),
        render_only: Vec::new(),
        cpu: Vec::new(),
        failures: Vec::new(),
    };
    for i in 0..warmup + iters {
        let variant = i % 2;
        let prepared = prepare(variant);
        let (c0, t0) = (process_cpu(), Instant::now());
        update(prepared)?;
        let frame = draw()?;
        let (a, ca) = (t0.elapsed(), process_cpu() - c0);
        let mut err = check(&frame, Some(variant));
        let t1 = Instant::now();
        let frame = draw()?;
        let b = t1.elapsed();
        err = err.or_else(|| check(&frame, None));
        if i >= warmup {
            p.timing.push(ms(a));
            p.render_only.push(ms(b));
            p.cpu.push(ca * 1e3);
        }
        if let Some(e) = err {
            p.failures.push(format!("iter {i}: {e}"));
        }
    }
    Ok(p)
}

/// A case's result from its paired timings; `bytes` is the data size of one update.
fn finish_case(mut res: Value, p: &Paired, bytes: Option<usize>) -> Value {
    let diffs: Vec<f64> = p
        .timing
        .iter()
        .zip(&p.render_only)
        .map(|(a, b)| a - b)
        .collect();
    let mut timing = stats(&p.timing);
    timing["cpu_median_ms"] = json!(round(median(&p.cpu), 3));
    res["timing"] = timing;
    res["render_only"] = stats(&p.render_only);
    res["update_cost"] = stats(&diffs);
    res["verified"] = json!(p.failures.is_empty());
    if !p.failures.is_empty() {
        res["verify_failures"] = json!(p.failures.iter().take(5).collect::<Vec<_>>());
    }
    if let Some(n) = bytes {
        res["data_bytes"] = json!(n);
        res["gbps_end_to_end"] = json!(gbps(n, median(&p.timing)));
        let uc = median(&diffs);
        res["gbps_upload_attributable"] = if uc > 0.0 {
            json!(gbps(n, uc))
        } else {
            Value::Null
        };
    }
    res
}

/// Upload without drawing: `update(prepare(variant)) + Renderer::upload + wait` against
/// `upload + wait` with nothing changed, paired per iteration; `prepare` is not timed.
fn upload_only<P>(
    ctx: &mut Ctx,
    scene: &Scene,
    cfg: &Config,
    warmup: usize,
    bytes: usize,
    mut prepare: impl FnMut(usize) -> P,
    mut update: impl FnMut(P) -> Res<()>,
) -> Res<Value> {
    let mut with = Vec::new();
    let mut without = Vec::new();
    for i in 0..warmup + cfg.iters {
        let prepared = prepare(i % 2);
        let t0 = Instant::now();
        update(prepared)?;
        ctx.renderer.upload(scene)?;
        ctx.renderer.wait_idle()?;
        let a = t0.elapsed();
        let t1 = Instant::now();
        ctx.renderer.upload(scene)?;
        ctx.renderer.wait_idle()?;
        let b = t1.elapsed();
        if i >= warmup {
            with.push(ms(a));
            without.push(ms(b));
        }
    }
    let net: Vec<f64> = with.iter().zip(&without).map(|(a, b)| a - b).collect();
    let n = median(&net);
    Ok(json!({
        "how": "update + Renderer::upload(&scene) + wait_idle, minus upload + wait_idle with nothing changed",
        "timing": stats(&with),
        "sync_only": stats(&without),
        "net": stats(&net),
        "gbps_net": if n > 0.0 { json!(gbps(bytes, n)) } else { Value::Null },
    }))
}

// ------------------------------------------------------------------------- test data --

/// A small deterministic generator (xorshift64*), so both variants are the same every run.
struct Rng(u64);

impl Rng {
    fn new(seed: u64) -> Self {
        Rng(seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1)
    }
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }
    fn unit(&mut self) -> f32 {
        (self.next() >> 40) as f32 / (1u64 << 24) as f32
    }
}

/// Two n x n RGBA8 images: random colours, opaque, B = A ^ 0x55, a red (A) or green (B)
/// block over the middle quarter.
fn rgba_pair(n: usize, seed: u64) -> (Array3<u8>, Array3<u8>) {
    let mut rng = Rng::new(seed);
    let mut a = Array3::<u8>::zeros((n, n, 4));
    for v in a.iter_mut() {
        *v = rng.next() as u8;
    }
    let mut b = a.mapv(|v| v ^ 0x55);
    let (lo, hi) = (n * 3 / 8, n * 5 / 8);
    for y in 0..n {
        for x in 0..n {
            a[[y, x, 3]] = 255;
            b[[y, x, 3]] = 255;
            if (lo..hi).contains(&y) && (lo..hi).contains(&x) {
                for (c, (va, vb)) in [(250, 10), (10, 250), (10, 10), (255, 255)]
                    .into_iter()
                    .enumerate()
                {
                    a[[y, x, c]] = va;
                    b[[y, x, c]] = vb;
                }
            }
        }
    }
    (a, b)
}

/// Two n x n f32 images: A in [0.25, 0.75] with a block of 1.0, B = 1 - A (block 0.0).
fn f32_pair(n: usize, seed: u64) -> (Array2<f32>, Array2<f32>) {
    let mut rng = Rng::new(seed);
    let mut a = Array2::<f32>::from_shape_fn((n, n), |_| rng.unit() * 0.5 + 0.25);
    let (lo, hi) = (n * 3 / 8, n * 5 / 8);
    a.slice_mut(sluice::ndarray::s![lo..hi, lo..hi]).fill(1.0);
    let b = a.mapv(|v| 1.0 - v);
    (a, b)
}

/// Two n^3 u8 volumes: A in [0, 100], B = A + 150 (a MIP of mid-gray against bright).
fn volume_pair(n: usize, seed: u64) -> (Array3<u8>, Array3<u8>) {
    let mut rng = Rng::new(seed);
    let a = Array3::<u8>::from_shape_fn((n, n, n), |_| (rng.next() % 101) as u8);
    let b = a.mapv(|v| v + 150);
    (a, b)
}

/// A g x g grid over [0, 1]^2 with a small z ripple, and the same shrunk to the central
/// quarter (z mirrored); two triangles per cell.
fn mesh_data(g: usize) -> (Array2<f32>, Array2<f32>, Array2<u32>) {
    let lin = |i: usize| i as f32 / (g - 1) as f32;
    let pa = Array2::<f32>::from_shape_fn((g * g, 3), |(i, c)| {
        let (x, y) = (lin(i % g), lin(i / g));
        match c {
            0 => x,
            1 => y,
            _ => 0.05 * (x * 20.0).sin() * (y * 20.0).cos(),
        }
    });
    let mut pb = pa.clone();
    for mut row in pb.rows_mut() {
        row[0] = 0.25 + 0.5 * row[0];
        row[1] = 0.25 + 0.5 * row[1];
        row[2] = -row[2];
    }
    let cells = (g - 1) * (g - 1);
    let mut faces = Array2::<u32>::zeros((2 * cells, 3));
    for (k, (r, c)) in (0..g - 1)
        .flat_map(|r| (0..g - 1).map(move |c| (r, c)))
        .enumerate()
    {
        let q0 = (r * g + c) as u32;
        let (q1, q2, q3) = (q0 + 1, q0 + 1 + g as u32, q0 + g as u32);
        faces
            .row_mut(k)
            .assign(&sluice::ndarray::arr1(&[q0, q1, q2]));
        faces
            .row_mut(cells + k)
            .assign(&sluice::ndarray::arr1(&[q0, q2, q3]));
    }
    (pa, pb, faces)
}

// ------------------------------------------------------------------------ frame checks --

fn check_rgb_marker(f: &Frame, variant: usize, at: Option<(u32, u32)>) -> Option<String> {
    let (y, x) = at.unwrap_or((f.h() / 2, f.w() / 2));
    let p = f.px(y, x);
    let (r, g) = (p[0], p[1]);
    match variant {
        0 if !(r > 180 && g < 80) => {
            Some(format!("expected red marker at {:?}, got {p:?}", (y, x)))
        }
        1 if !(g > 180 && r < 80) => {
            Some(format!("expected green marker at {:?}, got {p:?}", (y, x)))
        }
        _ => None,
    }
}

fn check_gray_marker(f: &Frame, variant: usize) -> Option<String> {
    let p = f.px(f.h() / 2, f.w() / 2);
    match variant {
        0 if p[0] < 200 => Some(format!("expected white marker at centre, got {p:?}")),
        1 if p[0] > 50 => Some(format!("expected black marker at centre, got {p:?}")),
        _ => None,
    }
}

fn check_covered(f: &Frame, points: &[(u32, u32)]) -> Option<String> {
    points.iter().find_map(|&(y, x)| {
        let p = f.px(y, x);
        (p[3] != 255).then(|| format!("pixel {:?} not covered: {p:?}", (y, x)))
    })
}

/// Whose framing the volume case copies: both peers look along (-1, -1, -1) with a 45 degree
/// perspective camera, from different distances, so their volumes cover different shares of
/// the frame (VisPy 44.6 %, pygfx 58.5 % of 1024^2 pixels) and march that many rays.
#[derive(Clone, Copy, Debug, PartialEq)]
enum VolumeView {
    /// VisPy's `TurntableCamera(fov=45)` after `set_range()`: the eye at
    /// `scale_factor / (2 tan(fov / 2))` from the centre, `scale_factor` = 1.9815 n (the
    /// value VisPy 0.17 computes for an n^3 volume: the box diagonal, 4 % extra, and its
    /// margin).
    Vispy,
    /// pygfx's `PerspectiveCamera(45).show_object(volume, view_dir=(-1, -1, -1))`: the eye
    /// 2.0906 n from the centre (pygfx 0.17 puts it at 1.6992 n + 0.5 n along each axis for
    /// an n^3 volume).
    Pygfx,
}

impl VolumeView {
    fn name(self) -> &'static str {
        match self {
            VolumeView::Vispy => "vispy",
            VolumeView::Pygfx => "pygfx",
        }
    }
}

/// The camera of the volume case: a peer's framing of the n^3 volume, looking along the
/// diagonal from azimuth 45, elevation 35.26 degrees (the cube's silhouette is the same
/// hexagon whatever the roll about the view axis).
fn peer_volume_camera(view: VolumeView, n: usize) -> OrbitCamera {
    let n = n as f32;
    let fov = 45.0f32;
    let distance = match view {
        VolumeView::Vispy => 1.9815 * n / (2.0 * (fov.to_radians() * 0.5).tan()),
        VolumeView::Pygfx => 2.0906 * n,
    };
    let mut camera = OrbitCamera::fit(Vec3::ZERO, Vec3::splat(n), 45.0, 35.264);
    camera.projection = sluice::Projection::Perspective { fov_y_degrees: fov };
    camera.distance = distance;
    let radius = n * 0.5 * 3.0f32.sqrt();
    camera.near = (distance - radius * 1.5).max(distance * 1e-3);
    camera.far = distance + radius * 1.5;
    camera
}

/// The share of a frame's pixels that are covered (alpha 255).
fn covered_fraction(f: &Frame) -> f64 {
    let (h, w) = (f.h(), f.w());
    let mut covered = 0u64;
    for y in 0..h {
        for x in 0..w {
            covered += u64::from(f.px(y, x)[3] == 255);
        }
    }
    covered as f64 / (f64::from(w) * f64::from(h))
}

fn volume_check(f: &Frame, variant: Option<usize>) -> Option<String> {
    let p = f.px(f.h() / 2, f.w() / 2);
    let v = p[1];
    match variant {
        None if v == 0 => Some(format!("blank centre pixel {p:?}")),
        Some(0) if !(30 < v && v < 200) => {
            Some(format!("expected mid-gray MIP at centre, got {v}"))
        }
        Some(1) if v <= 200 => Some(format!("expected bright MIP at centre, got {v}")),
        _ => None,
    }
}

fn mesh_check(f: &Frame, variant: usize) -> Option<String> {
    let (h, w) = (f.h(), f.w());
    let covered = |y: u32, x: u32| f.px(y, x)[3] == 255;
    if !covered(h / 2, w / 2) {
        return Some(format!("centre not covered: {:?}", f.px(h / 2, w / 2)));
    }
    let corners = [
        (h / 10, w / 10),
        (h - h / 10, w - w / 10),
        (h / 10, w - w / 10),
        (h - h / 10, w / 10),
    ];
    let cov: Vec<bool> = corners.iter().map(|&(y, x)| covered(y, x)).collect();
    match variant {
        0 if !cov.iter().all(|&c| c) => Some(format!("variant 0 should cover corners: {cov:?}")),
        1 if cov.iter().any(|&c| c) => Some(format!("variant 1 should not cover corners: {cov:?}")),
        _ => None,
    }
}

// --------------------------------------------------------------------------- the cases --

/// A camera showing the world rectangle `0..w x 0..h` whole.
fn fit_camera(w: f32, h: f32) -> PanZoomCamera {
    PanZoomCamera::fit(Vec2::ZERO, Vec2::new(w, h), [CANVAS, CANVAS])
}

/// A scene on a transparent background, so coverage can be read from alpha.
fn new_scene() -> Scene {
    let mut scene = Scene::new();
    scene.set_background([0.0, 0.0, 0.0, 0.0]);
    scene
}

fn bench_readback(ctx: &mut Ctx, cfg: &Config) -> Res<Value> {
    let (a, _) = rgba_pair(256, 0);
    let mut scene = new_scene();
    scene.add(Image::new(Arc::new(ArraySource::with_channels(a)?)));
    let camera = fit_camera(256.0, 256.0);
    for _ in 0..2 {
        ctx.draw(&scene, &camera, true)?;
        // The ordinary target too, where frames are drawn into an in-place one.
        ctx.target.invalidate();
        ctx.renderer.render(&scene, &camera, &ctx.target)?;
    }
    // `read_image` (a new image per read), `read_into` (the caller's buffer, one for all
    // reads), on an interop device `HostFrame::read` (imported pages the GPU writes) and on a
    // CPU one `HostTarget::read` (drawn in place) alternate, so that all see the same machine.
    let (mut readback, mut into, mut host) = (Vec::new(), Vec::new(), Vec::new());
    let mut in_place = Vec::new();
    let mut pixels = vec![0u8; (CANVAS * CANVAS * 4) as usize];
    let reference = ctx.renderer.read_image(&ctx.target)?;
    let mut frame = match &ctx.interop {
        Some(interop) => Some(sluice::interop::HostFrame::for_target(
            interop,
            &ctx.target,
        )?),
        None => None,
    };
    for i in 0..cfg.warmup + cfg.iters * 2 {
        let t = Instant::now();
        ctx.renderer.read_image(&ctx.target)?;
        let t_image = ms(t.elapsed());
        let t = Instant::now();
        ctx.renderer.read_into(&ctx.target, &mut pixels)?;
        let t_into = ms(t.elapsed());
        let t_host = match frame.as_mut() {
            Some(frame) => {
                let t = Instant::now();
                frame.read(&ctx.renderer, &ctx.target)?;
                Some(ms(t.elapsed()))
            }
            None => None,
        };
        let t_in_place = match &ctx.host {
            Some(target) => {
                let mut target = target.borrow_mut();
                let t = Instant::now();
                target.read(&ctx.renderer)?;
                Some(ms(t.elapsed()))
            }
            None => None,
        };
        if i >= cfg.warmup {
            readback.push(t_image);
            into.push(t_into);
            host.extend(t_host);
            in_place.extend(t_in_place);
        }
    }
    let same = pixels == reference.as_raw().as_slice();
    let mut out = json!({
        "readback_1024x1024_rgba8": {
            "what": "Renderer::read_image of the 1024x1024 RGBA8 target (copy to a buffer, map, wait, copy out into a new image)",
            "timing": stats(&readback),
            "bytes": CANVAS * CANVAS * 4,
        },
        "readback_1024x1024_rgba8_into": {
            "what": "Renderer::read_into of the 1024x1024 RGBA8 target (copy to a buffer, map, wait, copy out into the caller's buffer, the same one for every read), alternating with read_image",
            "timing": stats(&into),
            "bytes": CANVAS * CANVAS * 4,
            "verified": same,
        }
    });
    if let Some(frame) = frame {
        out["readback_1024x1024_rgba8_host_frame"] = json!({
            "what": "HostFrame::read of the 1024x1024 RGBA8 target (the GPU copies into imported host pages, wait; the pixels are read where they landed), alternating with the two above",
            "timing": stats(&host),
            "bytes": CANVAS * CANVAS * 4,
            "imported": frame.is_imported(),
            "staged_reason": frame.fallback_reason(),
            "verified": frame.to_packed() == reference.as_raw().as_slice(),
        });
    }
    if let Some(target) = &ctx.host {
        let target = target.borrow();
        out["readback_1024x1024_rgba8_host_target"] = json!({
            "what": "HostTarget::read of the 1024x1024 RGBA8 frame drawn in place in mapped host memory (a CPU device): a barrier making the device's writes visible to the host, and the wait; no copy. Alternating with the three above, so each read follows the one before with no frame drawn between (the barrier stays in GENERAL); the frame cases time the first read after a draw",
            "timing": stats(&in_place),
            "bytes": CANVAS * CANVAS * 4,
            "verified": target.to_packed().as_deref() == Some(reference.as_raw().as_slice()),
        });
    }
    for (key, full) in [
        ("frame_floor_trivial_scene", false),
        ("frame_floor_trivial_scene_full_redraw", true),
    ] {
        let mut times = Vec::new();
        let mut last = None;
        for i in 0..cfg.warmup + cfg.iters {
            let t = Instant::now();
            let f = ctx.draw(&scene, &camera, full)?;
            if i >= cfg.warmup {
                times.push(ms(t.elapsed()));
            }
            last = Some(f);
        }
        let verified = last.is_some_and(|f| check_covered(&f, &[(10, 10)]).is_none());
        out[key] = json!({
            "what": format!("a frame of a 256x256 image, nothing changed, read back{}",
                if full { "; the whole target redrawn" } else { "; sluice draws nothing" }),
            "timing": stats(&times),
            "verified": verified,
        });
    }
    Ok(out)
}

/// How a full-update case changes its source.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Update {
    /// `ArraySource::replace` with an owned copy of A or B, made outside the timer (the
    /// peers hand their libraries pre-generated arrays).
    Replace,
    /// `ArraySource::write` of the whole array from A or B in place (one more host copy).
    Write,
}

fn redraw_note(full: bool) -> &'static str {
    if full {
        "the whole target redrawn every frame (RenderTarget::invalidate): the peers' work"
    } else {
        "sluice's default: a 2-D frame redraws only the screen rectangles of texels copied since the last frame"
    }
}

/// The redraw variants of a 2-D case: sluice's default, then the whole target every frame.
const REDRAWS: [(&str, bool); 2] = [("", false), ("_full_redraw", true)];

/// One full-update image case.
#[allow(clippy::too_many_arguments)]
fn image_case<T: sluice::Element + Clone>(
    ctx: &mut Ctx,
    cfg: &Config,
    pair: &[ArrayD<T>; 2],
    channels: bool,
    clim: [f64; 2],
    check: fn(&Frame, usize) -> Option<String>,
    how: Update,
    full: bool,
) -> Res<Value> {
    let n = pair[0].shape()[0];
    let bytes = std::mem::size_of_val(pair[0].as_slice().ok_or("array not contiguous")?);
    let source = Arc::new(if channels {
        ArraySource::with_channels(pair[0].clone())?
    } else {
        ArraySource::new(pair[0].clone())?
    });
    let mut scene = new_scene();
    scene.add(
        Image::new(source.clone())
            .with_clim(clim[0], clim[1])?
            .with_colormap(Colormap::Gray),
    );
    let camera = fit_camera(n as f32, n as f32);
    let corners = [(3, 3), (CANVAS - 4, CANVAS - 4)];
    let t0 = Instant::now();
    ctx.draw(&scene, &camera, true)?;
    let first = ms(t0.elapsed());
    let origin = vec![0; pair[0].ndim() - usize::from(channels)];
    let update = |variant: usize, owned: Option<ArrayD<T>>| -> Res<()> {
        match owned {
            Some(a) => source.replace(a)?,
            None => source.write(&origin, pair[variant].view())?,
        };
        Ok(())
    };
    let prepare = |variant: usize| {
        (
            variant,
            (how == Update::Replace).then(|| pair[variant].clone()),
        )
    };
    let p = measure_paired(
        cfg.warmup,
        cfg.iters,
        prepare,
        |(v, owned)| update(v, owned),
        || ctx.draw(&scene, &camera, full),
        |f, v| check_covered(f, &corners).or_else(|| v.and_then(|v| check(f, v))),
    )?;
    let mut res = finish_case(
        json!({
            "first_draw_ms": round(first, 1),
            "update_api": match how {
                Update::Replace => "ArraySource::replace(owned array, cloned from the pre-generated A/B array outside the timer)",
                Update::Write => "ArraySource::write(origin 0, view of the pre-generated A/B array)",
            },
            "redraw": redraw_note(full),
        }),
        &p,
        Some(bytes),
    );
    res["uploaded_per_update"] =
        ctx.account_update(true, &scene, &camera, full, prepare(0), |(v, owned)| {
            update(v, owned)
        })?;
    if !full && how == Update::Replace {
        res["upload_only"] =
            upload_only(ctx, &scene, cfg, cfg.warmup, bytes, prepare, |(v, o)| {
                update(v, o)
            })?;
    }
    Ok(res)
}

/// What a `HostBufferSource` case draws: a scene of the source, its camera, and the frame
/// check (the variant shown, when one is expected).
type HostBufferScene = (
    Scene,
    Box<dyn Camera>,
    Box<dyn Fn(&Frame, Option<usize>) -> Option<String>>,
);

/// The zero-copy variant of a full-update case (`..._host_buffer`): A and B are held in two
/// `HostBuffer`s and handed to a `HostBufferSource` in turn (`replace` hands back the other
/// once the GPU copy that read it is done), so an update is one GPU copy from the user's own
/// pages, with no host copy. On its own renderer from an `Interop` on the same adapter; where
/// the adapter has no Vulkan interop the case says so (`skipped`) and nothing fails. Where the
/// driver lacks `VK_EXT_external_memory_host` the source stages (`host_buffer.staged_reason`).
#[allow(clippy::too_many_arguments)]
fn host_buffer_case<T: sluice::Element + bytemuck::Pod + Clone>(
    interop: &Result<sluice::interop::Interop, String>,
    cfg: &Config,
    pair: &[ArrayD<T>; 2],
    channels: bool,
    clim: [f64; 2],
    check: fn(&Frame, usize) -> Option<String>,
    full: bool,
) -> Res<Value> {
    let n = pair[0].shape()[0];
    let run = HostBufferRun {
        channels,
        full,
        textures: true,
        upload_only: !full,
        what: "",
    };
    host_buffer_run(interop, cfg, pair, run, |source| {
        let mut scene = new_scene();
        scene.add(
            Image::new(source)
                .with_clim(clim[0], clim[1])?
                .with_colormap(Colormap::Gray),
        );
        let corners = [(3, 3), (CANVAS - 4, CANVAS - 4)];
        let check = move |f: &Frame, v: Option<usize>| {
            check_covered(f, &corners).or_else(|| v.and_then(|v| check(f, v)))
        };
        Ok((
            scene,
            Box::new(fit_camera(n as f32, n as f32)),
            Box::new(check),
        ))
    })
}

/// How a `HostBufferSource` case runs.
struct HostBufferRun<'a> {
    /// The data's last axis is channels.
    channels: bool,
    /// Whole redraws.
    full: bool,
    /// The source is drawn from a texture (images), else from a buffer (meshes).
    textures: bool,
    /// Measure the upload alone too.
    upload_only: bool,
    /// Added to the case's note.
    what: &'a str,
}

/// A `HostBufferSource` case: the source on `pair[1]`, the scene `build` makes of it, then
/// paired timed updates handing over A and B in turn, the bytes of one update, the upload
/// alone (where `run` asks), and the source's statistics.
fn host_buffer_run<T: sluice::Element + bytemuck::Pod + Clone>(
    interop: &Result<sluice::interop::Interop, String>,
    cfg: &Config,
    pair: &[ArrayD<T>; 2],
    run: HostBufferRun<'_>,
    build: impl FnOnce(SharedSource) -> Res<HostBufferScene>,
) -> Res<Value> {
    let HostBufferRun {
        channels,
        full,
        textures,
        upload_only: upload_alone,
        what,
    } = run;
    use sluice::interop::{HostBuffer, HostBufferSource};

    let options = bench_options()?;
    let interop = match interop {
        Ok(interop) => interop,
        Err(e) => return Ok(json!({ "skipped": format!("no Vulkan interop device: {e}") })),
    };
    let mut ctx = Ctx::on_interop(interop, &options)?;
    let layout = if channels {
        ArraySource::with_channels(pair[0].clone())?.layout()
    } else {
        ArraySource::new(pair[0].clone())?.layout()
    };
    let data = |v: usize| -> Res<Vec<T>> {
        Ok(pair[v].as_slice().ok_or("array not contiguous")?.to_vec())
    };
    let bytes = layout.total_bytes();
    // The source starts on B, so that the first update (variant 0) hands over A.
    let source = Arc::new(HostBufferSource::new(interop, layout, data(1)?)?);
    source.set_sample_in_place(sampling_in_place_wanted());
    // The buffer not shown, with the variant it holds.
    let spare = Spare::new(HostBuffer::from(data(0)?));
    let (scene, camera, check) = build(source.clone())?;
    let t0 = Instant::now();
    ctx.draw(&scene, &*camera, true)?;
    let first = ms(t0.elapsed());
    let prepare = |_variant: usize| spare.take();
    let update = |held| spare.hand_over(&source, held);
    let p = measure_paired(
        cfg.warmup,
        cfg.iters,
        prepare,
        update,
        || ctx.draw(&scene, &*camera, full),
        check,
    )?;
    let imported = source.is_imported();
    let mut res = finish_case(
        json!({
            "first_draw_ms": round(first, 1),
            "update_api": format!("HostBufferSource::replace(the HostBuffer holding the pre-generated A/B data; the other one is handed back){what}"),
            "redraw": redraw_note(full),
        }),
        &p,
        Some(bytes),
    );
    res["uploaded_per_update"] =
        ctx.account_update(textures, &scene, &*camera, full, prepare(0), update)?;
    if upload_alone {
        res["upload_only"] =
            upload_only(&mut ctx, &scene, cfg, cfg.warmup, bytes, prepare, update)?;
    }
    res["mesh_draws_reordered"] = json!(ctx.renderer.counters().mesh_draws_reordered);
    res["mesh_draws_culled"] = json!(ctx.renderer.counters().mesh_draws_culled);
    res["mesh_culls_run"] = json!(ctx.renderer.counters().mesh_culls_run);
    let stats = source.stats();
    res["host_buffer"] = json!({
        "imported": imported,
        "staged_reason": source.staged_reason(),
        "fallback_reason": source.fallback_reason(),
        "buffers_handed": stats.buffers_handed,
        "imports_made": stats.imports_made,
        "host_bytes_copied": stats.bytes_copied,
        "gpu_copies": stats.gpu_copies,
        "gpu_bytes": stats.gpu_bytes,
        "hand_back_waits": stats.waits,
        "in_place_images": stats.in_place_images,
        "in_place_refusal": source.in_place_refusal(),
    });
    Ok(res)
}

/// Whether `HostBufferSource`s may be drawn in place on CPU devices (the default; not with
/// `SLUICE_PEERS_IN_PLACE=0`).
fn sampling_in_place_wanted() -> bool {
    std::env::var("SLUICE_PEERS_IN_PLACE").as_deref() != Ok("0")
}

/// An added variant's result, or its error in its place (printed too), so that a variant a
/// machine cannot run costs none of the benchmark's other cases.
fn case_or_error(result: Res<Value>) -> Value {
    result.unwrap_or_else(|e| {
        eprintln!("peers: variant failed: {e}");
        json!({ "error": e.to_string(), "verified": false })
    })
}

/// The renderer options of every context: `RendererOptions::from_env`, with dense meshes
/// drawn whole (every triangle, as without `RendererOptions::mesh_cull`) where
/// `SLUICE_PEERS_MESH_CULL=0` (for A/B runs).
fn bench_options() -> Result<RendererOptions, sluice::RenderError> {
    let mut options = RendererOptions::from_env()?;
    if std::env::var("SLUICE_PEERS_MESH_CULL").as_deref() == Ok("0") {
        options.mesh_cull = false;
    }
    Ok(options)
}

fn bench_full_update_2d(ctx: &mut Ctx, cfg: &Config) -> Res<Value> {
    let mut out = serde_json::Map::new();
    let n = cfg.rgba_size;
    let (a, b) = rgba_pair(n, 0);
    let rgba = [a.into_dyn(), b.into_dyn()];
    let rgb_check = |f: &Frame, v: usize| check_rgb_marker(f, v, None);
    // One interop device for the host_buffer variants (opened once: NVIDIA's driver is safer
    // with few device creations), beside the context's renderer.
    let interop = bench_options()
        .map_err(|e| e.to_string())
        .and_then(|o| sluice::interop::Interop::with_options(&o).map_err(|e| e.to_string()));
    for (suffix, how, full) in [
        ("", Update::Replace, false),
        ("_full_redraw", Update::Replace, true),
        ("_write_in_place", Update::Write, true),
    ] {
        let v = image_case(ctx, cfg, &rgba, true, [0.0, 255.0], rgb_check, how, full)?;
        out.insert(format!("rgba8_{n}{suffix}"), v);
    }
    for (suffix, full) in REDRAWS {
        let v = host_buffer_case(&interop, cfg, &rgba, true, [0.0, 255.0], rgb_check, full);
        out.insert(format!("rgba8_{n}_host_buffer{suffix}"), case_or_error(v));
    }
    let m = cfg.f32_size;
    let (a, b) = f32_pair(m, 1);
    let gray = [a.into_dyn(), b.into_dyn()];
    for (suffix, full) in REDRAWS {
        let v = image_case(
            ctx,
            cfg,
            &gray,
            false,
            [0.0, 1.0],
            check_gray_marker,
            Update::Replace,
            full,
        )?;
        out.insert(format!("f32_{m}{suffix}"), v);
        let v = host_buffer_case(
            &interop,
            cfg,
            &gray,
            false,
            [0.0, 1.0],
            check_gray_marker,
            full,
        );
        out.insert(format!("f32_{m}_host_buffer{suffix}"), case_or_error(v));
    }
    Ok(Value::Object(out))
}

/// The two blocks the partial update writes: red (A) or green (B), with some texture.
fn partial_blocks(s: usize) -> [Array3<u8>; 2] {
    let block = |r: u8, g: u8, sy: usize, sx: usize| {
        Array3::<u8>::from_shape_fn((s, s, 4), |(y, x, c)| match c {
            0 => r,
            1 => g,
            2 if y % sy == 0 && x % sx == 0 => 99,
            2 => 10,
            _ => 255,
        })
    };
    [block(250, 10, 7, 5), block(10, 250, 5, 7)]
}

fn bench_partial_update_2d(ctx: &mut Ctx, cfg: &Config) -> Res<Value> {
    let n = cfg.rgba_size;
    let s = cfg.partial_region;
    let (a, _) = rgba_pair(n, 0);
    let source = Arc::new(ArraySource::with_channels(a)?);
    let mut scene = new_scene();
    scene.add(Image::new(source.clone()).with_clim(0.0, 255.0)?);
    let camera = fit_camera(n as f32, n as f32);
    ctx.draw(&scene, &camera, true)?;
    let blocks = partial_blocks(s);
    let mut out = serde_json::Map::new();
    for (label, off) in [
        ("aligned", n / 2 - s / 2),
        ("unaligned", n / 2 - s / 2 - 37),
    ] {
        for (suffix, full) in REDRAWS {
            let update = |v: usize| -> Res<()> {
                source.write(&[off, off], blocks[v].view())?;
                Ok(())
            };
            let p = measure_paired(
                cfg.warmup,
                cfg.iters,
                |v| v,
                update,
                || ctx.draw(&scene, &camera, full),
                |f, v| v.and_then(|v| check_rgb_marker(f, v, None)),
            )?;
            let mut res = finish_case(
                json!({
                    "what": format!("ArraySource::write({s}x{s} block at x=y={off}) + frame, on a {n}x{n} RGBA8 source"),
                    "region_bytes": s * s * 4,
                    "redraw": redraw_note(full),
                }),
                &p,
                None,
            );
            res["uploaded_per_update"] =
                ctx.account_update(true, &scene, &camera, full, 0, update)?;
            out.insert(format!("rgba8_{n}_region{s}_{label}{suffix}"), res);
        }
    }
    Ok(Value::Object(out))
}

fn bench_volume_3d(ctx: &mut Ctx, cfg: &Config) -> Res<Value> {
    let mut out = serde_json::Map::new();
    // One interop device for the host_buffer variants, beside the context's renderer.
    let interop = bench_options()
        .map_err(|e| e.to_string())
        .and_then(|o| sluice::interop::Interop::with_options(&o).map_err(|e| e.to_string()));
    for &n in &cfg.volumes {
        let (a, b) = volume_pair(n, 3);
        let bytes = a.len();
        let source = Arc::new(ArraySource::new(a.clone())?);
        let mut scene = new_scene();
        scene.add(
            Volume::new(source.clone())
                .with_mode(VolumeMode::Mip)?
                .with_clim(0.0, 255.0)?
                .with_colormap(Colormap::Gray)
                .with_interpolation(Interpolation::Linear)
                .with_step(cfg.volume_step)?,
        );
        let camera = peer_volume_camera(cfg.volume_view, n);
        let t0 = Instant::now();
        let covered = covered_fraction(&ctx.draw(&scene, &camera, true)?);
        let first = ms(t0.elapsed());
        let arrays = [a, b];
        let warm = cfg.warmup.min(2);
        let prepare = |v: usize| arrays[v].clone();
        let update = |owned: Array3<u8>| -> Res<()> {
            source.replace(owned)?;
            Ok(())
        };
        let p = measure_paired(
            warm,
            cfg.iters,
            prepare,
            update,
            || ctx.draw(&scene, &camera, true),
            volume_check,
        )?;
        let mut res = finish_case(
            json!({
                "what": format!("ArraySource::replace(new {n}^3 u8 volume) + frame (MIP, linear, step {} voxel, perspective, looking along the diagonal)", cfg.volume_step),
                "first_draw_ms": round(first, 1),
                "view": cfg.volume_view.name(),
                "covered_fraction": round(covered, 4),
            }),
            &p,
            Some(bytes),
        );
        res["uploaded_per_update"] =
            ctx.account_update(true, &scene, &camera, true, prepare(0), update)?;
        res["upload_only"] = upload_only(ctx, &scene, cfg, warm, bytes, prepare, update)?;
        out.insert(format!("u8_{n}^3"), res);
        let variant = volume_host_buffer_case(&interop, cfg, n, &arrays);
        out.insert(format!("u8_{n}^3_host_buffer"), case_or_error(variant));
    }
    Ok(Value::Object(out))
}

/// The zero-copy variant of a volume case (`u8_{n}^3_host_buffer`): the A/B volumes held in
/// two `HostBuffer`s handed to a `HostBufferSource` in turn, copied by the GPU from their pages
/// into the 3-D texture; the same MIP, camera and checks, on a renderer of an `Interop` on the
/// same adapter.
fn volume_host_buffer_case(
    interop: &Result<sluice::interop::Interop, String>,
    cfg: &Config,
    n: usize,
    pair: &[Array3<u8>; 2],
) -> Res<Value> {
    let pair = [pair[0].clone().into_dyn(), pair[1].clone().into_dyn()];
    let run = HostBufferRun {
        channels: false,
        full: true,
        textures: true,
        upload_only: true,
        what: "",
    };
    let view = cfg.volume_view;
    let mut res = host_buffer_run(interop, cfg, &pair, run, |source| {
        let mut scene = new_scene();
        scene.add(
            Volume::new(source)
                .with_mode(VolumeMode::Mip)?
                .with_clim(0.0, 255.0)?
                .with_colormap(Colormap::Gray)
                .with_interpolation(Interpolation::Linear)
                .with_step(cfg.volume_step)?,
        );
        Ok((
            scene,
            Box::new(peer_volume_camera(view, n)),
            Box::new(volume_check),
        ))
    })?;
    if res.get("skipped").is_none() {
        res["what"] = json!(format!("HostBufferSource::replace(the HostBuffer holding the pre-generated {n}^3 u8 volume; the other one is handed back) + frame (MIP, linear, step {} voxel, perspective, looking along the diagonal)", cfg.volume_step));
        res["view"] = json!(view.name());
    }
    Ok(res)
}

fn bench_mesh_update(ctx: &mut Ctx, cfg: &Config) -> Res<Value> {
    let g = cfg.mesh_grid;
    let (pa, pb, faces) = mesh_data(g);
    let triangles = faces.nrows();
    let bytes = pa.len() * 4;
    let positions = Arc::new(ArraySource::with_channels(pa.clone())?);
    let faces_again = faces.clone();
    let mut scene = new_scene();
    let node = scene.add(
        Mesh::new(positions.clone())
            .with_indices(Arc::new(ArraySource::with_channels(faces)?))
            .with_color([1.0, 0.5, 0.0, 1.0])
            .with_shading(Shading::Unlit),
    );
    // The ripple's z is within +-0.05: move it inside the clip volume's depth range.
    scene.set_transform(node, Mat4::from_translation(Vec3::new(0.0, 0.0, 0.5)));
    let camera = PanZoomCamera::fit(Vec2::splat(-0.01), Vec2::splat(1.01), [CANVAS, CANVAS]);
    let t0 = Instant::now();
    ctx.draw(&scene, &camera, true)?;
    let first = ms(t0.elapsed());
    let arrays = [pa, pb];
    let prepare = |v: usize| arrays[v].clone();
    let update = |owned: Array2<f32>| -> Res<()> {
        positions.replace(owned)?;
        Ok(())
    };
    let p = measure_paired(
        cfg.warmup,
        cfg.iters,
        prepare,
        update,
        || ctx.draw(&scene, &camera, true),
        |f, v| v.and_then(|v| mesh_check(f, v)),
    )?;
    let mut res = finish_case(
        json!({
            "what": format!("ArraySource::replace(new ({},3) f32 positions) + frame; {triangles} triangles (u32 indices, unchanged), unlit uniform colour", g * g),
            "n_vertices": g * g,
            "n_triangles": triangles,
            "first_draw_ms": round(first, 1),
        }),
        &p,
        Some(bytes),
    );
    res["uploaded_per_update"] =
        ctx.account_update(false, &scene, &camera, true, prepare(0), update)?;
    res["upload_only"] = upload_only(ctx, &scene, cfg, cfg.warmup, bytes, prepare, update)?;
    res["mesh_draws_reordered"] = json!(ctx.renderer.counters().mesh_draws_reordered);
    res["mesh_draws_culled"] = json!(ctx.renderer.counters().mesh_draws_culled);
    res["mesh_culls_run"] = json!(ctx.renderer.counters().mesh_culls_run);
    let variant = mesh_host_buffer_case(cfg, &arrays, faces_again);
    Ok(json!({
        format!("mesh_{}v", g * g): res,
        format!("mesh_{}v_host_buffer", g * g): case_or_error(variant),
    }))
}

/// The zero-copy variant of the mesh case (`mesh_..._host_buffer`): the A/B positions held in
/// two `HostBuffer`s handed to a `HostBufferSource` in turn, copied by the GPU from their pages
/// into the vertex buffer; on a renderer of an `Interop` on the same adapter.
fn mesh_host_buffer_case(cfg: &Config, pair: &[Array2<f32>; 2], faces: Array2<u32>) -> Res<Value> {
    let interop = bench_options()
        .map_err(|e| e.to_string())
        .and_then(|o| sluice::interop::Interop::with_options(&o).map_err(|e| e.to_string()));
    let (n, triangles) = (pair[0].nrows(), faces.nrows());
    let pair = [pair[0].clone().into_dyn(), pair[1].clone().into_dyn()];
    let run = HostBufferRun {
        channels: true,
        full: true,
        textures: false,
        upload_only: true,
        what: "",
    };
    let mut res = host_buffer_run(&interop, cfg, &pair, run, |source| {
        let mut scene = new_scene();
        let node = scene.add(
            Mesh::new(source)
                .with_indices(Arc::new(ArraySource::with_channels(faces)?))
                .with_color([1.0, 0.5, 0.0, 1.0])
                .with_shading(Shading::Unlit),
        );
        scene.set_transform(node, Mat4::from_translation(Vec3::new(0.0, 0.0, 0.5)));
        let camera = PanZoomCamera::fit(Vec2::splat(-0.01), Vec2::splat(1.01), [CANVAS, CANVAS]);
        let check = |f: &Frame, v: Option<usize>| v.and_then(|v| mesh_check(f, v));
        Ok((scene, Box::new(camera), Box::new(check)))
    })?;
    if res.get("skipped").is_none() {
        res["what"] = json!(format!("HostBufferSource::replace(the HostBuffer holding the pre-generated ({n},3) f32 positions; the other one is handed back) + frame; {triangles} triangles (u32 indices, unchanged), unlit uniform colour"));
        res["n_vertices"] = json!(n);
        res["n_triangles"] = json!(triangles);
    }
    Ok(res)
}

/// The peers' tile layout: each tile's offset, the whole extent, and the target pixels
/// (row, column) at the tiles' centres.
struct Tiles {
    offsets: Vec<(f32, f32)>,
    extent: (f32, f32),
    centres: Vec<(u32, u32)>,
}

/// `n` tiles of side `s`, 4 per row, gaps of s/16.
fn tile_layout(n: usize, s: usize) -> Tiles {
    let cols = 4;
    let rows = n.div_ceil(cols);
    let gap = (s / 16) as f32;
    let s = s as f32;
    let w = cols as f32 * s + (cols - 1) as f32 * gap;
    let h = rows as f32 * s + (rows - 1) as f32 * gap;
    let offsets: Vec<(f32, f32)> = (0..n)
        .map(|i| ((i % cols) as f32 * (s + gap), (i / cols) as f32 * (s + gap)))
        .collect();
    let camera = fit_camera(w, h);
    let centres = offsets
        .iter()
        .map(|&(ox, oy)| {
            let p = camera.world_to_screen(Vec2::new(ox + s / 2.0, oy + s / 2.0), [CANVAS, CANVAS]);
            (p.y as u32, p.x as u32)
        })
        .collect();
    Tiles {
        offsets,
        extent: (w, h),
        centres,
    }
}

/// A scene of tiled images, its fitted camera and the tiles' centres on screen.
type TiledScene = (Scene, PanZoomCamera, Vec<(u32, u32)>);

/// `n` images of `s` x `s` tiled as the peers tile them, image `i` showing `source_for(i)`.
fn tiled_images(
    n: usize,
    s: usize,
    mut source_for: impl FnMut(usize) -> Res<SharedSource>,
) -> Res<TiledScene> {
    let Tiles {
        offsets,
        extent: (w, h),
        centres,
    } = tile_layout(n, s);
    let mut scene = new_scene();
    for (i, &(ox, oy)) in offsets.iter().enumerate() {
        let node = scene.add(Image::new(source_for(i)?).with_clim(0.0, 255.0)?);
        scene.set_transform(node, Mat4::from_translation(Vec3::new(ox, oy, 0.0)));
    }
    Ok((scene, fit_camera(w, h), centres))
}

/// A scene of `n` tiled images of `a`: all showing one source, or each its own.
type SharedScene = (Scene, Vec<Arc<ArraySource>>, PanZoomCamera, Vec<(u32, u32)>);

fn shared_scene(n: usize, a: &Array3<u8>, shared: bool) -> Res<SharedScene> {
    let mut sources: Vec<Arc<ArraySource>> = Vec::new();
    let (scene, camera, centres) = tiled_images(n, a.shape()[0], |_| {
        if !shared || sources.is_empty() {
            sources.push(Arc::new(ArraySource::with_channels(a.clone())?));
        }
        Ok(sources.last().ok_or("no source")?.clone())
    })?;
    Ok((scene, sources, camera, centres))
}

fn bench_shared_source(ctx: &mut Ctx, cfg: &Config) -> Res<Value> {
    let (n, s) = (cfg.shared_n, cfg.shared_size);
    let (a, b) = rgba_pair(s, 0);
    let arrays = [a, b];
    let mut out = serde_json::Map::new();
    for shared in [true, false] {
        for (suffix, full) in REDRAWS {
            let (scene, sources, camera, centres) = shared_scene(n, &arrays[0], shared)?;
            ctx.draw(&scene, &camera, true)?;
            let check = |f: &Frame, v: Option<usize>| tiles_check(f, &centres, v);
            let prepare = |v: usize| -> Vec<Array3<u8>> {
                sources.iter().map(|_| arrays[v].clone()).collect()
            };
            let update = |owned: Vec<Array3<u8>>| -> Res<()> {
                for (src, arr) in sources.iter().zip(owned) {
                    src.replace(arr)?;
                }
                Ok(())
            };
            let p = measure_paired(
                cfg.warmup,
                cfg.iters,
                prepare,
                update,
                || ctx.draw(&scene, &camera, full),
                check,
            )?;
            let mut res = finish_case(
                json!({
                    "what": if shared {
                        format!("{n} Images show ONE ArraySource; replace it once + frame")
                    } else {
                        format!("{n} Images, each with its own ArraySource of the same array; replace all {n} + frame")
                    },
                    "redraw": redraw_note(full),
                }),
                &p,
                Some(arrays[0].len()),
            );
            res["uploaded_per_update"] =
                ctx.account_update(true, &scene, &camera, full, prepare(0), update)?;
            let kind = if shared {
                "shared_texture"
            } else {
                "separate_textures"
            };
            out.insert(format!("{n}x_rgba8_{s}_{kind}{suffix}"), res);
        }
    }
    // The shared source through `HostBufferSource` (the user's A/B arrays handed over in
    // turn, copied by the GPU from their pages), on a renderer of an interop device.
    let interop = bench_options()
        .map_err(|e| e.to_string())
        .and_then(|o| sluice::interop::Interop::with_options(&o).map_err(|e| e.to_string()));
    let pair = [arrays[0].clone().into_dyn(), arrays[1].clone().into_dyn()];
    for (suffix, full) in REDRAWS {
        let what = format!("; {n} Images show the one source");
        let run = HostBufferRun {
            channels: true,
            full,
            textures: true,
            upload_only: !full,
            what: &what,
        };
        let v = host_buffer_run(&interop, cfg, &pair, run, |source| {
            let (scene, camera, centres) = tiled_images(n, s, |_| Ok(source.clone()))?;
            let check = move |f: &Frame, v: Option<usize>| tiles_check(f, &centres, v);
            Ok((scene, Box::new(camera), Box::new(check)))
        });
        out.insert(
            format!("{n}x_rgba8_{s}_shared_host_buffer{suffix}"),
            case_or_error(v),
        );
    }
    // Eight separate sources, each a `HostBufferSource` with its own two buffers.
    for (suffix, full) in REDRAWS {
        let v = separate_host_buffers(&interop, cfg, n, &arrays, full);
        out.insert(
            format!("{n}x_rgba8_{s}_separate_host_buffers{suffix}"),
            case_or_error(v),
        );
    }
    out.insert("memory".into(), shared_memory(n, s, cfg.mem_updates));
    Ok(Value::Object(out))
}

/// `n` Images, each with a `HostBufferSource` of its own (two buffers each, A and B handed
/// over in turn): every update replaces all `n`, copied by the GPU from the buffers' pages.
fn separate_host_buffers(
    interop: &Result<sluice::interop::Interop, String>,
    cfg: &Config,
    n: usize,
    arrays: &[Array3<u8>; 2],
    full: bool,
) -> Res<Value> {
    use sluice::interop::{HostBuffer, HostBufferSource};

    let interop = match interop {
        Ok(interop) => interop,
        Err(e) => return Ok(json!({ "skipped": format!("no Vulkan interop device: {e}") })),
    };
    let mut ctx = Ctx::on_interop(interop, &bench_options()?)?;
    let layout = ArraySource::with_channels(arrays[0].clone())?.layout();
    let data = |v: usize| -> Res<Vec<u8>> {
        Ok(arrays[v].as_slice().ok_or("array not contiguous")?.to_vec())
    };
    let (mut sources, mut spares) = (Vec::new(), Vec::new());
    let (scene, camera, centres) = tiled_images(n, arrays[0].shape()[0], |_| {
        // Each source starts on B, so that the first update (variant 0) hands over A.
        let source = Arc::new(HostBufferSource::new(interop, layout.clone(), data(1)?)?);
        source.set_sample_in_place(sampling_in_place_wanted());
        spares.push(Spare::new(HostBuffer::from(data(0)?)));
        sources.push(source.clone());
        Ok(source as SharedSource)
    })?;
    let t0 = Instant::now();
    ctx.draw(&scene, &camera, true)?;
    let first = ms(t0.elapsed());
    let check = |f: &Frame, v: Option<usize>| tiles_check(f, &centres, v);
    let prepare = |_variant: usize| -> Vec<_> { spares.iter().map(Spare::take).collect() };
    let update = |held: Vec<_>| -> Res<()> {
        for ((source, spare), held) in sources.iter().zip(&spares).zip(held) {
            spare.hand_over(source, held)?;
        }
        Ok(())
    };
    let p = measure_paired(
        cfg.warmup,
        cfg.iters,
        prepare,
        update,
        || ctx.draw(&scene, &camera, full),
        check,
    )?;
    let mut res = finish_case(
        json!({
            "what": format!("{n} Images, each with its own HostBufferSource (two HostBuffers of the pre-generated A/B data each); replace all {n} + frame"),
            "first_draw_ms": round(first, 1),
            "redraw": redraw_note(full),
        }),
        &p,
        Some(arrays[0].len()),
    );
    res["uploaded_per_update"] =
        ctx.account_update(true, &scene, &camera, full, prepare(0), update)?;
    let stats: Vec<_> = sources.iter().map(|s| s.stats()).collect();
    res["host_buffer"] = json!({
        "imported": sources.iter().all(|s| s.is_imported()),
        "staged_reason": sources.iter().find_map(|s| s.staged_reason()),
        "buffers_handed": stats.iter().map(|s| s.buffers_handed).sum::<u64>(),
        "imports_made": stats.iter().map(|s| s.imports_made).sum::<u64>(),
        "host_bytes_copied": stats.iter().map(|s| s.bytes_copied).sum::<u64>(),
        "gpu_bytes": stats.iter().map(|s| s.gpu_bytes).sum::<u64>(),
        "in_place_images": stats.iter().map(|s| s.in_place_images).sum::<u64>(),
        "in_place_refusal": sources.iter().find_map(|s| s.in_place_refusal()),
    });
    Ok(res)
}

/// Every tile centre covered, and (when one is expected) showing variant `v`'s marker.
fn tiles_check(f: &Frame, centres: &[(u32, u32)], v: Option<usize>) -> Option<String> {
    let covered = centres
        .iter()
        .filter(|&&(y, x)| f.px(y, x)[3] == 255)
        .count();
    if covered < centres.len() {
        return Some(format!("only {covered} of {} tiles covered", centres.len()));
    }
    let v = v?;
    centres
        .iter()
        .find_map(|&p| check_rgb_marker(f, v, Some(p)))
}

/// Host memory of 1 and `n` visuals, shared and separate, each in a fresh process.
fn shared_memory(n: usize, s: usize, updates: usize) -> Value {
    let mut rows = serde_json::Map::new();
    for (nv, shared) in [(1, true), (n, true), (n, false)] {
        let key = format!(
            "{nv}_visuals_{}",
            if shared { "shared" } else { "separate" }
        );
        let args = [
            "--child",
            "mem",
            "--n-visuals",
            &nv.to_string(),
            "--shared",
            if shared { "1" } else { "0" },
            "--size",
            &s.to_string(),
            "--updates",
            &updates.to_string(),
        ]
        .map(str::to_owned);
        let row = run_child(&args, &[])
            .map(|(v, _)| v)
            .unwrap_or_else(|e| json!({"error": e.to_string()}));
        rows.insert(key, row);
    }
    let base = rows
        .get("1_visuals_shared")
        .and_then(|r| r["rss_after_updates"].as_f64());
    if let Some(base) = base {
        for row in rows.values_mut() {
            if let Some(v) = row["rss_after_updates"].as_f64() {
                row["rss_minus_1_visual_MiB"] = json!(round((v - base) / (1u64 << 20) as f64, 1));
            }
        }
    }
    json!({
        "how": "Fresh process per row; RSS from /proc/self/status after the scene, one frame and the updates. On a CPU driver textures live in host memory, so RSS growth stands for GPU memory.",
        "rows": rows,
    })
}

fn bench_first_frame(_ctx: &mut Ctx, cfg: &Config) -> Res<Value> {
    let mut out = serde_json::Map::new();
    for (name, env) in [
        ("warm_shader_cache", vec![]),
        (
            "mesa_shader_cache_disabled",
            vec![("MESA_SHADER_CACHE_DISABLE", "true")],
        ),
    ] {
        let args = [
            "--child".to_string(),
            "first_frame".into(),
            "--size".into(),
            cfg.first_frame_size.to_string(),
        ];
        // One unmeasured run first (it fills the caches the "warm" case means).
        run_child(&args, &env)?;
        let mut totals = Vec::new();
        let mut phases: BTreeMap<&str, Vec<f64>> = BTreeMap::new();
        let mut all_ok = true;
        for _ in 0..cfg.first_frame_runs {
            let (child, spawned) = run_child(&args, &env)?;
            let at = |k: &str| child[k].as_f64().unwrap_or(f64::NAN);
            totals.push((at("t_frame") - spawned) * 1e3);
            phases
                .entry("process_start")
                .or_default()
                .push((at("t_main") - spawned) * 1e3);
            phases
                .entry("data")
                .or_default()
                .push((at("t_data") - at("t_main")) * 1e3);
            phases
                .entry("context_device")
                .or_default()
                .push((at("t_device") - at("t_data")) * 1e3);
            phases
                .entry("scene_first_draw")
                .or_default()
                .push((at("t_frame") - at("t_device")) * 1e3);
            all_ok &= child["ok"].as_bool() == Some(true);
        }
        let phase_medians: serde_json::Map<String, Value> = phases
            .iter()
            .map(|(k, v)| ((*k).to_owned(), json!(round(median(v), 1))))
            .collect();
        out.insert(
            name.into(),
            json!({
                "what": format!("spawn this binary with --child first_frame -> first {0}^2 RGBA8 image frame on a 1024x1024 target, read back and checked", cfg.first_frame_size),
                "timing": stats(&totals),
                "phase_medians_ms": phase_medians,
                "verified": all_ok,
            }),
        );
    }
    Ok(Value::Object(out))
}

// ----------------------------------------------------------------------- child modes --

/// Runs this binary with `args` and `env`; returns its JSON line and the wall-clock time
/// (seconds since the epoch) just before it was spawned.
fn run_child(args: &[String], env: &[(&str, &str)]) -> Res<(Value, f64)> {
    let exe = std::env::current_exe()?;
    let spawned = epoch_s();
    let out = Command::new(exe)
        .args(args)
        .envs(env.iter().copied())
        .output()?;
    if !out.status.success() {
        return Err(format!(
            "child {args:?} failed ({}): {}",
            out.status,
            String::from_utf8_lossy(&out.stderr).trim()
        )
        .into());
    }
    let text = String::from_utf8_lossy(&out.stdout);
    let line = text.lines().last().ok_or("child printed nothing")?;
    Ok((serde_json::from_str(line)?, spawned))
}

fn child_arg(args: &BTreeMap<String, String>, key: &str) -> Res<usize> {
    let v = args.get(key).ok_or_else(|| format!("--{key} missing"))?;
    v.parse()
        .map_err(|e| format!("--{key} {v:?} is not a count: {e}").into())
}

fn child_first_frame(args: &BTreeMap<String, String>) -> Res<()> {
    let t_main = epoch_s();
    let n = child_arg(args, "size")?;
    let (a, _) = rgba_pair(n, 0);
    let t_data = epoch_s();
    let renderer = Renderer::with_options(bench_options()?)?;
    let t_device = epoch_s();
    let mut ctx = Ctx::on(renderer)?;
    let mut scene = new_scene();
    scene.add(Image::new(Arc::new(ArraySource::with_channels(a)?)).with_clim(0.0, 255.0)?);
    let f = ctx.draw(&scene, &fit_camera(n as f32, n as f32), false)?;
    let t_frame = epoch_s();
    let err = check_rgb_marker(&f, 0, None);
    println!(
        "{}",
        json!({"ok": err.is_none(), "error": err, "t_main": t_main, "t_data": t_data,
               "t_device": t_device, "t_frame": t_frame})
    );
    Ok(())
}

fn child_mem(args: &BTreeMap<String, String>) -> Res<()> {
    let nv = child_arg(args, "n-visuals")?;
    let shared = child_arg(args, "shared")? == 1;
    let s = child_arg(args, "size")?;
    let updates = child_arg(args, "updates")?;
    let mut ctx = Ctx::new()?;
    let empty = new_scene();
    ctx.draw(&empty, &fit_camera(1.0, 1.0), true)?;
    let rss0 = rss_bytes();
    let (a, b) = rgba_pair(s, 0);
    let rss_data = rss_bytes();
    let (scene, sources, camera, _) = shared_scene(nv, &a, shared)?;
    ctx.draw(&scene, &camera, true)?;
    let rss_frame = rss_bytes();
    for i in 0..updates {
        let arr = if i % 2 == 0 { &b } else { &a };
        for src in &sources {
            src.replace(arr.clone())?;
        }
        ctx.draw(&scene, &camera, true)?;
    }
    let rss_updates = rss_bytes();
    let c = ctx.renderer.counters();
    // sluice keeps a burst's staging for the frames that follow (sluice::STAGING_IDLE_FRAMES):
    // RSS again after that many frames with nothing to upload.
    for _ in 0..=sluice::STAGING_IDLE_FRAMES {
        ctx.draw(&scene, &camera, false)?;
    }
    let rss_idle = rss_bytes();
    let idle = ctx.renderer.counters();
    println!(
        "{}",
        json!({"n_visuals": nv, "shared": shared, "rss_empty_scene": rss0, "rss_after_data": rss_data,
               "rss_after_first_frame": rss_frame, "rss_after_updates": rss_updates,
               "rss_visuals_delta": rss_updates.saturating_sub(rss_data),
               "resident_bytes": c.resident_bytes, "textures_alive": c.textures_alive,
               "staging_bytes_after_updates": c.staging_bytes,
               "rss_after_idle_frames": rss_idle, "staging_bytes_after_idle_frames": idle.staging_bytes,
               "host_bytes_of_sources": sources.iter().map(|s| s.host_bytes()).sum::<usize>()})
    );
    Ok(())
}

// ------------------------------------------------------------------ small measurements --

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1e3
}

fn round(x: f64, digits: i32) -> f64 {
    let p = 10f64.powi(digits);
    (x * p).round() / p
}

fn median(v: &[f64]) -> f64 {
    if v.is_empty() {
        return f64::NAN;
    }
    let mut s = v.to_vec();
    s.sort_by(f64::total_cmp);
    let n = s.len();
    if n % 2 == 1 {
        s[n / 2]
    } else {
        (s[n / 2 - 1] + s[n / 2]) / 2.0
    }
}

fn stats(v: &[f64]) -> Value {
    if v.is_empty() {
        return json!({"n": 0});
    }
    let min = v.iter().copied().fold(f64::INFINITY, f64::min);
    let max = v.iter().copied().fold(f64::NEG_INFINITY, f64::max);
    let mean = v.iter().sum::<f64>() / v.len() as f64;
    json!({
        "n": v.len(), "min_ms": round(min, 3), "median_ms": round(median(v), 3),
        "max_ms": round(max, 3), "mean_ms": round(mean, 3),
        "samples_ms": v.iter().map(|x| round(*x, 3)).collect::<Vec<_>>(),
    })
}

fn gbps(bytes: usize, ms: f64) -> f64 {
    round(bytes as f64 / (ms / 1e3) / 1e9, 4)
}

fn epoch_s() -> f64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_secs_f64())
        .unwrap_or(0.0)
}

fn utc_now() -> String {
    let secs = epoch_s() as i64;
    let (days, rem) = (secs.div_euclid(86_400), secs.rem_euclid(86_400));
    // Civil date from days since 1970-01-01 (Howard Hinnant's algorithm).
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = doy - (153 * mp + 2) / 5 + 1;
    let m = if mp < 10 { mp + 3 } else { mp - 9 };
    let y = yoe + era * 400 + i64::from(m <= 2);
    format!(
        "{y:04}-{m:02}-{d:02}T{:02}:{:02}:{:02}+00:00",
        rem / 3600,
        rem / 60 % 60,
        rem % 60
    )
}

fn platform() -> String {
    let release = std::fs::read_to_string("/proc/sys/kernel/osrelease").unwrap_or_default();
    format!(
        "{} {} {}",
        std::env::consts::OS,
        release.trim(),
        std::env::consts::ARCH
    )
}

fn loadavg() -> Vec<f64> {
    std::fs::read_to_string("/proc/loadavg")
        .unwrap_or_default()
        .split_whitespace()
        .take(3)
        .filter_map(|v| v.parse().ok())
        .collect()
}

/// Resident set size of this process, bytes (0 where /proc is missing).
fn rss_bytes() -> u64 {
    std::fs::read_to_string("/proc/self/status")
        .unwrap_or_default()
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.split_whitespace().next()?.parse::<u64>().ok())
        .map_or(0, |kb| kb * 1024)
}

/// Clock ticks per second of /proc's CPU times (Linux's USER_HZ, 100 on every common build).
const TICKS_PER_SECOND: f64 = 100.0;

/// CPU seconds this process (all threads) has used.
fn process_cpu() -> f64 {
    let stat = std::fs::read_to_string("/proc/self/stat").unwrap_or_default();
    // The fields after the parenthesised command name start with the state (field 3);
    // utime and stime are fields 14 and 15, so the 12th and 13th of these.
    let rest = stat.rsplit_once(')').map_or("", |(_, r)| r);
    let field = |i: usize| {
        rest.split_whitespace()
            .nth(i)
            .and_then(|v| v.parse::<f64>().ok())
            .unwrap_or(0.0)
    };
    (field(11) + field(12)) / TICKS_PER_SECOND
}

/// Busy CPU seconds of the whole machine, from /proc/stat.
fn machine_busy() -> f64 {
    let stat = std::fs::read_to_string("/proc/stat").unwrap_or_default();
    let Some(line) = stat.lines().next() else {
        return 0.0;
    };
    let v: Vec<f64> = line
        .split_whitespace()
        .skip(1)
        .filter_map(|x| x.parse().ok())
        .collect();
    // user nice system idle iowait irq softirq steal: busy is all but idle and iowait.
    let total: f64 = v.iter().take(8).sum();
    let idle = v.get(3).copied().unwrap_or(0.0) + v.get(4).copied().unwrap_or(0.0);
    (total - idle) / TICKS_PER_SECOND
}

/// Other processes' share of the CPUs while a section ran.
struct CpuMonitor {
    wall: Instant,
    /// Seconds since the Unix epoch at the start, to line the section up with other logs
    /// (the GPU clocks `scripts/device-peers.sh` records).
    start_unix: f64,
    busy: f64,
    own: f64,
}

impl CpuMonitor {
    fn start() -> Self {
        CpuMonitor {
            wall: Instant::now(),
            start_unix: unix_now(),
            busy: machine_busy(),
            own: process_cpu(),
        }
    }

    fn finish(self) -> Value {
        let wall = self.wall.elapsed().as_secs_f64();
        let own = process_cpu() - self.own;
        let foreign = (machine_busy() - self.busy - own).max(0.0);
        let cpus = std::thread::available_parallelism().map_or(1, |n| n.get()) as f64;
        json!({
            "wall_s": round(wall, 2), "own_cpu_s": round(own, 2),
            "foreign_cpu_s": round(foreign, 2),
            "foreign_cpu_share": round(foreign / (wall * cpus).max(1e-9), 3),
            "loadavg_1m_end": loadavg().first().copied(),
            "start_unix_s": round(self.start_unix, 3),
            "end_unix_s": round(unix_now(), 3),
        })
    }
}

/// Seconds since the Unix epoch (0 on a clock before it).
fn unix_now() -> f64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0.0, |d| d.as_secs_f64())
}

/// A short table of the medians on stderr.
fn print_table(doc: &Value) {
    let mut err = std::io::stderr().lock();
    let _ = writeln!(
        err,
        "\n{:<60} {:>10} {:>10} {:>12}",
        "case", "median ms", "render ms", "upload MB"
    );
    if let Some(results) = doc["results"].as_object() {
        for (bench, cases) in results {
            let Some(cases) = cases.as_object() else {
                continue;
            };
            for (case, r) in cases {
                if r.get("timing").is_none() {
                    continue;
                }
                let up = r["uploaded_per_update"]["bytes_uploaded"]
                    .as_f64()
                    .map_or("-".into(), |b| format!("{:.2}", b / 1e6));
                let ok = if r["verified"].as_bool() == Some(false) {
                    " FAIL"
                } else {
                    ""
                };
                let _ = writeln!(
                    err,
                    "{:<60} {:>10} {:>10} {:>12}{ok}",
                    format!("{bench}/{case}"),
                    r["timing"]["median_ms"],
                    r["render_only"]["median_ms"],
                    up
                );
            }
        }
    }
}
