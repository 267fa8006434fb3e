//! CUDA driver calls cudarc's safe layer does not offer: external memory with the dedicated
//! flag, external timeline semaphores, pitched device-to-device copies on a caller's stream,
//! events kept for teardown, and kernels loaded from PTX text.
//!
//! One of the crate's `unsafe` modules. Every type here owns the CUDA object it wraps, holds
//! the `CudaContext` it was made in (so the context outlives it), makes that context current
//! before each call, and destroys the object on drop. Copies and launches only write memory
//! this crate mapped itself, within bounds checked here; what they read is device memory, which
//! a bad address cannot turn into a host memory error.
//!
//! Stream and event handles that come from callers as integers (`CudaMemory::stream`,
//! `ready_event`) are only used here once vouched for: by cudarc's types, or by a caller of the
//! `unsafe` [`crate::cuda::CudaSource::from_raw`].

use std::ffi::c_void;
use std::mem::MaybeUninit;
use std::os::fd::{AsRawFd, IntoRawFd, OwnedFd};
use std::sync::Arc;

use cudarc::driver::{result, sys, CudaContext, DriverError};

use crate::error::InteropError;

pub(crate) fn cuda_error(call: &'static str) -> impl FnOnce(DriverError) -> InteropError {
    move |e| InteropError::Cuda {
        call,
        error: e.to_string(),
    }
}

/// Fails with both sizes unless `slice` holds at least `needed` bytes.
pub(crate) fn check_slice_len(
    slice: &cudarc::driver::CudaSlice<u8>,
    needed: usize,
) -> Result<(), InteropError> {
    if needed > slice.len() {
        return Err(InteropError::CudaBufferTooSmall {
            needed,
            len: slice.len(),
        });
    }
    Ok(())
}

/// Whether the CUDA driver library can be loaded. cudarc panics on the first driver call
/// without it, so this is asked before any.
pub(crate) fn library_present() -> bool {
    // SAFETY: only looks for the library (dlopen); calls nothing in it.
    unsafe { sys::is_culib_present() }
}

/// A CUDA stream as the driver names it. Valid by construction: from a cudarc `CudaStream`
/// (kept alive by its owner for the call), or vouched for by an `unsafe` constructor.
#[derive(Clone, Copy, Debug)]
pub(crate) struct StreamHandle(pub sys::CUstream);

// SAFETY: a CUstream is a handle the driver accepts from any thread.
unsafe impl Send for StreamHandle {}
// SAFETY: as above; the handle is only passed to driver calls.
unsafe impl Sync for StreamHandle {}

impl StreamHandle {
    pub fn from_raw(stream: u64) -> Self {
        StreamHandle(stream as usize as sys::CUstream)
    }
}

/// Device memory imported from a Vulkan opaque fd and mapped as one linear buffer.
pub(crate) struct ExternalBuffer {
    ctx: Arc<CudaContext>,
    memory: sys::CUexternalMemory,
    ptr: sys::CUdeviceptr,
    len: u64,
}

// SAFETY: the handles are plain driver handles, usable from any thread with the context made
// current (which every method does).
unsafe impl Send for ExternalBuffer {}
// SAFETY: no method mutates through `&self` outside the driver's own synchronization.
unsafe impl Sync for ExternalBuffer {}

impl ExternalBuffer {
    /// Imports `fd` (a Vulkan allocation of `allocation_size` bytes; CUDA owns the fd once
    /// this succeeds) and maps its first `len` bytes.
    pub fn import(
        ctx: &Arc<CudaContext>,
        fd: OwnedFd,
        allocation_size: u64,
        dedicated: bool,
        len: u64,
    ) -> Result<Self, InteropError> {
        let memory = import_memory(ctx, fd, allocation_size, dedicated)?;
        let buffer = sys::CUDA_EXTERNAL_MEMORY_BUFFER_DESC {
            offset: 0,
            size: len,
            flags: 0,
            reserved: [0; 16],
        };
        let mut ptr = 0;
        // SAFETY: `memory` is the live handle imported above; the range lies in it (the
        // caller passes `len <= allocation_size`).
        let mapped = unsafe { sys::cuExternalMemoryGetMappedBuffer(&mut ptr, memory, &buffer) };
        if let Err(e) = mapped.result() {
            // SAFETY: nothing was mapped from the handle; it is destroyed once.
            unsafe { sys::cuDestroyExternalMemory(memory) };
            return Err(cuda_error("cuExternalMemoryGetMappedBuffer")(e));
        }
        Ok(ExternalBuffer {
            ctx: ctx.clone(),
            memory,
            ptr,
            len,
        })
    }

    /// The device address of the mapping.
    pub fn ptr(&self) -> u64 {
        self.ptr
    }

    /// Bytes mapped.
    pub fn len(&self) -> u64 {
        self.len
    }
}

impl Drop for ExternalBuffer {
    fn drop(&mut self) {
        // Owners synchronize the work that used the mapping (an `Event`) before dropping it.
        let _ = self.ctx.bind_to_thread();
        // SAFETY: the mapping and the handle are live and released exactly once, the mapping
        // first, as CUDA requires.
        unsafe {
            let _ = sys::cuMemFree_v2(self.ptr);
            let _ = sys::cuDestroyExternalMemory(self.memory);
        }
    }
}

/// Imports `fd` (a Vulkan allocation of `allocation_size` bytes) into `ctx`, which is left
/// current; CUDA owns the fd once this succeeds.
fn import_memory(
    ctx: &Arc<CudaContext>,
    fd: OwnedFd,
    allocation_size: u64,
    dedicated: bool,
) -> Result<sys::CUexternalMemory, InteropError> {
    ctx.bind_to_thread()
        .map_err(cuda_error("cuCtxSetCurrent"))?;
    let desc = sys::CUDA_EXTERNAL_MEMORY_HANDLE_DESC {
        type_: sys::CUexternalMemoryHandleType::CU_EXTERNAL_MEMORY_HANDLE_TYPE_OPAQUE_FD,
        handle: sys::CUDA_EXTERNAL_MEMORY_HANDLE_DESC_st__bindgen_ty_1 { fd: fd.as_raw_fd() },
        size: allocation_size,
        flags: if dedicated {
            sys::CUDA_EXTERNAL_MEMORY_DEDICATED
        } else {
            0
        },
        reserved: [0; 16],
    };
    let mut memory = MaybeUninit::uninit();
    // SAFETY: `desc` is fully initialized and names an open fd we own; on success CUDA writes
    // the handle into `memory`.
    unsafe { sys::cuImportExternalMemory(memory.as_mut_ptr(), &desc) }
        .result()
        .map_err(cuda_error("cuImportExternalMemory"))?;
    // The import succeeded: CUDA owns the fd now and closes it with the memory.
    let _ = fd.into_raw_fd();
    // SAFETY: initialized by the successful call above.
    Ok(unsafe { memory.assume_init() })
}

/// The CUDA array format and channel count of textures of `format`: unnormalized integers
/// or floats of 1, 2 or 4 channels (the formats sluice uploads device data into); `None` for
/// others.
pub(crate) fn array_format(format: wgpu::TextureFormat) -> Option<(sys::CUarray_format, u32)> {
    use sys::CUarray_format as A;
    use wgpu::TextureSampleType as S;
    let channels = u32::from(format.components());
    let bytes = format.block_copy_size(None)? / channels.max(1);
    let array = match (format.sample_type(None, None)?, bytes) {
        (S::Uint, 1) => A::CU_AD_FORMAT_UNSIGNED_INT8,
        (S::Uint, 2) => A::CU_AD_FORMAT_UNSIGNED_INT16,
        (S::Uint, 4) => A::CU_AD_FORMAT_UNSIGNED_INT32,
        (S::Sint, 1) => A::CU_AD_FORMAT_SIGNED_INT8,
        (S::Sint, 2) => A::CU_AD_FORMAT_SIGNED_INT16,
        (S::Sint, 4) => A::CU_AD_FORMAT_SIGNED_INT32,
        // Normalized formats sample as floats too: only the float formats map.
        (S::Float { .. }, 2) if is_float(format) => A::CU_AD_FORMAT_HALF,
        (S::Float { .. }, 4) if is_float(format) => A::CU_AD_FORMAT_FLOAT,
        _ => return None,
    };
    matches!(channels, 1 | 2 | 4).then_some((array, channels))
}

fn is_float(format: wgpu::TextureFormat) -> bool {
    use wgpu::TextureFormat as F;
    matches!(
        format,
        F::R16Float | F::Rg16Float | F::Rgba16Float | F::R32Float | F::Rg32Float | F::Rgba32Float
    )
}

/// The memory of a Vulkan image (a dedicated allocation) imported into CUDA and mapped as a
/// CUDA array of the same format and extent, with a surface object over it: a copy kernel's
/// surface stores (or `cuMemcpy3D`) write its texels, and the Vulkan side samples them.
pub(crate) struct ExternalArray {
    ctx: Arc<CudaContext>,
    memory: sys::CUexternalMemory,
    mipmapped: sys::CUmipmappedArray,
    array: sys::CUarray,
    surface: sys::CUsurfObject,
    /// A 3-D array (else 2-D).
    three_d: bool,
    /// `[width, height, depth]` in texels (depth 1 for 2-D arrays).
    extent: [usize; 3],
    texel_bytes: usize,
}

// SAFETY: driver handles, used from any thread with the context made current.
unsafe impl Send for ExternalArray {}
// SAFETY: as above; no method mutates through `&self` outside the driver.
unsafe impl Sync for ExternalArray {}

impl ExternalArray {
    /// Imports `fd` (the dedicated allocation of `allocation_size` bytes behind a Vulkan image
    /// of `extent` texels, `depth` 0 for a 2-D image) and maps it as an array of `format` in
    /// `channels` channels. CUDA owns the fd once the import succeeds.
    pub fn import(
        ctx: &Arc<CudaContext>,
        fd: OwnedFd,
        allocation_size: u64,
        (format, channels): (sys::CUarray_format, u32),
        texel_bytes: usize,
        [width, height, depth]: [usize; 3],
    ) -> Result<Self, InteropError> {
        let memory = import_memory(ctx, fd, allocation_size, true)?;
        let desc = sys::CUDA_EXTERNAL_MEMORY_MIPMAPPED_ARRAY_DESC {
            offset: 0,
            arrayDesc: sys::CUDA_ARRAY3D_DESCRIPTOR {
                Width: width,
                Height: height,
                Depth: depth,
                Format: format,
                NumChannels: channels,
                // Surface stores (the copy kernels) need it; copies do not mind it.
                Flags: sys::CUDA_ARRAY3D_SURFACE_LDST,
            },
            numLevels: 1,
            reserved: [0; 16],
        };
        let mut mipmapped = MaybeUninit::uninit();
        // SAFETY: `memory` is the live handle imported above; `desc` is fully initialized.
        let mapped = unsafe {
            sys::cuExternalMemoryGetMappedMipmappedArray(mipmapped.as_mut_ptr(), memory, &desc)
        };
        if let Err(e) = mapped.result() {
            // SAFETY: nothing was mapped from the handle; it is destroyed once.
            unsafe { sys::cuDestroyExternalMemory(memory) };
            return Err(cuda_error("cuExternalMemoryGetMappedMipmappedArray")(e));
        }
        // SAFETY: initialized by the successful call above.
        let mipmapped = unsafe { mipmapped.assume_init() };
        let mut array = MaybeUninit::uninit();
        // SAFETY: a live mipmapped array with one level.
        let level = unsafe { sys::cuMipmappedArrayGetLevel(array.as_mut_ptr(), mipmapped, 0) };
        if let Err(e) = level.result() {
            // SAFETY: both handles are live and released once, the mapping first.
            unsafe {
                sys::cuMipmappedArrayDestroy(mipmapped);
                sys::cuDestroyExternalMemory(memory);
            }
            return Err(cuda_error("cuMipmappedArrayGetLevel")(e));
        }
        // SAFETY: initialized by the successful call above.
        let array = unsafe { array.assume_init() };
        // SAFETY: an all-zero resource descriptor is a valid C value (every field an integer,
        // handle or union of those); the type and array are set below.
        let mut resource: sys::CUDA_RESOURCE_DESC = unsafe { std::mem::zeroed() };
        resource.resType = sys::CUresourcetype::CU_RESOURCE_TYPE_ARRAY;
        resource.res.array.hArray = array;
        let mut surface = 0;
        // SAFETY: the descriptor names the live array, mapped with `CUDA_ARRAY3D_SURFACE_LDST`.
        let created = unsafe { sys::cuSurfObjectCreate(&mut surface, &resource) };
        if let Err(e) = created.result() {
            // SAFETY: both handles are live and released once, the mapping first.
            unsafe {
                sys::cuMipmappedArrayDestroy(mipmapped);
                sys::cuDestroyExternalMemory(memory);
            }
            return Err(cuda_error("cuSurfObjectCreate")(e));
        }
        Ok(ExternalArray {
            ctx: ctx.clone(),
            memory,
            mipmapped,
            array,
            surface,
            three_d: depth > 0,
            extent: [width, height, depth.max(1)],
            texel_bytes,
        })
    }
}

impl Drop for ExternalArray {
    fn drop(&mut self) {
        // Owners synchronize the work that wrote the array (an `Event`) before dropping it.
        let _ = self.ctx.bind_to_thread();
        // SAFETY: the surface, the mapping and the handle are live and released exactly once,
        // in that order, as CUDA requires (the level array belongs to the mipmapped array).
        unsafe {
            let _ = sys::cuSurfObjectDestroy(self.surface);
            let _ = sys::cuMipmappedArrayDestroy(self.mipmapped);
            let _ = sys::cuDestroyExternalMemory(self.memory);
        }
    }
}

/// Copies all of `dst` (its extent of texels) from `src`, whose rows and planes are pitched,
/// on `stream`, without waiting.
pub(crate) fn copy_into_array(
    ctx: &CudaContext,
    stream: StreamHandle,
    src: Pitched,
    dst: &ExternalArray,
) -> Result<(), InteropError> {
    let [width, height, depth] = dst.extent;
    let width_bytes = width * dst.texel_bytes;
    if src.row < width_bytes || (depth > 1 && src.plane < src.row * height) {
        return Err(InteropError::CudaBufferTooSmall {
            needed: width_bytes,
            len: src.row,
        });
    }
    ctx.bind_to_thread()
        .map_err(cuda_error("cuCtxSetCurrent"))?;
    // Planes must be whole rows apart for one 3-D copy; otherwise one 2-D copy per plane.
    let whole_planes = depth == 1 || src.plane.is_multiple_of(src.row);
    let (planes, per_copy) = if whole_planes { (1, depth) } else { (depth, 1) };
    for z in 0..planes {
        let copy = sys::CUDA_MEMCPY3D {
            srcXInBytes: 0,
            srcY: 0,
            srcZ: 0,
            srcLOD: 0,
            srcMemoryType: sys::CUmemorytype::CU_MEMORYTYPE_DEVICE,
            srcHost: std::ptr::null(),
            srcDevice: src.ptr + (z * src.plane) as u64,
            srcArray: std::ptr::null_mut(),
            reserved0: std::ptr::null_mut(),
            srcPitch: src.row,
            srcHeight: if depth > 1 {
                src.plane / src.row
            } else {
                height
            },
            dstXInBytes: 0,
            dstY: 0,
            dstZ: z,
            dstLOD: 0,
            dstMemoryType: sys::CUmemorytype::CU_MEMORYTYPE_ARRAY,
            dstHost: std::ptr::null_mut(),
            dstDevice: 0,
            dstArray: dst.array,
            reserved1: std::ptr::null_mut(),
            dstPitch: 0,
            dstHeight: 0,
            WidthInBytes: width_bytes,
            Height: height,
            Depth: per_copy,
        };
        // SAFETY: the destination is exactly the array's extent (a CUDA array this crate
        // mapped); the source is device memory the caller's source vouched for, read by the
        // GPU; `stream` is valid (see `StreamHandle`).
        unsafe { sys::cuMemcpy3DAsync_v2(&copy, stream.0) }
            .result()
            .map_err(cuda_error("cuMemcpy3DAsync (into an array)"))?;
    }
    Ok(())
}

/// The surface copy kernel for arrays of `dims` (2 or 3) dimensions and texels of `texel_bytes`
/// (see `surface.ll`).
fn surface_kernel(three_d: bool, texel_bytes: usize) -> Option<&'static std::ffi::CStr> {
    Some(match (three_d, texel_bytes) {
        (false, 1) => c"sluice_surface_2d_1",
        (false, 2) => c"sluice_surface_2d_2",
        (false, 4) => c"sluice_surface_2d_4",
        (false, 8) => c"sluice_surface_2d_8",
        (false, 16) => c"sluice_surface_2d_16",
        (true, 1) => c"sluice_surface_3d_1",
        (true, 2) => c"sluice_surface_3d_2",
        (true, 4) => c"sluice_surface_3d_4",
        (true, 8) => c"sluice_surface_3d_8",
        (true, 16) => c"sluice_surface_3d_16",
        _ => return None,
    })
}

/// The 16-bytes-per-thread surface copy kernel for texels of `texel_bytes` (see `surface.ll`).
fn wide_surface_kernel(three_d: bool, texel_bytes: usize) -> Option<&'static std::ffi::CStr> {
    Some(match (three_d, texel_bytes) {
        (false, 1) => c"sluice_surface_wide_2d_1",
        (false, 2) => c"sluice_surface_wide_2d_2",
        (false, 4) => c"sluice_surface_wide_2d_4",
        (false, 8) => c"sluice_surface_wide_2d_8",
        (true, 1) => c"sluice_surface_wide_3d_1",
        (true, 2) => c"sluice_surface_wide_3d_2",
        (true, 4) => c"sluice_surface_wide_3d_4",
        (true, 8) => c"sluice_surface_wide_3d_8",
        _ => return None,
    })
}

/// How a surface copy kernel moves texels.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum SurfaceCopy {
    /// One texel per thread and store.
    Texel,
    /// 16 bytes per thread and store (several texels of up to 8 bytes; 16-byte texels are
    /// copied one per thread anyway).
    Wide,
}

/// The kernel `copy` uses from `src` into `dst`, if one can: a kernel exists for the texel
/// size, and every load is aligned (whole 32-bit words for the wide kernels and texels of 4
/// bytes or more, the texel's own size below that).
fn surface_copy_kernel(
    copy: SurfaceCopy,
    src: Pitched,
    dst: &ExternalArray,
) -> Option<(&'static std::ffi::CStr, usize)> {
    let aligned = |align: u64| {
        src.ptr.is_multiple_of(align)
            && (src.row as u64).is_multiple_of(align)
            && (src.plane as u64).is_multiple_of(align)
    };
    let wide = wide_surface_kernel(dst.three_d, dst.texel_bytes)
        .filter(|_| copy == SurfaceCopy::Wide && aligned(4))
        .map(|kernel| (kernel, 16));
    wide.or_else(|| {
        surface_kernel(dst.three_d, dst.texel_bytes)
            .filter(|_| aligned(dst.texel_bytes.min(4) as u64))
            .map(|kernel| (kernel, dst.texel_bytes))
    })
}

/// Whether [`copy_into_surface`] can copy from `src` into `dst` (see `surface_copy_kernel`).
pub(crate) fn surface_copy_fits(src: Pitched, dst: &ExternalArray) -> bool {
    surface_copy_kernel(SurfaceCopy::Texel, src, dst).is_some()
}

/// Copies all of `dst` (its extent of texels) from `src`, whose rows and planes are pitched,
/// on `stream` without waiting, with one of `module`'s surface-store kernels: these run near
/// the GPU's memory bandwidth where `cuMemcpy3D` into an array goes through a copy engine. The
/// caller checked [`surface_copy_fits`]; `copy` picks the kernel where both apply.
pub(crate) fn copy_into_surface(
    module: &Module,
    stream: StreamHandle,
    src: Pitched,
    dst: &ExternalArray,
    copy: SurfaceCopy,
) -> Result<(), InteropError> {
    let [width, height, depth] = dst.extent;
    let width_bytes = width * dst.texel_bytes;
    let (kernel, per_thread) =
        surface_copy_kernel(copy, src, dst).ok_or(InteropError::UnsupportedLayout {
            reason: format!(
                "no surface copy for {}-byte texels from address {:#x} with rows {} and planes {} bytes apart",
                dst.texel_bytes, src.ptr, src.row, src.plane
            ),
        })?;
    if src.row < width_bytes || (depth > 1 && src.plane < src.row * height) {
        return Err(InteropError::CudaBufferTooSmall {
            needed: width_bytes,
            len: src.row,
        });
    }
    // Blocks of 256 threads, 64 bytes wide: CUDA arrays are laid out in blocks of 64 bytes by
    // 8 rows (512 contiguous bytes, a GOB), so a warp writes whole GOBs or halves of them and
    // reads 64-byte runs of rows. With 16 bytes per thread that fills a 4K RGBA8 texture in
    // the time a linear copy of the same bytes takes (0.016 against 0.015 ms on the H200;
    // warps along one row took 0.026 ms).
    let across = (64 / per_thread).max(1) as u32;
    let block = [across, 256 / across, 1];
    let grid = [
        (width_bytes.div_ceil(per_thread) as u32).div_ceil(block[0]),
        (height as u32).div_ceil(block[1]),
        depth as u32,
    ];
    module.launch(
        kernel,
        stream,
        grid,
        block,
        &[
            Arg::U64(src.ptr),
            Arg::U64(src.row as u64),
            Arg::U64(src.plane as u64),
            Arg::U32(width as u32),
            Arg::U32(height as u32),
            Arg::U32(depth as u32),
            Arg::U64(dst.surface),
        ],
    )
}

/// A Vulkan timeline semaphore imported into CUDA.
pub(crate) struct ExternalSemaphore {
    ctx: Arc<CudaContext>,
    semaphore: sys::CUexternalSemaphore,
}

// SAFETY: a driver handle, used with the context made current.
unsafe impl Send for ExternalSemaphore {}
// SAFETY: as above.
unsafe impl Sync for ExternalSemaphore {}

impl ExternalSemaphore {
    /// Imports a timeline semaphore's opaque fd (CUDA owns it once this succeeds).
    pub fn import(ctx: &Arc<CudaContext>, fd: OwnedFd) -> Result<Self, InteropError> {
        ctx.bind_to_thread()
            .map_err(cuda_error("cuCtxSetCurrent"))?;
        let desc = sys::CUDA_EXTERNAL_SEMAPHORE_HANDLE_DESC {
            type_: sys::CUexternalSemaphoreHandleType::CU_EXTERNAL_SEMAPHORE_HANDLE_TYPE_TIMELINE_SEMAPHORE_FD,
            handle: sys::CUDA_EXTERNAL_SEMAPHORE_HANDLE_DESC_st__bindgen_ty_1 { fd: fd.as_raw_fd() },
            flags: 0,
            reserved: [0; 16],
        };
        let mut semaphore = MaybeUninit::uninit();
        // SAFETY: `desc` is fully initialized and names an open fd we own.
        unsafe { sys::cuImportExternalSemaphore(semaphore.as_mut_ptr(), &desc) }
            .result()
            .map_err(cuda_error("cuImportExternalSemaphore"))?;
        let _ = fd.into_raw_fd();
        Ok(ExternalSemaphore {
            ctx: ctx.clone(),
            // SAFETY: initialized by the successful call above.
            semaphore: unsafe { semaphore.assume_init() },
        })
    }

    /// Makes work enqueued on `stream` after this wait until the semaphore reaches `value`.
    pub fn wait(&self, stream: StreamHandle, value: u64) -> Result<(), InteropError> {
        self.ctx
            .bind_to_thread()
            .map_err(cuda_error("cuCtxSetCurrent"))?;
        let params = sys::CUDA_EXTERNAL_SEMAPHORE_WAIT_PARAMS {
            params: sys::CUDA_EXTERNAL_SEMAPHORE_WAIT_PARAMS_st__bindgen_ty_1 {
                fence: sys::CUDA_EXTERNAL_SEMAPHORE_WAIT_PARAMS_st__bindgen_ty_1__bindgen_ty_1 {
                    value,
                },
                nvSciSync:
                    sys::CUDA_EXTERNAL_SEMAPHORE_WAIT_PARAMS_st__bindgen_ty_1__bindgen_ty_2 {
                        reserved: 0,
                    },
                keyedMutex:
                    sys::CUDA_EXTERNAL_SEMAPHORE_WAIT_PARAMS_st__bindgen_ty_1__bindgen_ty_3 {
                        key: 0,
                        timeoutMs: 0,
                    },
                reserved: [0; 10],
            },
            flags: 0,
            reserved: [0; 16],
        };
        // SAFETY: one live semaphore and one initialized parameter block; `stream` is valid
        // (see `StreamHandle`).
        unsafe { sys::cuWaitExternalSemaphoresAsync(&self.semaphore, &params, 1, stream.0) }
            .result()
            .map_err(cuda_error("cuWaitExternalSemaphoresAsync"))
    }

    /// Signals `value` once the work enqueued on `stream` before this has finished.
    pub fn signal(&self, stream: StreamHandle, value: u64) -> Result<(), InteropError> {
        self.ctx
            .bind_to_thread()
            .map_err(cuda_error("cuCtxSetCurrent"))?;
        let params = sys::CUDA_EXTERNAL_SEMAPHORE_SIGNAL_PARAMS {
            params: sys::CUDA_EXTERNAL_SEMAPHORE_SIGNAL_PARAMS_st__bindgen_ty_1 {
                fence: sys::CUDA_EXTERNAL_SEMAPHORE_SIGNAL_PARAMS_st__bindgen_ty_1__bindgen_ty_1 {
                    value,
                },
                nvSciSync:
                    sys::CUDA_EXTERNAL_SEMAPHORE_SIGNAL_PARAMS_st__bindgen_ty_1__bindgen_ty_2 {
                        reserved: 0,
                    },
                keyedMutex:
                    sys::CUDA_EXTERNAL_SEMAPHORE_SIGNAL_PARAMS_st__bindgen_ty_1__bindgen_ty_3 {
                        key: 0,
                    },
                reserved: [0; 12],
            },
            flags: 0,
            reserved: [0; 16],
        };
        // SAFETY: as for `wait`.
        unsafe { sys::cuSignalExternalSemaphoresAsync(&self.semaphore, &params, 1, stream.0) }
            .result()
            .map_err(cuda_error("cuSignalExternalSemaphoresAsync"))
    }
}

impl Drop for ExternalSemaphore {
    fn drop(&mut self) {
        let _ = self.ctx.bind_to_thread();
        // SAFETY: the handle is live and destroyed once; owners synchronize the streams that
        // used it (an `Event`) first.
        unsafe {
            let _ = sys::cuDestroyExternalSemaphore(self.semaphore);
        }
    }
}

/// A CUDA event recorded after the last work that used an object, synchronized before the
/// object is destroyed (a wait on that work only, never on the whole device).
pub(crate) struct Event {
    ctx: Arc<CudaContext>,
    event: sys::CUevent,
    recorded: bool,
}

// SAFETY: a driver handle, used with the context made current.
unsafe impl Send for Event {}
// SAFETY: as above.
unsafe impl Sync for Event {}

impl Event {
    pub fn new(ctx: &Arc<CudaContext>) -> Result<Self, InteropError> {
        ctx.bind_to_thread()
            .map_err(cuda_error("cuCtxSetCurrent"))?;
        let event = result::event::create(sys::CUevent_flags::CU_EVENT_DISABLE_TIMING)
            .map_err(cuda_error("cuEventCreate"))?;
        Ok(Event {
            ctx: ctx.clone(),
            event,
            recorded: false,
        })
    }

    pub fn record(&mut self, stream: StreamHandle) -> Result<(), InteropError> {
        self.ctx
            .bind_to_thread()
            .map_err(cuda_error("cuCtxSetCurrent"))?;
        // SAFETY: a live event of this context; `stream` is valid (see `StreamHandle`).
        unsafe { result::event::record(self.event, stream.0) }
            .map_err(cuda_error("cuEventRecord"))?;
        self.recorded = true;
        Ok(())
    }

    /// Blocks until the work before the last `record` has finished.
    pub fn synchronize(&self) -> Result<(), InteropError> {
        if !self.recorded {
            return Ok(());
        }
        self.ctx
            .bind_to_thread()
            .map_err(cuda_error("cuCtxSetCurrent"))?;
        // SAFETY: a live event of this context.
        unsafe { result::event::synchronize(self.event) }.map_err(cuda_error("cuEventSynchronize"))
    }
}

impl Drop for Event {
    fn drop(&mut self) {
        let _ = self.ctx.bind_to_thread();
        // SAFETY: the event is live and destroyed once (CUDA defers the release of an event
        // still pending).
        unsafe {
            let _ = result::event::destroy(self.event);
        }
    }
}

/// Makes `stream` wait for `event` (both vouched for by the caller's source).
pub(crate) fn stream_wait_event(
    ctx: &CudaContext,
    stream: StreamHandle,
    event: u64,
) -> Result<(), InteropError> {
    ctx.bind_to_thread()
        .map_err(cuda_error("cuCtxSetCurrent"))?;
    // SAFETY: stream and event are valid handles of this context (see `StreamHandle`; the
    // event's source vouched for it like the stream).
    unsafe {
        result::stream::wait_event(
            stream.0,
            event as usize as sys::CUevent,
            sys::CUevent_wait_flags::CU_EVENT_WAIT_DEFAULT,
        )
    }
    .map_err(cuda_error("cuStreamWaitEvent"))
}

/// Rows of samples in device memory: the first at `ptr`, rows `row` bytes apart, planes
/// `plane` bytes apart.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Pitched {
    pub ptr: u64,
    pub row: usize,
    pub plane: usize,
}

impl Pitched {
    /// The sample at `origin` (`[plane, row, column]`) of `memory`, whose samples are
    /// `sample` bytes, with `memory`'s pitches.
    pub fn at(memory: &sluice_core::CudaMemory, origin: [usize; 3], sample: usize) -> Self {
        Pitched {
            ptr: memory.ptr
                + (origin[0] * memory.plane_pitch
                    + origin[1] * memory.row_pitch
                    + origin[2] * sample) as u64,
            row: memory.row_pitch,
            plane: memory.plane_pitch,
        }
    }
}

/// Copies `depth` planes of `height` rows of `width_bytes` from `src` (anywhere in device
/// memory) into `dst` (which must lie in `into`), on `stream`, without waiting.
pub(crate) fn copy_into(
    ctx: &CudaContext,
    stream: StreamHandle,
    src: Pitched,
    dst: Pitched,
    into: &ExternalBuffer,
    [depth, height, width_bytes]: [usize; 3],
) -> Result<(), InteropError> {
    let span = ((depth - 1) * dst.plane + (height - 1) * dst.row + width_bytes) as u64;
    let end = dst
        .ptr
        .checked_sub(into.ptr())
        .and_then(|start| start.checked_add(span));
    if end.is_none_or(|end| end > into.len()) || dst.row < width_bytes {
        return Err(InteropError::CudaBufferTooSmall {
            needed: end.unwrap_or(u64::MAX) as usize,
            len: into.len() as usize,
        });
    }
    ctx.bind_to_thread()
        .map_err(cuda_error("cuCtxSetCurrent"))?;
    // Rows back to back on both sides (and planes, if several): one linear copy.
    let packed =
        |p: Pitched| p.row == width_bytes && (depth == 1 || p.plane == width_bytes * height);
    if packed(src) && packed(dst) {
        let bytes = depth * height * width_bytes;
        // SAFETY: the destination bytes lie in `into`'s mapping (checked above: with packed
        // rows the span is exactly `bytes`); the source is device memory the caller's source
        // vouched for; `stream` is valid (see `StreamHandle`).
        unsafe { sys::cuMemcpyDtoDAsync_v2(dst.ptr, src.ptr, bytes, stream.0) }
            .result()
            .map_err(cuda_error("cuMemcpyDtoDAsync"))?;
        return Ok(());
    }
    let planes_whole = |p: Pitched| p.plane == p.row * height;
    if depth == 1 || !(planes_whole(src) && planes_whole(dst)) {
        for z in 0..depth {
            let copy = sys::CUDA_MEMCPY2D {
                srcXInBytes: 0,
                srcY: 0,
                srcMemoryType: sys::CUmemorytype::CU_MEMORYTYPE_DEVICE,
                srcHost: std::ptr::null(),
                srcDevice: src.ptr + (z * src.plane) as u64,
                srcArray: std::ptr::null_mut(),
                srcPitch: src.row,
                dstXInBytes: 0,
                dstY: 0,
                dstMemoryType: sys::CUmemorytype::CU_MEMORYTYPE_DEVICE,
                dstHost: std::ptr::null_mut(),
                dstDevice: dst.ptr + (z * dst.plane) as u64,
                dstArray: std::ptr::null_mut(),
                dstPitch: dst.row,
                WidthInBytes: width_bytes,
                Height: height,
            };
            // SAFETY: the destination rows lie in `into`'s mapping (checked above); the source
            // is device memory read by the GPU; `stream` is valid (see `StreamHandle`).
            unsafe { sys::cuMemcpy2DAsync_v2(&copy, stream.0) }
                .result()
                .map_err(cuda_error("cuMemcpy2DAsync"))?;
        }
        return Ok(());
    }
    let copy = sys::CUDA_MEMCPY3D {
        srcXInBytes: 0,
        srcY: 0,
        srcZ: 0,
        srcLOD: 0,
        srcMemoryType: sys::CUmemorytype::CU_MEMORYTYPE_DEVICE,
        srcHost: std::ptr::null(),
        srcDevice: src.ptr,
        srcArray: std::ptr::null_mut(),
        reserved0: std::ptr::null_mut(),
        srcPitch: src.row,
        srcHeight: height,
        dstXInBytes: 0,
        dstY: 0,
        dstZ: 0,
        dstLOD: 0,
        dstMemoryType: sys::CUmemorytype::CU_MEMORYTYPE_DEVICE,
        dstHost: std::ptr::null_mut(),
        dstDevice: dst.ptr,
        dstArray: std::ptr::null_mut(),
        reserved1: std::ptr::null_mut(),
        dstPitch: dst.row,
        dstHeight: height,
        WidthInBytes: width_bytes,
        Height: height,
        Depth: depth,
    };
    // SAFETY: as for the 2-D copies: the destination volume lies in `into` (checked above).
    unsafe { sys::cuMemcpy3DAsync_v2(&copy, stream.0) }
        .result()
        .map_err(cuda_error("cuMemcpy3DAsync"))
}

/// Copies `depth` planes of `height` rows of `width_bytes` from `src` (device memory) into
/// `dst` (host memory, rows packed back to back) on `stream`, and waits for that stream: the
/// explicit, slow host-staged path.
pub(crate) fn copy_to_host(
    ctx: &CudaContext,
    stream: StreamHandle,
    src: Pitched,
    dst: &mut [u8],
    [depth, height, width_bytes]: [usize; 3],
) -> Result<(), InteropError> {
    let needed = depth * height * width_bytes;
    if dst.len() < needed {
        return Err(InteropError::CudaBufferTooSmall {
            needed,
            len: dst.len(),
        });
    }
    ctx.bind_to_thread()
        .map_err(cuda_error("cuCtxSetCurrent"))?;
    for z in 0..depth {
        let copy = sys::CUDA_MEMCPY2D {
            srcXInBytes: 0,
            srcY: 0,
            srcMemoryType: sys::CUmemorytype::CU_MEMORYTYPE_DEVICE,
            srcHost: std::ptr::null(),
            srcDevice: src.ptr + (z * src.plane) as u64,
            srcArray: std::ptr::null_mut(),
            srcPitch: src.row,
            dstXInBytes: 0,
            dstY: 0,
            dstMemoryType: sys::CUmemorytype::CU_MEMORYTYPE_HOST,
            dstHost: dst[z * height * width_bytes..].as_mut_ptr().cast(),
            dstDevice: 0,
            dstArray: std::ptr::null_mut(),
            dstPitch: width_bytes,
            WidthInBytes: width_bytes,
            Height: height,
        };
        // SAFETY: the host rows lie in `dst` (checked above), which stays borrowed until the
        // stream is synchronized below; `stream` is valid (see `StreamHandle`).
        unsafe { sys::cuMemcpy2DAsync_v2(&copy, stream.0) }
            .result()
            .map_err(cuda_error("cuMemcpy2DAsync (to host)"))?;
    }
    // SAFETY: as above; waits for this stream only.
    unsafe { result::stream::synchronize(stream.0) }.map_err(cuda_error("cuStreamSynchronize"))
}

/// A module loaded from PTX text and the kernels sluice ships (see `kernels.rs`).
pub(crate) struct Module {
    ctx: Arc<CudaContext>,
    module: sys::CUmodule,
    /// Functions looked up so far, by name: launches happen every frame, lookups once.
    functions: parking_lot::Mutex<Vec<(&'static std::ffi::CStr, sys::CUfunction)>>,
}

// SAFETY: driver handles (the module and its functions), used with the context made current.
unsafe impl Send for Module {}
// SAFETY: as above; launching from several threads at once is allowed by the driver, and the
// function list is behind a lock.
unsafe impl Sync for Module {}

/// One kernel argument.
#[derive(Clone, Copy, Debug)]
pub(crate) enum Arg {
    U32(u32),
    U64(u64),
}

impl Module {
    /// JIT-compiles `ptx` (NUL-terminated) for the context's device.
    pub fn load(ctx: &Arc<CudaContext>, ptx: &std::ffi::CStr) -> Result<Self, InteropError> {
        ctx.bind_to_thread()
            .map_err(cuda_error("cuCtxSetCurrent"))?;
        // SAFETY: `ptx` is a NUL-terminated PTX image that lives for the call.
        let module = unsafe { result::module::load_data(ptx.as_ptr().cast()) }
            .map_err(cuda_error("cuModuleLoadData"))?;
        Ok(Module {
            ctx: ctx.clone(),
            module,
            functions: parking_lot::Mutex::new(Vec::new()),
        })
    }

    /// The function `name` of the module, looked up on first use.
    fn function(&self, name: &'static std::ffi::CStr) -> Result<sys::CUfunction, InteropError> {
        let mut functions = self.functions.lock();
        if let Some(&(_, function)) = functions.iter().find(|(n, _)| *n == name) {
            return Ok(function);
        }
        let mut function = MaybeUninit::uninit();
        // SAFETY: a live module of this context (made current by the caller) and a
        // NUL-terminated name.
        unsafe { sys::cuModuleGetFunction(function.as_mut_ptr(), self.module, name.as_ptr()) }
            .result()
            .map_err(cuda_error("cuModuleGetFunction"))?;
        // SAFETY: initialized by the successful call above.
        let function = unsafe { function.assume_init() };
        functions.push((name, function));
        Ok(function)
    }

    /// Launches kernel `name` on `stream` over `grid` blocks of `block` threads.
    ///
    /// Kernel launches write wherever their arguments point: callers (in `kernels.rs`, and
    /// `copy_into_surface`, whose stores trap outside the surface) pass only memory they
    /// checked can hold everything the kernel writes.
    pub fn launch(
        &self,
        name: &'static std::ffi::CStr,
        stream: StreamHandle,
        grid: [u32; 3],
        block: [u32; 3],
        args: &[Arg],
    ) -> Result<(), InteropError> {
        self.ctx
            .bind_to_thread()
            .map_err(cuda_error("cuCtxSetCurrent"))?;
        let function = self.function(name)?;
        let mut values: Vec<Arg> = args.to_vec();
        let mut pointers: Vec<*mut c_void> = values
            .iter_mut()
            .map(|a| match a {
                Arg::U32(v) => (v as *mut u32).cast(),
                Arg::U64(v) => (v as *mut u64).cast(),
            })
            .collect();
        // SAFETY: `pointers` holds one pointer per kernel parameter, each to a value of the
        // parameter's type that lives for the call; the kernels' writes stay within memory
        // the callers checked; `stream` is valid (see `StreamHandle`).
        unsafe {
            sys::cuLaunchKernel(
                function,
                grid[0],
                grid[1],
                grid[2],
                block[0],
                block[1],
                block[2],
                0,
                stream.0,
                pointers.as_mut_ptr(),
                std::ptr::null_mut(),
            )
        }
        .result()
        .map_err(cuda_error("cuLaunchKernel"))
    }
}

impl Drop for Module {
    fn drop(&mut self) {
        let _ = self.ctx.bind_to_thread();
        // SAFETY: the module is live and unloaded once.
        unsafe {
            let _ = result::module::unload(self.module);
        }
    }
}
