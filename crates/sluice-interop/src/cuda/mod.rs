//! CUDA sources (feature `cuda`): data in CUDA memory reaches the renderer without the CPU.
//!
//! - [`CudaSource`]: memory the user owns (a device pointer with shape, pitch, element type
//!   and stream, from PyTorch, CuPy or cudarc). Each frame that shows a new version, a kernel
//!   on the user's stream copies it straight into a texture the renderer exported and CUDA
//!   maps as an array, which the visuals then draw (mesh attributes go through a staging
//!   buffer and one GPU copy); shared timeline semaphores order the two APIs, never a
//!   context- or device-wide synchronize.
//! - [`CudaWritableSource`]: memory the renderer owns and exports, handed to CUDA as a device
//!   pointer for the user's kernels to write straight into, between
//!   [`CudaWritableSource::begin_write`] and [`CudaWrite::end`].
//!
//! - [`HostStagedCudaSource`]: the explicit opt-in to the slow path (device to host, then a
//!   normal upload), for renderers that cannot share memory (GL). Never taken silently.
//!
//! [`Interop::cuda`] finds the CUDA device whose UUID is the renderer's Vulkan device's. The
//! CUDA driver is loaded at run time: without it every call answers
//! [`InteropError::NoCudaDriver`] (cudarc would panic; sluice checks first).

pub mod diagnostics;
#[allow(unsafe_code)]
mod driver;
pub mod kernels;
pub(crate) mod pool;
mod source;
pub(crate) mod staging;
pub(crate) mod textures;

use std::collections::HashMap;
use std::sync::{Arc, OnceLock};

pub use cudarc;
use cudarc::driver::{result, CudaContext};
use parking_lot::Mutex;
pub use source::{CudaSource, CudaWritableSource, CudaWrite, HostStagedCudaSource};
pub use textures::CudaArrayCopy;

use crate::error::{DeviceUuid, InteropError};
use crate::interop::Interop;
use driver::cuda_error;

/// Fails with the reason if this machine has no usable CUDA driver library. Tests call it to
/// say why they skip.
pub fn driver_available() -> Result<(), InteropError> {
    if !driver::library_present() {
        return Err(InteropError::NoCudaDriver(
            "the CUDA driver library (libcuda.so) could not be loaded; CUDA sources need an NVIDIA GPU and driver".into(),
        ));
    }
    result::init().map_err(|e| InteropError::NoCudaDriver(format!("cuInit failed: {e}")))
}

/// The UUIDs of all CUDA devices, by ordinal.
pub fn device_uuids() -> Result<Vec<(usize, DeviceUuid)>, InteropError> {
    driver_available()?;
    let count = result::device::get_count().map_err(cuda_error("cuDeviceGetCount"))?;
    (0..count)
        .map(|ordinal| {
            let device = result::device::get(ordinal).map_err(cuda_error("cuDeviceGet"))?;
            let uuid = result::device::get_uuid(device).map_err(cuda_error("cuDeviceGetUuid"))?;
            Ok((ordinal as usize, DeviceUuid(uuid.bytes.map(|b| b as u8))))
        })
        .collect()
}

/// The CUDA side of one interop device: its context, and the CUDA memory sources vouched for.
pub(crate) struct CudaDevice {
    pub ctx: Arc<CudaContext>,
    pub uuid: DeviceUuid,
    /// (pointer, stream, event) of live `CudaSource`s, with how many sources name each: the
    /// upload only ever hands handles from this set to the driver.
    vouched: Mutex<HashMap<(u64, u64, u64), usize>>,
    kernels: OnceLock<driver::Module>,
    /// The surface copy kernels (`surface.ll`), loaded on first use.
    surface_kernels: OnceLock<driver::Module>,
}

/// The CUDA devices opened in this process, by UUID: one per GPU however many [`Interop`]s
/// show it (each holds its GPU's primary context, which is per device anyway), kept while a
/// [`CudaInterop`] or a source uses it.
static OPENED: Mutex<Vec<std::sync::Weak<CudaDevice>>> = Mutex::new(Vec::new());

impl CudaDevice {
    /// The device with `uuid`, if one is open.
    pub fn opened(uuid: DeviceUuid) -> Option<Arc<CudaDevice>> {
        let mut opened = OPENED.lock();
        opened.retain(|d| d.strong_count() > 0);
        opened
            .iter()
            .filter_map(std::sync::Weak::upgrade)
            .find(|d| d.uuid == uuid)
    }

    /// The device with `uuid`: the one open, or a new one on `ctx`.
    fn open(uuid: DeviceUuid, ctx: Arc<CudaContext>) -> Arc<CudaDevice> {
        let mut opened = OPENED.lock();
        if let Some(device) = opened
            .iter()
            .filter_map(std::sync::Weak::upgrade)
            .find(|d| d.uuid == uuid)
        {
            return device;
        }
        let device = Arc::new(CudaDevice {
            ctx,
            uuid,
            vouched: Mutex::new(HashMap::new()),
            kernels: OnceLock::new(),
            surface_kernels: OnceLock::new(),
        });
        opened.push(Arc::downgrade(&device));
        device
    }

    pub fn vouch(&self, key: (u64, u64, u64)) {
        *self.vouched.lock().entry(key).or_default() += 1;
    }

    pub fn unvouch(&self, key: (u64, u64, u64)) {
        let mut vouched = self.vouched.lock();
        if let Some(count) = vouched.get_mut(&key) {
            *count -= 1;
            if *count == 0 {
                vouched.remove(&key);
            }
        }
    }

    pub fn is_vouched(&self, key: (u64, u64, u64)) -> bool {
        self.vouched.lock().contains_key(&key)
    }

    pub fn kernels(&self) -> Result<&driver::Module, InteropError> {
        if let Some(module) = self.kernels.get() {
            return Ok(module);
        }
        let module = driver::Module::load(&self.ctx, kernels::PTX)?;
        Ok(self.kernels.get_or_init(|| module))
    }

    pub fn surface_kernels(&self) -> Result<&driver::Module, InteropError> {
        if let Some(module) = self.surface_kernels.get() {
            return Ok(module);
        }
        let module = driver::Module::load(&self.ctx, SURFACE_PTX)?;
        Ok(self.surface_kernels.get_or_init(|| module))
    }
}

/// The surface copy kernels, compiled from `surface.ll` by LLVM's NVPTX back end (the command
/// is in that file).
const SURFACE_PTX: &std::ffi::CStr = match std::ffi::CStr::from_bytes_with_nul(
    concat!(include_str!("surface.ptx"), "\0").as_bytes(),
) {
    Ok(ptx) => ptx,
    Err(_) => panic!("surface.ptx holds a NUL byte"),
};

/// CUDA interop on an [`Interop`] device: the CUDA context of the same GPU (its primary
/// context, which PyTorch and CuPy use too). Cloning shares it.
#[derive(Clone)]
pub struct CudaInterop {
    interop: Interop,
    device: Arc<CudaDevice>,
}

impl Interop {
    /// CUDA interop on this device: finds the CUDA device with this Vulkan device's UUID and
    /// retains its primary context. Needs the CUDA driver and `VK_KHR_external_semaphore_fd`
    /// (the two APIs order their work with a shared timeline semaphore).
    pub fn cuda(&self) -> Result<CudaInterop, InteropError> {
        let uuid = self.device_uuid();
        if let Some(device) = CudaDevice::opened(uuid) {
            return Ok(CudaInterop {
                interop: self.clone(),
                device,
            });
        }
        driver_available()?;
        self.semaphore_fd()?;
        let devices = device_uuids()?;
        let Some(&(ordinal, _)) = devices.iter().find(|(_, u)| *u == uuid) else {
            return Err(InteropError::NoMatchingCudaDevice {
                adapter: self.identity().name.clone(),
                vulkan: uuid,
                cuda: devices,
            });
        };
        let ctx = CudaContext::new(ordinal).map_err(cuda_error("cuDevicePrimaryCtxRetain"))?;
        Ok(CudaInterop {
            interop: self.clone(),
            device: CudaDevice::open(uuid, ctx),
        })
    }
}

impl CudaInterop {
    /// The CUDA context (the device's primary context), for the user's streams and memory.
    pub fn context(&self) -> &Arc<CudaContext> {
        &self.device.ctx
    }

    /// The GPU's UUID (the same for CUDA and Vulkan).
    pub fn device_uuid(&self) -> DeviceUuid {
        self.device.uuid
    }

    /// The Vulkan side.
    pub fn interop(&self) -> &Interop {
        &self.interop
    }

    /// Free and total device memory in bytes (`cuMemGetInfo`), for measuring what sluice
    /// holds.
    pub fn memory_info(&self) -> Result<(usize, usize), InteropError> {
        self.device
            .ctx
            .mem_get_info()
            .map_err(cuda_error("cuMemGetInfo"))
    }

    pub(crate) fn device(&self) -> &Arc<CudaDevice> {
        &self.device
    }
}

impl std::fmt::Debug for CudaInterop {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CudaInterop")
            .field("ordinal", &self.device.ctx.ordinal())
            .field("uuid", &self.device.uuid)
            .finish()
    }
}
