//! # sluice-interop: GPU-resident sources
//!
//! Data that already lives in GPU memory reaches sluice's renderer without passing through the
//! CPU:
//!
//! - [`Interop`] opens the renderer's Vulkan device with the extensions sharing needs
//!   (`VK_KHR_external_memory_fd`, and `VK_KHR_external_semaphore_fd` where the driver has
//!   it), knows its UUID, and makes [`Renderer`](sluice_render::Renderer)s whose upload path
//!   copies device-resident sources on the GPU.
//! - [`ExportedBuffer`]: renderer memory exported as a file descriptor, for another API or
//!   process to fill; [`Interop::import_buffer`]: memory others exported.
//! - [`VulkanSource`]: a source whose bytes are in such memory; its residency carries the fd,
//!   size, offset, pitches and (optionally) a timeline semaphore the renderer waits on.
//! - [`HostImportSource`]: host data allocated at the driver's alignment and imported as
//!   device memory (`VK_EXT_external_memory_host`), so that an upload is one GPU copy from the
//!   user's pages; a plain staged host source where the driver lacks the extension.
//!   [`HostFrame`]: the other way, a render target read back into imported pages the GPU
//!   writes itself (no CPU copy out of a mapped buffer). [`HostTarget`]: a render target whose
//!   frames are read in host memory, drawn there in place on CPU devices (no copy at all).
//! - [`ring`]: frames shared between a producer process and a display process over a Unix
//!   socket, with a ring of slots so the producer never waits for the display.
//! - `cuda` (feature `cuda`): sources in CUDA memory, copied device to device on the
//!   producer's stream, or written by CUDA kernels straight into renderer memory.
//!
//! # Contract
//!
//! Nothing here copies device data through host memory. Where sharing is impossible (a GL
//! backend, a driver without the needed extension, data on another GPU, no CUDA driver) the
//! error says which and why: [`InteropError`] names the adapter, extension, sizes or UUIDs.
//! Data is ordered by semaphores or CUDA events, never by waiting for a whole device.
//!
//! The crate is Linux-only (memory and semaphores travel as file descriptors); elsewhere it is
//! empty.
//!
//! # Unsafe code
//!
//! sluice's `unsafe` code is in this crate, in eleven modules, and in `sluice-core`'s file
//! mapping (`MmapSource`): `pipeline_cache` (pipeline caches from saved bytes),
//! `host_import` (host pages imported as device memory, `VK_EXT_external_memory_host`),
//! `host_buffer` (buffers the user hands over, imported where they lie), `host_frame` (frames
//! read back into imported pages), `host_target` (targets drawn in mapped host memory),
//! `in_place` (images sampled straight from imported host pages),
//! `vulkan::device` (device creation and queries under wgpu),
//! `vulkan::memory` (buffers and fds), `vulkan::semaphore` (shared timeline semaphores),
//! `vulkan::texture` (exported images) and `cuda::driver` (CUDA driver calls). Every other
//! module is safe code; each `unsafe` block states why it is sound.
#![cfg(target_os = "linux")]
#![deny(unsafe_code)]
#![deny(unsafe_op_in_unsafe_fn)]

mod error;
mod fd_passing;
mod handoff;
#[allow(unsafe_code)]
mod host_buffer;
#[allow(unsafe_code)]
mod host_frame;
#[allow(unsafe_code)]
mod host_import;
#[allow(unsafe_code)]
mod host_target;
#[allow(unsafe_code)]
mod in_place;
mod interop;
#[allow(unsafe_code)]
mod pipeline_cache;
pub mod ring;
mod source;
mod upload;
#[allow(unsafe_code)]
mod vulkan;

#[cfg(feature = "cuda")]
pub mod cuda;

pub use error::{DeviceUuid, InteropError};
pub use host_buffer::{
    HostBuffer, HostBufferSource, HostBufferStats, ReplaceError, MIN_IMPORT_BYTES,
};
pub use host_frame::HostFrame;
pub use host_import::HostImportSource;
pub use host_target::HostTarget;
pub use interop::Interop;
pub use pipeline_cache::{install_pipeline_cache, VulkanPipelineCaches};
pub use source::{Pitches, VulkanSource, COPY_ROW_ALIGNMENT};
pub use vulkan::device::DeviceIdentity;
pub use vulkan::memory::ExportedBuffer;
pub use vulkan::semaphore::SharedSemaphore;
pub use vulkan::texture::ExportedTexture;
