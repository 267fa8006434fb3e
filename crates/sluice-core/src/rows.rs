//! Row iteration shared by the host sources: where each row of a region lies in a packed
//! array of a shape, and in a packed buffer of the region alone.

use crate::region::{Region, Shape};

/// Calls `f(array_offset, region_offset, row_bytes)` for every row of `region` inside a tightly
/// packed C-order array of `shape` with `sample_bytes` bytes per sample; offsets in bytes.
pub(crate) fn for_each_row(
    shape: &Shape,
    region: &Region,
    sample_bytes: usize,
    mut f: impl FnMut(usize, usize, usize),
) {
    let d = shape.padded();
    let row_bytes = region.size[2] * sample_bytes;
    let row_pitch = d[2] * sample_bytes;
    let plane_pitch = d[1] * row_pitch;
    let mut packed = 0;
    for p in 0..region.size[0] {
        for r in 0..region.size[1] {
            let offset = (region.origin[0] + p) * plane_pitch
                + (region.origin[1] + r) * row_pitch
                + region.origin[2] * sample_bytes;
            f(offset, packed, row_bytes);
            packed += row_bytes;
        }
    }
}

/// Byte offset of `region`'s first sample and the row and plane pitches of a packed C-order
/// array of `shape`.
pub(crate) fn region_start_and_pitches(
    shape: &Shape,
    region: &Region,
    sample_bytes: usize,
) -> (usize, usize, usize) {
    let d = shape.padded();
    let row_pitch = d[2] * sample_bytes;
    let plane_pitch = d[1] * row_pitch;
    let start = region.origin[0] * plane_pitch
        + region.origin[1] * row_pitch
        + region.origin[2] * sample_bytes;
    (start, row_pitch, plane_pitch)
}

/// Bytes from a region's first sample to the end of its last row in a packed array (0 for an
/// empty region). The region lies inside the array, so nothing overflows.
pub(crate) fn region_span(
    region: &Region,
    row_pitch: usize,
    plane_pitch: usize,
    sample_bytes: usize,
) -> usize {
    if region.is_empty() {
        return 0;
    }
    (region.size[0] - 1) * plane_pitch
        + (region.size[1] - 1) * row_pitch
        + region.size[2] * sample_bytes
}

/// An empty view of an empty region (see the empty-region rule on [`crate::check_read`]).
pub(crate) fn empty_view(region: Region, sample_bytes: usize) -> crate::source::HostView<'static> {
    crate::source::HostView {
        bytes: &[],
        region,
        sample_bytes,
        row_pitch: region.size[2] * sample_bytes,
        plane_pitch: region.size[1] * region.size[2] * sample_bytes,
    }
}
