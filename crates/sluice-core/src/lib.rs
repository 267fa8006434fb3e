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
//! Errors are [`SourceError`]s that name the shapes, regions, types and limits involved;
//! nothing that fails changes the caller's data or the source.
//!
//! `unsafe` appears once, in [`MmapSource`]'s file mapping.

mod array;
mod changes;
mod conversion;
mod crop;
mod element;
mod error;
mod layout;
mod mmap;
mod npy;
pub mod pieces;
mod plan;
mod region;
mod residency;
mod rows;
mod source;

pub use array::{ArraySource, HostCopyPolicy};
pub use changes::{ChangeLog, Changes, Version};
pub use conversion::{read_element, BufferFormat, UploadFormat};
pub use crop::CropSource;
pub use element::{Element, ElementType};
pub use error::SourceError;
pub use layout::{ChunkGrid, Layout, Level, MAX_CHANNELS};
pub use mmap::MmapSource;
pub use npy::npy_header;
pub use plan::{plan_chunked, plan_exact, UploadPlan};
pub use region::{Region, Shape};
pub use residency::{CudaMemory, Residency};
#[cfg(unix)]
pub use residency::{TimelineSemaphore, VulkanMemory};
pub use source::{
    check_read, noop_waker, ConsumerId, DataSource, HostView, LendOutcome, ReadRequest, ReadStatus,
    Readable, SharedSource,
};

/// Re-exported so users name the same `f16` type sources store.
pub use half::f16;
/// Re-exported so users build arrays with the same ndarray version sluice takes.
pub use ndarray;
