//! One paged source's page table: per level a window of `window` x `window` entries, page
//! `(x, y)` at entry `(x mod window, y mod window)`, so that a level of any size needs a
//! table of fixed size. An entry is `(slot + 1, x, y, 0)` (0: empty); the shader checks that
//! the entry names the page it looks for, and otherwise falls back to a coarser level. A
//! missing page's entry may name the coarser page drawn for it (one lookup), or say that no
//! resident page of any coarser level meets it ([`HOLE`]: the shader stops looking at once
//! instead of walking every level, which made frames with much missing cost 1.6 to 2.4 times
//! an idle one on lavapipe).

use std::collections::{HashMap, HashSet};

use sluice_core::PageKey;

/// Entries per axis per level at most (a view needs about its size in pages plus a ring).
pub(crate) const MAX_WINDOW: u32 = 64;

/// Bit of an entry's fourth field: the page is missing and no resident page of a coarser
/// level meets it (the shader's walk stops there). `paged_image.wgsl` tests the same bit.
pub(crate) const HOLE: u32 = 1 << 31;

/// A source's page table and its CPU mirror.
pub(crate) struct PageTable {
    pub texture: wgpu::Texture,
    pub view: wgpu::TextureView,
    pub window: u32,
    levels: u32,
    entries: Vec<[u32; 4]>,
}

impl PageTable {
    /// A table for `levels` levels whose largest page grid has `max_pages` pages on an axis.
    pub fn new(device: &wgpu::Device, levels: u32, max_pages: u64) -> Self {
        let window = max_pages.clamp(1, u64::from(MAX_WINDOW)) as u32;
        let texture = device.create_texture(&wgpu::TextureDescriptor {
            label: Some("sluice page table"),
            size: wgpu::Extent3d {
                width: window,
                height: window * levels,
                depth_or_array_layers: 1,
            },
            mip_level_count: 1,
            sample_count: 1,
            dimension: wgpu::TextureDimension::D2,
            format: wgpu::TextureFormat::Rgba32Uint,
            usage: wgpu::TextureUsages::TEXTURE_BINDING | wgpu::TextureUsages::COPY_DST,
            view_formats: &[],
        });
        PageTable {
            view: texture.create_view(&wgpu::TextureViewDescriptor::default()),
            texture,
            window,
            levels,
            entries: vec![[0; 4]; (window * window * levels) as usize],
        }
    }

    fn index(&self, key: PageKey) -> usize {
        let w = self.window as usize;
        let (x, y) = (key.index[2] % w, key.index[1] % w);
        (key.level * w + y) * w + x
    }

    /// Points the table at `resident` pages (page, slot), and the entries of missing wanted
    /// pages at the coarser resident page covering each (`fallbacks`: wanted page, drawn page,
    /// its slot), and the entries of missing wanted pages no resident coarser page meets at
    /// [`HOLE`] (`holes`). Where two share an entry, a page of `preferred` (this frame's drawn
    /// pages) wins, then a fallback, then a resident page, then a hole, and within each the
    /// finer page. Writes the rows that changed; returns the
    /// bytes written. An entry's fourth field holds the level of the page its slot holds
    /// plus 1 for a fallback (0 for the page itself), and, from bit 8, the sides that page was
    /// uploaded without a border (`clamped`, see `borders`).
    pub fn refresh(
        &mut self,
        queue: &wgpu::Queue,
        resident: &[(PageKey, u32)],
        preferred: &HashSet<PageKey>,
        fallbacks: &[(PageKey, PageKey, u32)],
        holes: &[PageKey],
        clamped: &HashMap<PageKey, u8>,
    ) -> u64 {
        let sides = |key: &PageKey| u32::from(clamped.get(key).copied().unwrap_or(0)) << 8;
        let mut want = vec![[0u32; 4]; self.entries.len()];
        let mut rank = vec![(0u8, usize::MAX); self.entries.len()];
        // (page, slot + 1, fourth field, rank): a hole below any page, a fallback above a
        // resident page, this frame's drawn pages above all.
        let entries = resident
            .iter()
            .map(|&(key, slot)| {
                let r = if preferred.contains(&key) { 4 } else { 2 };
                (key, slot + 1, sides(&key), r)
            })
            .chain(fallbacks.iter().map(|&(wanted, drawn, slot)| {
                (
                    wanted,
                    slot + 1,
                    (drawn.level as u32 + 1) | sides(&drawn),
                    3,
                )
            }))
            .chain(holes.iter().map(|&key| (key, 0, HOLE, 1)));
        for (key, slot, level, r) in entries {
            if key.level >= self.levels as usize {
                continue;
            }
            let i = self.index(key);
            let r = (r, usize::MAX - key.level);
            if r > rank[i] {
                rank[i] = r;
                want[i] = [slot, key.index[2] as u32, key.index[1] as u32, level];
            }
        }
        let w = self.window as usize;
        let mut written = 0;
        for (row, (new, old)) in want.chunks(w).zip(self.entries.chunks_mut(w)).enumerate() {
            if new == old {
                continue;
            }
            old.copy_from_slice(new);
            queue.write_texture(
                wgpu::TexelCopyTextureInfo {
                    texture: &self.texture,
                    mip_level: 0,
                    origin: wgpu::Origin3d {
                        x: 0,
                        y: row as u32,
                        z: 0,
                    },
                    aspect: wgpu::TextureAspect::All,
                },
                bytemuck::cast_slice(new),
                wgpu::TexelCopyBufferLayout {
                    offset: 0,
                    bytes_per_row: Some(self.window * 16),
                    rows_per_image: None,
                },
                wgpu::Extent3d {
                    width: self.window,
                    height: 1,
                    depth_or_array_layers: 1,
                },
            );
            written += u64::from(self.window) * 16;
        }
        written
    }

    /// Bytes of the table texture.
    pub fn bytes(&self) -> u64 {
        self.entries.len() as u64 * 16
    }
}
