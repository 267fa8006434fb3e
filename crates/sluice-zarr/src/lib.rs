//! # sluice-zarr: Zarr and OME-Zarr sources
//!
//! Opens Zarr v2 and v3 arrays and OME-Zarr 0.4 and 0.5 multiscale groups from a local
//! directory, an HTTP server or an S3-compatible object store, picked from the location's form
//! ([`Location::parse`]). Chunks compressed with blosc, zstd or gzip and v3 sharded arrays are
//! read (sharded ones with ranged requests, which the server must honour).
//!
//! A [`ZarrSource`] shows at most three spatial axes: it holds the time axis at one point and
//! interleaves up to four planar channels (or shows one). Each level has its own chunk grid, a
//! downsampling factor and an offset (from OME `scale` and `translation`). Chunks are read by
//! [`ZarrSource::read_chunk`], blocking (run it on a loader thread): a chunk never written is
//! the fill value and says so ([`ChunkFill::Empty`]); a failure is a [`ZarrError`] naming the
//! URL or key and, for remote stores, the HTTP status.
//!
//! A `ZarrSource` is a [`ChunkLoader`](sluice_core::ChunkLoader); [`open`] and
//! [`ZarrSource::lazy`] make the [`LazySource`](sluice_core::LazySource) a renderer draws,
//! whose chunks load on sluice's loader pool, never on the render thread.
//!
//! A store still being written is watched with [`ZarrSource::watch`]: chunks that loaded
//! empty are checked again every poll interval and load once they appear.
//!
//! The crate depends on sluice-core only (no GPU crate).

mod error;
mod ome;
mod remote;
mod source;
mod store;
mod watch;

pub use error::ZarrError;
pub use ome::{Axis, AxisKind};
pub use sluice_core::ChunkFill;
pub use source::{OpenOptions, Selection, ZarrLevel, ZarrSource};
pub use store::{Location, StoreOptions};
pub use watch::Watcher;

/// Opens the Zarr array or OME-Zarr multiscale group at `url_or_path` (a directory, `file://`,
/// `http(s)://` or `s3://` URL) with default options (see [`ZarrSource::open`]) as a lazy
/// [`DataSource`](sluice_core::DataSource) on the process-wide loader pool and chunk cache.
pub fn open(url_or_path: &str) -> Result<sluice_core::LazySource, ZarrError> {
    ZarrSource::open(url_or_path)?.lazy()
}
