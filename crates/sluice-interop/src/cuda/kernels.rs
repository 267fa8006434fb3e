//! Kernels sluice ships for examples, tests and benchmarks: patterns whose values are
//! documented functions here, so a pixel check computes what the GPU wrote on the CPU.
//!
//! They are PTX text (generated from `kernels.ll`), JIT-compiled by the driver for whatever
//! GPU runs them: no CUDA toolkit or NVRTC is needed. Each launch writes only inside memory checked to hold the whole layout at
//! its pitches.

use std::ffi::CStr;

use cudarc::driver::{CudaSlice, CudaStream, DevicePtrMut};
use sluice_core::{ElementType, Layout};

use super::driver::{Arg, StreamHandle};
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
    if needed > slice.len() {
        return Err(InteropError::CudaBufferTooSmall {
            needed,
            len: slice.len(),
        });
    }
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
/// file). Both take `(dst, row_pitch, plane_pitch, width, height, depth, frame)` and write the
/// sample (x, y, z) = (thread in x, thread in y, block in z) at
/// `dst + z * plane_pitch + y * row_pitch + x * 4`.
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
    }
}
