//! Frames shared between processes: a producer (standing in for a worker that runs a network,
//! say) writes frames into a ring of GPU buffers it exports, and a display process draws them,
//! with no copy through host memory in either process.
//!
//! The two ends talk over a Unix stream socket. The producer sends a hello with the layout and
//! one file descriptor per slot (plus a timeline semaphore's, where both drivers share them),
//! then one message per finished frame. The display keeps only the newest frame: a frame that
//! is superseded before it is shown goes straight back to the producer, and the slot it showed
//! last goes back once the GPU has finished copying it. The display so holds at most three
//! slots (the newest frame not shown yet, the one shown, the one whose copy may still run);
//! with five slots the producer always finds a free one once the display has started taking
//! frames, and never waits for it to draw. [`ProducerStats`] counts the times it waited.
//!
//! Ordering: where shared semaphores exist, the producer's submit signals the frame's number
//! and the display's copy waits for it on the GPU; otherwise the producer's present waits for
//! its own submit to finish before sending the frame. Either way a slot is written only while
//! the producer owns it, so the display never shows a torn frame.

use std::collections::VecDeque;
use std::os::fd::{AsFd, OwnedFd};
use std::os::unix::net::UnixStream;
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use parking_lot::{Condvar, Mutex};
use sluice_core::{ElementType, Layout, Shape, TimelineSemaphore, VulkanMemory};

use crate::error::InteropError;
use crate::fd_passing::{receive, send, Message, Received, MAX_FDS, MESSAGE_BYTES};
use crate::interop::Interop;
use crate::source::{Pitches, VulkanSource};
use crate::vulkan::memory::ExportedBuffer;
use crate::vulkan::semaphore::SharedSemaphore;

const MAGIC: &[u8; 8] = b"SLRING01";
const HELLO: u8 = 1;
const FRAME: u8 = 2;
const RELEASE: u8 = 3;
/// The most slots a ring has (one message carries every slot's descriptor).
pub const MAX_SLOTS: usize = MAX_FDS - 1;
const ELEMENTS: [ElementType; 9] = [
    ElementType::U8,
    ElementType::I8,
    ElementType::U16,
    ElementType::I16,
    ElementType::U32,
    ElementType::I32,
    ElementType::F16,
    ElementType::F32,
    ElementType::F64,
];

/// Writes little-endian fields into a message.
struct Writer {
    message: Message,
    at: usize,
}

impl Writer {
    fn new(kind: u8) -> Self {
        let mut w = Writer {
            message: [0; MESSAGE_BYTES],
            at: 0,
        };
        w.bytes(MAGIC);
        w.bytes(&[kind]);
        w
    }

    fn bytes(&mut self, bytes: &[u8]) -> &mut Self {
        self.message[self.at..self.at + bytes.len()].copy_from_slice(bytes);
        self.at += bytes.len();
        self
    }

    fn u64(&mut self, value: u64) -> &mut Self {
        self.bytes(&value.to_le_bytes())
    }
}

/// Reads the fields [`Writer`] wrote.
struct Reader<'a> {
    message: &'a Message,
    at: usize,
}

impl<'a> Reader<'a> {
    /// Checks the magic and returns the message kind.
    fn new(message: &'a Message) -> Result<(Self, u8), InteropError> {
        if &message[..8] != MAGIC {
            return Err(protocol("a message without the sluice ring magic"));
        }
        Ok((Reader { message, at: 9 }, message[8]))
    }

    fn bytes<const N: usize>(&mut self) -> [u8; N] {
        let mut out = [0; N];
        out.copy_from_slice(&self.message[self.at..self.at + N]);
        self.at += N;
        out
    }

    fn u64(&mut self) -> u64 {
        u64::from_le_bytes(self.bytes())
    }
}

fn protocol(what: impl Into<String>) -> InteropError {
    InteropError::Protocol(what.into())
}

/// How often the producer had to wait for the display, and how many frames it made.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ProducerStats {
    /// Frames presented.
    pub frames: u64,
    /// Times [`RingProducer::acquire`] found no free slot and waited for the display.
    pub waits: u64,
}

/// A slot the producer may write: from [`RingProducer::acquire`] to
/// [`RingProducer::present`].
#[derive(Debug)]
#[must_use = "present the slot, or the ring loses it"]
pub struct Slot {
    index: usize,
}

impl Slot {
    /// The slot's index in the ring.
    pub fn index(&self) -> usize {
        self.index
    }
}

/// The producer's end of a ring of frames.
pub struct RingProducer {
    interop: Interop,
    stream: UnixStream,
    layout: Layout,
    pitches: Pitches,
    slots: Vec<ExportedBuffer>,
    free: VecDeque<usize>,
    semaphore: Option<SharedSemaphore>,
    stats: ProducerStats,
}

impl RingProducer {
    /// Allocates `slots` buffers for frames of `layout` (rows pitched to 256 bytes) on
    /// `interop`'s device and sends them to the display at the other end of `stream`.
    pub fn new(
        interop: &Interop,
        stream: UnixStream,
        layout: Layout,
        slots: usize,
    ) -> Result<Self, InteropError> {
        if !(2..=MAX_SLOTS).contains(&slots) {
            return Err(protocol(format!(
                "a ring needs 2 to {MAX_SLOTS} slots, not {slots} (5 keep the producer from waiting)"
            )));
        }
        crate::source::check_device_layout(&layout)?;
        let pitches = Pitches::aligned(&layout);
        let buffers = (0..slots)
            .map(|_| interop.export_buffer(pitches.span(&layout)))
            .collect::<Result<Vec<_>, _>>()?;
        let semaphore = if interop.supports_shared_semaphores() {
            Some(interop.create_semaphore()?)
        } else {
            None
        };
        let mut fds = buffers
            .iter()
            .map(ExportedBuffer::export_fd)
            .collect::<Result<Vec<OwnedFd>, _>>()?;
        if let Some(semaphore) = &semaphore {
            fds.push(semaphore.export_fd()?);
        }
        let shape = layout.shape().padded();
        let element = ELEMENTS
            .iter()
            .position(|&e| e == layout.element())
            .unwrap_or(0);
        let identity = interop.identity();
        let mut hello = Writer::new(HELLO);
        hello
            .u64(slots as u64)
            .u64(layout.shape().ndim() as u64)
            .u64(shape[0] as u64)
            .u64(shape[1] as u64)
            .u64(shape[2] as u64)
            .u64(element as u64)
            .u64(layout.channels() as u64)
            .u64(pitches.row as u64)
            .u64(pitches.plane as u64)
            .u64(buffers[0].allocation_size())
            .u64(u64::from(buffers[0].memory_type_index()))
            .u64(u64::from(semaphore.is_some()))
            .bytes(&identity.device_uuid.0)
            .bytes(&identity.driver_uuid.0);
        let borrowed: Vec<_> = fds.iter().map(AsFd::as_fd).collect();
        send(&stream, &hello.message, &borrowed)?;
        Ok(RingProducer {
            interop: interop.clone(),
            stream,
            layout,
            pitches,
            slots: buffers,
            free: (0..slots).collect(),
            semaphore,
            stats: ProducerStats::default(),
        })
    }

    /// The frames' layout.
    pub fn layout(&self) -> &Layout {
        &self.layout
    }

    /// Where samples lie in a slot's buffer (rows pitched to 256 bytes).
    pub fn pitches(&self) -> Pitches {
        self.pitches
    }

    /// Whether frames are ordered by a shared semaphore (else `present` waits for the
    /// producer's own GPU work before sending).
    pub fn uses_semaphore(&self) -> bool {
        self.semaphore.is_some()
    }

    /// A free slot to write the next frame into, waiting for the display to give one back if
    /// none is free (counted in [`ProducerStats::waits`]). Fails with
    /// [`InteropError::ChannelClosed`] once the display has gone.
    pub fn acquire(&mut self) -> Result<Slot, InteropError> {
        self.take_releases(false)?;
        if self.free.is_empty() {
            self.stats.waits += 1;
            while self.free.is_empty() {
                self.take_releases(true)?;
            }
        }
        let index = self.free.pop_front().unwrap_or_default();
        Ok(Slot { index })
    }

    /// The buffer of `slot`: a storage, copy and vertex buffer on the producer's device.
    pub fn buffer(&self, slot: &Slot) -> &wgpu::Buffer {
        self.slots[slot.index].buffer()
    }

    /// Sends the frame in `slot` to the display. Call after submitting the GPU work that
    /// wrote it. Returns the frame's number (1, 2, ...).
    pub fn present(&mut self, slot: Slot) -> Result<u64, InteropError> {
        self.stats.frames += 1;
        let frame = self.stats.frames;
        let queue = self.interop.queue();
        match &self.semaphore {
            Some(semaphore) => {
                semaphore.signal_after_next_submit(frame);
                queue.submit([]);
            }
            None => {
                let index = queue.submit([]);
                self.interop
                    .device()
                    .poll(wgpu::PollType::Wait {
                        submission_index: Some(index),
                        timeout: None,
                    })
                    .map_err(|e| protocol(format!("waiting for the frame's GPU work: {e}")))?;
            }
        }
        let mut message = Writer::new(FRAME);
        message.u64(slot.index as u64).u64(frame).u64(frame);
        send(&self.stream, &message.message, &[])?;
        Ok(frame)
    }

    /// Frames made and waits so far.
    pub fn stats(&self) -> ProducerStats {
        self.stats
    }

    fn take_releases(&mut self, block: bool) -> Result<(), InteropError> {
        let mut block = block;
        loop {
            match receive(&self.stream, block)? {
                Received::Nothing => return Ok(()),
                Received::Closed => return Err(InteropError::ChannelClosed),
                Received::Message(message, _) => {
                    let (mut reader, kind) = Reader::new(&message)?;
                    if kind != RELEASE {
                        return Err(protocol(format!("the display sent message kind {kind}")));
                    }
                    let index = reader.u64() as usize;
                    if index >= self.slots.len() || self.free.contains(&index) {
                        return Err(protocol(format!(
                            "the display released slot {index}, which it does not hold"
                        )));
                    }
                    self.free.push_back(index);
                }
            }
            block = false;
        }
    }
}

/// How the display end saw the frames.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct DisplayStats {
    /// Frames received.
    pub received: u64,
    /// Frames shown (handed to the source by [`RingDisplay::next_frame`]).
    pub shown: u64,
    /// Frames superseded by a newer one before they were shown.
    pub dropped: u64,
}

#[derive(Default)]
struct Inbox {
    /// The newest frame not shown yet: slot, frame number, semaphore value.
    latest: Option<(usize, u64, u64)>,
    closed: bool,
    error: Option<String>,
    stats: DisplayStats,
}

struct DisplayShared {
    inbox: Mutex<Inbox>,
    arrived: Condvar,
    writer: Mutex<UnixStream>,
}

impl DisplayShared {
    fn release(&self, slot: usize) {
        let mut message = Writer::new(RELEASE);
        message.u64(slot as u64);
        // A producer that has gone no longer needs its slots back.
        if let Err(e) = send(&self.writer.lock(), &message.message, &[]) {
            log::debug!("releasing slot {slot}: {e}");
        }
    }
}

/// The display's end of a ring of frames: a [`VulkanSource`] that always shows the newest
/// whole frame the producer finished.
pub struct RingDisplay {
    interop: Interop,
    source: Arc<VulkanSource>,
    memories: Vec<VulkanMemory>,
    shared: Arc<DisplayShared>,
    showing: Option<usize>,
    receiver: Option<JoinHandle<()>>,
}

impl RingDisplay {
    /// Receives the producer's hello on `stream`, imports nothing yet (the renderer imports
    /// each slot on first use) and starts taking frames on a background thread.
    ///
    /// Fails if the producer's GPU is not this device (by device and driver UUID), or its
    /// hello is malformed.
    pub fn connect(interop: &Interop, stream: UnixStream) -> Result<Self, InteropError> {
        let (message, fds) = match receive(&stream, true)? {
            Received::Message(message, fds) => (message, fds),
            _ => return Err(InteropError::ChannelClosed),
        };
        let (mut r, kind) = Reader::new(&message)?;
        if kind != HELLO {
            return Err(protocol(format!(
                "expected a hello, got message kind {kind}"
            )));
        }
        let slots = r.u64() as usize;
        let ndim = r.u64() as usize;
        let dims = [r.u64() as usize, r.u64() as usize, r.u64() as usize];
        let element = *ELEMENTS
            .get(r.u64() as usize)
            .ok_or_else(|| protocol("unknown element type"))?;
        let channels = r.u64() as usize;
        let pitches = Pitches {
            row: r.u64() as usize,
            plane: r.u64() as usize,
        };
        let allocation_size = r.u64();
        let memory_type_index =
            u32::try_from(r.u64()).map_err(|_| protocol("memory type index out of range"))?;
        let has_semaphore = r.u64() != 0;
        let device_uuid: [u8; 16] = r.bytes();
        let driver_uuid: [u8; 16] = r.bytes();
        interop.check_uuid(device_uuid)?;
        if driver_uuid != interop.identity().driver_uuid.0 {
            return Err(protocol(format!(
                "the producer's Vulkan driver has UUID {}, this one {}: opaque fds only pass between identical drivers",
                crate::DeviceUuid(driver_uuid),
                interop.identity().driver_uuid
            )));
        }
        if !(2..=MAX_SLOTS).contains(&slots) || fds.len() != slots + usize::from(has_semaphore) {
            return Err(protocol(format!(
                "a hello for {slots} slots (semaphore: {has_semaphore}) came with {} descriptors",
                fds.len()
            )));
        }
        if !(1..=3).contains(&ndim) {
            return Err(protocol(format!("{ndim} axes")));
        }
        let shape = Shape::new(&dims[3 - ndim..]).map_err(|e| protocol(e.to_string()))?;
        let layout = Layout::new(shape, element, channels).map_err(|e| protocol(e.to_string()))?;
        let mut fds = fds.into_iter().map(Arc::new).collect::<Vec<_>>();
        let semaphore = has_semaphore.then(|| fds.pop()).flatten();
        let memories: Vec<VulkanMemory> = fds
            .into_iter()
            .map(|fd| VulkanMemory {
                fd,
                allocation_size,
                memory_type_index,
                offset: 0,
                row_pitch: pitches.row,
                plane_pitch: pitches.plane,
                device_uuid,
                semaphore: semaphore.clone().map(|fd| TimelineSemaphore {
                    fd,
                    wait_value: 0,
                    signal_value: None,
                }),
            })
            .collect();
        let source = Arc::new(VulkanSource::new(layout, memories[0].clone())?);
        let writer = stream.try_clone()?;
        let shared = Arc::new(DisplayShared {
            inbox: Mutex::new(Inbox::default()),
            arrived: Condvar::new(),
            writer: Mutex::new(writer),
        });
        let thread_shared = shared.clone();
        let receiver = std::thread::Builder::new()
            .name("sluice ring display".into())
            .spawn(move || take_frames(&stream, &thread_shared, slots))?;
        Ok(RingDisplay {
            interop: interop.clone(),
            source,
            memories,
            shared,
            showing: None,
            receiver: Some(receiver),
        })
    }

    /// The source showing the frames; put it in an `Image` (or any visual). Draw it once
    /// [`RingDisplay::next_frame`] or [`RingDisplay::wait_frame`] returned a first frame:
    /// before that it shows a slot the producer may be writing.
    pub fn source(&self) -> Arc<VulkanSource> {
        self.source.clone()
    }

    /// Shows the newest frame that arrived since the last call, if any, and returns its
    /// number. The slot shown before goes back to the producer once the GPU work submitted so
    /// far (which includes every copy from it) has finished.
    pub fn next_frame(&mut self) -> Result<Option<u64>, InteropError> {
        let latest = {
            let mut inbox = self.shared.inbox.lock();
            if let Some(error) = inbox.error.take() {
                return Err(protocol(error));
            }
            let latest = inbox.latest.take();
            if latest.is_some() {
                inbox.stats.shown += 1;
            }
            latest
        };
        let Some((slot, frame, value)) = latest else {
            return Ok(None);
        };
        let mut memory = self.memories[slot].clone();
        if let Some(semaphore) = &mut memory.semaphore {
            semaphore.wait_value = value;
        }
        self.source.set_memory(memory)?;
        if let Some(previous) = self.showing.replace(slot) {
            let shared = self.shared.clone();
            self.interop
                .queue()
                .on_submitted_work_done(move || shared.release(previous));
        }
        Ok(Some(frame))
    }

    /// Like [`RingDisplay::next_frame`], but waits up to `timeout` for a frame to arrive.
    /// Returns `None` if none came or the producer closed the channel.
    pub fn wait_frame(&mut self, timeout: Duration) -> Result<Option<u64>, InteropError> {
        let deadline = Instant::now() + timeout;
        {
            let mut inbox = self.shared.inbox.lock();
            while inbox.latest.is_none() && !inbox.closed {
                if self
                    .shared
                    .arrived
                    .wait_until(&mut inbox, deadline)
                    .timed_out()
                {
                    break;
                }
            }
        }
        self.next_frame()
    }

    /// Whether the producer closed the channel (frames already received can still be shown).
    pub fn producer_closed(&self) -> bool {
        self.shared.inbox.lock().closed
    }

    /// Frames received, shown and dropped so far.
    pub fn stats(&self) -> DisplayStats {
        self.shared.inbox.lock().stats
    }
}

impl Drop for RingDisplay {
    fn drop(&mut self) {
        // Wakes the receiver thread (its read returns end-of-file) and tells the producer.
        let _ = self.shared.writer.lock().shutdown(std::net::Shutdown::Both);
        if let Some(receiver) = self.receiver.take() {
            let _ = receiver.join();
        }
    }
}

/// The display's receiver thread: keeps the newest frame, gives superseded ones straight back.
fn take_frames(stream: &UnixStream, shared: &DisplayShared, slots: usize) {
    loop {
        let outcome = match receive(stream, true) {
            Ok(Received::Message(message, _)) => parse_frame(&message, slots),
            Ok(Received::Closed) | Ok(Received::Nothing) => Err(None),
            Err(e) => Err(Some(e.to_string())),
        };
        let mut inbox = shared.inbox.lock();
        match outcome {
            Ok(frame) => {
                inbox.stats.received += 1;
                if let Some((superseded, ..)) = inbox.latest.replace(frame) {
                    inbox.stats.dropped += 1;
                    shared.release(superseded);
                }
                shared.arrived.notify_all();
            }
            Err(error) => {
                inbox.closed = true;
                inbox.error = error;
                shared.arrived.notify_all();
                return;
            }
        }
    }
}

fn parse_frame(message: &Message, slots: usize) -> Result<(usize, u64, u64), Option<String>> {
    let (mut r, kind) = Reader::new(message).map_err(|e| Some(e.to_string()))?;
    if kind != FRAME {
        return Err(Some(format!("expected a frame, got message kind {kind}")));
    }
    let slot = r.u64() as usize;
    if slot >= slots {
        return Err(Some(format!("frame in slot {slot} of a ring of {slots}")));
    }
    Ok((slot, r.u64(), r.u64()))
}
