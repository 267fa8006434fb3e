//! Who may touch a writable shared buffer now: its writer (CUDA kernels, say) or the renderer
//! copying from it. Both sides order their GPU work on one timeline semaphore; this module
//! decides the values, on the CPU, so that they only grow and every write waits for the reads
//! recorded before it.
//!
//! A write waits for the highest value promised so far (the last read's signal, or the last
//! write's) and signals the next. A read is recorded only of the data last published and only
//! while no write is under way; it waits for that write's value and signals the next. A read
//! that finds a write under way, or newer data than it was asked to read, is skipped: the
//! renderer copies the newer version on a later frame instead (no torn frame, no deadlock).

use std::collections::HashMap;
use std::sync::{Arc, Weak};

use parking_lot::Mutex;

use crate::error::InteropError;

#[derive(Debug, Default)]
struct State {
    /// The highest value any wait or signal so far names.
    value: u64,
    /// The value the last finished write signals.
    published: Option<u64>,
    writing: bool,
}

/// The write/read handoff of one shared buffer and its semaphore.
#[derive(Debug, Default)]
pub(crate) struct Handoff {
    state: Mutex<State>,
}

// Writes are begun and ended by CUDA's writable sources only.
/// The semaphore values of one write: wait for `wait` (0: nothing to wait for), signal
/// `signal` when done.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[cfg_attr(not(feature = "cuda"), allow(dead_code))]
pub(crate) struct WriteValues {
    pub wait: u64,
    pub signal: u64,
}

#[cfg_attr(not(feature = "cuda"), allow(dead_code))]
impl Handoff {
    /// Starts a write; fails if one is under way.
    pub fn begin_write(&self) -> Result<WriteValues, InteropError> {
        let mut state = self.state.lock();
        if state.writing {
            return Err(InteropError::WriteHandoff(
                "begin_write called while a write is under way; call end_write first",
            ));
        }
        state.writing = true;
        Ok(WriteValues {
            wait: state.value,
            signal: state.value + 1,
        })
    }

    /// Ends the write begun last: its data is published with the value it signals.
    pub fn end_write(&self, values: WriteValues) -> Result<(), InteropError> {
        let mut state = self.state.lock();
        if !state.writing {
            return Err(InteropError::WriteHandoff(
                "end_write called without a write under way",
            ));
        }
        state.writing = false;
        state.value = values.signal;
        state.published = Some(values.signal);
        Ok(())
    }

    /// A write that will never signal (its commands could not be enqueued): the data keeps
    /// its previous version.
    pub fn abandon_write(&self) {
        self.state.lock().writing = false;
    }

    /// Records a read of the data published with `published`: returns the value the reader
    /// signals when done, or `None` if that data is being overwritten or was replaced.
    pub fn begin_read(&self, published: u64) -> Option<u64> {
        let mut state = self.state.lock();
        if state.writing || state.published != Some(published) {
            return None;
        }
        state.value += 1;
        Some(state.value)
    }
}

/// The handoffs of one interop device, found by the address of the shared semaphore fd their
/// buffer's residency carries. Writable sources register theirs; the renderer's upload looks
/// them up to record its reads.
#[derive(Default)]
pub(crate) struct Handoffs {
    by_key: Mutex<HashMap<usize, Weak<Handoff>>>,
}

impl Handoffs {
    #[cfg_attr(not(feature = "cuda"), allow(dead_code))]
    pub fn register(&self, key: usize, handoff: &Arc<Handoff>) {
        let mut map = self.by_key.lock();
        map.retain(|_, h| h.strong_count() > 0);
        map.insert(key, Arc::downgrade(handoff));
    }

    pub fn get(&self, key: usize) -> Option<Arc<Handoff>> {
        self.by_key.lock().get(&key).and_then(Weak::upgrade)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn values_grow_and_writes_wait_for_recorded_reads() {
        let h = Handoff::default();
        let w1 = h.begin_write().unwrap();
        assert_eq!(w1, WriteValues { wait: 0, signal: 1 });
        assert_eq!(h.begin_read(1), None, "not published yet");
        h.end_write(w1).unwrap();
        let r1 = h.begin_read(1).unwrap();
        assert_eq!(r1, 2);
        let w2 = h.begin_write().unwrap();
        assert_eq!(
            w2,
            WriteValues { wait: 2, signal: 3 },
            "the write waits for the read"
        );
        h.end_write(w2).unwrap();
        // No read of version 3: the next write waits for the last write only.
        let w3 = h.begin_write().unwrap();
        assert_eq!(w3, WriteValues { wait: 3, signal: 4 });
        h.end_write(w3).unwrap();
    }

    #[test]
    fn reads_of_data_being_rewritten_or_replaced_are_skipped() {
        let h = Handoff::default();
        let w = h.begin_write().unwrap();
        h.end_write(w).unwrap();
        let w = h.begin_write().unwrap();
        assert_eq!(h.begin_read(1), None, "a write is under way");
        h.end_write(w).unwrap();
        assert_eq!(h.begin_read(1), None, "newer data was published");
        assert_eq!(h.begin_read(2), Some(3));
        assert_eq!(
            h.begin_read(2),
            Some(4),
            "reads of the same data may repeat"
        );
    }

    #[test]
    fn unbalanced_handoffs_are_errors() {
        let h = Handoff::default();
        assert!(h.end_write(WriteValues { wait: 0, signal: 1 }).is_err());
        h.begin_write().unwrap();
        assert!(h.begin_write().is_err());
        h.abandon_write();
        assert!(h.begin_write().is_ok());
    }

    #[test]
    fn registry_forgets_dropped_handoffs() {
        let handoffs = Handoffs::default();
        let h = Arc::new(Handoff::default());
        handoffs.register(1, &h);
        assert!(handoffs.get(1).is_some());
        drop(h);
        assert!(handoffs.get(1).is_none());
    }
}
