//! How a [`Line`] of `locktop watch` is written: one NDJSON object or one
//! text line. A verdict line names its key in a `key` object (no
//! top-level `kind`/`name`, so a reader that takes those for a state
//! change is not misled, as with health lines), with `verdict_from` (the
//! kind before, or null) and `verdict` (as in `snapshot --json`, or null). A line that folded nothing is exactly what `watch` printed
//! before lines could fold; one that did carries `"folded": N` (JSON) or
//! ends with ` (+N folded)` (text).

use crate::time_format;

use super::queue::{KeyTo, Line, Report};

/// The line as text or NDJSON; `None` when the mode has no such line
/// (`synced` is text only).
pub fn line(line: &Line, json: bool) -> Option<String> {
    if json {
        json_line(line)
    } else {
        Some(text_line(line))
    }
}

/// A key's state line as NDJSON, its fields in the order they are
/// written (serialized as it is: no `serde_json::Value` built first, the
/// commonest line of a churn).
#[derive(serde::Serialize)]
struct StateLine<'a> {
    time: &'a str,
    kind: crate::disk::KeyKind,
    name: &'a str,
    from: Option<&'static str>,
    to: &'static str,
    pids: &'a [u32],
    error: &'a Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    holders_note: &'a Option<crate::liveness::HoldersNote>,
    #[serde(skip_serializing_if = "Option::is_none")]
    refused: &'a Option<crate::liveness::RefusedTries>,
    #[serde(skip_serializing_if = "is_zero")]
    folded: u64,
}

fn is_zero(count: &u64) -> bool {
    *count == 0
}

fn json_line(line: &Line) -> Option<String> {
    let time = time_format::rfc3339(line.at);
    let mut value = match &line.report {
        Report::Key {
            key,
            from,
            to:
                KeyTo::State {
                    liveness,
                    pids,
                    error,
                    holders_note,
                    refused,
                },
        } => {
            return crate::text::to_json(&StateLine {
                time: &time,
                kind: key.kind(),
                name: key.name(),
                from: from.map(|l| l.as_str()),
                to: liveness.as_str(),
                pids,
                error,
                holders_note,
                refused,
                folded: line.folded,
            })
            .ok();
        }
        Report::Key {
            key,
            from,
            to: KeyTo::Removed,
        } => serde_json::json!({
            "time": time,
            "kind": key.kind(),
            "name": key.name(),
            "from": from.map(|l| l.as_str()),
            "to": "removed",
            "pids": [],
        }),
        Report::Verdict { key, from, to } => serde_json::json!({
            "time": time,
            "key": {"kind": key.kind(), "name": key.name()},
            "verdict_from": from,
            "verdict": to,
        }),
        Report::Health(health) => serde_json::json!({
            "time": time,
            "watcher": health,
        }),
        Report::Synced { .. } => return None,
    };
    if line.folded > 0 {
        value["folded"] = line.folded.into();
    }
    crate::text::to_json(&value).ok()
}

fn text_line(line: &Line) -> String {
    let time = time_format::rfc3339(line.at);
    let text = match &line.report {
        Report::Key {
            key,
            from,
            to:
                KeyTo::State {
                    liveness,
                    pids,
                    refused,
                    ..
                },
        } => {
            let pids: Vec<String> = pids.iter().map(u32::to_string).collect();
            let mut text = format!(
                "{time} {:<8} {:<9} → {:<9} {:<40} {}",
                key.kind().as_str(),
                from.map_or("new", |l| l.as_str()),
                liveness.as_str(),
                key.name(),
                if pids.is_empty() {
                    String::new()
                } else {
                    format!("pid {}", pids.join(","))
                }
            );
            if let Some(refused) = refused {
                text.push_str(&format!(" — {}", refused.describe()));
            }
            text
        }
        Report::Key {
            key,
            from,
            to: KeyTo::Removed,
        } => format!(
            "{time} {:<8} {:<9} → {:<9} {}",
            key.kind().as_str(),
            from.map_or("new", |l| l.as_str()),
            "removed",
            key.name()
        ),
        Report::Verdict { key, from, to } => format!(
            "{time} {:<8} verdict {} → {} {} — {}",
            key.kind().as_str(),
            from.unwrap_or("none"),
            to.as_ref().map_or("none", |verdict| verdict.kind()),
            key.name(),
            to.as_ref()
                .map_or("no verdict".to_string(), |verdict| verdict
                    .describe(line.at)),
        ),
        Report::Health(health) => format!("{time} watcher: {}", health.describe()),
        Report::Synced { keys } => format!("{time} synced: {keys} keys on disk"),
    };
    // Names, command lines and paths are anyone's text: the whole line is
    // made inert (nothing of ours in it is a control character).
    let text = crate::text::visible(text.trim_end());
    if line.folded > 0 {
        format!("{text} (+{} folded)", line.folded)
    } else {
        text.into_owned()
    }
}

#[cfg(test)]
mod tests {
    use std::path::Path;
    use std::time::{Duration, SystemTime};

    use super::*;
    use crate::disk::LockKey;
    use crate::engine::{Liveness, WatcherHealth};

    fn key_line(to: KeyTo, folded: u64) -> Line {
        Line {
            report: Report::Key {
                key: LockKey::from_coord(Path::new("/s"), Path::new("/s/locks/agents/tags"), "t"),
                from: Some(Liveness::Free),
                to,
            },
            at: SystemTime::UNIX_EPOCH + Duration::from_millis(1_500),
            folded,
        }
    }

    fn live(pids: &[u32]) -> KeyTo {
        KeyTo::State {
            liveness: Liveness::Live,
            pids: pids.to_vec(),
            error: None,
            holders_note: None,
            refused: None,
        }
    }

    #[test]
    fn a_held_line_without_holders_says_why() {
        let unnamed = KeyTo::State {
            liveness: Liveness::Live,
            pids: Vec::new(),
            error: None,
            holders_note: Some(crate::liveness::HoldersNote::NotVisible),
            refused: None,
        };
        let json = line(&key_line(unnamed, 0), true).unwrap();
        assert!(
            json.ends_with(r#""pids":[],"error":null,"holders_note":"not_visible"}"#),
            "{json}"
        );
    }

    /// Refused tries ride on the key's line: JSON as in the key's state,
    /// text as the details pane says them.
    #[test]
    fn a_line_says_the_tries_refused_in_the_last_minute() {
        let refused = KeyTo::State {
            liveness: Liveness::Live,
            pids: vec![7],
            error: None,
            holders_note: None,
            refused: Some(crate::liveness::state::RefusedTries {
                last_minute: 340,
                by: vec![
                    crate::liveness::state::RefusedBy {
                        pid: 9,
                        count: 300,
                        last: None,
                    },
                    crate::liveness::state::RefusedBy {
                        pid: 11,
                        count: 40,
                        last: None,
                    },
                ],
            }),
        };
        let json = line(&key_line(refused.clone(), 0), true).unwrap();
        assert!(
            json.ends_with(
                r#""pids":[7],"error":null,"refused":{"last_minute":340,"by":[{"pid":9,"count":300},{"pid":11,"count":40}]}}"#
            ),
            "{json}"
        );
        let text = line(&key_line(refused, 0), false).unwrap();
        assert!(
            text.ends_with("pid 7 — refused 340× in the last minute, by pid 9 (300), 11 (40)"),
            "{text}"
        );
    }

    #[test]
    fn json_lines_that_fold_nothing_have_no_folded_field() {
        assert_eq!(
            line(&key_line(live(&[7]), 0), true).unwrap(),
            r#"{"time":"1970-01-01T00:00:01.500Z","kind":"tag","name":"t","from":"free","to":"live","pids":[7],"error":null}"#
        );
        assert_eq!(
            line(&key_line(KeyTo::Removed, 0), true).unwrap(),
            r#"{"time":"1970-01-01T00:00:01.500Z","kind":"tag","name":"t","from":"free","to":"removed","pids":[]}"#
        );
    }

    #[test]
    fn folded_lines_say_how_many_transitions_they_absorbed() {
        assert_eq!(
            line(&key_line(live(&[7]), 3), true).unwrap(),
            r#"{"time":"1970-01-01T00:00:01.500Z","kind":"tag","name":"t","from":"free","to":"live","pids":[7],"error":null,"folded":3}"#
        );
        assert_eq!(
            line(&key_line(live(&[7, 8]), 2), false).unwrap(),
            format!(
                "1970-01-01T00:00:01.500Z tag      free      → live      {:<40} pid 7,8 (+2 folded)",
                "t"
            )
        );
        assert_eq!(
            line(&key_line(live(&[]), 1), false).unwrap(),
            "1970-01-01T00:00:01.500Z tag      free      → live      t (+1 folded)"
        );
    }

    #[test]
    fn a_verdict_line_names_the_key_the_kind_before_and_the_verdict_now() {
        let Report::Key { key, .. } = key_line(KeyTo::Removed, 0).report else {
            unreachable!()
        };
        let stopped = Line {
            report: Report::Verdict {
                key: key.clone(),
                from: Some("agent_active"),
                to: Some(crate::operate::verdict::Verdict::Stopped { pid: 7 }),
            },
            at: SystemTime::UNIX_EPOCH + Duration::from_millis(1_500),
            folded: 0,
        };
        assert_eq!(
            line(&stopped, true).unwrap(),
            r#"{"time":"1970-01-01T00:00:01.500Z","key":{"kind":"tag","name":"t"},"verdict_from":"agent_active","verdict":{"kind":"stopped","pid":7}}"#
        );
        assert_eq!(
            line(&stopped, false).unwrap(),
            "1970-01-01T00:00:01.500Z tag      verdict agent_active → stopped t — stopped: pid 7 \
             holds its locks until SIGCONT or a kill — `kill -CONT 7`"
        );
        let gone = Line {
            report: Report::Verdict {
                key,
                from: Some("stopped"),
                to: None,
            },
            folded: 2,
            ..stopped
        };
        assert_eq!(
            line(&gone, true).unwrap(),
            r#"{"time":"1970-01-01T00:00:01.500Z","key":{"kind":"tag","name":"t"},"verdict_from":"stopped","verdict":null,"folded":2}"#
        );
    }

    #[test]
    fn synced_is_a_text_line_only() {
        let synced = Line {
            report: Report::Synced { keys: 4 },
            at: SystemTime::UNIX_EPOCH,
            folded: 0,
        };
        assert_eq!(line(&synced, true), None);
        assert_eq!(
            line(&synced, false).unwrap(),
            "1970-01-01T00:00:00.000Z synced: 4 keys on disk"
        );
        let health = Line {
            report: Report::Health(WatcherHealth::Watching),
            ..synced
        };
        assert_eq!(
            line(&health, true).unwrap(),
            r#"{"time":"1970-01-01T00:00:00.000Z","watcher":{"health":"watching"}}"#
        );
    }
}
