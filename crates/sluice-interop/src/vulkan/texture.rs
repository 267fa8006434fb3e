//! Textures whose memory is exported as a file descriptor, for another API to write texels
//! into: CUDA maps such memory as a CUDA array and copies into it on its own stream.
//!
//! One of the crate's `unsafe` modules: it creates a `VkImage` (optimal tiling, external
//! memory) and a dedicated `VkDeviceMemory` for it with `ash`, hands both to wgpu
//! (`texture_from_raw` with dedicated memory, so wgpu frees them with the `wgpu::Texture`),
//! and exports the memory as opaque fds (`VK_KHR_external_memory_fd`).
//!
//! Layout: wgpu takes the image over as uninitialized. Before anything else writes to the
//! memory, one copy of a texel out of it moves it to a defined layout (waited for on the
//! host), so that wgpu's later transitions (to shader-read for drawing) keep its contents.
//! Those transitions only ever go between defined layouts, which on the drivers that share
//! images with CUDA preserve what CUDA wrote.

use std::os::fd::OwnedFd;

use ash::vk;
use wgpu::hal::api::Vulkan;

use super::device::VulkanDevice;
use super::memory::export_memory_fd;
use crate::error::InteropError;
use crate::interop::Interop;

const OPAQUE_FD: vk::ExternalMemoryHandleTypeFlags = vk::ExternalMemoryHandleTypeFlags::OPAQUE_FD;

/// How exported textures are used, in Vulkan's words and in wgpu's: sampled (drawn), copied
/// from (the layout set-up) and copied into (by the owning device, if it wants).
const IMAGE_USAGE: vk::ImageUsageFlags = vk::ImageUsageFlags::from_raw(
    vk::ImageUsageFlags::SAMPLED.as_raw()
        | vk::ImageUsageFlags::TRANSFER_SRC.as_raw()
        | vk::ImageUsageFlags::TRANSFER_DST.as_raw(),
);
const WGPU_USAGE: wgpu::TextureUsages = wgpu::TextureUsages::TEXTURE_BINDING
    .union(wgpu::TextureUsages::COPY_SRC)
    .union(wgpu::TextureUsages::COPY_DST);

/// The Vulkan format of a wgpu format sluice uploads device-resident data into (unnormalized
/// integers and floats of 1, 2 or 4 channels); `None` for others.
pub(crate) fn vk_format(format: wgpu::TextureFormat) -> Option<vk::Format> {
    use vk::Format as V;
    use wgpu::TextureFormat as F;
    Some(match format {
        F::R8Uint => V::R8_UINT,
        F::Rg8Uint => V::R8G8_UINT,
        F::Rgba8Uint => V::R8G8B8A8_UINT,
        F::R8Sint => V::R8_SINT,
        F::Rg8Sint => V::R8G8_SINT,
        F::Rgba8Sint => V::R8G8B8A8_SINT,
        F::R16Uint => V::R16_UINT,
        F::Rg16Uint => V::R16G16_UINT,
        F::Rgba16Uint => V::R16G16B16A16_UINT,
        F::R16Sint => V::R16_SINT,
        F::Rg16Sint => V::R16G16_SINT,
        F::Rgba16Sint => V::R16G16B16A16_SINT,
        F::R16Float => V::R16_SFLOAT,
        F::Rg16Float => V::R16G16_SFLOAT,
        F::Rgba16Float => V::R16G16B16A16_SFLOAT,
        F::R32Uint => V::R32_UINT,
        F::Rg32Uint => V::R32G32_UINT,
        F::Rgba32Uint => V::R32G32B32A32_UINT,
        F::R32Sint => V::R32_SINT,
        F::Rg32Sint => V::R32G32_SINT,
        F::Rgba32Sint => V::R32G32B32A32_SINT,
        F::R32Float => V::R32_SFLOAT,
        F::Rg32Float => V::R32G32_SFLOAT,
        F::Rgba32Float => V::R32G32B32A32_SFLOAT,
        _ => return None,
    })
}

/// A 2-D or 3-D texture on the renderer's device whose memory (a dedicated allocation) can be
/// exported as file descriptors. It is an ordinary `wgpu::Texture` (bindable, copyable).
pub struct ExportedTexture {
    interop: Interop,
    texture: wgpu::Texture,
    /// Owned by `texture`: wgpu frees it when the texture is destroyed.
    memory: vk::DeviceMemory,
    allocation_size: u64,
}

impl ExportedTexture {
    pub(crate) fn new(
        interop: &Interop,
        format: wgpu::TextureFormat,
        size: wgpu::Extent3d,
        dimension: wgpu::TextureDimension,
    ) -> Result<Self, InteropError> {
        let dev = interop.vulkan();
        let refuse = |reason: String| InteropError::TextureNotShareable {
            adapter: dev.identity.name.clone(),
            format: format!("{format:?}"),
            dimension: if dimension == wgpu::TextureDimension::D3 {
                "3-D"
            } else {
                "2-D"
            },
            width: size.width,
            height: size.height,
            depth: size.depth_or_array_layers,
            reason,
        };
        let vk_format = vk_format(format)
            .ok_or_else(|| refuse("sluice does not share textures of this format".into()))?;
        let (image_type, depth) = match dimension {
            wgpu::TextureDimension::D2 if size.depth_or_array_layers == 1 => {
                (vk::ImageType::TYPE_2D, 1)
            }
            wgpu::TextureDimension::D3 => (vk::ImageType::TYPE_3D, size.depth_or_array_layers),
            _ => {
                return Err(refuse(
                    "only 2-D textures of one layer and 3-D textures".into(),
                ))
            }
        };
        if size.width == 0 || size.height == 0 || depth == 0 {
            return Err(refuse("a texture needs at least one texel".into()));
        }
        check_exportable(dev, vk_format, image_type, size).map_err(refuse)?;
        let extent = vk::Extent3D {
            width: size.width,
            height: size.height,
            depth,
        };
        let raw = RawImage::create(dev, vk_format, image_type, extent)?;
        let requirements = raw.requirements();
        let memory_type_index =
            dev.choose_memory_type(requirements.memory_type_bits, "an exported texture")?;
        let mut export = vk::ExportMemoryAllocateInfo::default().handle_types(OPAQUE_FD);
        // Images always get dedicated memory: CUDA maps them as arrays from the start of an
        // allocation, and drivers prefer it for shared images.
        let mut dedicated = vk::MemoryDedicatedAllocateInfo::default().image(raw.handle);
        let info = vk::MemoryAllocateInfo::default()
            .allocation_size(requirements.size)
            .memory_type_index(memory_type_index)
            .push_next(&mut export)
            .push_next(&mut dedicated);
        // SAFETY: a valid allocation info whose pNext chain (export info, the dedicated image)
        // lives until the call returns.
        let memory = unsafe { dev.raw.allocate_memory(&info, None) }
            .map_err(|e| InteropError::vulkan("vkAllocateMemory (exportable image)", e))?;
        let desc = wgpu::TextureDescriptor {
            label: Some("sluice exported texture"),
            size,
            mip_level_count: 1,
            sample_count: 1,
            dimension,
            format,
            usage: WGPU_USAGE,
            view_formats: &[],
        };
        let texture = raw.bind_and_wrap(memory, &desc)?;
        let exported = ExportedTexture {
            interop: interop.clone(),
            texture,
            memory,
            allocation_size: requirements.size,
        };
        exported.define_layout();
        Ok(exported)
    }

    /// Moves the image out of the undefined layout (one texel copied out), and waits for it.
    fn define_layout(&self) {
        let dev = self.interop.vulkan();
        let block = self.texture.format().block_copy_size(None).unwrap_or(16);
        let buffer = dev.device.create_buffer(&wgpu::BufferDescriptor {
            label: Some("sluice exported texture layout"),
            size: u64::from(block).max(wgpu::COPY_BUFFER_ALIGNMENT),
            usage: wgpu::BufferUsages::COPY_DST,
            mapped_at_creation: false,
        });
        let mut encoder = dev
            .device
            .create_command_encoder(&wgpu::CommandEncoderDescriptor {
                label: Some("sluice exported texture layout"),
            });
        encoder.copy_texture_to_buffer(
            self.texture.as_image_copy(),
            wgpu::TexelCopyBufferInfo {
                buffer: &buffer,
                layout: wgpu::TexelCopyBufferLayout::default(),
            },
            wgpu::Extent3d::default(),
        );
        let index = dev.queue.submit([encoder.finish()]);
        let _ = dev.device.poll(wgpu::PollType::Wait {
            submission_index: Some(index),
            timeout: None,
        });
    }

    /// The texture, for binding (and for the owning device's own copies).
    pub fn texture(&self) -> &wgpu::Texture {
        &self.texture
    }

    /// Bytes of the dedicated allocation behind it; importers pass this.
    pub fn allocation_size(&self) -> u64 {
        self.allocation_size
    }

    /// A new file descriptor for the memory (`VK_EXTERNAL_MEMORY_HANDLE_TYPE_OPAQUE_FD_BIT`);
    /// the caller owns it. The memory is a dedicated allocation of one image.
    pub fn export_fd(&self) -> Result<OwnedFd, InteropError> {
        let dev = self.interop.vulkan();
        // SAFETY: the guard is only held (it blocks `destroy`) while the fd is taken, and
        // nothing is destroyed through it.
        let guard =
            unsafe { self.texture.as_hal::<Vulkan>() }.ok_or(InteropError::TextureDestroyed)?;
        // SAFETY: `memory` is alive: it belongs to `texture`, which is not destroyed (the
        // guard keeps it so), and it was allocated exportable as OPAQUE_FD.
        let fd = unsafe { export_memory_fd(dev, self.memory) };
        drop(guard);
        fd
    }
}

impl std::fmt::Debug for ExportedTexture {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ExportedTexture")
            .field("texture", &self.texture)
            .field("allocation_size", &self.allocation_size)
            .finish()
    }
}

/// Whether the driver exports images of this kind and size as opaque fds (`Err` with the
/// reason if not).
fn check_exportable(
    dev: &VulkanDevice,
    format: vk::Format,
    image_type: vk::ImageType,
    size: wgpu::Extent3d,
) -> Result<(), String> {
    let mut external_info =
        vk::PhysicalDeviceExternalImageFormatInfo::default().handle_type(OPAQUE_FD);
    let info = vk::PhysicalDeviceImageFormatInfo2::default()
        .format(format)
        .ty(image_type)
        .tiling(vk::ImageTiling::OPTIMAL)
        .usage(IMAGE_USAGE)
        .push_next(&mut external_info);
    let mut external = vk::ExternalImageFormatProperties::default();
    let mut properties = vk::ImageFormatProperties2::default().push_next(&mut external);
    // SAFETY: the physical device is live (the device holds it); both chains are Vulkan 1.1
    // core structures that live until the call returns.
    let answer = unsafe {
        dev.instance.get_physical_device_image_format_properties2(
            dev.physical,
            &info,
            &mut properties,
        )
    };
    answer.map_err(|e| format!("vkGetPhysicalDeviceImageFormatProperties2 answered {e:?}"))?;
    let max = properties.image_format_properties.max_extent;
    let depth = if image_type == vk::ImageType::TYPE_3D {
        size.depth_or_array_layers
    } else {
        1
    };
    if size.width > max.width || size.height > max.height || depth > max.depth {
        return Err(format!(
            "the largest such image is {}x{}x{}",
            max.width, max.height, max.depth
        ));
    }
    let features = external.external_memory_properties.external_memory_features;
    if !features.contains(vk::ExternalMemoryFeatureFlags::EXPORTABLE) {
        return Err(format!("external memory features {features:?}"));
    }
    Ok(())
}

/// A `VkImage` not yet handed to wgpu (created for external memory here, or linear in host
/// memory for `HostTarget`); destroyed on drop unless wrapped or released.
pub(crate) struct RawImage<'a> {
    dev: &'a VulkanDevice,
    handle: vk::Image,
}

impl<'a> RawImage<'a> {
    /// Takes over `handle`, a live image of `dev` that nothing else owns or uses yet.
    pub(crate) fn adopt(dev: &'a VulkanDevice, handle: vk::Image) -> Self {
        RawImage { dev, handle }
    }

    /// The image's handle (still owned by this guard).
    pub(crate) fn handle(&self) -> vk::Image {
        self.handle
    }

    /// Gives the image up without destroying it (to hand it to wgpu).
    pub(crate) fn release(mut self) -> vk::Image {
        std::mem::replace(&mut self.handle, vk::Image::null())
    }

    fn create(
        dev: &'a VulkanDevice,
        format: vk::Format,
        image_type: vk::ImageType,
        extent: vk::Extent3D,
    ) -> Result<Self, InteropError> {
        let mut external = vk::ExternalMemoryImageCreateInfo::default().handle_types(OPAQUE_FD);
        let info = vk::ImageCreateInfo::default()
            .image_type(image_type)
            .format(format)
            .extent(extent)
            .mip_levels(1)
            .array_layers(1)
            .samples(vk::SampleCountFlags::TYPE_1)
            .tiling(vk::ImageTiling::OPTIMAL)
            .usage(IMAGE_USAGE)
            .sharing_mode(vk::SharingMode::EXCLUSIVE)
            .initial_layout(vk::ImageLayout::UNDEFINED)
            .push_next(&mut external);
        // SAFETY: a valid create info whose pNext chain lives until the call returns; the
        // format, type and extent were checked exportable with these usages.
        let handle = unsafe { dev.raw.create_image(&info, None) }
            .map_err(|e| InteropError::vulkan("vkCreateImage (external memory)", e))?;
        Ok(RawImage { dev, handle })
    }

    /// Where the driver lays out the first colour subresource (mip 0, layer 0) of a linear
    /// image: its offset and row pitch in the memory bound to it.
    ///
    /// # Safety
    ///
    /// The image was created with linear tiling and a colour format (Vulkan defines the
    /// query for those only).
    pub(crate) unsafe fn linear_layout(&self) -> vk::SubresourceLayout {
        // SAFETY: `handle` is a live image of this device, linear with a colour subresource
        // (the caller's contract).
        unsafe {
            self.dev.raw.get_image_subresource_layout(
                self.handle,
                vk::ImageSubresource {
                    aspect_mask: vk::ImageAspectFlags::COLOR,
                    mip_level: 0,
                    array_layer: 0,
                },
            )
        }
    }

    pub(crate) fn requirements(&self) -> vk::MemoryRequirements {
        // SAFETY: `handle` is a live image of this device.
        unsafe { self.dev.raw.get_image_memory_requirements(self.handle) }
    }

    /// Binds `memory` (a dedicated allocation for this image) and hands image and memory to
    /// wgpu, which frees both when the texture is destroyed. On failure the memory is freed
    /// here.
    fn bind_and_wrap(
        mut self,
        memory: vk::DeviceMemory,
        desc: &wgpu::TextureDescriptor<'_>,
    ) -> Result<wgpu::Texture, InteropError> {
        // SAFETY: image and memory are live, unbound and of this device; the memory was
        // allocated for this image (dedicated) from a type its requirements allow.
        if let Err(e) = unsafe { self.dev.raw.bind_image_memory(self.handle, memory, 0) } {
            // SAFETY: the memory was just allocated and nothing uses it.
            unsafe { self.dev.raw.free_memory(memory, None) };
            return Err(InteropError::vulkan("vkBindImageMemory", e));
        }
        let handle = std::mem::replace(&mut self.handle, vk::Image::null());
        // SAFETY: the image was created on this device with `IMAGE_USAGE` (which the usages
        // below name in wgpu's words) as `desc` describes, and is bound to `memory`, a
        // dedicated allocation; neither is used yet.
        unsafe {
            wrap_image(
                self.dev,
                handle,
                memory,
                desc,
                wgpu::TextureUses::RESOURCE
                    | wgpu::TextureUses::COPY_SRC
                    | wgpu::TextureUses::COPY_DST,
            )
        }
    }
}

/// Hands `image` and its dedicated `memory` to wgpu as a texture described by `desc`, in the
/// undefined layout; wgpu destroys the image and frees the memory with the texture (which
/// unmaps it, where it is mapped). On failure both are destroyed here.
///
/// # Safety
///
/// `image` was created on `dev`'s device as `desc` describes, with the Vulkan usages that
/// `usage` names, and is bound to `memory`, a dedicated allocation of it; the device has not
/// used either, and the caller hands both over (it does not destroy them).
pub(crate) unsafe fn wrap_image(
    dev: &VulkanDevice,
    image: vk::Image,
    memory: vk::DeviceMemory,
    desc: &wgpu::TextureDescriptor<'_>,
    usage: wgpu::TextureUses,
) -> Result<wgpu::Texture, InteropError> {
    // SAFETY: the image was created on this device as `desc` describes and is bound to
    // `memory` (the caller's contract); wgpu takes ownership of both (no drop callback: wgpu
    // destroys the image, and frees the dedicated memory).
    let hal = unsafe {
        hal_texture(
            dev,
            image,
            desc,
            usage,
            None,
            wgpu::hal::vulkan::TextureMemory::Dedicated(memory),
        )
    };
    let Some(hal) = hal else {
        // SAFETY: neither was handed to wgpu; nothing uses them.
        unsafe {
            dev.raw.destroy_image(image, None);
            dev.raw.free_memory(memory, None);
        }
        return Err(InteropError::vulkan(
            "wrapping an image (the device is not a Vulkan one)",
            "",
        ));
    };
    // SAFETY: the texture was created on this device as `desc` describes (its usages are the
    // caller's), is bound to memory, and is in the undefined layout, which `UNINITIALIZED`
    // tells wgpu (its first barrier starts from there).
    Ok(unsafe {
        dev.device
            .create_texture_from_hal::<Vulkan>(hal, desc, wgpu::TextureUses::UNINITIALIZED)
    })
}

/// `image` as wgpu-hal's texture of `desc` (its usages `usage` in wgpu-hal's words), with the
/// drop callback and memory `texture_from_raw` takes; `None` where the device is not a Vulkan
/// one (nothing is taken over then: a callback is dropped unrun).
///
/// # Safety
///
/// As for `texture_from_raw`: `image` was created on `dev`'s device as `desc` describes, with
/// the Vulkan usages `usage` names; without a callback wgpu destroys it, with one it stays
/// valid until the callback runs; memory other than `External` is taken over by wgpu, and
/// `External` memory stays valid until the callback runs.
pub(crate) unsafe fn hal_texture(
    dev: &VulkanDevice,
    image: vk::Image,
    desc: &wgpu::TextureDescriptor<'_>,
    usage: wgpu::TextureUses,
    drop_callback: Option<wgpu::hal::DropCallback>,
    memory: wgpu::hal::vulkan::TextureMemory,
) -> Option<wgpu::hal::vulkan::Texture> {
    let hal_desc = wgpu::hal::TextureDescriptor {
        label: desc.label,
        size: desc.size,
        mip_level_count: desc.mip_level_count,
        sample_count: desc.sample_count,
        dimension: desc.dimension,
        format: desc.format,
        usage,
        memory_flags: wgpu::hal::MemoryFlags::empty(),
        view_formats: Vec::new(),
    };
    // SAFETY: the caller's contract is `texture_from_raw`'s.
    unsafe {
        dev.device
            .as_hal::<Vulkan>()
            .map(|device| device.texture_from_raw(image, &hal_desc, drop_callback, memory))
    }
}

/// Records `barrier` (one image's, from `src` to `dst` stages) on a command buffer of its own,
/// for the caller to submit on `device`'s queue; `None` where the device is not a Vulkan one.
///
/// # Safety
///
/// The barrier's image is a live image of `dev`'s device, in the barrier's old layout when the
/// commands run (a layout wgpu does not track, or the one it tracks, which the barrier must
/// then leave it in or be undone before wgpu uses it), and `device` is `dev`'s wgpu device.
pub(crate) unsafe fn image_barrier_commands(
    dev: &VulkanDevice,
    device: &wgpu::Device,
    label: &str,
    barrier: &vk::ImageMemoryBarrier<'_>,
    src: vk::PipelineStageFlags,
    dst: vk::PipelineStageFlags,
) -> Option<wgpu::CommandBuffer> {
    let mut encoder =
        device.create_command_encoder(&wgpu::CommandEncoderDescriptor { label: Some(label) });
    // SAFETY: the raw command buffer is open (wgpu opens it for the callback) and only the
    // barrier is recorded into it (its image and layouts are the caller's contract); wgpu ends
    // and submits it. The encoder is not touched through wgpu meanwhile.
    let recorded = unsafe {
        encoder.as_hal_mut::<Vulkan, _, _>(|hal| {
            hal.map(|hal| {
                dev.raw.cmd_pipeline_barrier(
                    hal.raw_handle(),
                    src,
                    dst,
                    vk::DependencyFlags::empty(),
                    &[],
                    &[],
                    std::slice::from_ref(barrier),
                )
            })
        })
    };
    recorded.map(|()| encoder.finish())
}

impl Drop for RawImage<'_> {
    fn drop(&mut self) {
        if self.handle != vk::Image::null() {
            // SAFETY: the image was never handed to wgpu or the GPU.
            unsafe { self.dev.raw.destroy_image(self.handle, None) };
        }
    }
}

impl Interop {
    /// A 2-D or 3-D texture whose memory (a dedicated allocation) can be exported as file
    /// descriptors, for another API to write texels into. `format` is one of the unnormalized
    /// integer or float formats of 1, 2 or 4 channels that sluice uploads sources into
    /// (`R8Uint` ... `Rgba32Float`).
    pub fn export_texture(
        &self,
        format: wgpu::TextureFormat,
        size: wgpu::Extent3d,
        dimension: wgpu::TextureDimension,
    ) -> Result<ExportedTexture, InteropError> {
        ExportedTexture::new(self, format, size, dimension)
    }
}
