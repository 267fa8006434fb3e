//! Images sampled straight from imported host pages, on lavapipe.
//!
//! One of the crate's `unsafe` modules. On a CPU device (lavapipe) "device memory" is host
//! memory, and a linear image is laid out like a packed array when its rows are the array's
//! rows. So a 2-D source whose pages are imported (`host_import`) can be drawn from a linear
//! `VkImage` bound to the imported memory at the first sample: a full update is no copy at all.
//! On a GPU this would read every sample across the bus on every frame, so it is never offered
//! there (the upload path asks only on lavapipe: `upload::samples_host_pages`, which also says
//! why not on other CPU drivers).
//!
//! The image is made when a source hands its pages to a renderer and lives no longer than the
//! pages show the source's data ([`SampledInPlace`]'s use counting and retiring in
//! `host_buffer`). It is created in the `PREINITIALIZED` layout, which keeps what the host wrote
//! into a linear image's memory, and moved to the shader-read layout by a barrier submitted
//! before the frame that draws it; wgpu is told it is in that layout, and only ever samples
//! it, so it never moves it again. The host writes those pages again only after the image is
//! retired (no frame draws it any more); a later hand-over makes a new image over them, again
//! from `PREINITIALIZED`.
//!
//! [`SampledInPlace`]: sluice_render::SampledInPlace

use std::sync::Arc;

use ash::vk;
use wgpu::hal::api::Vulkan;

use crate::host_import::{ImportedMemory, InPlaceAsk};
use crate::vulkan::device::VulkanDevice;
use crate::vulkan::texture::{hal_texture, image_barrier_commands, vk_format, RawImage};

/// A 2-D texture over imported host memory and a view of it.
pub(crate) struct InPlaceImage {
    pub texture: wgpu::Texture,
    pub view: wgpu::TextureView,
}

/// The Vulkan format of `format` for sampling: those [`vk_format`] knows, and the normalized
/// 8- and 16-bit ones sluice samples with hardware filtering.
fn sampled_format(format: wgpu::TextureFormat) -> Option<vk::Format> {
    use vk::Format as V;
    use wgpu::TextureFormat as F;
    Some(match format {
        F::R8Unorm => V::R8_UNORM,
        F::Rg8Unorm => V::R8G8_UNORM,
        F::Rgba8Unorm => V::R8G8B8A8_UNORM,
        F::R8Snorm => V::R8_SNORM,
        F::Rg8Snorm => V::R8G8_SNORM,
        F::Rgba8Snorm => V::R8G8B8A8_SNORM,
        F::R16Unorm => V::R16_UNORM,
        F::Rg16Unorm => V::R16G16_UNORM,
        F::Rgba16Unorm => V::R16G16B16A16_UNORM,
        F::R16Snorm => V::R16_SNORM,
        F::Rg16Snorm => V::R16G16_SNORM,
        F::Rgba16Snorm => V::R16G16B16A16_SNORM,
        other => return vk_format(other),
    })
}

/// Where the data lies in the memory: rows `row_bytes` apart from byte `offset`.
pub(crate) struct InPlaceData {
    /// Bytes from one row to the next (the packed row).
    pub row_bytes: u64,
    /// Where the first sample lies in the memory.
    pub offset: u64,
}

/// A linear image of `ask` bound to `memory` at `data.offset`, moved to the
/// shader-read layout (the barrier is submitted on `ask.queue` and counted on `gpu`, the
/// pages' count of GPU work reading them) and handed to wgpu as a sampled texture. `Err`: why not (a format, size, row pitch or alignment the driver lays out
/// otherwise, or a missing feature), for the caller to copy instead.
///
/// # Safety
///
/// - `memory` was imported on `dev`'s device, and `ask.device` and `ask.queue` are
///   that device's;
/// - the memory holds the data as packed rows of `data.row_bytes` from `data.offset`, and
///   the host does not write those bytes again while a submission that samples the returned
///   texture may run (the caller counts frames that draw it and waits for them before the host
///   writes again).
pub(crate) unsafe fn sampled_image(
    dev: &VulkanDevice,
    memory: &Arc<ImportedMemory>,
    gpu: &Arc<crate::host_import::GpuUse>,
    ask: &InPlaceAsk<'_>,
    data: &InPlaceData,
) -> Result<InPlaceImage, String> {
    let format = sampled_format(ask.format)
        .ok_or_else(|| format!("{:?} has no Vulkan format here", ask.format))?;
    let filterable = matches!(
        ask.format.sample_type(None, Some(ask.device.features())),
        Some(wgpu::TextureSampleType::Float { filterable: true })
    );
    let mut wanted = vk::FormatFeatureFlags::SAMPLED_IMAGE;
    if filterable {
        wanted |= vk::FormatFeatureFlags::SAMPLED_IMAGE_FILTER_LINEAR;
    }
    // SAFETY: the physical device is live (the device holds it); the query has no pointers.
    let features = unsafe {
        dev.instance
            .get_physical_device_format_properties(dev.physical, format)
    }
    .linear_tiling_features;
    if !features.contains(wanted) {
        return Err(format!(
            "linear {format:?} images have the features {features:?}, not all of {wanted:?}"
        ));
    }
    let handle_type = vk::ExternalMemoryHandleTypeFlags::HOST_ALLOCATION_EXT;
    let mut external_info =
        vk::PhysicalDeviceExternalImageFormatInfo::default().handle_type(handle_type);
    let info2 = vk::PhysicalDeviceImageFormatInfo2::default()
        .format(format)
        .ty(vk::ImageType::TYPE_2D)
        .tiling(vk::ImageTiling::LINEAR)
        .usage(vk::ImageUsageFlags::SAMPLED)
        .push_next(&mut external_info);
    let mut external_props = vk::ExternalImageFormatProperties::default();
    let mut props2 = vk::ImageFormatProperties2::default().push_next(&mut external_props);
    // SAFETY: valid input and output chains that live until the call returns.
    unsafe {
        dev.instance
            .get_physical_device_image_format_properties2(dev.physical, &info2, &mut props2)
    }
    .map_err(|e| {
        format!(
            "linear sampled {format:?} images on imported host memory are not supported ({e:?})"
        )
    })?;
    let max = props2.image_format_properties.max_extent;
    let external_memory = external_props.external_memory_properties;
    let importable = external_memory
        .external_memory_features
        .contains(vk::ExternalMemoryFeatureFlags::IMPORTABLE)
        && !external_memory
            .external_memory_features
            .contains(vk::ExternalMemoryFeatureFlags::DEDICATED_ONLY)
        && external_memory
            .compatible_handle_types
            .contains(handle_type);
    if !importable {
        return Err(format!(
            "linear {format:?} images cannot be bound to imported host memory (features {:?}, \
             compatible handle types {:?})",
            external_memory.external_memory_features, external_memory.compatible_handle_types
        ));
    }
    if ask.width > max.width || ask.height > max.height {
        return Err(format!(
            "a {} x {} image is larger than the driver's largest linear {format:?} image ({} x {})",
            ask.width, ask.height, max.width, max.height
        ));
    }
    let mut external = vk::ExternalMemoryImageCreateInfo::default().handle_types(handle_type);
    let info = vk::ImageCreateInfo::default()
        .image_type(vk::ImageType::TYPE_2D)
        .format(format)
        .extent(vk::Extent3D {
            width: ask.width,
            height: ask.height,
            depth: 1,
        })
        .mip_levels(1)
        .array_layers(1)
        .samples(vk::SampleCountFlags::TYPE_1)
        .tiling(vk::ImageTiling::LINEAR)
        .usage(vk::ImageUsageFlags::SAMPLED)
        .sharing_mode(vk::SharingMode::EXCLUSIVE)
        .initial_layout(vk::ImageLayout::PREINITIALIZED)
        .push_next(&mut external);
    // SAFETY: a valid create info whose pNext chain lives until the call returns; the format,
    // tiling, usage and external handle type were checked supported above.
    let image = unsafe { dev.raw.create_image(&info, None) }
        .map_err(|e| format!("vkCreateImage (linear, on host memory) answered {e:?}"))?;
    let image = RawImage::adopt(dev, image);
    // SAFETY: the image was just created with linear tiling and a colour format.
    let layout = unsafe { image.linear_layout() };
    let mut dedicated = vk::MemoryDedicatedRequirements::default();
    let mut requirements2 = vk::MemoryRequirements2::default().push_next(&mut dedicated);
    // SAFETY: a live image of this device and a valid output chain that lives until the call
    // returns.
    unsafe {
        dev.raw.get_image_memory_requirements2(
            &vk::ImageMemoryRequirementsInfo2::default().image(image.handle()),
            &mut requirements2,
        )
    };
    let requirements = requirements2.memory_requirements;
    if dedicated.requires_dedicated_allocation == vk::TRUE {
        return Err(format!(
            "the driver wants a {format:?} linear image in memory of its own, not in the data's \
             imported pages"
        ));
    }
    let fits = layout.offset == 0
        && layout.row_pitch == data.row_bytes
        && requirements.alignment.is_power_of_two()
        && data.offset.is_multiple_of(requirements.alignment)
        && data
            .offset
            .checked_add(requirements.size)
            .is_some_and(|end| end <= memory.len())
        && requirements.memory_type_bits & (1 << memory.type_index()) != 0;
    if !fits {
        return Err(format!(
            "the driver lays a {} x {} {format:?} image out with rows {} bytes apart from offset \
             {}, in {} bytes at an alignment of {} (memory types {:#x}); the data's rows are {} \
             bytes apart from byte {} of {} imported bytes (memory type {})",
            ask.width,
            ask.height,
            layout.row_pitch,
            layout.offset,
            requirements.size,
            requirements.alignment,
            requirements.memory_type_bits,
            data.row_bytes,
            data.offset,
            memory.len(),
            memory.type_index()
        ));
    }
    // SAFETY: image and memory are live and of this device; the image is unbound, the memory
    // type is one it allows, and the binding (offset, size) lies inside the memory at the
    // image's alignment (checked above).
    unsafe {
        dev.raw
            .bind_image_memory(image.handle(), memory.handle(), data.offset)
    }
    .map_err(|e| format!("vkBindImageMemory (host memory) answered {e:?}"))?;
    // SAFETY: the image is live, bound, and in `PREINITIALIZED` (never used yet); the
    // commands are submitted below, before anything that samples it.
    let barrier = unsafe { shader_read_barrier(dev, ask, image.handle()) }?;
    let handle = image.handle();
    let held = memory.clone();
    let raw = dev.raw.clone();
    let callback: wgpu::hal::DropCallback = Box::new(move || {
        // SAFETY: wgpu runs this once the texture is destroyed and no submission uses it; the
        // device outlives its images. The memory outlives the image (`held` is dropped after).
        unsafe { raw.destroy_image(handle, None) };
        drop(held);
    });
    let desc = wgpu::TextureDescriptor {
        label: Some("sluice data sampled in place"),
        size: wgpu::Extent3d {
            width: ask.width,
            height: ask.height,
            depth_or_array_layers: 1,
        },
        mip_level_count: 1,
        sample_count: 1,
        dimension: wgpu::TextureDimension::D2,
        format: ask.format,
        usage: wgpu::TextureUsages::TEXTURE_BINDING,
        view_formats: &[],
    };
    // SAFETY: the image was created on this device as `desc` describes (sampled usage);
    // the drop callback destroys it and keeps the memory alive until then (`External`).
    let hal = unsafe {
        hal_texture(
            dev,
            handle,
            &desc,
            wgpu::TextureUses::RESOURCE,
            Some(callback),
            wgpu::hal::vulkan::TextureMemory::External,
        )
    };
    // Without a Vulkan device the callback was dropped unrun, the barrier is never submitted,
    // and the guard destroys the image.
    let hal = hal.ok_or("the device is not a Vulkan one")?;
    image.release();
    // wgpu reports what it refuses to the innermost error scope of its kind: these, not the
    // frame's.
    let out_of_memory = ask.device.push_error_scope(wgpu::ErrorFilter::OutOfMemory);
    let scope = ask.device.push_error_scope(wgpu::ErrorFilter::Validation);
    // SAFETY: the texture was made on this device as `desc` describes and is bound to memory
    // holding the data; the barrier submitted next, before anything can use the texture, puts
    // it in the shader-read layout, which is what `RESOURCE` means to wgpu. wgpu only ever
    // samples it (its only usage), so it never moves it from there.
    let texture = unsafe {
        ask.device
            .create_texture_from_hal::<Vulkan>(hal, &desc, wgpu::TextureUses::RESOURCE)
    };
    let view = texture.create_view(&wgpu::TextureViewDescriptor::default());
    let refused = pollster::block_on(scope.pop());
    let refused = refused.or(pollster::block_on(out_of_memory.pop()));
    if let Some(error) = refused {
        // Nothing was submitted: the texture's drop destroys the image.
        return Err(format!("wgpu refused the image over the pages: {error}"));
    }
    // The barrier reads the image: it is counted on the pages like a frame, so that a hand-back
    // racing this request waits for it before the image is destroyed.
    gpu.recorded();
    ask.queue.submit([barrier]);
    gpu.settle_after_submitted(ask.queue);
    Ok(InPlaceImage { texture, view })
}

/// Records the barrier from `PREINITIALIZED` (with the host's writes) to the shader-read
/// layout, for the caller to submit.
///
/// # Safety
///
/// `image` is a live, bound image of `dev`'s device, in `PREINITIALIZED` when the commands
/// run, and `ask.device` is that device.
unsafe fn shader_read_barrier(
    dev: &VulkanDevice,
    ask: &InPlaceAsk<'_>,
    image: vk::Image,
) -> Result<wgpu::CommandBuffer, String> {
    let barrier = vk::ImageMemoryBarrier::default()
        .src_access_mask(vk::AccessFlags::HOST_WRITE)
        .dst_access_mask(vk::AccessFlags::SHADER_READ)
        .old_layout(vk::ImageLayout::PREINITIALIZED)
        .new_layout(vk::ImageLayout::SHADER_READ_ONLY_OPTIMAL)
        .src_queue_family_index(vk::QUEUE_FAMILY_IGNORED)
        .dst_queue_family_index(vk::QUEUE_FAMILY_IGNORED)
        .image(image)
        .subresource_range(vk::ImageSubresourceRange {
            aspect_mask: vk::ImageAspectFlags::COLOR,
            base_mip_level: 0,
            level_count: 1,
            base_array_layer: 0,
            layer_count: 1,
        });
    // From the host's writes, and from every earlier command (copies from the same memory
    // through the pages' buffer): the layout change is a write.
    // SAFETY: the image is live, of this device, and in `PREINITIALIZED` when the commands run
    // (the caller's contract); wgpu does not know it yet.
    unsafe {
        image_barrier_commands(
            dev,
            ask.device,
            "sluice in-place image layout",
            &barrier,
            vk::PipelineStageFlags::HOST | vk::PipelineStageFlags::ALL_COMMANDS,
            vk::PipelineStageFlags::ALL_COMMANDS,
        )
    }
    .ok_or_else(|| "the encoder is not a Vulkan one".to_string())
}

/// The frames drawing one in-place image, and whether its pages still show the source's
/// data. Frames are counted on the pages' `GpuUse`, with the copies from them, so waiting for
/// the pages waits for both.
pub(crate) struct ImageUse {
    gpu: Arc<crate::host_import::GpuUse>,
    /// Set when the source hands the pages back; no frame is counted after that.
    retired: parking_lot::Mutex<bool>,
}

impl ImageUse {
    pub fn new(gpu: Arc<crate::host_import::GpuUse>) -> Self {
        ImageUse {
            gpu,
            retired: parking_lot::Mutex::new(false),
        }
    }

    /// Counts a frame that will sample the image (settled once it is submitted and done:
    /// `frame` is the renderer's list of counts to settle), unless the image is retired.
    pub fn begin_frame(
        &self,
        frame: &parking_lot::Mutex<Vec<Arc<crate::host_import::GpuUse>>>,
    ) -> bool {
        let retired = self.retired.lock();
        if *retired {
            return false;
        }
        self.gpu.recorded();
        frame.lock().push(self.gpu.clone());
        true
    }

    /// No frame may draw the image from now on; frames counted before are waited for on the
    /// pages' `GpuUse`.
    pub fn retire(&self) {
        *self.retired.lock() = true;
    }
}
