//! `Interop`: a Vulkan device opened for sharing memory, and the renderers on it.

use std::sync::Arc;

use sluice_render::RendererOptions;

use crate::error::{DeviceUuid, InteropError};
use crate::handoff::Handoffs;
use crate::vulkan::device::{DeviceIdentity, VulkanDevice};

/// The interop devices opened so far, one per adapter, never closed (see [`Interop`]).
static DEVICES: parking_lot::Mutex<Vec<(wgpu::AdapterInfo, Arc<Shared>)>> =
    parking_lot::Mutex::new(Vec::new());

pub(crate) struct Shared {
    pub vulkan: VulkanDevice,
    pub handoffs: Handoffs,
}

/// How renderers of one `Interop` (and its clones) bring CUDA sources to the GPU: settings of
/// the handle, not of the device that `Interop`s on one adapter share, so that one program's
/// choice (or a test's) does not change another's.
#[cfg(feature = "cuda")]
pub(crate) struct CudaSettings {
    /// Whether CUDA sources shown as images and volumes are copied straight into textures.
    pub direct_cuda_textures: std::sync::atomic::AtomicBool,
    /// How CUDA fills those textures (a `CudaArrayCopy`, as its index).
    pub cuda_array_copy: std::sync::atomic::AtomicU8,
}

#[cfg(feature = "cuda")]
impl Default for CudaSettings {
    fn default() -> Self {
        CudaSettings {
            direct_cuda_textures: std::sync::atomic::AtomicBool::new(true),
            cuda_array_copy: std::sync::atomic::AtomicU8::new(0),
        }
    }
}

impl Shared {
    fn open(adapter: wgpu::Adapter) -> Result<Self, InteropError> {
        Ok(Shared {
            vulkan: VulkanDevice::open(adapter)?,
            handoffs: Handoffs::default(),
        })
    }
}

/// The Vulkan adapter `options` choose; an error if they exclude Vulkan.
fn vulkan_adapter(options: &RendererOptions) -> Result<wgpu::Adapter, InteropError> {
    let backends = options.backends.unwrap_or(wgpu::Backends::all());
    if !backends.contains(wgpu::Backends::VULKAN) {
        return Err(InteropError::VulkanNotRequested {
            requested: format!("{backends:?}"),
        });
    }
    let options = RendererOptions {
        backends: Some(wgpu::Backends::VULKAN),
        ..options.clone()
    };
    Ok(options.choose_adapter()?)
}

/// A Vulkan device opened for GPU interop: it can export and import memory as file
/// descriptors (`VK_KHR_external_memory_fd`) and, where the driver has
/// `VK_KHR_external_semaphore_fd`, share timeline semaphores.
///
/// Renderers made by [`Interop::renderer`] draw on this device and upload device-resident
/// sources ([`crate::VulkanSource`], and CUDA sources with the `cuda` feature) GPU-side.
/// Cloning is cheap and shares the device.
///
/// One device per adapter for the whole process: the first `Interop` on an adapter opens it,
/// every later one on that adapter ([`Interop::new`], [`Interop::with_options`],
/// [`Interop::on_adapter`]; not [`Interop::with_own_device`]) shares it, and it is kept until
/// the process exits, as the devices of plain renderers are (docs/architecture.md, "Devices
/// and instances"). NVIDIA's Vulkan driver 580 was seen to deadlock when one thread destroyed
/// a device while another submitted to a second; a test binary that made and dropped one
/// `Interop` per test, on four threads, hung in 3 of 30 runs on an H100, and has not since it
/// shares the device (120 runs). The SIGSEGVs whose stacks came back (in two other test
/// binaries) were threads enumerating adapters at once, which sluice-render now does once per
/// process.
#[derive(Clone)]
pub struct Interop {
    shared: Arc<Shared>,
    #[cfg(feature = "cuda")]
    cuda: Arc<CudaSettings>,
}

impl Interop {
    /// Opens the Vulkan adapter a [`sluice_render::Renderer`] with default options would
    /// choose. Reads no environment variable: `Interop::with_options(&RendererOptions::from_env()?)`
    /// honours `SLUICE_BACKEND` and `SLUICE_ADAPTER`.
    pub fn new() -> Result<Self, InteropError> {
        Interop::with_options(&RendererOptions::default())
    }

    /// Opens the Vulkan adapter `options` choose. Fails with
    /// [`InteropError::VulkanNotRequested`] if the options exclude Vulkan (GL, say).
    pub fn with_options(options: &RendererOptions) -> Result<Self, InteropError> {
        Interop::on_adapter(vulkan_adapter(options)?)
    }

    /// Opens a device of its own on the adapter `options` choose: shared with no other
    /// `Interop`, and closed once this one, its clones and everything made on it are gone.
    /// For memory shared between two devices of one process (one exports, the other imports),
    /// and for programs that must give a device's memory back before they exit. Close such a
    /// device while no other thread works on the GPU: NVIDIA's driver 580 deadlocked when one
    /// thread closed a device while another submitted to its own.
    pub fn with_own_device(options: &RendererOptions) -> Result<Self, InteropError> {
        Ok(Interop::from_shared(Arc::new(Shared::open(
            vulkan_adapter(options)?,
        )?)))
    }

    /// Opens `adapter`, which must be a Vulkan adapter whose driver has
    /// `VK_KHR_external_memory_fd`, or shares the device an earlier `Interop` opened on it
    /// (one per adapter, kept for the life of the process). Adapters are told apart by their
    /// `wgpu::AdapterInfo`: an adapter of the same GPU from another `wgpu::Instance` gets the
    /// device opened first, on that one's instance; [`Interop::with_own_device`] opens one of
    /// its own.
    pub fn on_adapter(adapter: wgpu::Adapter) -> Result<Self, InteropError> {
        let info = adapter.get_info();
        // Held while a device opens: devices are not created on several threads at once.
        let mut devices = DEVICES.lock();
        if let Some((_, shared)) = devices.iter().find(|(i, _)| *i == info) {
            return Ok(Interop::from_shared(shared.clone()));
        }
        let shared = Arc::new(Shared::open(adapter)?);
        sluice_render::keep_until_exit(&shared.vulkan.device);
        devices.push((info, shared.clone()));
        Ok(Interop::from_shared(shared))
    }

    /// What the device is: UUIDs, name, driver.
    pub fn identity(&self) -> &DeviceIdentity {
        &self.shared.vulkan.identity
    }

    /// The device's UUID, as CUDA and other processes see it.
    pub fn device_uuid(&self) -> DeviceUuid {
        self.shared.vulkan.identity.device_uuid
    }

    /// Whether timeline semaphores can be shared with other APIs and processes
    /// (`VK_KHR_external_semaphore_fd`). Without them, producers and renderers order their
    /// work on the CPU (a producer finishes its GPU work before publishing; a renderer's frame
    /// completes before the producer writes again).
    pub fn supports_shared_semaphores(&self) -> bool {
        self.shared.vulkan.semaphore_fd.is_some()
    }

    /// The driver's `minImportedHostPointerAlignment` where it has
    /// `VK_EXT_external_memory_host` (host pages can then be imported, see
    /// [`crate::HostImportSource`]); `None` without the extension.
    pub fn host_import_alignment(&self) -> Option<u64> {
        self.shared.vulkan.host_memory.as_ref().map(|h| h.alignment)
    }

    /// The wgpu device, for the caller's own GPU work on shared buffers.
    pub fn device(&self) -> &wgpu::Device {
        &self.shared.vulkan.device
    }

    /// The wgpu queue of [`Interop::device`].
    pub fn queue(&self) -> &wgpu::Queue {
        &self.shared.vulkan.queue
    }

    /// The wgpu adapter.
    pub fn adapter(&self) -> &wgpu::Adapter {
        &self.shared.vulkan.adapter
    }

    /// Whether renderers on this device draw 2-D [`crate::HostBufferSource`] buffers straight
    /// from their pages rather than copy them: on lavapipe only (docs/gpu-interop.md, "Drawn
    /// where they lie, on lavapipe").
    pub fn draws_host_buffers_in_place(&self) -> bool {
        crate::upload::samples_host_pages(&self.adapter().get_info())
    }

    /// Chooses how renderers made from this `Interop` (or its clones; every `Interop::new` starts
    /// with the default) bring [`crate::cuda::CudaSource`]s shown as images and volumes to the
    /// GPU: `true` (the default), CUDA copies the source straight into a
    /// texture it maps as a CUDA array, which the proxy binds; `false`, CUDA copies it into a
    /// staging buffer and the renderer copies that into the proxy's texture (one more copy of
    /// every texel, on the renderer's queue). Both show the same pixels; the switch is there
    /// to compare them and to rule one out when diagnosing. Takes effect at the next change.
    #[cfg(feature = "cuda")]
    pub fn set_direct_cuda_textures(&self, direct: bool) {
        self.cuda
            .direct_cuda_textures
            .store(direct, std::sync::atomic::Ordering::Relaxed);
    }

    /// Whether CUDA sources are copied straight into textures (see
    /// [`Interop::set_direct_cuda_textures`]).
    #[cfg(feature = "cuda")]
    pub fn direct_cuda_textures(&self) -> bool {
        self.cuda
            .direct_cuda_textures
            .load(std::sync::atomic::Ordering::Relaxed)
    }

    /// Fails unless `uuid` is this device's.
    pub(crate) fn check_uuid(&self, uuid: [u8; 16]) -> Result<(), InteropError> {
        let expected = self.device_uuid();
        if expected.0 != uuid {
            return Err(InteropError::DeviceMismatch {
                expected,
                found: DeviceUuid(uuid),
            });
        }
        Ok(())
    }

    pub(crate) fn vulkan(&self) -> &VulkanDevice {
        &self.shared.vulkan
    }

    pub(crate) fn shared(&self) -> &Shared {
        &self.shared
    }

    /// This handle's CUDA settings (shared by its clones).
    #[cfg(feature = "cuda")]
    pub(crate) fn cuda_settings(&self) -> &CudaSettings {
        &self.cuda
    }

    /// A handle on `shared` with settings of its own.
    fn from_shared(shared: Arc<Shared>) -> Self {
        Interop {
            shared,
            #[cfg(feature = "cuda")]
            cuda: Arc::new(CudaSettings::default()),
        }
    }

    pub(crate) fn semaphore_fd(
        &self,
    ) -> Result<&ash::khr::external_semaphore_fd::Device, InteropError> {
        self.shared
            .vulkan
            .semaphore_fd
            .as_ref()
            .ok_or_else(|| InteropError::MissingExtension {
                adapter: self.shared.vulkan.identity.name.clone(),
                extension: "VK_KHR_external_semaphore_fd",
                needed_for: "sharing timeline semaphores with CUDA or other processes",
            })
    }
}

impl std::fmt::Debug for Interop {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Interop")
            .field("identity", self.identity())
            .field("shared_semaphores", &self.supports_shared_semaphores())
            .finish()
    }
}
