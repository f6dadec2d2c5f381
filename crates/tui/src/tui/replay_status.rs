//! What the monitor shows of a replay (where its cursor is, how it
//! plays, what the files cannot tell there) and what the operator asks of
//! it: plain values the app keeps and the views read, apart from the
//! player that moves the cursor ([`super::replay`]).

use std::time::SystemTime;

use crate::journal::Gap;

/// What the header says of the replay.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct ReplayStatus {
    /// The cursor: the time every pane shows.
    pub cursor: SystemTime,
    /// The recording's first complete view.
    pub start: SystemTime,
    /// Its last line.
    pub end: SystemTime,
    /// Whether the cursor moves by itself.
    pub playing: bool,
    /// Recorded seconds per second while playing.
    pub speed: f64,
    /// The host recorded.
    pub host: String,
    /// When the cursor is where the files hold no state: between two
    /// recordings (the screen shows the state at the first one's end),
    /// or in a missing part (the screen shows the state before it, and
    /// says it is not the state at the cursor).
    pub gap: Option<Gap>,
    /// When damaged lines make the state at the cursor unsure: what and
    /// where (until the next whole checkpoint).
    pub doubt: Option<String>,
    /// When the cursor is at or after the last line of a recording with
    /// no end line (not stopped cleanly — killed, a crash, a full disk —
    /// or still being written): what came after that line, those of its
    /// own millisecond too, is unknown, and the screen is the last state
    /// recorded.
    pub cut_short: bool,
}

/// What the operator asked of the replay.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum ReplayRequest {
    /// Play or pause.
    PlayPause,
    /// The cursor to the previous change.
    StepBack,
    /// The cursor to the next change.
    StepForward,
    /// The cursor to a typed time: RFC 3339, or `+`/`-` a duration from
    /// the cursor.
    Jump(String),
    /// Faster.
    Faster,
    /// Slower.
    Slower,
    /// The cursor to the start.
    Start,
    /// The cursor to the end.
    End,
}
