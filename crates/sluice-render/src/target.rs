//! Offscreen render targets and reading them back.

use std::sync::Arc;

use crate::error::RenderError;
use crate::redraw::DrawnFrame;
use crate::target_format::{
    DEPTH_COLOR_FORMAT, DEPTH_FORMAT, MARCHED_FORMAT, TARGET_FORMAT, TARGET_USAGE,
};

/// An offscreen image the renderer draws into; read it back with
/// [`crate::Renderer::read_image`].
#[derive(Debug)]
pub struct RenderTarget {
    pub(crate) texture: wgpu::Texture,
    pub(crate) view: wgpu::TextureView,
    pub(crate) depth_view: wgpu::TextureView,
    /// The opaque pass's depth written as a colour, for the volume marcher.
    pub(crate) depth_color_view: wgpu::TextureView,
    /// Group 1 of the volume marcher: this target's depth and marched texture.
    pub(crate) volume_group: wgpu::BindGroup,
    /// The composite's view of the marched texture.
    pub(crate) composite_group: wgpu::BindGroup,
    /// Group 2 of the image compute path ([`crate::ImageDraw::Compute`]) of each renderer
    /// that drew here that way, by renderer id, made on its first such frame: per renderer,
    /// so that two renderers drawing into one target never read each other's parameters.
    image_frames: parking_lot::Mutex<Vec<(u64, Arc<ImageFrame>)>>,
    width: u32,
    height: u32,
    /// What the last frame drawn here was, for redrawing only what changed since.
    pub(crate) drawn: parking_lot::Mutex<Option<DrawnFrame>>,
    /// The buffer reads copy the target into, made by the first read and kept for the next
    /// (making a mapped buffer every frame cost an allocation, and on CPU devices the page
    /// faults of its first touch).
    readback: parking_lot::Mutex<Option<wgpu::Buffer>>,
}

/// A target's side of the image compute path: the frame's parameters
/// (`image_pipeline::FrameParams`) and the bind group of them with the colour texture as
/// storage.
#[derive(Debug)]
pub(crate) struct ImageFrame {
    pub buffer: wgpu::Buffer,
    pub group: wgpu::BindGroup,
}

/// The layouts a target's bind groups are made with, and how its colour texture is made.
pub(crate) struct TargetLayouts<'a> {
    pub volume: &'a wgpu::BindGroupLayout,
    pub composite: &'a wgpu::BindGroupLayout,
    /// A new colour texture is made usable as storage too, for the image compute path
    /// (where the renderer draws lone images that way).
    pub storage: bool,
}

impl RenderTarget {
    /// A target of `width` x `height` pixels; its colour texture is `color` where given (a
    /// texture made elsewhere, checked by [`RenderTarget::check_color`]), else a new one.
    pub(crate) fn new(
        device: &wgpu::Device,
        width: u32,
        height: u32,
        color: Option<wgpu::Texture>,
        layouts: TargetLayouts<'_>,
    ) -> Result<Self, RenderError> {
        let limit = device.limits().max_texture_dimension_2d;
        if width == 0 || height == 0 || width > limit || height > limit {
            return Err(RenderError::TargetSize {
                width,
                height,
                limit,
            });
        }
        let plane = |label, format, usage| {
            device.create_texture(&wgpu::TextureDescriptor {
                label: Some(label),
                size: wgpu::Extent3d {
                    width,
                    height,
                    depth_or_array_layers: 1,
                },
                mip_level_count: 1,
                sample_count: 1,
                dimension: wgpu::TextureDimension::D2,
                format,
                usage,
                view_formats: &[],
            })
        };
        let view_of = |t: &wgpu::Texture| t.create_view(&wgpu::TextureViewDescriptor::default());
        use wgpu::TextureUsages as U;
        let usage = if layouts.storage {
            TARGET_USAGE | U::STORAGE_BINDING
        } else {
            TARGET_USAGE
        };
        let texture = match color {
            Some(texture) => texture,
            None => plane("sluice render target", TARGET_FORMAT, usage),
        };
        let view = view_of(&texture);
        let depth_view = view_of(&plane("sluice depth", DEPTH_FORMAT, U::RENDER_ATTACHMENT));
        let depth_color_view = view_of(&plane(
            "sluice depth as colour",
            DEPTH_COLOR_FORMAT,
            U::RENDER_ATTACHMENT | U::TEXTURE_BINDING,
        ));
        let marched = view_of(&plane(
            "sluice marched volumes",
            MARCHED_FORMAT,
            U::STORAGE_BINDING | U::TEXTURE_BINDING,
        ));
        let volume_group = device.create_bind_group(&wgpu::BindGroupDescriptor {
            label: Some("sluice volume target"),
            layout: layouts.volume,
            entries: &[
                wgpu::BindGroupEntry {
                    binding: 0,
                    resource: wgpu::BindingResource::TextureView(&depth_color_view),
                },
                wgpu::BindGroupEntry {
                    binding: 1,
                    resource: wgpu::BindingResource::TextureView(&marched),
                },
            ],
        });
        let composite_group = device.create_bind_group(&wgpu::BindGroupDescriptor {
            label: Some("sluice volume composite"),
            layout: layouts.composite,
            entries: &[wgpu::BindGroupEntry {
                binding: 0,
                resource: wgpu::BindingResource::TextureView(&marched),
            }],
        });
        Ok(RenderTarget {
            texture,
            view,
            depth_view,
            depth_color_view,
            volume_group,
            composite_group,
            image_frames: parking_lot::Mutex::new(Vec::new()),
            width,
            height,
            drawn: parking_lot::Mutex::new(None),
            readback: parking_lot::Mutex::new(None),
        })
    }

    /// Whether `texture` can be a target's colour texture: one 2-D layer of
    /// [`TARGET_FORMAT`], one mip level, one sample, with at least [`TARGET_USAGE`]. The error
    /// names what differs.
    pub(crate) fn check_color(texture: &wgpu::Texture) -> Result<(), RenderError> {
        let mut wrong = Vec::new();
        if texture.format() != TARGET_FORMAT {
            wrong.push(format!(
                "format {:?} (a target is {TARGET_FORMAT:?})",
                texture.format()
            ));
        }
        if texture.dimension() != wgpu::TextureDimension::D2 || texture.depth_or_array_layers() != 1
        {
            wrong.push(format!(
                "{:?} with {} layers (a target is one 2-D layer)",
                texture.dimension(),
                texture.depth_or_array_layers()
            ));
        }
        if texture.mip_level_count() != 1 || texture.sample_count() != 1 {
            wrong.push(format!(
                "{} mip levels and {} samples (a target has one of each)",
                texture.mip_level_count(),
                texture.sample_count()
            ));
        }
        if !texture.usage().contains(TARGET_USAGE) {
            wrong.push(format!(
                "usage {:?} (a target needs {TARGET_USAGE:?})",
                texture.usage()
            ));
        }
        if wrong.is_empty() {
            Ok(())
        } else {
            Err(RenderError::TargetTexture {
                width: texture.width(),
                height: texture.height(),
                reason: wrong.join("; "),
            })
        }
    }

    /// Whether the image compute path can draw here: the colour texture can be storage.
    pub(crate) fn takes_compute(&self) -> bool {
        self.texture
            .usage()
            .contains(wgpu::TextureUsages::STORAGE_BINDING)
    }

    /// The image compute path's group 2 for the renderer `renderer` (its id), made with
    /// `layout` on its first frame here (after [`RenderTarget::takes_compute`]).
    pub(crate) fn image_frame(
        &self,
        device: &wgpu::Device,
        layout: &wgpu::BindGroupLayout,
        renderer: u64,
    ) -> Arc<ImageFrame> {
        let mut frames = self.image_frames.lock();
        if let Some((_, frame)) = frames.iter().find(|(id, _)| *id == renderer) {
            return frame.clone();
        }
        let buffer = device.create_buffer(&wgpu::BufferDescriptor {
            label: Some("sluice image frame"),
            size: size_of::<crate::image_pipeline::FrameParams>() as u64,
            usage: wgpu::BufferUsages::UNIFORM | wgpu::BufferUsages::COPY_DST,
            mapped_at_creation: false,
        });
        let group = device.create_bind_group(&wgpu::BindGroupDescriptor {
            label: Some("sluice image frame"),
            layout,
            entries: &[
                wgpu::BindGroupEntry {
                    binding: 0,
                    resource: buffer.as_entire_binding(),
                },
                wgpu::BindGroupEntry {
                    binding: 1,
                    resource: wgpu::BindingResource::TextureView(&self.view),
                },
            ],
        });
        let frame = Arc::new(ImageFrame { buffer, group });
        frames.push((renderer, frame.clone()));
        frame
    }

    /// Makes the next frame drawn here redraw the whole target. Frames normally redraw only
    /// what changed since the last one (see `Renderer::render`); call this after drawing into
    /// the target's texture by other means, or to measure the cost of a whole frame.
    pub fn invalidate(&self) {
        *self.drawn.lock() = None;
    }

    /// Width in pixels.
    pub fn width(&self) -> u32 {
        self.width
    }

    /// Height in pixels.
    pub fn height(&self) -> u32 {
        self.height
    }

    /// `[width, height]`.
    pub fn size(&self) -> [u32; 2] {
        [self.width, self.height]
    }

    /// The texture frames are drawn into ([`TARGET_FORMAT`], usable as `TEXTURE_BINDING` and
    /// `COPY_SRC`), for presenting it: sample it into a window's surface, or copy it. Drawing
    /// into it by other means calls for [`RenderTarget::invalidate`].
    pub fn texture(&self) -> &wgpu::Texture {
        &self.texture
    }

    /// Copies the target to host memory; waits for the GPU.
    pub(crate) fn read(
        &self,
        device: &wgpu::Device,
        queue: &wgpu::Queue,
    ) -> Result<image::RgbaImage, RenderError> {
        // The target's size is within the device's texture limit, so its bytes fit.
        let mut pixels = vec![0u8; self.width as usize * self.height as usize * 4];
        self.read_into(device, queue, &mut pixels)?;
        image::RgbaImage::from_raw(self.width, self.height, pixels)
            .ok_or_else(|| RenderError::Gpu("readback size mismatch".into()))
    }

    /// Copies the target into `out` (its RGBA8 pixels, rows of `width * 4` bytes with no
    /// padding); waits for the GPU. Refuses a buffer of another length, naming both.
    pub(crate) fn read_into(
        &self,
        device: &wgpu::Device,
        queue: &wgpu::Queue,
        out: &mut [u8],
    ) -> Result<(), RenderError> {
        let row = self.width as usize * 4;
        let needed = row as u64 * self.height as u64;
        if out.len() as u64 != needed {
            return Err(RenderError::ReadbackSize {
                width: self.width,
                height: self.height,
                needed,
                got: out.len(),
            });
        }
        let padded = (row as u64).next_multiple_of(wgpu::COPY_BYTES_PER_ROW_ALIGNMENT as u64);
        // A read takes the target's buffer (a read while another has it makes its own) and
        // gives it back when done.
        let kept = self.readback.lock().take();
        let buffer = match kept {
            Some(buffer) => buffer,
            None => device.create_buffer(&wgpu::BufferDescriptor {
                label: Some("sluice readback"),
                size: padded * self.height as u64,
                usage: wgpu::BufferUsages::MAP_READ | wgpu::BufferUsages::COPY_DST,
                mapped_at_creation: false,
            }),
        };
        let mut encoder = device.create_command_encoder(&wgpu::CommandEncoderDescriptor {
            label: Some("sluice readback"),
        });
        encoder.copy_texture_to_buffer(
            self.texture.as_image_copy(),
            wgpu::TexelCopyBufferInfo {
                buffer: &buffer,
                layout: wgpu::TexelCopyBufferLayout {
                    offset: 0,
                    bytes_per_row: Some(padded as u32),
                    rows_per_image: Some(self.height),
                },
            },
            wgpu::Extent3d {
                width: self.width,
                height: self.height,
                depth_or_array_layers: 1,
            },
        );
        queue.submit([encoder.finish()]);
        let (tx, rx) = std::sync::mpsc::channel();
        buffer.map_async(wgpu::MapMode::Read, .., move |r| {
            let _ = tx.send(r);
        });
        device
            .poll(wgpu::PollType::wait_indefinitely())
            .map_err(|e| RenderError::Gpu(format!("waiting for readback: {e}")))?;
        rx.recv()
            .map_err(|_| RenderError::Gpu("readback callback never ran".into()))?
            .map_err(|e| RenderError::Gpu(format!("mapping readback buffer: {e}")))?;
        {
            let mapped = buffer
                .get_mapped_range(..)
                .map_err(|e| RenderError::Gpu(format!("reading back: {e}")))?;
            let padded = padded as usize;
            if padded == row {
                out.copy_from_slice(&mapped[..out.len()]);
            } else {
                for (r, dst) in out.chunks_exact_mut(row).enumerate() {
                    dst.copy_from_slice(&mapped[r * padded..r * padded + row]);
                }
            }
        }
        buffer.unmap();
        *self.readback.lock() = Some(buffer);
        Ok(())
    }
}
