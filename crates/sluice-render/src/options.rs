//! Renderer options: which GPU, how much to upload per frame.

use crate::error::RenderError;

/// Environment variable forcing the backend: `vulkan`, `gl`, `metal`, `dx12` or `all`.
pub const BACKEND_ENV: &str = "SLUICE_BACKEND";
/// Environment variable choosing the adapter whose name contains this text (case-insensitive).
pub const ADAPTER_ENV: &str = "SLUICE_ADAPTER";
/// Environment variable for the pipeline cache folder: a path, or `off` for none.
pub const PIPELINE_CACHE_ENV: &str = "SLUICE_PIPELINE_CACHE";
/// Environment variable choosing how lone images are drawn ([`ImageDraw`]): `auto`, `raster`
/// or `compute`.
pub const IMAGE_DRAW_ENV: &str = "SLUICE_IMAGE_DRAW";

/// How a frame whose only visual is one dense image (a 2-D source, or a plane of a volume)
/// is drawn. Either way every pixel is the same up to ties: a pixel centre exactly on a
/// sample boundary (nearest) or on the image's edge may go to either side, and alpha blending
/// may round the other way by 1 of 255.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum ImageDraw {
    /// [`ImageDraw::Compute`] on adapters where it was chosen for being faster, else
    /// [`ImageDraw::Raster`] ([`ImageDraw::resolve`]).
    #[default]
    Auto,
    /// A rectangle through the rasterizer, as every other frame is drawn.
    Raster,
    /// One compute invocation per target pixel, which finds the image point under the pixel
    /// centre and writes its colour over the background. Meant for GPUs whose graphics units
    /// are few next to their compute units (NVIDIA's H100 and H200: a clear of a 1024 x 1024
    /// target costs 0.08 ms there, a compute pass writes 8 million texels in 0.04 ms). Needs
    /// a target sluice made ([`crate::Renderer::create_target`]) or one whose texture can be
    /// bound as storage; other targets are drawn by the rasterizer.
    Compute,
}

impl ImageDraw {
    /// What [`ImageDraw::Auto`] means on the adapter `info` describes: compute on NVIDIA's
    /// compute parts of the Hopper generation (name with `H100`, `H200`, `H800` or `GH200`),
    /// which have graphics units on few of their processors; the rasterizer elsewhere. Other
    /// values are returned as they are.
    pub fn resolve(self, info: &wgpu::AdapterInfo) -> ImageDraw {
        const NVIDIA: u32 = 0x10de;
        match self {
            ImageDraw::Auto => {
                let name = info.name.to_ascii_uppercase();
                let hopper = ["H100", "H200", "H800", "GH200"]
                    .iter()
                    .any(|part| name.contains(part));
                if info.vendor == NVIDIA && hopper {
                    ImageDraw::Compute
                } else {
                    ImageDraw::Raster
                }
            }
            other => other,
        }
    }

    /// Parses a value as [`IMAGE_DRAW_ENV`] takes it.
    pub fn parse(value: &str) -> Result<ImageDraw, RenderError> {
        Ok(match value.trim().to_ascii_lowercase().as_str() {
            "auto" | "" => ImageDraw::Auto,
            "raster" => ImageDraw::Raster,
            "compute" => ImageDraw::Compute,
            _ => {
                return Err(RenderError::InvalidOption {
                    name: IMAGE_DRAW_ENV,
                    value: value.to_string(),
                    expected: "one of auto, raster, compute",
                })
            }
        })
    }
}

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
    /// How a frame whose only visual is one dense image is drawn; default
    /// [`ImageDraw::Auto`].
    pub image_draw: ImageDraw,
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
            image_draw: ImageDraw::Auto,
        }
    }
}

impl RendererOptions {
    /// Options from `SLUICE_BACKEND`, `SLUICE_ADAPTER`, `SLUICE_PIPELINE_CACHE` (a folder,
    /// or `off`) and `SLUICE_IMAGE_DRAW` ([`ImageDraw::parse`]), where set.
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
        if let Ok(value) = std::env::var(IMAGE_DRAW_ENV) {
            options.image_draw = ImageDraw::parse(&value)?;
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn auto_draws_lone_images_by_compute_on_hopper_parts_only() {
        let info = |vendor, name: &str, device_type| wgpu::AdapterInfo {
            vendor,
            name: name.into(),
            ..wgpu::AdapterInfo::new(device_type, wgpu::Backend::Vulkan)
        };
        let gpu = wgpu::DeviceType::DiscreteGpu;
        for (vendor, name, device_type, want) in [
            (0x10de, "NVIDIA H200", gpu, ImageDraw::Compute),
            (0x10de, "NVIDIA H100 80GB HBM3", gpu, ImageDraw::Compute),
            (0x10de, "NVIDIA GH200 480GB", gpu, ImageDraw::Compute),
            (0x10de, "NVIDIA GeForce RTX 4090", gpu, ImageDraw::Raster),
            (0x1002, "AMD Radeon H100-named", gpu, ImageDraw::Raster),
            (
                0x10005,
                "llvmpipe (LLVM 15.0.6, 256 bits)",
                wgpu::DeviceType::Cpu,
                ImageDraw::Raster,
            ),
        ] {
            let info = info(vendor, name, device_type);
            assert_eq!(ImageDraw::Auto.resolve(&info), want, "{name}");
            // Chosen values stay as they are.
            assert_eq!(ImageDraw::Raster.resolve(&info), ImageDraw::Raster);
            assert_eq!(ImageDraw::Compute.resolve(&info), ImageDraw::Compute);
        }
    }

    #[test]
    fn image_draw_values_parse_and_a_wrong_one_is_named() {
        assert_eq!(ImageDraw::parse(" Compute ").unwrap(), ImageDraw::Compute);
        assert_eq!(ImageDraw::parse("raster").unwrap(), ImageDraw::Raster);
        assert_eq!(ImageDraw::parse("").unwrap(), ImageDraw::Auto);
        let err = ImageDraw::parse("gpu").unwrap_err().to_string();
        assert!(
            err.contains("SLUICE_IMAGE_DRAW") && err.contains("gpu") && err.contains("compute"),
            "{err}"
        );
    }
}
