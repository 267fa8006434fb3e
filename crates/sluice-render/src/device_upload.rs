//! The extension point for device-resident sources.
//!
//! Sources whose bytes live in GPU memory (CUDA allocations, Vulkan memory exported as a file
//! descriptor) are not staged through the host: the proxy hands each planned copy to a
//! [`DeviceUpload`], which records a GPU-side copy into the proxy's texture. `sluice-interop`
//! implements it; this crate only defines the contract, so the dependency stays one way.

use sluice_core::{DataSource, Layout, Region, Residency};

use crate::counters::DevicePoolCounters;
use crate::error::RenderError;
use crate::unpack::{UnpackCopy, Unpacker};

/// GPU-side uploads for sources that are not in host memory.
pub trait DeviceUpload: Send + Sync {
    /// `Ok` if sources of this residency and layout can be uploaded by this implementation on
    /// this renderer's device; otherwise why not (another device, memory too small, a missing
    /// driver extension, ...). The proxy asks once, when it is made and when the layout
    /// changes.
    fn check(&self, residency: &Residency, layout: &Layout) -> Result<(), DeviceUploadError>;

    /// Records commands copying `copy.region` of the source into `copy.texture` at the same
    /// position (same format: the layout needs no conversion). May queue semaphore waits or
    /// signals for the next submit through `copy.queue`. Returns
    /// [`DeviceCopyOutcome::NotReady`] (recording nothing) while a producer still holds the
    /// data: the renderer keeps what it shows and asks again next frame.
    fn copy_to_texture(&self, copy: DeviceCopy<'_>) -> Result<DeviceCopyOutcome, RenderError>;

    /// Offers a texture that will hold the whole of the source's current version once the
    /// frame's submit has waited for it, for the proxy to bind instead of copying into its own:
    /// for data another API can write straight into texture memory (CUDA memory copied into a
    /// CUDA array mapped onto a Vulkan image), which saves the copy on the renderer's queue.
    /// The texture must have `request`'s format, size and dimension and allow
    /// `TEXTURE_BINDING`. `Ok(None)` (the default): nothing offered, the proxy copies as usual.
    fn provide_texture(
        &self,
        request: DeviceTextureRequest<'_>,
    ) -> Result<Option<DeviceTexture>, RenderError> {
        let _ = request;
        Ok(None)
    }

    /// Records commands copying elements `copy.range` of a 1-D source (a mesh attribute) into
    /// `copy.buffer` at byte offset `copy.range.start * element bytes`, the layout unconverted
    /// (f32 positions, u32 indices, u8 RGBA colours). Implementations that only handle
    /// textures keep the default, which refuses with a clear error.
    fn copy_to_buffer(&self, copy: DeviceBufferCopy<'_>) -> Result<DeviceCopyOutcome, RenderError> {
        Err(RenderError::UnsupportedSource {
            visual: "Mesh",
            source_label: copy.source.label(),
            reason: "this device upload path does not copy into vertex buffers".into(),
        })
    }

    /// Called after the frame's commands were submitted (to signal producers, for example).
    fn frame_submitted(&self, queue: &wgpu::Queue) {
        let _ = queue;
    }

    /// What this path's pools of destinations did so far, for [`crate::Counters`]; the
    /// default, for paths without pools, is zero.
    fn pool_counters(&self) -> DevicePoolCounters {
        DevicePoolCounters::default()
    }
}

/// Why a device upload path refused a source or failed a copy, with the numbers involved.
/// The common cases are variants here; anything else keeps the implementation's own error in
/// [`DeviceUploadError::Other`] (for `sluice-interop`, an `InteropError` to downcast to).
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum DeviceUploadError {
    /// The data is on another GPU than the renderer's.
    #[error("the data is on the device with UUID {}, but this renderer's device has UUID {}; copy it to that device first (or open the renderer on the right adapter with SLUICE_ADAPTER)", Uuid(found), Uuid(expected))]
    DeviceMismatch {
        /// The renderer's device UUID.
        expected: [u8; 16],
        /// The data's device UUID.
        found: [u8; 16],
    },
    /// The memory holds fewer bytes than the layout spans.
    #[error(
        "the data spans {needed} bytes from offset {offset}, but the memory holds {size} bytes"
    )]
    MemoryTooSmall {
        /// Where the data starts in the memory.
        offset: u64,
        /// Bytes the layout spans at its pitches.
        needed: u64,
        /// Size of the memory.
        size: u64,
    },
    /// Anything else the implementation reports, kept whole.
    #[error(transparent)]
    Other(Box<dyn std::error::Error + Send + Sync + 'static>),
}

/// A device UUID as `xxxxxxxx-xxxx-xxxx-xxxx-xxxxxxxxxxxx`.
struct Uuid<'a>(&'a [u8; 16]);

impl std::fmt::Display for Uuid<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        for (i, b) in self.0.iter().enumerate() {
            if matches!(i, 4 | 6 | 8 | 10) {
                f.write_str("-")?;
            }
            write!(f, "{b:02x}")?;
        }
        Ok(())
    }
}

/// Whether a device copy was recorded.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[must_use]
pub enum DeviceCopyOutcome {
    /// The copy was recorded for this frame.
    Copied,
    /// The data is not ready (a producer holds it); nothing was recorded.
    NotReady,
}

/// One GPU-side copy asked of a [`DeviceUpload`].
pub struct DeviceCopy<'a> {
    /// The renderer's device.
    pub device: &'a wgpu::Device,
    /// The renderer's queue; the frame is submitted on it after the copy is recorded.
    pub queue: &'a wgpu::Queue,
    /// The frame's command encoder.
    pub encoder: &'a mut wgpu::CommandEncoder,
    /// The source.
    pub source: &'a dyn DataSource,
    /// Where its bytes are.
    pub residency: &'a Residency,
    /// Its layout (the texture holds it unconverted).
    pub layout: &'a Layout,
    /// The samples to copy.
    pub region: Region,
    /// The destination texture (2-D, or 3-D for volumes), `COPY_DST`. Large volumes are
    /// split into bricks: this is the brick that holds `region`.
    pub texture: &'a wgpu::Texture,
    /// Where `region`'s first sample goes in `texture`, `[x, y, z]` (zero unless bricked).
    pub texture_origin: [u32; 3],
    /// The renderer's compute path for buffer-to-texture copies.
    pub(crate) unpack: &'a Unpacker,
}

impl DeviceCopy<'_> {
    /// Records the copy of `region` from `buffer`, whose first sample is at byte `first` and
    /// whose rows and planes are `row_pitch` and `plane_pitch` bytes apart, into `texture` at
    /// `texture_origin`. The renderer picks the way: a compute pass that stores texels (much
    /// faster than copy commands on some GPUs; used when the texture allows storage, the
    /// buffer has `STORAGE` usage and the offsets are whole 32-bit words), else
    /// `copy_buffer_to_texture` (one command when rows are pitched to
    /// `COPY_BYTES_PER_ROW_ALIGNMENT` and planes are whole rows apart, one per plane or per row
    /// otherwise). The caller has checked that the buffer holds the whole region.
    pub fn copy_from_buffer(
        &mut self,
        buffer: &wgpu::Buffer,
        first: u64,
        row_pitch: u64,
        plane_pitch: u64,
    ) {
        let [depth, height, width] = self.region.size;
        let unpacked = self.unpack.record(
            self.device,
            self.encoder,
            &UnpackCopy {
                buffer,
                first,
                row_pitch,
                plane_pitch,
                texture: self.texture,
                origin: self.texture_origin,
                size: [width as u32, height as u32, depth as u32],
            },
        );
        if unpacked {
            return;
        }
        let (row, plane) = (row_pitch, plane_pitch);
        let origin = self.texture_origin;
        let texture = self.texture;
        let encoder = &mut *self.encoder;
        let mut one = |z: usize,
                       y: usize,
                       depth: usize,
                       height: usize,
                       rows_per_image: Option<u32>,
                       bytes_per_row: Option<u32>| {
            encoder.copy_buffer_to_texture(
                wgpu::TexelCopyBufferInfo {
                    buffer,
                    layout: wgpu::TexelCopyBufferLayout {
                        offset: first + z as u64 * plane + y as u64 * row,
                        bytes_per_row,
                        rows_per_image,
                    },
                },
                wgpu::TexelCopyTextureInfo {
                    texture,
                    mip_level: 0,
                    origin: wgpu::Origin3d {
                        x: origin[0],
                        y: origin[1] + y as u32,
                        z: origin[2] + z as u32,
                    },
                    aspect: wgpu::TextureAspect::All,
                },
                wgpu::Extent3d {
                    width: width as u32,
                    height: height as u32,
                    depth_or_array_layers: depth as u32,
                },
            );
        };
        if row.is_multiple_of(u64::from(wgpu::COPY_BYTES_PER_ROW_ALIGNMENT)) {
            if depth == 1 || plane.is_multiple_of(row) {
                let rows_per_image = (depth > 1).then_some((plane / row) as u32);
                one(0, 0, depth, height, rows_per_image, Some(row as u32));
            } else {
                for z in 0..depth {
                    one(z, 0, 1, height, None, Some(row as u32));
                }
            }
        } else {
            for z in 0..depth {
                for y in 0..height {
                    one(z, y, 1, 1, None, None);
                }
            }
        }
    }
}

/// What a proxy asks of [`DeviceUpload::provide_texture`]: a texture holding all of a source.
pub struct DeviceTextureRequest<'a> {
    /// The renderer's device.
    pub device: &'a wgpu::Device,
    /// The renderer's queue; the frame is submitted on it after the request.
    pub queue: &'a wgpu::Queue,
    /// The source.
    pub source: &'a dyn DataSource,
    /// Where its bytes are.
    pub residency: &'a Residency,
    /// Its layout (the texture holds it unconverted).
    pub layout: &'a Layout,
    /// The texture format the proxy's pipelines read.
    pub format: wgpu::TextureFormat,
    /// The texture's size: `[width, height, depth or 1]`.
    pub size: wgpu::Extent3d,
    /// 2-D for images, 3-D for volumes.
    pub dimension: wgpu::TextureDimension,
}

/// A texture a [`DeviceUpload`] filled for a proxy, and the proxy's hold on it.
pub struct DeviceTexture {
    /// The texture. The proxy binds it until the source changes again.
    pub texture: wgpu::Texture,
    /// A default view of `texture`, what the proxy binds (made once by the provider, which
    /// reuses its textures, rather than once per frame by the proxy).
    pub view: wgpu::TextureView,
    /// Kept by the proxy while it binds `texture`; dropping it tells the upload path that
    /// frames submitted from then on no longer read the texture, so it may be refilled.
    pub lease: Box<dyn std::any::Any + Send + Sync>,
    /// For a texture over memory its owner takes back later (a host buffer sampled in place
    /// on a CPU device): asked before every frame that draws the texture. `None`: the texture
    /// stays valid while the proxy holds it.
    pub in_place: Option<std::sync::Arc<dyn SampledInPlace>>,
}

/// A provided texture that reads memory the source's owner gets back once the source moved on
/// (see [`DeviceTexture::in_place`]).
pub trait SampledInPlace: Send + Sync {
    /// Counts the frame being recorded as one that samples the texture (the owner waits for
    /// it to finish before taking the memory back) and returns `true`; or returns `false`,
    /// counting nothing, if the memory no longer holds the source's data. The proxy then must
    /// not draw the texture: it copies what the source shows now into its own instead.
    fn begin_frame(&self) -> bool;
}

impl std::fmt::Debug for DeviceTexture {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("DeviceTexture")
            .field("texture", &self.texture)
            .finish_non_exhaustive()
    }
}

/// One GPU-side copy into a mesh attribute buffer, asked of a [`DeviceUpload`].
pub struct DeviceBufferCopy<'a> {
    /// The renderer's device.
    pub device: &'a wgpu::Device,
    /// The renderer's queue.
    pub queue: &'a wgpu::Queue,
    /// The frame's command encoder.
    pub encoder: &'a mut wgpu::CommandEncoder,
    /// The source (1-D).
    pub source: &'a dyn DataSource,
    /// Where its bytes are.
    pub residency: &'a Residency,
    /// Its layout.
    pub layout: &'a Layout,
    /// The elements to copy.
    pub range: std::ops::Range<usize>,
    /// The destination buffer, `COPY_DST | STORAGE | INDEX`.
    pub buffer: &'a wgpu::Buffer,
}
