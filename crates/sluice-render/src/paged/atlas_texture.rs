//! One paged source's atlas: a 2-D texture of equal slots laid out in rows, grown (by a copy
//! into a taller texture) as the allocator hands out higher slot numbers, up to the slots the
//! budget allows.

use super::format::AtlasFormat;

/// A source's atlas texture.
pub(crate) struct AtlasTexture {
    pub texture: wgpu::Texture,
    pub view: wgpu::TextureView,
    pub format: AtlasFormat,
    /// Texels of one slot (x = columns, y = rows).
    pub slot: [u32; 2],
    /// Slots per atlas row.
    pub per_row: u32,
    /// Slot rows the texture has now.
    rows: u32,
    /// Slot rows it may grow to.
    max_rows: u32,
    /// Unique among atlases, and moves whenever the texture is replaced (bind groups are
    /// rebuilt).
    pub generation: u64,
}

impl AtlasTexture {
    /// The slots an atlas of `slot`-texel slots can hold under a side limit of `max_side`,
    /// capped at `wanted`: `(slots, per_row, max_rows)`.
    pub fn capacity(slot: [u32; 2], max_side: u32, wanted: u64) -> (u32, u32, u32) {
        let per_row = (max_side / slot[0].max(1)).max(1);
        let max_rows_limit = (max_side / slot[1].max(1)).max(1);
        let wanted = wanted.clamp(1, u64::from(per_row) * u64::from(max_rows_limit));
        let per_row = per_row.min(wanted as u32);
        let max_rows = (wanted.div_ceil(u64::from(per_row)) as u32).min(max_rows_limit);
        (per_row * max_rows, per_row, max_rows)
    }

    pub fn new(
        device: &wgpu::Device,
        format: AtlasFormat,
        slot: [u32; 2],
        per_row: u32,
        max_rows: u32,
    ) -> Self {
        let rows = max_rows.min(2);
        let texture = create(device, format, slot, per_row, rows);
        AtlasTexture {
            view: texture.create_view(&wgpu::TextureViewDescriptor::default()),
            texture,
            format,
            slot,
            per_row,
            rows,
            max_rows,
            generation: next_generation(),
        }
    }

    /// Texel origin of `slot`.
    pub fn slot_origin(&self, slot: u32) -> [u32; 2] {
        [
            (slot % self.per_row) * self.slot[0],
            (slot / self.per_row) * self.slot[1],
        ]
    }

    /// Texels of the texture now.
    pub fn size(&self) -> [u32; 2] {
        [self.per_row * self.slot[0], self.rows * self.slot[1]]
    }

    /// Bytes of the texture now.
    pub fn bytes(&self) -> u64 {
        let [w, h] = self.size();
        u64::from(w)
            * u64::from(h)
            * u64::from(self.format.format.block_copy_size(None).unwrap_or(4))
    }

    /// Makes sure `slot` lies inside the texture, growing it (doubling its rows, at most to the
    /// capacity) with a copy of what it holds, submitted at once so that it lands before this
    /// frame's page writes. Returns whether it grew.
    pub fn ensure_slot(&mut self, device: &wgpu::Device, queue: &wgpu::Queue, slot: u32) -> bool {
        let row = slot / self.per_row;
        if row < self.rows {
            return false;
        }
        let mut rows = self.rows;
        while rows <= row {
            rows = (rows * 2).min(self.max_rows);
        }
        let texture = create(device, self.format, self.slot, self.per_row, rows);
        let mut encoder = device.create_command_encoder(&wgpu::CommandEncoderDescriptor {
            label: Some("sluice atlas growth"),
        });
        let [w, h] = self.size();
        encoder.copy_texture_to_texture(
            self.texture.as_image_copy(),
            texture.as_image_copy(),
            wgpu::Extent3d {
                width: w,
                height: h,
                depth_or_array_layers: 1,
            },
        );
        queue.submit([encoder.finish()]);
        self.view = texture.create_view(&wgpu::TextureViewDescriptor::default());
        self.texture = texture;
        self.rows = rows;
        self.generation = next_generation();
        true
    }
}

impl AtlasTexture {
    /// Slot rows the texture has now.
    pub fn rows(&self) -> u32 {
        self.rows
    }

    /// Shrinks the texture to `rows` rows (at least 2, never more than it has): slots below
    /// the new size keep their texels, and each `(from, to)` in `moves` (from
    /// `AtlasAllocator::compact`) copies a slot above it into one below. Submitted at once,
    /// after this frame's page writes into the old texture. Returns whether it shrank.
    pub fn shrink(
        &mut self,
        device: &wgpu::Device,
        queue: &wgpu::Queue,
        rows: u32,
        moves: &[(u32, u32)],
    ) -> bool {
        let rows = rows.max(2.min(self.max_rows));
        if rows >= self.rows {
            return false;
        }
        let texture = create(device, self.format, self.slot, self.per_row, rows);
        let mut encoder = device.create_command_encoder(&wgpu::CommandEncoderDescriptor {
            label: Some("sluice atlas shrink"),
        });
        let kept = wgpu::Extent3d {
            width: self.per_row * self.slot[0],
            height: rows * self.slot[1],
            depth_or_array_layers: 1,
        };
        encoder.copy_texture_to_texture(
            self.texture.as_image_copy(),
            texture.as_image_copy(),
            kept,
        );
        let at = |slot: u32| {
            let [x, y] = self.slot_origin(slot);
            wgpu::Origin3d { x, y, z: 0 }
        };
        for &(from, to) in moves {
            encoder.copy_texture_to_texture(
                wgpu::TexelCopyTextureInfo {
                    texture: &self.texture,
                    mip_level: 0,
                    origin: at(from),
                    aspect: wgpu::TextureAspect::All,
                },
                wgpu::TexelCopyTextureInfo {
                    texture: &texture,
                    mip_level: 0,
                    origin: at(to),
                    aspect: wgpu::TextureAspect::All,
                },
                wgpu::Extent3d {
                    width: self.slot[0],
                    height: self.slot[1],
                    depth_or_array_layers: 1,
                },
            );
        }
        queue.submit([encoder.finish()]);
        self.view = texture.create_view(&wgpu::TextureViewDescriptor::default());
        self.texture = texture;
        self.rows = rows;
        self.generation = next_generation();
        true
    }
}

/// The rows (2-D) or layers (3-D) an atlas of `per_row` slots a row and `rows` rows now
/// shrinks to for `resident` pages, if it should: when at most a quarter of its slots hold
/// pages, to twice what they need (a power of two, at least `least`), so that growth by
/// doubling and shrinking do not alternate.
pub(crate) fn shrink_rows(per_row: u32, rows: u32, resident: u32, least: u32) -> Option<u32> {
    let slots = per_row.saturating_mul(rows);
    if rows <= least || resident.saturating_mul(4) > slots {
        return None;
    }
    let need = resident.saturating_mul(2).div_ceil(per_row.max(1));
    let target = need.next_power_of_two().max(least);
    (target < rows).then_some(target)
}

fn next_generation() -> u64 {
    static NEXT: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(1);
    NEXT.fetch_add(1, std::sync::atomic::Ordering::Relaxed)
}

fn create(
    device: &wgpu::Device,
    format: AtlasFormat,
    slot: [u32; 2],
    per_row: u32,
    rows: u32,
) -> wgpu::Texture {
    device.create_texture(&wgpu::TextureDescriptor {
        label: Some("sluice page atlas"),
        size: wgpu::Extent3d {
            width: per_row * slot[0],
            height: rows * slot[1],
            depth_or_array_layers: 1,
        },
        mip_level_count: 1,
        sample_count: 1,
        dimension: wgpu::TextureDimension::D2,
        format: format.format,
        usage: wgpu::TextureUsages::TEXTURE_BINDING
            | wgpu::TextureUsages::COPY_DST
            | wgpu::TextureUsages::COPY_SRC,
        view_formats: &[],
    })
}

#[cfg(test)]
mod tests {
    use super::shrink_rows;

    #[test]
    fn atlases_shrink_when_three_quarters_are_empty_to_twice_their_pages() {
        // 31 slots a row, 16 rows (496 slots): more than a quarter (125 pages) keeps it.
        assert_eq!(shrink_rows(31, 16, 125, 2), None);
        assert_eq!(shrink_rows(31, 16, 124, 2), Some(8));
        assert_eq!(shrink_rows(31, 16, 10, 2), Some(2));
        assert_eq!(shrink_rows(31, 16, 0, 2), Some(2));
        // Never below the least size, nor to the size it has.
        assert_eq!(shrink_rows(31, 2, 0, 2), None);
        assert_eq!(shrink_rows(64, 8, 3, 1), Some(1));
        assert_eq!(shrink_rows(64, 1, 0, 1), None);
    }
}
