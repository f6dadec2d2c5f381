//! The `locktop hold` protocol: what a holder prints on stdout, one JSON
//! object per line, and what its readers (test holders, the demo swarm,
//! tests, benchmarks) parse back.
//!
//! Invariants: this type is the only writer and the only reader of the
//! protocol; a line is `{"waiting":true,"busy":[…]}` (only with `--wait`,
//! each time the family is found busy), then `{"held":true,"pid":…,
//! "locks":[…]}` once held, then — only with `--then-wait-*`, once that
//! key's wait ended — `{"waited":true,"key":"tag b","outcome":"taken"}`
//! (or `"released"`), then `{"released":true}` after releasing.

use serde::{Deserialize, Deserializer, Serialize, Serializer};

use super::check::BusyMember;

/// One line of a holder's stdout.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(untagged)]
pub enum HoldLine {
    /// The family was busy (with `--wait`): these members were in the way.
    Waiting {
        /// Always `true`: names the line.
        waiting: Marker,
        /// The busy members and their holders.
        busy: Vec<BusyMember>,
    },
    /// The whole family is held by `pid`.
    Held {
        /// Always `true`: names the line.
        held: Marker,
        /// The holder's PID.
        pid: u32,
        /// `instance a/b`, `tag t`, … in acquisition order.
        locks: Vec<String>,
    },
    /// The key a holder waited for after taking its family was taken
    /// (`outcome: "taken"`: it holds that too now) or released
    /// (`"released"`: it watched, and holds nothing more).
    Waited {
        /// Always `true`: names the line.
        waited: Marker,
        /// `tag b`, `instance a/b`.
        key: String,
        /// `taken` or `released`.
        outcome: String,
    },
    /// Everything was released; the holder exits next.
    Released {
        /// Always `true`: names the line.
        released: Marker,
    },
}

impl HoldLine {
    /// The `waiting` line for these busy members.
    pub fn waiting(busy: Vec<BusyMember>) -> Self {
        HoldLine::Waiting {
            waiting: Marker,
            busy,
        }
    }

    /// The `held` line of this process.
    pub fn held(locks: Vec<String>) -> Self {
        HoldLine::Held {
            held: Marker,
            pid: std::process::id(),
            locks,
        }
    }

    /// The `waited` line: the wait for `key` ended with `outcome`.
    pub fn waited(key: String, outcome: &str) -> Self {
        HoldLine::Waited {
            waited: Marker,
            key,
            outcome: outcome.to_string(),
        }
    }

    /// The `released` line.
    pub fn released() -> Self {
        HoldLine::Released { released: Marker }
    }

    /// Parses one stdout line; `None` for anything that is not a protocol
    /// line (readers skip those).
    pub fn parse(line: &str) -> Option<Self> {
        serde_json::from_str(line).ok()
    }

    /// The line as printed (one JSON object, no newline).
    pub fn to_line(&self) -> String {
        crate::text::to_json(self).expect("a hold line always serializes")
    }
}

/// The `true` that names a protocol line; only `true` parses as one.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Marker;

impl Serialize for Marker {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.serialize_bool(true)
    }
}

impl<'de> Deserialize<'de> for Marker {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        match bool::deserialize(deserializer)? {
            true => Ok(Marker),
            false => Err(serde::de::Error::custom("a protocol marker is always true")),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::disk::KeyKind;
    use crate::liveness::ProcessInfo;

    #[test]
    fn lines_print_exactly_as_documented() {
        let held = HoldLine::Held {
            held: Marker,
            pid: 42,
            locks: vec!["instance a/b".into(), "tag t".into()],
        };
        assert_eq!(
            held.to_line(),
            r#"{"held":true,"pid":42,"locks":["instance a/b","tag t"]}"#
        );
        assert_eq!(HoldLine::released().to_line(), r#"{"released":true}"#);
    }

    #[test]
    fn every_line_reads_back_as_itself() {
        let busy = BusyMember {
            kind: KeyKind::Tag,
            name: "x y".into(),
            holders: vec![ProcessInfo {
                pid: 7,
                alive: true,
                unverified: false,
                cmdline: Some("agent --tag 'x y'".into()),
                started: Some(std::time::UNIX_EPOCH + std::time::Duration::from_millis(1_500)),
                state: Some(crate::liveness::process::ProcState::Stopped),
                ppid: Some(1),
                unit: None,
                idle_since: None,
                parent: None,
            }],
            shared: Vec::new(),
        };
        for line in [
            HoldLine::waiting(vec![busy]),
            HoldLine::held(vec!["tag t".into()]),
            HoldLine::released(),
        ] {
            assert_eq!(HoldLine::parse(&line.to_line()), Some(line));
        }
    }

    proptest::proptest! {
        /// Whatever a child prints, reading it never panics.
        #[test]
        fn any_line_reads_without_panicking(line in ".{0,300}") {
            let _ = HoldLine::parse(&line);
        }

        /// Any held line reads back as itself.
        #[test]
        fn held_lines_read_back(pid in proptest::num::u32::ANY, locks in proptest::collection::vec(".{0,40}", 0..8)) {
            let line = HoldLine::Held { held: Marker, pid, locks };
            proptest::prop_assert_eq!(HoldLine::parse(&line.to_line()), Some(line));
        }
    }

    #[test]
    fn a_false_marker_or_other_text_is_not_a_protocol_line() {
        assert_eq!(HoldLine::parse(r#"{"released":false}"#), None);
        assert_eq!(HoldLine::parse("busy: tag \"x\""), None);
    }
}
