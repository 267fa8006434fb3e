//! A second process starts warm: the first one's pipelines are written to the pipeline cache
//! folder, and the next process's cache is seeded with them and the driver keeps them.
//!
//! The test runs this test binary twice as a child (the ignored `child_renders_once`), each
//! making a renderer with the cache in a fresh folder and drawing an image, a mesh and a
//! volume (every kind of pipeline), then reporting what its cache was seeded with.
//!
//! Mesa 22.3's lavapipe keeps nothing in a Vulkan pipeline cache (its data is the 32-byte
//! header; Mesa's own disk shader cache does that work there): on it the file is the headers
//! alone (112 bytes), and the test checks the path a driver with contents takes (NVIDIA's):
//! written, read back whole, seeded, kept.

mod common;

use std::process::Command;
use std::sync::Arc;

use sluice::prelude::*;
use sluice::RendererOptions;

const CHILD_ENV: &str = "SLUICE_PIPELINE_CACHE_TEST_DIR";

/// The child's report: the bytes its cache was seeded with, whether the driver kept them, and
/// the cache file's size after its frame.
#[derive(Debug)]
struct Report {
    loaded: usize,
    accepted: bool,
    file: u64,
}

fn run_child(dir: &std::path::Path) -> Option<Report> {
    let out = Command::new(std::env::current_exe().unwrap())
        .args([
            "--exact",
            "child_renders_once",
            "--ignored",
            "--nocapture",
            "--test-threads=1",
        ])
        .env(CHILD_ENV, dir)
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "child failed ({}): {stdout}\n{}",
        out.status,
        String::from_utf8_lossy(&out.stderr)
    );
    let line = stdout
        .lines()
        .find_map(|l| l.split_once("PIPELINE_CACHE ").map(|(_, rest)| rest.trim()))
        .unwrap_or_else(|| panic!("the child reported nothing: {stdout}"));
    if line == "none" {
        return None;
    }
    let field = |name: &str| {
        line.split_whitespace()
            .find_map(|kv| kv.strip_prefix(name)?.strip_prefix('='))
            .unwrap_or_else(|| panic!("no {name} in {line:?}"))
            .to_owned()
    };
    Some(Report {
        loaded: field("loaded").parse().unwrap(),
        accepted: field("accepted") == "true",
        file: field("file").parse().unwrap(),
    })
}

#[test]
fn second_process_starts_with_the_first_ones_pipelines() {
    let backend = common::renderer().adapter_info().backend;
    let dir = std::env::temp_dir().join(format!("sluice-pipeline-cache-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    let first = run_child(&dir);
    if backend != sluice::wgpu::Backend::Vulkan {
        assert!(
            first.is_none(),
            "only Vulkan has pipeline caches, yet {backend:?} had one"
        );
        eprintln!("pipeline cache: none on {backend:?} (only Vulkan has them)");
        return;
    }
    let first = first.expect("a Vulkan renderer has a pipeline cache once the loader is installed");
    assert_eq!(
        first.loaded, 0,
        "a fresh folder has nothing to load: {first:?}"
    );
    assert!(!first.accepted);
    assert!(
        first.file > 16,
        "the first process wrote its pipelines: {first:?}"
    );
    let second = run_child(&dir).expect("the second process has a cache too");
    assert_eq!(
        second.loaded as u64 + 16,
        first.file,
        "the second process was seeded with all the first one wrote: {second:?}, {first:?}"
    );
    assert!(
        second.accepted,
        "the driver kept the loaded data: {second:?}"
    );
    eprintln!("pipeline cache: first {first:?}, second {second:?}");
    let _ = std::fs::remove_dir_all(&dir);
}

/// A device's cache lives while renderers on it do: a renderer made after the last one on its
/// device was dropped reads the file again (with what that one's frame wrote), and the cache
/// no longer keeps a device of its own open once its renderers are gone.
#[test]
fn a_cache_lives_while_renderers_on_its_device_do() {
    let options = RendererOptions::from_env().unwrap();
    // A device no other test's renderers use (they would attach its cache from elsewhere).
    let Ok(interop) = sluice::interop::Interop::with_own_device(&options) else {
        eprintln!("pipeline cache: no Vulkan device with external memory here");
        return;
    };
    let dir =
        std::env::temp_dir().join(format!("sluice-pipeline-cache-live-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    sluice::interop::install_pipeline_cache();
    let mut options = options;
    options.pipeline_cache_dir = Some(dir.clone());
    let first = interop.renderer_with_options(&options);
    let info = first
        .pipeline_cache()
        .expect("a Vulkan renderer has a pipeline cache once the loader is installed");
    assert_eq!(info.loaded_bytes, 0, "a fresh folder: {info:?}");
    // A second renderer on the device shares the cache (not read again).
    let mut second = interop.renderer_with_options(&options);
    assert_eq!(second.pipeline_cache(), Some(info.clone()));
    let mut scene = Scene::new();
    let image = Arc::new(ArraySource::new(Array2::from_elem((8, 8), 0.5f32)).unwrap());
    scene.add(Image::new(image));
    common::render_pixels(&mut second, &scene, 8, 8);
    let file = std::fs::metadata(&info.path).map_or(0, |m| m.len());
    assert!(file > 16, "the frame wrote its pipelines: {file} bytes");
    drop(first);
    drop(second);
    let third = interop.renderer_with_options(&options);
    let again = third.pipeline_cache().expect("a cache again");
    assert_eq!(
        again.loaded_bytes as u64 + 16,
        file,
        "the cache went with the last renderer, and a new one read the file: {again:?}"
    );
    let _ = std::fs::remove_dir_all(&dir);
}

/// The child half (run by `second_process_starts_with_the_first_ones_pipelines`, in a process
/// of its own).
#[test]
#[ignore = "a child process of second_process_starts_with_the_first_ones_pipelines"]
fn child_renders_once() {
    let dir = std::env::var_os(CHILD_ENV).expect("run by the parent test, which sets the folder");
    sluice::interop::install_pipeline_cache();
    let mut options = RendererOptions::from_env().unwrap();
    options.pipeline_cache_dir = Some(dir.into());
    let mut r = Renderer::with_options(options).unwrap();
    let seeded = r.pipeline_cache();
    let mut scene = Scene::new();
    let image = Arc::new(ArraySource::new(Array2::from_elem((8, 8), 0.5f32)).unwrap());
    scene.add(Image::new(image));
    let positions =
        Array2::from_shape_vec((3, 3), vec![0.0, 0.0, 0.5, 8.0, 0.0, 0.5, 0.0, 8.0, 0.5]);
    scene.add(Mesh::new(Arc::new(
        ArraySource::with_channels(positions.unwrap()).unwrap(),
    )));
    let volume = Arc::new(ArraySource::new(Array3::from_elem((4, 4, 4), 100u8)).unwrap());
    scene.add(Volume::new(volume));
    let img = common::render_pixels(&mut r, &scene, 8, 8);
    assert_eq!(img.dimensions(), (8, 8));
    match seeded {
        None => println!("PIPELINE_CACHE none"),
        Some(info) => {
            let file = std::fs::metadata(&info.path).map_or(0, |m| m.len());
            println!(
                "PIPELINE_CACHE loaded={} accepted={} file={file}",
                info.loaded_bytes, info.accepted
            );
        }
    }
}
