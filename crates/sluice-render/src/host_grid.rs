//! The volume grid computed on the host, for CPU devices: while a whole one-channel volume
//! is staged, each row of texels on its way into staging also widens the (min, max) of the
//! grid cells it lies in, and the finished grid (each cell widened to its 26 neighbours, as
//! the GPU build's `dilate` pass does) is written into the grid texture instead of being
//! built by the two compute passes of `volume_grid`.
//!
//! Why: on a CPU device the GPU build is the CPU too, reading back the texture it was just
//! given (a copy out and a pass that loads storage buffers one lane at a time; about 110 ms
//! of a 512^3 update on lavapipe), while the rows pass through the CPU's caches anyway when
//! they are staged. The values equal the GPU build's bit for bit: texels compared in their
//! own type (integers as integers, f16 as f32), NaN left out, (3.4e38, -3.4e38) for a cell
//! with no value, integers converted to f32 at the end.

use half::f16;
use sluice_core::Region;

use crate::volume_grid::GRID_CELL;

/// The low and high ends of an empty cell's range, as the GPU build writes them.
const EMPTY: [f32; 2] = [3.4e38, -3.4e38];

/// A texel type compared as the GPU build compares it.
trait Texel: Copy + bytemuck::Pod {
    /// Starting values of a range's low and high ends.
    const LOW_START: Self;
    const HIGH_START: Self;
    fn lower(a: Self, b: Self) -> Self;
    fn higher(a: Self, b: Self) -> Self;
    fn value(self) -> f32;
    /// Whether it is NaN (integers never are).
    fn is_nan(self) -> bool {
        false
    }
}

macro_rules! integer_texel {
    ($($t:ty),*) => {$(
        impl Texel for $t {
            const LOW_START: Self = <$t>::MAX;
            const HIGH_START: Self = <$t>::MIN;
            fn lower(a: Self, b: Self) -> Self {
                a.min(b)
            }
            fn higher(a: Self, b: Self) -> Self {
                a.max(b)
            }
            fn value(self) -> f32 {
                self as f32
            }
        }
    )*};
}
integer_texel!(u8, i8, u16, i16, u32, i32);

impl Texel for f32 {
    const LOW_START: Self = EMPTY[0];
    const HIGH_START: Self = EMPTY[1];
    // `f32::min` and `max` return the other operand where one is NaN: NaN is left out, and
    // the accumulators (which start as numbers) never become NaN.
    fn lower(a: Self, b: Self) -> Self {
        a.min(b)
    }
    fn higher(a: Self, b: Self) -> Self {
        a.max(b)
    }
    fn value(self) -> f32 {
        self
    }
    fn is_nan(self) -> bool {
        f32::is_nan(self)
    }
}

/// The cells of one texel type: each cell's own (low, high), and per band of cell rows of
/// the current cell layer, one (low, high) per texel column of the piece being staged.
struct Cells<T> {
    low: Vec<T>,
    high: Vec<T>,
    band_low: Vec<T>,
    band_high: Vec<T>,
    /// A row of texels, where a row's bytes are not aligned for `T` (or are f16).
    row: Vec<T>,
}

impl<T: Texel> Cells<T> {
    fn new(cells: usize) -> Self {
        Cells {
            low: vec![T::LOW_START; cells],
            high: vec![T::HIGH_START; cells],
            band_low: Vec::new(),
            band_high: Vec::new(),
            row: Vec::new(),
        }
    }

    /// Widens the band of `band` (of `width` columns) by `texels`: element by element, so
    /// the compiler can use vector min / max.
    fn widen_band(&mut self, band: usize, width: usize, texels: &[T]) {
        let at = band * width;
        let low = &mut self.band_low[at..at + width];
        let high = &mut self.band_high[at..at + width];
        for ((l, h), &v) in low.iter_mut().zip(high.iter_mut()).zip(texels) {
            *l = T::lower(*l, v);
            *h = T::higher(*h, v);
        }
    }
}

/// One of the texel types the grid is computed for.
enum Typed {
    U8(Cells<u8>),
    I8(Cells<i8>),
    U16(Cells<u16>),
    I16(Cells<i16>),
    /// f16 texels, compared as f32.
    F16(Cells<f32>),
    F32(Cells<f32>),
    U32(Cells<u32>),
    I32(Cells<i32>),
}

macro_rules! each_typed {
    ($typed:expr, $cells:ident => $body:expr) => {
        match $typed {
            Typed::U8($cells) => $body,
            Typed::I8($cells) => $body,
            Typed::U16($cells) => $body,
            Typed::I16($cells) => $body,
            Typed::F16($cells) => $body,
            Typed::F32($cells) => $body,
            Typed::U32($cells) => $body,
            Typed::I32($cells) => $body,
        }
    };
}

/// The piece being staged.
struct Piece {
    region: Region,
    /// The cell layer whose bands are being widened, and the band (cell row) of the piece's
    /// first row.
    layer: usize,
    first_band: usize,
    bands: usize,
}

/// A finished grid as the marcher reads it.
pub(crate) struct GridCells {
    /// Cells per axis, `[x, y, z]`.
    pub count: [u32; 3],
    /// `[low, high, 0, 0]` per cell, x fastest: each cell's range widened to its 26
    /// neighbours'.
    pub cells: Vec<[f32; 4]>,
    /// What the cells say about the data as a whole.
    pub summary: GridSummary,
}

/// What a whole grid says about the data: enough to tell whether a march could skip any of
/// its cells (`volume_pipeline::grid_may_skip`). Known only for grids computed on the host.
#[derive(Clone, Copy, Debug, PartialEq)]
pub(crate) struct GridSummary {
    /// The lowest of the cells' widened maxima (`-3.4e38` when every cell is empty).
    pub lowest_high: f32,
    /// The highest of them: the largest value in the data, NaN left out (`-3.4e38` when
    /// every value is NaN).
    pub highest: f32,
    /// Whether some cell's widened range is empty (it and its neighbours all NaN).
    pub any_empty: bool,
}

impl GridSummary {
    /// The summary of widened cells as [`GridCells::cells`] holds them.
    pub fn of(cells: &[[f32; 4]]) -> Self {
        let mut summary = GridSummary {
            lowest_high: EMPTY[0],
            highest: EMPTY[1],
            any_empty: false,
        };
        for &[low, high, ..] in cells {
            if low > high {
                summary.any_empty = true;
                continue;
            }
            summary.lowest_high = summary.lowest_high.min(high);
            summary.highest = summary.highest.max(high);
        }
        if summary.lowest_high > summary.highest {
            summary.lowest_high = EMPTY[1];
        }
        summary
    }
}

/// The grid of one volume texture, computed from the rows staged into it.
pub(crate) struct HostGrid {
    typed: Typed,
    /// Texels per axis, `[x, y, z]`, and cells per axis.
    size: [usize; 3],
    count: [usize; 3],
    piece: Option<Piece>,
    /// Texels seen (pieces are disjoint: the grid is whole when this is every texel).
    seen: u64,
}

impl HostGrid {
    /// A grid for a texture of `format` with `size` texels (`[x, y, z]`); `None` for the
    /// formats the GPU build alone reads (several channels, normalized 8-bit signed).
    pub fn new(format: wgpu::TextureFormat, size: [u32; 3]) -> Option<Self> {
        use wgpu::TextureFormat as F;
        let size = size.map(|n| n as usize);
        let count = size.map(|n| n.div_ceil(GRID_CELL as usize).max(1));
        let cells = count[0].checked_mul(count[1])?.checked_mul(count[2])?;
        let typed = match format {
            F::R8Unorm | F::R8Uint => Typed::U8(Cells::new(cells)),
            F::R8Sint => Typed::I8(Cells::new(cells)),
            F::R16Unorm | F::R16Uint => Typed::U16(Cells::new(cells)),
            F::R16Sint => Typed::I16(Cells::new(cells)),
            F::R16Float => Typed::F16(Cells::new(cells)),
            F::R32Float => Typed::F32(Cells::new(cells)),
            F::R32Uint => Typed::U32(Cells::new(cells)),
            F::R32Sint => Typed::I32(Cells::new(cells)),
            _ => return None,
        };
        Some(HostGrid {
            typed,
            size,
            count,
            piece: None,
            seen: 0,
        })
    }

    /// Starts a piece of the texture (`[plane, row, column]` texels): its rows follow,
    /// planes in order and rows in order within a plane.
    pub fn begin_piece(&mut self, region: Region) {
        self.end_piece();
        let cell = GRID_CELL as usize;
        let first_band = region.origin[1] / cell;
        let last_band = (region.origin[1] + region.size[1]).div_ceil(cell);
        let bands = last_band - first_band;
        let width = region.size[2];
        each_typed!(&mut self.typed, cells => {
            cells.band_low.clear();
            cells.band_low.resize(bands * width, Texel::LOW_START);
            cells.band_high.clear();
            cells.band_high.resize(bands * width, Texel::HIGH_START);
        });
        self.piece = Some(Piece {
            region,
            layer: region.origin[0] / cell,
            first_band,
            bands,
        });
        self.seen += region.len() as u64;
    }

    /// Row `row` of plane `plane` of the current piece (both counted from the piece's
    /// origin), as the texture's texels.
    pub fn row(&mut self, plane: usize, row: usize, bytes: &[u8]) {
        let cell = GRID_CELL as usize;
        let Some(piece) = &self.piece else {
            return;
        };
        let layer = (piece.region.origin[0] + plane) / cell;
        if layer != piece.layer {
            self.flush_bands();
        }
        let piece = self.piece.as_mut().expect("checked above");
        piece.layer = layer;
        let band = (piece.region.origin[1] + row) / cell - piece.first_band;
        let width = piece.region.size[2];
        match &mut self.typed {
            Typed::F16(cells) => widen_from_f16(cells, band, width, bytes),
            // (`Typed::F16` is taken above.)
            typed => each_typed!(typed, cells => widen_from_bytes(cells, band, width, bytes)),
        }
    }

    /// Ends the current piece: its bands go into their cells.
    pub fn end_piece(&mut self) {
        self.flush_bands();
        self.piece = None;
    }

    /// Puts the bands of the current layer into their cells and starts them again.
    fn flush_bands(&mut self) {
        let Some(piece) = &self.piece else {
            return;
        };
        let cell = GRID_CELL as usize;
        let x0 = piece.region.origin[2];
        let width = piece.region.size[2];
        let count = self.count;
        let (layer, first_band, bands) = (piece.layer, piece.first_band, piece.bands);
        each_typed!(&mut self.typed, cells => {
            for b in 0..bands {
                let row_cells = (layer * count[1] + first_band + b) * count[0];
                let at = b * width;
                let mut x = 0;
                while x < width {
                    let cx = (x0 + x) / cell;
                    let end = ((cx + 1) * cell - x0).min(width);
                    let i = row_cells + cx;
                    for k in at + x..at + end {
                        cells.low[i] = Texel::lower(cells.low[i], cells.band_low[k]);
                        cells.high[i] = Texel::higher(cells.high[i], cells.band_high[k]);
                    }
                    x = end;
                }
            }
            cells.band_low.fill(Texel::LOW_START);
            cells.band_high.fill(Texel::HIGH_START);
        });
    }

    /// The grid as the marcher reads it; `None` unless every texel was seen.
    pub fn finish(mut self) -> Option<GridCells> {
        self.end_piece();
        let total = self.size.iter().map(|&n| n as u64).product::<u64>();
        if self.seen != total {
            return None;
        }
        let own: Vec<[f32; 2]> = each_typed!(&self.typed, cells => {
            cells.low.iter().zip(&cells.high).map(|(&l, &h)| cell_range(l, h)).collect()
        });
        let cells = dilate(own, self.count);
        Some(GridCells {
            // Each count is at most a texture side (a u32) over the cell edge.
            count: self.count.map(|n| n as u32),
            summary: GridSummary::of(&cells),
            cells,
        })
    }
}

/// The range of one-channel texels of `format` in `bytes`, in data units as the grid's cells
/// hold them (NaN left out; `EMPTY` where no texel has a value), and whether any texel is
/// NaN; `None` for the formats the grid does not read. The paged marcher skips pages by it
/// (`paged/volume.rs`).
pub(crate) fn value_range(format: wgpu::TextureFormat, bytes: &[u8]) -> Option<([f32; 2], bool)> {
    fn range<T: Texel>(bytes: &[u8]) -> ([f32; 2], bool) {
        let (mut low, mut high, mut nan) = (T::LOW_START, T::HIGH_START, false);
        let mut widen = |v: T| {
            low = T::lower(low, v);
            high = T::higher(high, v);
            nan |= v.is_nan();
        };
        match bytemuck::try_cast_slice::<u8, T>(bytes) {
            Ok(texels) => texels.iter().copied().for_each(&mut widen),
            Err(_) => bytes
                .chunks_exact(size_of::<T>())
                .map(bytemuck::pod_read_unaligned::<T>)
                .for_each(&mut widen),
        }
        (cell_range(low, high), nan)
    }
    use wgpu::TextureFormat as F;
    Some(match format {
        F::R8Unorm | F::R8Uint => range::<u8>(bytes),
        F::R8Sint => range::<i8>(bytes),
        F::R16Unorm | F::R16Uint => range::<u16>(bytes),
        F::R16Sint => range::<i16>(bytes),
        F::R16Float => {
            let (mut low, mut high, mut nan) = (EMPTY[0], EMPTY[1], false);
            for b in bytes.chunks_exact(2) {
                let v = f16::from_le_bytes([b[0], b[1]]).to_f32();
                low = low.min(v);
                high = high.max(v);
                nan |= v.is_nan();
            }
            (cell_range(low, high), nan)
        }
        F::R32Float => range::<f32>(bytes),
        F::R32Uint => range::<u32>(bytes),
        F::R32Sint => range::<i32>(bytes),
        _ => return None,
    })
}

/// A cell's own range in data units: `EMPTY` where no texel had a value (only float cells
/// can have none, all NaN).
fn cell_range<T: Texel>(low: T, high: T) -> [f32; 2] {
    let (l, h) = (low.value(), high.value());
    if l > h {
        EMPTY
    } else {
        [l, h]
    }
}

/// Widens band `band` of `cells` by the texels of a row given as bytes.
fn widen_from_bytes<T: Texel>(cells: &mut Cells<T>, band: usize, width: usize, bytes: &[u8]) {
    match bytemuck::try_cast_slice::<u8, T>(bytes) {
        Ok(texels) => cells.widen_band(band, width, &texels[..width]),
        Err(_) => {
            let mut row = std::mem::take(&mut cells.row);
            row.clear();
            row.extend(
                bytes
                    .chunks_exact(size_of::<T>())
                    .take(width)
                    .map(bytemuck::pod_read_unaligned::<T>),
            );
            cells.widen_band(band, width, &row);
            cells.row = row;
        }
    }
}

/// f16 texels are decoded before they are compared: this stands in for `widen_from_bytes`
/// where the cells are `Typed::F16`.
fn widen_from_f16(cells: &mut Cells<f32>, band: usize, width: usize, bytes: &[u8]) {
    let mut row = std::mem::take(&mut cells.row);
    row.clear();
    row.extend(
        bytes
            .chunks_exact(2)
            .take(width)
            .map(|b| f16::from_le_bytes([b[0], b[1]]).to_f32()),
    );
    cells.widen_band(band, width, &row);
    cells.row = row;
}

/// Each cell's range widened to its 26 neighbours' (clamped at the grid's edges), one axis
/// at a time: a box's minimum is the minimum along each axis in turn.
fn dilate(own: Vec<[f32; 2]>, count: [usize; 3]) -> Vec<[f32; 4]> {
    let mut from = own;
    let mut grid = from.clone();
    let strides = [1, count[0], count[0] * count[1]];
    for axis in 0..3 {
        if axis > 0 {
            std::mem::swap(&mut from, &mut grid);
        }
        let (n, stride) = (count[axis], strides[axis]);
        for (i, out) in grid.iter_mut().enumerate() {
            let c = i / stride % n;
            let mut range = from[i];
            for j in [c.checked_sub(1), (c + 1 < n).then_some(c + 1)]
                .into_iter()
                .flatten()
            {
                let r = from[i - c * stride + j * stride];
                range = [range[0].min(r[0]), range[1].max(r[1])];
            }
            *out = range;
        }
    }
    grid.into_iter().map(|[l, h]| [l, h, 0.0, 0.0]).collect()
}

#[cfg(test)]
mod tests {
    use super::{value_range, EMPTY};
    use half::f16;
    use wgpu::TextureFormat as F;

    #[test]
    fn value_ranges_are_in_data_units_and_leave_nan_out() {
        assert_eq!(
            value_range(F::R8Unorm, &[7, 200, 3]),
            Some(([3.0, 200.0], false))
        );
        assert_eq!(
            value_range(F::R8Sint, &[0xff, 5]),
            Some(([-1.0, 5.0], false))
        );
        let u16s: Vec<u8> = [65535u16, 2].iter().flat_map(|v| v.to_ne_bytes()).collect();
        assert_eq!(
            value_range(F::R16Unorm, &u16s),
            Some(([2.0, 65535.0], false))
        );
        // Unaligned bytes read alike.
        let mut shifted = vec![0u8];
        shifted.extend_from_slice(&u16s);
        assert_eq!(
            value_range(F::R16Uint, &shifted[1..]),
            Some(([2.0, 65535.0], false))
        );
        let f32s: Vec<u8> = [f32::NAN, -2.5, 9.0]
            .iter()
            .flat_map(|v| v.to_ne_bytes())
            .collect();
        assert_eq!(value_range(F::R32Float, &f32s), Some(([-2.5, 9.0], true)));
        let nans: Vec<u8> = [f32::NAN; 3].iter().flat_map(|v| v.to_ne_bytes()).collect();
        assert_eq!(value_range(F::R32Float, &nans), Some((EMPTY, true)));
        let finite: Vec<u8> = [1.0f32, 2.0].iter().flat_map(|v| v.to_ne_bytes()).collect();
        assert_eq!(value_range(F::R32Float, &finite), Some(([1.0, 2.0], false)));
        let halves: Vec<u8> = [f16::from_f32(0.5), f16::NAN, f16::from_f32(-4.0)]
            .iter()
            .flat_map(|v| v.to_le_bytes())
            .collect();
        assert_eq!(value_range(F::R16Float, &halves), Some(([-4.0, 0.5], true)));
        let i32s: Vec<u8> = [i32::MIN, 40]
            .iter()
            .flat_map(|v| v.to_ne_bytes())
            .collect();
        assert_eq!(
            value_range(F::R32Sint, &i32s),
            Some(([i32::MIN as f32, 40.0], false))
        );
        assert_eq!(value_range(F::Rgba8Unorm, &[0; 4]), None);
    }
}
