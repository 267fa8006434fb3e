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
    StreamHandle, SurfaceCopy,
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
pub(super) struct Key {
    pub(super) format: wgpu::TextureFormat,
    pub(super) size: wgpu::Extent3d,
    pub(super) dimension: wgpu::TextureDimension,
}

pub(super) struct Slot {
    /// First, so that it drops (waiting for CUDA's last copy) before the array.
    handover: Handover,
    pub(super) array: ExternalArray,
    texture: ExportedTexture,
    /// The view proxies bind, made once.
    view: wgpu::TextureView,
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
    pub(super) fn new(
        cuda: &CudaInterop,
        key: Key,
        texel_bytes: usize,
    ) -> Result<Self, InteropError> {
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
            view: texture
                .texture()
                .create_view(&wgpu::TextureViewDescriptor::default()),
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
    /// so that nothing waits for a signal that no submit carries. Only at teardown: during a
    /// frame, an early submit would take the waits the frame has queued.
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

    /// The renderer submitted: every queued read signal is on its way, and free textures
    /// beyond the spares go (the longest unused first).
    fn submitted(&self) {
        let mut pool = self.pool.lock();
        for slot in &mut pool.free {
            slot.handover.submitted();
        }
        while pool.free.len() > SPARE_TEXTURES {
            let oldest = pool
                .free
                .iter()
                .enumerate()
                .min_by_key(|(_, s)| s.handover.last_use())
                .map(|(i, _)| i)
                .expect("more free textures than spares");
            pool.free.swap_remove(oldest);
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
}

/// How CUDA fills the texture it copies a [`crate::cuda::CudaSource`] into (see
/// [`Interop::set_cuda_array_copy`]). All give the same texels; the choice is there to
/// compare them and to rule one out when diagnosing.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[non_exhaustive]
pub enum CudaArrayCopy {
    /// sluice's surface-store kernels, 16 bytes per store where the rows allow (the default).
    #[default]
    Wide,
    /// The surface-store kernels, one texel per store.
    Texel,
    /// The driver's `cuMemcpy3D`.
    Memcpy3D,
}

impl CudaArrayCopy {
    const ALL: [CudaArrayCopy; 3] = [
        CudaArrayCopy::Wide,
        CudaArrayCopy::Texel,
        CudaArrayCopy::Memcpy3D,
    ];

    pub(crate) fn index(self) -> u8 {
        CudaArrayCopy::ALL
            .iter()
            .position(|&m| m == self)
            .unwrap_or(0) as u8
    }

    pub(crate) fn from_index(index: u8) -> Self {
        CudaArrayCopy::ALL
            .get(usize::from(index))
            .copied()
            .unwrap_or_default()
    }

    /// The surface kernel this method uses, if any.
    fn kernel(self) -> Option<SurfaceCopy> {
        match self {
            CudaArrayCopy::Wide => Some(SurfaceCopy::Wide),
            CudaArrayCopy::Texel => Some(SurfaceCopy::Texel),
            CudaArrayCopy::Memcpy3D => None,
        }
    }
}

impl Interop {
    /// Chooses how CUDA fills the textures it copies CUDA sources into, on renderers made from
    /// this `Interop` or its clones (with [`Interop::set_direct_cuda_textures`] on). Takes
    /// effect at the next change.
    pub fn set_cuda_array_copy(&self, method: CudaArrayCopy) {
        self.cuda_settings()
            .cuda_array_copy
            .store(method.index(), std::sync::atomic::Ordering::Relaxed);
    }

    /// How CUDA fills those textures (see [`Interop::set_cuda_array_copy`]).
    pub fn cuda_array_copy(&self) -> CudaArrayCopy {
        CudaArrayCopy::from_index(
            self.cuda_settings()
                .cuda_array_copy
                .load(std::sync::atomic::Ordering::Relaxed),
        )
    }
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
        let method = textures
            .interop
            .cuda_array_copy()
            .kernel()
            .filter(|_| surface_copy_fits(src, array));
        slot.handover
            .enqueue(cuda, stream, memory.ready_event, || match method {
                Some(copy) => {
                    copy_into_surface(cuda.device().surface_kernels()?, stream, src, array, copy)
                }
                None => copy_into_array(ctx, stream, src, array),
            })?;
        let (texture, view) = (slot.texture.texture().clone(), slot.view.clone());
        {
            let mut lent = textures.lent.lock();
            *lent.count.entry(key).or_default() += 1;
            lent.bytes += slot.bytes;
        }
        Ok(Some(DeviceTexture {
            texture,
            view,
            lease: Box::new(TextureLease {
                textures: textures.clone(),
                slot: Some(slot),
            }),
            in_place: None,
        }))
    }

    /// A texture of `key` (see [`Pool::take`]); `None` if one cannot be made (the key is then
    /// refused for good, with a warning).
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
        match Pool::take(textures.pool.lock(), bytes, fits, out) {
            Taken::Reuse(slot) => Ok(Some(slot)),
            Taken::New(uses) => match Slot::new(cuda, key, texel_bytes) {
                Ok(mut slot) => {
                    slot.handover.stamp(uses);
                    Ok(Some(slot))
                }
                // The staging path works wherever this one does not (a format the driver will
                // not share, an array CUDA will not map): sources of this kind take it from now.
                Err(e) => {
                    log::warn!(
                        "CUDA sources of {:?} {:?} textures of {:?} take the staging path: {e}",
                        key.dimension,
                        key.format,
                        key.size
                    );
                    textures.refused.lock().insert(key);
                    Ok(None)
                }
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
        // Trimmed to the spares after the next submit, which carries its read signal.
        self.textures.pool.lock().free.push(slot);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every texel size and dimension, rows of widths that are not whole 16-byte chunks (the
    /// wide kernels' tails), packed rows (the per-texel kernels, or `cuMemcpy3D` for rows that
    /// are not whole words) and pitched ones: the texture CUDA filled, read back, holds exactly
    /// the source's bytes. Runs on the NVIDIA machine; elsewhere it says it skipped (and fails
    /// under `SLUICE_REQUIRE_CUDA=1`).
    #[test]
    fn direct_textures_hold_every_texel_exactly() {
        use crate::cuda::CudaSource;
        use crate::source::Pitches;
        use sluice_core::{DataSource, ElementType as E, Layout, Shape};
        use wgpu::TextureFormat as F;

        if let Err(e) = crate::cuda::driver_available() {
            if std::env::var_os("SLUICE_REQUIRE_CUDA").is_some_and(|v| v != "0") {
                panic!("CUDA is required (SLUICE_REQUIRE_CUDA) but {e}");
            }
            eprintln!("SKIPPED direct_textures_hold_every_texel_exactly: {e}");
            return;
        }
        let interop = Interop::new().unwrap();
        let cuda = interop.cuda().unwrap();
        let stream = cuda.context().new_stream().unwrap();
        let cases: &[(&[usize], E, usize, F)] = &[
            (&[5, 37], E::U8, 1, F::R8Uint),
            (&[4, 19], E::U8, 2, F::Rg8Uint),
            (&[3, 13], E::U8, 4, F::Rgba8Uint),
            (&[4, 21], E::U16, 1, F::R16Uint),
            (&[3, 7], E::I16, 4, F::Rgba16Sint),
            (&[2, 21], E::F32, 1, F::R32Float),
            (&[3, 9], E::F32, 2, F::Rg32Float),
            (&[2, 5], E::F32, 4, F::Rgba32Float),
            (&[2, 3, 23], E::U8, 1, F::R8Uint),
            (&[3, 4, 9], E::F32, 1, F::R32Float),
            (&[2, 2, 11], E::F32, 2, F::Rg32Float),
        ];
        for (method, &(dims, element, channels, format)) in CudaArrayCopy::ALL
            .into_iter()
            .flat_map(|m| cases.iter().map(move |c| (m, c)))
        {
            interop.set_cuda_array_copy(method);
            let textures = CudaTextures::new(interop.clone());
            let layout = Layout::new(Shape::new(dims).unwrap(), element, channels).unwrap();
            let texel = layout.sample_bytes();
            let shape = layout.shape();
            let (w, h) = (shape.width(), shape.height());
            let d = if dims.len() == 3 { dims[0] } else { 1 };
            // Pitches are whole samples (and words): rows one unit longer than needed, planes
            // one unit more than their rows.
            let unit = texel.max(4);
            let row = (w * texel).next_multiple_of(unit) + unit;
            let padded = Pitches {
                row,
                plane: row * h + unit,
            };
            for pitches in [Pitches::packed(&layout), padded] {
                let what = format!("{method:?}: {dims:?} {format:?} at {pitches:?}");
                let span = pitches.span(&layout) as usize;
                let bytes: Vec<u8> = (0..span).map(|i| (i * 31 + 7) as u8).collect();
                let slice = stream.clone_htod(&bytes).unwrap();
                let source = CudaSource::from_slice(&cuda, layout.clone(), pitches, slice).unwrap();
                let memory = source.memory();
                let size = wgpu::Extent3d {
                    width: w as u32,
                    height: h as u32,
                    depth_or_array_layers: d as u32,
                };
                let dimension = if dims.len() == 3 {
                    wgpu::TextureDimension::D3
                } else {
                    wgpu::TextureDimension::D2
                };
                let residency = source.residency();
                let provided = textures
                    .provide(
                        &cuda,
                        &DeviceTextureRequest {
                            device: interop.device(),
                            queue: interop.queue(),
                            source: &source,
                            residency: &residency,
                            layout: &layout,
                            format,
                            size,
                            dimension,
                        },
                        &memory,
                    )
                    .unwrap()
                    .unwrap_or_else(|| panic!("{what}: no texture provided"));
                let row = (w * texel).next_multiple_of(256);
                let readback = interop.device().create_buffer(&wgpu::BufferDescriptor {
                    label: None,
                    size: (row * h * d) as u64,
                    usage: wgpu::BufferUsages::COPY_DST | wgpu::BufferUsages::MAP_READ,
                    mapped_at_creation: false,
                });
                let mut encoder = interop.device().create_command_encoder(&Default::default());
                encoder.copy_texture_to_buffer(
                    provided.texture.as_image_copy(),
                    wgpu::TexelCopyBufferInfo {
                        buffer: &readback,
                        layout: wgpu::TexelCopyBufferLayout {
                            offset: 0,
                            bytes_per_row: Some(row as u32),
                            rows_per_image: Some(h as u32),
                        },
                    },
                    size,
                );
                // This submit waits for CUDA's copy.
                interop.queue().submit([encoder.finish()]);
                textures.frame_submitted();
                readback
                    .slice(..)
                    .map_async(wgpu::MapMode::Read, |r| r.unwrap());
                interop
                    .device()
                    .poll(wgpu::PollType::wait_indefinitely())
                    .unwrap();
                let got = readback.slice(..).get_mapped_range().unwrap();
                for z in 0..d {
                    for y in 0..h {
                        let from = z * pitches.plane + y * pitches.row;
                        let want = &bytes[from..from + w * texel];
                        let at = (z * h + y) * row;
                        assert_eq!(
                            &got[at..at + w * texel],
                            want,
                            "{what}: row {y} of plane {z}"
                        );
                    }
                }
                drop(got);
                drop(provided);
            }
        }
    }
}
