//! Where the ObjectiveAI state dir is: `--state-dir` if given, else
//! `$OBJECTIVEAI_DIR` (default `~/.objectiveai`) + `/state/` +
//! `$OBJECTIVEAI_STATE` (default `default`, must match `[A-Za-z0-9_-]+`).
//! Invariant: resolution never touches the filesystem (beyond asking for
//! the working directory, to make a relative path absolute).

use std::path::{Path, PathBuf};

/// Why no state dir could be resolved.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum StateDirError {
    /// `$OBJECTIVEAI_STATE` holds something that is not a state name.
    #[error("OBJECTIVEAI_STATE={0:?} is not a state name (allowed: A-Z a-z 0-9 _ -)")]
    InvalidStateName(String),
    /// Neither `$OBJECTIVEAI_DIR` nor `$HOME` is set.
    #[error("cannot find the ObjectiveAI dir: set OBJECTIVEAI_DIR or HOME, or pass --state-dir")]
    NoHome,
    /// The state dir does not exist (locktop never creates one).
    #[error("state dir {} does not exist (locktop never creates one; is the path right?)", .0.display())]
    Missing(PathBuf),
    /// Something other than a directory is where the state dir should be.
    #[error("state dir {} is not a directory", .0.display())]
    NotADirectory(PathBuf),
}

/// Refuses a state dir that is missing or not a directory: the commands
/// that take locks (`hold`, `check`, test holders) must not create one —
/// a mistyped path would hold a lock nobody watching the real one sees.
/// The SDK may still create `locks/…` below an existing state dir, as
/// agents do.
pub fn require_existing(dir: &Path) -> Result<(), StateDirError> {
    match std::fs::metadata(dir) {
        Ok(meta) if meta.is_dir() => Ok(()),
        Ok(_) => Err(StateDirError::NotADirectory(dir.to_path_buf())),
        Err(_) => Err(StateDirError::Missing(dir.to_path_buf())),
    }
}

/// Resolves the state dir from an explicit flag and the environment.
/// The result is absolute (joined to the working directory, symlinks left
/// as they are): inotify names what changed by absolute path, and a claim
/// is named by its path below the state dir — a relative state dir made
/// every key found by an event an unnamed "other" key.
pub fn resolve(flag: Option<PathBuf>) -> Result<PathBuf, StateDirError> {
    let dir = resolve_with(flag, |name| std::env::var_os(name))?;
    Ok(std::path::absolute(&dir).unwrap_or(dir))
}

/// [`resolve`] with the environment supplied by `env` (testable).
pub(crate) fn resolve_with(
    flag: Option<PathBuf>,
    env: impl Fn(&str) -> Option<std::ffi::OsString>,
) -> Result<PathBuf, StateDirError> {
    if let Some(dir) = flag {
        return Ok(dir);
    }
    let base = match env("OBJECTIVEAI_DIR").filter(|v| !v.is_empty()) {
        Some(dir) => PathBuf::from(dir),
        None => PathBuf::from(
            env("HOME")
                .filter(|v| !v.is_empty())
                .ok_or(StateDirError::NoHome)?,
        )
        .join(".objectiveai"),
    };
    let state = match env("OBJECTIVEAI_STATE").filter(|v| !v.is_empty()) {
        Some(name) => {
            let name = name.to_string_lossy().into_owned();
            let valid = name
                .bytes()
                .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-');
            if !valid {
                return Err(StateDirError::InvalidStateName(name));
            }
            name
        }
        None => "default".to_string(),
    };
    Ok(base.join("state").join(state))
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashMap;

    fn env_of(pairs: &[(&str, &str)]) -> impl Fn(&str) -> Option<std::ffi::OsString> {
        let map: HashMap<String, String> = pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        move |name| map.get(name).map(Into::into)
    }

    #[test]
    fn flag_overrides_everything() {
        let env = env_of(&[("OBJECTIVEAI_DIR", "/x"), ("OBJECTIVEAI_STATE", "bad name")]);
        assert_eq!(resolve_with(Some("/flag".into()), env), Ok("/flag".into()));
    }

    #[test]
    fn defaults_to_home_objectiveai_state_default() {
        let env = env_of(&[("HOME", "/home/u")]);
        assert_eq!(
            resolve_with(None, env),
            Ok("/home/u/.objectiveai/state/default".into())
        );
    }

    #[test]
    fn objectiveai_dir_and_state_compose() {
        let env = env_of(&[("OBJECTIVEAI_DIR", "/o"), ("OBJECTIVEAI_STATE", "dev_2-x")]);
        assert_eq!(resolve_with(None, env), Ok("/o/state/dev_2-x".into()));
    }

    #[test]
    fn state_name_with_a_slash_is_refused() {
        let env = env_of(&[("OBJECTIVEAI_DIR", "/o"), ("OBJECTIVEAI_STATE", "../etc")]);
        assert_eq!(
            resolve_with(None, env),
            Err(StateDirError::InvalidStateName("../etc".into()))
        );
    }

    #[test]
    fn a_state_dir_must_exist_and_be_a_directory() {
        let dir = tempfile::tempdir().unwrap();
        assert_eq!(require_existing(dir.path()), Ok(()));
        let missing = dir.path().join("nope");
        assert_eq!(
            require_existing(&missing),
            Err(StateDirError::Missing(missing.clone()))
        );
        let file = dir.path().join("file");
        std::fs::write(&file, b"").unwrap();
        assert_eq!(
            require_existing(&file),
            Err(StateDirError::NotADirectory(file.clone()))
        );
    }

    #[test]
    fn no_home_is_a_clear_error() {
        assert_eq!(resolve_with(None, env_of(&[])), Err(StateDirError::NoHome));
    }
}
