//! # sluice-render: the GPU half of sluice
//!
//! [`Renderer`] owns one wgpu device and, for every source a scene shows, one GPU texture
//! (its proxy) kept up to date with the source: each frame uploads only what changed, merged
//! by chunk into few copies, through a reused staging ring, converting formats the GPU lacks
//! on the way. Visuals ([`Image`]) name sources and hold display settings only; a [`Scene`]
//! places them with parent/child transforms and a [`Camera`] looks at it.
//!
//! ```no_run
//! use std::sync::Arc;
//! use sluice_core::{ndarray::Array2, ArraySource};
//! use sluice_render::{Colormap, Image, PanZoomCamera, Renderer, Scene};
//!
//! let source = Arc::new(ArraySource::new(Array2::<f32>::zeros((256, 256)))?);
//! let mut scene = Scene::new();
//! scene.add(Image::new(source.clone()).with_clim(0.0, 1.0)?.with_colormap(Colormap::Viridis));
//! let mut renderer = Renderer::new()?;
//! let target = renderer.create_target(256, 256)?;
//! let camera = PanZoomCamera::fit([0.0, 0.0].into(), [256.0, 256.0].into(), target.size());
//! renderer.render(&scene, &camera, &target)?;
//! renderer.read_image(&target)?.save("image.png")?;
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```
//!
//! Errors are [`RenderError`]s naming the numbers involved (shapes, limits, parameters);
//! invalid input is refused before it reaches the GPU. This crate has no `unsafe` code.

#![forbid(unsafe_code)]

mod bricking;
mod buffer_proxy;
mod camera;
mod colormap;
mod colormap_data;
mod counters;
mod device;
mod device_upload;
mod draw;
mod error;
mod format;
mod host_grid;
mod image_pipeline;
mod mesh_cull;
mod mesh_order;
mod mesh_pipeline;
mod options;
mod paged;
mod pipeline;
mod pipeline_cache;
mod proxy;
mod redraw;
mod renderer;
mod sampling;
mod scene;
mod staging;
mod target;
mod target_format;
mod unpack;
mod upload_state;
mod visual;
mod volume_grid;
mod volume_pairs;
mod volume_pipeline;

pub use camera::{Camera, FlyCamera, OrbitCamera, PanZoomCamera, Projection};
pub use colormap::{Colormap, CustomColormap, MAX_COLORMAP_ENTRIES};
pub use counters::{Counters, DevicePoolCounters, FrameStats};
pub use device::{keep_until_exit, optional_features, wait_for_devices};
pub use device_upload::{
    DeviceBufferCopy, DeviceCopy, DeviceCopyOutcome, DeviceTexture, DeviceTextureRequest,
    DeviceUpload, DeviceUploadError, SampledInPlace,
};
pub use error::RenderError;
pub use options::{
    parse_backends, ImageDraw, RendererOptions, ADAPTER_ENV, BACKEND_ENV, IMAGE_DRAW_ENV,
    PIPELINE_CACHE_ENV,
};
pub use paged::{Completion, Progress, DEFAULT_GPU_BUDGET};
pub use pipeline_cache::{set_pipeline_cache_loader, PipelineCacheInfo, PipelineCacheLoader};
pub use renderer::{RedrawNotify, Renderer};
pub use scene::{NodeId, Scene};
pub use staging::STAGING_IDLE_FRAMES;
pub use target::RenderTarget;
pub use target_format::{TARGET_FORMAT, TARGET_USAGE};
pub use visual::{
    DisplaySettings, Image, Interpolation, IntoSource, Mesh, Shading, Slice, Visual, Volume,
    VolumeMode, DEFAULT_DEPTH_SAMPLES,
};

/// Re-exported so users name the same glam and wgpu versions sluice uses.
pub use glam;
pub use wgpu;
