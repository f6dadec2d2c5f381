//! Messages that tell the operator which key to press. Invariant: every
//! key named here comes from the key map ([`key_of`], [`pane_hint`]), so
//! rebinding a key changes every message that mentions it.

use super::action::{Action, Pane};
use super::keymap::{key_of, pane_hint};

/// Nothing to act on in the test holders pane yet.
pub(crate) fn no_test_holder() -> String {
    format!(
        "no test holder yet: {} starts one",
        key_of(Action::NewHolder)
    )
}

/// What the empty test holders pane says.
pub(crate) fn no_test_holder_yet(read_only: bool) -> String {
    let new = key_of(Action::NewHolder);
    if read_only {
        format!("no test holder (read-only: {new} is disabled)")
    } else {
        format!("no test holder yet: {new} holds a family, in this process or in a child")
    }
}

/// Release was asked outside the test holders pane.
pub(crate) fn release_where() -> String {
    format!(
        "{} releases a test holder: select it in {}",
        key_of(Action::Release),
        pane_hint(Pane::TestHolders)
    )
}

/// A signal was asked with nothing held selected.
pub(crate) fn signal_where() -> String {
    format!(
        "{} signals the holder of a held key: select one in {} or {}",
        key_of(Action::Kill),
        pane_hint(Pane::Tree),
        pane_hint(Pane::Holders)
    )
}

/// Kill was asked for an in-process test holder.
pub(crate) fn in_process_kill() -> String {
    format!(
        "an in-process holder cannot be killed; release it ({})",
        key_of(Action::Release)
    )
}

/// Signals to this process are refused: its locks belong to in-process
/// test holders.
pub(crate) fn release_in_process_holders() -> String {
    format!(
        "release them with {} in {}",
        key_of(Action::Release),
        pane_hint(Pane::TestHolders)
    )
}

/// The footer line under a test holder's details.
pub(crate) fn test_holder_keys(over: bool, child: bool) -> String {
    let (release, kill, new) = (
        key_of(Action::Release),
        key_of(Action::Kill),
        key_of(Action::NewHolder),
    );
    let show = key_of(Action::Toggle);
    match (over, child) {
        (true, _) => format!("over: {release} removes it · {new} starts another"),
        (false, true) => {
            format!(
                "{release} releases (SIGTERM) · {kill} kills (SIGKILL) · {show} shows it in the tree"
            )
        }
        (false, false) => format!("{release} releases · {show} shows it in the tree"),
    }
}

/// Sort was asked where nothing sorts.
pub(crate) fn sort_where() -> String {
    format!(
        "{} sorts {} and {}",
        key_of(Action::CycleSort),
        pane_hint(Pane::Holders),
        pane_hint(Pane::Blocking)
    )
}

/// A key bound to nothing (said once per run).
pub(crate) fn unknown_key() -> String {
    format!("unknown key: {} for help", key_of(Action::ToggleHelp))
}
