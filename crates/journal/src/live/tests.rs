//! A stream written from a service's fold and read back through a
//! [`Mirror`]: the client's keys that are not simply free are the
//! service's after every line, whenever it joined and however often it
//! was resynced.

use std::collections::BTreeMap;
use std::path::Path;
use std::time::SystemTime;

use crate::disk::key::LockKey;
use crate::engine::fixtures::{STATE, held, tag};
use crate::engine::fold::Fold;
use crate::engine::{Delta, KeyState, Liveness, WatcherHealth};
use crate::liveness::probe::ProbeMode;

use super::*;

fn hello() -> Hello {
    Hello {
        format: FORMAT.into(),
        version: VERSION,
        host: "h".into(),
        state_dir: STATE.into(),
        locktop: "test".into(),
        source: "kernel lock events".into(),
        refusals_counted: true,
        probe: ProbeMode::LockFree,
        materializing_after: 10.0,
        heartbeat_every: 1.0,
    }
}

/// The keys of `fold` that are not simply free.
fn noteworthy(fold: &Fold) -> BTreeMap<LockKey, KeyState> {
    fold.keys()
        .iter()
        .filter(|(_, state)| !state.is_bare_free())
        .map(|(key, state)| (key.clone(), state.clone()))
        .collect()
}

fn free_counts(fold: &Fold) -> FreeCounts {
    let mut free = FreeCounts::default();
    for (key, state) in fold.keys().iter() {
        if state.is_bare_free() {
            free.add(key.kind(), 1);
        }
    }
    free
}

/// A client: its reader, its mirror and the fold its deltas build.
#[derive(Default)]
struct Client {
    reader: Reader,
    mirror: Mirror,
    fold: Fold,
}

impl Client {
    fn read(&mut self, bytes: &[u8]) {
        for line in bytes.split(|b| *b == b'\n').filter(|line| !line.is_empty()) {
            match self.reader.line(line).unwrap() {
                Said::Checkpoint(checkpoint) => {
                    for delta in self.mirror.checkpoint(*checkpoint) {
                        self.fold.apply(delta);
                    }
                }
                Said::Change(delta) => self.fold.apply(self.mirror.change(delta)),
                _ => {}
            }
        }
    }
}

#[test]
fn a_client_holds_the_services_keys_after_every_line_whenever_it_joined_and_resynced() {
    for seed in 0..12u64 {
        let mut rng = fastrand::Rng::with_seed(seed);
        let base = crate::tests::initial()
            .iter()
            .find_map(Delta::changed_at)
            .unwrap();
        let deltas: Vec<Delta> = crate::tests::initial()
            .into_iter()
            .chain(crate::tests::script(base, 600, seed))
            .collect();
        let encoder = Encoder::new(Path::new(STATE));
        let joins = rng.usize(0..deltas.len());
        let mut service = Fold::default();
        let mut client = Client::default();
        let mut resyncs = 0;
        for (i, delta) in deltas.into_iter().enumerate() {
            let mut out = Vec::new();
            if i == joins {
                encoder.hello(&mut out, &hello());
                encoder.checkpoint(
                    &mut out,
                    base,
                    service.watcher(),
                    service.keys().iter(),
                    &free_counts(&service),
                );
            } else if i > joins && rng.u8(0..50) == 0 {
                // It fell behind: what it missed is dropped.
                resyncs += 1;
                encoder.resync(&mut Vec::new(), base, "behind");
                encoder.checkpoint(
                    &mut out,
                    base,
                    service.watcher(),
                    service.keys().iter(),
                    &free_counts(&service),
                );
            }
            let dropped = i > joins && rng.u8(0..50) == 0;
            service.apply(delta.clone());
            if i >= joins {
                let mut line = Vec::new();
                encoder.change(&mut line, &delta, base);
                if !dropped {
                    out.extend(line);
                }
                client.read(&out);
                if dropped {
                    // A line dropped with its client behind: the resync
                    // that follows repairs it.
                    let mut again = Vec::new();
                    encoder.resync(&mut again, base, "behind");
                    encoder.checkpoint(
                        &mut again,
                        base,
                        service.watcher(),
                        service.keys().iter(),
                        &free_counts(&service),
                    );
                    client.read(&again);
                }
                assert_eq!(
                    noteworthy(&client.fold),
                    noteworthy(&service),
                    "seed {seed}, line {i}"
                );
                assert_eq!(client.fold.watcher().health, service.watcher().health);
                assert_eq!(client.fold.watcher().synced(), service.watcher().synced());
            }
        }
        assert!(resyncs > 0 || joins > 500, "seed {seed}: no resync tried");
    }
}

#[test]
fn a_checkpoint_counts_free_keys_and_lists_none() {
    let encoder = Encoder::new(Path::new(STATE));
    let mut service = Fold::default();
    service.apply(Delta::Health(WatcherHealth::Watching));
    for i in 0..5 {
        service.apply(Delta::Key {
            key: tag(&format!("idle {i}")),
            state: KeyState::bare(Liveness::Free),
            previous: None,
            at: crate::engine::fixtures::t(1),
        });
    }
    let held_state = held(Liveness::Live, 9, "agent", crate::engine::fixtures::t(1));
    service.apply(Delta::Key {
        key: tag("busy"),
        state: held_state.clone(),
        previous: None,
        at: crate::engine::fixtures::t(1),
    });
    service.apply(Delta::Synced {
        keys: 6,
        at: crate::engine::fixtures::t(1),
    });
    let mut out = Vec::new();
    encoder.hello(&mut out, &hello());
    encoder.checkpoint(
        &mut out,
        crate::engine::fixtures::t(2),
        service.watcher(),
        service.keys().iter(),
        &free_counts(&service),
    );
    let text = String::from_utf8(out.clone()).unwrap();
    assert!(!text.contains("idle"), "{text}");
    assert!(
        text.contains("\"free\":{\"instance\":0,\"tag\":5,\"other\":0}"),
        "{text}"
    );
    let mut reader = Reader::new();
    let mut checkpoint = None;
    for line in out.split(|b| *b == b'\n').filter(|l| !l.is_empty()) {
        if let Said::Checkpoint(read) = reader.line(line).unwrap() {
            checkpoint = Some(read);
        }
    }
    let checkpoint = checkpoint.unwrap();
    assert_eq!(checkpoint.keys, vec![(tag("busy"), held_state)]);
    assert_eq!(checkpoint.free.total(), 5);
    let deltas = Mirror::new().checkpoint(*checkpoint);
    assert!(
        deltas.contains(&Delta::Synced {
            keys: 6,
            at: crate::engine::fixtures::t(2)
        }),
        "{deltas:?}"
    );
}

#[test]
fn a_stream_without_a_hello_or_of_a_newer_version_is_refused() {
    let encoder = Encoder::new(Path::new(STATE));
    let mut out = Vec::new();
    encoder.heartbeat(&mut out, SystemTime::now());
    let line = out.strip_suffix(b"\n").unwrap();
    assert!(matches!(Reader::new().line(line), Err(BadStream::NoHello)));
    let mut newer = hello();
    newer.version = VERSION + 1;
    let mut out = Vec::new();
    encoder.hello(&mut out, &newer);
    let line = out.strip_suffix(b"\n").unwrap();
    let refused = Reader::new().line(line).unwrap_err();
    assert!(refused.to_string().contains("upgrade locktop"), "{refused}");
}

#[test]
fn a_key_outside_the_locks_root_is_a_bad_line_not_a_key() {
    let mut reader = Reader::new();
    let encoder = Encoder::new(Path::new(STATE));
    let mut out = Vec::new();
    encoder.hello(&mut out, &hello());
    reader.line(out.strip_suffix(b"\n").unwrap()).unwrap();
    let inside = br#"{"time":"2026-01-01T00:00:00Z","kind":"tag","name":"../../etc","from":null,"to":"live","dir":"agents/tags","pids":[]}"#;
    assert!(matches!(reader.line(inside), Ok(Said::Change(_))));
    for dir in ["../../etc", "/etc", "agents/../../.."] {
        let hostile = format!(
            r#"{{"time":"2026-01-01T00:00:00Z","kind":"other","name":"passwd","from":null,"to":"live","dir":"{dir}","pids":[]}}"#
        );
        assert!(reader.line(hostile.as_bytes()).is_err(), "{dir}");
    }
}
