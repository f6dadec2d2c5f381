//! The monitor on a recording (`locktop replay FILE…`): the same app,
//! panes and views as live, fed from a journal instead of the engine,
//! with a cursor in time the operator moves (play, step, jump, start,
//! end, speed).
//!
//! Invariants: the model is only ever fed the recording's changes, in
//! order, through the same fold as live ([`crate::model::Model::apply`]),
//! and its clock is the cursor (verdicts and ages are judged as at that
//! time); moving the cursor anywhere rebuilds the model from the last
//! checkpoint at least [`EVENTS_WINDOW`] before it, so the event log
//! holds the changes of that window, never changes after the cursor;
//! nothing is probed, read from `/proc` or signalled (`n`, `r`, `K` are
//! disabled; `c` answers from the recorded state); the terminal is set
//! up and restored as live.

use std::sync::Arc;
use std::sync::atomic::{AtomicU8, Ordering};
use std::time::{Duration, SystemTime};

use anyhow::Context as _;
use crossterm::event::EventStream;
use futures::StreamExt;

use crate::engine::Delta;
use crate::engine::fold::Fold;
use crate::journal::format::Entry;
use crate::journal::reader::entry_time;
use crate::journal::{JournalSet, Position};
use crate::model::Model;

use super::app::App;
use super::config::AppConfig;
use super::replay_status::{ReplayRequest, ReplayStatus};
use super::terminal::TerminalGuard;
use super::theme::Theme;

/// How far before the cursor the model is rebuilt from: the event log
/// shows the changes of this window.
pub(crate) const EVENTS_WINDOW: Duration = Duration::from_secs(300);
/// Playing speeds (recorded seconds per second).
pub(crate) const SPEEDS: [f64; 9] = [0.5, 1.0, 2.0, 5.0, 10.0, 30.0, 60.0, 300.0, 1800.0];
/// [`Player::holder_alive`]: not recorded, alive, gone.
const UNKNOWN: u8 = 0;
const ALIVE: u8 = 1;
const GONE: u8 = 2;
/// How often a playing replay moves its cursor.
const FRAME: Duration = Duration::from_millis(100);

/// A recording and the cursor in it; feeds an [`App`].
pub(crate) struct Player {
    set: JournalSet,
    /// The recorded state at the cursor (what another recording's first
    /// checkpoint is compared with).
    state: Fold,
    /// The first line after the cursor.
    next: Position,
    status: ReplayStatus,
    speed: usize,
    /// The model's answer to "does this holder still run": what the
    /// recorder saw for the change being applied ([`UNKNOWN`] when it
    /// did not see the change happen).
    holder_alive: Arc<AtomicU8>,
}

impl Player {
    /// A player at the start of `set`, and the app it feeds.
    pub fn open(set: JournalSet, theme: Theme) -> anyhow::Result<(Self, App)> {
        let header = set.header().clone();
        let holder_alive = Arc::new(AtomicU8::new(UNKNOWN));
        let alive = holder_alive.clone();
        let model = Model::new(Box::new(move |_| match alive.load(Ordering::Relaxed) {
            UNKNOWN => None,
            known => Some(known == ALIVE),
        }));
        let config = AppConfig {
            state_dir: header.state_dir.clone(),
            probe: header.probe,
            probe_fallback: None,
            source: crate::engine::source_choice::SourceKind::Inference,
            source_fallback: None,
            read_only: true,
            theme,
            materializing_after: Duration::try_from_secs_f64(header.materializing_after)
                .unwrap_or(crate::operate::verdict::MATERIALIZING_AFTER),
            attached: None,
            attach_note: None,
        };
        let mut app = App::new(config, model);
        let start = set.start();
        let end = set.end()?;
        let speed = 1;
        let mut player = Self {
            state: Fold::default(),
            next: Position::default(),
            status: ReplayStatus {
                cursor: start,
                start,
                end,
                playing: false,
                speed: SPEEDS[speed],
                host: header.host.clone(),
                gap: None,
                doubt: None,
                cut_short: false,
            },
            set,
            speed,
            holder_alive,
        };
        player.rebuild(&mut app, start)?;
        Ok((player, app))
    }

    /// The header's view of the replay.
    pub fn status(&self) -> &ReplayStatus {
        &self.status
    }

    /// Does what the operator asked; a time that cannot be read, or a
    /// step past either end, is said on the status line.
    pub fn handle(&mut self, app: &mut App, request: ReplayRequest) -> anyhow::Result<()> {
        let status = &mut self.status;
        match request {
            ReplayRequest::PlayPause => {
                if !status.playing && status.cursor >= status.end {
                    // Played to the end: play again from the start.
                    self.rebuild(app, self.status.start)?;
                }
                self.status.playing = !self.status.playing;
            }
            ReplayRequest::Faster => self.speed = (self.speed + 1).min(SPEEDS.len() - 1),
            ReplayRequest::Slower => self.speed = self.speed.saturating_sub(1),
            ReplayRequest::Start => self.rebuild(app, self.status.start)?,
            ReplayRequest::End => self.rebuild(app, self.status.end)?,
            ReplayRequest::StepForward => match self.next_change()? {
                Some(time) => self.advance(app, time)?,
                None => app.set_message("the recording's last change: nothing after it"),
            },
            ReplayRequest::StepBack => match self.set.previous_change(self.status.cursor)? {
                Some(time) => self.rebuild(app, time)?,
                None => app.set_message("the recording's first change: nothing before it"),
            },
            ReplayRequest::Jump(text) => match self.jump_target(&text) {
                Ok(time) => {
                    self.rebuild(app, time)?;
                    if time < self.status.start {
                        app.set_message(format!(
                            "{} is before the recording: at its start, {}",
                            crate::time_format::rfc3339(time),
                            crate::time_format::rfc3339(self.status.start)
                        ));
                    }
                }
                Err(error) => app.set_message(error.to_string()),
            },
        }
        self.status.speed = SPEEDS[self.speed];
        let warnings = self.set.take_warnings();
        if !warnings.is_empty() {
            app.set_message(format!("warning: {}", warnings.join(" · ")));
        }
        app.set_replay_status(self.status.clone());
        Ok(())
    }

    /// One frame of playing: the cursor moves by the frame's length
    /// times the speed (stopping at the end).
    pub(crate) fn play_frame(&mut self, app: &mut App, frame: Duration) -> anyhow::Result<()> {
        if !self.status.playing {
            return Ok(());
        }
        let target = self.status.cursor + frame.mul_f64(self.status.speed);
        if target >= self.status.end {
            self.status.playing = false;
        }
        self.advance(app, target.min(self.status.end))?;
        app.set_replay_status(self.status.clone());
        Ok(())
    }

    /// The time `text` names: RFC 3339, or a signed duration from the
    /// cursor (past the end: the end; before the start it is kept, for
    /// the status line to say so).
    fn jump_target(&self, text: &str) -> anyhow::Result<SystemTime> {
        let text = text.trim();
        let time = if let Some(later) = text.strip_prefix('+') {
            let by = humantime::parse_duration(later.trim())
                .map_err(|_| anyhow::anyhow!("bad time {text:?}: +30s, -5m or RFC 3339"))?;
            self.status
                .cursor
                .checked_add(by)
                .unwrap_or(self.status.end)
        } else if text.starts_with('-') {
            crate::journal::time_arg::parse(text, self.status.cursor)?
        } else {
            crate::journal::time_arg::parse(text, SystemTime::now())?
        };
        Ok(time.min(self.status.end))
    }

    /// The time of the first key change after the cursor.
    fn next_change(&self) -> anyhow::Result<Option<SystemTime>> {
        let mut lines = self.set.lines_from(self.next)?;
        while let Some(entry) = lines.next_entry(&self.state)? {
            if let Entry::Change {
                delta: Delta::Key { .. } | Delta::Removed { .. },
                time,
                ..
            } = entry
                && time > self.status.cursor
            {
                return Ok(Some(time));
            }
        }
        Ok(None)
    }

    /// The model rebuilt at `time`: the state [`EVENTS_WINDOW`] before
    /// it (or at the start), then every change up to it.
    fn rebuild(&mut self, app: &mut App, time: SystemTime) -> anyhow::Result<()> {
        let time = time.clamp(self.status.start, self.status.end);
        let from = time
            .checked_sub(EVENTS_WINDOW)
            .unwrap_or(self.status.start)
            .max(self.status.start);
        let replayed = self.set.state_at(from)?;
        let model = app.model_mut();
        model.reset_data();
        model.set_now(from);
        let watcher = replayed.state.watcher();
        app.apply(Delta::Health(watcher.health.clone()));
        for (key, state) in replayed.state.keys().iter() {
            app.apply(Delta::Key {
                key: key.clone(),
                state: state.clone(),
                previous: None,
                at: from,
            });
        }
        app.apply(Delta::Problems(watcher.problems.clone()));
        app.apply(Delta::Synced {
            keys: replayed.state.keys().len(),
            at: from,
        });
        self.state = replayed.state;
        self.next = replayed.next;
        self.status.cursor = from;
        self.advance(app, time)
    }

    /// Applies every change after the cursor up to `time`, then puts the
    /// cursor (and the model's clock) at `time`.
    fn advance(&mut self, app: &mut App, time: SystemTime) -> anyhow::Result<()> {
        let mut lines = self.set.lines_from(self.next)?;
        let doubt = loop {
            let before = lines.position();
            let Some(entry) = lines.next_entry(&self.state)? else {
                self.next = lines.position();
                break lines.doubt();
            };
            let Some(at) = entry_time(&entry) else {
                continue;
            };
            if at > time {
                self.next = before;
                // A whole checkpoint read on the way to this entry makes
                // the state sure from its time on, not at `time`.
                break lines.doubt_before_entry();
            }
            if let Entry::Change {
                delta,
                holder_alive,
                ..
            } = entry
            {
                let alive = holder_alive.map_or(UNKNOWN, |alive| if alive { ALIVE } else { GONE });
                self.holder_alive.store(alive, Ordering::Relaxed);
                self.state.apply(delta.clone());
                app.model_mut().set_now(at);
                app.apply(delta);
            }
        };
        self.status.cursor = time;
        self.status.gap = self.set.gap_at(time)?;
        self.status.doubt = doubt.map(|doubt| self.set.doubt_words(&doubt));
        // The cursor stops at the end: only a recording with no end line is
        // past it there.
        self.status.cut_short = self.set.past_end(time)?;
        // In a gap nothing is known: the screen is judged as at the last
        // known moment, and the header says so.
        let judged = self.status.gap.as_ref().map_or(time, |gap| gap.from);
        app.model_mut().set_now(judged);
        app.mark_dirty();
        Ok(())
    }
}

/// Runs the replay monitor on `set` until the operator quits or a signal
/// arrives; the terminal is restored on every way out.
pub async fn run(set: JournalSet) -> anyhow::Result<()> {
    let stop = super::event_loop::stop_signals()?;
    super::event_loop::require_terminal()?;
    let (mut player, mut app) = Player::open(set, Theme::from_env())?;
    app.set_replay_status(player.status().clone());
    super::terminal::install_panic_hook();
    let mut guard = TerminalGuard::enter().context("cannot set up the terminal")?;
    let result = replay_loop(&mut guard, &mut player, &mut app, stop).await;
    drop(guard);
    result
}

async fn replay_loop(
    guard: &mut TerminalGuard,
    player: &mut Player,
    app: &mut App,
    stop: impl Future<Output = ()>,
) -> anyhow::Result<()> {
    tokio::pin!(stop);
    let mut input = EventStream::new();
    let mut frames = tokio::time::interval(FRAME);
    frames.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        for request in app.take_replay_requests() {
            player.handle(app, request)?;
        }
        if let Some(text) = app.take_clipboard() {
            use super::clipboard::Clipboard;
            if let Err(error) = guard.terminal.backend_mut().copy(&text) {
                app.set_message(format!("cannot write to the clipboard: {error}"));
            }
        }
        if app.take_clear_screen() {
            guard.terminal.clear().context("cannot clear the screen")?;
            app.mark_dirty();
        }
        if app.take_dirty() {
            guard
                .terminal
                .draw(|frame| app.draw(frame))
                .context("cannot draw")?;
        }
        if app.should_quit() {
            return Ok(());
        }
        tokio::select! {
            event = input.next() => match event {
                Some(Ok(event)) => app.handle_event(event),
                Some(Err(error)) => return Err(error).context("cannot read terminal input"),
                None => app.quit(),
            },
            _ = frames.tick(), if player.status().playing => player.play_frame(app, FRAME)?,
            () = &mut stop => app.quit(),
        }
    }
}
