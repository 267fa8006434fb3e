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
    /// capped at `wanted`: `(slots, per_row, max_rows)`. The atlas is about square at its
    /// capacity (as many slots a row as its rows hold texels), so that what it starts with (two
    /// rows) and the rows it shrinks to stay small on any device; a row as wide as the device
    /// allows would make those depend on the limit (32,768 texels on NVIDIA, 8,192 on
    /// lavapipe) rather than on the pages.
    pub fn capacity(slot: [u32; 2], max_side: u32, wanted: u64) -> (u32, u32, u32) {
        let [sx, sy] = [u64::from(slot[0].max(1)), u64::from(slot[1].max(1))];
        let fit_x = (u64::from(max_side) / sx).max(1);
        let fit_y = (u64::from(max_side) / sy).max(1);
        let wanted = wanted.clamp(1, fit_x * fit_y);
        // The least slots a row whose square of texels holds `wanted` slots:
        // per_row * sx >= rows * sy with per_row * rows >= wanted.
        let mut per_row = ((wanted * sy) as f64 / sx as f64).sqrt().floor().max(1.0) as u64;
        while per_row * per_row * sx < wanted * sy {
            per_row += 1;
        }
        // Where the rows run into the limit first (tall slots), wider rows hold the rest.
        let per_row = per_row.max(wanted.div_ceil(fit_y)).min(fit_x).min(wanted);
        let max_rows = wanted.div_ceil(per_row).min(fit_y);
        ((per_row * max_rows) as u32, per_row as u32, max_rows as u32)
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
    fn atlases_are_about_square_whatever_the_device_limit() {
        use super::AtlasTexture;
        // 1,100 slots of 34^2 texels: 34 a row, 33 rows (1,156 x 1,122 texels), the same
        // under lavapipe's 8,192 and NVIDIA's 32,768.
        assert_eq!(
            AtlasTexture::capacity([34, 34], 8_192, 1_100),
            (1_122, 34, 33)
        );
        assert_eq!(
            AtlasTexture::capacity([34, 34], 32_768, 1_100),
            (1_122, 34, 33)
        );
        // A perfect square, and fewer slots than a row could hold.
        assert_eq!(
            AtlasTexture::capacity([34, 34], 8_192, 1_024),
            (1_024, 32, 32)
        );
        assert_eq!(AtlasTexture::capacity([34, 34], 8_192, 3), (4, 2, 2));
        assert_eq!(AtlasTexture::capacity([34, 34], 8_192, 1), (1, 1, 1));
        assert_eq!(AtlasTexture::capacity([34, 34], 8_192, 0), (1, 1, 1));
        // Wide slots take fewer a row: 4 slots of 64 x 16 texels, one a row (64 x 64 texels).
        assert_eq!(AtlasTexture::capacity([64, 16], 8_192, 4), (4, 1, 4));
        // The limit caps both sides: at most 240 x 240 slots of 34 under 8,192.
        assert_eq!(
            AtlasTexture::capacity([34, 34], 8_192, 1_000_000),
            (240 * 240, 240, 240)
        );
        // Tall slots under a tight limit: rows as wide as the wanted slots need, not fewer
        // slots (7 of 1 x 5 under 8: one row fits, of 7; 6 slots before).
        assert_eq!(AtlasTexture::capacity([1, 5], 8, 7), (7, 7, 1));
        assert_eq!(AtlasTexture::capacity([1, 22], 64, 128), (128, 64, 2));
        // A slot wider than the limit still gets one slot a row (creation then fails with
        // the limit named, not here).
        assert_eq!(AtlasTexture::capacity([9_000, 34], 8_192, 10), (10, 1, 10));
    }

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
