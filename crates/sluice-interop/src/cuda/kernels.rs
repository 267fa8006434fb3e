//! Kernels sluice ships for examples, tests and benchmarks: patterns whose values are
//! documented functions here, so a pixel check computes what the GPU wrote on the CPU.
//!
//! They are PTX text (generated from `kernels.ll`), JIT-compiled by the driver for whatever
//! GPU runs them: no CUDA toolkit or NVRTC is needed. Each launch writes only inside memory checked to hold the whole layout at
//! its pitches.

use std::ffi::CStr;

use cudarc::driver::{CudaSlice, CudaStream, DevicePtrMut};
use sluice_core::{ElementType, Layout};

use super::driver::{check_slice_len, Arg, StreamHandle};
use super::{CudaInterop, CudaWrite};
use crate::error::InteropError;
use crate::source::Pitches;

/// The RGBA8 colour [`fill_rgba8`] writes at sample (x, y, z) of frame `frame`.
pub fn rgba8_pattern(x: u32, y: u32, z: u32, frame: u32) -> [u8; 4] {
    [
        (x.wrapping_add(frame) & 255) as u8,
        (y.wrapping_add(frame.wrapping_mul(2)) & 255) as u8,
        ((x ^ y ^ z) & 255) as u8,
        255,
    ]
}

/// The value [`fill_f32`] writes at sample (x, y, z) of frame `frame`: a multiple of 1/256
/// in [0, 1), exact in `f32`.
pub fn f32_pattern(x: u32, y: u32, z: u32, frame: u32) -> f32 {
    let v = x
        .wrapping_add(y.wrapping_mul(2))
        .wrapping_add(z.wrapping_mul(3))
        .wrapping_add(frame)
        & 255;
    v as f32 / 256.0
}

/// The mesh of triangles [`fill_mesh_positions`] writes: `side` cells a row, each `cell`
/// world units square. Both must be nonzero.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct MeshGrid {
    /// Cells per row.
    pub side: u32,
    /// Cell size in world units.
    pub cell: u32,
}

/// The position [`fill_mesh_positions`] writes for vertex `i` of frame `frame`: triangle
/// `t = i / 3` lies in cell `(t % side, t / side)`, shifted right by `frame % cell`; corner
/// `i % 3` is the cell's origin (0), one cell right (1) or one cell down (2); z is
/// `1 + (t & 7)`. Exact in `f32` while coordinates stay below 2^24.
pub fn mesh_position_pattern(i: u32, grid: MeshGrid, frame: u32) -> [f32; 3] {
    let (t, c) = (i / 3, i % 3);
    let (col, row) = (t % grid.side, t / grid.side);
    let x = col * grid.cell + frame % grid.cell + if c == 1 { grid.cell } else { 0 };
    let y = row * grid.cell + if c == 2 { grid.cell } else { 0 };
    [x as f32, y as f32, (1 + (t & 7)) as f32]
}

/// Fills a renderer-owned buffer being written (a 1-D layout of f32x3 positions) with
/// [`mesh_position_pattern`] for `frame`, on the write's stream.
pub fn fill_mesh_positions(
    write: &CudaWrite<'_>,
    grid: MeshGrid,
    frame: u32,
) -> Result<(), InteropError> {
    let count = check_positions(write.layout(), grid)?;
    // The write's buffer holds the whole layout, its elements back to back (1-D).
    launch_positions(
        write.cuda(),
        write.stream_handle(),
        write.ptr(),
        count,
        grid,
        frame,
    )
}

/// Fills `slice`, holding `layout` (1-D f32x3 positions, back to back), with
/// [`mesh_position_pattern`] for `frame`, on `stream`.
pub fn fill_mesh_positions_slice(
    cuda: &CudaInterop,
    stream: &CudaStream,
    slice: &mut CudaSlice<u8>,
    layout: &Layout,
    grid: MeshGrid,
    frame: u32,
) -> Result<(), InteropError> {
    let count = check_positions(layout, grid)?;
    let needed = layout.total_bytes();
    check_slice_len(slice, needed)?;
    // The guard orders the launch after earlier work on the slice and records it as a write.
    let (ptr, _guard) = slice.device_ptr_mut(stream);
    launch_positions(
        cuda,
        StreamHandle(stream.cu_stream()),
        ptr,
        count,
        grid,
        frame,
    )
}

/// The vertex count of a 1-D f32x3 layout the position kernel can fill.
fn check_positions(layout: &Layout, grid: MeshGrid) -> Result<u32, InteropError> {
    let shape = layout.shape();
    let count = u32::try_from(shape.len())
        .ok()
        .filter(|c| *c < u32::MAX / 2);
    match count {
        Some(count)
            if shape.ndim() == 1
                && layout.element() == ElementType::F32
                && layout.channels() == 3
                && grid.side > 0
                && grid.cell > 0 =>
        {
            Ok(count)
        }
        _ => Err(InteropError::UnsupportedAttribute {
            reason: format!(
                "the position kernel writes a 1-D array of f32x3 (under 2^31 vertices) on a grid of nonzero side and cell; got shape {shape}, {} channel(s) of {}, {grid:?}",
                layout.channels(),
                layout.element()
            ),
        }),
    }
}

/// Launches the position kernel over `count` vertices at `ptr`: the caller checked that
/// `count * 12` bytes from `ptr` are writable.
fn launch_positions(
    cuda: &CudaInterop,
    stream: StreamHandle,
    ptr: u64,
    count: u32,
    grid: MeshGrid,
    frame: u32,
) -> Result<(), InteropError> {
    const BLOCK: u32 = 256;
    cuda.device().kernels()?.launch(
        c"sluice_mesh_positions",
        stream,
        [count.div_ceil(BLOCK).max(1), 1, 1],
        [BLOCK, 1, 1],
        &[
            Arg::U64(ptr),
            Arg::U32(count),
            Arg::U32(grid.side),
            Arg::U32(grid.cell),
            Arg::U32(frame),
        ],
    )
}

/// Fills a renderer-owned buffer being written (RGBA8 layout) with [`rgba8_pattern`] for
/// `frame`, on the write's stream.
pub fn fill_rgba8(write: &CudaWrite<'_>, frame: u32) -> Result<(), InteropError> {
    launch_into_write(write, Kernel::Rgba8, frame)
}

/// Fills a renderer-owned buffer being written (single-channel f32 layout) with
/// [`f32_pattern`] for `frame`, on the write's stream.
pub fn fill_f32(write: &CudaWrite<'_>, frame: u32) -> Result<(), InteropError> {
    launch_into_write(write, Kernel::F32, frame)
}

/// Fills `slice`, holding `layout` (RGBA8) at `pitches`, with [`rgba8_pattern`] for `frame`,
/// on `stream`.
pub fn fill_rgba8_slice(
    cuda: &CudaInterop,
    stream: &CudaStream,
    slice: &mut CudaSlice<u8>,
    layout: &Layout,
    pitches: Pitches,
    frame: u32,
) -> Result<(), InteropError> {
    launch_into_slice(cuda, stream, slice, layout, pitches, Kernel::Rgba8, frame)
}

/// Fills `slice`, holding `layout` (single-channel f32) at `pitches`, with [`f32_pattern`]
/// for `frame`, on `stream`.
pub fn fill_f32_slice(
    cuda: &CudaInterop,
    stream: &CudaStream,
    slice: &mut CudaSlice<u8>,
    layout: &Layout,
    pitches: Pitches,
    frame: u32,
) -> Result<(), InteropError> {
    launch_into_slice(cuda, stream, slice, layout, pitches, Kernel::F32, frame)
}

#[derive(Clone, Copy)]
enum Kernel {
    Rgba8,
    F32,
}

impl Kernel {
    fn name(self) -> &'static CStr {
        match self {
            Kernel::Rgba8 => c"sluice_fill_rgba8",
            Kernel::F32 => c"sluice_fill_f32",
        }
    }

    fn check(self, layout: &Layout) -> Result<(), InteropError> {
        let (element, channels) = match self {
            Kernel::Rgba8 => (ElementType::U8, 4),
            Kernel::F32 => (ElementType::F32, 1),
        };
        if layout.element() != element || layout.channels() != channels {
            return Err(InteropError::UnsupportedLayout {
                reason: format!(
                    "this pattern kernel writes {channels} channel(s) of {element}, the layout has {} of {}",
                    layout.channels(),
                    layout.element()
                ),
            });
        }
        Ok(())
    }
}

fn launch_into_write(
    write: &CudaWrite<'_>,
    kernel: Kernel,
    frame: u32,
) -> Result<(), InteropError> {
    let layout = write.layout();
    kernel.check(layout)?;
    // The write's buffer holds the whole layout at its pitches (checked when it was made).
    launch(
        write.cuda(),
        write.stream_handle(),
        write.ptr(),
        layout,
        write.pitches(),
        kernel,
        frame,
    )
}

fn launch_into_slice(
    cuda: &CudaInterop,
    stream: &CudaStream,
    slice: &mut CudaSlice<u8>,
    layout: &Layout,
    pitches: Pitches,
    kernel: Kernel,
    frame: u32,
) -> Result<(), InteropError> {
    kernel.check(layout)?;
    pitches.check(layout)?;
    let needed = pitches.span(layout) as usize;
    check_slice_len(slice, needed)?;
    // The guard orders the launch after earlier work on the slice and records it as a write.
    let (ptr, _guard) = slice.device_ptr_mut(stream);
    launch(
        cuda,
        StreamHandle(stream.cu_stream()),
        ptr,
        layout,
        pitches,
        kernel,
        frame,
    )
}

/// Launches `kernel` over `layout`, whose samples start at `ptr` at `pitches`: the caller
/// checked that this memory holds them all.
fn launch(
    cuda: &CudaInterop,
    stream: StreamHandle,
    ptr: u64,
    layout: &Layout,
    pitches: Pitches,
    kernel: Kernel,
    frame: u32,
) -> Result<(), InteropError> {
    let shape = layout.shape();
    let [depth, height, width] = shape.padded().map(|d| d as u32);
    let block = [16, 16, 1];
    let grid = [width.div_ceil(16), height.div_ceil(16), depth];
    cuda.device().kernels()?.launch(
        kernel.name(),
        stream,
        grid,
        block,
        &[
            Arg::U64(ptr),
            Arg::U64(pitches.row as u64),
            Arg::U64(pitches.plane as u64),
            Arg::U32(width),
            Arg::U32(height),
            Arg::U32(depth),
            Arg::U32(frame),
        ],
    )
}

/// The kernels, compiled from `kernels.ll` by LLVM's NVPTX back end (the command is in that
/// file). The pattern fills take `(dst, row_pitch, plane_pitch, width, height, depth, frame)` and write the
/// sample (x, y, z) = (thread in x, thread in y, block in z) at
/// `dst + z * plane_pitch + y * row_pitch + x * 4`; `sluice_mesh_positions` takes
/// `(dst, count, side, cell, frame)` (see [`mesh_position_pattern`]).
pub(crate) const PTX: &CStr =
    match CStr::from_bytes_with_nul(concat!(include_str!("kernels.ptx"), "\0").as_bytes()) {
        Ok(ptx) => ptx,
        Err(_) => panic!("kernels.ptx holds a NUL byte"),
    };

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn patterns_are_what_the_ptx_computes() {
        assert_eq!(rgba8_pattern(3, 5, 0, 10), [13, 25, 6, 255]);
        assert_eq!(rgba8_pattern(250, 1, 2, 10), [4, 21, 249, 255]);
        assert_eq!(f32_pattern(1, 1, 1, 1), 7.0 / 256.0);
        assert_eq!(f32_pattern(255, 0, 0, 1), 0.0);
        let grid = MeshGrid { side: 4, cell: 8 };
        assert_eq!(mesh_position_pattern(0, grid, 3), [3.0, 0.0, 1.0]);
        assert_eq!(mesh_position_pattern(16, grid, 9), [17.0, 8.0, 6.0]);
        assert_eq!(mesh_position_pattern(17, grid, 9), [9.0, 16.0, 6.0]);
    }
}
