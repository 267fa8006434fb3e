//! The command line's argument handling and every user error of issue 14 point 5: each gives
//! one clear line on stderr (naming the path, value or numbers) and a non-zero exit, never a
//! panic or a backtrace. None of these needs a GPU.

use std::io::Write;
use std::path::Path;
use std::process::{Command, Output};

use sluice_core::{npy_header, ElementType};

fn sluice(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_sluice"))
        .args(args)
        .env("RUST_BACKTRACE", "1")
        .output()
        .expect("the sluice binary runs")
}

/// Asserts a failure with exit status 1 and one stderr line containing every `needle`.
fn assert_one_line_error(out: &Output, needles: &[&str]) {
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "exit status; stderr: {stderr}");
    let lines: Vec<&str> = stderr.lines().collect();
    assert_eq!(lines.len(), 1, "one line on stderr, got: {stderr}");
    assert!(lines[0].starts_with("sluice: error: "), "{stderr}");
    for needle in needles {
        assert!(
            lines[0].contains(needle),
            "{needle:?} missing from {stderr:?}"
        );
    }
    assert!(!stderr.contains("panicked") && !stderr.contains("backtrace"));
}

fn write_npy(path: &Path, element: ElementType, shape: &[usize], data: &[u8]) {
    let mut f = std::fs::File::create(path).unwrap();
    f.write_all(&npy_header(element, shape)).unwrap();
    f.write_all(data).unwrap();
}

#[test]
fn missing_file_names_the_path() {
    let out = sluice(&["info", "/nonexistent/volume.npy"]);
    assert_one_line_error(&out, &["/nonexistent/volume.npy", "No such file"]);
    let out = sluice(&["render", "/nonexistent/a.png", "--out", "/tmp/never.png"]);
    assert_one_line_error(&out, &["/nonexistent/a.png"]);
}

#[test]
fn wrong_shape_for_a_raw_file_names_both_sizes() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("data.raw");
    std::fs::write(&path, vec![0u8; 100 * 100 * 2]).unwrap();
    let p = path.to_str().unwrap();
    // 20000 bytes on disk; 128 x 128 u16 needs 32768.
    let out = sluice(&["info", p, "--shape", "128,128", "--dtype", "u16"]);
    assert_one_line_error(&out, &[p, "20000", "32768"]);
    // The right shape works and says what it found.
    let out = sluice(&["info", p, "--shape", "100,100", "--dtype", "u16"]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        text.contains("shape: [100, 100]") && text.contains("U16"),
        "{text}"
    );
    assert!(text.contains("level 0: 20000 bytes"), "{text}");
}

#[test]
fn raw_file_without_layout_asks_for_it() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("data");
    std::fs::write(&path, [0u8; 16]).unwrap();
    let p = path.to_str().unwrap();
    assert_one_line_error(&sluice(&["info", p]), &[p, "--shape", "--dtype"]);
    assert_one_line_error(&sluice(&["info", p, "--shape", "4,4"]), &["--dtype"]);
}

#[test]
fn unknown_extension_lists_the_formats() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("notes.txt");
    std::fs::write(&path, "hello").unwrap();
    let p = path.to_str().unwrap();
    assert_one_line_error(&sluice(&["info", p]), &[p, "unknown format", ".npy"]);
}

#[test]
fn unsupported_dtype_names_it_and_the_choices() {
    let out = sluice(&["info", "x.raw", "--shape", "4,4", "--dtype", "u64"]);
    assert_one_line_error(&out, &["--dtype", "\"u64\"", "f32"]);
}

#[test]
fn unsupported_npy_dtype_is_one_line() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("complex.npy");
    let mut bytes = b"\x93NUMPY\x01\x00".to_vec();
    let mut header = "{'descr': '<c8', 'fortran_order': False, 'shape': (2, 2), }".to_string();
    while !(10 + header.len() + 1).is_multiple_of(64) {
        header.push(' ');
    }
    header.push('\n');
    bytes.extend_from_slice(&(header.len() as u16).to_le_bytes());
    bytes.extend_from_slice(header.as_bytes());
    bytes.extend_from_slice(&[0u8; 32]);
    std::fs::write(&path, bytes).unwrap();
    let p = path.to_str().unwrap();
    assert_one_line_error(&sluice(&["info", p]), &[p, "c8"]);
}

/// Zarr stores are read (tests/zarr.rs); what cannot be reached is one line naming it.
#[test]
fn unreadable_urls_and_stores_name_them() {
    for (input, why) in [
        ("gs://bucket/x", "not supported"),
        ("local.zarr", "No such file"),
    ] {
        assert_one_line_error(&sluice(&["info", input]), &[input, why]);
    }
}

#[test]
fn bad_clim_says_why() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("a.npy");
    write_npy(&path, ElementType::U8, &[2, 2], &[0, 1, 2, 3]);
    let p = path.to_str().unwrap();
    let out_png = dir.path().join("out.png");
    let out = out_png.to_str().unwrap();
    for (clim, why) in [
        ("5,1", "must be below"),
        ("a,1", "not a finite number"),
        ("1", "two numbers"),
        ("0,inf", "not a finite number"),
    ] {
        let result = sluice(&["render", p, "--out", out, "--clim", clim]);
        assert_one_line_error(&result, &["--clim", why]);
    }
    assert!(!out_png.exists(), "no PNG is written after an error");
}

#[test]
fn bad_size_colormap_mode_and_camera_say_why() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("a.npy");
    write_npy(&path, ElementType::U8, &[2, 2], &[0, 1, 2, 3]);
    let p = path.to_str().unwrap();
    let out = dir.path().join("o.png");
    let o = out.to_str().unwrap();
    assert_one_line_error(
        &sluice(&["render", p, "--out", o, "--size", "0x10"]),
        &["--size", "1 to 16384"],
    );
    assert_one_line_error(
        &sluice(&["render", p, "--out", o, "--colormap", "jet"]),
        &["--colormap", "\"jet\"", "viridis"],
    );
    assert_one_line_error(
        &sluice(&["render", p, "--out", o, "--mode", "dvr"]),
        &["--mode", "mip, translucent, iso"],
    );
    assert_one_line_error(
        &sluice(&["render", p, "--out", o, "--camera", "1,2"]),
        &["--camera", "CENTER_X,CENTER_Y,ZOOM"],
    );
    assert_one_line_error(
        &sluice(&["render", p, "--out", o, "--as", "volume"]),
        &["3 axes", "[2, 2]"],
    );
}

#[test]
fn usage_errors_exit_with_status_2() {
    let out = sluice(&[]);
    assert_eq!(out.status.code(), Some(2));
    let out = sluice(&["render", "a.npy"]);
    assert_eq!(out.status.code(), Some(2), "--out is required");
    assert!(String::from_utf8_lossy(&out.stderr).contains("--out"));
    let out = sluice(&["view"]);
    assert_eq!(out.status.code(), Some(2), "a path is required");
    let out = sluice(&["--help"]);
    assert!(out.status.success());
    let help = String::from_utf8_lossy(&out.stdout);
    for sub in ["view", "render", "info", "demo"] {
        assert!(help.contains(sub), "{help}");
    }
}

#[test]
fn info_describes_npy_png_and_tiff_volumes() {
    let dir = tempfile::tempdir().unwrap();
    let npy = dir.path().join("v.npy");
    write_npy(&npy, ElementType::F32, &[3, 4, 5], &[0u8; 3 * 4 * 5 * 4]);
    let png = dir.path().join("g.png");
    image::ImageBuffer::<image::Luma<u16>, _>::from_fn(7, 3, |x, y| image::Luma([(x * y) as u16]))
        .save(&png)
        .unwrap();
    let tif = dir.path().join("s.tif");
    {
        let file = std::fs::File::create(&tif).unwrap();
        let mut enc = tiff::encoder::TiffEncoder::new(file).unwrap();
        for page in 0..4u8 {
            let data: Vec<u8> = (0..6 * 2).map(|i| page * 20 + i).collect();
            enc.write_image::<tiff::encoder::colortype::Gray8>(6, 2, &data)
                .unwrap();
        }
    }
    let out = sluice(&[
        "info",
        npy.to_str().unwrap(),
        png.to_str().unwrap(),
        tif.to_str().unwrap(),
    ]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        text.contains("shape: [3, 4, 5]") && text.contains("F32"),
        "{text}"
    );
    assert!(text.contains("level 0: 240 bytes"), "{text}");
    assert!(
        text.contains("shape: [3, 7]") && text.contains("U16"),
        "{text}"
    );
    assert!(
        text.contains("shape: [4, 2, 6]") && text.contains("U8"),
        "{text}"
    );
}
