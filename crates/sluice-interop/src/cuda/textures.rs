//! The renderer's direct path for CUDA memory the user owns, shown as a 2-D image or a
//! volume: CUDA copies the source on the user's stream straight into a texture, whose memory
//! the renderer exported and CUDA maps as a CUDA array; the proxy binds that texture in place
//! of its own. Nothing is copied on the renderer's queue (against the staging path, this
//! saves a copy of every texel on the GPU; see `docs/gpu-interop.md`).
//!
//! A proxy keeps the texture it binds until the source changes again ([`TextureLease`]).
//! Frames in flight may still draw it after that, so when the proxy lets go, the next submit
//! signals the texture's `read` semaphore (submission order covers every earlier draw), and
//! the texture goes back to the pool. Copies into it are ordered by its [`Handover`] and
//! textures are reused under the pool's policy, exactly as staging buffers are.

use std::collections::{HashMap, HashSet};
use std::sync::Arc;

use parking_lot::Mutex;
use sluice_core::CudaMemory;
use sluice_render::{DeviceTexture, DeviceTextureRequest};

use super::driver::{
    array_format, copy_into_array, copy_into_surface, surface_copy_fits, ExternalArray, Pitched,
    StreamHandle,
};
use super::pool::{Handover, Pool, Pooled, Taken};
use super::CudaInterop;
use crate::error::InteropError;
use crate::interop::Interop;
use crate::vulkan::texture::{vk_format, ExportedTexture};

/// Free textures kept for reuse.
const SPARE_TEXTURES: usize = 8;

/// What a texture is: any texture of the same key can take a source's copy.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
struct Key {
    format: wgpu::TextureFormat,
    size: wgpu::Extent3d,
    dimension: wgpu::TextureDimension,
}

struct Slot {
    /// First, so that it drops (waiting for CUDA's last copy) before the array.
    handover: Handover,
    array: ExternalArray,
    texture: ExportedTexture,
    key: Key,
    bytes: u64,
}

impl Pooled for Slot {
    fn handover(&self) -> &Handover {
        &self.handover
    }

    fn handover_mut(&mut self) -> &mut Handover {
        &mut self.handover
    }

    fn bytes(&self) -> u64 {
        self.bytes
    }
}

impl Slot {
    fn new(cuda: &CudaInterop, key: Key, texel_bytes: usize) -> Result<Self, InteropError> {
        let format = array_format(key.format).ok_or(InteropError::UnsupportedLayout {
            reason: format!("CUDA has no array format for {:?}", key.format),
        })?;
        let texture = cuda
            .interop()
            .export_texture(key.format, key.size, key.dimension)?;
        let depth = match key.dimension {
            wgpu::TextureDimension::D3 => key.size.depth_or_array_layers as usize,
            _ => 0,
        };
        let array = ExternalArray::import(
            cuda.context(),
            texture.export_fd()?,
            texture.allocation_size(),
            format,
            texel_bytes,
            [key.size.width as usize, key.size.height as usize, depth],
        )?;
        Ok(Slot {
            handover: Handover::new(cuda)?,
            array,
            bytes: texture.allocation_size(),
            texture,
            key,
        })
    }
}

/// Textures lent to proxies, by key, and their bytes.
#[derive(Default)]
struct Lent {
    count: HashMap<Key, usize>,
    bytes: u64,
}

struct Textures {
    interop: Interop,
    pool: Mutex<Pool<Slot>>,
    lent: Mutex<Lent>,
    /// Keys the driver would not share: their sources take the staging path.
    refused: Mutex<HashSet<Key>>,
}

impl Textures {
    /// Submits the renderer's queue (empty) if a free texture's read signal is still queued,
    /// so that nothing waits for a signal that no submit carries.
    fn flush_releases(&self) {
        let queued = self
            .pool
            .lock()
            .free
            .iter()
            .any(|slot| slot.handover.is_unsubmitted());
        if queued {
            self.interop.queue().submit([]);
            self.submitted();
        }
    }

    fn submitted(&self) {
        for slot in &mut self.pool.lock().free {
            slot.handover.submitted();
        }
    }
}

impl Drop for Textures {
    fn drop(&mut self) {
        self.flush_releases();
    }
}

/// The direct path's textures, shared with the leases proxies hold.
pub(crate) struct CudaTextures {
    textures: Arc<Textures>,
    /// Copy with `cuMemcpy3D` rather than the surface-store kernel (a diagnostic:
    /// `SLUICE_CUDA_ARRAY_COPY=memcpy`).
    memcpy: bool,
}

impl CudaTextures {
    pub fn new(interop: Interop) -> Self {
        CudaTextures {
            textures: Arc::new(Textures {
                interop,
                pool: Mutex::new(Pool::default()),
                lent: Mutex::new(Lent::default()),
                refused: Mutex::new(HashSet::new()),
            }),
            memcpy: std::env::var("SLUICE_CUDA_ARRAY_COPY").is_ok_and(|v| v == "memcpy"),
        }
    }

    /// A texture holding all of the source at `memory` once the next submit has waited for
    /// CUDA's copy; `None` where the direct path does not apply (a format CUDA arrays lack, a
    /// texture the driver would not share, or the path switched off), and the proxy copies
    /// through staging instead. The caller has checked the memory and layout.
    pub fn provide(
        &self,
        cuda: &CudaInterop,
        request: &DeviceTextureRequest<'_>,
        memory: &CudaMemory,
    ) -> Result<Option<DeviceTexture>, InteropError> {
        let textures = &self.textures;
        if !textures.interop.direct_cuda_textures() {
            return Ok(None);
        }
        let key = Key {
            format: request.format,
            size: request.size,
            dimension: request.dimension,
        };
        let shaped = match key.dimension {
            wgpu::TextureDimension::D2 => key.size.depth_or_array_layers == 1,
            wgpu::TextureDimension::D3 => true,
            wgpu::TextureDimension::D1 => false,
        };
        if !shaped
            || array_format(key.format).is_none()
            || vk_format(key.format).is_none()
            || textures.refused.lock().contains(&key)
        {
            return Ok(None);
        }
        let texel_bytes = request.layout.sample_bytes();
        let Some(mut slot) = self.take(cuda, key, texel_bytes)? else {
            return Ok(None);
        };
        let stream = StreamHandle::from_raw(memory.stream);
        let src = Pitched::at(memory, [0, 0, 0], texel_bytes);
        let array = &slot.array;
        let ctx = cuda.context();
        let kernel = !self.memcpy && surface_copy_fits(src, array);
        slot.handover
            .enqueue(cuda, stream, memory.ready_event, || {
                if kernel {
                    copy_into_surface(cuda.device().surface_kernels()?, stream, src, array)
                } else {
                    copy_into_array(ctx, stream, src, array)
                }
            })?;
        let texture = slot.texture.texture().clone();
        {
            let mut lent = textures.lent.lock();
            *lent.count.entry(key).or_default() += 1;
            lent.bytes += slot.bytes;
        }
        Ok(Some(DeviceTexture {
            texture,
            lease: Box::new(TextureLease {
                textures: textures.clone(),
                slot: Some(slot),
            }),
        }))
    }

    /// A texture of `key` (see [`Pool::take`]); `None` if the driver will not make one.
    fn take(
        &self,
        cuda: &CudaInterop,
        key: Key,
        texel_bytes: usize,
    ) -> Result<Option<Slot>, InteropError> {
        let textures = &self.textures;
        let bytes = u64::from(key.size.width)
            * u64::from(key.size.height)
            * u64::from(key.size.depth_or_array_layers)
            * texel_bytes as u64;
        let fits = |slot: &Slot| slot.key == key;
        let out = {
            let lent = textures.lent.lock();
            (lent.bytes, lent.count.get(&key).copied().unwrap_or(0))
        };
        let flush = || {
            textures.interop.queue().submit([]);
        };
        match Pool::take(textures.pool.lock(), bytes, fits, out, flush) {
            Taken::Reuse(slot) => Ok(Some(slot)),
            Taken::New(uses) => match Slot::new(cuda, key, texel_bytes) {
                Ok(mut slot) => {
                    slot.handover.stamp(uses);
                    Ok(Some(slot))
                }
                Err(e @ InteropError::TextureNotShareable { .. }) => {
                    log::warn!("CUDA sources of this shape take the staging path: {e}");
                    textures.refused.lock().insert(key);
                    Ok(None)
                }
                Err(e) => Err(e),
            },
        }
    }

    pub fn frame_submitted(&self) {
        self.textures.submitted();
    }
}

/// A proxy's hold on a texture the direct path filled. Dropping it queues the texture's read
/// signal for the next submit and returns the texture to the pool.
struct TextureLease {
    textures: Arc<Textures>,
    slot: Option<Slot>,
}

impl Drop for TextureLease {
    fn drop(&mut self) {
        let Some(mut slot) = self.slot.take() else {
            return;
        };
        slot.handover.release_after_next_submit();
        {
            let mut lent = self.textures.lent.lock();
            if let Some(count) = lent.count.get_mut(&slot.key) {
                *count = count.saturating_sub(1);
            }
            lent.bytes = lent.bytes.saturating_sub(slot.bytes);
        }
        let mut pool = self.textures.pool.lock();
        pool.free.push(slot);
        if pool.free.len() > SPARE_TEXTURES {
            let oldest = pool
                .free
                .iter()
                .enumerate()
                .min_by_key(|(_, s)| s.handover.last_use())
                .map(|(i, _)| i);
            if let Some(i) = oldest {
                let dropped = pool.free.swap_remove(i);
                drop(pool);
                // Its read signal may still be queued: submit it before the drop waits for it.
                if dropped.handover.is_unsubmitted() {
                    self.textures.interop.queue().submit([]);
                }
                drop(dropped);
            }
        }
    }
}
