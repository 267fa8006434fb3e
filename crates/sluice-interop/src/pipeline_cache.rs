//! The pipeline cache loader: `wgpu::Device::create_pipeline_cache` is `unsafe` (the driver
//! trusts the bytes it is given), so sluice-render, which has no `unsafe` code, takes its
//! caches from here (see `PipelineCacheLoader` and `docs/architecture.md`).

use std::sync::Arc;

use sluice_render::PipelineCacheLoader;

/// Makes Vulkan pipeline caches from the files sluice-render keeps (install it with
/// [`install_pipeline_cache`]).
#[derive(Debug, Default)]
pub struct VulkanPipelineCaches;

impl PipelineCacheLoader for VulkanPipelineCaches {
    fn create(&self, device: &wgpu::Device, data: Option<&[u8]>) -> Option<wgpu::PipelineCache> {
        if !device.features().contains(wgpu::Features::PIPELINE_CACHE) {
            return None;
        }
        // SAFETY: `data` is what `PipelineCache::get_data` returned in an earlier process:
        // sluice-render writes nothing else into its cache files, and refuses a file whose
        // FNV-1a hash (in its own header) does not match, so a truncated or damaged file
        // never gets here. wgpu checks its own header of the data (magic, version, the
        // adapter's vendor, device and driver, the size) and the Vulkan driver its header
        // (vendor, device, pipeline cache UUID); with `fallback`, data either check refuses
        // gives an empty cache instead of an error. What remains is a file forged with a
        // matching hash, which only a writer of the user's cache folder could place.
        let cache = unsafe {
            device.create_pipeline_cache(&wgpu::PipelineCacheDescriptor {
                label: Some("sluice pipelines"),
                data,
                fallback: true,
            })
        };
        Some(cache)
    }
}

/// Gives every renderer made afterwards in this process a pipeline cache kept on disk, in
/// `RendererOptions::pipeline_cache_dir` (Vulkan only; other backends go on without one).
pub fn install_pipeline_cache() {
    sluice_render::set_pipeline_cache_loader(Arc::new(VulkanPipelineCaches));
}
