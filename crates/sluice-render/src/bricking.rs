//! Bricks: how a source too long for one texture is cut into several, and how the shaders
//! find them (brick slots and their bindings, the `Bricks` uniform).

/// Brick slots of 3-D textures in a bind group, and the most bricks of one source in any
/// arrangement (8 x 1 x 1 up to 2 x 2 x 2): the shaders bind that many textures.
pub(crate) const BRICK_SLOTS: usize = 8;

/// The binding of brick slot `slot` (slot 0 is binding 1, the others follow the colormap).
pub(crate) fn brick_binding(slot: usize) -> u32 {
    if slot == 0 {
        1
    } else {
        2 + slot as u32
    }
}

/// The largest textures a proxy may create, per dimension (the device's limits, or lower
/// ones chosen by the user).
#[derive(Clone, Copy, Debug)]
pub(crate) struct TextureLimits {
    pub d2: u32,
    pub d3: u32,
}

/// How a source is cut into bricks: brick size and brick count per axis, `[x, y, z]`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Bricking {
    pub size: [u32; 3],
    pub count: [u32; 3],
}

/// The bricking rule: an axis longer than `limit` is cut into the fewest equal bricks that
/// fit (`ceil(len / ceil(len / limit))` samples each). `None` if that takes more than
/// [`BRICK_SLOTS`] bricks in all.
pub(crate) fn plan_bricks(shape: [usize; 3], limit: usize) -> Option<([usize; 3], [usize; 3])> {
    let mut size = [0; 3];
    let mut count = [0; 3];
    for a in 0..3 {
        count[a] = shape[a].div_ceil(limit.max(1));
        size[a] = shape[a].div_ceil(count[a]);
    }
    if count.iter().product::<usize>() > BRICK_SLOTS {
        return None;
    }
    Some((size, count))
}

/// `Bricks` in the shaders: brick size and count per axis, `[x, y, z]`.
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, bytemuck::Pod, bytemuck::Zeroable)]
pub(crate) struct BrickParams {
    size: [i32; 3],
    pad0: u32,
    count: [i32; 3],
    pad1: u32,
}

impl From<Bricking> for BrickParams {
    fn from(b: Bricking) -> Self {
        BrickParams {
            size: b.size.map(|v| v as i32),
            pad0: 0,
            count: b.count.map(|v| v as i32),
            pad1: 0,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bricks_split_long_axes_evenly() {
        assert_eq!(
            plan_bricks([100, 200, 300], 2048),
            Some(([100, 200, 300], [1, 1, 1]))
        );
        assert_eq!(
            plan_bricks([40, 40, 10], 24),
            Some(([20, 20, 10], [2, 2, 1]))
        );
        // Any grid of up to 8 bricks: 2 x 1 x 3, 8 x 1 x 1.
        assert_eq!(
            plan_bricks([3000, 10, 4097], 2048),
            Some(([1500, 10, 1366], [2, 1, 3]))
        );
        assert_eq!(
            plan_bricks([8 * 2048, 64, 64], 2048),
            Some(([2048, 64, 64], [8, 1, 1]))
        );
        // Nine or more bricks are refused.
        assert_eq!(plan_bricks([8 * 2048 + 1, 64, 64], 2048), None);
        assert_eq!(plan_bricks([4097, 4097, 2049], 2048), None);
        assert_eq!(
            plan_bricks([4096, 1, 2049], 2048),
            Some(([2048, 1, 1025], [2, 1, 2]))
        );
    }
}
