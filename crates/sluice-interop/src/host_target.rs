//! `HostTarget`: a render target whose frames are read in host memory. On a CPU device
//! (lavapipe, llvmpipe's Vulkan driver; SwiftShader) the frame is drawn there in place: its
//! colour texture is a linear image in memory the host maps, so reading a frame costs a
//! barrier and a wait, and no copy at all. Elsewhere it is an ordinary target read into a
//! [`HostFrame`] (the GPU's copy into imported pages), which is the fast path on a GPU:
//! drawing every pixel across the bus into host memory would not be.
//!
//! One of the crate's `unsafe` modules. In place, it creates a `VkImage` with linear tiling
//! (colour attachment, transfer source, sampled) and a dedicated host-visible, host-coherent
//! allocation for it with `ash`, maps the allocation once, zeroes it from the host, and hands
//! image and memory to wgpu (`texture_from_raw`; wgpu destroys both with the texture, which
//! unmaps the memory). `Renderer::target_on_texture` builds the target around it.
//!
//! Layouts and ordering. Vulkan defines the host's view of a linear image's memory only in the
//! `GENERAL` layout, after the device's writes are made visible to the host. wgpu tracks the
//! texture as a colour attachment (`COLOR_ATTACHMENT_OPTIMAL`): a clearing pass at creation
//! puts it there, and the target is used by nothing but [`HostTarget::render`]'s render
//! passes (the target is private to this type). [`HostTarget::read`] records, on a command
//! buffer of its own, a barrier from every earlier command's writes to host reads that moves
//! the image to `GENERAL`, submits it and waits for it; the next [`HostTarget::render`] first
//! submits the way back (`GENERAL` to `COLOR_ATTACHMENT_OPTIMAL`, host reads before colour
//! writes), so that wgpu's view of the layout is true again before it records anything.
//!
//! The pixels are handed out as `&[u8]` only between a finished read and the next render:
//! [`HostTarget::render`] takes `&mut self`, [`HostTarget::bytes`] `&self` and answers `None`
//! while a frame is being drawn, so no host read overlaps a device write.

use std::ptr::NonNull;

use ash::vk;
use wgpu::hal::api::Vulkan;

use sluice_render::{
    Camera, FrameStats, RenderTarget, Renderer, Scene, TARGET_FORMAT, TARGET_USAGE,
};

use crate::error::InteropError;
use crate::host_frame::HostFrame;
use crate::interop::Interop;
use crate::vulkan::device::VulkanDevice;
use crate::vulkan::texture::{image_barrier_commands, wrap_image, RawImage};

/// The in-place image's usages in Vulkan's words: [`TARGET_USAGE`].
const IMAGE_USAGE: vk::ImageUsageFlags = vk::ImageUsageFlags::from_raw(
    vk::ImageUsageFlags::COLOR_ATTACHMENT.as_raw()
        | vk::ImageUsageFlags::TRANSFER_SRC.as_raw()
        | vk::ImageUsageFlags::SAMPLED.as_raw(),
);

/// The Vulkan format of [`TARGET_FORMAT`].
const IMAGE_FORMAT: vk::Format = vk::Format::R8G8B8A8_UNORM;

const COLOR: vk::ImageSubresourceRange = vk::ImageSubresourceRange {
    aspect_mask: vk::ImageAspectFlags::COLOR,
    base_mip_level: 0,
    level_count: 1,
    base_array_layer: 0,
    layer_count: 1,
};

/// The mapped pixels of an in-place target.
struct Mapped {
    /// The first pixel (the mapping's start plus the subresource's offset).
    first: NonNull<u8>,
    /// Bytes from one row's start to the next's.
    row_pitch: usize,
    /// Whether the image is in `GENERAL` (after a read), not where wgpu believes it is.
    general: bool,
    /// The last barrier submitted and not waited for (the way back to drawing): wgpu does not
    /// know it uses the texture, so dropping the target waits for it first.
    pending: Option<wgpu::SubmissionIndex>,
}

/// Where a [`HostTarget`]'s frames are read.
enum Storage {
    /// Drawn in place, in mapped host-visible memory.
    InPlace(Mapped),
    /// Drawn into an ordinary target, copied into a [`HostFrame`] by each read.
    Copied(Box<HostFrame>),
}

/// A render target whose frames are read in host memory: drawn there in place on CPU devices,
/// copied into imported host pages ([`HostFrame`]) on GPUs.
///
/// Draw with [`HostTarget::render`], then [`HostTarget::read`]; the frame's RGBA8 pixels are in
/// [`HostTarget::bytes`] (or [`HostTarget::row`]) until the next render.
///
/// ```no_run
/// use sluice_interop::{HostTarget, Interop};
/// use sluice_render::{PanZoomCamera, Scene};
///
/// let interop = Interop::new()?;
/// let mut renderer = interop.renderer();
/// let mut target = HostTarget::new(&interop, &renderer, 1024, 1024)?;
/// let scene = Scene::new();
/// target.render(&mut renderer, &scene, &PanZoomCamera::default())?;
/// target.read(&renderer)?;
/// let top_left = &target.row(0).unwrap()[..4];
/// # let _ = top_left;
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
pub struct HostTarget {
    target: RenderTarget,
    storage: Storage,
    interop: Interop,
    /// Whether a frame was read since the last render (the pixels may be looked at).
    readable: bool,
    fallback: Option<String>,
}

// SAFETY: `first` points into memory owned by the target's texture, which the `HostTarget`
// holding this `Mapped` owns; nothing in it is tied to a thread. The pixels are only read
// through `HostTarget::bytes` (`&self`) while no device write is in flight (see the module
// notes), and the host never writes them after creation.
unsafe impl Send for Mapped {}
// SAFETY: as above; a shared `Mapped` is only used to read the pixels under those rules.
unsafe impl Sync for Mapped {}

impl std::fmt::Debug for HostTarget {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("HostTarget")
            .field("width", &self.width())
            .field("height", &self.height())
            .field("bytes_per_row", &self.bytes_per_row())
            .field("in_place", &self.is_in_place())
            .field("fallback", &self.fallback)
            .finish()
    }
}

impl HostTarget {
    /// A target of `width` x `height` pixels for `renderer` (made by `interop`): drawn in
    /// place in host memory where the device is a CPU device that allows it, otherwise read
    /// into a [`HostFrame`] ([`HostTarget::fallback_reason`] says why). Errors name the size
    /// (zero, or past the device's limit) or a renderer on another device.
    pub fn new(
        interop: &Interop,
        renderer: &Renderer,
        width: u32,
        height: u32,
    ) -> Result<Self, InteropError> {
        same_device(interop, renderer)?;
        let info = interop.adapter().get_info();
        let reason = if info.device_type != wgpu::DeviceType::Cpu {
            format!(
                "{} is a {:?} device: drawing into host memory would send every pixel across \
                 the bus, so frames are copied into imported pages",
                info.name, info.device_type
            )
        } else {
            match in_place(interop.vulkan(), width, height) {
                Ok((texture, mapped)) => {
                    let target = renderer.target_on_texture(texture)?;
                    let host = HostTarget {
                        target,
                        storage: Storage::InPlace(mapped),
                        interop: interop.clone(),
                        readable: false,
                        fallback: None,
                    };
                    host.define_layout(renderer)?;
                    return Ok(host);
                }
                Err(Refused::Size(e)) => return Err(e),
                Err(Refused::Other(reason)) => reason,
            }
        };
        HostTarget::copied_with(interop, renderer, width, height, reason)
    }

    /// A target that is never drawn in place: each read copies it into a [`HostFrame`] (what
    /// `new` falls back to; for comparing the two). Errors as [`HostTarget::new`].
    pub fn copied(
        interop: &Interop,
        renderer: &Renderer,
        width: u32,
        height: u32,
    ) -> Result<Self, InteropError> {
        same_device(interop, renderer)?;
        HostTarget::copied_with(
            interop,
            renderer,
            width,
            height,
            "copied on request (HostTarget::copied)".into(),
        )
    }

    fn copied_with(
        interop: &Interop,
        renderer: &Renderer,
        width: u32,
        height: u32,
        reason: String,
    ) -> Result<Self, InteropError> {
        let target = renderer.create_target(width, height)?;
        let frame = HostFrame::for_target(interop, &target)?;
        Ok(HostTarget {
            target,
            storage: Storage::Copied(Box::new(frame)),
            interop: interop.clone(),
            readable: false,
            fallback: Some(reason),
        })
    }

    /// Clears the new in-place target with a render pass (transparent black), so that wgpu
    /// tracks it as a colour attachment, which is what `read` moves it from.
    fn define_layout(&self, renderer: &Renderer) -> Result<(), InteropError> {
        let view = self
            .target
            .texture()
            .create_view(&wgpu::TextureViewDescriptor::default());
        let device = renderer.device();
        let mut encoder = device.create_command_encoder(&wgpu::CommandEncoderDescriptor {
            label: Some("sluice host target clear"),
        });
        encoder.begin_render_pass(&wgpu::RenderPassDescriptor {
            label: Some("sluice host target clear"),
            color_attachments: &[Some(wgpu::RenderPassColorAttachment {
                view: &view,
                depth_slice: None,
                resolve_target: None,
                ops: wgpu::Operations {
                    load: wgpu::LoadOp::Clear(wgpu::Color::TRANSPARENT),
                    store: wgpu::StoreOp::Store,
                },
            })],
            ..Default::default()
        });
        let index = renderer.queue().submit([encoder.finish()]);
        wait(device, index, "clearing a new host target")
    }

    /// Draws `scene` through `camera` into the target (as [`Renderer::render`] does: only what
    /// changed since the last frame, unless [`HostTarget::invalidate`] was called) and returns
    /// the frame's statistics. The pixels are not readable again until the next
    /// [`HostTarget::read`].
    pub fn render(
        &mut self,
        renderer: &mut Renderer,
        scene: &Scene,
        camera: &dyn Camera,
    ) -> Result<FrameStats, InteropError> {
        same_device(&self.interop, renderer)?;
        self.readable = false;
        if let Storage::InPlace(mapped) = &mut self.storage {
            if mapped.general {
                let index = submit_barrier(
                    self.interop.vulkan(),
                    renderer,
                    self.target.texture(),
                    Transition::BackToDrawing,
                )?;
                // Not waited for: the queue orders it before the frame's passes. A drop of the
                // target waits for it (wgpu does not track this use of the texture).
                mapped.pending = Some(index);
                mapped.general = false;
            }
        }
        Ok(renderer.render(scene, camera, &self.target)?)
    }

    /// Makes the next [`HostTarget::render`] redraw the whole target
    /// ([`RenderTarget::invalidate`]).
    pub fn invalidate(&self) {
        self.target.invalidate();
    }

    /// Waits until the last frame drawn is in host memory (in place: a barrier that makes the
    /// device's writes visible to the host and the wait; copied: the GPU's copy into the
    /// frame's pages and the wait). `renderer` must be the one the target was made for (on
    /// the same device; the error says so otherwise). On an error the pixels stay unreadable
    /// until a read succeeds.
    pub fn read(&mut self, renderer: &Renderer) -> Result<(), InteropError> {
        same_device(&self.interop, renderer)?;
        self.readable = false;
        match &mut self.storage {
            Storage::Copied(frame) => frame.read(renderer, &self.target)?,
            Storage::InPlace(mapped) => {
                let transition = if mapped.general {
                    Transition::HostAgain
                } else {
                    Transition::ToHost
                };
                let index = submit_barrier(
                    self.interop.vulkan(),
                    renderer,
                    self.target.texture(),
                    transition,
                )?;
                mapped.general = true;
                // Pending until waited for (a failed wait leaves it to the drop); waiting for
                // it also waits for every earlier submission.
                mapped.pending = Some(index.clone());
                wait(renderer.device(), index, "reading a host target")?;
                mapped.pending = None;
            }
        }
        self.readable = true;
        Ok(())
    }

    /// The last frame read: `height` rows of `width` RGBA8 pixels, each row starting
    /// [`HostTarget::bytes_per_row`] bytes after the one before; the slice ends with the last
    /// row's last pixel or later (what lies between one row's pixels and the next row is
    /// unspecified). `None` before the first read and after a render until the next read (in
    /// place, the pages are the frame being drawn).
    pub fn bytes(&self) -> Option<&[u8]> {
        if !self.readable {
            return None;
        }
        match &self.storage {
            Storage::Copied(frame) => Some(frame.bytes()),
            Storage::InPlace(mapped) => {
                let len = self.in_place_len(mapped);
                // SAFETY: `first` points `len` bytes into a live mapping of the texture's
                // memory (`in_place` checked the subresource holds them; the texture is ours
                // and alive), zeroed from the host before the device first used it and since
                // written only by the device. `readable` says a read finished after the last
                // render: every device write is complete and visible to the host (the
                // barrier), and the next write needs `render`, which borrows `self` mutably,
                // so none overlaps this shared borrow.
                Some(unsafe { std::slice::from_raw_parts(mapped.first.as_ptr(), len) })
            }
        }
    }

    /// Bytes from the first pixel to the last row's end.
    fn in_place_len(&self, mapped: &Mapped) -> usize {
        mapped.row_pitch * (self.height() as usize - 1) + self.width() as usize * 4
    }

    /// Row `y`'s `width * 4` bytes of the last frame read; `None` past the last row or while
    /// [`HostTarget::bytes`] is `None`.
    pub fn row(&self, y: u32) -> Option<&[u8]> {
        if y >= self.height() {
            return None;
        }
        let start = y as usize * self.bytes_per_row() as usize;
        self.bytes()?.get(start..start + self.width() as usize * 4)
    }

    /// The last frame read with no padding between rows (`width * height * 4` bytes, as
    /// [`Renderer::read_into`] gives them), copied; `None` while [`HostTarget::bytes`] is.
    pub fn to_packed(&self) -> Option<Vec<u8>> {
        self.bytes()?;
        let mut out = Vec::with_capacity(self.width() as usize * 4 * self.height() as usize);
        for y in 0..self.height() {
            out.extend_from_slice(self.row(y)?);
        }
        Some(out)
    }

    /// Width in pixels.
    pub fn width(&self) -> u32 {
        self.target.width()
    }

    /// Height in pixels.
    pub fn height(&self) -> u32 {
        self.target.height()
    }

    /// Bytes from one row's start to the next's: the driver's row pitch in place, the
    /// [`HostFrame`]'s otherwise.
    pub fn bytes_per_row(&self) -> u32 {
        match &self.storage {
            // `in_place` checked that the pitch fits in u32.
            Storage::InPlace(mapped) => mapped.row_pitch as u32,
            Storage::Copied(frame) => frame.bytes_per_row(),
        }
    }

    /// Whether frames are drawn in host memory in place (no copy per read).
    pub fn is_in_place(&self) -> bool {
        matches!(self.storage, Storage::InPlace(_))
    }

    /// Why frames are copied rather than drawn in place; `None` in place.
    pub fn fallback_reason(&self) -> Option<&str> {
        self.fallback.as_deref()
    }
}

impl Drop for HostTarget {
    fn drop(&mut self) {
        // A barrier recorded outside wgpu's tracking may still use the texture, which wgpu
        // would otherwise destroy as soon as it is dropped.
        if let Storage::InPlace(Mapped {
            pending: Some(index),
            ..
        }) = &self.storage
        {
            let _ = self.interop.device().poll(wgpu::PollType::Wait {
                submission_index: Some(index.clone()),
                timeout: None,
            });
        }
    }
}

/// Refuses a renderer on another device than `interop`'s.
fn same_device(interop: &Interop, renderer: &Renderer) -> Result<(), InteropError> {
    if renderer.device() != interop.device() {
        return Err(InteropError::HostFrame {
            reason: "the renderer is not on the host target's device: make both from one Interop"
                .into(),
        });
    }
    Ok(())
}

/// Waits for submission `index`; a failure is a render error naming `what`.
fn wait(
    device: &wgpu::Device,
    index: wgpu::SubmissionIndex,
    what: &str,
) -> Result<(), InteropError> {
    device
        .poll(wgpu::PollType::Wait {
            submission_index: Some(index),
            timeout: None,
        })
        .map(|_| ())
        .map_err(|e| {
            InteropError::Render(sluice_render::RenderError::Gpu(format!(
                "waiting for the GPU while {what}: {e}"
            )))
        })
}

/// Why an in-place target was not made: a size to refuse, or a reason to copy instead.
enum Refused {
    Size(InteropError),
    Other(String),
}

/// The in-place texture of `width` x `height` and its mapping.
fn in_place(
    dev: &VulkanDevice,
    width: u32,
    height: u32,
) -> Result<(wgpu::Texture, Mapped), Refused> {
    let limit = dev.device.limits().max_texture_dimension_2d;
    if width == 0 || height == 0 || width > limit || height > limit {
        return Err(Refused::Size(InteropError::Render(
            sluice_render::RenderError::TargetSize {
                width,
                height,
                limit,
            },
        )));
    }
    let fail = |what: &str, e: vk::Result| Refused::Other(format!("{what} answered {e:?}"));
    // SAFETY: the physical device is live (the device holds it); the query has no pointers.
    let properties = unsafe {
        dev.instance.get_physical_device_image_format_properties(
            dev.physical,
            IMAGE_FORMAT,
            vk::ImageType::TYPE_2D,
            vk::ImageTiling::LINEAR,
            IMAGE_USAGE,
            vk::ImageCreateFlags::empty(),
        )
    }
    .map_err(|e| {
        fail(
            "vkGetPhysicalDeviceImageFormatProperties (linear RGBA8 colour attachment)",
            e,
        )
    })?;
    // SAFETY: the physical device is live; the query has no pointers.
    let features = unsafe {
        dev.instance
            .get_physical_device_format_properties(dev.physical, IMAGE_FORMAT)
    }
    .linear_tiling_features;
    let wanted = vk::FormatFeatureFlags::COLOR_ATTACHMENT
        | vk::FormatFeatureFlags::COLOR_ATTACHMENT_BLEND
        | vk::FormatFeatureFlags::TRANSFER_SRC
        | vk::FormatFeatureFlags::SAMPLED_IMAGE;
    if !features.contains(wanted) {
        return Err(Refused::Other(format!(
            "linear RGBA8 images have the features {features:?}, not all of {wanted:?} \
             (the renderer blends into its target)"
        )));
    }
    let max = properties.max_extent;
    if width > max.width || height > max.height {
        return Err(Refused::Other(format!(
            "the largest linear RGBA8 colour attachment is {} x {}",
            max.width, max.height
        )));
    }
    let info = vk::ImageCreateInfo::default()
        .image_type(vk::ImageType::TYPE_2D)
        .format(IMAGE_FORMAT)
        .extent(vk::Extent3D {
            width,
            height,
            depth: 1,
        })
        .mip_levels(1)
        .array_layers(1)
        .samples(vk::SampleCountFlags::TYPE_1)
        .tiling(vk::ImageTiling::LINEAR)
        .usage(IMAGE_USAGE)
        .sharing_mode(vk::SharingMode::EXCLUSIVE)
        .initial_layout(vk::ImageLayout::UNDEFINED);
    // SAFETY: a valid create info with no pNext chain; format, tiling and usage were checked
    // supported for this size above.
    let image = unsafe { dev.raw.create_image(&info, None) }
        .map_err(|e| fail("vkCreateImage (linear)", e))?;
    let image = RawImage::adopt(dev, image);
    let requirements = image.requirements();
    let wanted = vk::MemoryPropertyFlags::HOST_VISIBLE | vk::MemoryPropertyFlags::HOST_COHERENT;
    let Some(type_index) = dev.memory_types.iter().enumerate().position(|(i, t)| {
        requirements.memory_type_bits & (1 << i) != 0 && t.property_flags.contains(wanted)
    }) else {
        return Err(Refused::Other(format!(
            "no host-visible, host-coherent memory type for a linear image (allowed types \
             {:#b})",
            requirements.memory_type_bits
        )));
    };
    // SAFETY: the image was just created with linear tiling and a colour format.
    let layout = unsafe { image.linear_layout() };
    let row = u64::from(width) * 4;
    let needed = layout
        .row_pitch
        .checked_mul(u64::from(height) - 1)
        .and_then(|b| b.checked_add(row));
    let fits = needed.is_some_and(|n| {
        n <= layout.size
            && layout
                .offset
                .checked_add(layout.size)
                .is_some_and(|end| end <= requirements.size)
    });
    if layout.row_pitch < row
        || !layout.row_pitch.is_multiple_of(4)
        || u32::try_from(layout.row_pitch).is_err()
        || !fits
    {
        return Err(Refused::Other(format!(
            "the driver lays the linear image out with rows {} bytes apart in {} bytes at \
             offset {} of {}, which cannot hold {width} x {height} RGBA8 pixels",
            layout.row_pitch, layout.size, layout.offset, requirements.size
        )));
    }
    let mut dedicated = vk::MemoryDedicatedAllocateInfo::default().image(image.handle());
    let allocate = vk::MemoryAllocateInfo::default()
        .allocation_size(requirements.size)
        .memory_type_index(type_index as u32)
        .push_next(&mut dedicated);
    // SAFETY: a valid allocation info whose pNext chain (the dedicated image) lives until the
    // call returns.
    let memory = unsafe { dev.raw.allocate_memory(&allocate, None) }
        .map_err(|e| fail("vkAllocateMemory (host-visible image)", e))?;
    let memory = OwnedMemory { dev, memory };
    // SAFETY: image and memory are live, unbound and of this device; the memory is a
    // dedicated allocation of the image's size from a type its requirements allow.
    unsafe { dev.raw.bind_image_memory(image.handle(), memory.memory, 0) }
        .map_err(|e| fail("vkBindImageMemory", e))?;
    // SAFETY: host-visible memory, not mapped before, mapped whole.
    let base = unsafe {
        dev.raw.map_memory(
            memory.memory,
            0,
            vk::WHOLE_SIZE,
            vk::MemoryMapFlags::empty(),
        )
    }
    .map_err(|e| fail("vkMapMemory", e))?;
    let Some(base) = NonNull::new(base.cast::<u8>()) else {
        return Err(Refused::Other("vkMapMemory gave a null pointer".into()));
    };
    // SAFETY: the mapping covers the allocation's `requirements.size` bytes, which the device
    // has not used yet; zeroing them makes every byte the host may later read initialised.
    // The memory is host-coherent, so the write is visible to the device once submitted.
    unsafe { std::ptr::write_bytes(base.as_ptr(), 0, requirements.size as usize) };
    // SAFETY: `layout.offset + layout.size` lies within the allocation (checked above).
    let first = unsafe { base.add(layout.offset as usize) };
    let desc = wgpu::TextureDescriptor {
        label: Some("sluice host target"),
        size: wgpu::Extent3d {
            width,
            height,
            depth_or_array_layers: 1,
        },
        mip_level_count: 1,
        sample_count: 1,
        dimension: wgpu::TextureDimension::D2,
        format: TARGET_FORMAT,
        usage: TARGET_USAGE,
        view_formats: &[],
    };
    let (image, memory) = (image.release(), memory.release());
    // SAFETY: the image was created on this device with `IMAGE_USAGE` (the usages below in
    // wgpu's words) as `desc` describes, and is bound to `memory`, its dedicated allocation,
    // which only the host has written (the zeroes above).
    let texture = unsafe {
        wrap_image(
            dev,
            image,
            memory,
            &desc,
            wgpu::TextureUses::COLOR_TARGET
                | wgpu::TextureUses::COPY_SRC
                | wgpu::TextureUses::RESOURCE,
        )
    }
    .map_err(|e| Refused::Other(e.to_string()))?;
    Ok((
        texture,
        Mapped {
            first,
            row_pitch: layout.row_pitch as usize,
            general: false,
            pending: None,
        },
    ))
}

/// Memory not yet handed to wgpu, freed on drop unless released.
struct OwnedMemory<'a> {
    dev: &'a VulkanDevice,
    memory: vk::DeviceMemory,
}

impl OwnedMemory<'_> {
    fn release(mut self) -> vk::DeviceMemory {
        std::mem::replace(&mut self.memory, vk::DeviceMemory::null())
    }
}

impl Drop for OwnedMemory<'_> {
    fn drop(&mut self) {
        if self.memory != vk::DeviceMemory::null() {
            // SAFETY: the memory was never handed to wgpu or used by the device (freeing it
            // unmaps it where it was mapped).
            unsafe { self.dev.raw.free_memory(self.memory, None) };
        }
    }
}

/// The layout changes an in-place target goes through outside wgpu's knowledge.
#[derive(Clone, Copy)]
enum Transition {
    /// From drawing (`COLOR_ATTACHMENT_OPTIMAL`) to the host's reads (`GENERAL`).
    ToHost,
    /// A second read with no render between: `GENERAL` stays, earlier writes made visible.
    HostAgain,
    /// From the host's reads back to drawing.
    BackToDrawing,
}

/// Records `transition` of `texture` (an in-place target's) on a command buffer of its own
/// and submits it.
fn submit_barrier(
    dev: &VulkanDevice,
    renderer: &Renderer,
    texture: &wgpu::Texture,
    transition: Transition,
) -> Result<wgpu::SubmissionIndex, InteropError> {
    use vk::AccessFlags as A;
    use vk::ImageLayout as L;
    use vk::PipelineStageFlags as S;
    let (old, new, src_stage, src_access, dst_stage, dst_access) = match transition {
        Transition::ToHost => (
            L::COLOR_ATTACHMENT_OPTIMAL,
            L::GENERAL,
            S::ALL_COMMANDS,
            A::MEMORY_WRITE,
            S::HOST,
            A::HOST_READ,
        ),
        Transition::HostAgain => (
            L::GENERAL,
            L::GENERAL,
            S::ALL_COMMANDS,
            A::MEMORY_WRITE,
            S::HOST,
            A::HOST_READ,
        ),
        Transition::BackToDrawing => (
            L::GENERAL,
            L::COLOR_ATTACHMENT_OPTIMAL,
            S::HOST,
            A::empty(),
            S::COLOR_ATTACHMENT_OUTPUT,
            A::COLOR_ATTACHMENT_READ | A::COLOR_ATTACHMENT_WRITE,
        ),
    };
    // SAFETY: the guard is only held while the handle is read; nothing is destroyed through
    // it.
    let image = unsafe { texture.as_hal::<Vulkan>() }
        // SAFETY: the texture is alive (the guard holds it); the handle is only recorded in a
        // barrier below, submitted while the texture is still ours.
        .map(|t| unsafe { t.raw_handle() })
        .ok_or(InteropError::TextureDestroyed)?;
    let barrier = vk::ImageMemoryBarrier::default()
        .src_access_mask(src_access)
        .dst_access_mask(dst_access)
        .old_layout(old)
        .new_layout(new)
        .src_queue_family_index(vk::QUEUE_FAMILY_IGNORED)
        .dst_queue_family_index(vk::QUEUE_FAMILY_IGNORED)
        .image(image)
        .subresource_range(COLOR);
    // SAFETY: the image is the target's, alive, and in `old` (see the module notes: wgpu's
    // tracked colour-attachment layout, or `GENERAL` after a read); `BackToDrawing` leaves it
    // in the layout wgpu tracks, and a read's transition is undone by the next render's.
    let commands = unsafe {
        image_barrier_commands(
            dev,
            renderer.device(),
            "sluice host target barrier",
            &barrier,
            src_stage,
            dst_stage,
        )
    }
    .ok_or_else(|| {
        InteropError::vulkan(
            "recording a host target barrier (the encoder is not a Vulkan one)",
            "",
        )
    })?;
    Ok(renderer.queue().submit([commands]))
}
