//! # sluice
//!
//! Gets data of any origin onto the GPU for visualization, fast, and keeps it there.
//!
//! - [`DataSource`] (from `sluice-core`) says what data is and how to read it: host arrays
//!   ([`ArraySource`]), memory-mapped files ([`MmapSource`]), windows onto other sources
//!   ([`CropSource`]), and any source you implement.
//! - The proxy layer inside [`Renderer`] (from `sluice-render`) owns the GPU copies and
//!   decides uploads: one texture per source however many visuals show it, only changed
//!   chunks uploaded, through a reused staging ring.
//! - Visuals such as [`Image`] name sources only; a [`Scene`] places them.
//!
//! ```no_run
//! use std::sync::Arc;
//! use sluice::prelude::*;
//!
//! let data = Array2::from_shape_fn((256, 256), |(r, c)| (r + c) as f32 / 510.0);
//! let source = Arc::new(ArraySource::new(data)?);
//! let mut scene = Scene::new();
//! scene.add(Image::new(source.clone()).with_colormap(Colormap::Viridis));
//! let mut renderer = Renderer::new()?;
//! let target = renderer.create_target(256, 256)?;
//! let camera = PanZoomCamera::fit(Vec2::ZERO, Vec2::splat(256.0), target.size());
//! renderer.render(&scene, &camera, &target)?;
//! renderer.read_image(&target)?.save("gradient.png")?;
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```

pub use sluice_core::*;
pub use sluice_render::*;

// Compiles the README's Rust examples as doc-tests (`cargo test --doc -p sluice`).
#[cfg(doctest)]
#[doc = include_str!("../README.md")]
pub struct ReadmeDoctests;

/// GPU-resident sources: Vulkan memory shared by file descriptor, frames shared across
/// processes, and (feature `cuda`) CUDA memory. See `docs/gpu-interop.md`.
#[cfg(target_os = "linux")]
pub mod interop {
    pub use sluice_interop::*;
}

/// Zarr v2/v3 arrays and OME-Zarr multiscale groups, from a directory, HTTP or S3
/// (feature `zarr`): `sluice::zarr::open(url_or_path)` picks the store from the location.
#[cfg(feature = "zarr")]
pub use sluice_zarr as zarr;
/// A window with layer controls, and the `sluice` command line's building blocks (feature
/// `view`, on by default). See `docs/viewer.md`.
#[cfg(feature = "view")]
pub mod view {
    pub use sluice_view::*;
}

/// The names most programs need.
pub mod prelude {
    pub use sluice_core::ndarray::{Array1, Array2, Array3};
    pub use sluice_core::{
        ArraySource, CropSource, DataSource, ElementType, HostCopyPolicy, Layout, MmapSource,
        Region, Shape, SharedSource, SourceError, Version,
    };
    pub use sluice_render::glam::{Mat4, Vec2, Vec3};
    pub use sluice_render::{
        Camera, Colormap, DisplaySettings, FlyCamera, Image, Interpolation, Mesh, OrbitCamera,
        PanZoomCamera, RenderError, RenderTarget, Renderer, RendererOptions, Scene, Shading, Slice,
        Volume, VolumeMode,
    };
}
