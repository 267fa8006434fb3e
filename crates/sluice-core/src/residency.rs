//! Residency: where a source's bytes live, so the proxy can pick the upload path.
//!
//! Host data goes through a staging copy. Device-resident data (CUDA or Vulkan external
//! memory) is copied GPU-side or used directly, never through the CPU. The descriptors hold raw
//! handles as plain integers and file descriptors: this crate knows no GPU API.

#[cfg(unix)]
use std::os::fd::OwnedFd;
use std::sync::Arc;

/// Where a source's data lives.
#[derive(Clone, Debug, Default)]
#[non_exhaustive]
pub enum Residency {
    /// In host memory: read or lent by the CPU and staged for upload.
    #[default]
    Host,
    /// In CUDA device memory.
    Cuda(CudaMemory),
    /// In Vulkan memory exported as a file descriptor.
    #[cfg(unix)]
    Vulkan(VulkanMemory),
    /// In host pages the renderer's Vulkan device imported as device memory
    /// (`VK_EXT_external_memory_host`): copied by the GPU straight from those pages.
    HostImported(HostImportedMemory),
}

/// Host memory a Vulkan device imported (`VK_EXT_external_memory_host`), named by the
/// importer's id; the importer (`sluice-interop`'s `HostImportSource`) keeps the pages and the
/// imported buffer alive. Samples are packed in C order from offset 0.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct HostImportedMemory {
    /// UUID of the Vulkan device that imported the pages.
    pub device_uuid: [u8; 16],
    /// The importer's id for the imported buffer.
    pub id: u64,
}

/// A region of CUDA device memory holding a source's level-0 data.
///
/// Rows are `row_pitch` bytes apart and planes `plane_pitch` bytes apart; the first sample is at
/// `ptr`. The memory is the user's: sluice reads it on `stream` after `ready_event` and never
/// frees it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct CudaMemory {
    /// UUID of the CUDA device (`cuDeviceGetUuid`), matched against the Vulkan device's.
    pub device_uuid: [u8; 16],
    /// Device pointer (`CUdeviceptr`) of the first sample.
    pub ptr: u64,
    /// Bytes between the starts of consecutive rows.
    pub row_pitch: usize,
    /// Bytes between the starts of consecutive planes (volumes; `row_pitch * rows` when packed).
    pub plane_pitch: usize,
    /// The `CUstream` the producer writes on, as an integer (0: the legacy default stream).
    pub stream: u64,
    /// A `CUevent` recorded after the last write, as an integer; the copy waits on it.
    pub ready_event: Option<u64>,
}

/// Vulkan device memory exported as an opaque file descriptor.
#[cfg(unix)]
#[derive(Clone, Debug)]
pub struct VulkanMemory {
    /// The exported memory (`VK_EXTERNAL_MEMORY_HANDLE_TYPE_OPAQUE_FD_BIT`).
    pub fd: Arc<OwnedFd>,
    /// Size of the whole allocation in bytes (`VkMemoryAllocateInfo::allocationSize`).
    pub allocation_size: u64,
    /// The memory type the exporter allocated from (`VkMemoryAllocateInfo::memoryTypeIndex`).
    /// Vulkan requires an import of an opaque fd to name the same type as the export.
    pub memory_type_index: u32,
    /// Where the source's first sample lies in the allocation.
    pub offset: u64,
    /// Bytes between the starts of consecutive rows.
    pub row_pitch: usize,
    /// Bytes between the starts of consecutive planes.
    pub plane_pitch: usize,
    /// UUID of the exporting device (`VkPhysicalDeviceIDProperties::deviceUUID`).
    pub device_uuid: [u8; 16],
    /// A timeline semaphore the producer signals when the data is ready, where the driver
    /// has `VK_KHR_external_semaphore_fd`.
    pub semaphore: Option<TimelineSemaphore>,
}

/// A timeline semaphore exported as a file descriptor, with the values that order access.
#[cfg(unix)]
#[derive(Clone, Debug)]
pub struct TimelineSemaphore {
    /// The exported semaphore (`VK_EXTERNAL_SEMAPHORE_HANDLE_TYPE_OPAQUE_FD_BIT`).
    pub fd: Arc<OwnedFd>,
    /// The renderer waits for this value before reading.
    pub wait_value: u64,
    /// The renderer signals this value when it has finished reading; `None` when the producer
    /// learns that by other means (a release message, for example).
    pub signal_value: Option<u64>,
}
