//! `VulkanSource`: a source whose bytes are in Vulkan memory shared by file descriptor, and
//! the checks every device-resident layout goes through.

use parking_lot::Mutex;
use sluice_core::{ChangeLog, Layout, Region, SourceError, UploadFormat, Version, VulkanMemory};

use crate::error::InteropError;

/// Row alignment of GPU buffer-to-texture copies (`wgpu::COPY_BYTES_PER_ROW_ALIGNMENT`): rows
/// pitched to a multiple of it are copied by one command, other pitches by one per row.
pub const COPY_ROW_ALIGNMENT: usize = wgpu::COPY_BYTES_PER_ROW_ALIGNMENT as usize;

/// Where the samples of a layout lie in device memory: bytes between consecutive rows and
/// between consecutive planes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Pitches {
    /// Bytes between the starts of consecutive rows.
    pub row: usize,
    /// Bytes between the starts of consecutive planes.
    pub plane: usize,
}

impl Pitches {
    /// Rows padded to [`COPY_ROW_ALIGNMENT`] bytes (one copy command per upload), planes
    /// back to back.
    pub fn aligned(layout: &Layout) -> Self {
        let row = layout.row_bytes().next_multiple_of(COPY_ROW_ALIGNMENT);
        Pitches {
            row,
            plane: row * layout.shape().height(),
        }
    }

    /// Rows and planes back to back (as numpy, PyTorch and CuPy store contiguous arrays).
    pub fn packed(layout: &Layout) -> Self {
        let row = layout.row_bytes();
        Pitches {
            row,
            plane: row * layout.shape().height(),
        }
    }

    /// Bytes from the first sample to the end of the last row at these pitches.
    pub fn span(&self, layout: &Layout) -> u64 {
        let shape = layout.shape();
        ((shape.depth() - 1) * self.plane + (shape.height() - 1) * self.row + layout.row_bytes())
            as u64
    }

    /// Fails if rows or planes overlap, or if they do not start on whole samples (GPU copies
    /// into textures need that).
    pub fn check(&self, layout: &Layout) -> Result<(), InteropError> {
        let shape = layout.shape();
        let sample_bytes = layout.sample_bytes();
        if self.row < layout.row_bytes() {
            return Err(InteropError::RowPitchTooSmall {
                row_pitch: self.row,
                row_bytes: layout.row_bytes(),
                width: shape.width(),
                sample_bytes,
            });
        }
        let plane_span = (shape.height() - 1) * self.row + layout.row_bytes();
        if shape.depth() > 1 && self.plane < plane_span {
            return Err(InteropError::PlanePitchTooSmall {
                plane_pitch: self.plane,
                rows: shape.height(),
                row_pitch: self.row,
                needed: plane_span,
            });
        }
        // A pitch only matters where there is a next row or plane (a 1-D attribute's row
        // pitch may be any span of at least its bytes).
        let used = [
            ("row pitch", self.row, shape.height() > 1),
            ("plane pitch", self.plane, shape.depth() > 1),
        ];
        for (what, value, _) in used.into_iter().filter(|u| u.2) {
            check_aligned(what, value as u64, sample_bytes)?;
        }
        Ok(())
    }
}

fn check_aligned(what: &'static str, value: u64, sample_bytes: usize) -> Result<(), InteropError> {
    if !value.is_multiple_of(sample_bytes as u64) {
        return Err(InteropError::Misaligned {
            what,
            value,
            alignment: sample_bytes as u64,
            sample_bytes,
        });
    }
    Ok(())
}

/// Device-resident data is copied as it is: a texture's layout must be one the GPU holds
/// without conversion (1, 2 or 4 channels, no f64). 1-D layouts may also be mesh attributes,
/// copied into vertex buffers as they are (f32x3 positions, say): any channel count but f64
/// passes here, and [`check_texture_layout`] refuses those a texture cannot take when one is
/// drawn as an image.
pub(crate) fn check_device_layout(layout: &Layout) -> Result<(), InteropError> {
    if layout.shape().ndim() == 1 && layout.element() != sluice_core::ElementType::F64 {
        return Ok(());
    }
    check_texture_layout(layout)
}

/// The layout must be one a texture holds without conversion (1, 2 or 4 channels, no f64).
pub(crate) fn check_texture_layout(layout: &Layout) -> Result<(), InteropError> {
    if UploadFormat::for_layout(layout).converts() {
        return Err(InteropError::UnsupportedLayout {
            reason: format!(
                "{} channel(s) of {} would need converting, which only host staging does; store 1, 2 or 4 channels of a type other than f64",
                layout.channels(),
                layout.element()
            ),
        });
    }
    Ok(())
}

/// Checks that `memory` holds `layout` at its pitches and offset.
pub(crate) fn check_vulkan_memory(
    layout: &Layout,
    memory: &VulkanMemory,
) -> Result<(), InteropError> {
    check_device_layout(layout)?;
    let pitches = Pitches {
        row: memory.row_pitch,
        plane: memory.plane_pitch,
    };
    pitches.check(layout)?;
    check_aligned("offset", memory.offset, layout.sample_bytes())?;
    let needed = pitches.span(layout);
    if memory
        .offset
        .checked_add(needed)
        .is_none_or(|end| end > memory.allocation_size)
    {
        return Err(InteropError::AllocationTooSmall {
            offset: memory.offset,
            needed,
            allocation_size: memory.allocation_size,
        });
    }
    Ok(())
}

/// Region changes a [`VulkanSource`] remembers; a renderer further behind copies everything.
const CHANGES_KEPT: usize = 64;

/// What a source in Vulkan memory shows now and what changed in it ([`VulkanSource`], and
/// `CudaWritableSource` with the `cuda` feature).
pub(crate) struct VulkanState {
    pub memory: VulkanMemory,
    pub log: ChangeLog,
}

/// The `DataSource` of a type that shows Vulkan memory through `layout: Layout` and
/// `state: Mutex<VulkanState>` fields ([`VulkanSource`], `CudaWritableSource`): the version
/// and changes of its log, the memory it shows now, and no host bytes.
macro_rules! vulkan_memory_source {
    ($source:ident) => {
        impl sluice_core::DataSource for $source {
            fn layout(&self) -> sluice_core::Layout {
                self.layout.clone()
            }

            fn version(&self) -> sluice_core::Version {
                self.state.lock().log.version()
            }

            fn changes_since(&self, since: sluice_core::Version) -> sluice_core::Changes {
                self.state.lock().log.since(since)
            }

            fn residency(&self) -> sluice_core::Residency {
                sluice_core::Residency::Vulkan(self.state.lock().memory.clone())
            }

            fn read(
                &self,
                _: &sluice_core::ReadRequest<'_>,
                _: &mut [u8],
            ) -> Result<sluice_core::ReadStatus, sluice_core::SourceError> {
                Err($crate::source::not_on_host(stringify!($source)))
            }

            fn label(&self) -> String {
                format!("{} {}", stringify!($source), self.layout.shape())
            }
        }
    };
}

#[cfg(feature = "cuda")]
pub(crate) use vulkan_memory_source;

/// The error of a device-resident source asked for host bytes (`what` names its type).
pub(crate) fn not_on_host(what: &str) -> SourceError {
    SourceError::Custom(
        format!("a {what}'s data is in GPU memory and is never copied through the host").into(),
    )
}

/// A source whose bytes are in Vulkan memory exported as a file descriptor, by this process
/// (an [`crate::ExportedBuffer`]) or another one (see [`crate::ring`]).
///
/// Renderers opened through [`crate::Interop`] import the memory once and copy it into the
/// source's texture on the GPU; the CPU never touches the bytes. Where the memory carries a
/// timeline semaphore, the renderer waits for its `wait_value` before copying and signals its
/// `signal_value` after; otherwise the producer must have finished writing before calling
/// [`VulkanSource::publish`], and must not write again until the renderer's frame has
/// completed.
pub struct VulkanSource {
    layout: Layout,
    state: Mutex<VulkanState>,
}

impl VulkanSource {
    /// A source showing `layout` stored in `memory`.
    ///
    /// Fails if the layout needs conversion, the pitches overlap or are misaligned, or the
    /// memory is too small for the layout at its offset.
    pub fn new(layout: Layout, memory: VulkanMemory) -> Result<Self, InteropError> {
        check_vulkan_memory(&layout, &memory)?;
        Ok(VulkanSource {
            layout,
            state: Mutex::new(VulkanState {
                memory,
                log: ChangeLog::new(CHANGES_KEPT),
            }),
        })
    }

    /// The producer wrote new data into the memory: renderers copy it on their next frame.
    pub fn publish(&self) -> Version {
        self.state.lock().log.record_all()
    }

    /// The producer rewrote only `region` of the memory: renderers copy just that region on
    /// their next frame (a range of a mesh attribute's elements, say). Fails if the region
    /// is not within the layout.
    pub fn publish_region(&self, region: Region) -> Result<Version, InteropError> {
        if !region.is_within(&self.layout.shape()) {
            return Err(InteropError::UnsupportedLayout {
                reason: format!(
                    "the published region {region:?} is not within the shape {}",
                    self.layout.shape()
                ),
            });
        }
        Ok(self.state.lock().log.record(region))
    }

    /// Shows the data in other memory from now on (the next slot of a ring of frames, or the
    /// same memory with new semaphore values), and publishes it.
    pub fn set_memory(&self, memory: VulkanMemory) -> Result<Version, InteropError> {
        check_vulkan_memory(&self.layout, &memory)?;
        let mut state = self.state.lock();
        state.memory = memory;
        Ok(state.log.record_all())
    }

    /// The memory the source shows now.
    pub fn memory(&self) -> VulkanMemory {
        self.state.lock().memory.clone()
    }
}

vulkan_memory_source!(VulkanSource);

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use sluice_core::{Changes, DataSource, ElementType, ReadRequest, Shape};

    use super::*;

    fn rgba(h: usize, w: usize) -> Layout {
        Layout::new(Shape::d2(h, w).unwrap(), ElementType::U8, 4).unwrap()
    }

    fn memory(allocation_size: u64, offset: u64, row: usize, plane: usize) -> VulkanMemory {
        let fd = std::fs::File::open("/dev/null").unwrap();
        VulkanMemory {
            fd: Arc::new(fd.into()),
            allocation_size,
            memory_type_index: 0,
            offset,
            row_pitch: row,
            plane_pitch: plane,
            device_uuid: [0; 16],
            semaphore: None,
        }
    }

    #[test]
    fn aligned_pitches_round_rows_to_256_bytes() {
        let layout = rgba(3, 50);
        let p = Pitches::aligned(&layout);
        assert_eq!(
            p,
            Pitches {
                row: 256,
                plane: 768
            }
        );
        assert_eq!(p.span(&layout), 2 * 256 + 200);
        let volume = Layout::new(Shape::new(&[2, 3, 4]).unwrap(), ElementType::F32, 1).unwrap();
        let p = Pitches::packed(&volume);
        assert_eq!(p, Pitches { row: 16, plane: 48 });
        assert_eq!(p.span(&volume), 96);
    }

    #[test]
    fn memory_too_small_for_the_layout_names_the_sizes() {
        let layout = rgba(4, 64);
        let e = VulkanSource::new(layout, memory(1000, 24, 256, 1024))
            .err()
            .unwrap();
        let text = e.to_string();
        assert!(
            matches!(e, InteropError::AllocationTooSmall { needed: 1024, .. }),
            "{text}"
        );
        assert!(
            text.contains("1024") && text.contains("1000") && text.contains("24"),
            "{text}"
        );
    }

    #[test]
    fn overlapping_or_misaligned_pitches_are_refused() {
        let layout = rgba(4, 64);
        let e = VulkanSource::new(layout.clone(), memory(1 << 20, 0, 200, 800))
            .err()
            .unwrap();
        assert!(
            matches!(
                e,
                InteropError::RowPitchTooSmall {
                    row_pitch: 200,
                    row_bytes: 256,
                    ..
                }
            ),
            "{e}"
        );
        let e = VulkanSource::new(layout.clone(), memory(1 << 20, 2, 256, 1024))
            .err()
            .unwrap();
        assert!(
            matches!(
                e,
                InteropError::Misaligned {
                    what: "offset",
                    value: 2,
                    ..
                }
            ),
            "{e}"
        );
        let e = VulkanSource::new(layout, memory(1 << 20, 0, 258, 1032))
            .err()
            .unwrap();
        assert!(
            matches!(
                e,
                InteropError::Misaligned {
                    what: "row pitch",
                    ..
                }
            ),
            "{e}"
        );
        let volume = Layout::new(Shape::new(&[2, 4, 64]).unwrap(), ElementType::U8, 1).unwrap();
        let e = VulkanSource::new(volume, memory(1 << 20, 0, 64, 100))
            .err()
            .unwrap();
        assert!(
            matches!(
                e,
                InteropError::PlanePitchTooSmall {
                    plane_pitch: 100,
                    needed: 256,
                    ..
                }
            ),
            "{e}"
        );
    }

    #[test]
    fn layouts_that_need_conversion_are_refused() {
        let rgb = Layout::new(Shape::d2(2, 2).unwrap(), ElementType::U8, 3).unwrap();
        let e = VulkanSource::new(rgb, memory(1 << 20, 0, 256, 512))
            .err()
            .unwrap();
        assert!(e.to_string().contains("3 channel(s) of u8"), "{e}");
    }

    #[test]
    fn publishing_moves_the_version_and_asks_for_everything() {
        let source = VulkanSource::new(rgba(2, 2), memory(1024, 0, 256, 512)).unwrap();
        let v = source.version();
        assert_eq!(source.changes_since(v), Changes::None);
        let v2 = source.publish();
        assert!(v2 > v);
        assert_eq!(source.changes_since(v), Changes::All);
        assert!(source
            .read(
                &ReadRequest::new(
                    Shape::d2(2, 2).unwrap().full_region(),
                    sluice_core::noop_waker()
                ),
                &mut [0; 16]
            )
            .is_err());
    }
}
