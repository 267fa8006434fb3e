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
