//! `sluice.open_zarr`: Zarr v2/v3 arrays and OME-Zarr multiscale groups (a directory, `file://`,
//! `http(s)://` or `s3://`) through sluice-zarr, as a lazy source whose chunks load on sluice's
//! loader pool without the GIL (the reads and decoding are Rust's).

use std::sync::Arc;
use std::time::Duration;

use numpy::PyArrayDescr;
use pyo3::exceptions::{PyFileNotFoundError, PyOSError, PyTimeoutError, PyTypeError, PyValueError};
use pyo3::prelude::*;
use pyo3::types::PyDict;
use sluice_core::{
    ChunkFill, ChunkKey, ChunkLoader, DataSource, Layout, LazySource, Region, SourceError,
};
use sluice_zarr::{AxisKind, OpenOptions, StoreOptions, Watcher, ZarrError, ZarrSource};

use crate::dtype::numpy_dtype;
use crate::errors::{guard, source_error, SourceReadError};

/// The Python exception for a Zarr error, with its message (URL, key, numbers).
fn zarr_error(error: ZarrError) -> PyErr {
    let message = error.to_string();
    match error {
        ZarrError::NotFound { .. } => PyFileNotFoundError::new_err(message),
        ZarrError::Io { .. } | ZarrError::Remote { .. } | ZarrError::RangeIgnored { .. } => {
            PyOSError::new_err(message)
        }
        ZarrError::Timeout { .. } => PyTimeoutError::new_err(message),
        ZarrError::Decode { .. } => SourceReadError::new_err(message),
        ZarrError::UnsupportedDtype { .. } => PyTypeError::new_err(message),
        ZarrError::Source(e) => source_error(e),
        _ => PyValueError::new_err(message),
    }
}

/// One level of a Zarr source shown alone: its shape and chunk grid become the layout's only
/// level, and its chunks are read from that level.
struct LevelLoader {
    zarr: ZarrSource,
    level: usize,
    layout: Layout,
}

impl LevelLoader {
    fn new(zarr: ZarrSource, level: usize) -> Result<Self, ZarrError> {
        let info = zarr.level(level)?;
        let layout =
            Layout::new(info.shape, zarr.element(), zarr.channels())?.with_chunks(info.chunks);
        Ok(LevelLoader {
            zarr,
            level,
            layout,
        })
    }
}

impl ChunkLoader for LevelLoader {
    fn layout(&self) -> Layout {
        self.layout.clone()
    }

    fn load(
        &self,
        key: ChunkKey,
        _region: Region,
        dst: &mut [u8],
    ) -> Result<ChunkFill, SourceError> {
        // The layout has one level, so `key.level` is 0: this loader's level of the store.
        Ok(self.zarr.read_chunk(self.level, key.index, dst)?)
    }

    fn fill_value(&self) -> Vec<u8> {
        self.zarr.fill_value().repeat(self.zarr.channels())
    }

    fn label(&self) -> String {
        format!("{} level {}", self.zarr.location(), self.level)
    }
}

/// A Zarr array or OME-Zarr group opened by `sluice.open_zarr`: a lazy source (chunks load on
/// sluice's loader pool as a renderer asks for them) shown by `Image` or `Volume`.
#[pyclass(name = "ZarrSource", module = "sluice", frozen)]
pub struct PyZarrSource {
    pub(crate) inner: Arc<LazySource>,
    zarr: ZarrSource,
    /// The level shown alone, or `None`: every level (the layout's pyramid).
    level: Option<usize>,
    /// Polls the store for chunks written since they loaded empty (`open_zarr(watch=...)`),
    /// with its interval.
    watcher: Option<(Watcher, Duration)>,
}

#[pymethods]
impl PyZarrSource {
    /// Spatial shape shown (numpy order): level 0's, or the chosen level's.
    #[getter]
    fn shape(&self) -> Vec<usize> {
        self.inner.layout().shape().dims().to_vec()
    }

    /// The element type as a numpy dtype.
    #[getter]
    fn dtype<'py>(&self, py: Python<'py>) -> Bound<'py, PyArrayDescr> {
        numpy_dtype(py, self.inner.layout().element())
    }

    /// Channels per sample (the selected channels, interleaved).
    #[getter]
    fn channels(&self) -> usize {
        self.zarr.channels()
    }

    /// The chunk shape (spatial) of the level shown first, the unit of loading.
    #[getter]
    fn chunks(&self) -> Vec<usize> {
        let n = self.inner.layout().shape().ndim();
        self.inner.layout().chunks().chunk_size()[3 - n..].to_vec()
    }

    /// Where the store is (path or URL, as given).
    #[getter]
    fn location(&self) -> String {
        self.zarr.location()
    }

    /// `"0.4"` or `"0.5"` for an OME-Zarr group, `None` for a plain array.
    #[getter]
    fn ome_version(&self) -> Option<&'static str> {
        self.zarr.ome_version()
    }

    /// The axes in array order, as `(name, kind)` with kind `"space"`, `"time"`, `"channel"`
    /// or `"other"`.
    #[getter]
    fn axes(&self) -> Vec<(String, &'static str)> {
        self.zarr
            .axes()
            .iter()
            .map(|a| {
                let kind = match a.kind {
                    AxisKind::Space => "space",
                    AxisKind::Time => "time",
                    AxisKind::Channel => "channel",
                    AxisKind::Other => "other",
                };
                (a.name.clone(), kind)
            })
            .collect()
    }

    /// Level 0's full shape over every axis (time and channels included).
    #[getter]
    fn array_shape(&self) -> Vec<u64> {
        self.zarr.array_shape().to_vec()
    }

    /// The time point shown.
    #[getter]
    fn time(&self) -> u64 {
        self.zarr.selection().time
    }

    /// The channel indices shown, in the order they are interleaved.
    #[getter]
    fn channel_indices(&self) -> Vec<u64> {
        self.zarr.selection().channels.clone()
    }

    /// The level shown alone (`level=` of `open_zarr`), or `None` where every level is.
    #[getter]
    fn level(&self) -> Option<usize> {
        self.level
    }

    /// Every level of the store, finest first: dicts with `path`, `shape`, `chunks`,
    /// `downsample` and `offset` (level-0 samples, numpy order, padded to three axes) and
    /// `sharded`.
    #[getter]
    fn levels<'py>(&self, py: Python<'py>) -> PyResult<Vec<Bound<'py, PyDict>>> {
        self.zarr
            .levels()
            .map(|l| {
                let d = PyDict::new(py);
                let n = l.shape.ndim();
                d.set_item("path", &l.path)?;
                d.set_item("shape", l.shape.dims().to_vec())?;
                d.set_item("chunks", l.chunks.chunk_size()[3 - n..].to_vec())?;
                d.set_item("downsample", l.downsample.to_vec())?;
                d.set_item("offset", l.offset.to_vec())?;
                d.set_item("sharded", l.sharded)?;
                Ok(d)
            })
            .collect()
    }

    /// Chunk reads the loader pool has done for renderers so far.
    #[getter]
    fn loader_calls(&self) -> u64 {
        self.inner.loader_calls()
    }

    /// The poll interval in seconds when the store is watched (`open_zarr(watch=...)`), else
    /// `None`.
    #[getter]
    fn watch(&self) -> Option<f64> {
        self.watcher.as_ref().map(|(_, every)| every.as_secs_f64())
    }

    /// Chunks that loaded empty and have appeared in the store since (each then loads and is
    /// shown), when watched; 0 otherwise.
    #[getter]
    fn chunks_appeared(&self) -> u64 {
        self.watcher.as_ref().map_or(0, |(w, _)| w.appeared())
    }

    /// Polls of the watched store done so far; 0 when not watched.
    #[getter]
    fn watch_polls(&self) -> u64 {
        self.watcher.as_ref().map_or(0, |(w, _)| w.polls())
    }

    /// Reads `index` (numpy-style slices of the level's spatial axes; `None`: all of it) of
    /// `level` (default: the level shown) now, blocking, into a new numpy array (channels
    /// last where more than one is selected). Chunks never written read as the fill value.
    #[pyo3(signature = (index=None, *, level=None))]
    fn read_region<'py>(
        &self,
        py: Python<'py>,
        index: Option<&Bound<'py, PyAny>>,
        level: Option<usize>,
    ) -> PyResult<Bound<'py, PyAny>> {
        let level = level.or(self.level).unwrap_or(0);
        let info = self.zarr.level(level).map_err(zarr_error)?.clone();
        let region = match index {
            Some(key) => crate::region::key_region(key, &info.shape, 0)?,
            None => info.shape.full_region(),
        };
        let sample = self.zarr.sample_bytes();
        let len = region.len().checked_mul(sample).ok_or_else(|| {
            PyValueError::new_err(format!(
                "region {region} of {} bytes per sample overflows usize",
                sample
            ))
        })?;
        let zarr = self.zarr.clone();
        let bytes = py.detach(|| {
            guard(|| {
                let mut bytes = vec![0u8; len];
                zarr.read_region(level, region, &mut bytes)
                    .map_err(zarr_error)?;
                Ok(bytes)
            })
        })?;
        let n = info.shape.ndim();
        let mut shape: Vec<usize> = region.size[3 - n..].to_vec();
        if self.zarr.channels() > 1 {
            shape.push(self.zarr.channels());
        }
        let flat = numpy::PyArray1::<u8>::from_vec(py, bytes);
        let typed = flat.call_method1("view", (numpy_dtype(py, self.zarr.element()),))?;
        typed.call_method1("reshape", (shape,))
    }

    fn __repr__(&self) -> String {
        format!(
            "ZarrSource({:?}, shape={:?}, dtype={}, channels={:?}, time={}{})",
            self.zarr.location(),
            self.shape(),
            self.zarr.element(),
            self.zarr.selection().channels,
            self.zarr.selection().time,
            self.level
                .map(|l| format!(", level={l}"))
                .unwrap_or_default()
        )
    }
}

/// Opens the Zarr array or OME-Zarr multiscale group at `url_or_path` as a lazy source.
///
/// `time`: the time point shown; `channels`: the channel indices shown, interleaved (1 to 4;
/// default every channel where there are at most four, else channel 0); `level`: show that
/// level of a multiscale group alone (default: every level, level 0 at full size). Remote
/// stores: `s3_endpoint`, `s3_region`, `s3_credentials=(key_id, secret)`, `s3_unsigned`,
/// `allow_http`, `timeout` (seconds, per request); unset S3 settings come from the `AWS_*`
/// environment variables. `watch`: for a store still being written (a dask job writing to
/// S3), poll it every `watch` seconds on a thread of its own for chunks that loaded empty and
/// have been written since; they then load and are shown (the thread stops with the source).
#[pyfunction]
#[pyo3(signature = (
    url_or_path, *, time = 0, channels = None, level = None, s3_endpoint = None,
    s3_region = None, s3_credentials = None, s3_unsigned = false, allow_http = false,
    timeout = 30.0, watch = None
))]
#[allow(clippy::too_many_arguments)]
pub fn open_zarr(
    py: Python<'_>,
    url_or_path: std::path::PathBuf,
    time: u64,
    channels: Option<Vec<u64>>,
    level: Option<usize>,
    s3_endpoint: Option<String>,
    s3_region: Option<String>,
    s3_credentials: Option<(String, String)>,
    s3_unsigned: bool,
    allow_http: bool,
    timeout: f64,
    watch: Option<f64>,
) -> PyResult<PyZarrSource> {
    let watch = watch
        .map(|every| {
            Duration::try_from_secs_f64(every)
                .ok()
                .filter(|t| !t.is_zero())
                .ok_or_else(|| {
                    PyValueError::new_err(format!(
                        "watch {every} s: it must be a positive number of seconds, or None"
                    ))
                })
        })
        .transpose()?;
    let timeout = Duration::try_from_secs_f64(timeout)
        .ok()
        .filter(|t| !t.is_zero())
        .ok_or_else(|| {
            PyValueError::new_err(format!(
                "timeout {timeout} s: it must be a positive number of seconds"
            ))
        })?;
    let location = url_or_path.to_str().map(str::to_owned).ok_or_else(|| {
        PyValueError::new_err(format!(
            "location {} is not valid UTF-8",
            url_or_path.display()
        ))
    })?;
    let options = OpenOptions {
        store: StoreOptions {
            s3_endpoint,
            s3_region,
            s3_credentials,
            s3_unsigned,
            allow_http,
            timeout,
            ..StoreOptions::default()
        },
        time,
        channels,
    };
    py.detach(|| {
        guard(|| {
            let zarr = ZarrSource::open_with(&location, &options).map_err(zarr_error)?;
            let inner = match level {
                None => zarr.lazy().map_err(zarr_error)?,
                Some(l) => {
                    let loader = LevelLoader::new(zarr.clone(), l).map_err(zarr_error)?;
                    LazySource::new(loader).map_err(source_error)?
                }
            };
            let inner = Arc::new(inner);
            let watcher = watch.map(|every| (zarr.watch(&inner, every), every));
            Ok(PyZarrSource {
                inner,
                zarr,
                level,
                watcher,
            })
        })
    })
}
