//! The extension point for device-resident sources.
//!
//! Sources whose bytes live in GPU memory (CUDA allocations, Vulkan memory exported as a file
//! descriptor) are not staged through the host: the proxy hands each planned copy to a
//! [`DeviceUpload`], which records a GPU-side copy into the proxy's texture. `sluice-interop`
//! implements it; this crate only defines the contract, so the dependency stays one way.

use sluice_core::{DataSource, Layout, Region, Residency};

use crate::error::RenderError;

/// GPU-side uploads for sources that are not in host memory.
pub trait DeviceUpload: Send + Sync {
    /// `Ok` if sources of this residency can be uploaded by this implementation on this
    /// renderer's device; otherwise why not (another device, a missing driver extension, ...).
    fn check(&self, residency: &Residency, layout: &Layout) -> Result<(), String>;

    /// Records commands copying `copy.region` of the source into `copy.texture` at the same
    /// position (same format: the layout needs no conversion). May queue semaphore waits or
    /// signals for the next submit through `copy.queue`.
    fn copy_to_texture(&self, copy: DeviceCopy<'_>) -> Result<(), RenderError>;

    /// Called after the frame's commands were submitted (to signal producers, for example).
    fn frame_submitted(&self, queue: &wgpu::Queue) {
        let _ = queue;
    }
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
}
