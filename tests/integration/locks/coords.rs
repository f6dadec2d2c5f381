//! Coordinates, validation, deduplication and family partitioning.

use std::path::{Path, PathBuf};

use crate::common::{
    Finished, Holder, finish, group_args, locktop_command, run_locktop, state_in_tempdir, tag_args,
    tree,
};
use locktop::context::Context;
use locktop::locks::{
    self, Family, LocksError, agent_instance_lock, agent_tag_lock, family_coords, instances_root,
    tags_root,
};

const BAD_AIHS: &[&str] = &[
    "", "/a", "a//b", "a/", "a/./b", "../x", "a/..", "a\0b", ".", "..", "./a", "a/.", "/",
];

#[test]
fn nested_aih_maps_parents_to_dirs_and_leaf_to_key() {
    let state = Path::new("/state");
    assert_eq!(
        agent_instance_lock(state, "root/child-1/leaf-2"),
        (
            PathBuf::from("/state/locks/agents/instances/root/child-1"),
            "leaf-2".to_string()
        )
    );
}

#[test]
fn one_segment_aih_is_a_key_directly_in_the_instances_root() {
    let state = Path::new("/state");
    assert_eq!(
        agent_instance_lock(state, "solo"),
        (
            PathBuf::from("/state/locks/agents/instances"),
            "solo".to_string()
        )
    );
    assert_eq!(
        instances_root(state),
        Path::new("/state/locks/agents/instances")
    );
}

#[test]
fn tags_live_in_one_dir_keyed_verbatim() {
    let state = Path::new("/state");
    for tag in ["t", "my tag", "a/b", "..", "v1.0:%"] {
        assert_eq!(
            agent_tag_lock(state, tag),
            (PathBuf::from("/state/locks/agents/tags"), tag.to_string())
        );
    }
    assert_eq!(tags_root(state), Path::new("/state/locks/agents/tags"));
}

#[test]
fn family_coords_rejects_every_aih_that_would_escape_or_alias_a_dir() {
    let state = Path::new("/state");
    for &aih in BAD_AIHS {
        let family = Family::Hierarchy {
            aih: aih.to_string(),
            tags: vec!["fine".into()],
        };
        let error = family_coords(state, &family).expect_err(&format!("{aih:?} must be rejected"));
        let LocksError::InvalidAih { aih: named, reason } = &error else {
            panic!("{aih:?}: expected InvalidAih, got {error:?}");
        };
        assert_eq!(named, aih, "the error names the input");
        assert!(!reason.is_empty());
        let message = error.to_string();
        assert!(
            message.contains(&format!("{aih:?}")),
            "{message:?} quotes {aih:?}"
        );
        if !aih.contains('\0') {
            assert!(message.contains(aih), "{message:?} contains {aih:?}");
        }
        assert!(!message.contains('\n'), "one line: {message:?}");
        assert!(
            locks::validate_aih(aih).is_err(),
            "validate_aih agrees on {aih:?}"
        );
    }
}

#[test]
fn family_coords_rejects_empty_and_nul_tags_in_groups_and_hierarchies() {
    let state = Path::new("/state");
    for tag in ["", "a\0b"] {
        for family in [
            Family::Group(vec!["ok".into(), tag.to_string()]),
            Family::Hierarchy {
                aih: "fine/aih".into(),
                tags: vec![tag.to_string()],
            },
        ] {
            let error = family_coords(state, &family).expect_err("bad tag");
            let LocksError::InvalidTag { tag: named, .. } = &error else {
                panic!("{tag:?}: expected InvalidTag, got {error:?}");
            };
            assert_eq!(named, tag);
            assert!(error.to_string().contains(&format!("{tag:?}")));
        }
    }
}

#[test]
fn family_coords_accepts_free_form_tags_and_dotted_aih_segments() {
    let state = Path::new("/state");
    let coords = family_coords(
        state,
        &Family::Hierarchy {
            aih: "a.b/c..d/.e".into(),
            tags: vec!["x/y".into(), "..".into(), " ".into()],
        },
    )
    .unwrap();
    assert_eq!(
        coords[0],
        (
            PathBuf::from("/state/locks/agents/instances/a.b/c..d"),
            ".e".to_string()
        )
    );
    assert_eq!(coords.len(), 4);
    for (dir, _) in &coords[1..] {
        assert_eq!(dir, Path::new("/state/locks/agents/tags"));
    }
}

#[test]
fn hold_with_a_path_escaping_aih_exits_2_and_touches_nothing() {
    for aih in ["../x", "a/../../..", "/abs/x", "a//b"] {
        let (tmp, state) = state_in_tempdir();
        let finished = run_locktop(&state, &["hold", "--aih", aih, "--tag", "t"]);
        assert_eq!(finished.code(), 2, "{aih:?}: {finished:?}");
        let lines = finished.stderr_lines();
        assert_eq!(lines.len(), 1, "{aih:?}: one line: {finished:?}");
        assert!(lines[0].contains(&format!("{aih:?}")), "{finished:?}");
        assert!(finished.stdout.is_empty(), "{finished:?}");
        assert_eq!(
            tree(tmp.path()),
            vec![PathBuf::from("state")],
            "{aih:?} created something"
        );
    }
}

#[test]
fn hold_with_a_bad_tag_exits_2_with_one_line() {
    let (tmp, state) = state_in_tempdir();
    let finished = run_locktop(&state, &["hold", "--tag", ""]);
    assert_eq!(finished.code(), 2, "{finished:?}");
    assert_eq!(finished.stderr_lines().len(), 1, "{finished:?}");
    assert_eq!(tree(tmp.path()), vec![PathBuf::from("state")]);
}

#[tokio::test(flavor = "multi_thread")]
async fn duplicate_coords_collapse_to_one_lock_each() {
    let (_tmp, state) = state_in_tempdir();
    let context = Context::new(state.clone());
    let a = agent_tag_lock(&state, "a");
    let b = agent_tag_lock(&state, "b");
    let i = agent_instance_lock(&state, "p/q");
    let coords = vec![
        a.clone(),
        b.clone(),
        a.clone(),
        i.clone(),
        b.clone(),
        a.clone(),
    ];
    let held = locks::try_acquire_all(context.agent_locks(), &coords)
        .await
        .expect("duplicates do not conflict with themselves");
    let got: Vec<(PathBuf, String)> = held
        .iter()
        .map(|l| (l.dir().to_path_buf(), l.key().to_string()))
        .collect();
    assert_eq!(got, vec![a, b, i], "first occurrence order");

    // Held once, released once: everything is free for another process.
    for lock in held {
        lock.release().unwrap();
    }
    let mut other = Holder::hold(&state, &["--aih", "p/q", "--tag", "a", "--tag", "b"]);
    assert_eq!(other.close_stdin().code(), Some(0));
}

#[tokio::test(flavor = "multi_thread")]
async fn duplicate_tags_in_a_family_give_one_lock_per_distinct_tag() {
    let (_tmp, state) = state_in_tempdir();
    let context = Context::new(state.clone());
    let family = Family::Group(vec!["a".into(), "b".into(), "a".into()]);
    let acquired = locks::try_acquire_family(context.agent_locks(), &state, family)
        .await
        .unwrap()
        .expect("free");
    let keys: Vec<&str> = acquired.tags.iter().map(|l| l.key()).collect();
    assert_eq!(keys, ["a", "b"]);
    drop(acquired);
    let mut other = Holder::hold(&state, &group_args(&["a", "b"]));
    assert_eq!(other.close_stdin().code(), Some(0));
}

#[tokio::test(flavor = "multi_thread")]
async fn hierarchy_family_partitions_the_aih_lock_out_and_puts_it_first() {
    let (_tmp, state) = state_in_tempdir();
    let context = Context::new(state.clone());
    let aih = "root/child-1/leaf-2";
    let family = Family::Hierarchy {
        aih: aih.into(),
        tags: vec!["t3".into(), "t1".into(), "t2".into()],
    };
    let acquired = locks::try_acquire_family(context.agent_locks(), &state, family)
        .await
        .unwrap()
        .expect("free");

    let (named, aih_lock) = acquired.aih.as_ref().expect("a hierarchy has an AIH lock");
    assert_eq!(named, aih);
    let (dir, key) = agent_instance_lock(&state, aih);
    assert_eq!(
        (aih_lock.dir(), aih_lock.key()),
        (dir.as_path(), key.as_str())
    );

    let tags: Vec<&str> = acquired.tags.iter().map(|l| l.key()).collect();
    assert_eq!(tags, ["t3", "t1", "t2"], "family order");
    for lock in &acquired.tags {
        assert_eq!(lock.dir(), tags_root(&state));
    }

    let all = acquired.into_locks();
    let keys: Vec<&str> = all.iter().map(|l| l.key()).collect();
    assert_eq!(keys, ["leaf-2", "t3", "t1", "t2"]);
    assert_eq!(all[0].dir(), dir);
    for lock in all {
        lock.release().unwrap();
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn group_family_has_no_aih_lock() {
    let (_tmp, state) = state_in_tempdir();
    let context = Context::new(state.clone());
    let acquired = locks::try_acquire_family(
        context.agent_locks(),
        &state,
        Family::Group(vec!["g2".into(), "g1".into()]),
    )
    .await
    .unwrap()
    .expect("free");
    assert!(acquired.aih.is_none());
    let keys: Vec<&str> = acquired.tags.iter().map(|l| l.key()).collect();
    assert_eq!(keys, ["g2", "g1"]);
    let all = acquired.into_locks();
    assert_eq!(all.len(), 2);
}

#[tokio::test(flavor = "multi_thread")]
async fn invalid_family_is_an_error_not_a_busy_and_takes_nothing() {
    let (tmp, state) = state_in_tempdir();
    let context = Context::new(state.clone());
    let result = locks::try_acquire_family(
        context.agent_locks(),
        &state,
        Family::Hierarchy {
            aih: "../escape".into(),
            tags: vec!["t".into()],
        },
    )
    .await;
    assert!(matches!(result, Err(LocksError::InvalidAih { .. })));
    assert!(context.agent_locks().is_empty(), "no gate entry was made");
    assert_eq!(tree(tmp.path()), vec![PathBuf::from("state")]);
}

/// An AIH directory segment is raw, so it can spell another AIH's gate
/// file name: `x.lock/y` puts a DIRECTORY where AIH `x` keeps its gate
/// file `x.lock`. Two distinct, valid AIHs then block each other forever,
/// with no process holding either.
#[tokio::test(flavor = "multi_thread")]
async fn distinct_aihs_never_alias_each_others_lockfiles() {
    for (first, second) in [("x", "x.lock/y"), ("x.lock/y", "x"), ("x", "x.live.lock/y")] {
        let (_tmp, state) = state_in_tempdir();
        let context = Context::new(state.clone());
        let one = locks::try_acquire_family(
            context.agent_locks(),
            &state,
            Family::Hierarchy {
                aih: first.into(),
                tags: vec![],
            },
        )
        .await;
        let one = match one {
            // Rejecting the aliasing spelling is a fine fix too.
            Err(LocksError::InvalidAih { .. }) => continue,
            other => other.unwrap().expect("the first AIH is free"),
        };
        drop(one);
        // Nothing holds anything now; the second, different AIH must be
        // acquirable (or rejected as invalid input) — never "busy".
        let two = locks::try_acquire_family(
            context.agent_locks(),
            &state,
            Family::Hierarchy {
                aih: second.into(),
                tags: vec![],
            },
        )
        .await;
        match two {
            Err(LocksError::InvalidAih { .. }) => {}
            Ok(Some(_)) => {}
            Ok(None) => panic!(
                "{second:?} reads as busy after {first:?} was taken and released: their lockfiles alias"
            ),
            Err(other) => panic!("{other:?}"),
        }
    }
}

/// `hold` with its open-file limits set to `soft`/`hard` (stdin closed:
/// a holder that got its family releases at once).
fn hold_with_file_limit(state: &std::path::Path, tags: usize, soft: u64, hard: u64) -> Finished {
    use std::os::unix::process::CommandExt;
    let names: Vec<String> = (0..tags).map(|i| format!("t{i}")).collect();
    let names: Vec<&str> = names.iter().map(String::as_str).collect();
    let mut args = vec!["hold"];
    let tag_args = tag_args(&names);
    args.extend(tag_args.iter().map(String::as_str));
    let mut command = locktop_command(state, &args);
    // SAFETY: setrlimit(2) is async-signal-safe and touches only the child.
    unsafe {
        command.pre_exec(move || {
            nix::sys::resource::setrlimit(nix::sys::resource::Resource::RLIMIT_NOFILE, soft, hard)
                .map_err(std::io::Error::from)
        });
    }
    finish(command)
}

/// Each held claim keeps two descriptors open: past the hard open-file
/// limit, the SDK's opens would fail part-way and read as "busy" for
/// every member after (nobody holds them). `hold` refuses up front, with
/// one line, and takes nothing; under the hard limit it raises its soft
/// limit and holds.
#[test]
fn hold_beyond_the_open_file_limit_is_refused_up_front_and_takes_nothing() {
    let (tmp, state) = state_in_tempdir();
    let refused = hold_with_file_limit(&state, 100, 100, 100);
    assert_eq!(refused.code(), 2, "{refused:?}");
    let lines = refused.stderr_lines();
    assert_eq!(lines.len(), 1, "{refused:?}");
    assert!(lines[0].contains("open files"), "{refused:?}");
    assert_eq!(tree(tmp.path()), vec![PathBuf::from("state")]);

    let held = hold_with_file_limit(&state, 100, 100, 1024);
    assert_eq!(held.code(), 0, "{held:?}");
    assert!(held.stdout.contains("\"held\":true"), "{held:?}");
}
