//! The fixtures uploaded to moto's S3 server on 127.0.0.1 (started and killed by its pid) and
//! read through object_store's S3 client, path-style.

mod common;

use std::net::{TcpListener, TcpStream};
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use common::{fixtures, manifest, python, value};
use sluice_zarr::{ChunkFill, OpenOptions, StoreOptions, ZarrSource};

/// moto's server process; killed by its pid when dropped.
struct Moto {
    child: Child,
    port: u16,
}

impl Drop for Moto {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Starts `moto_server` (next to the fixtures' Python, or `SLUICE_MOTO`) on a free loopback
/// port; `None`, after saying why, where moto is not installed.
fn start_moto() -> Option<Moto> {
    let exe = std::env::var_os("SLUICE_MOTO")
        .map(PathBuf::from)
        .unwrap_or_else(|| {
            python()
                .parent()
                .map(|p| p.join("moto_server"))
                .unwrap_or_else(|| "moto_server".into())
        });
    if !exe.exists() {
        assert!(
            std::env::var("SLUICE_REQUIRE_ZARR").as_deref() != Ok("1"),
            "SLUICE_REQUIRE_ZARR=1 but {} does not exist",
            exe.display()
        );
        eprintln!(
            "skipped: {} not found (install it with `/tmp/sluice-venv/bin/pip install \"moto[server]==5.2.5\"` or set SLUICE_MOTO)",
            exe.display()
        );
        return None;
    }
    let port = TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let child = Command::new(&exe)
        .args(["-H", "127.0.0.1", "-p", &port.to_string()])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let moto = Moto { child, port };
    let start = Instant::now();
    while TcpStream::connect(("127.0.0.1", port)).is_err() {
        assert!(
            start.elapsed() < Duration::from_secs(60),
            "moto_server did not listen on {port} within 60 s"
        );
        std::thread::sleep(Duration::from_millis(100));
    }
    Some(moto)
}

const UPLOAD: &str = r#"
import os, sys, boto3
endpoint, bucket, root = sys.argv[1:4]
s3 = boto3.client("s3", endpoint_url=endpoint, region_name="us-east-1",
                  aws_access_key_id="testing", aws_secret_access_key="testing")
s3.create_bucket(Bucket=bucket)
for name in sys.argv[4:]:
    base = os.path.join(root, name)
    for d, _, files in os.walk(base):
        for f in files:
            path = os.path.join(d, f)
            s3.upload_file(path, bucket, os.path.relpath(path, root))
"#;

#[test]
fn sharded_array_and_ome_group_read_from_s3() {
    let Some(dir) = fixtures() else { return };
    let Some(moto) = start_moto() else { return };
    let endpoint = format!("http://127.0.0.1:{}", moto.port);
    let out = Command::new(python())
        .args([
            "-c",
            UPLOAD,
            &endpoint,
            "sluice",
            dir.to_str().unwrap(),
            "v3_sharded.zarr",
            "ome04.zarr",
        ])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "upload failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );

    let options = OpenOptions {
        store: StoreOptions {
            s3_endpoint: Some(endpoint.clone()),
            s3_region: Some("us-east-1".into()),
            s3_credentials: Some(("testing".into(), "testing".into())),
            allow_http: true,
            ..StoreOptions::default()
        },
        ..OpenOptions::default()
    };
    let m = manifest(dir);
    let sharded = ZarrSource::open_with("s3://sluice/v3_sharded.zarr", &options).unwrap();
    let entry = &m["v3_sharded.zarr"];
    let skipped: Vec<Vec<usize>> = serde_json::from_value(entry["skipped"].clone()).unwrap();
    for y in 0..8 {
        for x in 0..12 {
            let mut buf = vec![0u8; 32 * 32 * 2];
            let got = sharded.read_chunk(0, [0, y, x], &mut buf).unwrap();
            let absent = skipped.contains(&vec![y, x]);
            assert_eq!(got == ChunkFill::Empty, absent, "chunk ({y}, {x})");
            for r in 0..32 {
                for c in 0..32 {
                    let (gy, gx) = ((y * 32 + r) as u64, (x * 32 + c) as u64);
                    let want = if absent {
                        9u16.to_le_bytes().to_vec()
                    } else {
                        value(&[gy, gx], 12, "uint16")
                    };
                    let i = (r * 32 + c) * 2;
                    assert_eq!(&buf[i..i + 2], want.as_slice(), "({gy}, {gx})");
                }
            }
        }
    }

    let ome = ZarrSource::open_with("s3://sluice/ome04.zarr", &options).unwrap();
    assert_eq!(ome.ome_version(), Some("0.4"));
    let level = ome.level(1).unwrap().clone();
    let mut buf = vec![0u8; level.shape.len() * 4];
    ome.read_region(1, level.shape.full_region(), &mut buf)
        .unwrap();
    let seed = m["ome04.zarr"]["levels"][1]["seed"].as_i64().unwrap();
    for y in 0..level.shape.height() as u64 {
        for x in 0..level.shape.width() as u64 {
            for c in 0..2u64 {
                let i = (((y * level.shape.width() as u64 + x) * 2 + c) * 2) as usize;
                assert_eq!(&buf[i..i + 2], value(&[c, y, x], seed, "uint16").as_slice());
            }
        }
    }

    // A key that does not exist in the bucket: the error names the s3:// location.
    let e = ZarrSource::open_with("s3://sluice/absent.zarr", &options).unwrap_err();
    assert!(e.to_string().contains("s3://sluice/absent.zarr"), "{e}");
    drop(moto);
}
