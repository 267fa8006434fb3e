//! `InteropUpload`: the renderer's GPU-side upload path for device-resident sources.
//!
//! Vulkan memory is imported once per shared fd (cached while the source's fd lives) and
//! copied into the proxy's texture by `copy_buffer_to_texture`; the frame's submit waits for
//! the source's semaphore value first and signals the next after. CUDA memory (feature
//! `cuda`) is first copied on the producer's stream into a staging buffer the renderer
//! exported, then the same way. Mesh attributes (1-D sources) take the same paths, ending in
//! a `copy_buffer_to_buffer` of their element range into the vertex buffer. Host-imported
//! pages (`HostImportSource`, `HostBufferSource`) are copied from as they are, textures and
//! mesh attributes alike.

use std::collections::HashMap;
use std::os::fd::OwnedFd;
use std::sync::{Arc, Weak};

use parking_lot::Mutex;
use sluice_core::{DataSource, Layout, Residency, VulkanMemory};
use sluice_render::{
    DeviceBufferCopy, DeviceCopy, DeviceCopyOutcome, DeviceTexture, DeviceTextureRequest,
    DeviceUpload, DeviceUploadError, RenderError, Renderer, RendererOptions,
};

use crate::error::InteropError;
use crate::interop::Interop;
use crate::source::{check_texture_layout, check_vulkan_memory, Pitches};
use crate::vulkan::memory::fd_key;
use crate::vulkan::semaphore::SharedSemaphore;

struct Import {
    fd: Weak<OwnedFd>,
    allocation_size: u64,
    memory_type_index: u32,
    buffer: wgpu::Buffer,
}

struct SemaphoreImport {
    fd: Weak<OwnedFd>,
    semaphore: Arc<SharedSemaphore>,
}

pub(crate) struct InteropUpload {
    interop: Interop,
    imports: Mutex<HashMap<usize, Import>>,
    semaphores: Mutex<HashMap<usize, SemaphoreImport>>,
    /// (semaphore, wait value) pairs the frame being recorded already waits on and signals
    /// after, and whether its copies of that data go ahead (`false`: being rewritten, skip).
    frame: Mutex<HashMap<(usize, u64), bool>>,
    /// Host-imported sources copied from in the frame being recorded, told when it was
    /// submitted (so their writers can wait for the copies).
    /// (Frames drawing host pages in place count themselves here too.)
    host_frame: Arc<Mutex<Vec<Arc<crate::host_import::GpuUse>>>>,
    /// Whether host pages are sampled in place on this device (`samples_host_pages`).
    in_place: bool,
    #[cfg(feature = "cuda")]
    cuda: crate::cuda::staging::CudaStaging,
    #[cfg(feature = "cuda")]
    cuda_textures: crate::cuda::textures::CudaTextures,
}

impl InteropUpload {
    pub fn new(interop: Interop) -> Self {
        InteropUpload {
            #[cfg(feature = "cuda")]
            cuda: crate::cuda::staging::CudaStaging::new(interop.clone()),
            #[cfg(feature = "cuda")]
            cuda_textures: crate::cuda::textures::CudaTextures::new(interop.clone()),
            imports: Mutex::new(HashMap::new()),
            semaphores: Mutex::new(HashMap::new()),
            frame: Mutex::new(HashMap::new()),
            host_frame: Arc::new(Mutex::new(Vec::new())),
            in_place: interop.draws_host_buffers_in_place(),
            interop,
        }
    }

    /// Checks a source drawn through a texture.
    fn check_residency(&self, residency: &Residency, layout: &Layout) -> Result<(), InteropError> {
        if !matches!(residency, Residency::Host) {
            check_texture_layout(layout)?;
        }
        self.check_memory(residency, layout)
    }

    /// Checks that the memory holds `layout` and that this renderer can read it (layouts
    /// texture or attribute copies take are checked by their callers).
    fn check_memory(&self, residency: &Residency, layout: &Layout) -> Result<(), InteropError> {
        match residency {
            Residency::Vulkan(memory) => {
                check_vulkan_memory(layout, memory)?;
                self.interop.check_uuid(memory.device_uuid)?;
                if memory.semaphore.is_some() {
                    self.interop.semaphore_fd()?;
                }
                Ok(())
            }
            Residency::Cuda(memory) => self.check_cuda(memory, layout),
            Residency::HostImported(memory) => {
                crate::host_import::lookup(&self.interop, memory).map(drop)
            }
            _ => Ok(()),
        }
    }

    #[cfg(feature = "cuda")]
    fn check_cuda(
        &self,
        memory: &sluice_core::CudaMemory,
        layout: &Layout,
    ) -> Result<(), InteropError> {
        self.cuda.check(memory, layout).map(drop)
    }

    #[cfg(not(feature = "cuda"))]
    fn check_cuda(&self, _: &sluice_core::CudaMemory, _: &Layout) -> Result<(), InteropError> {
        Err(InteropError::CudaUnavailable(
            "this build of sluice has no CUDA support: enable the `cuda` feature",
        ))
    }

    /// Records the copy of a host-imported source's region from its pages.
    fn copy_host_imported(
        &self,
        copy: &mut DeviceCopy<'_>,
        memory: &sluice_core::HostImportedMemory,
    ) -> Result<(), InteropError> {
        let imported = crate::host_import::lookup(&self.interop, memory)?;
        let layout = copy.layout;
        let sample = layout.sample_bytes() as u64;
        let d = layout.shape().padded();
        let row_pitch = d[2] as u64 * sample;
        let plane_pitch = d[1] as u64 * row_pitch;
        let region = copy.region;
        let first = region.origin[0] as u64 * plane_pitch
            + region.origin[1] as u64 * row_pitch
            + region.origin[2] as u64 * sample;
        let host = imported.record_copy(layout.region_bytes(&region) as u64)?;
        // Settled after the frame's submission whatever happens below (a panic while the
        // copy is recorded would otherwise leave a count that no frame settles, and the next
        // write of the pages would wait on it for ever).
        self.host_frame.lock().push(host.gpu.clone());
        copy.copy_from_buffer(
            &host.buffer,
            host.first_sample + first,
            row_pitch,
            plane_pitch,
        );
        Ok(())
    }

    /// On lavapipe, a texture over a host-imported 2-D source's pages, drawn where the data
    /// lies (see `in_place`); `None` elsewhere, or where the source cannot offer one (the
    /// proxy then copies from the pages).
    fn host_in_place(
        &self,
        request: &DeviceTextureRequest<'_>,
        memory: &sluice_core::HostImportedMemory,
    ) -> Result<Option<DeviceTexture>, InteropError> {
        let flat = request.dimension == wgpu::TextureDimension::D2
            && request.size.depth_or_array_layers == 1;
        if !self.in_place || !flat {
            return Ok(None);
        }
        let imported = crate::host_import::lookup(&self.interop, memory)?;
        let ask = crate::host_import::InPlaceAsk {
            device: request.device,
            queue: request.queue,
            format: request.format,
            width: request.size.width,
            height: request.size.height,
        };
        Ok(imported.sampled_in_place(&ask).map(|t| DeviceTexture {
            texture: t.texture,
            view: t.view,
            lease: Box::new(()),
            in_place: Some(Arc::new(FrameUse {
                usage: t.usage,
                frame: self.host_frame.clone(),
            })),
        }))
    }

    /// The imported buffer for `memory`, importing it on first use.
    fn import(&self, memory: &VulkanMemory) -> Result<wgpu::Buffer, InteropError> {
        let key = fd_key(&memory.fd);
        let mut imports = self.imports.lock();
        if let Some(import) = imports.get(&key) {
            if import.allocation_size == memory.allocation_size
                && import.memory_type_index == memory.memory_type_index
            {
                return Ok(import.buffer.clone());
            }
        }
        let buffer = self.interop.import_buffer(memory)?;
        imports.insert(
            key,
            Import {
                fd: Arc::downgrade(&memory.fd),
                allocation_size: memory.allocation_size,
                memory_type_index: memory.memory_type_index,
                buffer: buffer.clone(),
            },
        );
        Ok(buffer)
    }

    fn semaphore(&self, fd: &Arc<OwnedFd>) -> Result<Arc<SharedSemaphore>, InteropError> {
        let key = fd_key(fd);
        let mut semaphores = self.semaphores.lock();
        if let Some(import) = semaphores.get(&key) {
            return Ok(import.semaphore.clone());
        }
        let semaphore = Arc::new(self.interop.import_semaphore(fd)?);
        semaphores.insert(
            key,
            SemaphoreImport {
                fd: Arc::downgrade(fd),
                semaphore: semaphore.clone(),
            },
        );
        Ok(semaphore)
    }

    /// Queues the frame's wait for the data and its signal after reading (once per semaphore
    /// and frame). Returns whether the copy goes ahead.
    fn synchronize(&self, memory: &VulkanMemory) -> Result<bool, InteropError> {
        let Some(sync) = &memory.semaphore else {
            return Ok(true);
        };
        let key = fd_key(&sync.fd);
        let mut frame = self.frame.lock();
        if let Some(&go) = frame.get(&(key, sync.wait_value)) {
            return Ok(go);
        }
        let semaphore = self.semaphore(&sync.fd)?;
        let signal = match self.interop.shared().handoffs.get(key) {
            Some(handoff) => match handoff.begin_read(sync.wait_value) {
                Some(value) => Some(value),
                None => {
                    frame.insert((key, sync.wait_value), false);
                    return Ok(false);
                }
            },
            None => sync.signal_value,
        };
        semaphore.wait_before_next_submit(sync.wait_value);
        if let Some(value) = signal {
            semaphore.signal_after_next_submit(value);
        }
        frame.insert((key, sync.wait_value), true);
        Ok(true)
    }

    /// Records the copy of Vulkan memory; `false` when a writer still holds it (nothing
    /// recorded: the renderer keeps its last frame and asks again).
    fn copy_vulkan(
        &self,
        copy: &mut DeviceCopy<'_>,
        memory: &VulkanMemory,
    ) -> Result<bool, InteropError> {
        // The layout was checked when the proxy was made (`DeviceUpload::check`): each copy
        // checks the memory of the version it copies.
        self.check_memory(copy.residency, copy.layout)?;
        let buffer = self.import(memory)?;
        if !self.synchronize(memory)? {
            return Ok(false);
        }
        let pitches = Pitches {
            row: memory.row_pitch,
            plane: memory.plane_pitch,
        };
        let [z, y, x] = copy.region.origin;
        let first = memory.offset
            + (z * pitches.plane + y * pitches.row + x * copy.layout.sample_bytes()) as u64;
        copy.copy_from_buffer(&buffer, first, pitches.row as u64, pitches.plane as u64);
        Ok(true)
    }

    /// Records the copy of elements `copy.range` of a 1-D source into a mesh attribute
    /// buffer: Vulkan memory as `copy_vulkan` does (import once, the same semaphore wait and
    /// handoff), CUDA memory through a staging buffer as textures are. `false` where the
    /// texture path would skip (a writer holds the data).
    fn copy_attribute(&self, copy: &mut DeviceBufferCopy<'_>) -> Result<bool, InteropError> {
        let element = check_attribute(copy.layout, &copy.range)?;
        let dst_offset = copy.range.start as u64 * element;
        let bytes = copy.range.len() as u64 * element;
        match copy.residency {
            Residency::Vulkan(memory) => {
                self.check_memory(copy.residency, copy.layout)?;
                check_copy_aligned("offset in the shared memory", memory.offset)?;
                let buffer = self.import(memory)?;
                if !self.synchronize(memory)? {
                    return Ok(false);
                }
                if bytes > 0 {
                    // 1-D: the elements are back to back from the memory's offset (the row
                    // pitch only spaces rows, and there is one).
                    copy.encoder.copy_buffer_to_buffer(
                        &buffer,
                        memory.offset + dst_offset,
                        copy.buffer,
                        dst_offset,
                        bytes,
                    );
                }
                Ok(true)
            }
            Residency::HostImported(memory) => {
                let imported = crate::host_import::lookup(&self.interop, memory)?;
                let host = imported.record_copy(bytes)?;
                // Settled after the frame's submission whatever happens below.
                self.host_frame.lock().push(host.gpu.clone());
                let src_offset = host.first_sample + dst_offset;
                check_copy_aligned("offset in the imported pages", src_offset)?;
                if bytes > 0 {
                    copy.encoder.copy_buffer_to_buffer(
                        &host.buffer,
                        src_offset,
                        copy.buffer,
                        dst_offset,
                        bytes,
                    );
                }
                Ok(true)
            }
            #[cfg(feature = "cuda")]
            Residency::Cuda(memory) => {
                self.cuda.copy_to_buffer(copy, memory, dst_offset, bytes)?;
                Ok(true)
            }
            Residency::Host => Err(InteropError::UnsupportedAttribute {
                reason: "host data goes through the renderer's host upload".into(),
            }),
            other => self.check_memory(other, copy.layout).and_then(|()| {
                Err(InteropError::UnsupportedAttribute {
                    reason: "this residency has no device copy path".into(),
                })
            }),
        }
    }
}

/// Attribute copies are whole elements of a 1-D layout, 4-byte aligned (GPU buffer copies
/// need it). Returns the element's bytes.
pub(crate) fn check_attribute(
    layout: &Layout,
    range: &std::ops::Range<usize>,
) -> Result<u64, InteropError> {
    let shape = layout.shape();
    if shape.ndim() != 1 {
        return Err(InteropError::UnsupportedAttribute {
            reason: format!("this source has shape {shape}, not 1-D"),
        });
    }
    if range.start > range.end || range.end > shape.len() {
        return Err(InteropError::UnsupportedAttribute {
            reason: format!(
                "elements {}..{} are not within its {} elements",
                range.start,
                range.end,
                shape.len()
            ),
        });
    }
    let element = layout.sample_bytes() as u64;
    check_copy_aligned("element size", element)?;
    Ok(element)
}

fn check_copy_aligned(what: &str, value: u64) -> Result<(), InteropError> {
    if !value.is_multiple_of(wgpu::COPY_BUFFER_ALIGNMENT) {
        return Err(InteropError::UnsupportedAttribute {
            reason: format!(
                "its {what} of {value} bytes is not a multiple of {} bytes",
                wgpu::COPY_BUFFER_ALIGNMENT
            ),
        });
    }
    Ok(())
}

/// Whether a renderer on `info`'s adapter draws 2-D host-imported sources from their pages
/// (`in_place`): only on lavapipe. On a GPU every frame would read the samples across the bus;
/// and Vulkan defines the host's view of a linear image's memory only in the `GENERAL` and
/// `PREINITIALIZED` layouts, while wgpu samples in the shader-read layout. On lavapipe (Mesa's
/// llvmpipe) layouts are bookkeeping only: a linear image is the same bytes in every layout.
pub(crate) fn samples_host_pages(info: &wgpu::AdapterInfo) -> bool {
    info.device_type == wgpu::DeviceType::Cpu && info.driver.eq_ignore_ascii_case("llvmpipe")
}

/// A renderer's hold on an in-place texture: counts the frames that draw it on the
/// renderer's list, settled when each is submitted.
struct FrameUse {
    usage: Arc<crate::in_place::ImageUse>,
    frame: Arc<Mutex<Vec<Arc<crate::host_import::GpuUse>>>>,
}

impl sluice_render::SampledInPlace for FrameUse {
    fn begin_frame(&self) -> bool {
        self.usage.begin_frame(&self.frame)
    }
}

/// `error` as the renderer reports it: a render error inside stays as it is; the rest keeps
/// its numbers in a [`DeviceUploadError`].
fn device_error(error: InteropError, visual: &'static str, source: &dyn DataSource) -> RenderError {
    match error {
        InteropError::Render(e) => e,
        error => RenderError::DeviceUpload {
            visual,
            source_label: source.label(),
            error: error.into(),
        },
    }
}

impl DeviceUpload for InteropUpload {
    fn check(&self, residency: &Residency, layout: &Layout) -> Result<(), DeviceUploadError> {
        Ok(self.check_residency(residency, layout)?)
    }

    fn copy_to_texture(&self, mut copy: DeviceCopy<'_>) -> Result<DeviceCopyOutcome, RenderError> {
        let copied = |done: bool| {
            if done {
                DeviceCopyOutcome::Copied
            } else {
                DeviceCopyOutcome::NotReady
            }
        };
        let result = match copy.residency {
            Residency::Vulkan(memory) => self.copy_vulkan(&mut copy, memory).map(copied),
            Residency::HostImported(memory) => self
                .copy_host_imported(&mut copy, memory)
                .map(|()| DeviceCopyOutcome::Copied),
            #[cfg(feature = "cuda")]
            Residency::Cuda(memory) => self
                .cuda
                .copy(&mut copy, memory)
                .map(|()| DeviceCopyOutcome::Copied),
            other => self
                .check_residency(other, copy.layout)
                .map(|()| DeviceCopyOutcome::Copied),
        };
        result.map_err(|e| device_error(e, "TextureProxy", copy.source))
    }

    fn provide_texture(
        &self,
        request: DeviceTextureRequest<'_>,
    ) -> Result<Option<DeviceTexture>, RenderError> {
        #[cfg(feature = "cuda")]
        if let Residency::Cuda(memory) = request.residency {
            let provided = check_texture_layout(request.layout)
                .and_then(|()| self.cuda.check(memory, request.layout))
                .and_then(|cuda| self.cuda_textures.provide(&cuda, &request, memory));
            return provided.map_err(|e| device_error(e, "TextureProxy", request.source));
        }
        if let Residency::HostImported(memory) = request.residency {
            return self
                .host_in_place(&request, memory)
                .map_err(|e| device_error(e, "TextureProxy", request.source));
        }
        Ok(None)
    }

    fn copy_to_buffer(
        &self,
        mut copy: DeviceBufferCopy<'_>,
    ) -> Result<DeviceCopyOutcome, RenderError> {
        match self.copy_attribute(&mut copy) {
            Ok(true) => Ok(DeviceCopyOutcome::Copied),
            Ok(false) => Ok(DeviceCopyOutcome::NotReady),
            Err(e) => Err(device_error(e, "Mesh", copy.source)),
        }
    }

    fn frame_submitted(&self, queue: &wgpu::Queue) {
        self.frame.lock().clear();
        for gpu in self.host_frame.lock().drain(..) {
            gpu.settle_after_submitted(queue);
        }
        self.imports.lock().retain(|_, i| i.fd.strong_count() > 0);
        self.semaphores
            .lock()
            .retain(|_, s| s.fd.strong_count() > 0);
        #[cfg(feature = "cuda")]
        {
            self.cuda.frame_submitted();
            self.cuda_textures.frame_submitted();
        }
    }

    fn pool_counters(&self) -> sluice_render::DevicePoolCounters {
        #[cfg(feature = "cuda")]
        return crate::cuda::pool::STATS.counters();
        #[cfg(not(feature = "cuda"))]
        sluice_render::DevicePoolCounters::default()
    }
}

impl Interop {
    /// A renderer on this device that uploads device-resident sources GPU-side. Any number
    /// may be made; they share the device.
    pub fn renderer(&self) -> Renderer {
        self.renderer_with_options(&RendererOptions::default())
    }

    /// [`Interop::renderer`] with renderer options (upload budget, 3-D texture limit; the
    /// adapter choice in them is not used).
    pub fn renderer_with_options(&self, options: &RendererOptions) -> Renderer {
        let vk = &self.vulkan();
        let mut renderer = Renderer::from_device(
            vk.adapter.clone(),
            vk.device.clone(),
            vk.queue.clone(),
            options,
        );
        renderer.set_device_upload(Arc::new(InteropUpload::new(self.clone())));
        renderer
    }
}

#[cfg(test)]
mod tests {
    use sluice_core::{ElementType, Shape};

    use super::*;

    fn layout(dims: &[usize], element: ElementType, channels: usize) -> Layout {
        Layout::new(Shape::new(dims).unwrap(), element, channels).unwrap()
    }

    #[test]
    fn attribute_copies_are_whole_aligned_elements_of_1d_sources() {
        let positions = layout(&[10], ElementType::F32, 3);
        assert_eq!(check_attribute(&positions, &(2..10)).unwrap(), 12);
        let e = check_attribute(&layout(&[4, 4], ElementType::F32, 1), &(0..4)).unwrap_err();
        assert!(e.to_string().contains("not 1-D"), "{e}");
        let e = check_attribute(&positions, &(8..11)).unwrap_err();
        assert!(e.to_string().contains("8..11"), "{e}");
        let e = check_attribute(&layout(&[10], ElementType::U16, 3), &(0..10)).unwrap_err();
        assert!(e.to_string().contains("element size of 6 bytes"), "{e}");
    }
}
