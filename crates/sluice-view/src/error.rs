//! The errors of the viewer and the command line: each names the path, numbers or text that
//! went wrong, so the command line can print it as one line.

use std::path::PathBuf;

use sluice_core::SourceError;
use sluice_render::RenderError;

/// What went wrong opening an input, building a view or running the window.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ViewError {
    /// The file could not be opened or read.
    #[error("{path}: {source}")]
    Io {
        /// The file.
        path: PathBuf,
        /// The operating system's error.
        source: std::io::Error,
    },
    /// The file's extension names no format sluice reads.
    #[error(
        "{path}: unknown format (sluice reads .npy, .png, .tif/.tiff, and raw files with \
         --shape and --dtype)"
    )]
    UnknownFormat {
        /// The file.
        path: PathBuf,
    },
    /// A raw file was given without its shape or element type.
    #[error(
        "{path}: a raw file needs --shape and --dtype (for example --shape 512,512 --dtype u16)"
    )]
    RawNeedsLayout {
        /// The file.
        path: PathBuf,
    },
    /// A Zarr store could not be opened or read (it names the path or URL and, for remote
    /// stores, the HTTP status).
    #[error(transparent)]
    Zarr(#[from] sluice_zarr::ZarrError),
    /// The time point or channels asked of a store are not in it.
    #[error("{input}: {reason}")]
    Selection {
        /// The path or URL given.
        input: String,
        /// What was asked and what the store has.
        reason: String,
    },
    /// A headless render gave up waiting for a lazy source's chunks.
    #[error("{input}: {missing} after {seconds} s; the PNG would be incomplete (raise --timeout for slow stores)")]
    NotResident {
        /// The path or URL given.
        input: String,
        /// What had not arrived: chunks not loaded, queued, loading.
        missing: String,
        /// How long it waited.
        seconds: u64,
    },
    /// Chunks of a lazy source failed to load (after retries): they would show the fill value.
    #[error("{input}: {count} chunk(s) failed to load, first chunk {index:?} of level {level}: {reason}")]
    ChunksFailed {
        /// The path or URL given.
        input: String,
        /// Chunks that failed.
        count: usize,
        /// The first failed chunk's level.
        level: usize,
        /// The first failed chunk's index (numpy order, padded to three axes).
        index: [usize; 3],
        /// Its error.
        reason: String,
    },
    /// An image file decoded to a pixel type sluice does not show.
    #[error("{path}: unsupported pixel type {pixel} (sluice reads 8- and 16-bit gray, gray+alpha, RGB and RGBA, and 32-bit float gray)")]
    UnsupportedPixel {
        /// The file.
        path: PathBuf,
        /// The decoder's name for the pixel type.
        pixel: String,
    },
    /// The image decoder refused the file.
    #[error("{path}: {reason}")]
    Decode {
        /// The file.
        path: PathBuf,
        /// The decoder's message.
        reason: String,
    },
    /// The pages of a multi-page TIFF differ in size or pixel type.
    #[error("{path}: page {page} is {found}, page 0 is {first}: a volume needs equal pages")]
    UnequalPages {
        /// The file.
        path: PathBuf,
        /// The first page that differs (0-based).
        page: usize,
        /// That page's size and type.
        found: String,
        /// Page 0's size and type.
        first: String,
    },
    /// A command-line value did not parse.
    #[error("{option} {value:?}: {reason}")]
    BadArgument {
        /// The option (`--clim`, `--shape`, ...).
        option: &'static str,
        /// The text given.
        value: String,
        /// Why it was refused.
        reason: String,
    },
    /// An input cannot be shown the way it was asked for.
    #[error("{name}: {reason}")]
    Unshowable {
        /// The input.
        name: String,
        /// Why.
        reason: String,
    },
    /// A data source refused (shape, size, truncated file, bad `.npy` header).
    #[error(transparent)]
    Source(#[from] SourceError),
    /// The renderer refused or the GPU failed.
    #[error(transparent)]
    Render(#[from] RenderError),
    /// The window or its surface could not be made or drawn.
    #[error("window: {0}")]
    Window(String),
    /// Writing a PNG failed.
    #[error("{path}: writing PNG: {reason}")]
    WritePng {
        /// The file.
        path: PathBuf,
        /// The encoder's or file system's message.
        reason: String,
    },
}
