//! The main example: one picture showing what sluice does.
//!
//! - a 2-D ndarray field in an `ArraySource`, shown by three images with different contrast
//!   limits and colormaps: one texture, uploaded once;
//! - an RGB ndarray image;
//! - a plane of a `.npy` volume this example writes first, memory-mapped (only the plane shown
//!   is read);
//! - a custom source (the Mandelbrot set, computed when the renderer asks for it);
//! - in a second picture, a 3-D scene: the volume ray-marched (translucent), one of its
//!   planes as an image from the same 3-D texture, and a mesh, composited by depth;
//! - in a third picture, a lazy multiscale source far larger than the GPU (a procedural
//!   65,536² image in 4 levels, computed chunk by chunk on the loader pool), drawn through
//!   the virtual texture: a few frames while it loads, printing the view's progress (visible
//!   chunks needed and resident, queued, in flight, failed), then rendered until complete.
//!
//! Run with `cargo run --release --example tour`; it prints where the PNG went.

use std::io::Write;
use std::path::PathBuf;
use std::sync::Arc;

use sluice::ndarray::Array3;
use sluice::prelude::*;
use sluice::{
    npy_header, Changes, ChunkFill, ChunkGrid, LazySource, Level, Mesh, OrbitCamera,
    ProceduralLoader, ReadRequest, ReadStatus, Slice, Volume, VolumeMode,
};

const PANEL: usize = 256;
const GAP: f32 = 8.0;

fn main() -> Result<(), Box<dyn std::error::Error>> {
    // Pipelines compiled by an earlier run come from a cache on disk
    // (`SLUICE_PIPELINE_CACHE=off` turns it off).
    sluice::interop::install_pipeline_cache();
    let out_dir =
        PathBuf::from(std::env::var("SLUICE_OUT").unwrap_or_else(|_| "target/sluice-out".into()));
    std::fs::create_dir_all(&out_dir)?;

    // One field, three views of it.
    let field = Array2::from_shape_fn((PANEL, PANEL), |(y, x)| {
        let (u, v) = (x as f32 / PANEL as f32 - 0.5, y as f32 / PANEL as f32 - 0.5);
        (u * 14.0).sin() * (v * 9.0).cos() + 2.0 * (-(u * u + v * v) * 12.0).exp()
    });
    let shared = Arc::new(ArraySource::new(field)?);

    // An RGB image.
    let rgb = Array3::from_shape_fn((PANEL, PANEL, 3), |(y, x, c)| match c {
        0 => (x * 255 / PANEL) as u8,
        1 => (y * 255 / PANEL) as u8,
        _ => (((x / 32) + (y / 32)) % 2 * 180) as u8,
    });
    let rgb = Arc::new(ArraySource::with_channels(rgb)?);

    // A volume on disk, memory-mapped; one plane is shown.
    let npy = out_dir.join("tour-volume.npy");
    write_volume(&npy, 32)?;
    let volume = Arc::new(MmapSource::open_npy(&npy)?);
    let plane = Arc::new(CropSource::plane(volume.clone(), 20)?);

    // A custom source.
    let mandelbrot = Arc::new(Mandelbrot::new(PANEL, PANEL));

    let mut scene = Scene::new();
    scene.set_background([0.08, 0.08, 0.1, 1.0]);
    let panels: Vec<Image> = vec![
        Image::new(shared.clone())
            .with_clim(-1.0, 2.5)?
            .with_colormap(Colormap::Viridis),
        Image::new(shared.clone())
            .with_clim(0.0, 1.5)?
            .with_colormap(Colormap::Magma)
            .with_gamma(0.7)?,
        Image::new(shared.clone())
            .with_clim(-1.2, 1.2)?
            .with_colormap(Colormap::Gray),
        Image::new(rgb),
        Image::new(plane)
            .with_clim(0.0, 4000.0)?
            .with_colormap(Colormap::Inferno),
        Image::new(mandelbrot.clone())
            .with_clim(0.0, 64.0)?
            .with_colormap(Colormap::Cividis),
    ];
    for (i, image) in panels.into_iter().enumerate() {
        let id = scene.add(image);
        let (col, row) = ((i % 3) as f32, (i / 3) as f32);
        let offset = Vec3::new(col * (PANEL as f32 + GAP), row * (PANEL as f32 + GAP), 0.0);
        scene.set_transform(id, Mat4::from_translation(offset));
    }

    let mut renderer = Renderer::with_options(RendererOptions::from_env()?)?;
    let info = renderer.adapter_info();
    println!("adapter: {} ({:?})", info.name, info.backend);
    let (w, h) = (3.0 * PANEL as f32 + 2.0 * GAP, 2.0 * PANEL as f32 + GAP);
    let target = renderer.create_target(w as u32 + 16, h as u32 + 16)?;
    let camera = PanZoomCamera::new(Vec2::new(w / 2.0, h / 2.0), 1.0);
    let frame = renderer.render(&scene, &camera, &target)?;
    let path = out_dir.join("tour.png");
    renderer.read_image(&target)?.save(&path)?;

    // A second frame after a small edit: only the edited chunk is uploaded.
    shared.write(&[96, 96], Array2::from_elem((16, 16), 2.5f32).view())?;
    let edit = renderer.render(&scene, &camera, &target)?;
    let edited = out_dir.join("tour-edited.png");
    renderer.read_image(&target)?.save(&edited)?;

    let c = renderer.counters();
    let field_bytes = PANEL * PANEL * 4;
    println!(
        "first frame: {} bytes uploaded in {} copies",
        frame.bytes_uploaded, frame.copies_issued
    );
    println!(
        "  shared field ({field_bytes} bytes) shown by 3 images, uploaded once; textures alive: {} for 6 images",
        c.textures_alive
    );
    println!(
        "  memory-mapped volume: {} of {} bytes read (one plane of 32)",
        volume.bytes_read(),
        volume.layout().total_bytes()
    );
    println!(
        "edit of 16x16 samples: {} bytes uploaded in {} copy; {} of {} pixels redrawn (the edit, \
         in the three images that show the field)",
        edit.bytes_uploaded,
        edit.copies_issued,
        edit.pixels_drawn,
        target.width() * target.height()
    );
    println!("counters: {c:?}");

    // The 3-D scene: the mapped volume, a plane of it, and a mesh ring around it.
    let mut scene3d = Scene::new();
    scene3d.add(
        Volume::new(volume.clone())
            .with_mode(VolumeMode::Translucent { attenuation: 0.15 })?
            .with_clim(0.0, 4000.0)?
            .with_colormap(Colormap::Inferno),
    );
    let slice = scene3d.add(
        Image::new(volume.clone())
            .with_slice(Slice::Z(8))
            .with_clim(0.0, 4000.0)?
            .with_colormap(Colormap::Gray),
    );
    // Image plane z = 8 sits at depth 8.5 inside the volume's 32 planes.
    scene3d.set_transform(slice, Mat4::from_translation(Vec3::new(0.0, 0.0, 8.5)));
    scene3d.add(ring_mesh()?);
    let target3d = renderer.create_target(640, 480)?;
    let camera3d = OrbitCamera::fit(
        Vec3::new(-40.0, 0.0, -40.0),
        Vec3::new(296.0, 256.0, 72.0),
        35.0,
        25.0,
    );
    renderer.render(&scene3d, &camera3d, &target3d)?;
    let path3d = out_dir.join("tour-3d.png");
    renderer.read_image(&target3d)?.save(&path3d)?;
    let c3 = renderer.counters().since(&c);
    println!(
        "3-D scene: the {} byte volume uploaded once for the ray-marched view and its plane; mesh {} bytes",
        volume.layout().total_bytes(),
        c3.bytes_uploaded - volume.layout().total_bytes() as u64
    );
    let path_lazy = lazy_part(&mut renderer, &out_dir)?;
    println!("wrote {}", std::fs::canonicalize(&path)?.display());
    println!("wrote {}", std::fs::canonicalize(&edited)?.display());
    println!("wrote {}", std::fs::canonicalize(&path3d)?.display());
    println!("wrote {}", std::fs::canonicalize(&path_lazy)?.display());
    Ok(())
}

/// Writes a 32 x 256 x 256 u16 volume of blobs that move with the plane index.
fn write_volume(path: &std::path::Path, planes: usize) -> std::io::Result<()> {
    let mut f = std::io::BufWriter::new(std::fs::File::create(path)?);
    f.write_all(&npy_header(ElementType::U16, &[planes, PANEL, PANEL]))?;
    for z in 0..planes {
        let t = z as f32 / planes as f32;
        for y in 0..PANEL {
            for x in 0..PANEL {
                let (u, v) = (x as f32 / PANEL as f32, y as f32 / PANEL as f32);
                let blob = |cx: f32, cy: f32, r: f32| {
                    (-((u - cx).powi(2) + (v - cy).powi(2)) / (r * r)).exp()
                };
                let value = 3000.0 * blob(0.3 + 0.4 * t, 0.5, 0.12)
                    + 2000.0 * blob(0.7, 0.3 + 0.4 * t, 0.08)
                    + 400.0 * ((u * 40.0).sin() * (v * 40.0).sin()).abs();
                f.write_all(&(value as u16).to_le_bytes())?;
            }
        }
    }
    f.flush()
}

/// A ring of quads around the volume, coloured by angle through a colormap.
fn ring_mesh() -> Result<Mesh, Box<dyn std::error::Error>> {
    let segments = 64;
    let (cx, cy, r) = (128.0f32, 128.0f32, 170.0f32);
    let mut points = Vec::new();
    let mut angle = Vec::new();
    for i in 0..=segments {
        let a = i as f32 / segments as f32 * std::f32::consts::TAU;
        for z in [-30.0f32, 60.0] {
            points.extend_from_slice(&[cx + r * a.cos(), cy + r * a.sin(), z]);
            angle.push(i as f32 / segments as f32);
        }
    }
    let mut indices = Vec::new();
    for i in 0..segments as u32 {
        let k = 2 * i;
        indices.extend_from_slice(&[k, k + 1, k + 2, k + 1, k + 3, k + 2]);
    }
    let n = points.len() / 3;
    Ok(Mesh::new(Arc::new(ArraySource::with_channels(
        Array2::from_shape_vec((n, 3), points).expect("3 per vertex"),
    )?))
    .with_indices(Arc::new(ArraySource::new(Array1::from_vec(indices))?))
    .with_scalars(Arc::new(ArraySource::new(Array1::from_vec(angle))?))
    .with_colormap(Colormap::Viridis)
    .with_clim(0.0, 1.0)?)
}

/// The lazy part: a procedural 4-level pyramid of 65,536² f32 samples (16 GiB at level 0,
/// never all computed) through the virtual texture. A few frames draw what has arrived and
/// print the progress; then it renders until the view is complete.
fn lazy_part(
    renderer: &mut Renderer,
    out_dir: &std::path::Path,
) -> Result<PathBuf, Box<dyn std::error::Error>> {
    const SIDE: usize = 65_536;
    let grid = ChunkGrid::new(&[128, 128])?;
    let coarser = (1..4).map(|l| {
        let f = 1usize << l;
        Level::new(
            Shape::d2(SIDE / f, SIDE / f).unwrap(),
            [1.0, f as f64, f as f64],
        )
        .with_chunks(grid)
    });
    let layout = Layout::new(Shape::d2(SIDE, SIDE)?, ElementType::F32, 1)?
        .with_chunks(grid)
        .with_levels(coarser)?;
    // Rings around the image centre, finer than any one level shows in full.
    let loader = ProceduralLoader::new(layout, |key, region, dst| {
        let f = (1usize << key.level) as f32;
        for (i, v) in dst.chunks_exact_mut(4).enumerate() {
            let y = (region.origin[1] + i / region.size[2]) as f32 * f - SIDE as f32 / 2.0;
            let x = (region.origin[2] + i % region.size[2]) as f32 * f - SIDE as f32 / 2.0;
            let r = (x * x + y * y).sqrt();
            v.copy_from_slice(&(0.5 + 0.5 * (r / 40.0).sin() * (x / 300.0).cos()).to_le_bytes());
        }
        Ok(ChunkFill::Filled)
    })
    .with_label("rings (lazy, 65536 x 65536, 4 levels)");
    let source = Arc::new(LazySource::new(loader)?);
    let mut scene = Scene::new();
    let node = scene.add(
        Image::new(source)
            .with_clim(0.0, 1.0)?
            .with_colormap(Colormap::Magma),
    );
    let target = renderer.create_target(512, 512)?;
    // Near the centre, a quarter of a pixel per level-0 sample: level 2 is drawn.
    let camera = PanZoomCamera::new(Vec2::new(SIDE as f32 / 2.0, SIDE as f32 / 2.0), 0.25);
    let print = |when: &str, p: &sluice::Progress| {
        println!(
            "lazy image, {when}: level {}, {} of {} visible pages on the GPU; chunks: {} needed, {} resident, {} queued, {} in flight, {} failed",
            p.level,
            p.pages_resident,
            p.pages_visible,
            p.chunks_visible,
            p.chunks_resident,
            p.chunks_queued,
            p.chunks_loading,
            p.failed.len()
        );
    };
    for i in 0..3 {
        renderer.render(&scene, &camera, &target)?;
        if let Some(p) = scene.visual(node).and_then(|v| renderer.progress(v)) {
            print(&format!("frame {i}"), &p);
        }
    }
    let started = std::time::Instant::now();
    let done = renderer.render_until_complete(
        &scene,
        &camera,
        &target,
        std::time::Duration::from_secs(60),
    )?;
    print(
        &format!(
            "{} after {} more passes in {:.2} s",
            if done.complete {
                "complete"
            } else {
                "timed out"
            },
            done.frames,
            started.elapsed().as_secs_f64()
        ),
        &done.progress[0],
    );
    let path = out_dir.join("tour-lazy.png");
    renderer.read_image(&target)?.save(&path)?;
    Ok(path)
}

/// A custom source: escape counts of the Mandelbrot set, computed on request.
struct Mandelbrot {
    shape: Shape,
}

impl Mandelbrot {
    fn new(h: usize, w: usize) -> Self {
        Mandelbrot {
            shape: Shape::d2(h, w).expect("non-empty"),
        }
    }
}

impl DataSource for Mandelbrot {
    fn layout(&self) -> Layout {
        Layout::new(self.shape, ElementType::F32, 1).expect("one channel")
    }

    fn version(&self) -> Version {
        Version::INITIAL
    }

    fn changes_since(&self, since: Version) -> Changes {
        if since < Version::INITIAL {
            Changes::All
        } else {
            Changes::None
        }
    }

    fn read(&self, request: &ReadRequest<'_>, dst: &mut [u8]) -> Result<ReadStatus, SourceError> {
        sluice::check_read(&self.layout(), request, dst.len())?;
        let r = request.region;
        let (h, w) = (self.shape.height() as f32, self.shape.width() as f32);
        for (i, out) in dst.chunks_exact_mut(4).enumerate() {
            let (y, x) = (r.origin[1] + i / r.size[2], r.origin[2] + i % r.size[2]);
            let c = (x as f32 / w * 3.0 - 2.2, y as f32 / h * 3.0 - 1.5);
            let (mut zx, mut zy, mut n) = (0.0f32, 0.0f32, 0);
            while n < 64 && zx * zx + zy * zy < 4.0 {
                (zx, zy) = (zx * zx - zy * zy + c.0, 2.0 * zx * zy + c.1);
                n += 1;
            }
            out.copy_from_slice(&(n as f32).to_le_bytes());
        }
        Ok(ReadStatus::Ready)
    }

    fn label(&self) -> String {
        "Mandelbrot".into()
    }
}
