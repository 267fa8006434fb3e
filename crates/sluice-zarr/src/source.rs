//! `ZarrSource`: a Zarr array or an OME-Zarr multiscale group, with a time point and channels
//! chosen, read chunk by chunk into callers' buffers.

use std::sync::Arc;

use sluice_core::{
    ChunkFill, ChunkGrid, ChunkKey, ChunkLoader, ElementType, Layout, LazyOptions, LazySource,
    Level, Region, Shape, SourceError,
};
use zarrs::array::{
    Array, ArrayBytes, ArrayError, ArrayShardedExt, ArrayShardedReadableExt,
    ArrayShardedReadableExtCache, CodecOptions,
};
use zarrs::group::Group;
use zarrs::storage::ReadableStorageTraits;

use crate::error::ZarrError;
use crate::ome::{self, Axis, AxisKind};
use crate::store::{Location, Store, StoreOptions};

/// How to open a Zarr location: store options and what to show of arrays with more than the
/// spatial axes.
#[derive(Clone, Debug, Default)]
pub struct OpenOptions {
    /// How remote stores are reached.
    pub store: StoreOptions,
    /// The time point shown (index on the time axis); 0 by default.
    pub time: u64,
    /// The channels shown, interleaved in this order (1 to 4). `None`: every channel where
    /// there are at most four, else channel 0 alone.
    pub channels: Option<Vec<u64>>,
}

/// Which time point and channels a source shows.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Selection {
    /// Index on the time axis (0 where there is none).
    pub time: u64,
    /// Indices on the channel axis, interleaved in this order (`[0]` where there is none).
    pub channels: Vec<u64>,
}

/// One level of a [`ZarrSource`]: where it is, its spatial shape and chunking, and how it
/// sits on level 0.
#[derive(Clone, Debug, PartialEq)]
pub struct ZarrLevel {
    /// The array's path inside the store (`/` for a plain array, e.g. `/s1` in a group).
    pub path: String,
    /// The spatial shape (at most three axes, numpy order).
    pub shape: Shape,
    /// The chunks sluice reads: the Zarr chunk's spatial part, or the inner chunk of a sharded
    /// array (read with ranged requests).
    pub chunks: ChunkGrid,
    /// Level-0 samples per sample of this level, per axis (numpy order, padded to three).
    pub downsample: [f64; 3],
    /// Where the corner of this level's sample 0 lies, in level-0 samples (level-0 sample 0
    /// spans `[0, 1)`), from OME `translation` (which places sample centres) and `scale`.
    pub offset: [f64; 3],
    /// Whether the array is sharded (its chunks are read as inner chunks of shards).
    pub sharded: bool,
}

struct LevelArray {
    array: Array<dyn ReadableStorageTraits>,
    /// The shard-index cache of a sharded array.
    shards: Option<ArrayShardedReadableExtCache>,
    /// The chunk (or inner chunk) shape over all of the array's axes.
    chunk: Vec<u64>,
    info: ZarrLevel,
}

/// What a store holds, shared by every selection of it.
struct Opened {
    store: Store,
    axes: Vec<Axis>,
    /// The array axis of time (or another non-spatial, non-channel axis held at `time`).
    time_axis: Option<usize>,
    channel_axis: Option<usize>,
    /// Array axes that are spatial, in array order (at most three).
    spatial: Vec<usize>,
    levels: Vec<LevelArray>,
    element: ElementType,
    fill: Vec<u8>,
    ome_version: Option<&'static str>,
}

/// A Zarr v2/v3 array or an OME-Zarr 0.4/0.5 multiscale group, from a directory, HTTP or S3,
/// with one time point and up to four channels selected.
///
/// Its levels have their own chunk grids. [`ZarrSource::read_chunk`] reads one chunk of a
/// level, blocking, into a caller's buffer, with planar channels interleaved and edge chunks
/// clipped to the level's shape; a chunk never written reads as the fill value and says so
/// ([`ChunkFill::Empty`]). Cloning is cheap: clones share the opened arrays.
///
/// It is a [`ChunkLoader`]: [`ZarrSource::lazy`] turns it into a [`LazySource`], a
/// [`DataSource`](sluice_core::DataSource) whose chunks load on sluice's loader pool.
#[derive(Clone)]
pub struct ZarrSource {
    opened: Arc<Opened>,
    selection: Selection,
    layout: Layout,
}

impl std::fmt::Debug for ZarrSource {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ZarrSource")
            .field("location", &self.opened.store.location)
            .field("axes", &self.opened.axes)
            .field("element", &self.opened.element)
            .field("levels", &self.levels().collect::<Vec<_>>())
            .field("selection", &self.selection)
            .finish()
    }
}

impl ZarrSource {
    /// Opens the array or OME-Zarr group at `url_or_path` (a path, `file://`, `http(s)://` or
    /// `s3://` URL) with default options: time point 0, all channels where there are at most
    /// four, else channel 0.
    pub fn open(url_or_path: &str) -> Result<ZarrSource, ZarrError> {
        ZarrSource::open_with(url_or_path, &OpenOptions::default())
    }

    /// Opens `url_or_path` with `options`. Reads the metadata (blocking); no chunk yet.
    pub fn open_with(url_or_path: &str, options: &OpenOptions) -> Result<ZarrSource, ZarrError> {
        let location = Location::parse(url_or_path)?;
        let store = Store::open(location, &options.store)?;
        let opened = Arc::new(open_hierarchy(store)?);
        let channels = match &options.channels {
            Some(c) => c.clone(),
            None => {
                let n = opened.channel_count();
                if n <= 4 {
                    (0..n).collect()
                } else {
                    vec![0]
                }
            }
        };
        with_selection(
            opened,
            Selection {
                time: options.time,
                channels,
            },
        )
    }

    /// The same arrays with another time point and channels (no metadata is read again).
    pub fn with_selection(&self, selection: Selection) -> Result<ZarrSource, ZarrError> {
        with_selection(self.opened.clone(), selection)
    }

    /// The time point and channels shown.
    pub fn selection(&self) -> &Selection {
        &self.selection
    }

    /// The array's (or group's) axes, in array order.
    pub fn axes(&self) -> &[Axis] {
        &self.opened.axes
    }

    /// The full shape of level 0 over all axes (time and channels included).
    pub fn array_shape(&self) -> &[u64] {
        self.opened.levels[0].array.shape()
    }

    /// Channels on the channel axis (1 where there is none).
    pub fn channel_count(&self) -> u64 {
        self.opened.channel_count()
    }

    /// The element type of every level.
    pub fn element(&self) -> ElementType {
        self.opened.element
    }

    /// The fill value of one element, as little-endian bytes.
    pub fn fill_value(&self) -> &[u8] {
        &self.opened.fill
    }

    /// Channels per sample as read: the selection's length.
    pub fn channels(&self) -> usize {
        self.selection.channels.len()
    }

    /// Bytes per sample as read (element size times selected channels).
    pub fn sample_bytes(&self) -> usize {
        self.opened.element.size() * self.channels()
    }

    /// The OME-Zarr version of a multiscale group (`"0.4"`, `"0.5"`), `None` for a plain array.
    pub fn ome_version(&self) -> Option<&'static str> {
        self.opened.ome_version
    }

    /// Where the store is, as given (path or URL).
    pub fn location(&self) -> String {
        self.opened.store.location.display()
    }

    /// The levels, finest first (always at least one).
    pub fn levels(&self) -> impl ExactSizeIterator<Item = &ZarrLevel> {
        self.opened.levels.iter().map(|l| &l.info)
    }

    /// Level `level`, or an error naming how many there are.
    pub fn level(&self, level: usize) -> Result<&ZarrLevel, ZarrError> {
        self.opened
            .levels
            .get(level)
            .map(|l| &l.info)
            .ok_or(ZarrError::NoSuchLevel {
                level,
                levels: self.opened.levels.len(),
            })
    }

    /// The samples of chunk `index` of `level` (clipped to the level's shape).
    pub fn chunk_region(&self, level: usize, index: [usize; 3]) -> Result<Region, ZarrError> {
        let info = self.level(level)?;
        let grid = info.chunks.grid_size(&info.shape);
        if (0..3).any(|a| index[a] >= grid[a]) {
            return Err(ZarrError::ChunkOutOfRange { level, index, grid });
        }
        Ok(info.chunks.chunk_region(index, &info.shape))
    }

    /// Reads chunk `index` (chunk coordinates in numpy order, padded to three axes) of `level`
    /// into `dst`, which must be exactly the clipped chunk's samples times
    /// [`ZarrSource::sample_bytes`] long: tightly packed, C order, the selected channels
    /// interleaved, little-endian. Blocks on I/O: call it from a loader thread.
    pub fn read_chunk(
        &self,
        level: usize,
        index: [usize; 3],
        dst: &mut [u8],
    ) -> Result<ChunkFill, ZarrError> {
        let region = self.chunk_region(level, index)?;
        let expected = checked_bytes(region.len(), self.sample_bytes()).ok_or_else(|| {
            ZarrError::TooLarge {
                url: self.location(),
                what: format!("chunk region {region}"),
            }
        })?;
        if dst.len() != expected {
            return Err(ZarrError::BufferSize {
                what: format!("chunk {index:?} of level {level} (region {region})"),
                expected,
                got: dst.len(),
            });
        }
        let o = &self.opened;
        let lv = &o.levels[level];
        let esize = o.element.size();
        let nch = self.channels();
        let mut any_stored = false;
        // Channels that share a Zarr chunk (a channel chunk size above 1) reuse its bytes.
        let mut cached: Option<(Vec<u64>, Option<Vec<u8>>)> = None;
        for (j, &channel) in self.selection.channels.iter().enumerate() {
            let (zidx, within) = self.zarr_chunk_of(lv, index, channel);
            if cached.as_ref().is_none_or(|(k, _)| *k != zidx) {
                let bytes = self.fetch(lv, &zidx)?;
                cached = Some((zidx, bytes));
            }
            let Some((_, bytes)) = &cached else {
                unreachable!("filled just above")
            };
            match bytes {
                None => fill_channel(dst, &o.fill, nch, j),
                Some(bytes) => {
                    any_stored = true;
                    self.copy_channel(lv, bytes, &within, region, dst, j, esize, nch)?;
                }
            }
        }
        Ok(if any_stored {
            ChunkFill::Filled
        } else {
            ChunkFill::Empty
        })
    }

    /// The lazy source of this selection on the process-wide loader pool and chunk cache: a
    /// `DataSource` that never blocks, loading chunks as they are requested.
    pub fn lazy(&self) -> Result<LazySource, ZarrError> {
        Ok(LazySource::new(self.clone())?)
    }

    /// The lazy source of this selection with `options` (its own pool, cache or retries).
    pub fn lazy_with(&self, options: LazyOptions) -> Result<LazySource, ZarrError> {
        Ok(LazySource::with_options(self.clone(), options)?)
    }

    /// The layout sluice sees: level 0's spatial shape, the element type, the selected
    /// channels, and every level with its chunk grid, downsampling and offset.
    pub fn sluice_layout(&self) -> &Layout {
        &self.layout
    }

    /// Reads any `region` of `level` by reading the chunks it touches (blocking). Returns
    /// `true` if any of them was stored. Blocks on I/O.
    pub fn read_region(
        &self,
        level: usize,
        region: Region,
        dst: &mut [u8],
    ) -> Result<bool, ZarrError> {
        let info = self.level(level)?.clone();
        region.check_within(&info.shape)?;
        let sb = self.sample_bytes();
        let expected = checked_bytes(region.len(), sb).ok_or_else(|| ZarrError::TooLarge {
            url: self.location(),
            what: format!("region {region}"),
        })?;
        if dst.len() != expected {
            return Err(ZarrError::BufferSize {
                what: format!("region {region} of level {level}"),
                expected,
                got: dst.len(),
            });
        }
        let (lo, hi) = info.chunks.chunks_touched(&region);
        let mut any = false;
        let mut buf = Vec::new();
        for z in lo[0]..hi[0] {
            for y in lo[1]..hi[1] {
                for x in lo[2]..hi[2] {
                    let cr = info.chunks.chunk_region([z, y, x], &info.shape);
                    buf.resize(cr.len() * sb, 0);
                    any |= self.read_chunk(level, [z, y, x], &mut buf)? == ChunkFill::Filled;
                    let Some(part) = cr.intersection(&region) else {
                        continue;
                    };
                    copy_sub(&buf, &cr, dst, &region, &part, sb);
                }
            }
        }
        Ok(any)
    }

    /// The Zarr chunk (or inner chunk) holding spatial chunk `index` of channel `channel` at
    /// the selected time point, and the position inside it of the samples wanted, per array
    /// axis (the spatial axes start at 0: sluice's chunks are the Zarr chunks' spatial part).
    fn zarr_chunk_of(
        &self,
        lv: &LevelArray,
        index: [usize; 3],
        channel: u64,
    ) -> (Vec<u64>, Vec<u64>) {
        let o = &self.opened;
        let nd = lv.chunk.len();
        let mut zidx = vec![0u64; nd];
        let mut within = vec![0u64; nd];
        let pad = 3 - o.spatial.len();
        for (k, &axis) in o.spatial.iter().enumerate() {
            zidx[axis] = index[pad + k] as u64;
        }
        if let Some(a) = o.time_axis {
            zidx[a] = self.selection.time / lv.chunk[a];
            within[a] = self.selection.time % lv.chunk[a];
        }
        if let Some(a) = o.channel_axis {
            zidx[a] = channel / lv.chunk[a];
            within[a] = channel % lv.chunk[a];
        }
        (zidx, within)
    }

    /// The decoded bytes of one Zarr chunk (inner chunk where sharded), `None` if absent.
    fn fetch(&self, lv: &LevelArray, zidx: &[u64]) -> Result<Option<Vec<u8>>, ZarrError> {
        let key_url = || {
            let key = lv.array.chunk_key(zidx);
            self.opened.store.url_of(key.as_str())
        };
        let map = |e: ArrayError| array_error(key_url(), zidx, e);
        let bytes = match &lv.shards {
            None => lv
                .array
                .retrieve_chunk_if_exists::<ArrayBytes<'static>>(zidx)
                .map_err(map)?,
            // zarrs 0.23.14's `subchunk_byte_range` overflows on the index entry of an absent
            // inner chunk, so absence is read from the decoded bytes instead: an inner chunk
            // that decodes to the fill value everywhere reads exactly as an absent one, and
            // zarr-python does not store such chunks (`write_empty_chunks` is off by default).
            Some(cache) => {
                let bytes = lv
                    .array
                    .retrieve_subchunk_opt::<ArrayBytes<'static>>(
                        cache,
                        zidx,
                        &CodecOptions::default(),
                    )
                    .map_err(map)?;
                let all_fill = match &bytes {
                    ArrayBytes::Fixed(raw) => lv.array.fill_value().equals_all(raw),
                    _ => false,
                };
                (!all_fill).then_some(bytes)
            }
        };
        bytes
            .map(|b| {
                b.into_fixed()
                    .map(|raw| native_to_le(raw.into_owned(), self.opened.element.size()))
                    .map_err(|e| ZarrError::Decode {
                        url: key_url(),
                        chunk: zidx.to_vec(),
                        reason: e.to_string(),
                    })
            })
            .transpose()
    }

    /// Copies one channel of a decoded Zarr chunk into `dst`'s channel `j`.
    #[allow(clippy::too_many_arguments)]
    fn copy_channel(
        &self,
        lv: &LevelArray,
        bytes: &[u8],
        within: &[u64],
        region: Region,
        dst: &mut [u8],
        j: usize,
        esize: usize,
        nch: usize,
    ) -> Result<(), ZarrError> {
        let o = &self.opened;
        let nd = lv.chunk.len();
        // C-order element strides of the chunk (its bytes were checked to fit in usize when
        // the array was opened, so these products do not overflow).
        let mut strides = vec![1usize; nd];
        for a in (0..nd.saturating_sub(1)).rev() {
            strides[a] = strides[a + 1] * lv.chunk[a + 1] as usize;
        }
        let total = strides[0] * lv.chunk[0] as usize;
        if bytes.len() != total * esize {
            return Err(ZarrError::Decode {
                url: self.location(),
                chunk: within.to_vec(),
                reason: format!(
                    "decoded {} bytes, the chunk shape {:?} needs {}",
                    bytes.len(),
                    lv.chunk,
                    total * esize
                ),
            });
        }
        let base: usize = (0..nd).map(|a| within[a] as usize * strides[a]).sum();
        // Strides of sluice's three (padded) spatial axes inside the chunk.
        let pad = 3 - o.spatial.len();
        let mut sstride = [0usize; 3];
        for (k, &axis) in o.spatial.iter().enumerate() {
            sstride[pad + k] = strides[axis];
        }
        let [d0, d1, d2] = region.size;
        let contiguous = nch == 1 && sstride[2] == 1;
        // Index of the next destination sample.
        let mut sample = 0usize;
        for z in 0..d0 {
            for y in 0..d1 {
                let row = base + z * sstride[0] + y * sstride[1];
                if contiguous {
                    let out = sample * esize;
                    dst[out..out + d2 * esize]
                        .copy_from_slice(&bytes[row * esize..(row + d2) * esize]);
                    sample += d2;
                } else {
                    for x in 0..d2 {
                        let from = (row + x * sstride[2]) * esize;
                        let to = (sample * nch + j) * esize;
                        dst[to..to + esize].copy_from_slice(&bytes[from..from + esize]);
                        sample += 1;
                    }
                }
            }
        }
        Ok(())
    }
}

/// Checks `selection` against the opened arrays and builds the layout it shows.
fn with_selection(opened: Arc<Opened>, selection: Selection) -> Result<ZarrSource, ZarrError> {
    let o = &opened;
    let t_len = o.time_axis.map_or(1, |a| o.levels[0].array.shape()[a]);
    if selection.time >= t_len {
        return Err(ZarrError::TimeOutOfRange {
            t: selection.time,
            len: t_len,
        });
    }
    let c_len = o.channel_count();
    let bad = |reason: &str| ZarrError::BadChannels {
        channels: selection.channels.clone(),
        len: c_len,
        reason: reason.to_string(),
    };
    if selection.channels.is_empty() || selection.channels.len() > 4 {
        return Err(bad("select 1 to 4 channels"));
    }
    if selection.channels.iter().any(|&c| c >= c_len) {
        return Err(bad("a channel is out of range"));
    }
    let base = &o.levels[0].info;
    let layout = Layout::new(base.shape, o.element, selection.channels.len())?
        .with_chunks(base.chunks)
        .with_levels(o.levels[1..].iter().map(|l| {
            Level::new(l.info.shape, l.info.downsample)
                .with_chunks(l.info.chunks)
                .with_offset(l.info.offset)
        }))?;
    Ok(ZarrSource {
        opened,
        selection,
        layout,
    })
}

impl ChunkLoader for ZarrSource {
    fn layout(&self) -> Layout {
        self.layout.clone()
    }

    fn load(
        &self,
        key: ChunkKey,
        _region: Region,
        dst: &mut [u8],
    ) -> Result<ChunkFill, SourceError> {
        Ok(self.read_chunk(key.level, key.index, dst)?)
    }

    fn fill_value(&self) -> Vec<u8> {
        self.opened.fill.repeat(self.channels())
    }

    fn label(&self) -> String {
        self.location()
    }
}

impl Opened {
    fn channel_count(&self) -> u64 {
        self.channel_axis
            .map_or(1, |a| self.levels[0].array.shape()[a])
    }
}

/// Opens what a store's root holds: an array, or an OME-Zarr multiscale group.
fn open_hierarchy(store: Store) -> Result<Opened, ZarrError> {
    if !root_is_group(&store)? {
        return open_plain_array(store);
    }
    open_multiscale_group(store)
}

/// Whether the root is a group (`zarr.json` with `node_type` group, or Zarr v2 without
/// `.zarray`), read from the metadata key alone so that stores need not list.
fn root_is_group(store: &Store) -> Result<bool, ZarrError> {
    let url = store.location.display();
    let get = |key: &str| {
        let k = zarrs::storage::StoreKey::new(key).map_err(|e| ZarrError::BadUrl {
            url: url.clone(),
            reason: e.to_string(),
        })?;
        store
            .storage
            .get(&k)
            .map_err(|e| ZarrError::from_store_message(store.url_of(key), e.to_string()))
    };
    if let Some(bytes) = get("zarr.json")? {
        let meta: serde_json::Value =
            serde_json::from_slice(&bytes).map_err(|e| ZarrError::Metadata {
                url: store.url_of("zarr.json"),
                reason: e.to_string(),
            })?;
        return Ok(meta.get("node_type").and_then(|v| v.as_str()) == Some("group"));
    }
    Ok(get(".zarray")?.is_none())
}

fn open_plain_array(store: Store) -> Result<Opened, ZarrError> {
    let url = store.location.display();
    match Array::open(store.storage.clone(), "/") {
        Ok(array) => {
            let axes = match array.dimension_names() {
                Some(names) => names
                    .iter()
                    .enumerate()
                    .map(|(i, n)| {
                        let name = n.as_deref().map_or(format!("dim_{i}"), str::to_string);
                        let kind = ome::kind_from_name(&name);
                        Axis { name, kind }
                    })
                    .collect(),
                None => (0..array.dimensionality())
                    .map(|i| Axis {
                        name: format!("dim_{i}"),
                        kind: AxisKind::Space,
                    })
                    .collect(),
            };
            let n = array.dimensionality();
            let scale = vec![1.0; n];
            let translation = vec![0.0; n];
            assemble(
                store,
                axes,
                vec![("/".to_string(), array, scale, translation)],
                None,
            )
        }
        Err(zarrs::array::ArrayCreateError::MissingMetadata) => Err(ZarrError::NotFound { url }),
        Err(zarrs::array::ArrayCreateError::StorageError(e)) => {
            Err(ZarrError::from_store_message(url, e.to_string()))
        }
        Err(e) => Err(ZarrError::Metadata {
            url,
            reason: e.to_string(),
        }),
    }
}

fn open_multiscale_group(store: Store) -> Result<Opened, ZarrError> {
    let url = store.location.display();
    let group = match Group::open(store.storage.clone(), "/") {
        Ok(g) => g,
        Err(zarrs::group::GroupCreateError::MissingMetadata) => {
            return Err(ZarrError::NotFound { url })
        }
        Err(zarrs::group::GroupCreateError::StorageError(e)) => {
            return Err(ZarrError::from_store_message(url, e.to_string()))
        }
        Err(e) => {
            return Err(ZarrError::Metadata {
                url,
                reason: e.to_string(),
            })
        }
    };
    let Some(ms) = ome::parse(&url, group.attributes())? else {
        return Err(ZarrError::NotFound { url });
    };
    if ms.datasets.is_empty() {
        return Err(ZarrError::Metadata {
            url,
            reason: "the multiscale image lists no datasets".to_string(),
        });
    }
    let mut arrays = Vec::with_capacity(ms.datasets.len());
    for d in &ms.datasets {
        let path = format!("/{}", d.path.trim_matches('/'));
        let array = Array::open(store.storage.clone(), &path).map_err(|e| match e {
            zarrs::array::ArrayCreateError::StorageError(e) => {
                ZarrError::from_store_message(store.url_of(&path), e.to_string())
            }
            other => ZarrError::Metadata {
                url: store.url_of(&path),
                reason: format!("dataset {}: {other}", d.path),
            },
        })?;
        arrays.push((path, array, d.scale.clone(), d.translation.clone()));
    }
    assemble(store, ms.axes, arrays, Some(ms.version))
}

type LevelParts = (String, Array<dyn ReadableStorageTraits>, Vec<f64>, Vec<f64>);

/// Checks the levels against the axes and each other, and works out their spatial chunking,
/// scales and offsets.
fn assemble(
    store: Store,
    axes: Vec<Axis>,
    arrays: Vec<LevelParts>,
    ome_version: Option<&'static str>,
) -> Result<Opened, ZarrError> {
    let url = store.location.display();
    let shape0 = arrays[0].1.shape().to_vec();
    let names: Vec<String> = axes.iter().map(|a| a.name.clone()).collect();
    let unsupported = |reason: String| ZarrError::UnsupportedAxes {
        url: url.clone(),
        axes: names.clone(),
        shape: shape0.clone(),
        reason,
    };
    if axes.len() != shape0.len() {
        return Err(unsupported(format!(
            "{} axes are named for an array of {} dimensions",
            axes.len(),
            shape0.len()
        )));
    }
    let find = |kinds: &[AxisKind]| -> Vec<usize> {
        (0..axes.len())
            .filter(|&i| kinds.contains(&axes[i].kind))
            .collect()
    };
    let spatial = find(&[AxisKind::Space]);
    let times = find(&[AxisKind::Time, AxisKind::Other]);
    let chans = find(&[AxisKind::Channel]);
    if spatial.is_empty() || spatial.len() > 3 {
        return Err(unsupported(format!(
            "{} spatial axes; sluice shows 1 to 3",
            spatial.len()
        )));
    }
    if times.len() > 1 || chans.len() > 1 {
        return Err(unsupported(
            "more than one time-like or channel axis; sluice shows one time point of at most one time axis and one channel axis".to_string(),
        ));
    }
    let element = element_type(&store.url_of(&arrays[0].0), &arrays[0].1)?;
    let fill = native_to_le(
        arrays[0].1.fill_value().as_ne_bytes().to_vec(),
        element.size(),
    );
    let base_scale = arrays[0].2.clone();
    let base_translation = arrays[0].3.clone();
    let mut levels: Vec<LevelArray> = Vec::with_capacity(arrays.len());
    for (i, (path, array, scale, translation)) in arrays.into_iter().enumerate() {
        let aurl = store.url_of(&path);
        if array.shape().len() != axes.len() {
            return Err(ZarrError::Metadata {
                url: aurl,
                reason: format!(
                    "level {i} has {} dimensions, the axes name {}",
                    array.shape().len(),
                    axes.len()
                ),
            });
        }
        if element_type(&aurl, &array)? != element {
            return Err(ZarrError::Metadata {
                url: aurl,
                reason: format!("level {i} is not of level 0's type {element}"),
            });
        }
        for &a in times.iter().chain(&chans) {
            if array.shape()[a] != shape0[a] {
                return Err(ZarrError::Metadata {
                    url: aurl,
                    reason: format!(
                        "level {i} has {} samples on axis {}, level 0 has {}",
                        array.shape()[a],
                        axes[a].name,
                        shape0[a]
                    ),
                });
            }
        }
        let (chunk, sharded) = regular_chunk(&aurl, &array)?;
        // A decoded chunk must fit in memory: this bounds every index computed inside one.
        chunk
            .iter()
            .try_fold(element.size(), |acc, &c| {
                acc.checked_mul(usize::try_from(c).ok()?)
            })
            .ok_or_else(|| ZarrError::TooLarge {
                url: aurl.clone(),
                what: format!("a chunk of shape {chunk:?} x {} bytes", element.size()),
            })?;
        let dims: Vec<usize> = spatial
            .iter()
            .map(|&a| usize::try_from(array.shape()[a]))
            .collect::<Result<_, _>>()
            .map_err(|_| ZarrError::TooLarge {
                url: aurl.clone(),
                what: format!("shape {:?}", array.shape()),
            })?;
        let shape = Shape::new(&dims)?;
        let cdims: Vec<usize> = spatial
            .iter()
            .map(|&a| usize::try_from(chunk[a]))
            .collect::<Result<_, _>>()
            .map_err(|_| ZarrError::TooLarge {
                url: aurl.clone(),
                what: format!("chunk shape {chunk:?}"),
            })?;
        let chunks = ChunkGrid::new(&cdims)?;
        let pad = 3 - spatial.len();
        let mut downsample = [1.0; 3];
        let mut offset = [0.0; 3];
        for (k, &a) in spatial.iter().enumerate() {
            let s0 = base_scale.get(a).copied().unwrap_or(1.0);
            let s = scale.get(a).copied().unwrap_or(1.0);
            downsample[pad + k] = s / s0;
            // OME places samples by their centres; sluice's offset is the corner of sample 0
            // in level-0 samples (level-0 sample 0 spans [0, 1)).
            let t0 = base_translation.get(a).copied().unwrap_or(0.0);
            let t = translation.get(a).copied().unwrap_or(0.0);
            offset[pad + k] = (t - t0) / s0 + 0.5 - 0.5 * downsample[pad + k];
        }
        if let Some(prev) = levels.last() {
            let p = prev.info.shape.padded();
            let c = shape.padded();
            if (0..3).any(|a| c[a] > p[a]) {
                return Err(ZarrError::LevelOrder {
                    url,
                    level: i,
                    path,
                    shape: dims.iter().map(|&d| d as u64).collect(),
                    prev: i - 1,
                    prev_shape: prev.info.shape.dims().iter().map(|&d| d as u64).collect(),
                });
            }
        }
        let shards = sharded.then(|| ArrayShardedReadableExtCache::new(&array));
        levels.push(LevelArray {
            array,
            shards,
            chunk,
            info: ZarrLevel {
                path,
                shape,
                chunks,
                downsample,
                offset,
                sharded,
            },
        });
    }
    Ok(Opened {
        store,
        axes,
        time_axis: times.first().copied(),
        channel_axis: chans.first().copied(),
        spatial,
        levels,
        element,
        fill,
        ome_version,
    })
}

/// The chunk shape sluice reads from `array` (the inner chunk where sharded), checked to be
/// one regular grid.
fn regular_chunk(
    url: &str,
    array: &Array<dyn ReadableStorageTraits>,
) -> Result<(Vec<u64>, bool), ZarrError> {
    let irregular = |reason: String| ZarrError::UnsupportedChunks {
        url: url.to_string(),
        reason,
    };
    let origin = vec![0u64; array.dimensionality()];
    let outer: Vec<u64> = array
        .chunk_shape(&origin)
        .map_err(|e| irregular(e.to_string()))?
        .iter()
        .map(|n| n.get())
        .collect();
    let expected: Vec<u64> = array
        .shape()
        .iter()
        .zip(&outer)
        .map(|(s, c)| s.div_ceil(*c))
        .collect();
    if array.chunk_grid_shape() != expected.as_slice() {
        return Err(irregular(format!(
            "chunk grid {:?} is not the regular grid of chunks {outer:?} over shape {:?}",
            array.chunk_grid_shape(),
            array.shape()
        )));
    }
    if array.is_exclusively_sharded() {
        if let Some(inner) = array.effective_subchunk_shape() {
            return Ok((inner.iter().map(|n| n.get()).collect(), true));
        }
    }
    Ok((outer, false))
}

fn element_type(
    url: &str,
    array: &Array<dyn ReadableStorageTraits>,
) -> Result<ElementType, ZarrError> {
    use zarrs::array::data_type as dt;
    let t = array.data_type();
    let table = [
        (dt::uint8(), ElementType::U8),
        (dt::int8(), ElementType::I8),
        (dt::uint16(), ElementType::U16),
        (dt::int16(), ElementType::I16),
        (dt::uint32(), ElementType::U32),
        (dt::int32(), ElementType::I32),
        (dt::float16(), ElementType::F16),
        (dt::float32(), ElementType::F32),
        (dt::float64(), ElementType::F64),
    ];
    table
        .into_iter()
        .find(|(z, _)| z == t)
        .map(|(_, e)| e)
        .ok_or_else(|| ZarrError::UnsupportedDtype {
            url: url.to_string(),
            dtype: t.to_string(),
        })
}

/// Maps a zarrs read error to the typed error it is.
fn array_error(url: String, chunk: &[u64], e: ArrayError) -> ZarrError {
    use zarrs::array::CodecError;
    match e {
        ArrayError::StorageError(s) | ArrayError::CodecError(CodecError::StorageError(s)) => {
            ZarrError::from_store_message(url, s.to_string())
        }
        other => {
            let message = other.to_string();
            if message
                .to_ascii_lowercase()
                .contains("non-partial response")
            {
                return ZarrError::RangeIgnored { url };
            }
            ZarrError::Decode {
                url,
                chunk: chunk.to_vec(),
                reason: message,
            }
        }
    }
}

/// zarrs decodes to native byte order; sources hand out little-endian.
fn native_to_le(mut bytes: Vec<u8>, esize: usize) -> Vec<u8> {
    if cfg!(target_endian = "big") && esize > 1 {
        for e in bytes.chunks_exact_mut(esize) {
            e.reverse();
        }
    }
    bytes
}

fn checked_bytes(samples: usize, sample_bytes: usize) -> Option<usize> {
    samples.checked_mul(sample_bytes)
}

/// Writes the fill value into channel `j` of every sample of `dst`.
fn fill_channel(dst: &mut [u8], fill: &[u8], nch: usize, j: usize) {
    let esize = fill.len();
    for sample in dst.chunks_exact_mut(esize * nch) {
        sample[j * esize..(j + 1) * esize].copy_from_slice(fill);
    }
}

/// Copies `part` (inside both) from `src` (packed `src_region`) to `dst` (packed `dst_region`).
fn copy_sub(
    src: &[u8],
    src_region: &Region,
    dst: &mut [u8],
    dst_region: &Region,
    part: &Region,
    sb: usize,
) {
    let s = part.relative_to(src_region);
    let d = part.relative_to(dst_region);
    let row = part.size[2] * sb;
    for z in 0..part.size[0] {
        for y in 0..part.size[1] {
            let so = (((s.origin[0] + z) * src_region.size[1] + s.origin[1] + y)
                * src_region.size[2]
                + s.origin[2])
                * sb;
            let dof = (((d.origin[0] + z) * dst_region.size[1] + d.origin[1] + y)
                * dst_region.size[2]
                + d.origin[2])
                * sb;
            dst[dof..dof + row].copy_from_slice(&src[so..so + row]);
        }
    }
}
