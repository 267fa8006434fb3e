//! Triangles put in an order that reuses shaded vertices, for opaque meshes on CPU devices.
//!
//! A CPU device shades vertices on one thread before it rasterizes on many (lavapipe's draw
//! module: on the peers' 2M-triangle mesh about 130 ms of a 145-166 ms frame). It shades each
//! index of a stretch of the index buffer once per distinct vertex in that stretch (a small
//! cache by index, emptied every segment of about a thousand indices), so a mesh whose
//! triangles sharing a vertex lie far apart in the buffer has its vertices shaded several
//! times over. A grid written as all the quads' first triangles, then all their second ones
//! (what numpy code that stacks two triangle arrays makes, and the peers' mesh) shades about
//! two vertices a triangle where one would do.
//!
//! [`reorder_for_reuse`] sorts the triangles by their smallest vertex index (a stable
//! counting sort, so that triangles of one vertex stay in their order), which puts the
//! triangles around a vertex next to each other where vertices are numbered along the
//! surface, and keeps the new order only where a model of that cache fetches at least a
//! tenth fewer vertices than the given order does. Each triangle keeps its three indices in
//! their order (its winding and its first vertex).
//!
//! The order of opaque triangles changes no pixel: the depth test keeps the nearest
//! fragment whatever came first; only fragments at exactly equal depth (coincident
//! triangles) could go the other way. So it is used for the one-colour opaque program only
//! (`MeshProgram::OpaqueFinite`), never where triangles blend.

/// Indices per segment of the modelled cache (a multiple of 3; lavapipe's draw module splits
/// index buffers into segments of 1024 and starts each with an empty cache).
const SEGMENT: usize = 1023;

/// Entries of the modelled cache (direct-mapped by index, as lavapipe's).
const CACHE: usize = 256;

/// The fraction of the given order's vertex fetches the new order must stay under.
const KEEP_BELOW: f64 = 0.9;

/// `indices` (3 per triangle, each below `vertices`) reordered so that triangles sharing a
/// vertex are close, where that saves at least a tenth of the modelled vertex fetches;
/// `None` where it does not (or there is nothing to reorder: fewer than two triangles, a
/// length that is not a multiple of 3, an index out of range).
pub(crate) fn reorder_for_reuse(indices: &[u32], vertices: usize) -> Option<Vec<u32>> {
    if !indices.len().is_multiple_of(3)
        || indices.len() < 6
        || indices.iter().any(|&i| i as usize >= vertices)
    {
        return None;
    }
    let triangles = indices.len() / 3;
    let key = |t: usize| {
        let tri = &indices[3 * t..3 * t + 3];
        tri[0].min(tri[1]).min(tri[2]) as usize
    };
    // Counting sort by the smallest index: starts of each key's run, then placement.
    let mut start = vec![0usize; vertices + 1];
    for t in 0..triangles {
        start[key(t) + 1] += 1;
    }
    for v in 0..vertices {
        start[v + 1] += start[v];
    }
    let mut out = vec![0u32; indices.len()];
    for t in 0..triangles {
        let k = key(t);
        let at = start[k];
        start[k] += 1;
        out[3 * at..3 * at + 3].copy_from_slice(&indices[3 * t..3 * t + 3]);
    }
    let before = modelled_fetches(indices);
    let after = modelled_fetches(&out);
    ((after as f64) < before as f64 * KEEP_BELOW).then_some(out)
}

/// Vertices a draw of `indices` shades under the model: a direct-mapped cache of [`CACHE`]
/// entries by index, emptied every [`SEGMENT`] indices.
pub(crate) fn modelled_fetches(indices: &[u32]) -> usize {
    let mut cache = [u32::MAX; CACHE];
    let mut fetches = 0;
    for segment in indices.chunks(SEGMENT) {
        cache.fill(u32::MAX);
        for &i in segment {
            let slot = &mut cache[i as usize % CACHE];
            if *slot != i {
                *slot = i;
                fetches += 1;
            }
        }
    }
    fetches
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A `g` x `g` grid of vertices, its quads' first triangles, then their second ones.
    fn two_halves(g: u32) -> Vec<u32> {
        let quads: Vec<u32> = (0..g - 1)
            .flat_map(|r| (0..g - 1).map(move |c| r * g + c))
            .collect();
        let first = quads.iter().flat_map(|&q| [q, q + 1, q + 1 + g]);
        let second = quads.iter().flat_map(|&q| [q, q + 1 + g, q + g]);
        first.chain(second).collect()
    }

    fn triangles(indices: &[u32]) -> Vec<[u32; 3]> {
        let mut t: Vec<[u32; 3]> = indices
            .chunks_exact(3)
            .map(|c| [c[0], c[1], c[2]])
            .collect();
        t.sort_unstable();
        t
    }

    #[test]
    fn a_grid_in_two_halves_is_reordered_keeping_every_triangle_as_it_was() {
        let g = 200;
        let indices = two_halves(g);
        let out = reorder_for_reuse(&indices, (g * g) as usize).expect("reordered");
        // The same triangles, each with its indices in their order (winding, first vertex).
        assert_eq!(triangles(&out), triangles(&indices));
        // Both triangles of a quad are next to each other, quads in row order.
        assert_eq!(&out[..6], &[0, 1, 1 + g, 0, 1 + g, g]);
        assert_eq!(&out[6..12], &[1, 2, 2 + g, 1, 2 + g, 1 + g]);
        let (before, after) = (modelled_fetches(&indices), modelled_fetches(&out));
        let n = (g - 1) * (g - 1) * 2;
        // About 1.6 vertices a triangle before (rows of 200 vertices partly stay in the
        // cache), one after: 126,134 and 80,295 for 79,202 triangles.
        assert!(
            before as f64 > 1.5 * f64::from(n),
            "{before} for {n} triangles"
        );
        assert!(
            after as f64 <= 1.05 * f64::from(n),
            "{after} for {n} triangles"
        );
    }

    #[test]
    fn an_order_that_already_reuses_vertices_is_left_alone() {
        let g = 200;
        let sorted = reorder_for_reuse(&two_halves(g), (g * g) as usize).unwrap();
        assert_eq!(reorder_for_reuse(&sorted, (g * g) as usize), None);
        // Separate triangles share nothing: no order fetches fewer vertices.
        let separate: Vec<u32> = (0..3000).rev().collect();
        assert_eq!(reorder_for_reuse(&separate, 3000), None);
    }

    #[test]
    fn nothing_is_reordered_out_of_range_or_in_pieces() {
        let g = 50;
        let indices = two_halves(g);
        assert_eq!(reorder_for_reuse(&indices, (g * g - 1) as usize), None);
        assert_eq!(
            reorder_for_reuse(&indices[..indices.len() - 1], (g * g) as usize),
            None
        );
        assert_eq!(reorder_for_reuse(&[0, 1, 2], 3), None);
        assert_eq!(reorder_for_reuse(&[], 0), None);
    }
}
