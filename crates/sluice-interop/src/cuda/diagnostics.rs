//! Timing diagnostics of the CUDA paths, taken apart further than the interop bench's judged
//! figures: how long CUDA takes to fill a texture each way, where the time of a frame in
//! flight goes on each path, and what drawing straight from a staging buffer would cost.
//!
//! They answer "why is this path as fast as it is" when tuning on an NVIDIA machine and are
//! run by the interop bench (`SLUICE_BENCH_ONLY=diag cargo bench --features cuda --bench
//! interop`, or `scripts/device-cuda.sh remote diag`). Each returns its medians rather than
//! printing them; nothing here is needed to show CUDA memory.

use std::fmt;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::{Duration, Instant};

use sluice_core::{ArraySource, CudaMemory, ElementType, Layout, Shape, SharedSource, SourceError};
use sluice_render::{Image, PanZoomCamera, RenderError, Scene};

use super::driver::{
    copy_into, copy_into_array, copy_into_surface, cuda_error, ExternalBuffer, Pitched,
    StreamHandle, SurfaceCopy,
};
use super::pool::STATS;
use super::staging::CudaStaging;
use super::textures::{CudaArrayCopy, Key, Slot};
use super::{kernels, CudaSource};
use crate::error::InteropError;
use crate::interop::Interop;
use crate::source::Pitches;

/// The frame every diagnostic moves: 3840 x 2160 RGBA8.
const WIDTH: usize = 3840;
/// See [`WIDTH`].
const HEIGHT: usize = 2160;

/// The median of `runs` (sorted in place).
fn median<T: Copy + PartialOrd>(runs: &mut [T]) -> T {
    runs.sort_by(|a, b| a.partial_cmp(b).unwrap_or(std::cmp::Ordering::Equal));
    runs[runs.len() / 2]
}

/// The diagnostic's own 4K frame refused (it is not: the layout is fixed), as an error.
fn frame_error(error: SourceError) -> InteropError {
    RenderError::Source {
        source_label: format!("the diagnostics' {WIDTH}x{HEIGHT} RGBA8 frame"),
        error,
    }
    .into()
}

/// Milliseconds, for the reports.
fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1e3
}

/// How long one copy of a 4K RGBA8 frame from CUDA memory takes each way
/// ([`array_fill_speed`]), per copy, 20 copies per synchronize, median of 7.
#[derive(Clone, Copy, Debug)]
#[non_exhaustive]
pub struct ArrayFillTimes {
    /// Bytes per copy.
    pub bytes: usize,
    /// A plain device copy into renderer-exported linear memory (the staging path's copy).
    pub into_linear: Duration,
    /// `cuMemcpy3D` into the CUDA array that maps a renderer texture.
    pub memcpy3d: Duration,
    /// The surface-store kernel, a texel per store.
    pub surface_texel: Duration,
    /// The surface-store kernel, 16 bytes per store.
    pub surface_wide: Duration,
}

impl fmt::Display for ArrayFillTimes {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "4K RGBA8 ({} bytes), per copy, 20 per synchronize: into exported linear memory {:.3} ms; into the texture's array by cuMemcpy3D {:.3} ms; by the surface kernel, a texel per store {:.3} ms, 16 bytes per store {:.3} ms",
            self.bytes,
            ms(self.into_linear),
            ms(self.memcpy3d),
            ms(self.surface_texel),
            ms(self.surface_wide)
        )
    }
}

/// Times CUDA filling a 4K RGBA8 texture each way, against a plain device copy of the same
/// bytes into renderer-exported memory.
///
/// # Errors
///
/// No CUDA driver or device for `interop`'s adapter, or any CUDA or Vulkan call failing.
pub fn array_fill_speed(interop: &Interop) -> Result<ArrayFillTimes, InteropError> {
    let cuda = interop.cuda()?;
    let bytes = WIDTH * HEIGHT * 4;
    let stream = cuda
        .context()
        .new_stream()
        .map_err(cuda_error("cuStreamCreate"))?;
    let src = stream
        .alloc_zeros::<u8>(bytes)
        .map_err(cuda_error("cuMemAlloc"))?;
    let (src_ptr, _guard) = cudarc::driver::DevicePtr::device_ptr(&src, &stream);
    let handle = StreamHandle(stream.cu_stream());
    let pitched = Pitched {
        ptr: src_ptr,
        row: WIDTH * 4,
        plane: WIDTH * 4 * HEIGHT,
    };
    let key = Key {
        format: wgpu::TextureFormat::Rgba8Uint,
        size: wgpu::Extent3d {
            width: WIDTH as u32,
            height: HEIGHT as u32,
            depth_or_array_layers: 1,
        },
        dimension: wgpu::TextureDimension::D2,
    };
    let slot = Slot::new(&cuda, key, 4)?;
    let buffer = interop.export_buffer(bytes as u64)?;
    let mapping = ExternalBuffer::import(
        cuda.context(),
        buffer.export_fd()?,
        buffer.allocation_size(),
        buffer.is_dedicated(),
        bytes as u64,
    )?;
    let linear = Pitched {
        ptr: mapping.ptr(),
        row: WIDTH * 4,
        plane: WIDTH * 4 * HEIGHT,
    };
    let module = cuda.device().surface_kernels()?;
    let time = |f: &dyn Fn() -> Result<(), InteropError>| -> Result<Duration, InteropError> {
        let mut runs = Vec::with_capacity(7);
        for _ in 0..7 {
            let start = Instant::now();
            for _ in 0..20 {
                f()?;
            }
            stream
                .synchronize()
                .map_err(cuda_error("cuStreamSynchronize"))?;
            runs.push(start.elapsed() / 20);
        }
        Ok(median(&mut runs))
    };
    let ctx = cuda.context();
    Ok(ArrayFillTimes {
        bytes,
        into_linear: time(&|| {
            copy_into(
                ctx,
                handle,
                pitched,
                linear,
                &mapping,
                [1, HEIGHT, WIDTH * 4],
            )
        })?,
        memcpy3d: time(&|| copy_into_array(ctx, handle, pitched, &slot.array))?,
        surface_texel: time(&|| {
            copy_into_surface(module, handle, pitched, &slot.array, SurfaceCopy::Texel)
        })?,
        surface_wide: time(&|| {
            copy_into_surface(module, handle, pitched, &slot.array, SurfaceCopy::Wide)
        })?,
    })
}

/// One path and target of [`in_flight_breakdown`]: medians of 9 batches.
#[derive(Clone, Debug)]
#[non_exhaustive]
pub struct InFlightRow {
    /// The path: direct (and which copy) or staging.
    pub path: &'static str,
    /// The square target's side in pixels.
    pub target_side: u32,
    /// Milliseconds per frame with 20 frames in flight.
    pub frame_ms: f64,
    /// The host's milliseconds per frame inside `render`.
    pub host_ms: f64,
    /// Of those, milliseconds waiting for the renderer's reads of a destination.
    pub host_wait_ms: f64,
    /// Waits for reads left to the GPU, over the batch.
    pub gpu_waits: u64,
    /// Destinations made over the batch.
    pub made: u64,
    /// Milliseconds per frame when each frame is waited for.
    pub waited_frame_ms: f64,
}

impl fmt::Display for InFlightRow {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{}, {side}x{side} target: {:.3} ms/frame in flight; host in render {:.3} ms/frame, of which waiting for reads {:.3}; GPU-side waits {}; destinations made {}; {:.3} ms waiting each frame",
            self.path,
            self.frame_ms,
            self.host_ms,
            self.host_wait_ms,
            self.gpu_waits,
            self.made,
            self.waited_frame_ms,
            side = self.target_side,
        )
    }
}

/// Frames in flight taken apart on each path: a 4K RGBA8 CUDA source drawn to a 512 x 512
/// target (as the interop bench does) and to a 1 x 1 target (the transfer and its ordering
/// with almost no draw), 20 frames per wait; with the host's time in `render`, its waits for
/// reads, and the waits left to the GPU. Leaves `interop`'s path and copy method as it found
/// them.
///
/// # Errors
///
/// No CUDA driver or device, a CUDA call or a render failing.
pub fn in_flight_breakdown(interop: &Interop) -> Result<Vec<InFlightRow>, InteropError> {
    let cuda = interop.cuda()?;
    let layout = Layout::new(
        Shape::d2(HEIGHT, WIDTH).map_err(frame_error)?,
        ElementType::U8,
        4,
    )
    .map_err(frame_error)?;
    let pitches = Pitches::packed(&layout);
    let stream = cuda
        .context()
        .new_stream()
        .map_err(cuda_error("cuStreamCreate"))?;
    let mut slice = stream
        .alloc_zeros::<u8>(layout.total_bytes())
        .map_err(cuda_error("cuMemAlloc"))?;
    kernels::fill_rgba8_slice(&cuda, &stream, &mut slice, &layout, pitches, 3)?;
    let source = Arc::new(CudaSource::from_slice(&cuda, layout, pitches, slice)?);
    let mut scene = Scene::new();
    scene.add(Image::new(source.clone() as SharedSource));
    let before = (interop.direct_cuda_textures(), interop.cuda_array_copy());
    let mut rows = Vec::new();
    let paths = [
        (
            "direct, surface kernel, 16 bytes per store",
            true,
            CudaArrayCopy::Wide,
        ),
        (
            "direct, surface kernel, a texel per store",
            true,
            CudaArrayCopy::Texel,
        ),
        ("direct, cuMemcpy3D", true, CudaArrayCopy::Memcpy3D),
        ("staging", false, CudaArrayCopy::Wide),
    ];
    let result = (|| {
        for (path, direct, method) in paths {
            interop.set_direct_cuda_textures(direct);
            interop.set_cuda_array_copy(method);
            let mut renderer = interop.renderer();
            for side in [512u32, 1] {
                let target = renderer.create_target(side, side)?;
                let camera = PanZoomCamera::fit(
                    sluice_render::glam::Vec2::ZERO,
                    sluice_render::glam::Vec2::new(WIDTH as f32, HEIGHT as f32),
                    target.size(),
                );
                let mut batch = |frames: usize| -> Result<(f64, f64, f64, u64, u64), InteropError> {
                    let (waited, gpu, made) = (
                        STATS.host_wait_nanos.load(Ordering::Relaxed),
                        STATS.gpu_waits.load(Ordering::Relaxed),
                        STATS.created.load(Ordering::Relaxed),
                    );
                    let mut host = Duration::ZERO;
                    let start = Instant::now();
                    for _ in 0..frames {
                        let call = Instant::now();
                        source.publish();
                        renderer.render(&scene, &camera, &target)?;
                        host += call.elapsed();
                    }
                    renderer.wait_idle()?;
                    let per = |d: Duration| ms(d) / frames as f64;
                    Ok((
                        per(start.elapsed()),
                        per(host),
                        (STATS.host_wait_nanos.load(Ordering::Relaxed) - waited) as f64
                            / 1e6
                            / frames as f64,
                        STATS.gpu_waits.load(Ordering::Relaxed) - gpu,
                        STATS.created.load(Ordering::Relaxed) - made,
                    ))
                };
                for _ in 0..3 {
                    batch(20)?;
                }
                let mut runs = (0..9).map(|_| batch(20)).collect::<Result<Vec<_>, _>>()?;
                runs.sort_by(|a, b| a.0.total_cmp(&b.0));
                let (frame_ms, host_ms, host_wait_ms, gpu_waits, made) = runs[4];
                let mut waited = (0..9)
                    .map(|_| batch(1).map(|r| r.0))
                    .collect::<Result<Vec<_>, _>>()?;
                rows.push(InFlightRow {
                    path,
                    target_side: side,
                    frame_ms,
                    host_ms,
                    host_wait_ms,
                    gpu_waits,
                    made,
                    waited_frame_ms: median(&mut waited),
                });
            }
        }
        Ok(())
    })();
    interop.set_direct_cuda_textures(before.0);
    interop.set_cuda_array_copy(before.1);
    result.map(|()| rows)
}

/// What [`emulated_draw_from_staging`] measured: milliseconds per frame, 20 in flight, medians
/// of 9 batches.
#[derive(Clone, Copy, Debug)]
#[non_exhaustive]
pub struct StagingEmulation {
    /// Drawing a resident 4K texture to 512 x 512, copying nothing.
    pub resident_ms: f64,
    /// The same after an ordered CUDA copy of the frame into staging each frame.
    pub with_copy_ms: f64,
}

impl fmt::Display for StagingEmulation {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "draw of a resident 4K texture to 512x512, 20 in flight: {:.3} ms/frame; after an ordered CUDA copy into staging each frame: {:.3} ms/frame",
            self.resident_ms, self.with_copy_ms
        )
    }
}

/// What drawing straight from a staging buffer would cost, emulated: each frame CUDA copies
/// the source linearly into a staging buffer (ordered with the renderer's submit as the
/// staging path does) and the renderer draws a 4K texture that is already resident, copying
/// nothing; against the same draw with no copy.
///
/// # Errors
///
/// No CUDA driver or device, a CUDA call or a render failing.
pub fn emulated_draw_from_staging(interop: &Interop) -> Result<StagingEmulation, InteropError> {
    let cuda = interop.cuda()?;
    let frame = sluice_core::ndarray::Array3::<u8>::zeros((HEIGHT, WIDTH, 4));
    let host = Arc::new(ArraySource::with_channels(frame).map_err(frame_error)?);
    let stream = cuda
        .context()
        .new_stream()
        .map_err(cuda_error("cuStreamCreate"))?;
    let src = stream
        .alloc_zeros::<u8>(WIDTH * HEIGHT * 4)
        .map_err(cuda_error("cuMemAlloc"))?;
    let (ptr, _guard) = cudarc::driver::DevicePtr::device_ptr(&src, &stream);
    let memory = CudaMemory {
        device_uuid: cuda.device_uuid().0,
        ptr,
        row_pitch: WIDTH * 4,
        plane_pitch: WIDTH * 4 * HEIGHT,
        stream: stream.cu_stream() as usize as u64,
        ready_event: None,
    };
    let staging = CudaStaging::new(interop.clone());
    let mut scene = Scene::new();
    scene.add(Image::new(host as SharedSource));
    let mut renderer = interop.renderer();
    let target = renderer.create_target(512, 512)?;
    let camera = PanZoomCamera::fit(
        sluice_render::glam::Vec2::ZERO,
        sluice_render::glam::Vec2::new(WIDTH as f32, HEIGHT as f32),
        target.size(),
    );
    renderer.render(&scene, &camera, &target)?;
    let row = (WIDTH * 4).next_multiple_of(crate::COPY_ROW_ALIGNMENT);
    let pitches = Pitches {
        row,
        plane: row * HEIGHT,
    };
    let mut batch = |frames: usize, with_cuda: bool| -> Result<f64, InteropError> {
        let start = Instant::now();
        for _ in 0..frames {
            if with_cuda {
                staging.through_staging(
                    &cuda,
                    &memory,
                    Pitched::at(&memory, [0, 0, 0], 4),
                    pitches,
                    [1, HEIGHT, WIDTH * 4],
                    |_| {},
                )?;
            }
            target.invalidate();
            renderer.render(&scene, &camera, &target)?;
            staging.frame_submitted();
        }
        renderer.wait_idle()?;
        Ok(ms(start.elapsed()) / frames as f64)
    };
    let mut medians = [0.0; 2];
    for (with_cuda, out) in [false, true].into_iter().zip(&mut medians) {
        for _ in 0..3 {
            batch(20, with_cuda)?;
        }
        let mut runs = (0..9)
            .map(|_| batch(20, with_cuda))
            .collect::<Result<Vec<_>, _>>()?;
        *out = median(&mut runs);
    }
    Ok(StagingEmulation {
        resident_ms: medians[0],
        with_copy_ms: medians[1],
    })
}
