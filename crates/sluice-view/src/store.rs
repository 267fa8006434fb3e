//! Zarr and OME-Zarr stores as inputs (sluice-zarr): a local directory, an `http(s)://` or an
//! `s3://` URL, opened lazily with a time point and channels chosen, what `sluice info` says
//! about them, and the sample of values their contrast controls start from.
//!
//! The source a store gives is a [`LazySource`](sluice_core::LazySource): its chunks load on
//! sluice's loader pool as the renderer reads them, never on the caller's thread. Only opening
//! (the metadata) and [`ZarrInput::sample_stats`] block.

use std::sync::Arc;

use sluice_core::{read_element, SharedSource};
use sluice_zarr::{AxisKind, Location, OpenOptions, Selection, ZarrSource};

use crate::error::ViewError;
use crate::layers::Stats;
use crate::progress::Progress;

/// Most samples read for a store's statistics (as for in-memory inputs).
const MAX_STAT_SAMPLES: usize = 1 << 18;

/// Most chunks read for a store's statistics: each may be a request to a remote store.
const MAX_STAT_CHUNKS: usize = 16;

/// A Zarr array or OME-Zarr multiscale group behind an input, with the time point and channels
/// it shows. Cloning is cheap (clones share the opened arrays).
#[derive(Clone, Debug)]
pub struct ZarrInput {
    zarr: ZarrSource,
}

impl ZarrInput {
    /// Opens `location` (a path or URL) showing time point `time` (0 without it) and
    /// `channels` (channel 0 alone without them: each channel is data of its own, shown
    /// through the colormap; three or four channels given together are shown as RGB or RGBA).
    /// Reads the metadata (blocking); no chunk yet.
    pub fn open(
        location: &str,
        time: Option<u64>,
        channels: Option<Vec<u64>>,
    ) -> Result<(ZarrInput, SharedSource), ViewError> {
        let options = OpenOptions {
            time: time.unwrap_or(0),
            channels: Some(channels.unwrap_or_else(|| vec![0])),
            ..OpenOptions::default()
        };
        let zarr = ZarrSource::open_with(location, &options).map_err(|e| match e {
            sluice_zarr::ZarrError::TimeOutOfRange { .. }
            | sluice_zarr::ZarrError::BadChannels { .. } => ViewError::Selection {
                input: location.to_string(),
                reason: e.to_string(),
            },
            other => ViewError::Zarr(other),
        })?;
        let input = ZarrInput { zarr };
        let source = input.lazy()?;
        Ok((input, source))
    }

    /// The same store showing time point `time` and `channels` (no metadata is read again),
    /// and its lazy source.
    pub fn select(
        &self,
        time: u64,
        channels: Vec<u64>,
    ) -> Result<(ZarrInput, SharedSource), ViewError> {
        let zarr = self
            .zarr
            .with_selection(Selection { time, channels })
            .map_err(|e| ViewError::Selection {
                input: self.zarr.location(),
                reason: e.to_string(),
            })?;
        let input = ZarrInput { zarr };
        let source = input.lazy()?;
        Ok((input, source))
    }

    fn lazy(&self) -> Result<SharedSource, ViewError> {
        Ok(Arc::new(self.zarr.lazy()?))
    }

    /// The opened store (levels, axes, chunk reads).
    pub fn zarr(&self) -> &ZarrSource {
        &self.zarr
    }

    /// The time point and channels shown.
    pub fn selection(&self) -> &Selection {
        self.zarr.selection()
    }

    /// Points on the time axis (1 where there is none).
    pub fn time_points(&self) -> u64 {
        self.axis_len(AxisKind::Time).unwrap_or(1)
    }

    /// Channels on the channel axis (1 where there is none).
    pub fn channel_count(&self) -> u64 {
        self.zarr.channel_count()
    }

    /// Whether the store has a time axis or a channel axis of more than one point: the window
    /// then shows t and channel controls.
    pub fn is_multidimensional(&self) -> bool {
        self.time_points() > 1 || self.channel_count() > 1
    }

    fn axis_len(&self, kind: AxisKind) -> Option<u64> {
        let at = self.zarr.axes().iter().position(|a| a.kind == kind)?;
        self.zarr.array_shape().get(at).copied()
    }

    /// Where the store is, in words: a local directory, an HTTP server, an S3 bucket.
    pub fn store_kind(&self) -> String {
        match Location::parse(&self.zarr.location()) {
            Ok(Location::Path(_)) => "local directory".into(),
            Ok(Location::Http(_)) => "HTTP".into(),
            Ok(Location::S3 { bucket, .. }) => format!("S3 (bucket {bucket})"),
            Err(_) => "unknown".into(),
        }
    }

    /// What `sluice info` prints after the input's name: the store, the axes, the selection,
    /// the element type, and each level's shape, chunks, chunk grid and bytes.
    pub fn describe(&self) -> String {
        let z = &self.zarr;
        let format = match z.ome_version() {
            Some(v) => format!("OME-Zarr {v} multiscale image"),
            None => "Zarr array".to_string(),
        };
        let axes: Vec<String> = z
            .axes()
            .iter()
            .zip(z.array_shape())
            .map(|(a, n)| format!("{} {n}", a.name))
            .collect();
        let selection = self.selection();
        let mut out = format!(
            "  format: {format} (lazy: chunks load as they are drawn)\n  store: {}\n  axes: {}\n",
            self.store_kind(),
            axes.join(", "),
        );
        if self.axis_len(AxisKind::Time).is_some() {
            out.push_str(&format!(
                "  time point: {} of {} (--t)\n",
                selection.time,
                self.time_points()
            ));
        }
        if self.axis_len(AxisKind::Channel).is_some() {
            out.push_str(&format!(
                "  channels: {:?} of {} (--channel)\n",
                selection.channels,
                self.channel_count()
            ));
        }
        out.push_str(&format!(
            "  element: {:?} x {} channel(s)\n",
            z.element(),
            z.channels()
        ));
        for (i, level) in z.levels().enumerate() {
            let chunks = level.chunks;
            let ndim = level.shape.ndim();
            let grid = chunks.grid_size(&level.shape);
            let count: usize = grid[3 - ndim..].iter().product();
            let bytes = level.shape.len().saturating_mul(z.sample_bytes());
            out.push_str(&format!(
                "  level {i} ({}): shape {:?}, chunks {:?} in a grid of {:?} ({count} chunk(s){}), {bytes} bytes\n",
                level.path,
                level.shape.dims(),
                &chunks.chunk_size()[3 - ndim..],
                &grid[3 - ndim..],
                if level.sharded { ", sharded" } else { "" },
            ));
        }
        out
    }

    /// Values for the contrast controls, read from the coarsest level (blocking, on the
    /// caller's thread, with a progress bar): evenly spaced chunks of it, all where few, at
    /// most 16 chunks and about 262,144 values. Chunks never
    /// written count as the fill value, which is what they show.
    pub fn sample_stats(&self) -> Result<Stats, ViewError> {
        let z = &self.zarr;
        let level = z.levels().len() - 1;
        let info = z.level(level)?.clone();
        let grid = info.chunks.grid_size(&info.shape);
        let total = grid[0].saturating_mul(grid[1]).saturating_mul(grid[2]);
        let chunk_samples = info.chunks.chunk_size().iter().product::<usize>().max(1);
        let wanted = (MAX_STAT_SAMPLES / chunk_samples).clamp(1, MAX_STAT_CHUNKS.min(total.max(1)));
        let element = z.element();
        let elem_bytes = element.size();
        let progress = Progress::bytes(
            format!(
                "reading {} of {total} chunks of level {level} of {}",
                wanted,
                z.location()
            ),
            (wanted
                .saturating_mul(chunk_samples)
                .saturating_mul(z.sample_bytes())) as u64,
        );
        let mut values = Vec::new();
        let mut buf = Vec::new();
        for i in 0..wanted.min(total) {
            let flat = i * total / wanted;
            let index = [
                flat / (grid[1] * grid[2]),
                (flat / grid[2]) % grid[1],
                flat % grid[2],
            ];
            let region = z.chunk_region(level, index)?;
            buf.resize(region.len().saturating_mul(z.sample_bytes()), 0);
            // A chunk never written reads as the fill value, which is what it shows.
            let _filled_or_empty = z.read_chunk(level, index, &mut buf)?;
            progress.advance(buf.len() as u64);
            values.extend(
                buf.chunks_exact(elem_bytes)
                    .map(|b| read_element(element, b))
                    .filter(|v| v.is_finite()),
            );
        }
        Ok(Stats::from_values(values))
    }
}
