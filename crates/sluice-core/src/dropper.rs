//! Freeing large host buffers off the caller's thread.
//!
//! Returning 64 MiB of touched pages to the system takes about 5 ms on a 2-core VM (the
//! kernel unmaps 16384 pages), as long as copying them. `ArraySource::replace` and the
//! release of a host copy after upload would pay that on the thread that replaces data or
//! renders; [`drop_later`] hands the buffer to one process-wide thread instead.

use std::sync::mpsc::{sync_channel, SyncSender, TrySendError};
use std::sync::OnceLock;

/// Values waiting to be dropped, at most: past this a caller drops its own (back-pressure, so
/// a producer replacing faster than the thread frees cannot pile up memory).
const QUEUE: usize = 4;

/// Below this many bytes dropping in place is cheaper than a hand-off.
pub(crate) const DEFER_BYTES: usize = 1 << 20;

type Boxed = Box<dyn Send>;

fn sender() -> Option<&'static SyncSender<Boxed>> {
    static SENDER: OnceLock<Option<SyncSender<Boxed>>> = OnceLock::new();
    SENDER
        .get_or_init(|| {
            let (tx, rx) = sync_channel::<Boxed>(QUEUE);
            std::thread::Builder::new()
                .name("sluice-drop".into())
                .spawn(move || {
                    for value in rx {
                        drop(value);
                    }
                })
                .ok()
                .map(|_| tx)
        })
        .as_ref()
}

/// Drops `value` on the dropping thread, or here when its queue is full or the thread could
/// not be started.
pub(crate) fn drop_later<T: Send + 'static>(value: T) {
    let Some(tx) = sender() else {
        return drop(value);
    };
    match tx.try_send(Box::new(value)) {
        Ok(()) => {}
        Err(TrySendError::Full(value) | TrySendError::Disconnected(value)) => drop(value),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicUsize, Ordering};
    use std::sync::Arc;
    use std::time::{Duration, Instant};

    struct Counted(Arc<AtomicUsize>);

    impl Drop for Counted {
        fn drop(&mut self) {
            self.0.fetch_add(1, Ordering::SeqCst);
        }
    }

    /// Every value handed over is dropped, queued or (queue full) in place.
    #[test]
    fn every_value_is_dropped() {
        let dropped = Arc::new(AtomicUsize::new(0));
        for _ in 0..64 {
            drop_later(Counted(dropped.clone()));
        }
        let deadline = Instant::now() + Duration::from_secs(10);
        while dropped.load(Ordering::SeqCst) < 64 && Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(1));
        }
        assert_eq!(dropped.load(Ordering::SeqCst), 64);
    }
}
