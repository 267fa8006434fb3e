//! Chunk loaders: the one blocking function a lazy source needs, and two ready-made ones.

use crate::chunk::ChunkKey;
use crate::error::SourceError;
use crate::layout::Layout;
use crate::region::Region;
use crate::source::{check_read, noop_waker, ReadRequest, ReadStatus, SharedSource};

/// What a [`ChunkLoader`] put in the buffer.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[must_use]
pub enum ChunkFill {
    /// The buffer holds the chunk.
    Filled,
    /// The chunk is absent on purpose (never written to the store): the buffer's content is
    /// ignored and reads give [`ChunkLoader::fill_value`]. Costs no cache memory.
    Empty,
}

/// Loads chunks of a lazy source: implement this to show any chunked data (a store, a file
/// format, a computation) through a [`LazySource`](crate::LazySource).
///
/// [`ChunkLoader::load`] is called on a loader pool thread, never on a render thread, and may
/// block as long as it needs (disk, network, decompression, computation). It is called for
/// one chunk at a time, possibly for several chunks of the same loader at once from different
/// threads. A panic inside it is caught: the chunk's status becomes
/// [`SourceError::LoaderPanicked`] and nothing else is affected.
///
/// Errors for which [`SourceError::is_transient`] is true ([`SourceError::Remote`] without a
/// status or with 408, 429, 5xx; [`SourceError::Timeout`]; [`SourceError::Io`]) are retried
/// with backoff; others are final at once.
pub trait ChunkLoader: Send + Sync + 'static {
    /// The data's layout: shape, element type, channels and levels, each level with its own
    /// chunk grid (the unit of `load`). Called once, when the lazy source is made.
    fn layout(&self) -> Layout;

    /// Fills `dst` with chunk `key`, whose samples are `region` of level `key.level` (already
    /// clipped to the level's shape), tightly packed (C order, channels interleaved,
    /// little-endian). `dst` is exactly `region.len() * layout.sample_bytes()` bytes long.
    ///
    /// Returns [`ChunkFill::Empty`] for a chunk absent on purpose.
    fn load(&self, key: ChunkKey, region: Region, dst: &mut [u8])
        -> Result<ChunkFill, SourceError>;

    /// The bytes of one sample (element size times channels, little-endian) that empty and
    /// failed chunks read as. Zeros unless the loader says otherwise (a Zarr `fill_value`).
    fn fill_value(&self) -> Vec<u8> {
        vec![0; self.layout().sample_bytes()]
    }

    /// A short human-readable name for errors and logs.
    fn label(&self) -> String {
        std::any::type_name::<Self>()
            .rsplit("::")
            .next()
            .unwrap_or("loader")
            .to_string()
    }
}

type ChunkFn = dyn Fn(ChunkKey, Region, &mut [u8]) -> Result<ChunkFill, SourceError> + Send + Sync;

/// A loader whose chunks a closure computes: `f(key, region, dst)` fills `dst` with `region` of
/// level `key.level` (a Mandelbrot set, a test pattern, a simulation's field).
pub struct ProceduralLoader {
    layout: Layout,
    label: String,
    f: Box<ChunkFn>,
}

impl ProceduralLoader {
    /// A loader of `layout` (whose levels say which levels and grids exist) computing chunks
    /// with `f`.
    pub fn new(
        layout: Layout,
        f: impl Fn(ChunkKey, Region, &mut [u8]) -> Result<ChunkFill, SourceError>
            + Send
            + Sync
            + 'static,
    ) -> Self {
        ProceduralLoader {
            layout,
            label: "procedural".into(),
            f: Box::new(f),
        }
    }

    /// The same loader named `label` in errors.
    pub fn with_label(mut self, label: impl Into<String>) -> Self {
        self.label = label.into();
        self
    }
}

impl ChunkLoader for ProceduralLoader {
    fn layout(&self) -> Layout {
        self.layout.clone()
    }

    fn load(
        &self,
        key: ChunkKey,
        region: Region,
        dst: &mut [u8],
    ) -> Result<ChunkFill, SourceError> {
        (self.f)(key, region, dst)
    }

    fn label(&self) -> String {
        self.label.clone()
    }
}

/// Level 0 of any source that serves reads at once (an [`MmapSource`](crate::MmapSource) of a
/// huge file, an [`ArraySource`](crate::ArraySource)), read chunk by chunk on the loader pool
/// in chunks of `grid`. Combine it with [`LazySource::pyramid`](crate::LazySource::pyramid) to
/// get coarser levels computed lazily.
pub struct SourceLoader {
    source: SharedSource,
    layout: Layout,
}

impl SourceLoader {
    /// Reads level 0 of `source` in chunks of `grid`; the source's own levels are ignored.
    pub fn new(source: SharedSource, grid: crate::ChunkGrid) -> Result<Self, SourceError> {
        let layout = source.layout().with_chunks(grid).with_levels([])?;
        Ok(SourceLoader { source, layout })
    }
}

impl ChunkLoader for SourceLoader {
    fn layout(&self) -> Layout {
        self.layout.clone()
    }

    fn load(
        &self,
        key: ChunkKey,
        region: Region,
        dst: &mut [u8],
    ) -> Result<ChunkFill, SourceError> {
        let request = ReadRequest {
            level: key.level,
            region,
            waker: noop_waker(),
        };
        check_read(&self.layout, &request, dst.len())?;
        match self.source.read(&request, dst)? {
            ReadStatus::Ready => Ok(ChunkFill::Filled),
            ReadStatus::Pending => Err(SourceError::custom(format!(
                "{}: the wrapped source answered pending for {key}; SourceLoader needs a source that reads at once",
                self.source.label()
            ))),
        }
    }

    fn label(&self) -> String {
        self.source.label()
    }
}
