//! `HostFrame`: a render target read back into host pages the GPU writes itself
//! (`VK_EXT_external_memory_host`), so that reading a frame costs the GPU's copy and the wait,
//! and no copy out of a mapped buffer on the CPU.
//!
//! One of the crate's `unsafe` modules. The frame's pages are allocated at the driver's
//! `minImportedHostPointerAlignment`, imported once as `VkDeviceMemory` bound to a `VkBuffer`
//! with transfer-destination usage, and handed to wgpu. [`HostFrame::read`] records
//! `copy_texture_to_buffer` from the target into that buffer, then a transition of the buffer
//! to host reads (wgpu's barrier from transfer writes to `HOST_READ` at the host stage, which
//! Vulkan requires before the host may see what the device wrote), submits, and waits for that
//! submission. The pixels are then read where they landed, as [`HostFrame::bytes`] or row by
//! row.
//!
//! Rows are `bytes_per_row` apart: the target's width in bytes rounded up to wgpu's copy row
//! alignment (256 bytes), so a 1024-pixel-wide frame has no padding; numpy can view the pages
//! with that stride.
//!
//! Ordering: the GPU writes the pages only inside [`HostFrame::read`], which takes the frame
//! by `&mut` and returns once that write is finished; every other access is a shared borrow,
//! so no read of the pages can overlap the GPU's write. Should the wait fail (a lost device),
//! the frame lets go of its import (freed once no submission uses it) and goes on with pages
//! of its own that the GPU never sees; the old pages stay allocated until the frame drops, so
//! an address taken from [`HostFrame::bytes`] stays valid as long as the frame lives.
//!
//! Where the device cannot import host memory (no extension, another backend, the import
//! refused) the frame reads through [`Renderer::read_into`](sluice_render::Renderer::read_into)
//! into pages it owns (one CPU copy, the mapped staging buffer's) and
//! [`HostFrame::fallback_reason`] says why.

use std::sync::Arc;

use sluice_render::{RenderTarget, Renderer};

use crate::error::InteropError;
use crate::host_import::{import_host_range, CopyDirection, Pages};
use crate::interop::Interop;

/// Where a [`HostFrame`]'s pixels live.
enum Storage {
    /// Imported pages the GPU copies into.
    Imported {
        pages: Arc<Pages>,
        buffer: wgpu::Buffer,
    },
    /// Pages the GPU never sees, owned by the frame alone: the renderer's readback copies into
    /// them.
    Staged(Pages),
}

impl Storage {
    /// Zeroed pages for a staged frame of `bytes` bytes, or an error naming the frame.
    fn staged(bytes: usize, width: u32, height: u32) -> Result<Storage, InteropError> {
        Pages::new(bytes.max(1), 64)
            .map(Storage::Staged)
            .map_err(|e| InteropError::HostFrame {
                reason: format!(
                    "allocating {bytes} bytes for a frame of {width} x {height} pixels: {e}"
                ),
            })
    }
}

/// A frame's size, checked: it holds pixels, and its rows padded to wgpu's copy row
/// alignment fit in memory (so do the packed ones, which are no longer).
struct FrameSize {
    width: u32,
    height: u32,
    /// Bytes per row padded to `COPY_BYTES_PER_ROW_ALIGNMENT`.
    padded_row: u32,
    padded_bytes: usize,
    packed_bytes: usize,
}

impl FrameSize {
    fn check(width: u32, height: u32) -> Result<Self, InteropError> {
        if width == 0 || height == 0 {
            return Err(InteropError::HostFrame {
                reason: format!("a frame of {width} x {height} pixels holds no pixel"),
            });
        }
        let align = wgpu::COPY_BYTES_PER_ROW_ALIGNMENT;
        let too_big = || InteropError::HostFrame {
            reason: format!(
                "a frame of {width} x {height} RGBA8 pixels (rows padded to {align} bytes) \
                 needs more bytes than this machine can address"
            ),
        };
        let row = width.checked_mul(4).ok_or_else(too_big)?;
        let padded_row = u32::try_from(u64::from(row).next_multiple_of(u64::from(align)))
            .map_err(|_| too_big())?;
        let padded_bytes = u64::from(padded_row)
            .checked_mul(u64::from(height))
            .and_then(|b| isize::try_from(b).ok())
            .ok_or_else(too_big)? as usize;
        // At most the padded size.
        let packed_bytes = row as usize * height as usize;
        Ok(FrameSize {
            width,
            height,
            padded_row,
            padded_bytes,
            packed_bytes,
        })
    }
}

/// A render target's RGBA8 pixels in host memory the GPU writes directly: read a frame with
/// [`HostFrame::read`], then look at [`HostFrame::bytes`] (or [`HostFrame::row`]) for as long
/// as you like; the next `read` writes the same pages.
///
/// ```no_run
/// use sluice_interop::{HostFrame, Interop};
/// use sluice_render::{PanZoomCamera, Scene};
///
/// let interop = Interop::new()?;
/// let mut renderer = interop.renderer();
/// let target = renderer.create_target(1024, 1024)?;
/// let mut frame = HostFrame::new(&interop, 1024, 1024)?;
/// let scene = Scene::new();
/// renderer.render(&scene, &PanZoomCamera::default(), &target)?;
/// frame.read(&renderer, &target)?;
/// let top_left = &frame.row(0).unwrap()[..4];
/// # let _ = top_left;
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
pub struct HostFrame {
    storage: Storage,
    interop: Interop,
    width: u32,
    height: u32,
    bytes_per_row: u32,
    fallback: Option<String>,
    /// Pages let go of after a failed read, kept until the frame drops: a pointer taken from
    /// [`HostFrame::bytes`] stays valid for the frame's life (Python's views rely on it).
    retired: Vec<Arc<Pages>>,
}

impl std::fmt::Debug for HostFrame {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("HostFrame")
            .field("width", &self.width)
            .field("height", &self.height)
            .field("bytes_per_row", &self.bytes_per_row)
            .field("imported", &self.is_imported())
            .field("fallback", &self.fallback)
            .finish()
    }
}

impl HostFrame {
    /// A frame of `width` x `height` RGBA8 pixels on `interop`'s device, imported where the
    /// device can import host memory (otherwise staged, see [`HostFrame::fallback_reason`]).
    /// Errors name the size: zero, or more bytes than this machine can address.
    pub fn new(interop: &Interop, width: u32, height: u32) -> Result<Self, InteropError> {
        let size = FrameSize::check(width, height)?;
        let fallback = match interop.host_import_alignment() {
            None => "the device has no VK_EXT_external_memory_host".to_string(),
            Some(align) => match HostFrame::import(interop, &size, align) {
                Ok(storage) => {
                    return Ok(HostFrame::with(
                        interop,
                        &size,
                        storage,
                        size.padded_row,
                        None,
                    ))
                }
                Err(reason) => reason,
            },
        };
        HostFrame::staged_with(interop, &size, fallback)
    }

    /// Pages for `size`'s padded rows at the driver's alignment `align`, imported; an error
    /// says why not.
    fn import(interop: &Interop, size: &FrameSize, align: u64) -> Result<Storage, String> {
        let align = usize::try_from(align)
            .unwrap_or(usize::MAX)
            .max(std::mem::align_of::<u32>());
        if !align.is_power_of_two() {
            return Err(format!(
                "the driver's host import alignment {align} is not a power of two"
            ));
        }
        let bytes = size.padded_bytes;
        let pages = Pages::new(bytes, align)
            .map(Arc::new)
            .map_err(|e| format!("allocating the frame's pages to import: {e}"))?;
        // SAFETY: `Pages` is one live allocation at the driver's minImportedHostPointerAlignment
        // with its size rounded up to it, readable and writable; the clone handed over keeps it
        // alive until the imported memory is freed. The GPU writes it only in `read`, which
        // holds the frame by `&mut` and returns once the write is finished (or lets go of the
        // pages), so no read of the bytes overlaps a write.
        let imported = unsafe {
            import_host_range(
                interop,
                pages.ptr(),
                pages.len(),
                bytes as u64,
                CopyDirection::ToHost,
                pages.clone(),
            )
        };
        imported
            .map(|buffer| Storage::Imported { pages, buffer })
            .map_err(|e| format!("importing the frame's pages failed: {e}"))
    }

    /// A staged frame of `size`, saying why it is staged.
    fn staged_with(
        interop: &Interop,
        size: &FrameSize,
        fallback: String,
    ) -> Result<Self, InteropError> {
        let storage = Storage::staged(size.packed_bytes, size.width, size.height)?;
        Ok(HostFrame::with(
            interop,
            size,
            storage,
            size.width * 4,
            Some(fallback),
        ))
    }

    /// The frame of `size` over `storage`, rows `bytes_per_row` apart.
    fn with(
        interop: &Interop,
        size: &FrameSize,
        storage: Storage,
        bytes_per_row: u32,
        fallback: Option<String>,
    ) -> Self {
        HostFrame {
            storage,
            interop: interop.clone(),
            width: size.width,
            height: size.height,
            bytes_per_row,
            fallback,
            retired: Vec::new(),
        }
    }

    /// A frame that never imports: the renderer's readback copies into it (what `new` falls
    /// back to; for comparing the two paths). Errors as [`HostFrame::new`].
    pub fn staged(interop: &Interop, width: u32, height: u32) -> Result<Self, InteropError> {
        let size = FrameSize::check(width, height)?;
        HostFrame::staged_with(
            interop,
            &size,
            "staged on request (HostFrame::staged)".into(),
        )
    }

    /// A frame the size of `target`.
    pub fn for_target(interop: &Interop, target: &RenderTarget) -> Result<Self, InteropError> {
        HostFrame::new(interop, target.width(), target.height())
    }

    /// Reads `target` (drawn by `renderer`) into the frame and waits until its pixels are
    /// there. The target must be the frame's size and `renderer` on the frame's device; errors
    /// name both sizes or devices. On an error the frame's pixels are unspecified (the ones
    /// before, or part of the new frame), never unsound to read.
    pub fn read(&mut self, renderer: &Renderer, target: &RenderTarget) -> Result<(), InteropError> {
        if target.size() != [self.width, self.height] {
            return Err(InteropError::HostFrame {
                reason: format!(
                    "the frame holds {} x {} pixels and the target {} x {}",
                    self.width,
                    self.height,
                    target.width(),
                    target.height()
                ),
            });
        }
        if renderer.device() != self.interop.device() {
            return Err(InteropError::HostFrame {
                reason: "the renderer is not on the frame's device: make both from one Interop"
                    .into(),
            });
        }
        let len = self.width as usize * 4 * self.height as usize;
        let buffer = match &mut self.storage {
            Storage::Staged(pages) => {
                // SAFETY: staged pages hold at least `len` bytes (`FrameSize`), are initialised
                // (allocated zeroed) and belong to this frame alone (never imported); `&mut
                // self` makes this the only borrow of them.
                let bytes = unsafe { std::slice::from_raw_parts_mut(pages.ptr().as_ptr(), len) };
                return Ok(renderer.read_into(target, bytes)?);
            }
            Storage::Imported { buffer, .. } => buffer.clone(),
        };
        let device = renderer.device();
        let mut encoder = device.create_command_encoder(&wgpu::CommandEncoderDescriptor {
            label: Some("sluice host frame readback"),
        });
        encoder.copy_texture_to_buffer(
            target.texture().as_image_copy(),
            wgpu::TexelCopyBufferInfo {
                buffer: &buffer,
                layout: wgpu::TexelCopyBufferLayout {
                    offset: 0,
                    bytes_per_row: Some(self.bytes_per_row),
                    rows_per_image: Some(self.height),
                },
            },
            wgpu::Extent3d {
                width: self.width,
                height: self.height,
                depth_or_array_layers: 1,
            },
        );
        // The device's writes made available to the host: wgpu's barrier into `MAP_READ`
        // (transfer writes -> host reads at the host stage). The next read's copy transitions
        // back (host reads -> transfer writes).
        encoder.transition_resources(
            std::iter::once(wgpu::BufferTransition {
                buffer: &buffer,
                state: wgpu::BufferUses::MAP_READ,
            }),
            std::iter::empty(),
        );
        let index = renderer.queue().submit([encoder.finish()]);
        let waited = device.poll(wgpu::PollType::Wait {
            submission_index: Some(index),
            timeout: None,
        });
        if let Err(e) = waited {
            // The copy may still run: let go of the imported pages (freed once no submission
            // uses them) and go on with pages the GPU never sees.
            match Storage::staged(len, self.width, self.height) {
                Ok(staged) => {
                    if let Storage::Imported { pages, .. } =
                        std::mem::replace(&mut self.storage, staged)
                    {
                        self.retired.push(pages);
                    }
                    self.bytes_per_row = self.width * 4;
                    self.fallback = Some(format!(
                        "a read failed waiting for the GPU ({e}); staged since"
                    ));
                }
                Err(alloc) => {
                    // No pages to go on with: wait for the copy before the frame can be read.
                    let _ = device.poll(wgpu::PollType::wait_indefinitely());
                    self.fallback = Some(format!(
                        "a read failed waiting for the GPU ({e}), and staging failed ({alloc})"
                    ));
                }
            }
            return Err(InteropError::Render(sluice_render::RenderError::Gpu(
                format!("waiting for the frame's readback: {e}"),
            )));
        }
        Ok(())
    }

    /// The frame's pixels: `height` rows of `width` RGBA8 pixels, each row starting
    /// [`HostFrame::bytes_per_row`] bytes after the one before (`height * bytes_per_row`
    /// bytes; the padding after each row's pixels is unspecified).
    pub fn bytes(&self) -> &[u8] {
        let len = self.bytes_per_row as usize * self.height as usize;
        let pages = match &self.storage {
            Storage::Imported { pages, .. } => &**pages,
            Storage::Staged(pages) => pages,
        };
        // SAFETY: the pages hold at least `len` bytes (`FrameSize`: padded rows when imported,
        // packed ones when staged), initialised (allocated zeroed, then written only by copies
        // into them), and they are written only inside `read`, which borrows the frame
        // mutably and, when the GPU writes, returns once the write is finished (see the module
        // notes): no write overlaps this shared borrow.
        unsafe { std::slice::from_raw_parts(pages.ptr().as_ptr(), len) }
    }

    /// Row `y`'s `width * 4` bytes; `None` past the last row.
    pub fn row(&self, y: u32) -> Option<&[u8]> {
        if y >= self.height {
            return None;
        }
        let start = y as usize * self.bytes_per_row as usize;
        self.bytes().get(start..start + self.width as usize * 4)
    }

    /// The frame's pixels with no padding between rows (`width * height * 4` bytes, as
    /// [`Renderer::read_into`] gives them), copied.
    pub fn to_packed(&self) -> Vec<u8> {
        let mut out = Vec::with_capacity(self.width as usize * 4 * self.height as usize);
        for y in 0..self.height {
            out.extend_from_slice(self.row(y).unwrap_or_default());
        }
        out
    }

    /// The frame's width in pixels.
    pub fn width(&self) -> u32 {
        self.width
    }

    /// The frame's height in pixels.
    pub fn height(&self) -> u32 {
        self.height
    }

    /// Bytes from one row's start to the next's: the width in bytes rounded up to 256 when
    /// imported, the width in bytes when staged.
    pub fn bytes_per_row(&self) -> u32 {
        self.bytes_per_row
    }

    /// Whether the GPU writes the frame's pages itself (no CPU copy per read).
    pub fn is_imported(&self) -> bool {
        matches!(self.storage, Storage::Imported { .. })
    }

    /// Why the frame is staged rather than imported; `None` when imported.
    pub fn fallback_reason(&self) -> Option<&str> {
        self.fallback.as_deref()
    }
}
