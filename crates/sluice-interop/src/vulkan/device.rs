//! Opening a wgpu device with the Vulkan extensions interop needs, and what that device is.
//!
//! One of the crate's `unsafe` modules. It reaches under wgpu through `wgpu::hal` to add
//! device extensions at creation and to keep the raw `ash` handles, and asks the driver
//! directly (with `ash`) for the device's UUID and what it can share. The handles it keeps are
//! valid as long as the `wgpu::Device` they came with, which [`VulkanDevice`] holds beside
//! them.

use ash::{ext, khr, vk};
use wgpu::hal::api::Vulkan;
use wgpu::hal::vulkan::CreateDeviceCallbackArgs;

use crate::error::{DeviceUuid, InteropError};

/// How sluice creates every shareable buffer (exported or imported): copies both ways, storage
/// (compute writes) and vertex data used in place. Both sides of a share use the same flags,
/// so the driver allows the same memory types to both.
pub(crate) const BUFFER_USAGE: vk::BufferUsageFlags = vk::BufferUsageFlags::from_raw(
    vk::BufferUsageFlags::TRANSFER_SRC.as_raw()
        | vk::BufferUsageFlags::TRANSFER_DST.as_raw()
        | vk::BufferUsageFlags::STORAGE_BUFFER.as_raw()
        | vk::BufferUsageFlags::VERTEX_BUFFER.as_raw(),
);

/// The wgpu usages matching [`BUFFER_USAGE`].
pub(crate) const WGPU_BUFFER_USAGE: wgpu::BufferUsages = wgpu::BufferUsages::COPY_SRC
    .union(wgpu::BufferUsages::COPY_DST)
    .union(wgpu::BufferUsages::STORAGE)
    .union(wgpu::BufferUsages::VERTEX);

/// What a Vulkan device is, for matching it with CUDA devices and other processes.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DeviceIdentity {
    /// `VkPhysicalDeviceIDProperties::deviceUUID`: equal to CUDA's `cuDeviceGetUuid` for the
    /// same GPU.
    pub device_uuid: DeviceUuid,
    /// `VkPhysicalDeviceIDProperties::driverUUID`: opaque fds are only exchangeable between
    /// devices whose driver UUIDs are equal too.
    pub driver_uuid: DeviceUuid,
    /// The adapter's name.
    pub name: String,
    /// The driver's name and version, as the driver reports them.
    pub driver: String,
}

/// Whether buffers can be shared as opaque fds with [`BUFFER_USAGE`].
#[derive(Clone, Copy, Debug)]
pub(crate) struct BufferSharing {
    pub exportable: bool,
    pub importable: bool,
    /// The driver shares such buffers only as dedicated allocations.
    pub dedicated_only: bool,
    /// `VkExternalMemoryFeatureFlags`, for error messages.
    pub features: vk::ExternalMemoryFeatureFlags,
}

/// A wgpu device opened for interop, with its raw Vulkan handles.
///
/// The `ash` handles are copies of wgpu's: they stay valid while `device` lives, and this
/// struct holds it, so every use through a `VulkanDevice` is on a live device.
pub(crate) struct VulkanDevice {
    pub adapter: wgpu::Adapter,
    pub device: wgpu::Device,
    pub queue: wgpu::Queue,
    pub raw: ash::Device,
    /// The instance and physical device under `device` (for format queries).
    pub instance: ash::Instance,
    pub physical: vk::PhysicalDevice,
    pub memory_fd: khr::external_memory_fd::Device,
    /// Present where the driver has `VK_KHR_external_semaphore_fd`, timeline semaphores and
    /// exports them as opaque fds.
    pub semaphore_fd: Option<khr::external_semaphore_fd::Device>,
    pub memory_types: Vec<vk::MemoryType>,
    pub identity: DeviceIdentity,
    pub buffers: BufferSharing,
    /// Present where the driver has `VK_EXT_external_memory_host` (enabled at creation).
    pub host_memory: Option<HostMemory>,
}

/// `VK_EXT_external_memory_host` on a device: host allocations imported as device memory.
#[derive(Clone)]
pub(crate) struct HostMemory {
    pub ext: ext::external_memory_host::Device,
    /// `minImportedHostPointerAlignment`: pointers and sizes imported must be multiples of it.
    pub alignment: u64,
    /// `maxBufferSize` (Vulkan 1.3; `u64::MAX` before) and `maxMemoryAllocationSize`: an
    /// import over either is refused. wgpu checks its own, lower cap on the buffers it makes,
    /// not on one made from raw handles.
    pub max_buffer: u64,
    pub max_allocation: u64,
}

impl VulkanDevice {
    /// Opens `adapter` with `VK_KHR_external_memory_fd` (required) and
    /// `VK_KHR_external_semaphore_fd` (where supported).
    pub fn open(adapter: wgpu::Adapter) -> Result<Self, InteropError> {
        let info = adapter.get_info();
        if info.backend != wgpu::Backend::Vulkan {
            return Err(not_vulkan(&info));
        }
        // What a renderer uses where the adapter has it (filterable formats, a pipeline cache).
        let features = sluice_render::optional_features(&adapter);
        let limits = adapter.limits();
        let (open, semaphores, host) = {
            // SAFETY: the guard is used only inside this block and is dropped before the
            // device is created from the adapter; nothing it refers to is destroyed.
            let hal_adapter =
                unsafe { adapter.as_hal::<Vulkan>() }.ok_or_else(|| not_vulkan(&info))?;
            let caps = hal_adapter.physical_device_capabilities();
            if !caps.supports_extension(khr::external_memory_fd::NAME) {
                return Err(InteropError::MissingExtension {
                    adapter: info.name.clone(),
                    extension: "VK_KHR_external_memory_fd",
                    needed_for: "sharing memory by file descriptor",
                });
            }
            let semaphores = caps.supports_extension(khr::external_semaphore_fd::NAME)
                && caps.properties().api_version >= vk::API_VERSION_1_2;
            let host = caps.supports_extension(ext::external_memory_host::NAME);
            let callback = Box::new(move |args: CreateDeviceCallbackArgs<'_, '_, '_>| {
                let wanted = [
                    Some(khr::external_memory_fd::NAME),
                    semaphores.then_some(khr::external_semaphore_fd::NAME),
                    host.then_some(ext::external_memory_host::NAME),
                ];
                for extension in wanted.into_iter().flatten() {
                    if !args.extensions.contains(&extension) {
                        args.extensions.push(extension);
                    }
                }
            });
            // SAFETY: the callback only adds extensions the physical device supports (checked
            // above) and removes nothing; features and limits are the adapter's own.
            let open = unsafe {
                hal_adapter.open_with_callback(
                    features,
                    &limits,
                    &wgpu::MemoryHints::Performance,
                    Some(callback),
                )
            }
            .map_err(|e| InteropError::OpenDevice {
                adapter: info.name.clone(),
                reason: e.to_string(),
            })?;
            (open, semaphores, host)
        };
        let raw = open.device.raw_device().clone();
        let physical = open.device.raw_physical_device();
        let instance = open.device.shared_instance().raw_instance().clone();
        let memory_fd = khr::external_memory_fd::Device::new(&instance, &raw);
        let semaphore_fd = (semaphores && timeline_semaphores_shareable(&instance, physical))
            .then(|| khr::external_semaphore_fd::Device::new(&instance, &raw));
        // SAFETY: `physical` is the live physical device `instance` enumerated.
        let memory = unsafe { instance.get_physical_device_memory_properties(physical) };
        let memory_types = memory.memory_types_as_slice().to_vec();
        let identity = identity(&instance, physical, &info);
        let buffers = buffer_sharing(&instance, physical);
        let host_memory = host.then(|| {
            let (alignment, max_buffer, max_allocation) =
                host_memory_properties(&instance, physical);
            HostMemory {
                ext: ext::external_memory_host::Device::new(&instance, &raw),
                alignment,
                max_buffer,
                max_allocation,
            }
        });

        let desc = wgpu::DeviceDescriptor {
            label: Some("sluice interop"),
            required_features: features,
            required_limits: limits,
            experimental_features: wgpu::ExperimentalFeatures::disabled(),
            memory_hints: wgpu::MemoryHints::Performance,
            trace: wgpu::Trace::Off,
        };
        // SAFETY: `open` comes from this adapter's hal adapter, whose guard is released, and
        // was opened with exactly `desc.required_features`.
        let (device, queue) = unsafe { adapter.create_device_from_hal::<Vulkan>(open, &desc) }
            .map_err(|e| InteropError::OpenDevice {
                adapter: info.name.clone(),
                reason: e.to_string(),
            })?;
        Ok(VulkanDevice {
            adapter,
            device,
            queue,
            raw,
            instance,
            physical,
            memory_fd,
            semaphore_fd,
            memory_types,
            identity,
            buffers,
            host_memory,
        })
    }

    /// The first memory type allowed by `allowed` that is device-local, else the first allowed.
    pub fn choose_memory_type(
        &self,
        allowed: u32,
        purpose: &'static str,
    ) -> Result<u32, InteropError> {
        let allowed_types = || {
            self.memory_types
                .iter()
                .enumerate()
                .filter(move |(i, _)| allowed & (1 << i) != 0)
        };
        let device_local = |t: &vk::MemoryType| {
            t.property_flags
                .contains(vk::MemoryPropertyFlags::DEVICE_LOCAL)
        };
        // Plain video memory first (a device-local type the host can also map is a limited
        // BAR window on many GPUs), then any device-local type, then anything allowed.
        allowed_types()
            .find(|(_, t)| {
                device_local(t)
                    && !t
                        .property_flags
                        .contains(vk::MemoryPropertyFlags::HOST_VISIBLE)
            })
            .or_else(|| allowed_types().find(|(_, t)| device_local(t)))
            .or_else(|| allowed_types().next())
            .map(|(i, _)| i as u32)
            .ok_or(InteropError::NoMemoryType {
                purpose,
                allowed,
                count: self.memory_types.len() as u32,
            })
    }
}

fn not_vulkan(info: &wgpu::AdapterInfo) -> InteropError {
    InteropError::NotVulkan {
        adapter: info.name.clone(),
        backend: format!("{:?}", info.backend),
    }
}

fn identity(
    instance: &ash::Instance,
    physical: vk::PhysicalDevice,
    info: &wgpu::AdapterInfo,
) -> DeviceIdentity {
    let mut id = vk::PhysicalDeviceIDProperties::default();
    let mut props = vk::PhysicalDeviceProperties2::default().push_next(&mut id);
    // SAFETY: `physical` is live; the chain holds only a Vulkan 1.1 core structure, and wgpu
    // opens Vulkan devices of version 1.1 or later.
    unsafe { instance.get_physical_device_properties2(physical, &mut props) };
    DeviceIdentity {
        device_uuid: DeviceUuid(id.device_uuid),
        driver_uuid: DeviceUuid(id.driver_uuid),
        name: info.name.clone(),
        driver: format!("{} {}", info.driver, info.driver_info)
            .trim()
            .to_string(),
    }
}

/// `minImportedHostPointerAlignment`, `maxBufferSize` (`u64::MAX` below Vulkan 1.3) and
/// `maxMemoryAllocationSize`.
fn host_memory_properties(
    instance: &ash::Instance,
    physical: vk::PhysicalDevice,
) -> (u64, u64, u64) {
    // SAFETY: `physical` is the live physical device `instance` enumerated.
    let api = unsafe { instance.get_physical_device_properties(physical) }.api_version;
    let mut host = vk::PhysicalDeviceExternalMemoryHostPropertiesEXT::default();
    let mut maintenance3 = vk::PhysicalDeviceMaintenance3Properties::default();
    let mut maintenance4 = vk::PhysicalDeviceMaintenance4Properties::default();
    let mut props = vk::PhysicalDeviceProperties2::default()
        .push_next(&mut host)
        .push_next(&mut maintenance3);
    let has_maintenance4 = api >= vk::API_VERSION_1_3;
    if has_maintenance4 {
        props = props.push_next(&mut maintenance4);
    }
    // SAFETY: `physical` is live and has `VK_EXT_external_memory_host` (checked by the
    // caller); maintenance 3 is Vulkan 1.1 core, and maintenance 4 is chained only where the
    // device is Vulkan 1.3.
    unsafe { instance.get_physical_device_properties2(physical, &mut props) };
    let max_buffer = if has_maintenance4 {
        maintenance4.max_buffer_size
    } else {
        u64::MAX
    };
    (
        host.min_imported_host_pointer_alignment,
        max_buffer,
        maintenance3.max_memory_allocation_size,
    )
}

fn buffer_sharing(instance: &ash::Instance, physical: vk::PhysicalDevice) -> BufferSharing {
    let info = vk::PhysicalDeviceExternalBufferInfo::default()
        .usage(BUFFER_USAGE)
        .handle_type(vk::ExternalMemoryHandleTypeFlags::OPAQUE_FD);
    let mut props = vk::ExternalBufferProperties::default();
    // SAFETY: `physical` is live; both structures are plain Vulkan 1.1 core ones.
    unsafe { instance.get_physical_device_external_buffer_properties(physical, &info, &mut props) };
    let features = props.external_memory_properties.external_memory_features;
    BufferSharing {
        exportable: features.contains(vk::ExternalMemoryFeatureFlags::EXPORTABLE),
        importable: features.contains(vk::ExternalMemoryFeatureFlags::IMPORTABLE),
        dedicated_only: features.contains(vk::ExternalMemoryFeatureFlags::DEDICATED_ONLY),
        features,
    }
}

fn timeline_semaphores_shareable(instance: &ash::Instance, physical: vk::PhysicalDevice) -> bool {
    let mut timeline =
        vk::SemaphoreTypeCreateInfo::default().semaphore_type(vk::SemaphoreType::TIMELINE);
    let info = vk::PhysicalDeviceExternalSemaphoreInfo::default()
        .handle_type(vk::ExternalSemaphoreHandleTypeFlags::OPAQUE_FD)
        .push_next(&mut timeline);
    let mut props = vk::ExternalSemaphoreProperties::default();
    // SAFETY: `physical` is live and supports Vulkan 1.2 (checked by the caller), which has
    // `VkSemaphoreTypeCreateInfo` in core.
    unsafe {
        instance.get_physical_device_external_semaphore_properties(physical, &info, &mut props)
    };
    props.external_semaphore_features.contains(
        vk::ExternalSemaphoreFeatureFlags::EXPORTABLE
            | vk::ExternalSemaphoreFeatureFlags::IMPORTABLE,
    )
}
