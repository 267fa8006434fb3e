//! Vulkan buffers whose memory is shared by file descriptor: exported by the renderer's
//! device, or imported from another device, API or process.
//!
//! One of the crate's `unsafe` modules: it creates `VkBuffer`s and `VkDeviceMemory` with
//! `ash`, hands both to wgpu (`Buffer::from_raw_managed`, so wgpu frees them with the
//! `wgpu::Buffer`), and exports or imports opaque fds (`VK_KHR_external_memory_fd`).
//!
//! Ownership: an exported buffer's memory belongs to its `wgpu::Buffer`; every fd exported
//! from it is a new reference to the same memory, which lives until the buffer and every
//! importer have let go. An import takes a duplicate of the caller's fd, which Vulkan owns
//! once the import succeeded (and which is closed here when it failed).

use std::os::fd::{AsRawFd, FromRawFd, IntoRawFd, OwnedFd};
use std::sync::Arc;

use ash::vk;
use sluice_core::VulkanMemory;
use wgpu::hal::api::Vulkan;

use super::device::{VulkanDevice, BUFFER_USAGE, WGPU_BUFFER_USAGE};
use crate::error::InteropError;
use crate::interop::Interop;
use crate::source::Pitches;

/// Identity of a shared fd: the address of its `Arc`. Entries keep a `Weak` to it, so the
/// address cannot be reused by another fd while an entry names it.
pub(crate) fn fd_key(fd: &Arc<OwnedFd>) -> usize {
    Arc::as_ptr(fd) as usize
}

const OPAQUE_FD: vk::ExternalMemoryHandleTypeFlags = vk::ExternalMemoryHandleTypeFlags::OPAQUE_FD;

/// A buffer on the renderer's device whose memory can be exported as file descriptors, for
/// CUDA or another process to write into (or read from).
///
/// It is an ordinary `wgpu::Buffer` too (copy source and destination, storage, vertex), so
/// the device that owns it can fill it with its own GPU work.
pub struct ExportedBuffer {
    interop: Interop,
    buffer: wgpu::Buffer,
    /// Owned by `buffer`: wgpu frees it when the buffer is destroyed.
    memory: vk::DeviceMemory,
    allocation_size: u64,
    memory_type_index: u32,
    dedicated: bool,
}

impl ExportedBuffer {
    pub(crate) fn new(interop: &Interop, size: u64) -> Result<Self, InteropError> {
        let dev = interop.vulkan();
        if size == 0 {
            return Err(InteropError::EmptyBuffer);
        }
        if !dev.buffers.exportable {
            return Err(not_shareable(dev, "export"));
        }
        let raw = RawBuffer::create(dev, size)?;
        let (requirements, dedicated_required) = raw.requirements();
        let dedicated = dedicated_required || dev.buffers.dedicated_only;
        let memory_type_index =
            dev.choose_memory_type(requirements.memory_type_bits, "an exported buffer")?;
        let mut export = vk::ExportMemoryAllocateInfo::default().handle_types(OPAQUE_FD);
        let mut dedicated_info = vk::MemoryDedicatedAllocateInfo::default().buffer(raw.handle);
        let mut info = vk::MemoryAllocateInfo::default()
            .allocation_size(requirements.size)
            .memory_type_index(memory_type_index)
            .push_next(&mut export);
        if dedicated {
            info = info.push_next(&mut dedicated_info);
        }
        // SAFETY: a valid allocation info whose pNext chain (export info, optionally the
        // dedicated buffer) lives until the call returns.
        let memory = unsafe { dev.raw.allocate_memory(&info, None) }
            .map_err(|e| InteropError::vulkan("vkAllocateMemory (exportable)", e))?;
        let buffer =
            raw.bind_and_wrap(memory, size, requirements.size, "sluice exported buffer")?;
        Ok(ExportedBuffer {
            interop: interop.clone(),
            buffer,
            memory,
            allocation_size: requirements.size,
            memory_type_index,
            dedicated,
        })
    }

    /// The buffer, for the owning device's own GPU work (compute writes, copies, vertices).
    pub fn buffer(&self) -> &wgpu::Buffer {
        &self.buffer
    }

    /// Bytes the buffer was asked for.
    pub fn size(&self) -> u64 {
        self.buffer.size()
    }

    /// Bytes of the memory behind it (at least [`ExportedBuffer::size`]); importers pass this.
    pub fn allocation_size(&self) -> u64 {
        self.allocation_size
    }

    /// The Vulkan memory type it was allocated from; importers must name the same.
    pub fn memory_type_index(&self) -> u32 {
        self.memory_type_index
    }

    /// Whether the memory is a dedicated allocation (CUDA imports it with
    /// `CUDA_EXTERNAL_MEMORY_DEDICATED` then).
    pub fn is_dedicated(&self) -> bool {
        self.dedicated
    }

    /// The interop device the buffer lives on.
    pub fn interop(&self) -> &Interop {
        &self.interop
    }

    /// A new file descriptor for the memory (`VK_EXTERNAL_MEMORY_HANDLE_TYPE_OPAQUE_FD_BIT`).
    /// Each call returns a new one; the caller owns it.
    pub fn export_fd(&self) -> Result<OwnedFd, InteropError> {
        let dev = self.interop.vulkan();
        // SAFETY: the guard is only held (it blocks `destroy`) while the fd is taken, and
        // nothing is destroyed through it.
        let guard =
            unsafe { self.buffer.as_hal::<Vulkan>() }.ok_or(InteropError::BufferDestroyed)?;
        // SAFETY: `memory` is alive: it belongs to `buffer`, which is not destroyed (checked
        // above, and the guard keeps it so), and it was allocated exportable as OPAQUE_FD.
        let fd = unsafe { export_memory_fd(dev, self.memory) };
        drop(guard);
        fd
    }

    /// A descriptor of data stored in this buffer from byte `offset` at `pitches`, with a new
    /// file descriptor, for a [`crate::VulkanSource`] here or in another process. It carries
    /// no semaphore; add one where the device shares them.
    pub fn memory(&self, offset: u64, pitches: Pitches) -> Result<VulkanMemory, InteropError> {
        Ok(VulkanMemory {
            fd: std::sync::Arc::new(self.export_fd()?),
            allocation_size: self.allocation_size,
            memory_type_index: self.memory_type_index,
            offset,
            row_pitch: pitches.row,
            plane_pitch: pitches.plane,
            device_uuid: self.interop.device_uuid().0,
            semaphore: None,
        })
    }
}

impl std::fmt::Debug for ExportedBuffer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ExportedBuffer")
            .field("size", &self.size())
            .field("allocation_size", &self.allocation_size)
            .field("memory_type_index", &self.memory_type_index)
            .field("dedicated", &self.dedicated)
            .finish()
    }
}

/// A new opaque fd for `memory` (the caller owns it).
///
/// # Safety
///
/// `memory` is a live allocation of `dev`, made exportable as `OPAQUE_FD`, and stays alive
/// until this returns.
pub(super) unsafe fn export_memory_fd(
    dev: &VulkanDevice,
    memory: vk::DeviceMemory,
) -> Result<OwnedFd, InteropError> {
    let info = vk::MemoryGetFdInfoKHR::default()
        .memory(memory)
        .handle_type(OPAQUE_FD);
    // SAFETY: the caller guarantees `memory` is alive and exportable as OPAQUE_FD.
    let fd = unsafe { dev.memory_fd.get_memory_fd(&info) }
        .map_err(|e| InteropError::vulkan("vkGetMemoryFdKHR", e))?;
    // SAFETY: vkGetMemoryFdKHR returned a new file descriptor that nobody else owns.
    Ok(unsafe { OwnedFd::from_raw_fd(fd) })
}

/// Imports the memory `memory` describes as a `wgpu::Buffer` spanning the whole allocation on
/// `dev`. The descriptor's fd is duplicated, so the caller keeps its own.
pub(crate) fn import_buffer(
    dev: &VulkanDevice,
    memory: &VulkanMemory,
) -> Result<wgpu::Buffer, InteropError> {
    if !dev.buffers.importable {
        return Err(not_shareable(dev, "import"));
    }
    let size = memory.allocation_size;
    if size == 0 {
        return Err(InteropError::EmptyBuffer);
    }
    let index = memory.memory_type_index;
    let raw = RawBuffer::create(dev, size)?;
    let (requirements, dedicated_required) = raw.requirements();
    if requirements.size > size
        || index as usize >= dev.memory_types.len()
        || requirements.memory_type_bits & (1 << index) == 0
    {
        return Err(InteropError::ImportMismatch {
            allocation_size: size,
            memory_type_index: index,
            required: requirements.size,
            allowed: requirements.memory_type_bits,
        });
    }
    let fd = memory.fd.try_clone()?;
    let mut import = vk::ImportMemoryFdInfoKHR::default()
        .handle_type(OPAQUE_FD)
        .fd(fd.as_raw_fd());
    let mut dedicated_info = vk::MemoryDedicatedAllocateInfo::default().buffer(raw.handle);
    let mut info = vk::MemoryAllocateInfo::default()
        .allocation_size(size)
        .memory_type_index(index)
        .push_next(&mut import);
    if dedicated_required || dev.buffers.dedicated_only {
        info = info.push_next(&mut dedicated_info);
    }
    // SAFETY: a valid allocation info; the fd is an open descriptor we own (a duplicate), and
    // the pNext chain lives until the call returns.
    let allocated = unsafe { dev.raw.allocate_memory(&info, None) };
    let memory = allocated.map_err(|e| InteropError::vulkan("vkAllocateMemory (import fd)", e))?;
    // The import succeeded: Vulkan owns the fd now and closes it with the memory.
    let _ = fd.into_raw_fd();
    raw.bind_and_wrap(memory, size, size, "sluice imported buffer")
}

fn not_shareable(dev: &VulkanDevice, action: &'static str) -> InteropError {
    InteropError::NotShareable {
        adapter: dev.identity.name.clone(),
        action,
        features: format!("{:?}", dev.buffers.features),
    }
}

/// A `VkBuffer` created for external memory and not yet handed to wgpu; destroyed on drop
/// unless wrapped.
struct RawBuffer<'a> {
    dev: &'a VulkanDevice,
    handle: vk::Buffer,
}

impl<'a> RawBuffer<'a> {
    fn create(dev: &'a VulkanDevice, size: u64) -> Result<Self, InteropError> {
        let mut external = vk::ExternalMemoryBufferCreateInfo::default().handle_types(OPAQUE_FD);
        let info = vk::BufferCreateInfo::default()
            .size(size)
            .usage(BUFFER_USAGE)
            .sharing_mode(vk::SharingMode::EXCLUSIVE)
            .push_next(&mut external);
        // SAFETY: a valid create info whose pNext chain lives until the call returns.
        let handle = unsafe { dev.raw.create_buffer(&info, None) }
            .map_err(|e| InteropError::vulkan("vkCreateBuffer (external memory)", e))?;
        Ok(RawBuffer { dev, handle })
    }

    /// Memory requirements, and whether the driver requires a dedicated allocation.
    fn requirements(&self) -> (vk::MemoryRequirements, bool) {
        let mut dedicated = vk::MemoryDedicatedRequirements::default();
        let mut requirements = vk::MemoryRequirements2::default().push_next(&mut dedicated);
        let info = vk::BufferMemoryRequirementsInfo2::default().buffer(self.handle);
        // SAFETY: `handle` is a live buffer of this device; Vulkan 1.1 core structures.
        unsafe {
            self.dev
                .raw
                .get_buffer_memory_requirements2(&info, &mut requirements)
        };
        let memory_requirements = requirements.memory_requirements;
        (
            memory_requirements,
            dedicated.requires_dedicated_allocation == vk::TRUE,
        )
    }

    /// Binds `memory` at offset 0 and hands buffer and memory to wgpu, which frees both when
    /// the returned buffer is destroyed. On failure the memory is freed here.
    fn bind_and_wrap(
        mut self,
        memory: vk::DeviceMemory,
        size: u64,
        allocation_size: u64,
        label: &str,
    ) -> Result<wgpu::Buffer, InteropError> {
        // SAFETY: buffer and memory are live, unbound and of this device; the memory type was
        // allowed by the buffer's requirements and the allocation covers them.
        if let Err(e) = unsafe { self.dev.raw.bind_buffer_memory(self.handle, memory, 0) } {
            // SAFETY: the memory was just allocated and nothing uses it.
            unsafe { self.dev.raw.free_memory(memory, None) };
            return Err(InteropError::vulkan("vkBindBufferMemory", e));
        }
        let handle = std::mem::replace(&mut self.handle, vk::Buffer::null());
        // SAFETY: wgpu gets exclusive ownership of the buffer and its memory range (the whole
        // allocation, bound at offset 0); it never maps it.
        let hal = unsafe {
            wgpu::hal::vulkan::Buffer::from_raw_managed(handle, memory, 0, allocation_size)
        };
        let desc = wgpu::BufferDescriptor {
            label: Some(label),
            size,
            usage: WGPU_BUFFER_USAGE,
            mapped_at_creation: false,
        };
        // SAFETY: the buffer was created on this device with `size` bytes and the usages
        // `WGPU_BUFFER_USAGE` maps to, is bound to memory (so initialized as far as wgpu is
        // concerned: its contents are whatever the exporter wrote), and is not empty.
        Ok(unsafe { self.dev.device.create_buffer_from_hal::<Vulkan>(hal, &desc) })
    }
}

impl Drop for RawBuffer<'_> {
    fn drop(&mut self) {
        if self.handle != vk::Buffer::null() {
            // SAFETY: the buffer was never handed to wgpu or the GPU.
            unsafe { self.dev.raw.destroy_buffer(self.handle, None) };
        }
    }
}

impl Interop {
    /// A buffer of `size` bytes whose memory can be exported as file descriptors.
    pub fn export_buffer(&self, size: u64) -> Result<ExportedBuffer, InteropError> {
        ExportedBuffer::new(self, size)
    }

    /// Imports memory another device, API or process exported, as a buffer spanning the whole
    /// allocation (copy source and destination, storage, vertex). The descriptor's fd is
    /// duplicated; the caller keeps its own.
    pub fn import_buffer(&self, memory: &VulkanMemory) -> Result<wgpu::Buffer, InteropError> {
        self.check_uuid(memory.device_uuid)?;
        import_buffer(self.vulkan(), memory)
    }
}
