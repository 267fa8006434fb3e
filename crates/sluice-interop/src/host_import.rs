//! `HostImportSource`: host data the GPU copies straight from the user's pages
//! (`VK_EXT_external_memory_host`).
//!
//! One of the crate's `unsafe` modules. The source's storage is allocated at the driver's
//! `minImportedHostPointerAlignment` (its size rounded up to it), imported once as
//! `VkDeviceMemory` (`VkImportMemoryHostPointerInfoEXT`), bound to a `VkBuffer` and handed to
//! wgpu. A full update is then one `copy_buffer_to_texture` from those pages on the renderer's
//! queue: no copy into staging on the CPU.
//!
//! Lifetime: the pages are shared (an `Arc`) by the source and by the drop callback of the
//! wgpu buffer; wgpu runs that callback once the buffer is destroyed and no submission uses it
//! any more, and the callback destroys the `VkBuffer`, frees the imported memory and only then
//! lets the pages go. So the pages outlive every GPU read of them.
//!
//! Ordering of in-place writes: every GPU copy from the pages is counted when it is recorded
//! (under the source's read lock) and counted done when the queue reports the frame's
//! submission finished (`Queue::on_submitted_work_done`). A write first waits (polling the
//! device) until every recorded copy is done, then takes the write lock and checks again:
//! no copy can be recorded while it holds the lock, so the GPU never reads a half-written
//! page. A copy recorded after the write sees the new bytes and the new version.
//!
//! Without the extension (or with [`HostImportSource::host_only`]) the source is a plain host
//! source: the renderer stages it as usual, and [`HostImportSource::fallback_reason`] says why.

use std::alloc::Layout as AllocLayout;
use std::collections::HashMap;
use std::ptr::NonNull;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Weak};

use ash::vk;
use parking_lot::{Mutex, RwLock};
use sluice_core::{
    check_read, ChangeLog, Changes, DataSource, HostImportedMemory, HostView, Layout, LendOutcome,
    ReadRequest, ReadStatus, Region, Residency, SourceError, Version,
};
use wgpu::hal::api::Vulkan;

use crate::error::InteropError;
use crate::interop::Interop;

/// How many region changes the source remembers before answering "everything changed".
const CHANGE_LOG_CAPACITY: usize = 1024;

/// Host pages allocated at an alignment, freed on drop.
pub(crate) struct Pages {
    ptr: NonNull<u8>,
    layout: AllocLayout,
}

// SAFETY: `Pages` owns its allocation like a `Box<[u8]>`; access to the bytes is ordered by
// the source's lock (CPU) and by the copy counters (GPU), never through `Pages` itself.
unsafe impl Send for Pages {}
// SAFETY: as above; `&Pages` gives no access to the bytes.
unsafe impl Sync for Pages {}

impl Pages {
    /// `size` zeroed bytes (rounded up to `align`), at `align`.
    pub fn new(size: usize, align: usize) -> Result<Self, InteropError> {
        let too_big = || InteropError::HostImport {
            reason: format!("{size} bytes rounded up to the alignment {align} overflow"),
        };
        let rounded = size.checked_next_multiple_of(align).ok_or_else(too_big)?;
        let layout =
            AllocLayout::from_size_align(rounded.max(align), align).map_err(|_| too_big())?;
        // SAFETY: `layout` has a non-zero size (at least `align`, a power of two).
        let raw = unsafe { std::alloc::alloc_zeroed(layout) };
        let ptr = NonNull::new(raw).ok_or_else(|| InteropError::HostImport {
            reason: format!(
                "allocating {} bytes at alignment {align} failed",
                layout.size()
            ),
        })?;
        Ok(Pages { ptr, layout })
    }

    pub fn len(&self) -> usize {
        self.layout.size()
    }

    pub fn ptr(&self) -> NonNull<u8> {
        self.ptr
    }
}

impl Drop for Pages {
    fn drop(&mut self) {
        // SAFETY: allocated in `new` with exactly this layout, freed once.
        unsafe { std::alloc::dealloc(self.ptr.as_ptr(), self.layout) };
    }
}

/// GPU copies from host pages that are recorded and not yet known finished, for ordering
/// writes (and hand-backs) after them.
///
/// Each recorded copy adds one; the queue's `on_submitted_work_done` after the frame that
/// carries it takes it off again. Counting each copy (rather than keeping a "recorded up to"
/// mark) stays exact when several renderers on one device record and submit in any order.
#[derive(Default)]
pub(crate) struct GpuUse {
    pending: AtomicU64,
}

impl GpuUse {
    /// Counts one copy being recorded.
    pub fn recorded(&self) {
        self.pending.fetch_add(1, Ordering::AcqRel);
    }

    /// Whether a recorded copy may still read the pages.
    pub fn outstanding(&self) -> bool {
        self.pending.load(Ordering::Acquire) > 0
    }

    /// Takes one recorded copy off once the queue finished what was submitted so far (the
    /// frame that carries the copy was submitted before this is called).
    pub fn settle_after_submitted(self: &Arc<Self>, queue: &wgpu::Queue) {
        let gpu = self.clone();
        queue.on_submitted_work_done(move || {
            gpu.pending.fetch_sub(1, Ordering::AcqRel);
        });
    }

    /// Polls `device` until no recorded copy (or counted frame) is outstanding. A poll
    /// returns at once while the frame that carries one is still being recorded on another
    /// thread; the wait then sleeps a little between polls rather than spin.
    pub fn wait(&self, device: &wgpu::Device) {
        let start = std::time::Instant::now();
        let mut warned = false;
        while self.outstanding() {
            let _ = device.poll(wgpu::PollType::wait_indefinitely());
            if self.outstanding() {
                std::thread::sleep(std::time::Duration::from_micros(50));
                // A count nobody settles (a frame recorded and never submitted, on a path
                // that skips `DeviceUpload::frame_submitted`) would hang here: say so.
                if !warned && start.elapsed() > std::time::Duration::from_secs(10) {
                    warned = true;
                    log::warn!(
                        "sluice: waiting {:.0} s for GPU work counted against host pages that no \
                         submitted frame has settled yet",
                        start.elapsed().as_secs_f64()
                    );
                }
            }
        }
    }
}

/// One GPU copy counted against host pages: the buffer to copy from, where sample 0 lies in
/// it, and the counter the frame settles once submitted.
pub(crate) struct HostCopy {
    pub buffer: wgpu::Buffer,
    pub first_sample: u64,
    pub gpu: Arc<GpuUse>,
}

/// A source whose bytes the renderer copies from imported host pages
/// (`Residency::HostImported`): [`HostImportSource`] and `HostBufferSource`.
pub(crate) trait ImportedHost: Send + Sync {
    /// The device the pages were imported on.
    fn interop(&self) -> &Interop;

    /// Counts a GPU copy of `bytes` from the pages the source shows now (blocking while a CPU
    /// write of them is in progress) and says where to copy from. Samples are packed in C
    /// order from `first_sample`.
    fn record_copy(&self, bytes: u64) -> Result<HostCopy, InteropError>;

    /// A texture sampling the pages the source shows now in place, for a lavapipe
    /// renderer (see `in_place`): `None` where the source does not offer one (the renderer
    /// copies), with the reason kept by the source.
    fn sampled_in_place(&self, ask: &InPlaceAsk<'_>) -> Option<InPlaceTexture> {
        let _ = ask;
        None
    }
}

/// What a renderer asks of an in-place texture.
pub(crate) struct InPlaceAsk<'a> {
    pub device: &'a wgpu::Device,
    pub queue: &'a wgpu::Queue,
    pub format: wgpu::TextureFormat,
    pub width: u32,
    pub height: u32,
}

/// A texture over a source's pages and the frame counts that keep them from being handed
/// back while frames draw it.
pub(crate) struct InPlaceTexture {
    pub texture: wgpu::Texture,
    pub view: wgpu::TextureView,
    pub usage: Arc<crate::in_place::ImageUse>,
}

/// What the renderer's upload path needs of an imported source.
pub(crate) struct Imported {
    buffer: wgpu::Buffer,
    interop: Interop,
    gpu: Arc<GpuUse>,
    /// Held shared while a copy is counted, exclusively while the CPU writes the pages.
    copy_lock: RwLock<()>,
    copies: AtomicU64,
    copied_bytes: AtomicU64,
}

static NEXT_ID: AtomicU64 = AtomicU64::new(1);

/// A fresh id for an imported source's residency.
pub(crate) fn next_id() -> u64 {
    NEXT_ID.fetch_add(1, Ordering::Relaxed)
}

type Registry = Mutex<HashMap<u64, Weak<dyn ImportedHost>>>;

/// Imported sources by id, for the renderer's copies (`Residency::HostImported` names the id).
pub(crate) fn registry() -> &'static Registry {
    static REGISTRY: std::sync::OnceLock<Registry> = std::sync::OnceLock::new();
    REGISTRY.get_or_init(|| Mutex::new(HashMap::new()))
}

/// The imported source `memory` names, if it still lives and was imported on `interop`.
pub(crate) fn lookup(
    interop: &Interop,
    memory: &HostImportedMemory,
) -> Result<Arc<dyn ImportedHost>, InteropError> {
    let found = registry().lock().get(&memory.id).and_then(Weak::upgrade);
    let imported = found.ok_or(InteropError::HostImport {
        reason: format!("host import {} no longer exists", memory.id),
    })?;
    if !std::ptr::eq(imported.interop().shared(), interop.shared()) {
        return Err(InteropError::HostImport {
            reason: format!(
                "host import {} was imported on another device ({}) than this renderer's ({}); \
                 make the source with the renderer's Interop",
                memory.id,
                imported.interop().device_uuid(),
                interop.device_uuid()
            ),
        });
    }
    Ok(imported)
}

impl ImportedHost for Imported {
    fn interop(&self) -> &Interop {
        &self.interop
    }

    /// Waits for a CPU write in progress to finish first (see the module doc).
    fn record_copy(&self, bytes: u64) -> Result<HostCopy, InteropError> {
        let _shared = self.copy_lock.read();
        self.gpu.recorded();
        self.copies.fetch_add(1, Ordering::Relaxed);
        self.copied_bytes.fetch_add(bytes, Ordering::Relaxed);
        Ok(HostCopy {
            buffer: self.buffer.clone(),
            first_sample: 0,
            gpu: self.gpu.clone(),
        })
    }
}

struct State {
    log: ChangeLog,
}

/// A host source whose storage the renderer's Vulkan device imports, so that uploads are GPU
/// copies from these pages (`VK_EXT_external_memory_host`), with no CPU copy into staging.
///
/// Made on an [`Interop`]: draw it with renderers from [`Interop::renderer`]. Samples are
/// packed in C order (`[planes, rows, columns]`, channels interleaved). Write with
/// [`HostImportSource::update`] (in place, everything) or [`HostImportSource::write`] (a
/// region); writes wait for the GPU copies already recorded from the pages.
pub struct HostImportSource {
    layout: Layout,
    interop: Interop,
    pages: Arc<Pages>,
    imported: Option<Arc<Imported>>,
    id: u64,
    fallback: Option<String>,
    state: RwLock<State>,
}

impl HostImportSource {
    /// A zeroed source of `layout` imported on `interop`'s device where the driver has
    /// `VK_EXT_external_memory_host`; otherwise, or where the driver refuses to import the
    /// pages, a plain host source (see [`HostImportSource::fallback_reason`]).
    pub fn new(interop: &Interop, layout: Layout) -> Result<Self, InteropError> {
        Self::make(interop, layout, true)
    }

    /// The same source without the import: the renderer stages it like any host source (for
    /// comparisons, and to rule the import out when diagnosing).
    pub fn host_only(interop: &Interop, layout: Layout) -> Result<Self, InteropError> {
        Self::make(interop, layout, false)
    }

    fn make(interop: &Interop, layout: Layout, import: bool) -> Result<Self, InteropError> {
        let bytes = layout.total_bytes();
        let dev = interop.vulkan();
        // Without an import, any alignment does; a cache line keeps copies fast.
        let page = 64;
        let (align, mut fallback) = match (&dev.host_memory, import) {
            (_, false) => (
                page,
                Some("host import turned off (HostImportSource::host_only)".to_string()),
            ),
            (None, true) => (
                page,
                Some(format!(
                    "the adapter {} has no VK_EXT_external_memory_host: uploads are staged",
                    dev.identity.name
                )),
            ),
            (Some(host), true) => {
                let align = usize::try_from(host.alignment).unwrap_or(usize::MAX);
                if !align.is_power_of_two() {
                    return Err(InteropError::HostImport {
                        reason: format!(
                            "minImportedHostPointerAlignment {align} is not a power of two"
                        ),
                    });
                }
                (align.max(page), None)
            }
        };
        let pages = Arc::new(Pages::new(bytes, align)?);
        let id = next_id();
        let imported = match fallback {
            Some(ref reason) => {
                log::info!("HostImportSource {id}: {reason}");
                None
            }
            None => 'import: {
                // A driver that has the extension may still refuse these pages (no memory
                // type for them, a range too large to pin): the source is staged instead.
                let buffer = match import_pages(interop, &pages, bytes as u64) {
                    Ok(buffer) => buffer,
                    Err(e) => {
                        let reason =
                            format!("importing {bytes} bytes failed ({e}): uploads are staged");
                        log::info!("HostImportSource {id}: {reason}");
                        fallback = Some(reason);
                        break 'import None;
                    }
                };
                let imported = Arc::new(Imported {
                    buffer,
                    interop: interop.clone(),
                    gpu: Arc::new(GpuUse::default()),
                    copy_lock: RwLock::new(()),
                    copies: AtomicU64::new(0),
                    copied_bytes: AtomicU64::new(0),
                });
                let weak: Weak<dyn ImportedHost> = Arc::downgrade(&imported) as _;
                registry().lock().insert(id, weak);
                Some(imported)
            }
        };
        let mut log = ChangeLog::new(CHANGE_LOG_CAPACITY);
        log.record_all();
        Ok(HostImportSource {
            layout,
            interop: interop.clone(),
            pages,
            imported,
            id,
            fallback,
            state: RwLock::new(State { log }),
        })
    }

    /// Whether the pages are imported (uploads are GPU copies from them).
    pub fn is_imported(&self) -> bool {
        self.imported.is_some()
    }

    /// Why the pages are not imported (`None` when they are).
    pub fn fallback_reason(&self) -> Option<&str> {
        self.fallback.as_deref()
    }

    /// The alignment of the storage in bytes (the driver's `minImportedHostPointerAlignment`,
    /// at least a page).
    pub fn alignment(&self) -> usize {
        self.pages.layout.align()
    }

    /// GPU copies recorded from the imported pages so far, and their bytes.
    pub fn gpu_copies(&self) -> (u64, u64) {
        self.imported.as_ref().map_or((0, 0), |i| {
            (
                i.copies.load(Ordering::Relaxed),
                i.copied_bytes.load(Ordering::Relaxed),
            )
        })
    }

    /// Mutates all of the data in place (packed bytes, `layout.total_bytes()` long), after the
    /// GPU finished every copy already recorded from it; marks everything changed.
    pub fn update<R>(&self, f: impl FnOnce(&mut [u8]) -> R) -> R {
        let mut s = self.lock_for_write();
        // SAFETY: the write lock is held and no GPU copy from the pages is outstanding (see
        // `lock_for_write`), so nothing else reads or writes these bytes; they lie inside the
        // allocation (`total_bytes <= pages.len()`).
        let bytes = unsafe {
            std::slice::from_raw_parts_mut(self.pages.ptr.as_ptr(), self.layout.total_bytes())
        };
        let out = f(bytes);
        s.state.log.record_all();
        out
    }

    /// Writes `bytes` (packed) into `region`, after the GPU finished every copy already
    /// recorded from the pages; marks the region changed.
    pub fn write(&self, region: Region, bytes: &[u8]) -> Result<(), SourceError> {
        let shape = self.layout.shape();
        let region = padded(region, &shape)?;
        let expected = self.layout.region_bytes(&region);
        if bytes.len() != expected {
            return Err(SourceError::BufferSize {
                region,
                expected,
                got: bytes.len(),
            });
        }
        let mut s = self.lock_for_write();
        let sample = self.layout.sample_bytes();
        let d = shape.padded();
        let (row_pitch, plane_pitch) = (d[2] * sample, d[1] * d[2] * sample);
        let row = region.size[2] * sample;
        // SAFETY: as in `update`: exclusive access to the bytes, all inside the allocation.
        let dst = unsafe {
            std::slice::from_raw_parts_mut(self.pages.ptr.as_ptr(), self.layout.total_bytes())
        };
        let mut src = bytes.chunks_exact(row.max(1));
        for z in 0..region.size[0] {
            for y in 0..region.size[1] {
                let start = (region.origin[0] + z) * plane_pitch
                    + (region.origin[1] + y) * row_pitch
                    + region.origin[2] * sample;
                if let Some(src_row) = src.next() {
                    dst[start..start + row].copy_from_slice(src_row);
                }
            }
        }
        s.state.log.record(region);
        Ok(())
    }

    /// The state's write lock, taken once no GPU copy from the pages is outstanding, with
    /// the copy lock that keeps new copies from being recorded until the write is done.
    fn lock_for_write(&self) -> WriteLock<'_> {
        let Some(imported) = &self.imported else {
            return WriteLock {
                _copies: None,
                state: self.state.write(),
            };
        };
        let gpu = &imported.gpu;
        loop {
            gpu.wait(self.interop.device());
            let copies = imported.copy_lock.write();
            if !gpu.outstanding() {
                return WriteLock {
                    _copies: Some(copies),
                    state: self.state.write(),
                };
            }
        }
    }

    /// The packed bytes, read-locked, for `f`.
    fn with_bytes<R>(&self, f: impl FnOnce(&[u8]) -> R) -> R {
        let _s = self.state.read();
        // SAFETY: the read lock is held, so no CPU write runs; GPU copies only read.
        let bytes = unsafe {
            std::slice::from_raw_parts(self.pages.ptr.as_ptr(), self.layout.total_bytes())
        };
        f(bytes)
    }
}

/// The locks a CPU write holds.
struct WriteLock<'a> {
    _copies: Option<parking_lot::RwLockWriteGuard<'a, ()>>,
    state: parking_lot::RwLockWriteGuard<'a, State>,
}

/// `region` padded to three axes and checked against `shape`.
fn padded(region: Region, shape: &sluice_core::Shape) -> Result<Region, SourceError> {
    let d = shape.padded();
    let inside = region
        .checked_end()
        .is_some_and(|end| end.iter().zip(d).all(|(e, n)| *e <= n));
    if !inside {
        return Err(SourceError::OutOfBounds {
            region,
            shape: *shape,
        });
    }
    Ok(region)
}

/// Imports `pages` as a buffer of `size` bytes on `interop`'s device. The buffer's drop
/// callback destroys the `VkBuffer` and frees the memory, then drops its hold on the pages.
fn import_pages(
    interop: &Interop,
    pages: &Arc<Pages>,
    size: u64,
) -> Result<wgpu::Buffer, InteropError> {
    // SAFETY: `Pages` is one live allocation at an alignment of at least
    // minImportedHostPointerAlignment with a size rounded up to it (see `HostImportSource::make`),
    // and the clone of `pages` handed over keeps it alive until the memory is freed.
    unsafe {
        import_host_range(
            interop,
            pages.ptr,
            pages.len(),
            size,
            CopyDirection::FromHost,
            pages.clone(),
        )
    }
}

/// Which way the GPU copies through an imported host range.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum CopyDirection {
    /// The GPU reads the pages (uploads: `COPY_SRC`).
    FromHost,
    /// The GPU writes the pages (readback: `COPY_DST`).
    ToHost,
}

/// Imports the host range `[ptr, ptr + len)` as device memory bound to a wgpu buffer of
/// `size` bytes (`COPY_SRC`, or `COPY_DST` for [`CopyDirection::ToHost`]) on `interop`'s
/// device. The buffer's drop callback (which wgpu runs
/// once the buffer is dropped and no submission uses it) destroys the `VkBuffer`, frees the
/// memory and only then drops `keep`.
///
/// # Safety
///
/// - `ptr` and `len` are multiples of the device's `minImportedHostPointerAlignment`, and
///   `size <= len`;
/// - every byte of `[ptr, ptr + len)` lies in pages mapped readable (and writable, for
///   [`CopyDirection::ToHost`]) in this process, and they stay mapped, and are not handed to
///   another owner, until `keep` is dropped (Vulkan requires imported host memory to stay
///   valid for the life of the memory object);
/// - no copy the caller records from the buffer reads bytes another thread writes meanwhile,
///   and no copy into it writes bytes anyone reads meanwhile (the caller orders its own
///   accesses after its copies).
pub(crate) unsafe fn import_host_range(
    interop: &Interop,
    ptr: NonNull<u8>,
    len: usize,
    size: u64,
    direction: CopyDirection,
    keep: impl Send + Sync + 'static,
) -> Result<wgpu::Buffer, InteropError> {
    // SAFETY: the caller's contract is this function's.
    unsafe { import_host_memory(interop, ptr, len, size, direction, keep) }
        .map(|(buffer, _)| buffer)
}

/// Imported host memory, shared by the wgpu buffer bound to it and by any image bound to it
/// later (`in_place`): freed when the last of them is gone, and only then is `keep` (what
/// keeps the host range mapped) dropped.
pub(crate) struct ImportedMemory {
    raw: ash::Device,
    memory: vk::DeviceMemory,
    type_index: u32,
    len: u64,
    _keep: Box<dyn std::any::Any + Send + Sync>,
}

impl ImportedMemory {
    /// The memory object (owned by this; valid while it lives).
    pub fn handle(&self) -> vk::DeviceMemory {
        self.memory
    }

    /// Its memory type.
    pub fn type_index(&self) -> u32 {
        self.type_index
    }

    /// Its size in bytes (the whole imported range).
    pub fn len(&self) -> u64 {
        self.len
    }
}

impl Drop for ImportedMemory {
    fn drop(&mut self) {
        // SAFETY: the last holder is gone: the buffer's and every image's drop callbacks ran
        // (wgpu runs them once no submission uses the object), so nothing is bound to the
        // memory any more. `_keep` is dropped after this, so the range outlives the memory.
        unsafe { self.raw.free_memory(self.memory, None) };
    }
}

/// [`import_host_range`], also returning the memory for images to be bound to.
///
/// # Safety
///
/// As for [`import_host_range`]; images bound to the memory later read the range too, and
/// the same ordering rules hold for their reads.
pub(crate) unsafe fn import_host_memory(
    interop: &Interop,
    ptr: NonNull<u8>,
    len: usize,
    size: u64,
    direction: CopyDirection,
    keep: impl Send + Sync + 'static,
) -> Result<(wgpu::Buffer, Arc<ImportedMemory>), InteropError> {
    let dev = interop.vulkan();
    let host = dev
        .host_memory
        .as_ref()
        .ok_or_else(|| InteropError::HostImport {
            reason: "the device has no VK_EXT_external_memory_host".into(),
        })?;
    // wgpu checks its buffers' sizes when it makes them, not a buffer made from raw handles,
    // and Vulkan leaves one over the device's limits undefined.
    if size > host.max_buffer || len as u64 > host.max_allocation {
        return Err(InteropError::HostImport {
            reason: format!(
                "a buffer of {size} bytes over {len} imported bytes is over the device's limits \
                 (buffers of up to {} bytes, allocations of up to {})",
                host.max_buffer, host.max_allocation
            ),
        });
    }
    let handle_type = vk::ExternalMemoryHandleTypeFlags::HOST_ALLOCATION_EXT;
    let mut props = vk::MemoryHostPointerPropertiesEXT::default();
    // SAFETY: the extension is enabled on `dev.raw` (it was added at device creation), the
    // pointer is the start of mapped memory aligned to minImportedHostPointerAlignment (the
    // caller's contract), and `props` is a valid output structure.
    let result = unsafe {
        (host.ext.fp().get_memory_host_pointer_properties_ext)(
            dev.raw.handle(),
            handle_type,
            ptr.as_ptr().cast(),
            &mut props,
        )
    };
    if result != vk::Result::SUCCESS {
        return Err(InteropError::vulkan(
            "vkGetMemoryHostPointerPropertiesEXT",
            result,
        ));
    }
    let usage = match direction {
        CopyDirection::FromHost => vk::BufferUsageFlags::TRANSFER_SRC,
        CopyDirection::ToHost => vk::BufferUsageFlags::TRANSFER_DST,
    };
    // A buffer of this usage may be made on host memory only where the driver says it can be
    // imported, and not only as a dedicated allocation (VUID-VkBufferCreateInfo-pNext-00920).
    let query = vk::PhysicalDeviceExternalBufferInfo::default()
        .usage(usage)
        .handle_type(handle_type);
    let mut answer = vk::ExternalBufferProperties::default();
    // SAFETY: the physical device is live (the device holds it); valid input and output
    // structures with no chains.
    unsafe {
        dev.instance.get_physical_device_external_buffer_properties(
            dev.physical,
            &query,
            &mut answer,
        )
    };
    let external_memory = answer.external_memory_properties;
    let features = external_memory.external_memory_features;
    if !features.contains(vk::ExternalMemoryFeatureFlags::IMPORTABLE)
        || features.contains(vk::ExternalMemoryFeatureFlags::DEDICATED_ONLY)
        || !external_memory
            .compatible_handle_types
            .contains(handle_type)
    {
        return Err(InteropError::HostImport {
            reason: format!(
                "{usage:?} buffers cannot be bound to imported host memory (features \
                 {features:?}, compatible handle types {:?})",
                external_memory.compatible_handle_types
            ),
        });
    }
    let mut external = vk::ExternalMemoryBufferCreateInfo::default().handle_types(handle_type);
    let info = vk::BufferCreateInfo::default()
        .size(len as u64)
        // A copy source (or destination) only: the renderer then copies with
        // `copy_buffer_to_texture` (one command per update), not with its compute unpack pass,
        // which reads buffers with `STORAGE` usage texel by texel (far slower on CPU drivers
        // such as lavapipe).
        .usage(usage)
        .sharing_mode(vk::SharingMode::EXCLUSIVE)
        .push_next(&mut external);
    // SAFETY: a valid create info whose pNext chain lives until the call returns.
    let buffer = unsafe { dev.raw.create_buffer(&info, None) }
        .map_err(|e| InteropError::vulkan("vkCreateBuffer (host import)", e))?;
    // SAFETY: `buffer` is a live buffer of this device.
    let requirements = unsafe { dev.raw.get_buffer_memory_requirements(buffer) };
    let allowed = requirements.memory_type_bits & props.memory_type_bits;
    let destroy = |dev: &crate::vulkan::device::VulkanDevice| {
        // SAFETY: the buffer was never handed to wgpu or the GPU.
        unsafe { dev.raw.destroy_buffer(buffer, None) };
    };
    if allowed == 0 || requirements.size > len as u64 {
        destroy(dev);
        return Err(InteropError::HostImport {
            reason: format!(
                "the buffer needs {} bytes of memory types {:#x}; host pointers import as types \
                 {:#x} and the range holds {} bytes",
                requirements.size, requirements.memory_type_bits, props.memory_type_bits, len
            ),
        });
    }
    // Of the types the pointer imports as, one that is host-coherent (the GPU's writes and
    // reads of the pages need no flush or invalidate, which unmapped imported memory could
    // not be given), and host-cached for readback; else the first allowed.
    let coherent = vk::MemoryPropertyFlags::HOST_COHERENT;
    let wanted = match direction {
        CopyDirection::FromHost => coherent,
        CopyDirection::ToHost => coherent | vk::MemoryPropertyFlags::HOST_CACHED,
    };
    let allowed_with = |flags: vk::MemoryPropertyFlags| {
        dev.memory_types.iter().enumerate().position(|(i, t)| {
            i < 32 && allowed & (1 << i) != 0 && t.property_flags.contains(flags)
        })
    };
    let index = allowed_with(wanted)
        .or_else(|| allowed_with(coherent))
        .map_or(allowed.trailing_zeros(), |i| i as u32);
    let mut import = vk::ImportMemoryHostPointerInfoEXT::default()
        .handle_type(handle_type)
        .host_pointer(ptr.as_ptr().cast());
    let alloc = vk::MemoryAllocateInfo::default()
        .allocation_size(len as u64)
        .memory_type_index(index)
        .push_next(&mut import);
    // SAFETY: the pointer and size are multiples of minImportedHostPointerAlignment and the
    // range is mapped (the caller's contract), the memory type is one the driver reported for
    // this pointer, and the range outlives the memory (the drop callback below holds `keep`
    // until the memory is freed).
    let memory = match unsafe { dev.raw.allocate_memory(&alloc, None) } {
        Ok(memory) => memory,
        Err(e) => {
            destroy(dev);
            return Err(InteropError::vulkan("vkAllocateMemory (host pointer)", e));
        }
    };
    // SAFETY: buffer and memory are live, unbound and of this device; the type is allowed and
    // the allocation covers the requirements.
    if let Err(e) = unsafe { dev.raw.bind_buffer_memory(buffer, memory, 0) } {
        // SAFETY: the memory was just allocated and nothing uses it.
        unsafe { dev.raw.free_memory(memory, None) };
        destroy(dev);
        return Err(InteropError::vulkan("vkBindBufferMemory (host pointer)", e));
    }
    let raw = dev.raw.clone();
    let shared = Arc::new(ImportedMemory {
        raw: raw.clone(),
        memory,
        type_index: index,
        len: len as u64,
        _keep: Box::new(keep),
    });
    let held = shared.clone();
    let callback: wgpu::hal::DropCallback = Box::new(move || {
        // SAFETY: wgpu runs this once the buffer is destroyed and no submission uses it; the
        // device outlives its buffers. The memory is freed once images bound to it are gone
        // too (`ImportedMemory`'s drop), and the range kept mapped until then.
        unsafe { raw.destroy_buffer(buffer, None) };
        drop(held);
    });
    // SAFETY: wgpu never destroys the buffer itself (the callback does) and never maps it;
    // the buffer is bound to memory for its whole life.
    let hal = unsafe { wgpu::hal::vulkan::Buffer::from_raw_externally_owned(buffer, callback) };
    let desc = wgpu::BufferDescriptor {
        label: Some("sluice host-imported pages"),
        size,
        usage: match direction {
            CopyDirection::FromHost => wgpu::BufferUsages::COPY_SRC,
            CopyDirection::ToHost => wgpu::BufferUsages::COPY_DST,
        },
        mapped_at_creation: false,
    };
    // SAFETY: the buffer was created on this device with at least `size` bytes and the
    // transfer usage matching wgpu's (`COPY_SRC` or `COPY_DST`), and is bound to memory whose
    // contents are the range's.
    let buffer = unsafe { dev.device.create_buffer_from_hal::<Vulkan>(hal, &desc) };
    Ok((buffer, shared))
}

impl Drop for HostImportSource {
    fn drop(&mut self) {
        registry().lock().remove(&self.id);
    }
}

impl DataSource for HostImportSource {
    fn layout(&self) -> Layout {
        self.layout.clone()
    }

    fn version(&self) -> Version {
        self.state.read().log.version()
    }

    fn changes_since(&self, since: Version) -> Changes {
        self.state.read().log.since(since)
    }

    fn residency(&self) -> Residency {
        match &self.imported {
            Some(_) => Residency::HostImported(HostImportedMemory {
                device_uuid: self.interop.device_uuid().0,
                id: self.id,
            }),
            None => Residency::Host,
        }
    }

    fn read(&self, request: &ReadRequest<'_>, dst: &mut [u8]) -> Result<ReadStatus, SourceError> {
        check_read(&self.layout, request, dst.len())?;
        let outcome = self.lend(request, &mut |view| view.copy_packed(dst))?;
        debug_assert_eq!(outcome, LendOutcome::Lent);
        Ok(ReadStatus::Ready)
    }

    fn lend(
        &self,
        request: &ReadRequest<'_>,
        visit: &mut dyn FnMut(HostView<'_>),
    ) -> Result<LendOutcome, SourceError> {
        let region = request.region;
        check_read(&self.layout, request, self.layout.region_bytes(&region))?;
        self.with_bytes(|bytes| {
            // The pages hold the whole layout (`total_bytes <= pages.len()`).
            HostView::of_packed(bytes, &self.layout, region).map(&mut *visit)
        })
        .ok_or_else(|| {
            SourceError::custom(format!(
                "HostImportSource: its pages are shorter than {region:?} of {:?} needs",
                self.layout
            ))
        })?;
        Ok(LendOutcome::Lent)
    }

    fn label(&self) -> String {
        format!(
            "HostImportSource({} {}x{}{})",
            self.layout.shape(),
            self.layout.element(),
            self.layout.channels(),
            if self.is_imported() {
                ", imported"
            } else {
                ", staged"
            }
        )
    }
}
