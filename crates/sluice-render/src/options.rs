//! Renderer options: which GPU, how much to upload per frame.

use crate::error::RenderError;

/// Environment variable forcing the backend: `vulkan`, `gl`, `metal`, `dx12` or `all`.
pub const BACKEND_ENV: &str = "SLUICE_BACKEND";
/// Environment variable choosing the adapter whose name contains this text (case-insensitive).
pub const ADAPTER_ENV: &str = "SLUICE_ADAPTER";
/// Environment variable for the pipeline cache folder: a path, or `off` for none.
pub const PIPELINE_CACHE_ENV: &str = "SLUICE_PIPELINE_CACHE";

/// How a [`crate::Renderer`] is set up.
#[derive(Clone, Debug)]
pub struct RendererOptions {
    /// Backends to search; `None` for all (native ones first, GL only if they have no adapter).
    pub backends: Option<wgpu::Backends>,
    /// Only adapters whose name contains this text (case-insensitive).
    pub adapter_name: Option<String>,
    /// Most bytes of source data uploaded per frame; `None` for no limit. A change larger than
    /// this is spread over several frames (each chunk still shows one whole version).
    pub upload_budget: Option<u64>,
    /// Largest 3-D texture side to create, below the device's limit; `None` for the device's
    /// limit. Volumes longer than this on some axis are split into bricks. Mostly for tests
    /// (to exercise bricking with small data) and to keep single allocations small.
    pub max_texture_dimension_3d: Option<u32>,
    /// GPU bytes the pages of all paged (lazy, multiscale or over-limit) sources may hold
    /// together; `None` for [`crate::DEFAULT_GPU_BUDGET`] (512 MiB). Least recently used pages
    /// not in view make room (see `docs/chunked.md`, "The virtual texture").
    pub gpu_budget: Option<u64>,
    /// Interior samples of a 2-D page per side; `None` for 256. Each atlas slot adds a
    /// 1-sample border.
    pub page_size_2d: Option<usize>,
    /// Draw every 2-D host source through the virtual texture, not only lazy, multiscale and
    /// over-limit ones (to compare the two paths, and to test paging with small data).
    pub always_page_2d: bool,
    /// Draw every 3-D host source through 3-D pages, not only lazy, multiscale and over-limit
    /// ones (to compare the paged and dense volume paths, and to test paging with small data).
    pub always_page_3d: bool,
    /// Folder of the pipeline cache kept on disk (see [`crate::PipelineCacheLoader`]); `None`
    /// for none. Default: `$XDG_CACHE_HOME/sluice/pipelines`, else
    /// `$HOME/.cache/sluice/pipelines`. Used where a loader is installed and the backend has
    /// pipeline caches (Vulkan); the first renderer on a device decides for the device.
    pub pipeline_cache_dir: Option<std::path::PathBuf>,
    /// On CPU devices (lavapipe), march linear 8-bit volumes through a copy whose texels
    /// pair each voxel with the next along z, which halves the texel fetches of a sample
    /// (`docs/volumes-and-meshes.md`, "How the marcher saves work"). While a linear volume
    /// uses it, it costs twice the volume's bytes of memory and a pass over them per change;
    /// `false` marches the 3-D texture directly. GPUs never pair. Default `true`.
    pub volume_pairs: bool,
    /// On CPU devices (lavapipe), draw opaque one-colour meshes with their triangles in an
    /// order that reuses shaded vertices, where a model of the driver's vertex cache says it
    /// fetches at least a tenth fewer (`docs/volumes-and-meshes.md`, "Triangle order"): a
    /// copy of the indices, made when they change. The pixels are the same (the depth test
    /// keeps the nearest fragment whatever the order). `false` draws the given order. GPUs
    /// never reorder. Default `true`.
    pub mesh_reorder: bool,
    /// Leave out of a dense mesh's draw the triangles that cover no pixel centre, found on
    /// the device before the draw whenever the mesh, the view or the target size changed
    /// (`docs/volumes-and-meshes.md`, "Dense meshes"): meshes with indices, at least 65,536
    /// triangles and a quarter as many as the target has pixels.
    /// The pixels are the same; sub-pixel triangles no longer cost the rasterizer their setup.
    /// `false` draws every triangle. Default `true`.
    pub mesh_cull: bool,
}

impl Default for RendererOptions {
    fn default() -> Self {
        RendererOptions {
            backends: None,
            adapter_name: None,
            upload_budget: None,
            max_texture_dimension_3d: None,
            gpu_budget: None,
            page_size_2d: None,
            always_page_2d: false,
            always_page_3d: false,
            pipeline_cache_dir: crate::pipeline_cache::default_dir(),
            volume_pairs: true,
            mesh_reorder: true,
            mesh_cull: true,
        }
    }
}

impl RendererOptions {
    /// Options from `SLUICE_BACKEND`, `SLUICE_ADAPTER` and `SLUICE_PIPELINE_CACHE` (a folder,
    /// or `off`), where set.
    pub fn from_env() -> Result<Self, RenderError> {
        let mut options = RendererOptions::default();
        if let Ok(value) = std::env::var(BACKEND_ENV) {
            options.backends = Some(parse_backends(&value)?);
        }
        if let Ok(value) = std::env::var(ADAPTER_ENV) {
            if !value.trim().is_empty() {
                options.adapter_name = Some(value);
            }
        }
        if let Some(value) = std::env::var_os(PIPELINE_CACHE_ENV) {
            options.pipeline_cache_dir = match value.to_str().map(str::trim) {
                Some("off") | Some("") => None,
                _ => Some(value.into()),
            };
        }
        Ok(options)
    }

    /// The adapter [`crate::Renderer::with_options`] would open: among the adapters of the
    /// requested backends whose name matches, a discrete GPU over an integrated one over a
    /// virtual one over a CPU one, and Vulkan, Metal or DX12 over GL.
    ///
    /// For callers that open the device themselves (for example with extra extensions) and
    /// then build the renderer with [`crate::Renderer::from_device`].
    pub fn choose_adapter(&self) -> Result<wgpu::Adapter, RenderError> {
        crate::device::choose_adapter(
            self.backends.unwrap_or(wgpu::Backends::all()),
            self.adapter_name.as_deref(),
        )
    }
}

/// Parses a backend name as `SLUICE_BACKEND` takes it.
pub fn parse_backends(value: &str) -> Result<wgpu::Backends, RenderError> {
    Ok(match value.trim().to_ascii_lowercase().as_str() {
        "vulkan" | "vk" => wgpu::Backends::VULKAN,
        "gl" | "gles" | "opengl" => wgpu::Backends::GL,
        "metal" => wgpu::Backends::METAL,
        "dx12" | "d3d12" => wgpu::Backends::DX12,
        "all" | "" => wgpu::Backends::all(),
        _ => {
            return Err(RenderError::InvalidOption {
                name: BACKEND_ENV,
                value: value.to_string(),
                expected: "one of vulkan, gl, metal, dx12, all",
            })
        }
    })
}
