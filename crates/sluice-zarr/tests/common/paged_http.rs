//! Shared by `tests/paged_http.rs` and `benches/paged_http.rs`: an OME-Zarr 0.5 pyramid written
//! here with zarrs (no Python needed), served by the loopback [`TestServer`], and a scripted
//! pan and zoom drawn through sluice-render's virtual texture, counting the bytes the server
//! sent against the compressed bytes of the chunks each view showed.

#![allow(dead_code)]

use std::collections::BTreeSet;
use std::path::Path;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Duration;

use sluice_core::{ChunkCache, LazyOptions, LoaderPool, SharedSource};
use sluice_render::glam::Vec2;
use sluice_render::{Colormap, Image, PanZoomCamera, Renderer, RendererOptions, Scene};
use sluice_zarr::ZarrSource;
use zarrs::array::{codec::ZstdCodec, data_type, ArrayBuilder};
use zarrs::filesystem::FilesystemStore;

use crate::common::TestServer;

/// Chunk side of every level (also the renderer's page side: pages and chunks align).
pub const CHUNK: u64 = 256;

/// The pyramid's value at level-0 sample (y, x): not trivially compressible.
pub fn value(y: u64, x: u64) -> u16 {
    let v = (y * 7919 + x * 31) ^ ((x * y) >> 3);
    (v % 65521) as u16 | 1
}

/// Writes an OME-Zarr 0.5 group at `dir`: `levels` u16 levels of `side / 2^l` squared samples
/// in zstd chunks of [`CHUNK`], level `l` sampling [`value`] at (y 2^l, x 2^l).
pub fn write_pyramid(dir: &Path, side: u64, levels: u32) {
    std::fs::create_dir_all(dir).unwrap();
    let datasets: Vec<serde_json::Value> = (0..levels)
        .map(|l| {
            let s = f64::from(1u32 << l);
            serde_json::json!({
                "path": l.to_string(),
                "coordinateTransformations": [{"type": "scale", "scale": [s, s]}]
            })
        })
        .collect();
    let group = serde_json::json!({
        "zarr_format": 3,
        "node_type": "group",
        "attributes": {"ome": {"version": "0.5", "multiscales": [{
            "axes": [{"name": "y", "type": "space"}, {"name": "x", "type": "space"}],
            "datasets": datasets
        }]}}
    });
    std::fs::write(dir.join("zarr.json"), group.to_string()).unwrap();
    let store = Arc::new(FilesystemStore::new(dir).unwrap());
    for l in 0..levels {
        let n = side >> l;
        let array = ArrayBuilder::new(vec![n, n], vec![CHUNK, CHUNK], data_type::uint16(), 0u16)
            .bytes_to_bytes_codecs(vec![Arc::new(ZstdCodec::new(3, false))])
            .build(store.clone(), &format!("/{l}"))
            .unwrap();
        array.store_metadata().unwrap();
        let f = 1u64 << l;
        for cy in 0..n.div_ceil(CHUNK) {
            for cx in 0..n.div_ceil(CHUNK) {
                let (h, w) = (CHUNK.min(n - cy * CHUNK), CHUNK.min(n - cx * CHUNK));
                let mut data = Vec::with_capacity((CHUNK * CHUNK) as usize);
                for y in cy * CHUNK..cy * CHUNK + CHUNK {
                    for x in cx * CHUNK..cx * CHUNK + CHUNK {
                        data.push(if y - cy * CHUNK < h && x - cx * CHUNK < w {
                            value(y * f, x * f)
                        } else {
                            0
                        });
                    }
                }
                array.store_chunk(&[cy, cx], data).unwrap();
            }
        }
    }
}

/// One view of the script: level-0 centre and zoom (pixels per level-0 sample).
pub type Step = ([f32; 2], f32);

/// The scripted path over a `side`² pyramid of 3 levels shown in a 512 x 384 target: the whole
/// image at level 2, zooming in at the centre through level 1 to level 0, a pan at level 0 to
/// the right and down, then the way back (zooming out at the start, over resident data).
pub fn script(side: u64) -> (Vec<Step>, Vec<Step>) {
    let c = side as f32 / 2.0;
    let mut forward = vec![([c, c], 0.2499), ([c, c], 0.4999), ([c, c], 1.0)];
    for i in 1..=6 {
        forward.push(([c + 100.0 * i as f32, c + 40.0 * i as f32], 1.0));
    }
    let mut back: Vec<Step> = forward.iter().rev().skip(1).copied().collect();
    // Zooming back out over the same places at levels drawn before.
    back.push(([c, c], 0.4999));
    back.push(([c, c], 0.2499));
    (forward, back)
}

/// What a path cost.
#[derive(Clone, Debug, Default)]
pub struct PathBytes {
    /// Bytes the server sent (bodies, after the metadata was read at open).
    pub fetched: u64,
    /// Compressed bytes of the distinct chunks the views showed at the levels they drew.
    pub visible: u64,
    /// Distinct visible chunks.
    pub visible_chunks: usize,
    /// The levels drawn, per view.
    pub levels: Vec<usize>,
}

/// Opens the pyramid at `url` through a lazy source with its own pool and a 256 MiB cache.
pub fn open_lazy(url: &str) -> SharedSource {
    let zarr = ZarrSource::open(url).unwrap();
    let options = LazyOptions::with_pool(LoaderPool::new(2).unwrap(), ChunkCache::new(256 << 20));
    Arc::new(zarr.lazy_with(options).unwrap())
}

/// Draws `steps` of `source` (a pyramid written at `dir`) complete, one after the other,
/// counting what `server` sent and which chunks the views showed.
pub fn draw_path(
    r: &mut Renderer,
    scene: &Scene,
    server: &TestServer,
    dir: &Path,
    steps: &[Step],
) -> PathBytes {
    let (w, h) = (512u32, 384u32);
    let target = r.create_target(w, h).unwrap();
    let before = server.bytes_served.load(Ordering::SeqCst);
    let mut chunks = BTreeSet::new();
    let mut levels = Vec::new();
    for &(centre, zoom) in steps {
        let camera = PanZoomCamera::new(Vec2::new(centre[0], centre[1]), zoom);
        let done = r
            .render_until_complete(scene, &camera, &target, Duration::from_secs(60))
            .unwrap();
        assert!(done.complete, "{done:?}");
        let level = done.progress[0].level;
        levels.push(level);
        // The level-0 box the view shows, and the chunks of `level` it covers.
        let side = (CHUNK << level) as f64;
        let (hw, hh) = (
            f64::from(w) / 2.0 / f64::from(zoom),
            f64::from(h) / 2.0 / f64::from(zoom),
        );
        let (cx, cy) = (f64::from(centre[0]), f64::from(centre[1]));
        let meta = std::fs::read_to_string(dir.join(format!("{level}/zarr.json"))).unwrap();
        let meta: serde_json::Value = serde_json::from_str(&meta).unwrap();
        let extent = meta["shape"][0].as_u64().unwrap() << level;
        let range = |lo: f64, hi: f64| {
            let last = (extent.div_ceil(CHUNK << level)) as i64 - 1;
            let a = ((lo / side).floor() as i64).clamp(0, last);
            let b = (((hi / side).ceil() as i64) - 1).clamp(0, last);
            a..=b
        };
        for y in range(cy - hh, cy + hh) {
            for x in range(cx - hw, cx + hw) {
                chunks.insert((level, y, x));
            }
        }
    }
    // Chunks requested but not needed to complete a view (a page's border, a view's wants
    // replaced before they arrived) may still be on the wire: they count for this path, so
    // wait until the server has sent nothing for 300 ms.
    let mut last = server.bytes_served.load(Ordering::SeqCst);
    loop {
        std::thread::sleep(Duration::from_millis(300));
        let now = server.bytes_served.load(Ordering::SeqCst);
        if now == last {
            break;
        }
        last = now;
    }
    let visible = chunks
        .iter()
        .map(|(l, y, x)| {
            std::fs::metadata(dir.join(format!("{l}/c/{y}/{x}")))
                .map(|m| m.len())
                .unwrap_or(0)
        })
        .sum();
    PathBytes {
        fetched: server.bytes_served.load(Ordering::SeqCst) - before,
        visible,
        visible_chunks: chunks.len(),
        levels,
    }
}

/// A renderer with 256² pages and an image of `source` through Gray.
pub fn renderer_and_scene(source: SharedSource) -> (Renderer, Scene) {
    let mut options = RendererOptions::from_env().unwrap();
    options.page_size_2d = Some(CHUNK as usize);
    let r = Renderer::with_options(options).expect("a GPU adapter");
    let mut scene = Scene::new();
    scene.add(
        Image::new(source)
            .with_clim(0.0, 65535.0)
            .unwrap()
            .with_colormap(Colormap::Gray),
    );
    (r, scene)
}
