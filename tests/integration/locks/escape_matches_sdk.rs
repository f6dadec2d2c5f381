//! `locktop::locks::escape` spells the SDK's on-disk names byte for byte: for any
//! key, a real SDK acquisition creates exactly `gate_path` and
//! `announce_path`, and the names read back to the key.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

use locktop::locks::escape::{
    ANNOUNCE_SUFFIX, GATE_SUFFIX, announce_path, escape, gate_path, unescape,
};
use objectiveai_sdk::lockfile;
use proptest::prelude::*;

fn files_in(dir: &Path) -> BTreeSet<PathBuf> {
    std::fs::read_dir(dir)
        .unwrap()
        .map(|entry| entry.unwrap().path())
        .collect()
}

/// Acquires `key` through the SDK in a fresh dir and checks every naming
/// claim; returns a description of the first mismatch.
async fn check_key(root: &Path, case: usize, key: &str) -> Result<(), String> {
    let dir = root.join(format!("case-{case}"));
    let claim = lockfile::try_acquire(&dir, key, "")
        .await
        .ok_or_else(|| format!("SDK could not acquire {key:?}"))?;

    let result = (async {
        let expected: BTreeSet<PathBuf> = [gate_path(&dir, key), announce_path(&dir, key)].into();
        let actual = files_in(&dir);
        if actual != expected {
            return Err(format!(
                "{key:?}: SDK made {actual:?}, escape predicts {expected:?}"
            ));
        }
        let keys = lockfile::keys_in_dir(&dir)
            .await
            .map_err(|e| e.to_string())?;
        if keys != [key.to_string()] {
            return Err(format!("{key:?}: keys_in_dir gave {keys:?}"));
        }
        let gate_name = gate_path(&dir, key)
            .file_name()
            .unwrap()
            .to_str()
            .unwrap()
            .to_string();
        let stem = gate_name.strip_suffix(GATE_SUFFIX).unwrap();
        if stem != escape(key) || unescape(stem).as_deref() != Some(key) {
            return Err(format!(
                "{key:?}: gate stem {stem:?} does not unescape back"
            ));
        }
        let announce_name = announce_path(&dir, key)
            .file_name()
            .unwrap()
            .to_str()
            .unwrap()
            .to_string();
        let stem = announce_name.strip_suffix(ANNOUNCE_SUFFIX).unwrap();
        if unescape(stem).as_deref() != Some(key) {
            return Err(format!(
                "{key:?}: announce stem {stem:?} does not unescape back"
            ));
        }
        if !lockfile::try_held(&dir, key).await {
            return Err(format!("{key:?}: acquired but not held"));
        }
        Ok(())
    })
    .await;

    claim.release().map_err(|e| e.to_string())?;
    if lockfile::try_held(&dir, key).await {
        return Err(format!("{key:?}: still held after release"));
    }
    result
}

#[tokio::test(flavor = "multi_thread")]
async fn tricky_keys_name_the_same_files_as_the_sdk() {
    let root = tempfile::tempdir().unwrap();
    let keys = [
        "",
        ".",
        "..",
        "%",
        "%41",
        "a b",
        "a/b",
        "/",
        "x.lock",
        "x.live.lock",
        "é",
        "日本語",
        "emoji 🦀",
        "tab\tnl\n",
        "nul\0",
        "plain-key_09",
    ];
    for (case, key) in keys.iter().enumerate() {
        if let Err(message) = check_key(root.path(), case, key).await {
            panic!("{message}");
        }
    }
}

fn key_strategy() -> impl Strategy<Value = String> {
    // Keys stay short enough that the escaped name (up to 12 bytes per
    // char) plus ".live.lock" fits a 255-byte file name.
    prop_oneof![
        "[a-zA-Z0-9_./% -]{0,16}",
        "(?s).{0,16}",
        "[\\u{80}-\\u{10FFFF}]{1,8}",
    ]
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(64))]

    #[test]
    fn any_key_names_the_same_files_as_the_sdk(key in key_strategy()) {
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .enable_all()
            .build()
            .unwrap();
        let root = tempfile::tempdir().unwrap();
        let outcome = runtime.block_on(check_key(root.path(), 0, &key));
        prop_assert!(outcome.is_ok(), "{}", outcome.unwrap_err());
    }
}
