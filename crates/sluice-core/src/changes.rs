//! Versions and change sets: how a consumer learns what to upload again.

use std::collections::VecDeque;

use crate::region::Region;

/// A source's data version. It moves forward on every change; [`Version::NEVER`] is older than
/// every version a source reports, so `changes_since(Version::NEVER)` is always
/// [`Changes::All`].
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Default)]
pub struct Version(pub u64);

impl Version {
    /// Older than any data: what a consumer that has uploaded nothing holds.
    pub const NEVER: Version = Version(0);
    /// The version a source starts at.
    pub const INITIAL: Version = Version(1);

    /// The next version.
    #[must_use]
    pub fn next(self) -> Version {
        Version(self.0 + 1)
    }
}

/// What changed in a source since a given version.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Changes {
    /// Nothing: what the consumer has is current.
    None,
    /// Only these regions (of level 0), oldest change first. They may overlap.
    Regions(Vec<Region>),
    /// Everything, possibly including the layout: re-read the layout and upload all.
    All,
}

/// A bounded log of changed regions, for sources to answer [`Changes`] questions.
///
/// Keeps the last `capacity` changes; a consumer asking about a version older than the log
/// reaches gets [`Changes::All`], which is always a correct (if costly) answer. Not
/// synchronised: a source keeps it behind its own lock.
#[derive(Debug)]
pub struct ChangeLog {
    version: Version,
    /// Versions at or before this one are not covered by `entries`.
    floor: Version,
    entries: VecDeque<(Version, Region)>,
    capacity: usize,
}

impl ChangeLog {
    /// A log at [`Version::INITIAL`] keeping up to `capacity` region changes.
    pub fn new(capacity: usize) -> Self {
        ChangeLog {
            version: Version::INITIAL,
            floor: Version::INITIAL,
            entries: VecDeque::new(),
            capacity: capacity.max(1),
        }
    }

    /// The current version.
    pub fn version(&self) -> Version {
        self.version
    }

    /// Records a change of `region` and returns the new version.
    pub fn record(&mut self, region: Region) -> Version {
        self.version = self.version.next();
        if self.entries.len() == self.capacity {
            if let Some((v, _)) = self.entries.pop_front() {
                self.floor = v;
            }
        }
        self.entries.push_back((self.version, region));
        self.version
    }

    /// Records a change of everything (data or layout) and returns the new version.
    pub fn record_all(&mut self) -> Version {
        self.version = self.version.next();
        self.entries.clear();
        self.floor = self.version;
        self.version
    }

    /// What changed after `since`.
    pub fn since(&self, since: Version) -> Changes {
        if since >= self.version {
            return Changes::None;
        }
        if since < self.floor {
            return Changes::All;
        }
        Changes::Regions(
            self.entries
                .iter()
                .filter(|(v, _)| *v > since)
                .map(|(_, r)| *r)
                .collect(),
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn new_consumer_gets_everything() {
        let log = ChangeLog::new(4);
        assert_eq!(log.since(Version::NEVER), Changes::All);
        assert_eq!(log.since(log.version()), Changes::None);
    }

    #[test]
    fn regions_since_a_version_in_order() {
        let mut log = ChangeLog::new(4);
        let v0 = log.version();
        let a = Region::d1(0, 1);
        let b = Region::d1(5, 2);
        let v1 = log.record(a);
        log.record(b);
        assert_eq!(log.since(v0), Changes::Regions(vec![a, b]));
        assert_eq!(log.since(v1), Changes::Regions(vec![b]));
    }

    #[test]
    fn overflow_falls_back_to_all() {
        let mut log = ChangeLog::new(2);
        let v0 = log.version();
        let v1 = log.record(Region::d1(0, 1));
        let v2 = log.record(Region::d1(1, 1));
        log.record(Region::d1(2, 1));
        assert_eq!(log.since(v0), Changes::All);
        assert_eq!(
            log.since(v1),
            Changes::Regions(vec![Region::d1(1, 1), Region::d1(2, 1)])
        );
        assert_eq!(log.since(v2), Changes::Regions(vec![Region::d1(2, 1)]));
        let v4 = log.record_all();
        assert_eq!(log.since(v2), Changes::All);
        assert_eq!(log.since(v4), Changes::None);
    }
}
