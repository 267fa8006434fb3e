//! Shared by the sluice-zarr tests: the fixtures written by zarr-python, the closed form their
//! values come from, and a small HTTP server that honours Range requests.

#![allow(dead_code)]

use std::collections::HashMap;
use std::io::{BufRead, BufReader, Read, Write};
use std::net::{TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, OnceLock};
use std::time::Duration;

/// The Python that has zarr-python 3.1.6: `SLUICE_PYTHON`, else the venv `.ci/run` makes.
pub fn python() -> PathBuf {
    if let Some(p) = std::env::var_os("SLUICE_PYTHON") {
        return PathBuf::from(p);
    }
    let venv = PathBuf::from("/tmp/sluice-venv/bin/python3");
    if venv.exists() {
        venv
    } else {
        PathBuf::from("python3")
    }
}

/// The fixture directory, written once per test binary by `tests/fixtures/write_zarr.py`.
/// `None` (after printing why) where zarr-python 3.1.6 is not installed, unless
/// `SLUICE_REQUIRE_ZARR=1` (set by `.ci/run`), which makes that a failure.
pub fn fixtures() -> Option<&'static Path> {
    static DIR: OnceLock<Option<PathBuf>> = OnceLock::new();
    DIR.get_or_init(|| {
        let py = python();
        let check = Command::new(&py)
            .args(["-c", "import zarr; assert zarr.__version__ == '3.1.6', zarr.__version__"])
            .output();
        let why = match &check {
            Ok(o) if o.status.success() => None,
            Ok(o) => Some(String::from_utf8_lossy(&o.stderr).trim().to_string()),
            Err(e) => Some(e.to_string()),
        };
        if let Some(why) = why {
            assert!(
                std::env::var("SLUICE_REQUIRE_ZARR").as_deref() != Ok("1"),
                "SLUICE_REQUIRE_ZARR=1 but {} has no zarr-python 3.1.6: {why}",
                py.display()
            );
            eprintln!(
                "skipped: {} has no zarr-python 3.1.6 ({why}); install it with \
                 `python3 -m venv /tmp/sluice-venv && /tmp/sluice-venv/bin/pip install zarr==3.1.6` \
                 or set SLUICE_PYTHON",
                py.display()
            );
            return None;
        }
        let exe = std::env::current_exe().unwrap();
        let name = exe.file_name().unwrap().to_string_lossy().to_string();
        let dir = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join(format!("zarr-fixtures-{name}"));
        let _ = std::fs::remove_dir_all(&dir);
        let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../tests/fixtures/write_zarr.py");
        let out = Command::new(&py).arg(&script).arg(&dir).output().unwrap();
        assert!(
            out.status.success(),
            "{} failed: {}",
            script.display(),
            String::from_utf8_lossy(&out.stderr)
        );
        Some(dir)
    })
    .as_deref()
}

/// The manifest the script wrote.
pub fn manifest(dir: &Path) -> serde_json::Value {
    serde_json::from_slice(&std::fs::read(dir.join("manifest.json")).unwrap()).unwrap()
}

/// The closed form of `write_zarr.py`'s `value`: sum of index[i] * PRIMES[i] plus the seed,
/// as little-endian bytes of `dtype` (numpy's name).
pub fn value(index: &[u64], seed: i64, dtype: &str) -> Vec<u8> {
    const PRIMES: [i64; 5] = [7919, 1009, 131, 31, 3];
    let primes = &PRIMES[5 - index.len()..];
    let v: i64 = seed
        + index
            .iter()
            .zip(primes)
            .map(|(&i, &p)| i as i64 * p)
            .sum::<i64>();
    match dtype {
        "float32" => (((v % (1 << 20)) as f32) * 0.25).to_le_bytes().to_vec(),
        "uint8" => vec![(v % 256) as u8],
        "uint16" => ((v % 65536) as u16).to_le_bytes().to_vec(),
        "int16" => ((v % 65536) as u16 as i16).to_le_bytes().to_vec(),
        other => panic!("no closed form for {other}"),
    }
}

/// Little-endian bytes of a fill value from the manifest.
pub fn fill_bytes(fill: &serde_json::Value, dtype: &str) -> Vec<u8> {
    match dtype {
        "float32" => (fill.as_f64().unwrap() as f32).to_le_bytes().to_vec(),
        "uint8" => vec![fill.as_u64().unwrap() as u8],
        "uint16" => (fill.as_u64().unwrap() as u16).to_le_bytes().to_vec(),
        "int16" => (fill.as_i64().unwrap() as i16).to_le_bytes().to_vec(),
        other => panic!("no fill for {other}"),
    }
}

/// What the test server does to requests, set while it runs.
#[derive(Default)]
pub struct Faults {
    /// Answer 200 with the whole body to ranged GETs (as Python's http.server does).
    pub ignore_range: AtomicBool,
    /// Paths (from the server root, e.g. `/v2_blosc.zarr/0.0`) answered with this status.
    pub status: Mutex<HashMap<String, u16>>,
    /// Delay before each answer.
    pub latency_ms: AtomicU64,
}

/// A loopback HTTP/1.1 server over a directory: GET and HEAD, `Range: bytes=a-b`, `a-` and
/// `-n` (206 with Content-Range), 404 for absent files; counts requests and body bytes.
pub struct TestServer {
    pub port: u16,
    pub faults: Arc<Faults>,
    pub bytes_served: Arc<AtomicU64>,
    pub requests: Arc<AtomicU64>,
    pub ranged_requests: Arc<AtomicU64>,
    stop: Arc<AtomicBool>,
}

impl TestServer {
    /// Serves `root` on 127.0.0.1, on a port the OS picks.
    pub fn start(root: &Path) -> TestServer {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let port = listener.local_addr().unwrap().port();
        let server = TestServer {
            port,
            faults: Arc::default(),
            bytes_served: Arc::default(),
            requests: Arc::default(),
            ranged_requests: Arc::default(),
            stop: Arc::default(),
        };
        let root = root.to_path_buf();
        let (faults, bytes, reqs, ranged, stop) = (
            server.faults.clone(),
            server.bytes_served.clone(),
            server.requests.clone(),
            server.ranged_requests.clone(),
            server.stop.clone(),
        );
        std::thread::spawn(move || {
            for conn in listener.incoming() {
                if stop.load(Ordering::Relaxed) {
                    break;
                }
                let Ok(conn) = conn else { continue };
                let (root, faults, bytes, reqs, ranged) = (
                    root.clone(),
                    faults.clone(),
                    bytes.clone(),
                    reqs.clone(),
                    ranged.clone(),
                );
                std::thread::spawn(move || {
                    let _ = serve(conn, &root, &faults, &bytes, &reqs, &ranged);
                });
            }
        });
        server
    }

    /// The URL of `path` (from the root, no leading slash).
    pub fn url(&self, path: &str) -> String {
        format!("http://127.0.0.1:{}/{path}", self.port)
    }
}

impl Drop for TestServer {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        // Wake the accept loop so it sees the flag.
        let _ = TcpStream::connect(("127.0.0.1", self.port));
    }
}

fn serve(
    conn: TcpStream,
    root: &Path,
    faults: &Faults,
    bytes: &AtomicU64,
    reqs: &AtomicU64,
    ranged: &AtomicU64,
) -> std::io::Result<()> {
    conn.set_read_timeout(Some(Duration::from_secs(30)))?;
    let mut reader = BufReader::new(conn.try_clone()?);
    let mut out = conn;
    loop {
        let mut line = String::new();
        if reader.read_line(&mut line)? == 0 {
            return Ok(());
        }
        let mut parts = line.split_whitespace();
        let method = parts.next().unwrap_or("").to_string();
        let target = parts.next().unwrap_or("/").to_string();
        let mut range = None;
        let mut content_length = 0usize;
        loop {
            let mut h = String::new();
            reader.read_line(&mut h)?;
            let h = h.trim_end();
            if h.is_empty() {
                break;
            }
            if let Some((k, v)) = h.split_once(':') {
                match k.trim().to_ascii_lowercase().as_str() {
                    "range" => range = Some(v.trim().to_string()),
                    "content-length" => content_length = v.trim().parse().unwrap_or(0),
                    _ => {}
                }
            }
        }
        let mut body = vec![0; content_length];
        reader.read_exact(&mut body)?;
        reqs.fetch_add(1, Ordering::Relaxed);
        let latency = faults.latency_ms.load(Ordering::Relaxed);
        if latency > 0 {
            std::thread::sleep(Duration::from_millis(latency));
        }
        let path = target.split('?').next().unwrap_or("/").to_string();
        if let Some(&status) = faults.status.lock().unwrap().get(&path) {
            let msg = format!("injected {status}");
            write!(
                out,
                "HTTP/1.1 {status} Injected\r\nContent-Length: {}\r\n\r\n{msg}",
                msg.len()
            )?;
            continue;
        }
        let file = root.join(path.trim_start_matches('/'));
        let data = if path.contains("..") || method != "GET" && method != "HEAD" {
            None
        } else {
            std::fs::read(&file).ok().filter(|_| file.is_file())
        };
        let Some(data) = data else {
            write!(out, "HTTP/1.1 404 Not Found\r\nContent-Length: 0\r\n\r\n")?;
            continue;
        };
        let total = data.len();
        let span = match range.as_deref().and_then(|r| r.strip_prefix("bytes=")) {
            Some(_) if faults.ignore_range.load(Ordering::Relaxed) => None,
            Some(spec) => parse_range(spec, total),
            None => None,
        };
        let (status, slice, extra) = match span {
            Some((a, b)) => {
                ranged.fetch_add(1, Ordering::Relaxed);
                (
                    "206 Partial Content",
                    &data[a..=b],
                    format!("Content-Range: bytes {a}-{b}/{total}\r\n"),
                )
            }
            None => ("200 OK", &data[..], String::new()),
        };
        write!(
            out,
            "HTTP/1.1 {status}\r\nContent-Length: {}\r\nAccept-Ranges: bytes\r\n{extra}\r\n",
            slice.len()
        )?;
        if method == "GET" {
            out.write_all(slice)?;
            bytes.fetch_add(slice.len() as u64, Ordering::Relaxed);
        }
        out.flush()?;
    }
}

/// `a-b`, `a-` or `-n` of a body of `total` bytes, as an inclusive span.
fn parse_range(spec: &str, total: usize) -> Option<(usize, usize)> {
    let (a, b) = spec.split_once('-')?;
    if total == 0 {
        return None;
    }
    if a.is_empty() {
        let n: usize = b.parse().ok()?;
        return Some((total.saturating_sub(n), total - 1));
    }
    let a: usize = a.parse().ok()?;
    let b = if b.is_empty() {
        total - 1
    } else {
        b.parse::<usize>().ok()?.min(total - 1)
    };
    (a <= b).then_some((a, b))
}
