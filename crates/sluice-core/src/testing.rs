//! A conformance check of the [`DataSource`] contract, for sluice's sources and yours.
//!
//! [`check_source`] runs a source through every rule a consumer relies on that can be checked
//! from outside: the layout is consistent, `read` and `lend` (and `lend_many`) give the same
//! bytes, a part read alone equals the same part of a larger read, versions never go back,
//! empty regions follow the empty-region rule (see [`crate::check_read`]), and bad requests
//! (a level that does not exist, a region outside the level or whose end overflows, a
//! destination of the wrong length) return errors whose messages can be formatted, without a
//! panic and without calling `visit`. [`check_writes`] adds the rules of a writable source:
//! each write moves the version, `changes_since` covers it, and the bytes read back are the
//! bytes written while the rest stays as it was.
//!
//! ```
//! use sluice_core::{ndarray::Array2, testing, ArraySource};
//!
//! let source = ArraySource::new(Array2::<u16>::zeros((5, 7)))?;
//! let report = testing::check_source(&source)?;
//! assert!(report.checks > 0);
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```
//!
//! Checks that need a whole level in memory are skipped for levels larger than
//! [`FULL_READ_LIMIT`] bytes; checks of data are skipped for sources that are not in host
//! memory or answer [`ReadStatus::Pending`] (both are reported in [`Report::skipped`]).

use std::fmt;
use std::panic::{catch_unwind, AssertUnwindSafe};

use crate::changes::{Changes, Version};
use crate::error::SourceError;
use crate::layout::Layout;
use crate::region::{Region, Shape};
use crate::residency::Residency;
use crate::source::{noop_waker, DataSource, LendOutcome, ReadRequest, ReadStatus};

/// Levels larger than this many bytes are not read whole by the checks.
pub const FULL_READ_LIMIT: usize = 64 << 20;

/// What a passed check ran.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Report {
    /// Individual checks that held.
    pub checks: usize,
    /// Checks that could not run, and why.
    pub skipped: Vec<String>,
}

/// The rules a source broke, one sentence each.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Failures {
    /// The source's label.
    pub source: String,
    /// What went wrong.
    pub failures: Vec<String>,
}

impl fmt::Display for Failures {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        writeln!(
            f,
            "{} breaks the DataSource contract in {} way(s):",
            self.source,
            self.failures.len()
        )?;
        for failure in &self.failures {
            writeln!(f, "- {failure}")?;
        }
        Ok(())
    }
}

impl std::error::Error for Failures {}

/// Accumulates checks and failures.
struct Checker<'a> {
    source: &'a dyn DataSource,
    report: Report,
    failures: Vec<String>,
}

impl<'a> Checker<'a> {
    fn new(source: &'a dyn DataSource) -> Self {
        Checker {
            source,
            report: Report::default(),
            failures: Vec::new(),
        }
    }

    fn check(&mut self, ok: bool, failure: impl FnOnce() -> String) {
        if ok {
            self.report.checks += 1;
        } else {
            self.failures.push(failure());
        }
    }

    fn finish(self) -> Result<Report, Failures> {
        if self.failures.is_empty() {
            Ok(self.report)
        } else {
            Err(Failures {
                source: catch_unwind(AssertUnwindSafe(|| self.source.label()))
                    .unwrap_or_else(|_| "a source whose label() panics".into()),
                failures: self.failures,
            })
        }
    }

    /// Runs `f`, turning a panic into a failure named `what`.
    fn guard<T>(&mut self, what: &str, f: impl FnOnce() -> T) -> Option<T> {
        match catch_unwind(AssertUnwindSafe(f)) {
            Ok(value) => Some(value),
            Err(panic) => {
                let message = panic
                    .downcast_ref::<String>()
                    .cloned()
                    .or_else(|| panic.downcast_ref::<&str>().map(|s| s.to_string()))
                    .unwrap_or_default();
                self.failures.push(format!("{what} panicked: {message}"));
                None
            }
        }
    }

    /// `read` of `region` of `level` into an exactly sized buffer: `Some(bytes)` when ready.
    fn read(&mut self, level: usize, region: Region, bytes: usize) -> Option<Vec<u8>> {
        let source = self.source;
        let mut dst = vec![0u8; bytes];
        let request = ReadRequest {
            level,
            region,
            waker: noop_waker(),
        };
        let what = format!("read of {region} at level {level}");
        match self.guard(&what, || source.read(&request, &mut dst))? {
            Ok(ReadStatus::Ready) => {
                self.report.checks += 1;
                Some(dst)
            }
            Ok(ReadStatus::Pending) => {
                self.report.skipped.push(format!(
                    "{what} answered pending: its data was not compared"
                ));
                None
            }
            Err(e) => {
                self.failures
                    .push(format!("{what} failed on a valid request: {e}"));
                None
            }
        }
    }

    /// `lend` of `region`, packed: `Some(bytes)` when lent.
    fn lend(&mut self, level: usize, region: Region, layout: &Layout) -> Option<Vec<u8>> {
        let source = self.source;
        let expected = layout.region_bytes(&region);
        let request = ReadRequest {
            level,
            region,
            waker: noop_waker(),
        };
        let mut packed = None;
        let mut calls = 0;
        let mut view_ok = true;
        let what = format!("lend of {region} at level {level}");
        let outcome = self.guard(&what, || {
            source.lend(&request, &mut |view| {
                calls += 1;
                view_ok &= view.region == region && view.sample_bytes == layout.sample_bytes();
                let mut dst = vec![0u8; expected];
                view.copy_packed(&mut dst);
                packed = Some(dst);
            })
        })?;
        match outcome {
            Ok(LendOutcome::Lent) => {
                self.check(calls == 1, || {
                    format!("{what} answered Lent but called visit {calls} times, not once")
                });
                self.check(view_ok, || {
                    format!("{what} lent a view of another region or sample size")
                });
                packed
            }
            Ok(LendOutcome::NotLendable) => {
                self.check(calls == 0, || {
                    format!("{what} answered NotLendable but called visit {calls} times")
                });
                None
            }
            Err(e) => {
                self.failures
                    .push(format!("{what} failed on a valid request: {e}"));
                None
            }
        }
    }

    /// A request that must fail: `read` returns an error (that formats) and, when the request
    /// itself is bad (`bad_request`, not just the destination), `lend` does not lend.
    fn refuses(
        &mut self,
        what: &str,
        level: usize,
        region: Region,
        dst_len: usize,
        bad_request: bool,
    ) {
        let source = self.source;
        let request = ReadRequest {
            level,
            region,
            waker: noop_waker(),
        };
        let mut dst = vec![0u8; dst_len];
        let read = self.guard(&format!("read of {what}"), || {
            source.read(&request, &mut dst).map_err(|e| e.to_string())
        });
        if let Some(read) = read {
            self.check(read.is_err(), || {
                format!("read of {what} ({region} at level {level}, {dst_len}-byte destination) returned Ok instead of an error")
            });
            if let Err(message) = read {
                self.check(!message.is_empty(), || {
                    format!("read of {what}: empty error message")
                });
            }
        }
        if !bad_request {
            // Lending has no destination: only the request's own faults apply.
            return;
        }
        let mut called = false;
        let lent = self.guard(&format!("lend of {what}"), || {
            source
                .lend(&request, &mut |_| called = true)
                .map_err(|e| e.to_string())
        });
        if let Some(lent) = lent {
            self.check(!matches!(lent, Ok(LendOutcome::Lent)) && !called, || {
                format!("lend of {what} ({region} at level {level}) lent instead of failing")
            });
        }
    }
}

/// Samples of a shape to use as test regions: the whole, the first and last sample, a box in
/// the middle, the last row, and two empty regions (at the origin and at the end).
fn test_regions(shape: &Shape) -> Vec<Region> {
    let d = shape.padded();
    let regions = vec![
        shape.full_region(),
        Region {
            origin: [0; 3],
            size: [1; 3],
        },
        Region {
            origin: [d[0] - 1, d[1] - 1, d[2] - 1],
            size: [1; 3],
        },
        Region {
            origin: [d[0] / 3, d[1] / 3, d[2] / 3],
            size: [0, 1, 2].map(|a| d[a].div_ceil(2).min(d[a] - d[a] / 3)),
        },
        Region {
            origin: [d[0] - 1, d[1] - 1, 0],
            size: [1, 1, d[2]],
        },
        Region {
            origin: [0; 3],
            size: [1, 1, 0],
        },
        Region {
            origin: d,
            size: [0; 3],
        },
    ];
    regions
}

/// The packed bytes of `region` cut out of the packed bytes `all` of the whole `shape`.
fn cut(all: &[u8], shape: &Shape, region: &Region, sample_bytes: usize) -> Vec<u8> {
    let d = shape.padded();
    let row = region.size[2] * sample_bytes;
    let mut out = Vec::with_capacity(region.len() * sample_bytes);
    for p in 0..region.size[0] {
        for r in 0..region.size[1] {
            let start = (((region.origin[0] + p) * d[1] + region.origin[1] + r) * d[2]
                + region.origin[2])
                * sample_bytes;
            out.extend_from_slice(&all[start..start + row]);
        }
    }
    out
}

/// Runs `source` against the whole read-side contract; see the module documentation.
pub fn check_source(source: &dyn DataSource) -> Result<Report, Failures> {
    let mut c = Checker::new(source);
    let Some(layout) = c.guard("layout()", || source.layout()) else {
        return c.finish();
    };
    let levels = layout.levels().to_vec();
    c.check(!levels.is_empty(), || "layout has no level".into());
    c.check(
        levels.first().is_some_and(|l| l.shape == layout.shape()),
        || "level 0's shape is not the layout's shape".into(),
    );
    c.check(
        layout.sample_bytes() == layout.element().size() * layout.channels(),
        || "sample_bytes is not element size times channels".into(),
    );
    c.check(
        layout.total_bytes() == layout.region_bytes(&layout.shape().full_region()),
        || "total_bytes disagrees with region_bytes of the whole shape".into(),
    );
    // Versions: never backwards; everything changed since NEVER.
    if let Some((v1, v2, since_never)) = c.guard("version()", || {
        let v1 = source.version();
        let v2 = source.version();
        (v1, v2, source.changes_since(Version::NEVER))
    }) {
        c.check(v2 >= v1, || {
            format!("version went back from {v1:?} to {v2:?}")
        });
        c.check(v1 > Version::NEVER, || {
            format!("version {v1:?} is not newer than Version::NEVER")
        });
        c.check(since_never != Changes::None, || {
            "changes_since(Version::NEVER) is None: a consumer that holds nothing would upload nothing".into()
        });
    }
    let host = matches!(
        c.guard("residency()", || source.residency()),
        Some(Residency::Host)
    );
    if !host {
        c.report
            .skipped
            .push("data checks: the source is not in host memory".into());
    }

    for (index, level) in levels.iter().enumerate() {
        let shape = level.shape;
        let d = shape.padded();
        let sample_bytes = layout.sample_bytes();
        let Some(level_bytes) = shape.len().checked_mul(sample_bytes) else {
            c.failures.push(format!(
                "level {index} of shape {shape} has more bytes than usize counts"
            ));
            continue;
        };
        if host {
            let full = if level_bytes <= FULL_READ_LIMIT {
                c.read(index, shape.full_region(), level_bytes)
            } else {
                c.report.skipped.push(format!(
                    "level {index}: {level_bytes} bytes, not read whole (limit {FULL_READ_LIMIT})"
                ));
                None
            };
            let regions = test_regions(&shape);
            let mut lend_many_expect = Vec::new();
            for region in &regions {
                let bytes = layout.region_bytes(region);
                let read = if *region == shape.full_region() {
                    full.clone()
                } else {
                    c.read(index, *region, bytes)
                };
                if let (Some(all), Some(read)) = (&full, &read) {
                    let expected = cut(all, &shape, region, sample_bytes);
                    c.check(&expected == read, || {
                        format!("level {index}: read of {region} differs from the same part of a read of the whole level")
                    });
                }
                if let Some(lent) = c.lend(index, *region, &layout) {
                    if let Some(read) = &read {
                        c.check(&lent == read, || {
                            format!("level {index}: lend of {region} differs from read of it")
                        });
                    }
                    lend_many_expect.push((*region, lent));
                }
            }
            // lend_many: the same bytes as lend, each request once, in order.
            if !lend_many_expect.is_empty() {
                let requests: Vec<ReadRequest<'_>> = lend_many_expect
                    .iter()
                    .map(|(region, _)| ReadRequest {
                        level: index,
                        region: *region,
                        waker: noop_waker(),
                    })
                    .collect();
                let mut got: Vec<(usize, Vec<u8>)> = Vec::new();
                let outcome = c.guard("lend_many", || {
                    source.lend_many(&requests, &mut |i, view| {
                        let mut dst = vec![0u8; layout.region_bytes(&view.region)];
                        view.copy_packed(&mut dst);
                        got.push((i, dst));
                    })
                });
                if let Some(Ok(LendOutcome::Lent)) = outcome {
                    let expected: Vec<(usize, Vec<u8>)> = lend_many_expect
                        .iter()
                        .enumerate()
                        .map(|(i, (_, bytes))| (i, bytes.clone()))
                        .collect();
                    c.check(got == expected, || {
                        format!("level {index}: lend_many did not visit each request once, in order, with the bytes lend gives")
                    });
                } else if let Some(Err(e)) = outcome {
                    c.failures.push(format!(
                        "level {index}: lend_many failed on valid requests: {e}"
                    ));
                }
            }
        }
        // Bad requests.
        let one = Region {
            origin: [0; 3],
            size: [1; 3],
        };
        c.refuses(
            "a region one past the end of the fastest axis",
            index,
            Region {
                origin: [0, 0, d[2]],
                size: [1; 3],
            },
            sample_bytes,
            true,
        );
        c.refuses(
            "a region past the end of the slowest axis",
            index,
            Region {
                origin: [d[0], 0, 0],
                size: [1; 3],
            },
            sample_bytes,
            true,
        );
        c.refuses(
            "a region whose end overflows usize",
            index,
            Region {
                origin: [usize::MAX - 1, usize::MAX, usize::MAX - 2],
                size: [2, 1, 3],
            },
            0,
            true,
        );
        c.refuses(
            "a region larger than the level",
            index,
            Region {
                origin: [0; 3],
                size: [d[0], d[1], d[2] + 1],
            },
            0,
            true,
        );
        c.refuses(
            "a destination one byte short",
            index,
            one,
            sample_bytes - 1,
            false,
        );
        c.refuses(
            "a destination one byte long",
            index,
            one,
            sample_bytes + 1,
            false,
        );
        c.refuses(
            "an empty region with a 1-byte destination",
            index,
            Region {
                origin: [0; 3],
                size: [1, 0, 1],
            },
            1,
            false,
        );
        if index + 1 == levels.len() {
            c.refuses(
                "a level that does not exist",
                index + 1,
                one,
                sample_bytes,
                true,
            );
            c.refuses("level usize::MAX", usize::MAX, one, sample_bytes, true);
        }
    }
    c.finish()
}

/// Writes a region's worth of bytes (tightly packed, like a read) into a source, returning
/// the version the write produced. For [`check_writes`].
pub type WriteFn<'a> = dyn FnMut(Region, &[u8]) -> Result<Version, SourceError> + 'a;

/// Runs a writable `source` through the write-side contract: for several regions of level 0,
/// `write(region, bytes)` (which writes through the source's own API) must move the version
/// forward, `changes_since` the version before must cover every written sample, and a read
/// must give back exactly the bytes written, with the rest of the level unchanged.
/// Then [`check_source`] runs on the written source.
pub fn check_writes(source: &dyn DataSource, write: &mut WriteFn<'_>) -> Result<Report, Failures> {
    let mut c = Checker::new(source);
    let Some(layout) = c.guard("layout()", || source.layout()) else {
        return c.finish();
    };
    let shape = layout.shape();
    let sample_bytes = layout.sample_bytes();
    let whole = layout.total_bytes() <= FULL_READ_LIMIT;
    let mut seed = 0x9e37_79b9_7f4a_7c15u64;
    let regions: Vec<Region> = test_regions(&shape)
        .into_iter()
        .filter(|r| !r.is_empty())
        .collect();
    for region in regions {
        let before_all = if whole {
            c.read(0, shape.full_region(), layout.total_bytes())
        } else {
            None
        };
        let bytes: Vec<u8> = (0..layout.region_bytes(&region))
            .map(|_| {
                // xorshift64*: a pattern unlikely to equal what was there. Floats get bit
                // patterns that may be NaN; reads copy bits, so that is fine.
                seed ^= seed >> 12;
                seed ^= seed << 25;
                seed ^= seed >> 27;
                (seed.wrapping_mul(0x2545_f491_4f6c_dd1d) >> 56) as u8
            })
            .collect();
        let before = source.version();
        let written = match c.guard(&format!("write of {region}"), || write(region, &bytes)) {
            Some(Ok(v)) => v,
            Some(Err(e)) => {
                c.failures.push(format!("write of {region} failed: {e}"));
                continue;
            }
            None => continue,
        };
        let after = source.version();
        c.check(written > before && after >= written, || {
            format!("write of {region}: versions before {before:?}, of the write {written:?}, after {after:?} do not move forward")
        });
        match source.changes_since(before) {
            Changes::All => c.report.checks += 1,
            Changes::None => c
                .failures
                .push(format!("write of {region}: changes_since(before) is None")),
            Changes::Regions(changed) => {
                let covered = covers(&changed, &region);
                c.check(covered, || {
                    format!("write of {region}: changes_since(before) = {changed:?} misses written samples")
                });
            }
        }
        if let Some(read) = c.read(0, region, bytes.len()) {
            c.check(read == bytes, || {
                format!("write of {region}: reading it back gives other bytes than written")
            });
        }
        if let (Some(old), Some(new)) = (
            before_all,
            if whole {
                c.read(0, shape.full_region(), layout.total_bytes())
            } else {
                None
            },
        ) {
            // Outside the region, nothing moved.
            let mut expected = old;
            let d = shape.padded();
            let row = region.size[2] * sample_bytes;
            let mut k = 0;
            for p in 0..region.size[0] {
                for r in 0..region.size[1] {
                    let start = (((region.origin[0] + p) * d[1] + region.origin[1] + r) * d[2]
                        + region.origin[2])
                        * sample_bytes;
                    expected[start..start + row].copy_from_slice(&bytes[k..k + row]);
                    k += row;
                }
            }
            c.check(expected == new, || {
                format!("write of {region} changed bytes outside it")
            });
        }
    }
    let mut report = c.finish()?;
    let read_side = check_source(source)?;
    report.checks += read_side.checks;
    report.skipped.extend(read_side.skipped);
    Ok(report)
}

/// Whether the union of `changed` holds every sample of `region`.
fn covers(changed: &[Region], region: &Region) -> bool {
    // Walk the region's samples a row at a time, cutting away covered runs.
    let e = region.end();
    for z in region.origin[0]..e[0] {
        for y in region.origin[1]..e[1] {
            let mut x = region.origin[2];
            while x < e[2] {
                let next = changed
                    .iter()
                    .filter(|c| {
                        let ce = c.end();
                        (c.origin[0]..ce[0]).contains(&z)
                            && (c.origin[1]..ce[1]).contains(&y)
                            && (c.origin[2]..ce[2]).contains(&x)
                    })
                    .map(|c| c.end()[2])
                    .max();
                match next {
                    Some(end) => x = end,
                    None => return false,
                }
            }
        }
    }
    true
}
