//! The staging ring: persistently reused, CPU-written upload buffers.
//!
//! `queue.write_texture` allocates a fresh staging buffer for every call. The ring instead
//! keeps mapped buffers (chunks) and sub-allocates uploads from them; after a frame is
//! submitted its chunks are mapped again asynchronously and return to the free list when the
//! GPU is done with them. In steady state no buffer is created.

use std::sync::mpsc;

/// Alignment of every staged copy: `COPY_BYTES_PER_ROW_ALIGNMENT`, which also satisfies every
/// texel size and `MAP_ALIGNMENT`.
pub(crate) const STAGING_ALIGNMENT: u64 = wgpu::COPY_BYTES_PER_ROW_ALIGNMENT as u64;

/// Default chunk size: small uploads share 4 MiB chunks; larger ones get a chunk of their own
/// (rounded up to a power of two), which is reused like the others. A chunk is reused once the
/// GPU has finished the frame that read it, so a steady stream of small edits holds two or
/// three chunks.
const DEFAULT_CHUNK_BYTES: u64 = 4 << 20;

/// Free chunks kept beyond this many bytes are dropped.
const MAX_FREE_BYTES: u64 = 512 << 20;

/// After this many frames without a large upload (one that needs a chunk of its own) the
/// large chunks go back, and after this many frames without any upload the default-sized
/// ones beyond the two most recently used (`KEEP_IDLE_CHUNKS`): a burst's staging is released
/// once the burst is over, and kept while it lasts however many frames are in flight. 120
/// frames is two seconds at 60 frames a second: the upload bench's mix of 16-frame runs of
/// full and region updates has 32 frames in a row without a large upload, and at 32 the ring
/// dropped and remade three 64 MiB chunks each time (20 ms per pipelined full upload instead
/// of 10).
pub const STAGING_IDLE_FRAMES: u64 = 120;

/// Default-sized chunks kept however long they sit idle.
const KEEP_IDLE_CHUNKS: usize = 2;

/// Staged bytes in flight in one submission before the frame's copies so far are submitted
/// (see [`StagingRing::should_flush`]).
const FLUSH_BYTES: u64 = 16 << 20;

struct Chunk {
    buffer: wgpu::Buffer,
    cursor: u64,
    /// The frame that last filled it.
    last_used: u64,
}

impl Chunk {
    fn room(&self, size: u64) -> bool {
        self.cursor.next_multiple_of(STAGING_ALIGNMENT) + size <= self.buffer.size()
    }
}

/// Staged bytes: where to copy from.
pub(crate) struct Staged {
    pub buffer: wgpu::Buffer,
    pub offset: u64,
}

pub(crate) struct StagingRing {
    chunk_bytes: u64,
    max_buffer: u64,
    /// Mapped and empty.
    free: Vec<Chunk>,
    /// Mapped and being filled this frame.
    active: Vec<Chunk>,
    /// Chunks whose re-mapping finished, sent by their map callbacks.
    returned_tx: mpsc::Sender<Chunk>,
    returned_rx: mpsc::Receiver<Chunk>,
    pub created: u64,
    pub held_bytes: u64,
    /// Frames finished so far (for least-recently-used eviction).
    frame: u64,
    /// Whether this frame recorded a device-resident copy: its submission is not split.
    device_copies: bool,
    /// This frame's last part submitted early (see [`StagingRing::should_flush`]).
    flushed: Option<wgpu::SubmissionIndex>,
    /// The last frames that staged anything, and that staged into a large chunk.
    last_staged: u64,
    last_large: u64,
}

impl StagingRing {
    pub fn new(max_buffer: u64) -> Self {
        let (returned_tx, returned_rx) = mpsc::channel();
        StagingRing {
            chunk_bytes: DEFAULT_CHUNK_BYTES.min(max_buffer),
            max_buffer,
            free: Vec::new(),
            active: Vec::new(),
            returned_tx,
            returned_rx,
            created: 0,
            held_bytes: 0,
            frame: 0,
            device_copies: false,
            flushed: None,
            last_staged: 0,
            last_large: 0,
        }
    }

    /// Largest single staged copy.
    pub fn max_stage(&self) -> u64 {
        self.max_buffer
    }

    /// Collects chunks the GPU has released (their map callbacks ran in a poll of the device:
    /// every `queue.submit` polls, and `stage` does when it needs a chunk).
    fn reclaim(&mut self) {
        while let Ok(chunk) = self.returned_rx.try_recv() {
            self.free.push(chunk);
        }
        let mut free_bytes: u64 = self.free.iter().map(|c| c.buffer.size()).sum();
        while free_bytes > MAX_FREE_BYTES {
            // Drop the least recently used: chunks a workload still uses stay (dropping the
            // small chunks of a stream of small edits because large ones sit idle would make
            // every frame create one).
            let (i, _) = self
                .free
                .iter()
                .enumerate()
                .min_by_key(|(_, c)| c.last_used)
                .expect("free is not empty while it holds bytes");
            let chunk = self.free.swap_remove(i);
            free_bytes -= chunk.buffer.size();
            self.held_bytes -= chunk.buffer.size();
        }
    }

    /// Drops free chunks once their kind has been idle for [`STAGING_IDLE_FRAMES`] frames:
    /// large ones after that many frames without a large upload, default-sized ones (but the
    /// [`KEEP_IDLE_CHUNKS`] most recently used) after that many frames without any.
    fn trim_idle(&mut self) {
        let drop_large = self.last_large + STAGING_IDLE_FRAMES < self.frame;
        let drop_small = self.last_staged + STAGING_IDLE_FRAMES < self.frame;
        if !drop_large && !drop_small {
            return;
        }
        let chunk_bytes = self.chunk_bytes;
        self.free.sort_by_key(|c| std::cmp::Reverse(c.last_used));
        let mut kept_small = 0;
        let mut dropped = 0;
        self.free.retain(|c| {
            let keep = if c.buffer.size() > chunk_bytes {
                !drop_large
            } else {
                kept_small += 1;
                !drop_small || kept_small <= KEEP_IDLE_CHUNKS
            };
            if !keep {
                dropped += c.buffer.size();
            }
            keep
        });
        self.held_bytes -= dropped;
    }

    /// Whether the commands recorded so far should be submitted before `incoming` more bytes
    /// are staged: this submission already holds some staging, and with `incoming` it would
    /// hold more than 16 MiB. Submitting then lets the chunks come back for the rest of the
    /// frame once the GPU has copied them (at once on a CPU driver, whose submit copies), so
    /// a frame that updates many sources holds a bounded amount of staging instead of all of
    /// it (at most two parts are in flight: the proxy layer waits for the part before). Never
    /// for a frame with device-resident copies (their synchronization is per frame).
    pub fn should_flush(&self, incoming: u64) -> bool {
        let held: u64 = self.active.iter().map(|c| c.cursor).sum();
        !self.device_copies && held > 0 && held + incoming > FLUSH_BYTES
    }

    /// Records the submission of a part of this frame; returns the part submitted before it.
    pub fn swap_flushed(&mut self, part: wgpu::SubmissionIndex) -> Option<wgpu::SubmissionIndex> {
        self.flushed.replace(part)
    }

    /// Notes that this frame recorded a device-resident copy (see [`StagingRing::should_flush`]).
    pub fn note_device_copy(&mut self) {
        self.device_copies = true;
    }

    /// Unmaps the chunks filled since the last submission; call before submitting the
    /// commands that read them, then [`StagingRing::recall`].
    pub fn unmap_active(&mut self) {
        for chunk in &self.active {
            chunk.buffer.unmap();
        }
    }

    /// Reserves `size` bytes (at most `max_stage`), lets `fill` write them through a mapped
    /// view, and returns where they are.
    pub fn stage(
        &mut self,
        device: &wgpu::Device,
        size: u64,
        fill: impl FnOnce(&mut wgpu::BufferViewMut),
    ) -> Staged {
        debug_assert!(size > 0 && size <= self.max_buffer);
        // Small uploads go to default-sized chunks only: a large chunk left over from big
        // uploads would be re-mapped whole every frame for a few bytes (on an H200, 256 KiB
        // region frames, 16 in flight, took 1.39 ms each after a run of full 64 MiB updates
        // that way, and 0.51 ms with default-sized chunks).
        let small = size <= self.chunk_bytes;
        let chunk_bytes = self.chunk_bytes;
        let suits = move |c: &Chunk| c.room(size) && (!small || c.buffer.size() <= chunk_bytes);
        let index = match self.active.iter().position(suits) {
            Some(i) => i,
            None => {
                self.reclaim();
                if !self.free.iter().any(&suits) {
                    // Run the map callbacks of chunks the GPU has finished with, then look
                    // again (polling only when a chunk is needed keeps it off the path of
                    // frames that find one free).
                    let _ = device.poll(wgpu::PollType::Poll);
                    self.reclaim();
                }
                let chunk = match self
                    .free
                    .iter()
                    .enumerate()
                    .filter(|(_, c)| suits(c))
                    .min_by_key(|(_, c)| c.buffer.size())
                    .map(|(i, _)| i)
                {
                    Some(i) => self.free.swap_remove(i),
                    None => self.create(device, size),
                };
                self.active.push(chunk);
                self.active.len() - 1
            }
        };
        let chunk = &mut self.active[index];
        chunk.last_used = self.frame;
        self.last_staged = self.frame;
        if chunk.buffer.size() > self.chunk_bytes {
            self.last_large = self.frame;
        }
        let offset = chunk.cursor.next_multiple_of(STAGING_ALIGNMENT);
        chunk.cursor = offset + size;
        {
            let mut view = chunk
                .buffer
                .get_mapped_range_mut(offset..offset + size)
                .expect("staging chunk is mapped and the range is inside it");
            fill(&mut view);
        }
        Staged {
            buffer: chunk.buffer.clone(),
            offset,
        }
    }

    fn create(&mut self, device: &wgpu::Device, size: u64) -> Chunk {
        let bytes = if size <= self.chunk_bytes {
            self.chunk_bytes
        } else {
            size.next_power_of_two().min(self.max_buffer)
        };
        self.created += 1;
        self.held_bytes += bytes;
        Chunk {
            buffer: device.create_buffer(&wgpu::BufferDescriptor {
                label: Some("sluice staging chunk"),
                size: bytes,
                usage: wgpu::BufferUsages::MAP_WRITE | wgpu::BufferUsages::COPY_SRC,
                mapped_at_creation: true,
            }),
            cursor: 0,
            last_used: self.frame,
        }
    }

    /// Unmaps this frame's chunks; call before submitting the commands that read them. Ends
    /// the frame: chunks idle too long are dropped.
    pub fn finish(&mut self) {
        self.unmap_active();
        self.frame += 1;
        self.device_copies = false;
        self.flushed = None;
        self.reclaim();
        self.trim_idle();
    }

    /// Starts re-mapping this frame's chunks; call after submitting. They return to the free
    /// list once the GPU is done with them and a poll of the device has run their callbacks.
    pub fn recall(&mut self) {
        for mut chunk in self.active.drain(..) {
            chunk.cursor = 0;
            let tx = self.returned_tx.clone();
            let buffer = chunk.buffer.clone();
            buffer.map_async(wgpu::MapMode::Write, .., move |result| {
                if result.is_ok() {
                    // The ring may be gone (renderer dropped): then the chunk just drops.
                    let _ = tx.send(chunk);
                }
            });
        }
    }
}
