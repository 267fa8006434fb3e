//! `HostBufferSource`: buffers the user owns, handed over whole per update and copied by the
//! GPU straight from their pages (`VK_EXT_external_memory_host`), staged where they cannot be.
//!
//! One of the crate's `unsafe` modules. [`HostImportSource`](crate::HostImportSource) is written
//! in place; this source *replaces* its data with another buffer (the peers' "set a new array"):
//! [`HostBufferSource::replace`] takes a [`HostBuffer`] and hands back the one it held before,
//! once no GPU copy can read it any more, so two buffers alternate with no CPU copy and no
//! import per update.
//!
//! # What is imported
//!
//! The *enclosing pages* of the buffer's bytes: its start rounded down and its end rounded up to
//! the driver's `minImportedHostPointerAlignment`, imported once as `VkDeviceMemory` bound to a
//! `VkBuffer` handed to wgpu; a copy starts at the buffer's offset inside that range. Mapping is
//! by whole pages, and each page of a live allocation holds at least one of its bytes, so the
//! page-rounded range of a live buffer is mapped and no allocator can unmap or reuse any of it
//! while the buffer lives. The import is therefore made only where the driver's alignment
//! rounds within those pages (always when it is at most the page size, as on NVIDIA and
//! lavapipe; otherwise only for a buffer that happens to be aligned); elsewhere, for buffers
//! under [`MIN_IMPORT_BYTES`] (an import costs more than a copy of so few bytes), for a first
//! sample not on a sample boundary (the GPU copy needs it) or where the import fails, the bytes
//! are copied into pages the source owns and imported (one CPU copy, the staging copy), and
//! [`HostBufferSource::fallback_reason`] says why.
//!
//! # Lifetime
//!
//! The import travels with the buffer: [`HostBuffer`] owns both, so a buffer handed back and
//! handed in again is not imported again (the "cache" is keyed by the buffer's address and
//! length, checked on each hand-over), and the import is released with the buffer. A
//! `HostBuffer` only lends its bytes as slices (never the `Vec`, which could reallocate). When
//! one is dropped while imported, its storage moves into the import's drop callback, which wgpu
//! runs once no submission uses the buffer: the memory is freed first, the storage after.
//! [`HostBuffer::into_vec`] gives the storage back only once the import's memory is freed.
//!
//! # Ordering
//!
//! Every GPU copy is counted against the buffer it reads when it is recorded (under the
//! source's read lock) and settled when the queue reports the frame finished
//! (`Queue::on_submitted_work_done`). `replace` swaps the buffer under the write lock, after
//! which no copy of the old one can be recorded, then waits (polling the device) until the old
//! buffer's copies are settled before handing it back: the user can then refill it freely.

use std::any::Any;
use std::cell::UnsafeCell;
use std::ops::{Deref, DerefMut};
use std::ptr::NonNull;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Weak};

use parking_lot::{Mutex, RwLock};
use sluice_core::{
    check_read, ChangeLog, Changes, DataSource, HostImportedMemory, HostView, Layout, LendOutcome,
    ReadRequest, ReadStatus, Residency, SourceError, Version,
};

use crate::error::InteropError;
use crate::host_import::{
    import_host_memory, import_host_range, next_id, registry, CopyDirection, GpuUse, HostCopy,
    ImportedHost, ImportedMemory, InPlaceAsk, InPlaceTexture, Pages,
};
use crate::in_place::{sampled_image, ImageUse, InPlaceData};
use crate::interop::Interop;
use crate::source::check_texture_layout;

/// Buffers shorter than this are copied into the source's imported pages rather than imported
/// themselves: importing pins pages and creates device objects, which costs more than copying
/// so few bytes.
pub const MIN_IMPORT_BYTES: usize = 64 * 1024;

/// How many region changes the source remembers before answering "everything changed".
const CHANGE_LOG_CAPACITY: usize = 16;

/// What a [`HostBuffer`] owns: a vector of plain samples.
trait Storage: Send + Sync {
    fn bytes(&self) -> &[u8];
    fn bytes_mut(&mut self) -> &mut [u8];
    fn as_any(&self) -> &dyn Any;
    fn into_any(self: Box<Self>) -> Box<dyn Any>;
}

impl<T: bytemuck::Pod + Send + Sync> Storage for Vec<T> {
    fn bytes(&self) -> &[u8] {
        bytemuck::cast_slice(self)
    }
    fn bytes_mut(&mut self) -> &mut [u8] {
        bytemuck::cast_slice_mut(self)
    }
    fn as_any(&self) -> &dyn Any {
        self
    }
    fn into_any(self: Box<Self>) -> Box<dyn Any> {
        self
    }
}

/// Memory someone else owns (a numpy array, say), kept alive by `owner`.
struct RawStorage<O> {
    ptr: NonNull<u8>,
    len: usize,
    owner: O,
}

// SAFETY: the bytes are reached only through the `HostBuffer` holding this (see
// `HostBuffer::from_raw_parts`'s contract); `O` itself is `Send + Sync`.
unsafe impl<O: Send + Sync> Send for RawStorage<O> {}
// SAFETY: as above.
unsafe impl<O: Send + Sync> Sync for RawStorage<O> {}

impl<O: Send + Sync + 'static> Storage for RawStorage<O> {
    fn bytes(&self) -> &[u8] {
        // SAFETY: `from_raw_parts`'s contract: `len` readable bytes at `ptr` while `owner`
        // lives.
        unsafe { std::slice::from_raw_parts(self.ptr.as_ptr(), self.len) }
    }
    fn bytes_mut(&mut self) -> &mut [u8] {
        // SAFETY: as above, and writable, reached through this storage alone.
        unsafe { std::slice::from_raw_parts_mut(self.ptr.as_ptr(), self.len) }
    }
    fn as_any(&self) -> &dyn Any {
        self
    }
    fn into_any(self: Box<Self>) -> Box<dyn Any> {
        self
    }
}

/// The storage, shared by a [`HostBuffer`] and the drop callbacks of the imports of its pages,
/// so that it is freed only after every import's memory is.
struct StorageCell(UnsafeCell<Box<dyn Storage>>);

// SAFETY: only the `HostBuffer` that made the cell reaches the storage (through `&self` /
// `&mut self`, so Rust's borrow rules order those accesses); the import callbacks' clones only
// keep it alive. `Box<dyn Storage>` is `Send + Sync`.
unsafe impl Send for StorageCell {}
// SAFETY: as above: `&StorageCell` in another thread gives no access to the storage.
unsafe impl Sync for StorageCell {}

/// The import of a buffer's enclosing pages on one device.
struct BufferImport {
    buffer: wgpu::Buffer,
    /// The imported memory, for images sampled in place.
    memory: Arc<ImportedMemory>,
    /// The image sampled in place over the pages while a source shows the buffer
    /// (lavapipe), made on a renderer's first request and retired when the source hands the
    /// buffer back.
    image: Mutex<Option<CachedImage>>,
    /// Where the buffer's first sample lies in `buffer`.
    first_sample: u64,
    interop: Interop,
    /// The address and length of the bytes it was made for.
    key: (usize, usize),
    gpu: Arc<GpuUse>,
}

/// An image over a buffer's pages, what it was made for, and its frame counts.
struct CachedImage {
    key: (wgpu::TextureFormat, u32, u32),
    texture: wgpu::Texture,
    view: wgpu::TextureView,
    usage: Arc<ImageUse>,
}

impl BufferImport {
    /// Retires the image sampled in place over the pages, if any: no frame draws it from now
    /// on. Returns it, to be destroyed once the frames counted before are done.
    fn retire_image(&self) -> Option<wgpu::Texture> {
        let cached = self.image.lock().take()?;
        cached.usage.retire();
        Some(cached.texture)
    }
}

/// A buffer the user owns and hands to a [`HostBufferSource`]: a `Vec` of plain samples (and
/// optionally an offset of the first sample in it), with the import of its pages once a source
/// made one.
///
/// Read and write it as a byte slice (`Deref<Target = [u8]>`); get the vector back with
/// [`HostBuffer::into_vec`]. A `HostBuffer` the user holds is never read by a source's GPU
/// copies: sources hand buffers back only once those are done.
pub struct HostBuffer {
    cell: Arc<StorageCell>,
    offset: usize,
    import: Option<Box<BufferImport>>,
}

impl<T: bytemuck::Pod + Send + Sync> From<Vec<T>> for HostBuffer {
    fn from(vec: Vec<T>) -> Self {
        HostBuffer {
            cell: Arc::new(StorageCell(UnsafeCell::new(Box::new(vec)))),
            offset: 0,
            import: None,
        }
    }
}

impl HostBuffer {
    /// A buffer whose samples start `offset` bytes into `vec` (a header before them, say).
    pub fn with_offset<T: bytemuck::Pod + Send + Sync>(
        vec: Vec<T>,
        offset: usize,
    ) -> Result<Self, InteropError> {
        let len = std::mem::size_of_val(vec.as_slice());
        if offset > len {
            return Err(InteropError::HostImport {
                reason: format!("an offset of {offset} bytes lies past the buffer's {len} bytes"),
            });
        }
        let mut buffer = HostBuffer::from(vec);
        buffer.offset = offset;
        Ok(buffer)
    }

    /// A buffer over `len` bytes at `ptr` that `owner` keeps alive (an array of another
    /// library, such as a numpy array held by a Python reference); `owner` is dropped once the
    /// buffer and every import of its pages are gone, and [`HostBuffer::into_owner`] gives it
    /// back.
    ///
    /// # Safety
    ///
    /// - `len` bytes at `ptr` are one allocation's, readable (and writable, if the buffer is
    ///   ever written through `DerefMut`), and stay allocated and mapped (never moved, resized
    ///   or freed) while `owner` lives;
    /// - while the `HostBuffer` lives, no Rust code writes those bytes except through it.
    ///   Writes by code outside Rust (numpy, say) while a source shows the buffer are the
    ///   caller's to order: sluice only copies the bytes (on the GPU, or into staging as plain
    ///   bytes), so such a write can tear a frame, as with the other by-reference sources.
    pub unsafe fn from_raw_parts(
        ptr: NonNull<u8>,
        len: usize,
        owner: impl Send + Sync + 'static,
    ) -> HostBuffer {
        HostBuffer {
            cell: Arc::new(StorageCell(UnsafeCell::new(Box::new(RawStorage {
                ptr,
                len,
                owner,
            })))),
            offset: 0,
            import: None,
        }
    }

    /// The owner of a buffer made by [`HostBuffer::from_raw_parts`], if it is an `O`.
    pub fn owner<O: Send + Sync + 'static>(&self) -> Option<&O> {
        self.storage()
            .as_any()
            .downcast_ref::<RawStorage<O>>()
            .map(|raw| &raw.owner)
    }

    /// The owner of a buffer made by [`HostBuffer::from_raw_parts`], once the imports of its
    /// pages are released: `Err(self)` if `O` is not its type, or if an import's memory is
    /// still in use after the device is idle (as for [`HostBuffer::into_vec`]).
    pub fn into_owner<O: Send + Sync + 'static>(self) -> Result<O, HostBuffer> {
        if !self.storage().as_any().is::<RawStorage<O>>() {
            return Err(self);
        }
        let storage = self.into_storage()?;
        match storage.into_any().downcast::<RawStorage<O>>() {
            Ok(raw) => Ok(raw.owner),
            Err(_) => unreachable!("the owner type was checked above"),
        }
    }

    /// The storage, once the imports are released; `Err(self)` while one is still held.
    fn into_storage(mut self) -> Result<Box<dyn Storage>, HostBuffer> {
        self.release_import();
        let HostBuffer { cell, offset, .. } = self;
        match Arc::try_unwrap(cell) {
            Ok(cell) => Ok(cell.0.into_inner()),
            Err(cell) => Err(HostBuffer {
                cell,
                offset,
                import: None,
            }),
        }
    }

    fn storage(&self) -> &dyn Storage {
        // SAFETY: only this `HostBuffer` reaches the storage (see `StorageCell`), and `&self`
        // excludes `&mut self` meanwhile.
        unsafe { &**self.cell.0.get() }
    }

    /// The offset of the first sample in the vector, in bytes.
    pub fn offset(&self) -> usize {
        self.offset
    }

    /// Whether the pages are imported on some device (a source copies from them directly).
    pub fn is_imported(&self) -> bool {
        self.import.is_some()
    }

    /// The vector back, once the imports of its pages are released (their memory freed):
    /// `Err(self)` if `T` is not the element type it was made from, or if an import's memory
    /// is still in use after the device is idle (a clone of the buffer from
    /// [`HostBuffer::imported_buffer`] still lives).
    pub fn into_vec<T: bytemuck::Pod + Send + Sync>(self) -> Result<Vec<T>, HostBuffer> {
        if !self.storage().as_any().is::<Vec<T>>() {
            return Err(self);
        }
        let storage = self.into_storage()?;
        match storage.into_any().downcast::<Vec<T>>() {
            Ok(vec) => Ok(*vec),
            Err(_) => unreachable!("the element type was checked above"),
        }
    }

    /// Imports the buffer's pages on `interop` (or reuses the import it has there) and returns
    /// the imported wgpu buffer (`COPY_SRC`) with the offset of the first sample in it, for
    /// the caller's own GPU copies. The caller orders its writes of the bytes after its copies;
    /// while the returned clone lives, [`HostBuffer::into_vec`] refuses.
    pub fn imported_buffer(
        &mut self,
        interop: &Interop,
    ) -> Result<(wgpu::Buffer, u64), InteropError> {
        self.ensure_import(interop, 1)
            .map_err(|reason| InteropError::HostImport { reason })?;
        let import = self.import.as_ref().expect("imported above");
        Ok((import.buffer.clone(), import.first_sample))
    }

    /// The first sample's address and the length in bytes.
    fn key(&self) -> (usize, usize) {
        (self.as_ptr() as usize, self.len())
    }

    /// Makes sure the pages are imported on `interop`, reusing an import made there for these
    /// bytes. `Ok(true)`: a new import was made. `Err`: why they cannot be imported.
    fn ensure_import(
        &mut self,
        interop: &Interop,
        alignment_needed: usize,
    ) -> Result<bool, String> {
        if let Some(import) = &self.import {
            if std::ptr::eq(import.interop.shared(), interop.shared()) && import.key == self.key() {
                return Ok(false);
            }
            self.release_import();
        }
        let alignment = interop.host_import_alignment().ok_or_else(|| {
            format!(
                "the adapter {} has no VK_EXT_external_memory_host",
                interop.identity().name
            )
        })?;
        let (addr, len) = self.key();
        if len < MIN_IMPORT_BYTES {
            return Err(format!(
                "the buffer's {len} bytes are fewer than MIN_IMPORT_BYTES ({MIN_IMPORT_BYTES}): copied"
            ));
        }
        let range = enclosing_pages(addr, len, alignment, rustix::param::page_size())?;
        let first_sample = addr - range.start;
        if !first_sample.is_multiple_of(alignment_needed) {
            return Err(format!(
                "the first sample at {addr:#x} lies {first_sample} bytes into its imported range, \
                 not a multiple of the {alignment_needed} bytes a GPU copy needs"
            ));
        }
        let start = NonNull::new(range.start as *mut u8).ok_or("a null page")?;
        let size = range.len();
        // SAFETY: `enclosing_pages` rounded the range to `alignment` (the driver's
        // minImportedHostPointerAlignment) within the page-rounded span of the buffer's bytes;
        // each of those pages holds a byte of this live allocation, so all are mapped, and no
        // allocator can unmap or reuse them while the allocation lives. It lives until the
        // clone of `cell` handed over is dropped, after the memory is freed (the storage cannot
        // reallocate meanwhile: only slices of it are lent). Copies from the buffer are ordered
        // before the owner's writes by `GpuUse` (sources hand it back only when its copies are
        // done; `imported_buffer`'s callers order their own).
        let (buffer, memory) = unsafe {
            import_host_memory(
                interop,
                start,
                size,
                size as u64,
                CopyDirection::FromHost,
                self.cell.clone(),
            )
        }
        .map_err(|e| e.to_string())?;
        self.import = Some(Box::new(BufferImport {
            buffer,
            memory,
            image: Mutex::new(None),
            first_sample: first_sample as u64,
            interop: interop.clone(),
            key: (addr, len),
            gpu: Arc::new(GpuUse::default()),
        }));
        Ok(true)
    }

    /// Releases the import, polling its device until the GPU is done with it (so that its
    /// memory is freed and its hold on the storage dropped, unless someone holds a clone of
    /// the imported buffer).
    fn release_import(&mut self) {
        let Some(import) = self.import.take() else {
            return;
        };
        import.gpu.wait(import.interop.device());
        let interop = import.interop.clone();
        drop(import);
        if Arc::strong_count(&self.cell) > 1 {
            let _ = interop.device().poll(wgpu::PollType::wait_indefinitely());
        }
    }
}

impl Deref for HostBuffer {
    type Target = [u8];
    fn deref(&self) -> &[u8] {
        &self.storage().bytes()[self.offset..]
    }
}

impl DerefMut for HostBuffer {
    fn deref_mut(&mut self) -> &mut [u8] {
        // SAFETY: only this `HostBuffer` reaches the storage (see `StorageCell`) and `&mut
        // self` is exclusive. A HostBuffer its owner holds has no source copy outstanding
        // (sources hand buffers back only when their copies are done).
        let storage = unsafe { &mut **self.cell.0.get() };
        &mut storage.bytes_mut()[self.offset..]
    }
}

impl std::fmt::Debug for HostBuffer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("HostBuffer")
            .field("len", &self.len())
            .field("offset", &self.offset)
            .field("imported", &self.is_imported())
            .finish()
    }
}

/// The range `[addr, addr + len)` rounded out to `alignment`, if that stays within the pages
/// (`page` bytes) that hold the bytes; otherwise why not.
fn enclosing_pages(
    addr: usize,
    len: usize,
    alignment: u64,
    page: usize,
) -> Result<std::ops::Range<usize>, String> {
    let alignment = usize::try_from(alignment)
        .ok()
        .filter(|a| a.is_power_of_two())
        .ok_or_else(|| {
            format!("minImportedHostPointerAlignment {alignment} is not a power of two")
        })?;
    if len == 0 {
        return Err("an empty buffer has no pages to import".into());
    }
    let end = addr
        .checked_add(len)
        .ok_or_else(|| format!("{addr:#x} + {len} bytes overflows the address space"))?;
    let round_up = |v: usize, to: usize| v.checked_next_multiple_of(to);
    let overflow = || format!("{end:#x} rounded up overflows the address space");
    let start = addr & !(alignment - 1);
    let stop = round_up(end, alignment).ok_or_else(overflow)?;
    let page_start = addr & !(page - 1);
    let page_stop = round_up(end, page).ok_or_else(overflow)?;
    if start < page_start || stop > page_stop {
        return Err(format!(
            "the driver imports host memory in units of {alignment} bytes, more than the {page}-byte \
             page, and the buffer at {addr:#x} ({len} bytes) does not lie on them: its pages \
             {page_start:#x}..{page_stop:#x} do not cover {start:#x}..{stop:#x}"
        ));
    }
    Ok(start..stop)
}

/// The source's own imported pages, for buffers that cannot be imported themselves.
struct OwnPages {
    pages: Arc<Pages>,
    buffer: wgpu::Buffer,
    gpu: Arc<GpuUse>,
}

/// Where the GPU copies the current buffer from.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum CopyFrom {
    /// The buffer's own imported pages.
    Buffer,
    /// The source's pages, holding a copy of the buffer.
    OwnPages,
    /// Nothing: the source is staged by the renderer (`Residency::Host`).
    Staged,
}

struct State {
    buffer: HostBuffer,
    from: CopyFrom,
    /// Why the current buffer is not imported itself.
    fallback: Option<String>,
    log: ChangeLog,
}

/// Counts a [`HostBufferSource`] keeps (see [`HostBufferSource::stats`]).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct HostBufferStats {
    /// Buffers handed over (the first included).
    pub buffers_handed: u64,
    /// Imports of buffers' pages made.
    pub imports_made: u64,
    /// Buffers copied by the CPU into the source's pages (not importable).
    pub buffers_copied: u64,
    /// Bytes copied by the CPU into the source's pages.
    pub bytes_copied: u64,
    /// GPU copies recorded from imported pages.
    pub gpu_copies: u64,
    /// Bytes of those GPU copies.
    pub gpu_bytes: u64,
    /// Hand-backs that had to wait for the GPU to finish reading the buffer.
    pub waits: u64,
    /// Images made to sample buffers in place (lavapipe): one per buffer handed over and
    /// drawn.
    pub in_place_images: u64,
}

#[derive(Default)]
struct Stats {
    buffers_handed: AtomicU64,
    imports_made: AtomicU64,
    buffers_copied: AtomicU64,
    bytes_copied: AtomicU64,
    gpu_copies: AtomicU64,
    gpu_bytes: AtomicU64,
    waits: AtomicU64,
    in_place_images: AtomicU64,
}

struct Inner {
    layout: Layout,
    interop: Interop,
    /// `None` where the source imports; otherwise why every buffer is staged.
    staged: Option<String>,
    state: RwLock<State>,
    pages: Mutex<Option<Arc<OwnPages>>>,
    stats: Stats,
    /// Whether renderers on lavapipe may sample the buffers in place.
    in_place: std::sync::atomic::AtomicBool,
    /// Why the last request for an in-place texture was refused (`None` after one was made).
    in_place_refused: Mutex<Option<String>>,
}

impl Inner {
    /// The in-place texture of the buffer shown now for `ask`, made on first request: `Err`
    /// says why there is none.
    fn in_place_texture(&self, ask: &InPlaceAsk<'_>) -> Result<InPlaceTexture, String> {
        if !self.in_place.load(Ordering::Relaxed) {
            return Err(
                "sampling in place turned off (HostBufferSource::set_sample_in_place)".into(),
            );
        }
        let state = self.state.read();
        let import = match (state.from, &state.buffer.import) {
            (CopyFrom::Buffer, Some(import)) => import,
            _ => {
                return Err(format!(
                    "the buffer shown is not imported where it lies ({})",
                    state.fallback.as_deref().unwrap_or("copied")
                ))
            }
        };
        let key = (ask.format, ask.width, ask.height);
        let mut slot = import.image.lock();
        if let Some(cached) = slot.as_ref() {
            if cached.key != key {
                // One image per hand-over, retired with it: a second one would not be.
                return Err(format!(
                    "the buffer is drawn in place as a {:?} {} x {} image already; a {:?} {} x {} \
                     one is copied",
                    cached.key.0, cached.key.1, cached.key.2, key.0, key.1, key.2
                ));
            }
            return Ok(InPlaceTexture {
                texture: cached.texture.clone(),
                view: cached.view.clone(),
                usage: cached.usage.clone(),
            });
        }
        let shape = self.layout.shape();
        let [depth, height, width] = shape.padded();
        if depth != 1 || (height, width) != (ask.height as usize, ask.width as usize) {
            return Err(format!(
                "only 2-D sources are sampled in place, not a {shape} one into a {} x {} texture",
                ask.width, ask.height
            ));
        }
        let row_bytes = (width * self.layout.sample_bytes()) as u64;
        let data = InPlaceData {
            row_bytes,
            offset: import.first_sample,
        };
        // SAFETY: the memory was imported on this source's device (the renderer asking is on
        // it: `host_import::lookup` checked), and the pages hold the layout's packed rows
        // from the first sample. The host writes them again only after the source hands the
        // buffer back, which retires the image and waits for every frame counted on it
        // (`replace`), and frames count themselves before drawing it (`ImageUse`).
        let image = unsafe {
            sampled_image(
                self.interop.vulkan(),
                &import.memory,
                &import.gpu,
                ask,
                &data,
            )
        }?;
        let usage = Arc::new(ImageUse::new(import.gpu.clone()));
        self.stats.in_place_images.fetch_add(1, Ordering::Relaxed);
        *slot = Some(CachedImage {
            key,
            texture: image.texture.clone(),
            view: image.view.clone(),
            usage: usage.clone(),
        });
        Ok(InPlaceTexture {
            texture: image.texture,
            view: image.view,
            usage,
        })
    }
}

impl ImportedHost for Inner {
    fn sampled_in_place(&self, ask: &InPlaceAsk<'_>) -> Option<InPlaceTexture> {
        let made = self.in_place_texture(ask);
        let mut refused = self.in_place_refused.lock();
        match made {
            Ok(texture) => {
                *refused = None;
                Some(texture)
            }
            Err(reason) => {
                if refused.as_deref() != Some(reason.as_str()) {
                    log::debug!("HostBufferSource: not sampled in place: {reason}");
                }
                *refused = Some(reason);
                None
            }
        }
    }

    fn interop(&self) -> &Interop {
        &self.interop
    }

    fn record_copy(&self, bytes: u64) -> Result<HostCopy, InteropError> {
        let state = self.state.read();
        let (buffer, first_sample, gpu) = match state.from {
            CopyFrom::Buffer => {
                let import = state.buffer.import.as_ref().expect("imported buffer");
                (
                    import.buffer.clone(),
                    import.first_sample,
                    import.gpu.clone(),
                )
            }
            CopyFrom::OwnPages => {
                let pages = self.pages.lock().clone().expect("own pages exist");
                (pages.buffer.clone(), 0, pages.gpu.clone())
            }
            CopyFrom::Staged => {
                return Err(InteropError::HostImport {
                    reason: "this HostBufferSource is staged, not imported".into(),
                })
            }
        };
        gpu.recorded();
        self.stats.gpu_copies.fetch_add(1, Ordering::Relaxed);
        self.stats.gpu_bytes.fetch_add(bytes, Ordering::Relaxed);
        Ok(HostCopy {
            buffer,
            first_sample,
            gpu,
        })
    }
}

/// A buffer [`HostBufferSource::replace`] refused, handed back with the reason.
pub struct ReplaceError {
    /// What was wrong (the numbers included).
    pub error: Box<InteropError>,
    /// The buffer, unchanged.
    pub buffer: HostBuffer,
}

impl std::fmt::Debug for ReplaceError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ReplaceError")
            .field("error", &self.error)
            .field("buffer", &self.buffer)
            .finish()
    }
}

impl std::fmt::Display for ReplaceError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        self.error.fmt(f)
    }
}

impl std::error::Error for ReplaceError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        Some(&*self.error)
    }
}

/// A source whose data is a buffer the user hands over whole, replaced by another per update,
/// which the renderer's GPU copies straight from the buffer's pages
/// (`VK_EXT_external_memory_host`): no CPU copy. What is imported, when it falls back to one
/// CPU copy, and the lifetime and ordering rules are in `docs/gpu-interop.md` ("Replacing the
/// data with your own buffers").
///
/// Made on an [`Interop`]: draw it with renderers from [`Interop::renderer`]. Samples are
/// packed in C order (`[planes, rows, columns]`, channels interleaved), `layout.total_bytes()`
/// of them from the buffer's offset. Double buffering:
///
/// ```no_run
/// # fn demo(interop: &sluice_interop::Interop, layout: sluice_core::Layout) -> Result<(), Box<dyn std::error::Error>> {
/// use sluice_interop::{HostBuffer, HostBufferSource};
/// let n = layout.total_bytes();
/// let source = HostBufferSource::new(interop, layout, vec![0u8; n])?;
/// let mut spare = HostBuffer::from(vec![0u8; n]);
/// for frame in 0..10u8 {
///     spare.fill(frame); // the user's new data, written in their own buffer
///     spare = source.replace(spare)?; // the previous buffer, no longer read by the GPU
///     // ... renderer.render(...) ...
/// }
/// # Ok(()) }
/// ```
pub struct HostBufferSource {
    inner: Arc<Inner>,
    id: u64,
}

impl HostBufferSource {
    /// A source of `layout` showing `buffer`, imported on `interop`'s device where the driver
    /// has `VK_EXT_external_memory_host` and the layout is one the GPU holds as it is;
    /// otherwise a plain host source the renderer stages (see
    /// [`HostBufferSource::staged_reason`]).
    pub fn new(
        interop: &Interop,
        layout: Layout,
        buffer: impl Into<HostBuffer>,
    ) -> Result<Self, InteropError> {
        let staged = match (interop.host_import_alignment(), import_layout(&layout)) {
            (None, _) => Some(format!(
                "the adapter {} has no VK_EXT_external_memory_host: uploads are staged",
                interop.identity().name
            )),
            (Some(_), Err(reason)) => Some(reason),
            (Some(_), Ok(())) => None,
        };
        Self::make(interop, layout, buffer.into(), staged)
    }

    /// The same source without imports: the renderer stages every buffer like any host
    /// source (for comparisons, and to rule the import out when diagnosing).
    pub fn host_only(
        interop: &Interop,
        layout: Layout,
        buffer: impl Into<HostBuffer>,
    ) -> Result<Self, InteropError> {
        let staged = Some("host import turned off (HostBufferSource::host_only)".to_string());
        Self::make(interop, layout, buffer.into(), staged)
    }

    fn make(
        interop: &Interop,
        layout: Layout,
        buffer: HostBuffer,
        staged: Option<String>,
    ) -> Result<Self, InteropError> {
        check_length(&layout, &buffer)?;
        let placeholder = State {
            buffer: HostBuffer::from(Vec::<u8>::new()),
            from: CopyFrom::Staged,
            fallback: staged.clone(),
            log: ChangeLog::new(CHANGE_LOG_CAPACITY),
        };
        let inner = Arc::new(Inner {
            layout,
            interop: interop.clone(),
            staged,
            state: RwLock::new(placeholder),
            pages: Mutex::new(None),
            stats: Stats::default(),
            in_place: std::sync::atomic::AtomicBool::new(true),
            in_place_refused: Mutex::new(None),
        });
        let id = next_id();
        let source = HostBufferSource { inner, id };
        source.replace(buffer).map_err(|e| *e.error)?;
        if source.inner.staged.is_none() {
            let weak: Weak<dyn ImportedHost> = Arc::downgrade(&source.inner) as _;
            registry().lock().insert(id, weak);
        }
        Ok(source)
    }

    /// Shows `buffer` from now on and hands back the buffer shown before, once no GPU copy
    /// recorded from it can still read it (waiting for the GPU where one may). Refuses, handing
    /// `buffer` back unchanged, a buffer whose length does not match the layout.
    pub fn replace(&self, buffer: impl Into<HostBuffer>) -> Result<HostBuffer, ReplaceError> {
        let mut buffer = buffer.into();
        let inner = &self.inner;
        if let Err(error) = check_length(&inner.layout, &buffer) {
            return Err(ReplaceError {
                error: Box::new(error),
                buffer,
            });
        }
        let (from, fallback) = match &inner.staged {
            Some(reason) => (CopyFrom::Staged, Some(reason.clone())),
            None => match buffer.ensure_import(&inner.interop, copy_alignment(&inner.layout)) {
                Ok(made) => {
                    if made {
                        inner.stats.imports_made.fetch_add(1, Ordering::Relaxed);
                    }
                    (CopyFrom::Buffer, None)
                }
                Err(reason) => (CopyFrom::OwnPages, Some(reason)),
            },
        };
        let pages = match from {
            CopyFrom::OwnPages => match self.own_pages() {
                Ok(pages) => Some(pages),
                Err(error) => {
                    return Err(ReplaceError {
                        error: Box::new(error),
                        buffer,
                    })
                }
            },
            _ => None,
        };
        inner.stats.buffers_handed.fetch_add(1, Ordering::Relaxed);
        // Swap (and, for a buffer that is not importable, write the source's pages) under the
        // write lock, once no copy from the pages is outstanding: copies are recorded under
        // the read lock, so none is recorded meanwhile.
        let (old, old_from) = loop {
            if let Some(pages) = &pages {
                pages.gpu.wait(inner.interop.device());
            }
            let mut state = inner.state.write();
            if let Some(pages) = &pages {
                if pages.gpu.outstanding() {
                    continue;
                }
                // SAFETY: the write lock keeps copies from being recorded and readers from
                // lending, and no recorded copy is outstanding, so nothing else reads or
                // writes the pages; `buffer.len()` equals the layout's bytes (checked above),
                // which the pages hold (made for the layout, see `own_pages`).
                let dst = unsafe {
                    std::slice::from_raw_parts_mut(pages.pages.ptr().as_ptr(), buffer.len())
                };
                dst.copy_from_slice(&buffer);
                inner.stats.buffers_copied.fetch_add(1, Ordering::Relaxed);
                inner
                    .stats
                    .bytes_copied
                    .fetch_add(buffer.len() as u64, Ordering::Relaxed);
            }
            let old = std::mem::replace(&mut state.buffer, buffer);
            let old_from = std::mem::replace(&mut state.from, from);
            state.fallback = fallback;
            state.log.record_all();
            break (old, old_from);
        };
        // No copy of `old` can be recorded any more (it is no longer current), and no frame
        // may draw its in-place image from now on: wait for the copies recorded and the
        // frames counted. The image is then destroyed, so that its hold on the memory goes
        // with the last of those frames, not with the renderers' next frames.
        if old_from == CopyFrom::Buffer {
            if let Some(import) = &old.import {
                let image = import.retire_image();
                if import.gpu.outstanding() {
                    inner.stats.waits.fetch_add(1, Ordering::Relaxed);
                    import.gpu.wait(inner.interop.device());
                }
                if let Some(image) = image {
                    image.destroy();
                }
            }
        }
        Ok(old)
    }

    /// The source's own imported pages, made on first use.
    fn own_pages(&self) -> Result<Arc<OwnPages>, InteropError> {
        let mut slot = self.inner.pages.lock();
        if let Some(pages) = &*slot {
            return Ok(pages.clone());
        }
        let interop = &self.inner.interop;
        let align = interop
            .host_import_alignment()
            .and_then(|a| usize::try_from(a).ok())
            .unwrap_or(4096)
            .max(64);
        let bytes = self.inner.layout.total_bytes();
        let pages = Arc::new(Pages::new(bytes, align)?);
        // SAFETY: one live allocation at the driver's alignment, its size rounded up to it; the
        // clone handed over keeps it alive until the memory is freed.
        let buffer = unsafe {
            import_host_range(
                interop,
                pages.ptr(),
                pages.len(),
                bytes as u64,
                CopyDirection::FromHost,
                pages.clone(),
            )
        }?;
        let own = Arc::new(OwnPages {
            pages,
            buffer,
            gpu: Arc::new(GpuUse::default()),
        });
        *slot = Some(own.clone());
        Ok(own)
    }

    /// Whether the buffer shown now is copied by the GPU from its own pages.
    pub fn is_imported(&self) -> bool {
        self.inner.state.read().from == CopyFrom::Buffer
    }

    /// Why the buffer shown now is not copied from its own pages (`None` when it is): staged
    /// by the renderer, or copied into the source's pages first.
    pub fn fallback_reason(&self) -> Option<String> {
        self.inner.state.read().fallback.clone()
    }

    /// Whether renderers on lavapipe may draw the buffers straight from their pages (default:
    /// yes). Turned off, they copy from the pages as GPUs do (for comparisons). Renderers ask
    /// when a buffer is handed over (or first drawn), so this takes effect from the next
    /// hand-over; an image already made for the buffer shown keeps being drawn until then.
    pub fn set_sample_in_place(&self, on: bool) {
        self.inner.in_place.store(on, Ordering::Relaxed);
    }

    /// Why the last renderer that asked could not draw the buffer shown from its pages
    /// (`None` if it could, or none asked): only renderers on lavapipe ask; the reason names
    /// the layout, alignment or driver feature that did not fit.
    pub fn in_place_refusal(&self) -> Option<String> {
        self.inner.in_place_refused.lock().clone()
    }

    /// Why the source stages every buffer (`None` where it imports them).
    pub fn staged_reason(&self) -> Option<&str> {
        self.inner.staged.as_deref()
    }

    /// What the source counted so far.
    pub fn stats(&self) -> HostBufferStats {
        let s = &self.inner.stats;
        let get = |a: &AtomicU64| a.load(Ordering::Relaxed);
        HostBufferStats {
            buffers_handed: get(&s.buffers_handed),
            imports_made: get(&s.imports_made),
            buffers_copied: get(&s.buffers_copied),
            bytes_copied: get(&s.bytes_copied),
            gpu_copies: get(&s.gpu_copies),
            gpu_bytes: get(&s.gpu_bytes),
            waits: get(&s.waits),
            in_place_images: get(&s.in_place_images),
        }
    }
}

/// Whether the GPU can copy `layout` from host pages as it is (else why it is staged): a
/// texture's samples as the texture holds them, a mesh attribute's (1-D) in whole 4-byte words.
fn import_layout(layout: &Layout) -> Result<(), String> {
    if layout.shape().ndim() == 1 {
        let sample = layout.sample_bytes();
        if !sample.is_multiple_of(COPY_WORD) {
            return Err(format!(
                "a 1-D source of {sample}-byte elements: GPU buffer copies move whole \
                 {COPY_WORD}-byte words, so uploads are staged"
            ));
        }
        return Ok(());
    }
    check_texture_layout(layout).map_err(|e| format!("{e}: uploads are staged"))
}

/// What the first sample's offset in the imported range must be a multiple of: a texel for
/// texture copies, a 4-byte word for buffer copies (mesh attributes, 1-D).
fn copy_alignment(layout: &Layout) -> usize {
    if layout.shape().ndim() == 1 {
        COPY_WORD
    } else {
        layout.sample_bytes()
    }
}

/// `wgpu::COPY_BUFFER_ALIGNMENT`, as a size.
const COPY_WORD: usize = wgpu::COPY_BUFFER_ALIGNMENT as usize;

fn check_length(layout: &Layout, buffer: &HostBuffer) -> Result<(), InteropError> {
    let expected = layout.total_bytes();
    if buffer.len() != expected {
        return Err(InteropError::BufferLength {
            got: buffer.len(),
            offset: buffer.offset(),
            expected,
            layout: format!(
                "shape {} of {} x{}",
                layout.shape(),
                layout.element(),
                layout.channels()
            ),
        });
    }
    Ok(())
}

impl Drop for HostBufferSource {
    fn drop(&mut self) {
        registry().lock().remove(&self.id);
    }
}

impl DataSource for HostBufferSource {
    fn layout(&self) -> Layout {
        self.inner.layout.clone()
    }

    fn version(&self) -> Version {
        self.inner.state.read().log.version()
    }

    fn changes_since(&self, since: Version) -> Changes {
        self.inner.state.read().log.since(since)
    }

    fn residency(&self) -> Residency {
        match self.inner.staged {
            None => Residency::HostImported(HostImportedMemory {
                device_uuid: self.inner.interop.device_uuid().0,
                id: self.id,
            }),
            Some(_) => Residency::Host,
        }
    }

    fn read(&self, request: &ReadRequest<'_>, dst: &mut [u8]) -> Result<ReadStatus, SourceError> {
        check_read(&self.inner.layout, request, dst.len())?;
        let outcome = self.lend(request, &mut |view| view.copy_packed(dst))?;
        debug_assert_eq!(outcome, LendOutcome::Lent);
        Ok(ReadStatus::Ready)
    }

    fn lend(
        &self,
        request: &ReadRequest<'_>,
        visit: &mut dyn FnMut(HostView<'_>),
    ) -> Result<LendOutcome, SourceError> {
        let layout = &self.inner.layout;
        let region = request.region;
        check_read(layout, request, layout.region_bytes(&region))?;
        let state = self.inner.state.read();
        let view = HostView::of_packed(&state.buffer, layout, region).ok_or_else(|| {
            SourceError::custom(format!(
                "HostBufferSource: {} bytes held, fewer than {region:?} of {layout:?} needs",
                state.buffer.len()
            ))
        })?;
        visit(view);
        Ok(LendOutcome::Lent)
    }

    fn label(&self) -> String {
        let layout = &self.inner.layout;
        format!(
            "HostBufferSource({} {}x{}{})",
            layout.shape(),
            layout.element(),
            layout.channels(),
            match self.inner.staged {
                None => ", imported",
                Some(_) => ", staged",
            }
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn enclosing_pages_round_within_the_buffers_pages() {
        // Alignment at the page size: always the page-rounded span.
        assert_eq!(
            enclosing_pages(0x10010, 0x3000, 4096, 4096).unwrap(),
            0x10000..0x14000
        );
        // A smaller alignment rounds less.
        assert_eq!(
            enclosing_pages(0x10010, 0x100, 256, 4096).unwrap(),
            0x10000..0x10200
        );
        // Larger than a page: only where the buffer's pages cover the rounding.
        let e = enclosing_pages(0x11010, 0x3000, 65536, 4096).unwrap_err();
        assert!(e.contains("65536") && e.contains("4096"), "{e}");
        assert_eq!(
            enclosing_pages(0x10000, 0x10000, 65536, 4096).unwrap(),
            0x10000..0x20000
        );
        assert!(enclosing_pages(0x1000, 0, 4096, 4096).is_err());
        assert!(enclosing_pages(usize::MAX - 10, 100, 4096, 4096).is_err());
        assert!(enclosing_pages(0x1000, 10, 3000, 4096).is_err());
    }
}
