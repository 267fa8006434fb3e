//! Errors of the renderer: each names the numbers that went wrong.

use sluice_core::SourceError;

/// Everything that can go wrong choosing a GPU, uploading a source or drawing a frame.
///
/// Each variant carries the sizes, limits and names involved. A failed frame leaves sources
/// and the caller's data untouched; the renderer stays usable.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum RenderError {
    /// No adapter matched the request.
    #[error("no GPU adapter found for backends {backends} (adapter filter: {filter:?}); adapters seen: {seen:?}. On Linux without a GPU install Mesa's lavapipe: apt-get install mesa-vulkan-drivers")]
    NoAdapter {
        /// The backends searched.
        backends: String,
        /// The `SLUICE_ADAPTER` (or option) name filter, if any.
        filter: Option<String>,
        /// Adapters that exist but did not match, as "name (backend)".
        seen: Vec<String>,
    },
    /// An environment variable or option names something unknown.
    #[error("invalid renderer option {name}={value:?}: {expected}")]
    InvalidOption {
        /// The option or variable.
        name: &'static str,
        /// Its value.
        value: String,
        /// What is accepted.
        expected: &'static str,
    },
    /// The adapter refused to open a device.
    #[error("could not open a device on adapter {adapter}: {reason}")]
    RequestDevice {
        /// The adapter's name.
        adapter: String,
        /// What wgpu said.
        reason: String,
    },
    /// A source larger than the device's texture limit on some axis.
    #[error("{source_label} has shape {shape:?}, over this device's {kind} texture limit of {limit} samples per axis (tiling large data comes with lazy sources)")]
    TextureTooLarge {
        /// The source.
        source_label: String,
        /// Its shape in numpy order.
        shape: Vec<usize>,
        /// "2-D" or "3-D".
        kind: &'static str,
        /// The device limit.
        limit: u32,
    },
    /// A volume that would need more bricks than a visual can bind.
    #[error("{source_label} has shape {shape:?}: under this device's 3-D texture limit of {limit} samples per axis it needs {grid:?} = {needed} bricks, more than the {max} a volume may have (show a downsampled or cropped source)")]
    TooManyBricks {
        /// The source.
        source_label: String,
        /// Its shape in numpy order.
        shape: Vec<usize>,
        /// The 3-D texture limit in use.
        limit: u32,
        /// Bricks needed per axis, numpy order.
        grid: [usize; 3],
        /// Their product.
        needed: usize,
        /// The most bricks a volume may have.
        max: usize,
    },
    /// A source a visual cannot show (wrong number of axes, residency not supported, ...).
    #[error("{visual} cannot show {source_label}: {reason}")]
    UnsupportedSource {
        /// The visual kind.
        visual: &'static str,
        /// The source.
        source_label: String,
        /// Why.
        reason: String,
    },
    /// The device upload path refused a device-resident source or failed to copy it.
    #[error("{visual} cannot show {source_label}: {error}")]
    DeviceUpload {
        /// Where it was refused (`TextureProxy`, `Mesh`).
        visual: &'static str,
        /// The source.
        source_label: String,
        /// Why, with the UUIDs, sizes and formats involved.
        #[source]
        error: crate::DeviceUploadError,
    },
    /// A source failed to give its data.
    #[error("reading {source_label}: {error}")]
    Source {
        /// The source.
        source_label: String,
        /// What the source said.
        #[source]
        error: SourceError,
    },
    /// A visual parameter out of its domain.
    #[error("invalid {parameter} {value} on {visual}: {expected}")]
    InvalidParameter {
        /// The visual kind.
        visual: &'static str,
        /// The parameter.
        parameter: &'static str,
        /// Its value.
        value: String,
        /// What is accepted.
        expected: &'static str,
    },
    /// Mesh data that cannot be drawn (indices out of range, lengths that disagree, ...).
    #[error("mesh data {source_label}: {reason}")]
    InvalidMeshData {
        /// The source (or "mesh" for the mesh as a whole).
        source_label: String,
        /// What is wrong, with the numbers.
        reason: String,
    },
    /// A slice that does not fit the source.
    #[error("invalid slice on Image of {source_label}: {reason}")]
    InvalidSlice {
        /// The source.
        source_label: String,
        /// What is wrong, with the numbers.
        reason: String,
    },
    /// A colormap with no entries, or more than a texture row can hold.
    #[error("colormap {name:?} has {entries} entries; 1 to {limit} are supported")]
    ColormapSize {
        /// The colormap's name.
        name: String,
        /// Its number of entries.
        entries: usize,
        /// The most allowed.
        limit: usize,
    },
    /// A render target of zero size or over the texture limit.
    #[error(
        "render target of {width}x{height} pixels is not possible: each side must be 1 to {limit}"
    )]
    TargetSize {
        /// Requested width.
        width: u32,
        /// Requested height.
        height: u32,
        /// The device's 2-D texture limit.
        limit: u32,
    },
    /// A texture handed to [`crate::Renderer::target_on_texture`] that cannot be a target's
    /// colour texture.
    #[error(
        "a texture of {width}x{height} pixels cannot be a render target's colour texture: {reason}"
    )]
    TargetTexture {
        /// The texture's width.
        width: u32,
        /// The texture's height.
        height: u32,
        /// What differs from a target's colour texture.
        reason: String,
    },
    /// A buffer to read a target into that does not hold the target's pixels exactly.
    #[error("reading back a {width}x{height} target needs {needed} bytes (RGBA8, rows of {} bytes, no padding); the buffer has {got}", *width as u64 * 4)]
    ReadbackSize {
        /// The target's width.
        width: u32,
        /// The target's height.
        height: u32,
        /// Bytes the target's pixels take.
        needed: u64,
        /// Bytes the buffer has.
        got: usize,
    },
    /// wgpu reported an error the renderer did not prevent (a bug in sluice: please report).
    #[error("GPU error: {0}")]
    Gpu(String),
}
