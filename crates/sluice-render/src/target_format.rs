//! The pixel formats of render targets and of the textures a frame draws through.

/// The pixel format of render targets: 8-bit RGBA, not sRGB-encoded, so colormap entries
/// reach the image unchanged.
pub const TARGET_FORMAT: wgpu::TextureFormat = wgpu::TextureFormat::Rgba8Unorm;

/// What a render target's colour texture is used as: drawn into, copied from (reads) and
/// sampled (presenting it). A texture made elsewhere for
/// [`Renderer::target_on_texture`](crate::Renderer::target_on_texture) needs at least these.
pub const TARGET_USAGE: wgpu::TextureUsages = wgpu::TextureUsages::RENDER_ATTACHMENT
    .union(wgpu::TextureUsages::COPY_SRC)
    .union(wgpu::TextureUsages::TEXTURE_BINDING);

/// The format the opaque pass writes its depth to as a colour (the volume marcher reads it).
pub(crate) const DEPTH_COLOR_FORMAT: wgpu::TextureFormat = wgpu::TextureFormat::Rgba8Unorm;

/// The depth format of render targets.
pub(crate) const DEPTH_FORMAT: wgpu::TextureFormat = wgpu::TextureFormat::Depth32Float;

/// Format of the per-target texture volumes are marched into before compositing.
pub(crate) const MARCHED_FORMAT: wgpu::TextureFormat = wgpu::TextureFormat::Rgba16Float;
