//! Progress bars on the terminal (indicatif) for long work: decoding files, reading a store's
//! statistics, loading the chunks a headless render waits for.
//!
//! A bar draws on stderr only when stderr is a terminal, and clears itself when dropped, so an
//! error printed after it is never hidden behind it.

use indicatif::{ProgressBar, ProgressStyle};

/// A bar counting bytes with their rate; cleared when dropped.
pub struct Progress {
    bar: ProgressBar,
}

impl Progress {
    /// A bar for `total` bytes of work described by `message`.
    pub fn bytes(message: impl Into<String>, total: u64) -> Self {
        let bar = ProgressBar::new(total);
        if let Ok(style) = ProgressStyle::with_template(
            "{msg} [{bar:30}] {bytes}/{total_bytes} {binary_bytes_per_sec} {eta}",
        ) {
            bar.set_style(style.progress_chars("=> "));
        }
        bar.set_message(message.into());
        Progress { bar }
    }

    /// A bar counting chunks of lazy sources (resident of those a view needs), with their
    /// rate.
    pub fn chunks(message: impl Into<String>) -> Self {
        let bar = ProgressBar::new(0);
        if let Ok(style) =
            ProgressStyle::with_template("{msg} [{bar:30}] {pos}/{len} chunks {per_sec} {elapsed}")
        {
            bar.set_style(style.progress_chars("=> "));
        }
        bar.set_message(message.into());
        Progress { bar }
    }

    /// Counts `bytes` more done.
    pub fn advance(&self, bytes: u64) {
        self.bar.inc(bytes);
    }

    /// Sets the work done and the whole (which may grow: a view's chunks are known as it
    /// refines).
    pub fn set(&self, done: u64, total: u64) {
        self.bar.set_length(total.max(done));
        self.bar.set_position(done);
    }
}

impl Drop for Progress {
    fn drop(&mut self) {
        self.bar.finish_and_clear();
    }
}
