//! Errors of Zarr sources: each names the URL or key, and the numbers that went wrong.

use std::time::Duration;

/// Everything that can go wrong opening or reading a Zarr array or OME-Zarr group.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ZarrError {
    /// A location that is neither a path nor an `http(s)://` or `s3://` URL sluice can open.
    #[error("{url}: {reason}")]
    BadUrl {
        /// The location as given.
        url: String,
        /// What is wrong with it.
        reason: String,
    },
    /// Nothing at the location is a Zarr array or an OME-Zarr multiscale group.
    #[error("{url}: no Zarr array (zarr.json or .zarray) and no OME-Zarr multiscale group (multiscales in the group attributes) found there")]
    NotFound {
        /// The store URL or path that was opened.
        url: String,
    },
    /// Array or group metadata that zarrs or the OME-Zarr parser rejected.
    #[error("{url}: invalid metadata: {reason}")]
    Metadata {
        /// The array or group.
        url: String,
        /// What the parser said.
        reason: String,
    },
    /// A remote read that failed: an HTTP status, a refused connection, an S3 error.
    #[error("{url}: remote read failed{}: {reason}", status.map(|s| format!(" with HTTP status {s}")).unwrap_or_default())]
    Remote {
        /// The URL or store key read.
        url: String,
        /// The HTTP status, where the server sent one.
        status: Option<u16>,
        /// What the store said.
        reason: String,
    },
    /// A server that answered a ranged GET with the whole object.
    #[error("{url}: the server ignores HTTP Range requests (answered 200 with the whole body instead of 206); sharded Zarr arrays need a server with Range support")]
    RangeIgnored {
        /// The URL read.
        url: String,
    },
    /// A read that took too long.
    #[error("{url}: timed out after {after:?}")]
    Timeout {
        /// The URL or key read.
        url: String,
        /// How long it waited.
        after: Duration,
    },
    /// A local file that could not be read.
    #[error("{url}: {reason}")]
    Io {
        /// The file or key.
        url: String,
        /// What the file system said.
        reason: String,
    },
    /// A chunk whose bytes did not decode (corrupt data, a wrong codec configuration).
    #[error("{url}: chunk {chunk:?} did not decode: {reason}")]
    Decode {
        /// The chunk's key.
        url: String,
        /// Its Zarr chunk indices.
        chunk: Vec<u64>,
        /// What the codec said.
        reason: String,
    },
    /// An element type sluice cannot show.
    #[error("{url}: data type {dtype} is not supported; supported: uint8, int8, uint16, int16, uint32, int32, float16, float32, float64")]
    UnsupportedDtype {
        /// The array.
        url: String,
        /// The Zarr data type.
        dtype: String,
    },
    /// Axes sluice cannot map to at most three spatial axes plus a time and a channel axis.
    #[error("{url}: axes {axes:?} of shape {shape:?}: {reason}")]
    UnsupportedAxes {
        /// The array or group.
        url: String,
        /// The axis names (or `dim_N` where unnamed).
        axes: Vec<String>,
        /// The array's shape.
        shape: Vec<u64>,
        /// Why they cannot be shown.
        reason: String,
    },
    /// A chunk grid other than a regular one, or chunk shapes that differ between channels.
    #[error("{url}: {reason}")]
    UnsupportedChunks {
        /// The array.
        url: String,
        /// What is irregular.
        reason: String,
    },
    /// A time point outside the time axis.
    #[error("time point {t} selected; the time axis has {len} point(s)")]
    TimeOutOfRange {
        /// The selected time point.
        t: u64,
        /// Length of the time axis.
        len: u64,
    },
    /// A channel selection sluice cannot show: out of range, empty or more than four.
    #[error("channels {channels:?} selected: {reason} (the channel axis has {len} channel(s))")]
    BadChannels {
        /// The selection.
        channels: Vec<u64>,
        /// Length of the channel axis (1 where there is none).
        len: u64,
        /// What is wrong with it.
        reason: String,
    },
    /// Levels of an OME-Zarr group that do not form a pyramid.
    #[error("{url}: level {level} ({path}, shape {shape:?}) is finer than level {prev} (shape {prev_shape:?}); levels must get no finer")]
    LevelOrder {
        /// The group.
        url: String,
        /// The offending level.
        level: usize,
        /// Its dataset path.
        path: String,
        /// Its spatial shape.
        shape: Vec<u64>,
        /// The level before it.
        prev: usize,
        /// That level's spatial shape.
        prev_shape: Vec<u64>,
    },
    /// A level index the source does not have.
    #[error("level {level} requested; the source has {levels} level(s)")]
    NoSuchLevel {
        /// The requested level.
        level: usize,
        /// How many there are.
        levels: usize,
    },
    /// A chunk index outside a level's chunk grid.
    #[error("chunk {index:?} of level {level} requested; that level's chunk grid is {grid:?}")]
    ChunkOutOfRange {
        /// The level.
        level: usize,
        /// The requested chunk index (numpy order, padded to three axes).
        index: [usize; 3],
        /// Chunks per axis.
        grid: [usize; 3],
    },
    /// A caller's buffer of the wrong size.
    #[error("buffer of {got} bytes given where {what} needs exactly {expected}")]
    BufferSize {
        /// What was read.
        what: String,
        /// Bytes it needs.
        expected: usize,
        /// Bytes given.
        got: usize,
    },
    /// A size from a file that overflows this machine's address space.
    #[error("{url}: {what} overflows usize")]
    TooLarge {
        /// The array.
        url: String,
        /// The quantity (for example "chunk of shape [..] x 8 bytes").
        what: String,
    },
    /// An error of sluice-core (shapes, layouts).
    #[error(transparent)]
    Source(#[from] sluice_core::SourceError),
}

impl ZarrError {
    /// Turns a store or codec error message into the typed error it describes: a server that
    /// ignored Range, an HTTP status, a timeout, or a plain remote failure.
    pub(crate) fn from_store_message(url: String, message: String) -> ZarrError {
        let lower = message.to_ascii_lowercase();
        // object_store's two wordings: a ranged GET answered 200 by the HTTP store, and by the
        // generic client.
        if lower.contains("non-partial response") || lower.contains("range request not supported") {
            return ZarrError::RangeIgnored { url };
        }
        if let Some(status) = status_in(&message) {
            return ZarrError::Remote {
                url,
                status: Some(status),
                reason: message,
            };
        }
        if lower.contains("timed out") || lower.contains("timeout") {
            return ZarrError::Timeout {
                url,
                after: Duration::ZERO,
            };
        }
        ZarrError::Remote {
            url,
            status: None,
            reason: message,
        }
    }
}

/// The HTTP status object_store writes into its messages ("status code: 503 Service ...").
fn status_in(message: &str) -> Option<u16> {
    let at = message.find("status code: ")? + "status code: ".len();
    let digits: String = message[at..]
        .chars()
        .take_while(char::is_ascii_digit)
        .collect();
    digits.parse().ok()
}

impl From<ZarrError> for sluice_core::SourceError {
    /// Remote failures, timeouts and decode errors become sluice-core's variants of them (so
    /// the loader pool retries what is transient); a server that ignored Range is a remote
    /// error with its status 200, which is final.
    fn from(e: ZarrError) -> Self {
        use sluice_core::SourceError as S;
        match e {
            ZarrError::Source(s) => s,
            ZarrError::Remote {
                url,
                status,
                reason,
            } => S::Remote {
                url_or_key: url,
                status,
                reason,
            },
            e @ ZarrError::RangeIgnored { .. } => {
                let reason = e.to_string();
                let ZarrError::RangeIgnored { url } = e else {
                    unreachable!("matched above")
                };
                S::Remote {
                    url_or_key: url,
                    status: Some(200),
                    reason,
                }
            }
            ZarrError::Timeout { url, after } => S::Timeout {
                url_or_key: url,
                after,
            },
            e @ ZarrError::Decode { .. } => {
                let reason = e.to_string();
                let ZarrError::Decode { url, .. } = e else {
                    unreachable!("matched above")
                };
                S::Decode {
                    url_or_key: url,
                    reason,
                }
            }
            other => S::custom(other),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn store_messages_become_typed_errors() {
        let url = "http://127.0.0.1:1/a/0.0".to_string();
        let e = ZarrError::from_store_message(url.clone(), "Generic HTTP error: Error performing GET http://127.0.0.1:1/a/0.0 in 2ms - Server returned non-2xx status code: 503 Service Unavailable: ".into());
        assert!(
            matches!(
                e,
                ZarrError::Remote {
                    status: Some(503),
                    ..
                }
            ),
            "{e}"
        );
        assert!(
            e.to_string().contains("503") && e.to_string().contains(&url),
            "{e}"
        );
        let e = ZarrError::from_store_message(
            url.clone(),
            "Received non-partial response when range requested".into(),
        );
        assert!(e.to_string().contains("ignores HTTP Range"), "{e}");
        let e = ZarrError::from_store_message(
            url.clone(),
            "Operation not supported: Range request not supported by zarr.json".into(),
        );
        assert!(matches!(e, ZarrError::RangeIgnored { .. }), "{e}");
    }
}
