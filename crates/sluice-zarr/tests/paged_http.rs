//! An OME-Zarr pyramid over HTTP (the loopback server, honouring Range) drawn through
//! sluice-render's virtual texture along a scripted pan and zoom: the server sends little more
//! than the chunks the views show, and going back over resident data sends nothing.

mod common;
#[path = "common/paged_http.rs"]
mod paged_http;

use common::TestServer;
use paged_http::{draw_path, open_lazy, renderer_and_scene, script, write_pyramid};

#[test]
fn panning_and_zooming_back_over_resident_data_fetches_nothing() {
    let dir = std::path::PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("paged-http-pyramid");
    let _ = std::fs::remove_dir_all(&dir);
    let side = 1024;
    write_pyramid(&dir.join("pyr.zarr"), side, 3);
    let server = TestServer::start(&dir);
    let source = open_lazy(&server.url("pyr.zarr"));
    let (mut r, scene) = renderer_and_scene(source);
    let (forward, back) = script(side);
    let out = draw_path(&mut r, &scene, &server, &dir.join("pyr.zarr"), &forward);
    assert_eq!(out.levels[..3], [2, 1, 0], "{out:?}");
    assert!(out.visible > 0 && out.fetched >= out.visible / 2, "{out:?}");
    assert!(
        out.fetched as f64 <= 1.5 * out.visible as f64,
        "fetched {} bytes for {} bytes of visible chunks ({} chunks): {:.2}x",
        out.fetched,
        out.visible,
        out.visible_chunks,
        out.fetched as f64 / out.visible as f64
    );
    let uploaded = r.counters().pages_uploaded;
    let again = draw_path(&mut r, &scene, &server, &dir.join("pyr.zarr"), &back);
    assert_eq!(again.fetched, 0, "going back over resident data: {again:?}");
    assert_eq!(r.counters().pages_uploaded, uploaded, "and uploads no page");
    drop(server);
    let _ = std::fs::remove_dir_all(&dir);
}
