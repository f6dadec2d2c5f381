//! What the operator can ask for, independent of which key asked.
//! Invariant: every input (key, mouse) becomes one [`Action`] (or none)
//! before it touches state; the key map in [`super::keymap`] is the only
//! place that binds keys to actions. An open overlay takes the keys
//! first and reads its own few ([`super::overlay`]: `y`/`n`/`q`/Esc to
//! answer a dialog, `K` and `c` after a signal, `j`/`k`/`g`/`G` and the
//! arrows to scroll a report, typing into a form), each shown in the
//! overlay's own line; they are no actions of the panes.

/// The main panes, switched with `1`…`5` and Tab.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Pane {
    /// The Instances / Tags / Other tree.
    Tree,
    /// Held keys grouped by holder process.
    Holders,
    /// The event log.
    Events,
    /// The test holders started from this monitor.
    TestHolders,
    /// Held keys, those that need someone to act first, then contended.
    Blocking,
}

impl Pane {
    /// Every pane, in tab order.
    pub const ALL: [Pane; 5] = [
        Pane::Tree,
        Pane::Holders,
        Pane::Events,
        Pane::TestHolders,
        Pane::Blocking,
    ];

    /// The tab title.
    pub fn title(self) -> &'static str {
        match self {
            Pane::Tree => "Tree",
            Pane::Holders => "Holders",
            Pane::Events => "Events",
            Pane::TestHolders => "Test holders",
            Pane::Blocking => "Blocking",
        }
    }

    /// The next pane in tab order (wrapping), or the previous one.
    pub fn cycle(self, forward: bool) -> Self {
        let index = Self::ALL.iter().position(|&p| p == self).unwrap_or(0);
        let len = Self::ALL.len();
        let next = if forward { index + 1 } else { index + len - 1 };
        Self::ALL[next % len]
    }
}

/// One thing the operator asked for.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Action {
    /// Leave locktop.
    Quit,
    /// Open or close the help overlay.
    ToggleHelp,
    /// Selection one row up.
    Up,
    /// Selection one row down.
    Down,
    /// Collapse the selected node (or go to its parent).
    Collapse,
    /// Expand the selected node (or go to its first child).
    Expand,
    /// Toggle the selected node; on a holder's key, show it in the tree.
    Toggle,
    /// First row.
    Top,
    /// Last row.
    Bottom,
    /// One page up.
    PageUp,
    /// One page down.
    PageDown,
    /// Start typing the incremental filter.
    StartFilter,
    /// The next row the filter matches (wrapping).
    NextMatch,
    /// The previous row the filter matches (wrapping).
    PrevMatch,
    /// Close the overlay, or clear the filter.
    Escape,
    /// Scroll the details pane one line up.
    DetailsUp,
    /// Scroll the details pane one line down.
    DetailsDown,
    /// Next pane.
    NextPane,
    /// Previous pane.
    PrevPane,
    /// Show one pane.
    Show(Pane),
    /// Show or hide free (stale) keys.
    ToggleFree,
    /// Next order of the holders / blocking view (age, PID, name).
    CycleSort,
    /// Freeze or thaw the view.
    TogglePause,
    /// Open the form that starts a test holder.
    NewHolder,
    /// Release the selected test holder.
    Release,
    /// Signal a holder: a real one (SIGTERM, then SIGKILL) or a child test
    /// holder (SIGKILL), after a confirmation.
    Kill,
    /// "Why is this stuck?": check the selected key's family.
    Check,
    /// Copy the selection's PID, command line or path (OSC 52).
    Copy,
    /// Clear and redraw the whole screen (after something else wrote on
    /// the terminal).
    Redraw,
    /// Replay: the cursor to the previous change.
    StepBack,
    /// Replay: the cursor to the next change.
    StepForward,
    /// Replay: type a time to put the cursor at.
    JumpToTime,
    /// Replay: play faster.
    Faster,
    /// Replay: play slower.
    Slower,
    /// Replay: the cursor to the recording's start.
    ToStart,
    /// Replay: the cursor to the recording's end.
    ToEnd,
    /// The tree selects the most urgent key again and follows it (as it
    /// does until the operator moves away).
    FollowUrgent,
}

impl Action {
    /// True for actions that take, release or signal something: refused
    /// in read-only mode. (`Check` is not: read-only makes it passive.)
    pub const fn writes(self) -> bool {
        matches!(self, Action::NewHolder | Action::Release | Action::Kill)
    }

    /// True for actions that move no selection: the tree keeps following
    /// the most urgent key through them (help, redraw, pause, scrolling
    /// the details, and every move of a replay's cursor — the urgent key
    /// at the new time is the one to show).
    pub const fn keeps_following(self) -> bool {
        matches!(
            self,
            Action::ToggleHelp
                | Action::Redraw
                | Action::TogglePause
                | Action::DetailsUp
                | Action::DetailsDown
                | Action::StepBack
                | Action::StepForward
                | Action::JumpToTime
                | Action::Faster
                | Action::Slower
                | Action::ToStart
                | Action::ToEnd
                | Action::FollowUrgent
        )
    }
}
