//! Opening what a user points the viewer at: `.npy`, raw files with an explicit layout, PNG and
//! TIFF (a multi-page TIFF is a volume), and Zarr / OME-Zarr stores from a directory or a URL
//! ([`crate::store`]). Each input becomes a shared [`DataSource`](sluice_core::DataSource);
//! a store's is lazy (its chunks load as they are drawn).

use std::fs::File;
use std::io::BufReader;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use sluice_core::ndarray::{Array, Array2, Array3, IxDyn};
use sluice_core::{
    ArraySource, ChunkGrid, ElementType, Layout, LazyOptions, LazySource, MmapSource, Shape,
    SharedSource, SourceLoader,
};

use crate::error::ViewError;
use crate::progress::Progress;
use crate::store::ZarrInput;

/// How to read inputs that do not describe themselves (raw files).
#[derive(Clone, Debug, Default)]
pub struct OpenOptions {
    /// The shape of a raw file, numpy order (`[rows, cols]` or `[planes, rows, cols]`).
    pub shape: Option<Vec<usize>>,
    /// The element type of a raw file.
    pub dtype: Option<ElementType>,
    /// Bytes to skip at the start of a raw file (a header).
    pub offset: u64,
    /// The time point of a Zarr store with a time axis (0 without it).
    pub time: Option<u64>,
    /// The channels of a Zarr store with a channel axis (channel 0 alone without them; three
    /// or four are shown as RGB or RGBA).
    pub channels: Option<Vec<u64>>,
    /// Whether a memory-mapped file (`.npy`, raw) is drawn through a lazy pyramid.
    pub pyramid: PyramidChoice,
}

/// Whether a memory-mapped file is drawn through a lazy multiscale pyramid
/// ([`LazySource::pyramid`] over the file's map): chunks of level 0 are read on the loader
/// pool as the view needs them and coarser levels are computed from finer ones (2 x 2 or
/// 2 x 2 x 2 means), so a file far bigger than GPU memory or RAM is shown coarse first and
/// refined where the view zooms in. Without it the whole file is uploaded (in pages when over
/// the device's texture limits).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum PyramidChoice {
    /// A pyramid for big files: over [`PYRAMID_MIN_BYTES`], or a side over
    /// [`PYRAMID_MIN_SIDE_2D`] (images) or [`PYRAMID_MIN_SIDE_3D`] (volumes).
    #[default]
    Auto,
    /// A pyramid whatever the size (levels halving down to [`PYRAMID_TOP_SIDE_2D`] or
    /// [`PYRAMID_TOP_SIDE_3D`] samples a side; none for a file already that small).
    Always,
    /// No pyramid: level 0 only.
    Never,
}

impl PyramidChoice {
    /// Parses `auto`, `always` or `never`.
    pub fn parse(text: &str) -> Result<Self, ViewError> {
        match text {
            "auto" => Ok(PyramidChoice::Auto),
            "always" => Ok(PyramidChoice::Always),
            "never" => Ok(PyramidChoice::Never),
            _ => Err(ViewError::BadArgument {
                option: "--pyramid",
                value: text.to_string(),
                reason: "expected auto, always or never".into(),
            }),
        }
    }
}

/// Files of more bytes than this get a lazy pyramid under [`PyramidChoice::Auto`] (512 MiB).
pub const PYRAMID_MIN_BYTES: usize = 512 << 20;
/// Images with a side of more samples than this get a lazy pyramid under
/// [`PyramidChoice::Auto`] (the texture limit of many devices).
pub const PYRAMID_MIN_SIDE_2D: usize = 16_384;
/// Volumes with a side of more samples than this get a lazy pyramid under
/// [`PyramidChoice::Auto`].
pub const PYRAMID_MIN_SIDE_3D: usize = 2_048;
/// A pyramid of an image halves its levels down to at most this many samples a side.
pub const PYRAMID_TOP_SIDE_2D: usize = 1_024;
/// A pyramid of a volume halves its levels down to at most this many samples a side.
pub const PYRAMID_TOP_SIDE_3D: usize = 256;
/// The chunks a pyramid's level 0 is read in: 256 x 256 samples (images), 64^3 (volumes).
const PYRAMID_CHUNK_2D: usize = 256;
const PYRAMID_CHUNK_3D: usize = 64;

/// An opened input: its name (the path as given) and its data.
#[derive(Clone)]
pub struct Input {
    /// The path or URL as the user gave it.
    pub name: String,
    /// The data.
    pub source: SharedSource,
    /// The Zarr store behind `source`, for a store (its description, its statistics, and
    /// other time points and channels).
    pub store: Option<ZarrInput>,
    /// For a file drawn through a lazy pyramid: the file's map, which reads at once (for
    /// statistics), while `source` is the lazy pyramid over it.
    pub mapped: Option<SharedSource>,
}

impl Input {
    /// An input showing `source` under `name` (no store behind it).
    pub fn new(name: impl Into<String>, source: SharedSource) -> Self {
        Input {
            name: name.into(),
            source,
            store: None,
            mapped: None,
        }
    }

    /// The number of levels of the lazy pyramid `source` is drawn through, if it is one.
    pub fn pyramid_levels(&self) -> Option<usize> {
        self.mapped
            .as_ref()
            .map(|_| self.source.layout().levels().len())
    }
}

impl std::fmt::Debug for Input {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Input")
            .field("name", &self.name)
            .field("layout", &self.source.layout())
            .finish()
    }
}

/// What kind of input a path or URL names, from its form and extension.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum InputKind {
    /// A `.npy` file.
    Npy,
    /// A PNG file.
    Png,
    /// A TIFF file (`.tif`, `.tiff`).
    Tiff,
    /// A Zarr or OME-Zarr store (a path ending in `.zarr`, or any URL).
    Zarr,
    /// Raw samples: any other file, read with `--shape` and `--dtype`.
    Raw,
}

impl InputKind {
    /// The kind `input` names.
    pub fn of(input: &str) -> InputKind {
        if input.contains("://") {
            return InputKind::Zarr;
        }
        let trimmed = input.trim_end_matches('/');
        let ext = Path::new(trimmed)
            .extension()
            .and_then(|e| e.to_str())
            .map(str::to_ascii_lowercase);
        match ext.as_deref() {
            Some("npy") => InputKind::Npy,
            Some("png") => InputKind::Png,
            Some("tif") | Some("tiff") => InputKind::Tiff,
            Some("zarr") => InputKind::Zarr,
            _ => InputKind::Raw,
        }
    }
}

/// Opens `input` (a path, or a URL of a Zarr store).
pub fn open(input: &str, options: &OpenOptions) -> Result<Input, ViewError> {
    let path = PathBuf::from(input);
    let kind = match InputKind::of(input) {
        // A directory is a store whatever its name (OME-Zarr groups are often `x.ome.zarr`,
        // but not always).
        InputKind::Raw if path.is_dir() => InputKind::Zarr,
        kind => kind,
    };
    let source: SharedSource = match kind {
        InputKind::Zarr => {
            if !input.contains("://") {
                check_exists(&path)?;
            }
            let (store, source) = ZarrInput::open(input, options.time, options.channels.clone())?;
            return Ok(Input {
                name: input.to_string(),
                source,
                store: Some(store),
                mapped: None,
            });
        }
        InputKind::Npy => {
            check_exists(&path)?;
            let map: SharedSource = Arc::new(MmapSource::open_npy(&path)?);
            return mapped(input, map, options.pyramid);
        }
        InputKind::Png => {
            check_exists(&path)?;
            Arc::new(decode_png(&path)?)
        }
        InputKind::Tiff => {
            check_exists(&path)?;
            Arc::new(decode_tiff(&path)?)
        }
        InputKind::Raw => {
            check_exists(&path)?;
            let (Some(shape), Some(dtype)) = (&options.shape, options.dtype) else {
                let file_name = path.file_name().and_then(|n| n.to_str()).unwrap_or("");
                if !file_name.contains('.') || options.shape.is_some() || options.dtype.is_some() {
                    return Err(ViewError::RawNeedsLayout { path });
                }
                return Err(ViewError::UnknownFormat { path });
            };
            let layout = Layout::new(Shape::new(shape)?, dtype, 1)?;
            let map: SharedSource = Arc::new(MmapSource::open_raw(&path, layout, options.offset)?);
            return mapped(input, map, options.pyramid);
        }
    };
    Ok(Input::new(input, source))
}

/// The input of a memory-mapped file: the map itself, or a lazy pyramid over it where
/// `choice` asks for one.
fn mapped(name: &str, map: SharedSource, choice: PyramidChoice) -> Result<Input, ViewError> {
    let layout = map.layout();
    let dims = layout.shape().dims().to_vec();
    let three_d = dims.len() == 3;
    let (min_side, top, chunk) = if three_d {
        (PYRAMID_MIN_SIDE_3D, PYRAMID_TOP_SIDE_3D, PYRAMID_CHUNK_3D)
    } else {
        (PYRAMID_MIN_SIDE_2D, PYRAMID_TOP_SIDE_2D, PYRAMID_CHUNK_2D)
    };
    let largest = dims.iter().copied().max().unwrap_or(1);
    let wanted = match choice {
        PyramidChoice::Never => false,
        PyramidChoice::Always => true,
        PyramidChoice::Auto => layout.total_bytes() > PYRAMID_MIN_BYTES || largest > min_side,
    };
    let levels = pyramid_levels(largest, top);
    if !wanted || levels < 2 {
        return Ok(Input::new(name, map));
    }
    let grid = ChunkGrid::new(&vec![chunk; dims.len()])?;
    let loader = SourceLoader::new(map.clone(), grid)?;
    let lazy = LazySource::pyramid(loader, levels, LazyOptions::shared()?)?;
    let mut input = Input::new(name, Arc::new(lazy));
    input.mapped = Some(map);
    Ok(input)
}

/// Levels (level 0 included) of a pyramid halving a side of `largest` samples until it is at
/// most `top`.
fn pyramid_levels(largest: usize, top: usize) -> usize {
    let mut levels = 1;
    let mut side = largest;
    while side > top {
        side = side.div_ceil(2);
        levels += 1;
    }
    levels
}

fn check_exists(path: &Path) -> Result<(), ViewError> {
    std::fs::metadata(path)
        .map(|_| ())
        .map_err(|source| ViewError::Io {
            path: path.to_path_buf(),
            source,
        })
}

/// Parses an element type name as numpy spells it (`u8`, `uint16`, `float32`, ...).
pub fn parse_dtype(text: &str) -> Result<ElementType, ViewError> {
    let t = match text.trim().to_ascii_lowercase().as_str() {
        "u8" | "uint8" => ElementType::U8,
        "i8" | "int8" => ElementType::I8,
        "u16" | "uint16" => ElementType::U16,
        "i16" | "int16" => ElementType::I16,
        "u32" | "uint32" => ElementType::U32,
        "i32" | "int32" => ElementType::I32,
        "f16" | "float16" => ElementType::F16,
        "f32" | "float32" => ElementType::F32,
        "f64" | "float64" => ElementType::F64,
        _ => {
            return Err(ViewError::BadArgument {
                option: "--dtype",
                value: text.to_string(),
                reason: "unsupported element type; one of u8, i8, u16, i16, u32, i32, f16, f32, \
                         f64"
                .into(),
            })
        }
    };
    Ok(t)
}

/// Parses a shape `512,512` or `64x512x512` (numpy order, 1 to 3 axes, none zero).
pub fn parse_shape(text: &str) -> Result<Vec<usize>, ViewError> {
    let bad = |reason: String| ViewError::BadArgument {
        option: "--shape",
        value: text.to_string(),
        reason,
    };
    let dims = text
        .split([',', 'x'])
        .map(|d| {
            d.trim()
                .parse::<usize>()
                .map_err(|e| bad(format!("{d:?} is not a length: {e}")))
        })
        .collect::<Result<Vec<_>, _>>()?;
    if dims.is_empty() || dims.len() > 3 || dims.contains(&0) {
        return Err(bad(format!(
            "needs 1 to 3 non-zero lengths, got {}",
            dims.len()
        )));
    }
    Ok(dims)
}

/// Parses contrast limits `lo,hi` (finite, `lo < hi`).
pub fn parse_clim(text: &str) -> Result<[f64; 2], ViewError> {
    let bad = |reason: String| ViewError::BadArgument {
        option: "--clim",
        value: text.to_string(),
        reason,
    };
    let parts: Vec<&str> = text.split(',').collect();
    let [lo, hi] = parts[..] else {
        return Err(bad("needs two numbers lo,hi".into()));
    };
    let num = |s: &str| {
        s.trim()
            .parse::<f64>()
            .ok()
            .filter(|v| v.is_finite())
            .ok_or_else(|| bad(format!("{s:?} is not a finite number")))
    };
    let (lo, hi) = (num(lo)?, num(hi)?);
    if lo >= hi {
        return Err(bad(format!("lo ({lo}) must be below hi ({hi})")));
    }
    Ok([lo, hi])
}

/// Parses an image size `WxH` (each 1 to 16384).
pub fn parse_size(text: &str) -> Result<[u32; 2], ViewError> {
    let bad = |reason: String| ViewError::BadArgument {
        option: "--size",
        value: text.to_string(),
        reason,
    };
    let Some((w, h)) = text.split_once('x') else {
        return Err(bad("needs WIDTHxHEIGHT, for example 800x600".into()));
    };
    let side = |s: &str| {
        s.trim()
            .parse::<u32>()
            .ok()
            .filter(|v| (1..=16384).contains(v))
            .ok_or_else(|| bad(format!("{s:?} is not a side of 1 to 16384 pixels")))
    };
    Ok([side(w)?, side(h)?])
}

fn decode_png(path: &Path) -> Result<ArraySource, ViewError> {
    let decode = |e: image::ImageError| ViewError::Decode {
        path: path.to_path_buf(),
        reason: e.to_string(),
    };
    let bytes = std::fs::metadata(path).map(|m| m.len()).unwrap_or(0);
    let progress = Progress::bytes(format!("decoding {}", path.display()), bytes);
    let image = image::ImageReader::open(path)
        .map_err(|source| ViewError::Io {
            path: path.to_path_buf(),
            source,
        })?
        .with_guessed_format()
        .map_err(|source| ViewError::Io {
            path: path.to_path_buf(),
            source,
        })?
        .decode()
        .map_err(decode)?;
    progress.advance(bytes);
    let (w, h) = (image.width() as usize, image.height() as usize);
    use image::DynamicImage as D;
    let source = match image {
        D::ImageLuma8(i) => ArraySource::new(grid(i.into_raw(), &[h, w])?)?,
        D::ImageLuma16(i) => ArraySource::new(grid(i.into_raw(), &[h, w])?)?,
        D::ImageLumaA8(i) => ArraySource::with_channels(grid(i.into_raw(), &[h, w, 2])?)?,
        D::ImageLumaA16(i) => ArraySource::with_channels(grid(i.into_raw(), &[h, w, 2])?)?,
        D::ImageRgb8(i) => ArraySource::with_channels(grid(i.into_raw(), &[h, w, 3])?)?,
        D::ImageRgb16(i) => ArraySource::with_channels(grid(i.into_raw(), &[h, w, 3])?)?,
        D::ImageRgba8(i) => ArraySource::with_channels(grid(i.into_raw(), &[h, w, 4])?)?,
        D::ImageRgba16(i) => ArraySource::with_channels(grid(i.into_raw(), &[h, w, 4])?)?,
        other => {
            return Err(ViewError::UnsupportedPixel {
                path: path.to_path_buf(),
                pixel: format!("{:?}", other.color()),
            })
        }
    };
    Ok(source)
}

fn grid<T>(data: Vec<T>, dims: &[usize]) -> Result<Array<T, IxDyn>, ViewError> {
    let len = data.len();
    Array::from_shape_vec(IxDyn(dims), data).map_err(|_| ViewError::Unshowable {
        name: format!("{dims:?}"),
        reason: format!("{len} decoded samples do not fill the shape"),
    })
}

/// TIFF pages decoded to one element type.
enum Pages {
    U8(Vec<u8>),
    U16(Vec<u16>),
    F32(Vec<f32>),
}

fn decode_tiff(path: &Path) -> Result<ArraySource, ViewError> {
    let tiff_err = |e: tiff::TiffError| ViewError::Decode {
        path: path.to_path_buf(),
        reason: e.to_string(),
    };
    let file = File::open(path).map_err(|source| ViewError::Io {
        path: path.to_path_buf(),
        source,
    })?;
    let bytes = file.metadata().map(|m| m.len()).unwrap_or(0);
    let mut decoder = tiff::decoder::Decoder::new(BufReader::new(file)).map_err(tiff_err)?;
    let progress = Progress::bytes(format!("decoding {}", path.display()), bytes);
    let mut pages: Option<Pages> = None;
    let mut first: Option<((u32, u32), tiff::ColorType)> = None;
    let mut count = 0usize;
    loop {
        let dims = decoder.dimensions().map_err(tiff_err)?;
        let color = decoder.colortype().map_err(tiff_err)?;
        match first {
            None => first = Some((dims, color)),
            Some(f) if f != (dims, color) => {
                return Err(ViewError::UnequalPages {
                    path: path.to_path_buf(),
                    page: count,
                    found: format!("{} x {} {:?}", dims.0, dims.1, color),
                    first: format!("{} x {} {:?}", f.0 .0, f.0 .1, f.1),
                })
            }
            Some(_) => {}
        }
        let unsupported = || ViewError::UnsupportedPixel {
            path: path.to_path_buf(),
            pixel: format!("{color:?}"),
        };
        if !matches!(color, tiff::ColorType::Gray(_)) {
            return Err(unsupported());
        }
        use tiff::decoder::DecodingResult as R;
        let page = decoder.read_image().map_err(tiff_err)?;
        let page_bytes = match (&mut pages, page) {
            (None, R::U8(v)) => {
                let n = v.len();
                pages = Some(Pages::U8(v));
                n
            }
            (None, R::U16(v)) => {
                let n = v.len() * 2;
                pages = Some(Pages::U16(v));
                n
            }
            (None, R::F32(v)) => {
                let n = v.len() * 4;
                pages = Some(Pages::F32(v));
                n
            }
            (Some(Pages::U8(all)), R::U8(v)) => {
                all.extend_from_slice(&v);
                v.len()
            }
            (Some(Pages::U16(all)), R::U16(v)) => {
                all.extend_from_slice(&v);
                v.len() * 2
            }
            (Some(Pages::F32(all)), R::F32(v)) => {
                all.extend_from_slice(&v);
                v.len() * 4
            }
            _ => return Err(unsupported()),
        };
        progress.advance(page_bytes as u64);
        count += 1;
        if !decoder.more_images() {
            break;
        }
        decoder.next_image().map_err(tiff_err)?;
    }
    let ((w, h), _) = first.ok_or_else(|| ViewError::Decode {
        path: path.to_path_buf(),
        reason: "no image in the file".into(),
    })?;
    let (w, h) = (w as usize, h as usize);
    let source = match (pages, count) {
        (Some(Pages::U8(v)), 1) => ArraySource::new(plane(v, h, w)?)?,
        (Some(Pages::U16(v)), 1) => ArraySource::new(plane(v, h, w)?)?,
        (Some(Pages::F32(v)), 1) => ArraySource::new(plane(v, h, w)?)?,
        (Some(Pages::U8(v)), n) => ArraySource::new(stack(v, n, h, w)?)?,
        (Some(Pages::U16(v)), n) => ArraySource::new(stack(v, n, h, w)?)?,
        (Some(Pages::F32(v)), n) => ArraySource::new(stack(v, n, h, w)?)?,
        (None, _) => {
            return Err(ViewError::Decode {
                path: path.to_path_buf(),
                reason: "no image in the file".into(),
            })
        }
    };
    Ok(source)
}

fn plane<T>(data: Vec<T>, h: usize, w: usize) -> Result<Array2<T>, ViewError> {
    let len = data.len();
    Array2::from_shape_vec((h, w), data).map_err(|_| ViewError::Unshowable {
        name: format!("{h} x {w} page"),
        reason: format!("{len} decoded samples do not fill it"),
    })
}

fn stack<T>(data: Vec<T>, n: usize, h: usize, w: usize) -> Result<Array3<T>, ViewError> {
    let len = data.len();
    Array3::from_shape_vec((n, h, w), data).map_err(|_| ViewError::Unshowable {
        name: format!("{n} pages of {h} x {w}"),
        reason: format!("{len} decoded samples do not fill them"),
    })
}
