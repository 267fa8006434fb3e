//! # sluice-core: the data model, with no GPU in it
//!
//! This crate says what data *is* and how to get at it; it knows nothing of GPUs. The
//! [`DataSource`] trait is the contract every source fulfils: a [`Layout`] (shape of 1 to 3
//! axes, [`ElementType`], 1 to 4 channels, [`ChunkGrid`], multiscale [`Level`]s), a [`Version`]
//! that moves on every change, the [`Changes`] since a version, a [`Residency`] (host, CUDA or
//! Vulkan memory), and the bytes, read into a caller's buffer or lent in place.
//!
//! Host sources live here: [`ArraySource`] (an ndarray array, written region by region, with a
//! [`HostCopyPolicy`]), [`MmapSource`] (`.npy` and raw files, mapped read-only), and
//! [`CropSource`] (a window onto another source). The GPU side (`sluice-render`) consumes them.
//!
//! Data bigger than memory is a [`LazySource`]: a [`ChunkLoader`] (one blocking "fill this
//! chunk of this level" function) run on a shared [`LoaderPool`] into a shared [`ChunkCache`]
//! under a byte budget, in the order consumers ask for with
//! [`DataSource::request_chunks`] ([`ChunkWant`]s of [`ChunkKey`]s by [`Tier`]). Reads never
//! wait on a loader; [`ChunkStatus`] says where each chunk stands. [`ProceduralLoader`] computes
//! chunks with a closure; [`SourceLoader`] with [`LazySource::pyramid`] reads a huge file chunk by
//! chunk and builds coarser levels lazily.
//!
//! The GPU half's paging is planned here too, with no GPU: [`PageGrid`] cuts levels into
//! GPU pages (with a border, independent of storage chunks), [`visible_pages_2d`] and
//! [`visible_pages_3d`] choose levels and list the pages a view needs, and [`AtlasAllocator`]
//! assigns atlas slots across sources under one GPU byte budget.
//!
//! Errors are [`SourceError`]s that name the shapes, regions, types and limits involved;
//! nothing that fails changes the caller's data or the source.
//!
//! `unsafe` appears once, in [`MmapSource`]'s file mapping.

mod array;
mod atlas;
mod cache;
mod changes;
mod chunk;
mod conversion;
mod crop;
mod dropper;
mod element;
mod error;
mod layout;
mod lazy;
mod loader;
mod mmap;
mod npy;
mod pages;
pub mod pieces;
mod plan;
mod pool;
mod pyramid;
mod region;
mod residency;
mod rows;
mod source;
pub mod testing;
mod visibility;

pub use array::{ArraySource, HostCopyPolicy};
pub use atlas::{
    AtlasAllocator, AtlasFrame, AtlasSourceId, FramePlan, PageEviction, PageFallback, PageUpload,
    SlotMove,
};
pub use cache::{ChunkCache, DEFAULT_CACHE_BYTES};
pub use changes::{ChangeLog, Changes, Version};
pub use chunk::{ChunkFailure, ChunkKey, ChunkProgress, ChunkStatus, ChunkWant, Tier};
pub use conversion::{read_element, BufferFormat, UploadFormat};
pub use crop::CropSource;
pub use element::{Element, ElementType};
pub use error::SourceError;
pub use layout::{ChunkGrid, Layout, Level, MAX_CHANNELS};
pub use lazy::{LazyOptions, LazySource};
pub use loader::{ChunkFill, ChunkLoader, ProceduralLoader, SourceLoader};
pub use mmap::MmapSource;
pub use npy::npy_header;
pub use pages::{PageGrid, PageKey, PageState, PagingError, DEFAULT_PAGE_2D, DEFAULT_PAGE_3D};
pub use plan::{plan_chunked, plan_exact, UploadPlan};
pub use pool::{default_threads, LoaderPool, RetryPolicy};
pub use region::{Region, Shape};
pub use residency::{CudaMemory, HostImportedMemory, Residency};
#[cfg(unix)]
pub use residency::{TimelineSemaphore, VulkanMemory};
pub use source::{
    check_read, noop_waker, ConsumerId, DataSource, HostView, LendOutcome, ReadRequest, ReadStatus,
    Readable, SharedSource,
};

pub use visibility::{
    choose_level, chunk_wants, prefetch_ring_3d, prefetch_ring_plane, visible_pages_2d,
    visible_pages_3d, visible_pages_plane, ClipMatrix, LevelPolicy, PageWant, PlaneView, View2d,
    View3d, ViewOptions2d, ViewPages,
};

/// Re-exported so users name the same `f16` type sources store.
pub use half::f16;
/// Re-exported so users build arrays with the same ndarray version sluice takes.
pub use ndarray;
