//! Progress bars on the terminal (indicatif) for long work: decoding files, scanning data.
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

    /// Counts `bytes` more done.
    pub fn advance(&self, bytes: u64) {
        self.bar.inc(bytes);
    }
}

impl Drop for Progress {
    fn drop(&mut self) {
        self.bar.finish_and_clear();
    }
}
