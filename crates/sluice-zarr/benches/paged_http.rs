//! Bytes fetched over HTTP by a scripted pan and zoom over an OME-Zarr pyramid (4096² u16,
//! 3 levels, zstd chunks of 256²) drawn through sluice-render's virtual texture, against the
//! ceiling measured in the same run: the compressed bytes of the distinct chunks the views
//! showed at the levels they drew. Then the same places again (zooming back out over resident
//! data), which must fetch 0 bytes. The server is the tests' loopback server on 127.0.0.1,
//! counting the body bytes it sends (Range requests honoured).
//!
//! `SLUICE_BACKEND=vulkan cargo bench -p sluice-zarr --bench paged_http`

#[path = "../tests/common/mod.rs"]
mod common;
#[path = "../tests/common/paged_http.rs"]
mod paged_http;

use common::TestServer;
use paged_http::{draw_path, open_lazy, renderer_and_scene, script, write_pyramid};

const SIDE: u64 = 4096;

fn main() {
    let dir = std::env::temp_dir().join(format!("sluice-paged-http-{}", std::process::id()));
    let store = dir.join("pyr.zarr");
    write_pyramid(&store, SIDE, 3);
    let server = TestServer::start(&dir);
    let source = open_lazy(&server.url("pyr.zarr"));
    let (mut r, scene) = renderer_and_scene(source);
    let (forward, back) = script(SIDE);
    let t = std::time::Instant::now();
    let out = draw_path(&mut r, &scene, &server, &store, &forward);
    let secs = t.elapsed().as_secs_f64();
    let again = draw_path(&mut r, &scene, &server, &store, &back);
    drop(server);
    let _ = std::fs::remove_dir_all(&dir);
    let ratio = out.fetched as f64 / out.visible as f64;
    println!(
        "paged_http: {} views (levels {:?}) in {secs:.2} s",
        forward.len(),
        out.levels
    );
    println!(
        "paged_http: fetched {} bytes / visible chunks {} bytes ({} chunks) = {ratio:.3}x (target <= 1.5x)",
        out.fetched, out.visible, out.visible_chunks
    );
    println!(
        "paged_http: back over resident data ({} views, levels {:?}): fetched {} bytes (target 0)",
        back.len(),
        again.levels,
        again.fetched
    );
    assert!(
        ratio <= 1.5,
        "fetched {ratio:.3}x the visible chunks' bytes"
    );
    assert_eq!(again.fetched, 0, "going back fetched bytes");
}
