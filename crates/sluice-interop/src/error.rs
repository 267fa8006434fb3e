//! Errors of GPU interop: each names the device, extension, sizes or UUIDs involved.

use std::fmt;

use sluice_render::RenderError;

/// A 16-byte device UUID (`VkPhysicalDeviceIDProperties::deviceUUID`, `cuDeviceGetUuid`),
/// shown in the usual 8-4-4-4-12 hex form.
#[derive(Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct DeviceUuid(pub [u8; 16]);

impl fmt::Display for DeviceUuid {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (i, b) in self.0.iter().enumerate() {
            if matches!(i, 4 | 6 | 8 | 10) {
                f.write_str("-")?;
            }
            write!(f, "{b:02x}")?;
        }
        Ok(())
    }
}

impl From<InteropError> for sluice_render::DeviceUploadError {
    /// Keeps the numbers: device mismatches and memory too small become the renderer's own
    /// variants; everything else is kept whole in `Other` (downcast to [`InteropError`]).
    fn from(error: InteropError) -> Self {
        use sluice_render::DeviceUploadError as E;
        match error {
            InteropError::DeviceMismatch { expected, found } => E::DeviceMismatch {
                expected: expected.0,
                found: found.0,
            },
            InteropError::AllocationTooSmall {
                offset,
                needed,
                allocation_size,
            } => E::MemoryTooSmall {
                offset,
                needed,
                size: allocation_size,
            },
            other => E::Other(Box::new(other)),
        }
    }
}

impl fmt::Debug for DeviceUuid {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Display::fmt(self, f)
    }
}

/// Everything that can go wrong sharing memory between the renderer, other APIs and other
/// processes.
///
/// No interop failure panics or falls back silently: a copy through host memory happens only
/// where the caller asked for it.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum InteropError {
    /// The renderer side failed (no adapter, bad options, ...).
    #[error(transparent)]
    Render(#[from] RenderError),
    /// The options allow no Vulkan adapter.
    #[error("GPU interop works through Vulkan only, but the requested backends are {requested}; set SLUICE_BACKEND=vulkan (or leave it unset)")]
    VulkanNotRequested {
        /// The backends asked for.
        requested: String,
    },
    /// The chosen adapter is not a Vulkan one (GL, Metal, DX12).
    #[error("adapter {adapter} runs on the {backend} backend; sharing memory by file descriptor needs Vulkan (the GL backend cannot import or export memory)")]
    NotVulkan {
        /// The adapter's name.
        adapter: String,
        /// Its backend.
        backend: String,
    },
    /// The Vulkan driver lacks an extension a feature needs.
    #[error(
        "the Vulkan driver of {adapter} does not support {extension}, needed for {needed_for}"
    )]
    MissingExtension {
        /// The adapter's name.
        adapter: String,
        /// The extension, as Vulkan names it.
        extension: &'static str,
        /// What it is needed for.
        needed_for: &'static str,
    },
    /// Host memory could not be imported (`VK_EXT_external_memory_host`), or a host-imported
    /// source was drawn where it cannot be.
    #[error("host memory import: {reason}")]
    HostImport {
        /// What went wrong, with the numbers.
        reason: String,
    },
    /// A [`crate::HostFrame`] of no pixels or too many, or read from a target of another size
    /// or a renderer on another device.
    #[error("host frame: {reason}")]
    HostFrame {
        /// What went wrong, with the numbers.
        reason: String,
    },
    /// A buffer handed to a [`crate::HostBufferSource`] whose length does not match the
    /// source's layout.
    #[error("the buffer holds {got} bytes (after an offset of {offset}), but {layout} needs exactly {expected} bytes")]
    BufferLength {
        /// Bytes the buffer holds after its offset.
        got: usize,
        /// The buffer's offset of its first sample.
        offset: usize,
        /// Bytes the layout needs.
        expected: usize,
        /// The layout: shape, element type and channels.
        layout: String,
    },
    /// The driver refused to open the device.
    #[error("could not open a Vulkan device with interop extensions on {adapter}: {reason}")]
    OpenDevice {
        /// The adapter's name.
        adapter: String,
        /// What the driver or wgpu said.
        reason: String,
    },
    /// A Vulkan call failed.
    #[error("{call} failed: {result}")]
    Vulkan {
        /// The Vulkan function.
        call: &'static str,
        /// The `VkResult`.
        result: String,
    },
    /// The driver cannot export or import buffers of this kind as opaque fds.
    #[error("the Vulkan driver of {adapter} cannot {action} buffers as opaque file descriptors (external memory features {features})")]
    NotShareable {
        /// The adapter's name.
        adapter: String,
        /// "export" or "import".
        action: &'static str,
        /// The `VkExternalMemoryFeatureFlags` the driver reported.
        features: String,
    },
    /// No memory type fits.
    #[error("no Vulkan memory type fits {purpose}: the buffer allows types {allowed:#b}, the device has {count}")]
    NoMemoryType {
        /// What the memory is for.
        purpose: &'static str,
        /// `VkMemoryRequirements::memoryTypeBits`.
        allowed: u32,
        /// Memory types on the device.
        count: u32,
    },
    /// The driver cannot export images of this format and size as opaque fds.
    #[error("the Vulkan driver of {adapter} cannot export a {dimension} {format} image of {width}x{height}x{depth} as an opaque file descriptor: {reason}")]
    TextureNotShareable {
        /// The adapter's name.
        adapter: String,
        /// The texture format.
        format: String,
        /// "2-D" or "3-D".
        dimension: &'static str,
        /// Width in texels.
        width: u32,
        /// Height in texels.
        height: u32,
        /// Depth in texels (1 for 2-D).
        depth: u32,
        /// What the driver answered.
        reason: String,
    },
    /// The buffer was destroyed (`wgpu::Buffer::destroy`) before its memory was exported.
    #[error("the exported buffer was destroyed; its memory can no longer be exported")]
    BufferDestroyed,
    /// The texture was destroyed (`wgpu::Texture::destroy`) before its memory was exported.
    #[error("the exported texture was destroyed; its memory can no longer be exported")]
    TextureDestroyed,
    /// A buffer of zero bytes was asked for.
    #[error("a shared buffer needs at least one byte")]
    EmptyBuffer,
    /// The memory an imported descriptor names cannot hold the buffer Vulkan needs over it.
    #[error("imported memory of {allocation_size} bytes (type {memory_type_index}) cannot back a buffer of it: the driver needs {required} bytes and memory types {allowed:#b}")]
    ImportMismatch {
        /// The descriptor's allocation size.
        allocation_size: u64,
        /// The descriptor's memory type.
        memory_type_index: u32,
        /// What the driver needs for a buffer of that size.
        required: u64,
        /// Memory types the driver allows for the buffer.
        allowed: u32,
    },
    /// Rows overlap.
    #[error("row pitch of {row_pitch} bytes is less than one row of {row_bytes} bytes ({width} samples of {sample_bytes} bytes)")]
    RowPitchTooSmall {
        /// The given pitch.
        row_pitch: usize,
        /// Bytes of one packed row.
        row_bytes: usize,
        /// Samples per row.
        width: usize,
        /// Bytes per sample.
        sample_bytes: usize,
    },
    /// Planes overlap.
    #[error("plane pitch of {plane_pitch} bytes is less than one plane of {rows} rows at {row_pitch} bytes ({needed} bytes)")]
    PlanePitchTooSmall {
        /// The given plane pitch.
        plane_pitch: usize,
        /// Rows per plane.
        rows: usize,
        /// The row pitch.
        row_pitch: usize,
        /// Bytes one plane spans.
        needed: usize,
    },
    /// The memory is too small for the layout.
    #[error("the data spans {needed} bytes from offset {offset}, but the memory holds {allocation_size} bytes")]
    AllocationTooSmall {
        /// Where the data starts.
        offset: u64,
        /// Bytes the layout spans at its pitches.
        needed: u64,
        /// Size of the memory.
        allocation_size: u64,
    },
    /// A GPU copy needs an alignment the data does not have.
    #[error("{what} of {value} bytes is not a multiple of {alignment} bytes, as GPU copies of {sample_bytes}-byte samples need")]
    Misaligned {
        /// Which quantity.
        what: &'static str,
        /// Its value.
        value: u64,
        /// The alignment needed.
        alignment: u64,
        /// Bytes per sample.
        sample_bytes: usize,
    },
    /// Data on another device than the renderer's.
    #[error("the data is on the device with UUID {found}, but this renderer's Vulkan device has UUID {expected}; copy it to that device first (or open the renderer on the right adapter with SLUICE_ADAPTER)")]
    DeviceMismatch {
        /// The renderer's device.
        expected: DeviceUuid,
        /// The data's device.
        found: DeviceUuid,
    },
    /// A layout device-resident data cannot have.
    #[error("device-resident data must be stored as the GPU texture holds it: {reason}")]
    UnsupportedLayout {
        /// Why not.
        reason: String,
    },
    /// Device-resident data that cannot be copied into a mesh attribute buffer as it is.
    #[error("a device-resident mesh attribute must be a 1-D array of 4-byte-aligned elements the vertex buffer holds as they are: {reason}")]
    UnsupportedAttribute {
        /// Why not.
        reason: String,
    },
    /// A write was begun twice, or ended without being begun.
    #[error("{0}")]
    WriteHandoff(&'static str),
    /// I/O on a frame channel (a Unix socket).
    #[error("frame channel: {0}")]
    Io(std::io::Error),
    /// The other end of a frame channel has gone.
    #[error("the other end of the frame channel closed it")]
    ChannelClosed,
    /// The other end of a frame channel sent something unexpected.
    #[error("frame channel protocol: {0}")]
    Protocol(String),
    /// No CUDA driver library could be loaded.
    #[error("no CUDA driver: {0}")]
    NoCudaDriver(String),
    /// CUDA data, but CUDA interop is not available here (not built in, or not enabled on
    /// this device).
    #[error("{0}")]
    CudaUnavailable(&'static str),
    /// CUDA memory described by hand rather than by a sluice `CudaSource`, whose
    /// constructors vouch for its pointer and stream.
    #[error("CUDA memory must be shown through sluice's CudaSource (CudaSource::from_slice, or the unsafe CudaSource::from_raw, which vouch for the pointer and stream the renderer hands to the driver)")]
    UnvouchedCudaMemory,
    /// A CUDA driver call failed.
    #[error("{call} failed: {error}")]
    Cuda {
        /// The CUDA driver function.
        call: &'static str,
        /// The `CUresult`.
        error: String,
    },
    /// No CUDA device is the renderer's Vulkan device.
    #[error(
        "no CUDA device has the Vulkan device's UUID {vulkan} ({adapter}); CUDA devices: {cuda:?}"
    )]
    NoMatchingCudaDevice {
        /// The renderer's adapter.
        adapter: String,
        /// The Vulkan device's UUID.
        vulkan: DeviceUuid,
        /// Each CUDA device's ordinal and UUID.
        cuda: Vec<(usize, DeviceUuid)>,
    },
    /// A CUDA buffer too small for what is asked of it.
    #[error("CUDA memory of {len} bytes is too small: {needed} bytes are needed")]
    CudaBufferTooSmall {
        /// Bytes needed.
        needed: usize,
        /// Bytes available.
        len: usize,
    },
}

impl From<std::io::Error> for InteropError {
    fn from(e: std::io::Error) -> Self {
        use std::io::ErrorKind;
        match e.kind() {
            ErrorKind::BrokenPipe | ErrorKind::ConnectionReset | ErrorKind::UnexpectedEof => {
                InteropError::ChannelClosed
            }
            _ => InteropError::Io(e),
        }
    }
}

impl InteropError {
    pub(crate) fn vulkan(call: &'static str, result: impl fmt::Debug) -> Self {
        InteropError::Vulkan {
            call,
            result: format!("{result:?}"),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn uuids_print_in_the_usual_form() {
        let uuid = DeviceUuid([
            0x01, 0x23, 0x45, 0x67, 0x89, 0xab, 0xcd, 0xef, 0, 1, 2, 3, 4, 5, 6, 7,
        ]);
        assert_eq!(uuid.to_string(), "01234567-89ab-cdef-0001-020304050607");
    }
}
