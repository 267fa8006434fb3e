//! Atlas residency: which GPU pages live in which atlas slots, under one renderer-wide byte
//! budget shared by every source, decided frame by frame with no GPU in sight.
//!
//! An [`AtlasAllocator`] holds, per registered source, a fixed number of atlas slots (what its
//! atlas texture can hold) of one size (the source's [`PageGrid::slot_bytes`]), and a global
//! least-recently-used order across all sources. Each frame the render side gives it every
//! source's wanted pages ([`PageWant`]s from [`crate::visible_pages_2d`] or
//! [`crate::visible_pages_3d`]) and which of them are ready on the host;
//! [`AtlasAllocator::plan_frame`] answers with a [`FramePlan`]: the slots to evict, the pages to
//! upload into which slots (ready ones, most urgent first, within the per-frame upload budget),
//! and for every wanted page what to draw meanwhile (itself, or the best resident coarser page).
//!
//! Invariants, after every frame: resident bytes never exceed the budget; no slot holds two
//! pages; a page wanted this frame is evicted only when no unwanted page can go, and then only
//! for a more urgent page; a frame whose wanted pages are all resident uploads and evicts
//! nothing.

use std::collections::HashMap;

use crate::layout::Layout;
use crate::pages::{PageGrid, PageKey, PagingError};
use crate::visibility::PageWant;

/// A source registered with an [`AtlasAllocator`] (an index in registration order).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct AtlasSourceId(pub usize);

/// One source's wanted pages for a frame.
pub struct AtlasFrame<'a> {
    /// The source.
    pub source: AtlasSourceId,
    /// Its wanted pages (several visuals of one source may each give a frame; they merge).
    pub wants: &'a [PageWant],
    /// Whether a page's samples are all on the host now (every chunk it needs ready or empty).
    pub ready: &'a dyn Fn(PageKey) -> bool,
}

/// Copy a page's samples into a slot.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PageUpload {
    /// The source.
    pub source: AtlasSourceId,
    /// The page.
    pub key: PageKey,
    /// The slot of the source's atlas to write.
    pub slot: u32,
}

/// A page leaves its slot (its page-table entry must be cleared before the slot is reused).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PageEviction {
    /// The source.
    pub source: AtlasSourceId,
    /// The page that leaves.
    pub key: PageKey,
    /// The slot it held.
    pub slot: u32,
}

/// A resident page that [`AtlasAllocator::compact`] moved to a lower slot: the render side
/// copies slot `from` of its old texture into slot `to` of the smaller one.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SlotMove {
    /// The page.
    pub key: PageKey,
    /// The slot it held.
    pub from: u32,
    /// The slot it holds now.
    pub to: u32,
}

/// What to draw for one wanted page this frame.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PageFallback {
    /// The source.
    pub source: AtlasSourceId,
    /// The wanted page.
    pub wanted: PageKey,
    /// The page drawn instead and its slot: the wanted page itself if resident, else the
    /// resident page of the nearest coarser level holding the wanted page's centre; `None` when
    /// nothing covers it yet.
    pub drawn: Option<(PageKey, u32)>,
}

/// One frame's decisions. Apply the evictions first, then the uploads.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct FramePlan {
    /// Slots to vacate.
    pub evictions: Vec<PageEviction>,
    /// Pages to copy into slots, most urgent first.
    pub uploads: Vec<PageUpload>,
    /// Bytes the uploads copy (slot bytes per page).
    pub upload_bytes: usize,
    /// For each wanted page, what to draw.
    pub fallbacks: Vec<PageFallback>,
    /// Ready wanted pages left for a later frame by the per-frame upload budget.
    pub deferred: usize,
    /// Ready wanted pages that found no room (every slot or byte held by more urgent wanted
    /// pages).
    pub no_room: usize,
}

struct Resident {
    slot: u32,
    last_used: u64,
}

struct SourceState {
    label: String,
    layout: Layout,
    grid: PageGrid,
    slot_bytes: usize,
    capacity: u32,
    next_slot: u32,
    free: Vec<u32>,
    pages: HashMap<PageKey, Resident>,
}

impl SourceState {
    fn take_slot(&mut self) -> Option<u32> {
        if let Some(s) = self.free.pop() {
            return Some(s);
        }
        (self.next_slot < self.capacity).then(|| {
            self.next_slot += 1;
            self.next_slot - 1
        })
    }
}

/// An LRU allocator of atlas slots for several sources under one GPU byte budget (see the
/// module documentation).
pub struct AtlasAllocator {
    budget: usize,
    upload_budget: usize,
    frame: u64,
    resident_bytes: usize,
    sources: Vec<SourceState>,
}

impl AtlasAllocator {
    /// An allocator with no sources, holding at most `budget` bytes of pages and uploading at
    /// most `upload_budget` bytes per frame.
    pub fn new(budget: usize, upload_budget: usize) -> Self {
        AtlasAllocator {
            budget,
            upload_budget,
            frame: 0,
            resident_bytes: 0,
            sources: Vec::new(),
        }
    }

    /// Register a source whose pages follow `grid` over `layout`, with an atlas of `slots`
    /// slots.
    ///
    /// Fails with [`PagingError::InvalidPageSize`] if `grid` has another number of axes than
    /// `layout`, [`PagingError::PageOverBudget`] if one slot is larger than the GPU budget or
    /// the per-frame upload budget (it could never be uploaded), and
    /// [`PagingError::Overflow`] if a slot's size overflows.
    pub fn add_source(
        &mut self,
        label: impl Into<String>,
        layout: Layout,
        grid: PageGrid,
        slots: u32,
    ) -> Result<AtlasSourceId, PagingError> {
        let label = label.into();
        grid.check_ndim(&layout, None)?;
        let slot_bytes = grid.slot_bytes(&layout)?;
        for (what, budget) in [
            ("GPU budget", self.budget),
            ("per-frame upload budget", self.upload_budget),
        ] {
            if slot_bytes > budget {
                return Err(PagingError::PageOverBudget {
                    label,
                    page_bytes: slot_bytes,
                    what,
                    budget,
                });
            }
        }
        self.sources.push(SourceState {
            label,
            layout,
            grid,
            slot_bytes,
            capacity: slots,
            next_slot: 0,
            free: Vec::new(),
            pages: HashMap::new(),
        });
        Ok(AtlasSourceId(self.sources.len() - 1))
    }

    /// Sets the most bytes uploaded per frame from the next [`AtlasAllocator::plan_frame`]
    /// on. Sources registered before keep their slots, even one larger than the new budget:
    /// such a page is then uploaded alone in a frame (every frame makes progress).
    pub fn set_upload_budget(&mut self, bytes: usize) {
        self.upload_budget = bytes;
    }

    /// Bytes of all resident pages (slot bytes per page).
    pub fn resident_bytes(&self) -> usize {
        self.resident_bytes
    }

    /// The GPU byte budget.
    pub fn budget(&self) -> usize {
        self.budget
    }

    /// The slot holding `key` of `source`, if resident.
    pub fn slot_of(&self, source: AtlasSourceId, key: PageKey) -> Option<u32> {
        self.sources
            .get(source.0)
            .and_then(|s| s.pages.get(&key))
            .map(|r| r.slot)
    }

    /// Resident pages of `source` with their slots (any order).
    pub fn resident(&self, source: AtlasSourceId) -> Vec<(PageKey, u32)> {
        self.sources
            .get(source.0)
            .map(|s| s.pages.iter().map(|(k, r)| (*k, r.slot)).collect())
            .unwrap_or_default()
    }

    /// Forget a resident page whose data changed (its chunks were invalidated): its slot is
    /// freed and returned, so the render side clears its page-table entry; the page is
    /// uploaded again once wanted and ready.
    pub fn invalidate(
        &mut self,
        source: AtlasSourceId,
        key: PageKey,
    ) -> Result<Option<u32>, PagingError> {
        let registered = self.sources.len();
        let s = self
            .sources
            .get_mut(source.0)
            .ok_or(PagingError::UnknownSource {
                id: source.0,
                registered,
            })?;
        Ok(s.pages.remove(&key).map(|r| {
            s.free.push(r.slot);
            self.resident_bytes -= s.slot_bytes;
            r.slot
        }))
    }

    /// Free every slot of `source` (its visual was dropped, or its atlas recreated): returns
    /// the pages that left, and the source stays registered with no resident page.
    pub fn clear_source(
        &mut self,
        source: AtlasSourceId,
    ) -> Result<Vec<PageEviction>, PagingError> {
        let registered = self.sources.len();
        let s = self
            .sources
            .get_mut(source.0)
            .ok_or(PagingError::UnknownSource {
                id: source.0,
                registered,
            })?;
        let mut out: Vec<PageEviction> = s
            .pages
            .drain()
            .map(|(key, r)| PageEviction {
                source,
                key,
                slot: r.slot,
            })
            .collect();
        out.sort_by_key(|e| e.slot);
        self.resident_bytes -= out.len() * s.slot_bytes;
        s.free.clear();
        s.next_slot = 0;
        Ok(out)
    }

    /// The slots `source` has handed out at most so far (one past the highest slot in use or
    /// freed): what its atlas texture must hold.
    pub fn slots_used(&self, source: AtlasSourceId) -> u32 {
        self.sources.get(source.0).map_or(0, |s| s.next_slot)
    }

    /// Resident pages of `source`.
    pub fn resident_count(&self, source: AtlasSourceId) -> usize {
        self.sources.get(source.0).map_or(0, |s| s.pages.len())
    }

    /// Packs `source`'s resident pages into its lowest `slots` slots, so that the render side
    /// can shrink its atlas texture to hold just those: pages at or above `slots` move to free
    /// slots below it (returned, for the GPU copies, in slot order), and new slots are then
    /// handed out from the free ones below `slots` first, then from `slots` up (the texture
    /// grows again as before). Nothing changes on an error: [`PagingError::UnknownSource`],
    /// or [`PagingError::OverBudget`] naming the pages when more are resident than `slots`.
    pub fn compact(
        &mut self,
        source: AtlasSourceId,
        slots: u32,
    ) -> Result<Vec<SlotMove>, PagingError> {
        let registered = self.sources.len();
        let s = self
            .sources
            .get_mut(source.0)
            .ok_or(PagingError::UnknownSource {
                id: source.0,
                registered,
            })?;
        if s.pages.len() > slots as usize {
            return Err(PagingError::OverBudget {
                pages: s.pages.len(),
                bytes: s.pages.len().saturating_mul(s.slot_bytes),
                budget: (slots as usize).saturating_mul(s.slot_bytes),
            });
        }
        let used: std::collections::HashSet<u32> = s.pages.values().map(|r| r.slot).collect();
        // Free slots below `slots`, lowest last (popped first).
        let mut free: Vec<u32> = (0..slots.min(s.next_slot))
            .filter(|slot| !used.contains(slot))
            .rev()
            .collect();
        let mut high: Vec<(PageKey, u32)> = s
            .pages
            .iter()
            .filter(|(_, r)| r.slot >= slots)
            .map(|(k, r)| (*k, r.slot))
            .collect();
        high.sort_by_key(|&(_, slot)| slot);
        let mut moves = Vec::with_capacity(high.len());
        let mut next = slots.min(s.next_slot);
        for (key, from) in high {
            let to = free.pop().unwrap_or_else(|| {
                next += 1;
                next - 1
            });
            s.pages.get_mut(&key).expect("resident").slot = to;
            moves.push(SlotMove { key, from, to });
        }
        s.next_slot = next;
        s.free = free;
        Ok(moves)
    }

    fn evict(&mut self, source: usize, key: PageKey, plan: &mut FramePlan) {
        let s = &mut self.sources[source];
        if let Some(r) = s.pages.remove(&key) {
            s.free.push(r.slot);
            self.resident_bytes -= s.slot_bytes;
            plan.evictions.push(PageEviction {
                source: AtlasSourceId(source),
                key,
                slot: r.slot,
            });
        }
    }

    /// Decide this frame's evictions, uploads and fallbacks from every source's wanted pages
    /// (see [`FramePlan`]).
    ///
    /// Fails with [`PagingError::UnknownSource`] for a source not registered here, before
    /// changing anything.
    pub fn plan_frame(&mut self, frames: &[AtlasFrame<'_>]) -> Result<FramePlan, PagingError> {
        let registered = self.sources.len();
        if let Some(f) = frames.iter().find(|f| f.source.0 >= registered) {
            return Err(PagingError::UnknownSource {
                id: f.source.0,
                registered,
            });
        }
        self.frame += 1;
        let now = self.frame;
        // The union of wants per (source, page), most urgent kept, with readiness.
        let mut wanted: HashMap<(usize, PageKey), (PageWant, bool)> = HashMap::new();
        for f in frames {
            for w in f.wants {
                wanted
                    .entry((f.source.0, w.key))
                    .and_modify(|(e, _)| {
                        if w.load_order(e).is_lt() {
                            *e = *w;
                        }
                    })
                    .or_insert_with(|| (*w, (f.ready)(w.key)));
            }
        }
        // Touch resident wanted pages; collect missing ready ones.
        let mut missing: Vec<(usize, PageWant)> = Vec::new();
        for (&(src, key), &(want, ready)) in &wanted {
            let s = &mut self.sources[src];
            if let Some(r) = s.pages.get_mut(&key) {
                r.last_used = now;
            } else if ready {
                missing.push((src, want));
            }
        }
        missing.sort_by(|a, b| a.1.load_order(&b.1).then(a.0.cmp(&b.0)));

        // Victims: unwanted pages, least recently used first (finer levels first on ties, so
        // coarse fallbacks stay longest).
        let mut unwanted: Vec<(u64, usize, usize, PageKey)> = Vec::new();
        let mut wanted_resident: Vec<(usize, PageWant)> = Vec::new();
        for (src, s) in self.sources.iter().enumerate() {
            for (key, r) in &s.pages {
                match wanted.get(&(src, *key)) {
                    None => unwanted.push((r.last_used, key.level, src, *key)),
                    Some((w, _)) => wanted_resident.push((src, *w)),
                }
            }
        }
        unwanted.sort();
        // Wanted resident pages, least urgent first.
        wanted_resident.sort_by(|a, b| b.1.load_order(&a.1).then(b.0.cmp(&a.0)));
        let mut unwanted_taken = vec![false; unwanted.len()];
        let mut wanted_taken = vec![false; wanted_resident.len()];

        let mut plan = FramePlan::default();
        for (i, &(src, want)) in missing.iter().enumerate() {
            let bytes = self.sources[src].slot_bytes;
            // The first page of a frame always goes (it can only be over the budget after
            // `set_upload_budget` lowered it below a registered slot).
            if plan.upload_bytes > 0 && plan.upload_bytes.saturating_add(bytes) > self.upload_budget
            {
                plan.deferred = missing.len() - i;
                break;
            }
            // Make room: bytes under the budget and a free slot in this source's atlas. Victims
            // are chosen first and evicted only if they make enough room, so a page that cannot
            // be placed costs no other page its slot.
            let s = &self.sources[src];
            let mut slot_free = !s.free.is_empty() || s.next_slot < s.capacity;
            let mut bytes_after = self.resident_bytes;
            let mut chosen: Vec<(bool, usize)> = Vec::new(); // (wanted?, index)
            let ok = loop {
                if slot_free && bytes_after.saturating_add(bytes) <= self.budget {
                    break true;
                }
                // A victim from this source if it lacks a slot, from any source otherwise.
                let fits = |vsrc: usize| slot_free || vsrc == src;
                let pick = (0..unwanted.len())
                    .find(|&j| !unwanted_taken[j] && fits(unwanted[j].2))
                    .map(|j| (false, j, unwanted[j].2))
                    .or_else(|| {
                        (0..wanted_resident.len())
                            .find(|&j| {
                                !wanted_taken[j]
                                    && fits(wanted_resident[j].0)
                                    && wanted_resident[j].1.load_order(&want).is_gt()
                            })
                            .map(|j| (true, j, wanted_resident[j].0))
                    });
                let Some((is_wanted, j, vsrc)) = pick else {
                    break false;
                };
                if is_wanted {
                    wanted_taken[j] = true;
                } else {
                    unwanted_taken[j] = true;
                }
                chosen.push((is_wanted, j));
                bytes_after -= self.sources[vsrc].slot_bytes;
                slot_free |= vsrc == src;
            };
            if !ok {
                for (is_wanted, j) in chosen {
                    if is_wanted {
                        wanted_taken[j] = false;
                    } else {
                        unwanted_taken[j] = false;
                    }
                }
                plan.no_room += 1;
                continue;
            }
            for (is_wanted, j) in chosen {
                let (vsrc, vkey) = if is_wanted {
                    (wanted_resident[j].0, wanted_resident[j].1.key)
                } else {
                    (unwanted[j].2, unwanted[j].3)
                };
                self.evict(vsrc, vkey, &mut plan);
            }
            let s = &mut self.sources[src];
            let slot = s.take_slot().expect("a slot was made free above");
            s.pages.insert(
                want.key,
                Resident {
                    slot,
                    last_used: now,
                },
            );
            self.resident_bytes += bytes;
            plan.upload_bytes += bytes;
            plan.uploads.push(PageUpload {
                source: AtlasSourceId(src),
                key: want.key,
                slot,
            });
        }

        // Fallbacks, in a stable order (by source, then load order).
        let mut all: Vec<(usize, PageWant)> =
            wanted.iter().map(|(&(s, _), &(w, _))| (s, w)).collect();
        all.sort_by(|a, b| a.0.cmp(&b.0).then(a.1.load_order(&b.1)));
        for (src, w) in all {
            plan.fallbacks.push(PageFallback {
                source: AtlasSourceId(src),
                wanted: w.key,
                drawn: self.best_resident(src, w.key),
            });
        }
        Ok(plan)
    }

    /// The wanted page itself if resident, else the resident page of the nearest coarser level
    /// that holds the page's centre.
    fn best_resident(&self, src: usize, key: PageKey) -> Option<(PageKey, u32)> {
        let s = &self.sources[src];
        if let Some(r) = s.pages.get(&key) {
            return Some((key, r.slot));
        }
        let (lo, hi) = s.grid.level0_box(&s.layout, key).ok()?;
        let mid = [0, 1, 2].map(|a| (lo[a] + hi[a]) * 0.5);
        (key.level + 1..s.layout.levels().len()).find_map(|l| {
            let k = s.grid.page_at(&s.layout, l, mid)?;
            s.pages.get(&k).map(|r| (k, r.slot))
        })
    }

    /// The label a source was registered with.
    pub fn label(&self, source: AtlasSourceId) -> Option<&str> {
        self.sources.get(source.0).map(|s| s.label.as_str())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::chunk::Tier;
    use crate::element::ElementType;
    use crate::layout::Level;
    use crate::region::Shape;
    use crate::visibility::{visible_pages_2d, View2d, ViewOptions2d};
    use std::collections::HashSet;

    fn pyramid(h: usize, w: usize, n: usize, element: ElementType) -> Layout {
        let base = Layout::new(Shape::d2(h, w).unwrap(), element, 1).unwrap();
        base.with_levels((1..n).map(|i| {
            let f = 1usize << i;
            Level::new(
                Shape::d2(h.div_ceil(f), w.div_ceil(f)).unwrap(),
                [1.0, f as f64, f as f64],
            )
        }))
        .unwrap()
    }

    fn ortho(cx: f64, cy: f64, zoom: f64, vw: f64, vh: f64) -> View2d {
        let sx = 2.0 * zoom / vw;
        let sy = -2.0 * zoom / vh;
        View2d {
            matrix: [
                [sx, 0.0, 0.0, 0.0],
                [0.0, sy, 0.0, 0.0],
                [0.0, 0.0, 1.0, 0.0],
                [-sx * cx, -sy * cy, 0.0, 1.0],
            ],
            viewport: [vw, vh],
        }
    }

    fn want(level: usize, r: usize, c: usize, tier: Tier, distance: f64) -> PageWant {
        PageWant {
            key: PageKey::new(level, [0, r, c]),
            tier,
            distance,
        }
    }

    fn all_ready(_: PageKey) -> bool {
        true
    }

    #[test]
    fn lru_eviction_spares_wanted_pages_and_fallbacks_are_coarser() {
        let layout = pyramid(1024, 1024, 3, ElementType::U8);
        let grid = PageGrid::new(2, &[256, 256], 0).unwrap();
        let mut a = AtlasAllocator::new(4 * 65_536, 2 * 65_536);
        let s = a.add_source("img", layout, grid, 100).unwrap();
        // Frame 1: the coarsest page and one level-0 page; both fit the upload budget.
        let w1 = [
            want(2, 0, 0, Tier::Visible, 0.0),
            want(0, 0, 0, Tier::Visible, 0.0),
        ];
        let p = a
            .plan_frame(&[AtlasFrame {
                source: s,
                wants: &w1,
                ready: &all_ready,
            }])
            .unwrap();
        assert_eq!(p.uploads.len(), 2);
        assert_eq!(p.uploads[0].key, w1[0].key, "coarser first");
        assert_eq!(p.upload_bytes, 2 * 65_536);
        // Frame 2: four more level-0 pages, one not ready: the two most urgent ready ones are
        // uploaded (the frame's budget is 2 pages), the third waits.
        let w2 = [
            want(2, 0, 0, Tier::Visible, 0.0),
            want(0, 0, 1, Tier::Visible, 1.0),
            want(0, 0, 2, Tier::Visible, 2.0),
            want(0, 0, 3, Tier::Prefetch, 3.0),
            want(0, 1, 0, Tier::Visible, 0.5),
        ];
        let not_10 = |k: PageKey| k.index != [0, 1, 0];
        let frame = |ready: &dyn Fn(PageKey) -> bool, a: &mut AtlasAllocator| {
            a.plan_frame(&[AtlasFrame {
                source: s,
                wants: &w2,
                ready,
            }])
            .unwrap()
        };
        let p = frame(&not_10, &mut a);
        let keys = |p: &FramePlan| p.uploads.iter().map(|u| u.key).collect::<Vec<_>>();
        assert_eq!(keys(&p), vec![w2[1].key, w2[2].key]);
        assert_eq!(p.deferred, 1);
        assert!(p.evictions.is_empty());
        assert_eq!(a.resident_bytes(), a.budget());
        // Frame 3: the budget is full; the prefetch page takes the unwanted page's slot, never
        // a wanted one's.
        let p = frame(&not_10, &mut a);
        assert_eq!(keys(&p), vec![w2[3].key]);
        assert_eq!(p.evictions.len(), 1);
        assert_eq!(p.evictions[0].key, PageKey::new(0, [0, 0, 0]));
        assert_eq!(p.uploads[0].slot, p.evictions[0].slot);
        // The page that is not ready draws level 2's page; resident ones draw themselves.
        let fb: HashMap<_, _> = p
            .fallbacks
            .iter()
            .map(|f| (f.wanted, f.drawn.map(|d| d.0)))
            .collect();
        assert_eq!(fb[&w2[4].key], Some(w2[0].key));
        assert_eq!(fb[&w2[1].key], Some(w2[1].key));
        assert_eq!(p.fallbacks.len(), 5);
        // Frame 4: the visible page becomes ready and displaces the prefetch page, which then
        // falls back to the coarse page.
        let p = frame(&all_ready, &mut a);
        assert_eq!(keys(&p), vec![w2[4].key]);
        assert_eq!(
            p.evictions.iter().map(|e| e.key).collect::<Vec<_>>(),
            vec![w2[3].key]
        );
        let fb: HashMap<_, _> = p
            .fallbacks
            .iter()
            .map(|f| (f.wanted, f.drawn.map(|d| d.0)))
            .collect();
        assert_eq!(fb[&w2[3].key], Some(w2[0].key));
        // Frame 5: the prefetch page is ready but every byte holds a more urgent page.
        let p = frame(&all_ready, &mut a);
        assert!(p.uploads.is_empty() && p.evictions.is_empty(), "{p:?}");
        assert_eq!(p.no_room, 1);
        assert!(a.resident_bytes() <= a.budget());
    }

    #[test]
    fn compaction_packs_resident_pages_into_the_lowest_slots() {
        let layout = pyramid(2048, 2048, 1, ElementType::U8);
        let grid = PageGrid::new(2, &[256, 256], 0).unwrap();
        let mut a = AtlasAllocator::new(64 * 65_536, 64 * 65_536);
        let s = a.add_source("img", layout, grid, 64).unwrap();
        // 16 pages resident in slots 0..16, then a view of 3 of them (budget room for 4 more
        // wanted pages only after evicting): fill, then keep pages 1, 9 and 14 by making the
        // source's other pages leave.
        let all: Vec<PageWant> = (0..16)
            .map(|i| want(0, i / 8, i % 8, Tier::Visible, i as f64))
            .collect();
        a.plan_frame(&[AtlasFrame {
            source: s,
            wants: &all,
            ready: &all_ready,
        }])
        .unwrap();
        assert_eq!((a.resident_count(s), a.slots_used(s)), (16, 16));
        let keep = [1usize, 9, 14];
        for (i, w) in all.iter().enumerate() {
            if !keep.contains(&i) {
                a.invalidate(s, w.key).unwrap();
            }
        }
        let before: HashMap<PageKey, u32> = a.resident(s).into_iter().collect();
        // Too small: refused, nothing changed.
        let e = a.compact(s, 2).unwrap_err();
        assert!(matches!(e, PagingError::OverBudget { pages: 3, .. }), "{e}");
        assert_eq!(a.resident(s).into_iter().collect::<HashMap<_, _>>(), before);
        // Into 4 slots: pages in slots 9 and 14 move to the free slots 0 and 2, lowest first.
        let moves = a.compact(s, 4).unwrap();
        let slot_of = |i: usize| before[&all[i].key];
        assert_eq!(
            moves,
            vec![
                SlotMove {
                    key: all[9].key,
                    from: slot_of(9),
                    to: 0
                },
                SlotMove {
                    key: all[14].key,
                    from: slot_of(14),
                    to: 2
                },
            ]
        );
        assert_eq!(a.slot_of(s, all[1].key), Some(1));
        assert_eq!(a.slots_used(s), 4);
        // New pages take the free slot below 4 first, then 4 and up.
        let more = [all[1], all[9], all[14], all[0], all[2]];
        let p = a
            .plan_frame(&[AtlasFrame {
                source: s,
                wants: &more,
                ready: &all_ready,
            }])
            .unwrap();
        let mut slots: Vec<u32> = p.uploads.iter().map(|u| u.slot).collect();
        slots.sort();
        assert_eq!(slots, vec![3, 4]);
        assert_eq!(a.slots_used(s), 5);
    }

    #[test]
    fn a_more_urgent_page_displaces_a_prefetch_page() {
        let layout = pyramid(1024, 1024, 1, ElementType::U8);
        let grid = PageGrid::new(2, &[256, 256], 0).unwrap();
        let mut a = AtlasAllocator::new(2 * 65_536, 4 * 65_536);
        let s = a.add_source("img", layout, grid, 100).unwrap();
        let w1 = [
            want(0, 0, 0, Tier::Visible, 0.0),
            want(0, 0, 1, Tier::Prefetch, 1.0),
        ];
        let p = a
            .plan_frame(&[AtlasFrame {
                source: s,
                wants: &w1,
                ready: &all_ready,
            }])
            .unwrap();
        assert_eq!(p.uploads.len(), 2);
        let w2 = [w1[0], w1[1], want(0, 1, 0, Tier::Visible, 1.0)];
        let p = a
            .plan_frame(&[AtlasFrame {
                source: s,
                wants: &w2,
                ready: &all_ready,
            }])
            .unwrap();
        assert_eq!(p.evictions.len(), 1);
        assert_eq!(p.evictions[0].key, w1[1].key);
        assert_eq!(p.uploads[0].key, w2[2].key);
        assert_eq!(p.uploads[0].slot, p.evictions[0].slot);
        // Stable: the next frame changes nothing.
        let p = a
            .plan_frame(&[AtlasFrame {
                source: s,
                wants: &w2,
                ready: &all_ready,
            }])
            .unwrap();
        assert!(p.uploads.is_empty() && p.evictions.is_empty());
    }

    #[test]
    fn a_page_that_cannot_be_placed_evicts_nothing() {
        // Source A's slots are 64 KiB, source B's 128 KiB; the budget holds three of A's.
        let grid = PageGrid::new(2, &[256, 256], 0).unwrap();
        let mut a = AtlasAllocator::new(3 * 65_536, 1 << 20);
        let sa = a
            .add_source("a", pyramid(1024, 1024, 1, ElementType::U8), grid, 100)
            .unwrap();
        let sb = a
            .add_source("b", pyramid(1024, 1024, 1, ElementType::U16), grid, 100)
            .unwrap();
        let wa = [
            want(0, 0, 0, Tier::Visible, 0.0),
            want(0, 0, 1, Tier::Visible, 1.0),
            want(0, 0, 2, Tier::Prefetch, 2.0),
        ];
        let p = a
            .plan_frame(&[AtlasFrame {
                source: sa,
                wants: &wa,
                ready: &all_ready,
            }])
            .unwrap();
        assert_eq!(p.uploads.len(), 3);
        // B's prefetch page outranks A's prefetch page, but evicting it frees only half the
        // room B's page needs, and A's visible pages outrank B's: nothing moves.
        let wb = [want(0, 0, 0, Tier::Prefetch, 0.0)];
        let p = a
            .plan_frame(&[
                AtlasFrame {
                    source: sa,
                    wants: &wa,
                    ready: &all_ready,
                },
                AtlasFrame {
                    source: sb,
                    wants: &wb,
                    ready: &all_ready,
                },
            ])
            .unwrap();
        assert!(p.evictions.is_empty() && p.uploads.is_empty(), "{p:?}");
        assert_eq!(p.no_room, 1);
        assert!(a.slot_of(sa, wa[2].key).is_some());
        assert_eq!(
            p.fallbacks.iter().find(|f| f.source == sb).unwrap().drawn,
            None
        );
        // Once A stops wanting its second visible page, B's page takes its and the prefetch
        // page's room.
        let p = a
            .plan_frame(&[
                AtlasFrame {
                    source: sa,
                    wants: &wa[..1],
                    ready: &all_ready,
                },
                AtlasFrame {
                    source: sb,
                    wants: &wb,
                    ready: &all_ready,
                },
            ])
            .unwrap();
        let gone: HashSet<_> = p.evictions.iter().map(|e| e.key).collect();
        assert_eq!(gone, HashSet::from([wa[1].key, wa[2].key]));
        assert_eq!(p.uploads.len(), 1);
        assert_eq!(a.resident_bytes(), 65_536 + 131_072);
        // Clearing B frees its bytes; A is untouched; B's slots start again from 0.
        let gone = a.clear_source(sb).unwrap();
        assert_eq!(gone.len(), 1);
        assert_eq!(a.resident_bytes(), 65_536);
        assert!(a.resident(sb).is_empty() && a.slot_of(sa, wa[0].key).is_some());
        let p = a
            .plan_frame(&[AtlasFrame {
                source: sb,
                wants: &wb,
                ready: &all_ready,
            }])
            .unwrap();
        assert_eq!(p.uploads[0].slot, 0);
        assert!(a.clear_source(AtlasSourceId(7)).is_err());
    }

    #[test]
    fn bad_registrations_and_sources_are_named() {
        let layout = pyramid(1024, 1024, 1, ElementType::F32);
        let grid = PageGrid::new(2, &[256, 256], 1).unwrap();
        let mut a = AtlasAllocator::new(1 << 20, 1000);
        let e = a.add_source("big", layout.clone(), grid, 10).unwrap_err();
        assert!(
            e.to_string().contains("266256")
                && e.to_string().contains("per-frame upload budget of 1000"),
            "{e}"
        );
        let mut a = AtlasAllocator::new(1000, 1 << 20);
        assert!(a
            .add_source("big", layout, grid, 10)
            .unwrap_err()
            .to_string()
            .contains("GPU budget"));
        let e = a
            .plan_frame(&[AtlasFrame {
                source: AtlasSourceId(3),
                wants: &[],
                ready: &all_ready,
            }])
            .unwrap_err();
        assert_eq!(
            e,
            PagingError::UnknownSource {
                id: 3,
                registered: 0
            }
        );
    }

    struct Rng(u64);
    impl Rng {
        fn next(&mut self) -> f64 {
            self.0 ^= self.0 << 13;
            self.0 ^= self.0 >> 7;
            self.0 ^= self.0 << 17;
            (self.0 >> 11) as f64 / (1u64 << 53) as f64
        }
    }

    /// Random camera paths over three sources sharing one budget: after every frame resident
    /// bytes stay within the budget and match the resident pages, slots are unique and within
    /// each atlas, uploads stay within the frame budget and come most urgent first, a wanted
    /// page is evicted only when its source has no unwanted page left, and a frame whose wanted
    /// pages are all resident uploads and evicts nothing.
    #[test]
    fn random_camera_paths_keep_every_budget() {
        // Counters over all seeds, so that the test provably exercised eviction, full budgets,
        // full atlases, deferral and zero-upload frames.
        let (mut evictions, mut full, mut deferred, mut idle, mut no_room) = (0, 0, 0, 0, 0);
        for seed in 1..=12u64 {
            let mut rng = Rng(seed.wrapping_mul(0x9e3779b97f4a7c15) | 1);
            let sources = [
                (
                    pyramid(40_000, 60_000, 9, ElementType::U8),
                    PageGrid::new(2, &[256, 256], 1).unwrap(),
                    400u32,
                ),
                (
                    pyramid(9_000, 7_000, 6, ElementType::U16),
                    PageGrid::new(2, &[128, 128], 1).unwrap(),
                    60,
                ),
                (
                    pyramid(3_000, 3_000, 4, ElementType::F32),
                    PageGrid::new(2, &[64, 256], 1).unwrap(),
                    1000,
                ),
            ];
            let budget = 12 << 20;
            let upload_budget = 2 << 20;
            let mut a = AtlasAllocator::new(budget, upload_budget);
            let ids: Vec<_> = sources
                .iter()
                .map(|(l, g, slots)| a.add_source("s", l.clone(), *g, *slots).unwrap())
                .collect();
            let mut cams: Vec<(f64, f64, f64)> = sources
                .iter()
                .map(|(l, _, _)| {
                    (
                        l.shape().width() as f64 / 2.0,
                        l.shape().height() as f64 / 2.0,
                        0.01,
                    )
                })
                .collect();
            let salt = seed;
            let ready = move |k: PageKey| {
                !(k.index[1] * 31 + k.index[2] * 17 + k.level + salt as usize).is_multiple_of(5)
            };
            for _frame in 0..150 {
                // Move each camera: mostly small pans, sometimes a zoom, sometimes a jump.
                for (cam, (l, _, _)) in cams.iter_mut().zip(&sources) {
                    let r = rng.next();
                    let step = 300.0 / cam.2;
                    if r < 0.6 {
                        cam.0 += (rng.next() - 0.5) * step * 0.2;
                        cam.1 += (rng.next() - 0.5) * step * 0.2;
                    } else if r < 0.85 {
                        cam.2 = (cam.2 * 2f64.powf(rng.next() * 2.0 - 1.0)).clamp(1e-3, 4.0);
                    } else if r < 0.9 {
                        cam.0 = rng.next() * l.shape().width() as f64;
                        cam.1 = rng.next() * l.shape().height() as f64;
                    }
                }
                let views: Vec<_> = cams
                    .iter()
                    .map(|&(x, y, z)| ortho(x, y, z, 800.0, 600.0))
                    .collect();
                let wants: Vec<Vec<PageWant>> = sources
                    .iter()
                    .zip(&views)
                    .map(|((l, g, _), v)| {
                        visible_pages_2d(l, g, v, ViewOptions2d::default())
                            .unwrap()
                            .wants
                    })
                    .collect();
                let all_resident_before = ids.iter().zip(&wants).all(|(id, w)| {
                    w.iter()
                        .filter(|w| ready(w.key))
                        .all(|w| a.slot_of(*id, w.key).is_some())
                });
                let frames: Vec<_> = ids
                    .iter()
                    .zip(&wants)
                    .map(|(id, w)| AtlasFrame {
                        source: *id,
                        wants: w,
                        ready: &ready,
                    })
                    .collect();
                let plan = a.plan_frame(&frames).unwrap();

                assert!(
                    a.resident_bytes() <= budget,
                    "seed {seed}: {} > {budget}",
                    a.resident_bytes()
                );
                assert!(plan.upload_bytes <= upload_budget);
                let mut total = 0;
                for ((id, (l, g, slots)), w) in ids.iter().zip(&sources).zip(&wants) {
                    let res = a.resident(*id);
                    total += res.len() * g.slot_bytes(l).unwrap();
                    let distinct: HashSet<u32> = res.iter().map(|r| r.1).collect();
                    assert_eq!(distinct.len(), res.len(), "a slot holds two pages");
                    assert!(res.iter().all(|r| r.1 < *slots));
                    let wanted: HashSet<PageKey> = w.iter().map(|w| w.key).collect();
                    if plan
                        .evictions
                        .iter()
                        .any(|e| e.source == *id && wanted.contains(&e.key))
                    {
                        assert!(
                            res.iter().all(|r| wanted.contains(&r.0)),
                            "seed {seed}: a wanted page went while an unwanted one stayed"
                        );
                    }
                }
                assert_eq!(total, a.resident_bytes());
                evictions += plan.evictions.len();
                deferred += plan.deferred;
                no_room += plan.no_room;
                if a.resident_bytes() + (1 << 20) > budget || a.resident(ids[1]).len() == 60 {
                    full += 1;
                }
                if all_resident_before {
                    idle += 1;
                    assert!(
                        plan.uploads.is_empty() && plan.evictions.is_empty(),
                        "seed {seed}: {plan:?}"
                    );
                }
                for u in &plan.uploads {
                    let w = &wants[u.source.0];
                    assert!(w.iter().any(|w| w.key == u.key) && ready(u.key));
                }
            }
        }
        eprintln!("evictions {evictions}, full frames {full}, deferred {deferred}, idle frames {idle}, no room {no_room}");
        assert!(evictions > 100 && full > 100 && deferred > 0 && idle > 10);
    }

    /// Column-major perspective * look-at, eye at `eye` looking at `at` (level-0 x, y, z).
    fn look_at(eye: [f64; 3], at: [f64; 3], fovy: f64, aspect: f64) -> [[f64; 4]; 4] {
        let sub = |a: [f64; 3], b: [f64; 3]| [a[0] - b[0], a[1] - b[1], a[2] - b[2]];
        let cross = |a: [f64; 3], b: [f64; 3]| {
            [
                a[1] * b[2] - a[2] * b[1],
                a[2] * b[0] - a[0] * b[2],
                a[0] * b[1] - a[1] * b[0],
            ]
        };
        let dot = |a: [f64; 3], b: [f64; 3]| a[0] * b[0] + a[1] * b[1] + a[2] * b[2];
        let norm = |a: [f64; 3]| {
            let l = dot(a, a).sqrt();
            [a[0] / l, a[1] / l, a[2] / l]
        };
        let f = norm(sub(at, eye));
        let s = norm(cross(f, [0.0, 1.0, 0.0]));
        let u = cross(s, f);
        let view = [
            [s[0], u[0], -f[0], 0.0],
            [s[1], u[1], -f[1], 0.0],
            [s[2], u[2], -f[2], 0.0],
            [-dot(s, eye), -dot(u, eye), dot(f, eye), 1.0],
        ];
        let g = 1.0 / (fovy / 2.0).tan();
        let (near, far) = (0.5, 1e6);
        let proj = [
            [g / aspect, 0.0, 0.0, 0.0],
            [0.0, g, 0.0, 0.0],
            [0.0, 0.0, far / (near - far), -1.0],
            [0.0, 0.0, near * far / (near - far), 0.0],
        ];
        let mut m = [[0.0; 4]; 4];
        for (col, mc) in m.iter_mut().enumerate() {
            for (row, v) in mc.iter_mut().enumerate() {
                *v = (0..4).map(|k| proj[k][row] * view[col][k]).sum();
            }
        }
        m
    }

    /// Random camera paths around and into two volumes sharing one budget: each view's wanted
    /// set stays within its share, resident bytes within the whole budget after every frame,
    /// and a frame that only repeats the last one uploads nothing once all is resident.
    #[test]
    fn random_volume_paths_keep_every_budget() {
        use crate::visibility::{visible_pages_3d, LevelPolicy, View3d};
        let volume = |n: usize, levels: usize, element| {
            let base = Layout::new(Shape::new(&[n, n, n]).unwrap(), element, 1).unwrap();
            base.with_levels((1..levels).map(|i| {
                let f = 1usize << i;
                Level::new(Shape::new(&[n.div_ceil(f); 3]).unwrap(), [f as f64; 3])
            }))
            .unwrap()
        };
        let sources = [
            (
                volume(2048, 6, ElementType::U8),
                PageGrid::new(3, &[64, 64, 64], 1).unwrap(),
            ),
            (
                volume(512, 4, ElementType::U16),
                PageGrid::new(3, &[32, 32, 32], 1).unwrap(),
            ),
        ];
        let budget = 64 << 20;
        let mut a = AtlasAllocator::new(budget, 8 << 20);
        let ids: Vec<_> = sources
            .iter()
            .map(|(l, g)| a.add_source("v", l.clone(), *g, 1 << 16).unwrap())
            .collect();
        let mut rng = Rng(0x2545f4914f6cdd1d);
        let (mut coarsened, mut repeats) = (0, 0);
        for frame in 0..60 {
            let repeat = frame % 4 == 3;
            let mut wants = Vec::new();
            for (l, g) in &sources {
                let n = l.shape().width() as f64;
                if !repeat {
                    rng.next();
                }
                let seed = rng.0;
                let mut local = Rng(seed ^ (n as u64));
                let r = n * (0.3 + 2.0 * local.next());
                let (th, ph) = (local.next() * 6.3, local.next() * 3.0 - 1.5);
                let c = n / 2.0;
                let eye = [
                    c + r * th.cos() * ph.cos(),
                    c + r * ph.sin(),
                    c + r * th.sin() * ph.cos(),
                ];
                let at = [
                    c + (local.next() - 0.5) * n,
                    c,
                    c + (local.next() - 0.5) * n,
                ];
                let cam = View3d::perspective(look_at(eye, at, 0.9, 4.0 / 3.0), eye, 0.9, 480.0);
                let share = budget / 2;
                let v = visible_pages_3d(l, g, &cam, LevelPolicy::default(), share).unwrap();
                assert!(v.bytes(g, l).unwrap() <= share);
                if v.footprint > 1.0 {
                    coarsened += 1;
                }
                wants.push(v.wants);
            }
            // Settle each repeated view: plan until nothing is left to upload, then once more.
            let rounds = if repeat { 40 } else { 1 };
            for round in 0..rounds {
                let frames: Vec<_> = ids
                    .iter()
                    .zip(&wants)
                    .map(|(id, w)| AtlasFrame {
                        source: *id,
                        wants: w,
                        ready: &all_ready,
                    })
                    .collect();
                let p = a.plan_frame(&frames).unwrap();
                assert!(a.resident_bytes() <= budget);
                if repeat && p.uploads.is_empty() {
                    assert!(p.evictions.is_empty());
                    assert!(p
                        .fallbacks
                        .iter()
                        .all(|f| f.drawn.map(|d| d.0) == Some(f.wanted)));
                    repeats += 1;
                    break;
                }
                assert!(!repeat || round + 1 < rounds, "a repeated view never settled: {} uploads, {} evictions, {} no room, {} deferred, {} resident", p.uploads.len(), p.evictions.len(), p.no_room, p.deferred, a.resident_bytes());
            }
        }
        assert!(coarsened > 5 && repeats == 15, "{coarsened} {repeats}");
    }

    #[test]
    fn panning_and_zooming_back_within_resident_pages_uploads_nothing() {
        let sources = [
            (
                pyramid(100_000, 100_000, 10, ElementType::U8),
                PageGrid::new(2, &[256, 256], 1).unwrap(),
            ),
            (
                pyramid(20_000, 30_000, 8, ElementType::U16),
                PageGrid::new(2, &[256, 256], 1).unwrap(),
            ),
        ];
        let mut a = AtlasAllocator::new(256 << 20, 16 << 20);
        let ids: Vec<_> = sources
            .iter()
            .map(|(l, g)| a.add_source("s", l.clone(), *g, 4096).unwrap())
            .collect();
        // A path: pan right, zoom in, pan back, zoom out; then repeat it.
        let path: Vec<(f64, f64, f64)> = (0..10)
            .map(|i| (10_000.0 + 50.0 * i as f64, 10_000.0, 0.5))
            .chain((0..4).map(|i| (10_450.0, 10_000.0, 0.5 * 2f64.powi(i))))
            .chain(
                (0..10)
                    .rev()
                    .map(|i| (10_000.0 + 50.0 * i as f64, 10_000.0, 0.5)),
            )
            .collect();
        let run = |a: &mut AtlasAllocator| {
            let mut uploaded = 0;
            for &(x, y, z) in &path {
                let wants: Vec<_> = sources
                    .iter()
                    .map(|(l, g)| {
                        visible_pages_2d(
                            l,
                            g,
                            &ortho(x, y, z, 1024.0, 768.0),
                            ViewOptions2d::default(),
                        )
                        .unwrap()
                        .wants
                    })
                    .collect();
                // Settle: plan until nothing is left to upload (the per-frame budget spreads it).
                loop {
                    let frames: Vec<_> = ids
                        .iter()
                        .zip(&wants)
                        .map(|(id, w)| AtlasFrame {
                            source: *id,
                            wants: w,
                            ready: &all_ready,
                        })
                        .collect();
                    let p = a.plan_frame(&frames).unwrap();
                    uploaded += p.upload_bytes;
                    if p.uploads.is_empty() {
                        assert!(p
                            .fallbacks
                            .iter()
                            .all(|f| f.drawn.map(|d| d.0) == Some(f.wanted)));
                        break;
                    }
                }
            }
            uploaded
        };
        assert!(run(&mut a) > 0);
        assert_eq!(
            run(&mut a),
            0,
            "the second pass over resident pages uploaded bytes"
        );
    }
}
