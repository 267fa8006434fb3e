//! Measurement helpers shared by the bench binaries: timing steps in rotating order and
//! taking medians, the result tables, and the PASS/FAIL summary.
#![allow(dead_code)]

use std::error::Error;
use std::time::Duration;

use sluice::{Counters, Renderer};

pub type Res<T> = Result<T, Box<dyn Error>>;

pub fn env_usize(name: &str, default: usize) -> Res<usize> {
    match std::env::var(name) {
        Ok(v) if !v.trim().is_empty() => v
            .trim()
            .parse()
            .map_err(|e| format!("{name}={v:?} is not a count: {e}").into()),
        _ => Ok(default),
    }
}

pub fn median(times: &[Duration]) -> Duration {
    let mut t = times.to_vec();
    t.sort();
    let n = t.len();
    if n % 2 == 1 {
        t[n / 2]
    } else {
        (t[n / 2 - 1] + t[n / 2]) / 2
    }
}

pub fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1e3
}

/// GiB/s moving `bytes` in `d`.
pub fn gibs(bytes: usize, d: Duration) -> f64 {
    bytes as f64 / d.as_secs_f64() / (1u64 << 30) as f64
}

/// One timed step: gets the renderer and the iteration number, returns its duration.
pub type Step<'a> = dyn FnMut(&mut Renderer, usize) -> Res<Duration> + 'a;

pub struct Timing {
    /// Median per step.
    pub medians: Vec<Duration>,
    /// Counters growth over the timed iterations (not the warm-up).
    pub counters: Counters,
    /// Counters before the timed iterations.
    pub before: Counters,
}

/// Runs `warmup` then `iters` rounds of all `steps`, one after the other (the order rotating
/// every round, so none always runs right after another), and returns each step's median.
pub fn measure(
    renderer: &mut Renderer,
    warmup: usize,
    iters: usize,
    steps: &mut [&mut Step<'_>],
) -> Res<Timing> {
    let n = steps.len();
    for i in 0..warmup {
        for step in steps.iter_mut() {
            step(renderer, i)?;
        }
    }
    let before = renderer.counters();
    let mut times = vec![Vec::with_capacity(iters); n];
    for i in 0..iters {
        for k in 0..n {
            let s = (i + k) % n;
            times[s].push(steps[s](renderer, warmup + i)?);
        }
    }
    let after = renderer.counters();
    Ok(Timing {
        medians: times.iter().map(|t| median(t)).collect(),
        counters: after.since(&before),
        before,
    })
}

pub struct Row {
    pub label: String,
    pub median: Duration,
    pub bytes_per_frame: f64,
    pub copies_per_frame: f64,
    pub note: String,
}

pub fn print_table(title: &str, rows: &[Row]) {
    println!("\n{title}");
    println!(
        "  {:<52} {:>10} {:>14} {:>8}",
        "", "median ms", "uploaded B/fr", "copies"
    );
    for r in rows {
        println!(
            "  {:<52} {:>10.3} {:>14.0} {:>8.2}  {}",
            r.label,
            ms(r.median),
            r.bytes_per_frame,
            r.copies_per_frame,
            r.note
        );
    }
}

pub struct Verdicts {
    pub lines: Vec<String>,
    pub failed: usize,
}

impl Verdicts {
    pub fn judge(&mut self, label: &str, value: String, target: &str, pass: bool) {
        if !pass {
            self.failed += 1;
        }
        let verdict = if pass { "PASS" } else { "FAIL" };
        self.lines
            .push(format!("  {label:<50} {value:>14}  {target:<24} {verdict}"));
    }

    /// Prints `header` and the verdicts; with `strict`, a missed target exits with status 1.
    pub fn finish(&self, header: &str, strict: bool) {
        println!("\nsummary: {header}");
        for line in &self.lines {
            println!("{line}");
        }
        if self.failed == 0 {
            println!("all targets met");
        } else {
            println!("{} target(s) missed", self.failed);
            if strict {
                std::process::exit(1);
            }
        }
    }

    pub fn info(&mut self, label: &str, value: String, note: &str) {
        self.lines
            .push(format!("  {label:<50} {value:>14}  {note:<24} info"));
    }
}
