//! The key map: the single source of truth binding keys to actions. The
//! help overlay and the footer hints are generated from [`BINDINGS`];
//! nothing else matches on key codes, except text typed into the filter
//! and the keys of an open form or dialog (see `overlay`).
//!
//! Invariants: a key resolves to at most one action (the first binding
//! that lists it); a binding marked `writes` (it would change locks on
//! disk) resolves to nothing in read-only mode and says so in the help.

use crossterm::event::{KeyCode, KeyEvent, KeyEventKind, KeyModifiers};

use super::action::{Action, Pane};

/// Where a binding is listed in the help.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Group {
    /// Quit, help, pause.
    General,
    /// Moving the selection.
    Navigate,
    /// What is shown.
    View,
    /// Operator actions: test holders, signals, family checks.
    Act,
    /// Moving through a recording (`locktop replay`).
    Replay,
}

impl Group {
    /// Every group, in help order.
    pub const ALL: [Group; 5] = [
        Group::General,
        Group::Navigate,
        Group::View,
        Group::Act,
        Group::Replay,
    ];

    /// The help heading.
    pub fn title(self) -> &'static str {
        match self {
            Group::General => "General",
            Group::Navigate => "Navigate",
            Group::View => "View",
            Group::Act => "Act",
            Group::Replay => "Replay",
        }
    }
}

/// One row of the key map.
#[derive(Debug, Clone, Copy)]
pub struct Binding {
    /// The keys, as (code, modifiers). Shift is ignored for characters.
    pub keys: &'static [(KeyCode, KeyModifiers)],
    /// How the keys are written in the help.
    pub shown: &'static str,
    /// What they do.
    pub action: Action,
    /// One line for the help.
    pub description: &'static str,
    /// Help section.
    pub group: Group,
    /// The short footer hint, if the binding is advertised there.
    pub hint: Option<&'static str>,
    /// Whether the action writes (disabled in read-only mode).
    pub writes: bool,
}

const NONE: KeyModifiers = KeyModifiers::NONE;
const CTRL: KeyModifiers = KeyModifiers::CONTROL;

const fn bind(
    keys: &'static [(KeyCode, KeyModifiers)],
    shown: &'static str,
    action: Action,
    description: &'static str,
    group: Group,
    hint: Option<&'static str>,
) -> Binding {
    Binding {
        keys,
        shown,
        action,
        description,
        group,
        hint,
        writes: action.writes(),
    }
}

use KeyCode::{
    BackTab, Char, Down, End, Enter, Esc, F, Home, Left, PageDown, PageUp, Right, Tab, Up,
};

/// Every binding, in help order.
#[rustfmt::skip]
pub const BINDINGS: &[Binding] = &[
    bind(&[(Char('q'), NONE), (F(10), NONE), (Char('c'), CTRL)], "q F10 ^C", Action::Quit, "quit", Group::General, Some("quit")),
    bind(&[(Char('?'), NONE), (F(1), NONE)], "? F1", Action::ToggleHelp, "show or hide this help", Group::General, Some("help")),
    bind(&[(Char('p'), NONE), (Char(' '), NONE)], "p Space", Action::TogglePause, "pause the view (data kept)", Group::General, Some("pause")),
    bind(&[(Esc, NONE)], "Esc", Action::Escape, "close help / clear filter", Group::General, None),
    bind(&[(Char('l'), CTRL)], "^L", Action::Redraw, "redraw the screen", Group::General, None),
    bind(&[(Char('k'), NONE), (Up, NONE)], "k ↑", Action::Up, "select the row above", Group::Navigate, None),
    bind(&[(Char('j'), NONE), (Down, NONE)], "j ↓", Action::Down, "select the row below", Group::Navigate, None),
    bind(&[(Char('h'), NONE), (Left, NONE)], "h ←", Action::Collapse, "collapse, or go to parent", Group::Navigate, None),
    bind(&[(Char('l'), NONE), (Right, NONE)], "l →", Action::Expand, "expand, or go to 1st child", Group::Navigate, None),
    bind(&[(Enter, NONE)], "Enter", Action::Toggle, "toggle node / show in tree", Group::Navigate, None),
    bind(&[(Char('g'), NONE), (Home, NONE)], "g Home", Action::Top, "first row", Group::Navigate, None),
    bind(&[(Char('G'), NONE), (End, NONE)], "G End", Action::Bottom, "last row", Group::Navigate, None),
    bind(&[(PageUp, NONE)], "PgUp", Action::PageUp, "one page up", Group::Navigate, None),
    bind(&[(PageDown, NONE)], "PgDn", Action::PageDown, "one page down", Group::Navigate, None),
    bind(&[(Char('['), NONE)], "[", Action::DetailsUp, "scroll the details up", Group::Navigate, None),
    bind(&[(Char(']'), NONE)], "]", Action::DetailsDown, "scroll the details down", Group::Navigate, None),
    bind(&[(Char('u'), NONE)], "u", Action::FollowUrgent, "follow the most urgent key", Group::Navigate, Some("urgent")),
    bind(&[(Char('/'), NONE), (F(3), NONE)], "/ F3", Action::StartFilter, "filter: AIH, tag or PID", Group::View, Some("filter")),
    bind(&[(Char('.'), NONE)], ".", Action::NextMatch, "next match of the filter", Group::View, None),
    bind(&[(Char(','), NONE)], ",", Action::PrevMatch, "previous match", Group::View, None),
    bind(&[(Char('a'), NONE)], "a", Action::ToggleFree, "free keys (recent: 10 s)", Group::View, Some("free")),
    bind(&[(Char('s'), NONE)], "s", Action::CycleSort, "sort 2 5: urgency, age, PID, name", Group::View, None),
    bind(&[(Tab, NONE)], "Tab", Action::NextPane, "next pane", Group::View, Some("pane")),
    bind(&[(BackTab, NONE), (BackTab, KeyModifiers::SHIFT)], "S-Tab", Action::PrevPane, "previous pane", Group::View, None),
    bind(&[(Char('1'), NONE), (F(5), NONE)], "1 F5", Action::Show(Pane::Tree), "tree: instances, tags…", Group::View, None),
    bind(&[(Char('2'), NONE)], "2", Action::Show(Pane::Holders), "holders: who holds what", Group::View, None),
    bind(&[(Char('3'), NONE)], "3", Action::Show(Pane::Events), "event log, newest first", Group::View, None),
    bind(&[(Char('4'), NONE)], "4", Action::Show(Pane::TestHolders), "your test holders", Group::View, None),
    bind(&[(Char('5'), NONE)], "5", Action::Show(Pane::Blocking), "blocking: urgent first", Group::View, None),
    bind(&[(Char('n'), NONE)], "n", Action::NewHolder, "hold a family (form)", Group::Act, Some("hold")),
    bind(&[(Char('r'), NONE)], "r", Action::Release, "release or remove holder", Group::Act, None),
    bind(&[(Char('K'), NONE), (F(9), NONE)], "K F9", Action::Kill, "signal a holder's PID", Group::Act, Some("signal")),
    bind(&[(Char('y'), NONE)], "y", Action::Copy, "copy PID, command, path", Group::Act, None),
    bind(&[(Char('c'), NONE)], "c", Action::Check, "why stuck? check family", Group::Act, Some("check")),
    bind(&[(Char('<'), NONE)], "<", Action::StepBack, "previous change", Group::Replay, None),
    bind(&[(Char('>'), NONE)], ">", Action::StepForward, "next change", Group::Replay, None),
    bind(&[(Char('t'), NONE)], "t", Action::JumpToTime, "jump to a time", Group::Replay, None),
    bind(&[(Char('+'), NONE), (Char('='), NONE)], "+", Action::Faster, "play faster", Group::Replay, None),
    bind(&[(Char('-'), NONE)], "-", Action::Slower, "play slower", Group::Replay, None),
    bind(&[(Char('{'), NONE)], "{", Action::ToStart, "recording's start", Group::Replay, None),
    bind(&[(Char('}'), NONE)], "}", Action::ToEnd, "recording's end", Group::Replay, None),
];

/// The first key bound to `action`, as the help writes it (`r`, `K`, `/`):
/// how a message names the key that does something. Every action has a
/// binding (a test proves it).
pub(crate) fn key_of(action: Action) -> &'static str {
    BINDINGS
        .iter()
        .find(|binding| binding.action == action)
        .and_then(|binding| binding.shown.split(' ').next())
        .unwrap_or("?")
}

/// `4 Test holders`: how a message points at a pane.
pub(crate) fn pane_hint(pane: Pane) -> String {
    format!("{} {}", key_of(Action::Show(pane)), pane.title())
}

/// The action bound to `key`, if any. Releases are ignored; bindings that
/// write resolve to nothing when `read_only`.
pub(crate) fn action_for(key: KeyEvent, read_only: bool) -> Option<Action> {
    binding_for(key)
        .filter(|binding| !(read_only && binding.writes))
        .map(|binding| binding.action)
}

/// The binding `key` would trigger, read-only or not (releases: none).
pub(crate) fn binding_for(key: KeyEvent) -> Option<&'static Binding> {
    if key.kind == KeyEventKind::Release {
        return None;
    }
    let modifiers = match key.code {
        Char(_) => key.modifiers - KeyModifiers::SHIFT,
        _ => key.modifiers,
    };
    BINDINGS
        .iter()
        .find(|binding| binding.keys.contains(&(key.code, modifiers)))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn key(code: KeyCode, modifiers: KeyModifiers) -> KeyEvent {
        KeyEvent::new(code, modifiers)
    }

    #[test]
    fn hints_name_the_bound_keys() {
        assert_eq!(key_of(Action::Release), "r");
        assert_eq!(key_of(Action::Kill), "K");
        assert_eq!(key_of(Action::Quit), "q");
        assert_eq!(pane_hint(Pane::TestHolders), "4 Test holders");
        for pane in Pane::ALL {
            assert_ne!(key_of(Action::Show(pane)), "?", "{pane:?} has no key");
        }
    }

    #[test]
    fn the_free_key_help_names_how_long_freed_keys_stay_shown() {
        let free = BINDINGS.iter().find(|b| b.action == Action::ToggleFree);
        let secs = crate::model::RECENTLY_FREED.as_secs();
        assert!(free.unwrap().description.contains(&format!("{secs} s")));
    }

    #[test]
    fn f_keys_are_htop_aliases() {
        let f = |n| action_for(key(F(n), NONE), false);
        assert_eq!(f(1), Some(Action::ToggleHelp));
        assert_eq!(f(3), Some(Action::StartFilter));
        assert_eq!(f(5), Some(Action::Show(Pane::Tree)));
        assert_eq!(f(9), Some(Action::Kill));
        assert_eq!(f(10), Some(Action::Quit));
        assert_eq!(action_for(key(F(9), NONE), true), None, "F9 writes");
    }

    #[test]
    fn every_key_resolves_to_one_action_only() {
        let mut seen = std::collections::HashSet::new();
        for binding in BINDINGS {
            for pair in binding.keys {
                assert!(seen.insert(*pair), "{pair:?} bound twice");
            }
        }
    }

    #[test]
    fn shifted_characters_and_control_keys_resolve() {
        assert_eq!(
            action_for(key(Char('G'), KeyModifiers::SHIFT), false),
            Some(Action::Bottom)
        );
        assert_eq!(
            action_for(key(Char('?'), KeyModifiers::SHIFT), false),
            Some(Action::ToggleHelp)
        );
        assert_eq!(action_for(key(Char('c'), CTRL), false), Some(Action::Quit));
        assert_eq!(action_for(key(Char('c'), NONE), false), Some(Action::Check));
        assert_eq!(
            action_for(key(Char('K'), KeyModifiers::SHIFT), false),
            Some(Action::Kill)
        );
    }

    #[test]
    fn read_only_disables_exactly_the_bindings_that_write() {
        for binding in BINDINGS {
            let (code, modifiers) = binding.keys[0];
            let expected = (!binding.writes).then_some(binding.action);
            assert_eq!(action_for(key(code, modifiers), true), expected);
            assert_eq!(binding.writes, binding.action.writes());
        }
        let disabled: Vec<&str> = BINDINGS
            .iter()
            .filter(|b| b.writes)
            .map(|b| b.shown)
            .collect();
        assert_eq!(disabled, ["n", "r", "K F9"]);
        assert_eq!(action_for(key(Char('c'), NONE), true), Some(Action::Check));
    }
}
