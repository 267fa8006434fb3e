//! Pipeline caches kept on disk, so that a second process does not compile its pipelines
//! again (on a cold NVIDIA shader cache the volume pipeline alone took 400-550 ms).
//!
//! One cache per device, shared by every renderer on it and held by them (it goes with the
//! last one, so that it does not keep a device of its own open): loaded from
//! `RendererOptions::pipeline_cache_dir` when the first renderer on the device is made (again
//! when one is made after the last went), used
//! by every pipeline sluice creates, and written back (to a temporary file, then renamed over
//! the old one) at the end of a frame that created pipelines. The file holds what
//! `PipelineCache::get_data` returned, after a 16-byte header of sluice's own (a magic
//! number and an FNV-1a hash of the data), so a truncated or damaged file is refused before it
//! reaches the driver.
//!
//! Creating a `wgpu::PipelineCache` is `unsafe` (the driver trusts the bytes), and this crate
//! has no `unsafe` code: the caches are made by a [`PipelineCacheLoader`], which
//! `sluice-interop` provides (`sluice::interop::install_pipeline_cache()`) and
//! [`set_pipeline_cache_loader`] installs for the process. Without a loader, or on a backend
//! without pipeline caches (only Vulkan has them), pipelines are made without one.

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Weak};

use parking_lot::Mutex;

/// Makes pipeline caches from bytes an earlier process saved.
pub trait PipelineCacheLoader: Send + Sync + std::fmt::Debug {
    /// A cache on `device`, seeded with `data` where the driver accepts it (an empty one
    /// where it does not); `None` where `device` has no pipeline caches.
    fn create(&self, device: &wgpu::Device, data: Option<&[u8]>) -> Option<wgpu::PipelineCache>;
}

/// What a renderer's pipeline cache was seeded with (see [`crate::Renderer::pipeline_cache`]).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PipelineCacheInfo {
    /// The cache file.
    pub path: PathBuf,
    /// Bytes of cache data read from the file when the cache was made (0: no file, or one
    /// refused by sluice's header check).
    pub loaded_bytes: usize,
    /// Whether the driver kept the loaded data: the new cache holds at least as many bytes as
    /// were loaded (a driver that refuses data starts empty).
    pub accepted: bool,
}

const MAGIC: &[u8; 8] = b"SLUICEPC";
const HEADER: usize = 16;

struct DiskCache {
    device: wgpu::Device,
    cache: wgpu::PipelineCache,
    info: PipelineCacheInfo,
    /// A pipeline was created with the cache since it was last written.
    dirty: AtomicBool,
}

/// A renderer's hold on its device's cache: the cache lives while some renderer on the device
/// does, and no longer (it keeps its device open, so the process-wide list only points at
/// it).
pub(crate) struct CacheHold {
    _cache: Arc<DiskCache>,
}

static LOADER: Mutex<Option<Arc<dyn PipelineCacheLoader>>> = Mutex::new(None);
/// The caches of the devices renderers are on, weakly: a device whose renderers are gone
/// (one of its own, from `Renderer::from_device` or `Interop::with_own_device`) is not kept
/// open by its cache.
static CACHES: Mutex<Vec<Weak<DiskCache>>> = Mutex::new(Vec::new());

/// `device`'s cache, if a renderer on it holds one.
fn find(caches: &[Weak<DiskCache>], device: &wgpu::Device) -> Option<Arc<DiskCache>> {
    caches
        .iter()
        .filter_map(Weak::upgrade)
        .find(|c| c.device == *device)
}

/// Installs the loader that makes pipeline caches for every renderer made afterwards in this
/// process (`sluice::interop::install_pipeline_cache()` calls this).
pub fn set_pipeline_cache_loader(loader: Arc<dyn PipelineCacheLoader>) {
    *LOADER.lock() = Some(loader);
}

/// The default cache folder: `$XDG_CACHE_HOME/sluice/pipelines`, else
/// `$HOME/.cache/sluice/pipelines`; `None` when neither is set.
pub(crate) fn default_dir() -> Option<PathBuf> {
    let base = std::env::var_os("XDG_CACHE_HOME")
        .filter(|v| !v.is_empty())
        .map(PathBuf::from)
        .or_else(|| {
            std::env::var_os("HOME")
                .filter(|v| !v.is_empty())
                .map(|h| PathBuf::from(h).join(".cache"))
        })?;
    Some(base.join("sluice").join("pipelines"))
}

fn fnv1a(data: &[u8]) -> u64 {
    data.iter().fold(0xcbf2_9ce4_8422_2325, |h, &b| {
        (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3)
    })
}

/// The cache data in a file sluice wrote, or `None` (no file, or not one of ours intact).
fn read_file(path: &Path) -> Option<Vec<u8>> {
    let bytes = std::fs::read(path).ok()?;
    if bytes.len() < HEADER || &bytes[..8] != MAGIC {
        return None;
    }
    let hash = u64::from_le_bytes(bytes[8..HEADER].try_into().ok()?);
    let data = bytes[HEADER..].to_vec();
    (fnv1a(&data) == hash).then_some(data)
}

fn write_file(path: &Path, data: &[u8]) -> std::io::Result<()> {
    if let Some(dir) = path.parent() {
        std::fs::create_dir_all(dir)?;
    }
    let mut bytes = Vec::with_capacity(HEADER + data.len());
    bytes.extend_from_slice(MAGIC);
    bytes.extend_from_slice(&fnv1a(data).to_le_bytes());
    bytes.extend_from_slice(data);
    // Written whole, then renamed: processes sharing the folder never read half a file. The
    // temporary name is this write's own (process and a count), so two devices of one process
    // saving at once never write into one file.
    static WRITES: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
    let n = WRITES.fetch_add(1, Ordering::Relaxed);
    let tmp = path.with_extension(format!("tmp{}-{n}", std::process::id()));
    let written = std::fs::write(&tmp, &bytes).and_then(|()| std::fs::rename(&tmp, path));
    if written.is_err() {
        // Each write's name is new: one that failed would otherwise stay behind.
        let _ = std::fs::remove_file(&tmp);
    }
    written
}

/// Makes (once per device while renderers on it hold it) the device's cache from the file
/// under `dir`, where a loader is installed and the backend has pipeline caches. Returns the
/// renderer's hold on it.
pub(crate) fn attach(
    adapter: &wgpu::AdapterInfo,
    device: &wgpu::Device,
    dir: Option<&Path>,
) -> Option<CacheHold> {
    let mut caches = CACHES.lock();
    caches.retain(|c| c.strong_count() > 0);
    if let Some(c) = find(&caches, device) {
        return Some(CacheHold { _cache: c });
    }
    let dir = dir?;
    let loader = LOADER.lock().clone()?;
    if !device.features().contains(wgpu::Features::PIPELINE_CACHE) {
        return None;
    }
    let path = dir.join(wgpu::util::pipeline_cache_key(adapter)?);
    let data = read_file(&path);
    let cache = loader.create(device, data.as_deref())?;
    let loaded_bytes = data.as_ref().map_or(0, Vec::len);
    let kept = cache.get_data().map_or(0, |d| d.len());
    let info = PipelineCacheInfo {
        path,
        loaded_bytes,
        accepted: loaded_bytes > 0 && kept >= loaded_bytes,
    };
    let made = Arc::new(DiskCache {
        device: device.clone(),
        cache,
        info,
        dirty: AtomicBool::new(false),
    });
    caches.push(Arc::downgrade(&made));
    Some(CacheHold { _cache: made })
}

/// What `device`'s cache was seeded with, if it has one.
pub(crate) fn info(device: &wgpu::Device) -> Option<PipelineCacheInfo> {
    find(&CACHES.lock(), device).map(|c| c.info.clone())
}

/// The cache pipelines on `device` are made with, if it has one; marks it to be written.
pub(crate) fn for_pipeline(device: &wgpu::Device) -> Option<wgpu::PipelineCache> {
    let c = find(&CACHES.lock(), device)?;
    c.dirty.store(true, Ordering::Release);
    Some(c.cache.clone())
}

/// Writes `device`'s cache to its file if pipelines were created since the last write. A
/// failed write is not an error of the frame: the next process compiles again.
pub(crate) fn save_if_changed(device: &wgpu::Device) {
    let cache = match find(&CACHES.lock(), device) {
        Some(c) if c.dirty.swap(false, Ordering::AcqRel) => c,
        _ => return,
    };
    if let Some(data) = cache.cache.get_data() {
        let _ = write_file(&cache.info.path, &data);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A file round-trips; a damaged or foreign one is refused.
    #[test]
    fn files_are_checked_before_use() {
        let dir = std::env::temp_dir().join(format!("sluice-pc-test-{}", std::process::id()));
        let path = dir.join("sub").join("cache");
        write_file(&path, b"driver data").unwrap();
        assert_eq!(read_file(&path).as_deref(), Some(&b"driver data"[..]));
        let mut bytes = std::fs::read(&path).unwrap();
        let last = bytes.len() - 1;
        bytes[last] ^= 1;
        std::fs::write(&path, &bytes).unwrap();
        assert_eq!(read_file(&path), None, "a changed byte fails the hash");
        std::fs::write(&path, b"short").unwrap();
        assert_eq!(read_file(&path), None);
        assert_eq!(read_file(&dir.join("missing")), None);
        let _ = std::fs::remove_dir_all(&dir);
    }

    /// Threads saving into one file at once each leave an intact file of their own, and no
    /// temporary file behind.
    #[test]
    fn concurrent_writes_leave_one_writers_file_whole() {
        let dir = std::env::temp_dir().join(format!("sluice-pc-race-{}", std::process::id()));
        let path = dir.join("cache");
        let datas: Vec<Vec<u8>> = (0..8u8).map(|i| vec![i; 4096 * (1 + i as usize)]).collect();
        for _ in 0..20 {
            std::thread::scope(|s| {
                for d in &datas {
                    let path = &path;
                    s.spawn(move || write_file(path, d).unwrap());
                }
            });
            let read = read_file(&path).expect("an intact file");
            assert!(
                datas.contains(&read),
                "{} bytes of no writer's data",
                read.len()
            );
        }
        let left: Vec<_> = std::fs::read_dir(&dir).unwrap().collect();
        assert_eq!(left.len(), 1, "{left:?}");
        let _ = std::fs::remove_dir_all(&dir);
    }
}
