//! Errors of sources: each names the numbers that went wrong.

use std::path::PathBuf;

use crate::chunk::ChunkKey;
use crate::element::ElementType;
use crate::region::{Region, Shape};

/// Everything that can go wrong describing, reading or writing a source.
///
/// Messages carry the shapes, regions, types and limits involved, so that a user can see what
/// to fix without a debugger. Nothing that fails modifies the caller's data or the source.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum SourceError {
    /// A shape with no axis, or more than three.
    #[error("shape {shape:?} has {} axes; sluice sources have 1 to 3 spatial axes (plus an optional channel axis)", shape.len())]
    UnsupportedDimensions {
        /// The offending shape.
        shape: Vec<usize>,
    },
    /// A shape with an axis of length zero.
    #[error("shape {shape:?} is empty: every axis needs at least one sample")]
    EmptyShape {
        /// The offending shape.
        shape: Vec<usize>,
    },
    /// A channel count outside 1 to 4.
    #[error(
        "{channels} channels per sample is not supported: use 1 (scalar), 2, 3 (RGB) or 4 (RGBA)"
    )]
    UnsupportedChannels {
        /// The offending channel count.
        channels: usize,
    },
    /// An element type sluice cannot show (64-bit integers, complex, strings, ...).
    #[error("element type {dtype} is not supported; supported: u8, i8, u16, i16, u32, i32, f16, f32, f64")]
    UnsupportedDtype {
        /// The type as the input named it (a numpy descr like `<u8` or `<c8`).
        dtype: String,
    },
    /// A region that does not lie inside the source.
    #[error("region {region} is out of bounds of shape {shape}")]
    OutOfBounds {
        /// The requested region (padded to 3 axes, numpy order).
        region: Region,
        /// The source's shape.
        shape: Shape,
    },
    /// Data of another element type than the source's.
    #[error("element type mismatch: the source holds {expected}, the data is {got}")]
    DtypeMismatch {
        /// The source's element type.
        expected: ElementType,
        /// The element type given.
        got: ElementType,
    },
    /// Data whose shape does not fit what was asked (for example the channel axis of a write).
    #[error("shape mismatch: expected {expected:?}, got {got:?}")]
    ShapeMismatch {
        /// What the operation needed.
        expected: Vec<usize>,
        /// What it was given.
        got: Vec<usize>,
    },
    /// A caller's buffer of the wrong size.
    #[error("buffer of {got} bytes given where region {region} needs exactly {expected}")]
    BufferSize {
        /// The region read or written.
        region: Region,
        /// Bytes the region needs.
        expected: usize,
        /// Bytes given.
        got: usize,
    },
    /// A multiscale level that the source does not have.
    #[error("level {level} requested; the source has {levels} level(s)")]
    NoSuchLevel {
        /// The requested level.
        level: usize,
        /// How many levels there are.
        levels: usize,
    },
    /// The host copy was released (host-copy policy `Release`) and the region is not among
    /// the writes made since.
    #[error("region {region} is no longer in host memory: this source released its host copy after upload; only regions written since can be read")]
    HostReleased {
        /// The region asked for.
        region: Region,
    },
    /// A `.npy` file sluice cannot map.
    #[error("{path}: {reason}")]
    Npy {
        /// The file.
        path: PathBuf,
        /// What is wrong with it.
        reason: String,
    },
    /// A raw or `.npy` file shorter than its layout says.
    #[error("{path}: file has {file_bytes} bytes, but data of {needed_bytes} bytes is declared at offset {offset}")]
    Truncated {
        /// The file.
        path: PathBuf,
        /// Size of the file.
        file_bytes: u64,
        /// Bytes the layout needs after the offset.
        needed_bytes: u64,
        /// Where the data starts.
        offset: u64,
    },
    /// A file could not be opened or mapped.
    #[error("{path}: {source}")]
    Io {
        /// The file.
        path: PathBuf,
        /// The I/O error.
        source: std::io::Error,
    },
    /// A multiscale level that is finer than the one before it, or malformed.
    #[error("level {level}: {reason}")]
    InvalidLevel {
        /// The offending level's index.
        level: usize,
        /// What is wrong, naming its shape and the previous level's.
        reason: String,
    },
    /// A chunk index outside a level's chunk grid.
    #[error("chunk {key} does not exist: level {} has a grid of {grid:?} chunks", key.level)]
    NoSuchChunk {
        /// The requested chunk.
        key: ChunkKey,
        /// Chunks per axis of that level (numpy order, padded).
        grid: [usize; 3],
    },
    /// A remote store answered with an error (or not at all).
    #[error("{url_or_key}: {reason}{}", status.map(|s| format!(" (status {s})")).unwrap_or_default())]
    Remote {
        /// The URL or store key that failed.
        url_or_key: String,
        /// The protocol status (HTTP status code), if there was an answer.
        status: Option<u16>,
        /// What went wrong.
        reason: String,
    },
    /// A read that did not finish in time.
    #[error("{url_or_key}: no answer within {after:?}")]
    Timeout {
        /// The URL, store key or chunk that timed out.
        url_or_key: String,
        /// How long the reader waited.
        after: std::time::Duration,
    },
    /// Bytes that could not be decoded (a corrupt or unsupported compressed chunk).
    #[error("{url_or_key}: cannot decode: {reason}")]
    Decode {
        /// The URL or store key of the bytes.
        url_or_key: String,
        /// What the decoder said.
        reason: String,
    },
    /// A chunk loader panicked; the pool caught it and carried on.
    #[error("the loader of {label} panicked loading chunk {key}: {message}")]
    LoaderPanicked {
        /// The source's label.
        label: String,
        /// The chunk it was loading.
        key: ChunkKey,
        /// The panic's message.
        message: String,
    },
    /// A chunk larger than the whole host chunk cache budget.
    #[error("chunk {key} of {label} needs {bytes} bytes, more than the host chunk cache budget of {budget} bytes")]
    ChunkOverBudget {
        /// The source's label.
        label: String,
        /// The chunk.
        key: ChunkKey,
        /// Its decoded bytes.
        bytes: usize,
        /// The cache's byte budget.
        budget: usize,
    },
    /// An error of a user-defined source.
    #[error("{0}")]
    Custom(Box<dyn std::error::Error + Send + Sync>),
}

impl SourceError {
    /// Whether trying the same read again may succeed: remote failures (no answer, or a status
    /// of 408, 429 or 5xx), timeouts and I/O errors. Decode errors, panics and errors of the
    /// request itself are final.
    pub fn is_transient(&self) -> bool {
        match self {
            SourceError::Remote { status, .. } => {
                status.is_none_or(|s| s == 408 || s == 429 || s >= 500)
            }
            SourceError::Timeout { .. } | SourceError::Io { .. } => true,
            _ => false,
        }
    }

    /// Wraps an error of a user-defined source.
    pub fn custom(error: impl Into<Box<dyn std::error::Error + Send + Sync>>) -> Self {
        SourceError::Custom(error.into())
    }
}
