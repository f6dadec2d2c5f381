//! The UI's state machine, drivable without a terminal: feed it deltas
//! ([`App::apply`]), inputs ([`App::handle_event`]) and the clock
//! ([`App::tick`]); draw it on any ratatui frame ([`App::draw`]).
//!
//! Invariants: input becomes an [`Action`] before it changes state; every
//! state change sets the dirty flag and nothing else does, so the event
//! loop draws only when something changed; drawing reads the clock from
//! the model (`now` is injected), never from `SystemTime::now()`.
//! Operator actions (`n`, `r`, `K`, `c`) act through the optional
//! [`Ops`] handles; without them (tests) they say so instead of acting.

use std::time::SystemTime;

use ratatui::Frame;

use crate::engine::Delta;
use crate::model::Model;

use super::action::{Action, Pane};
use super::config::AppConfig;
use super::handles::Ops;
use super::operator::Operator;
use super::overlay::Overlay;
use super::views::{self, Drawn, HitMap};

/// The whole UI.
pub struct App {
    pub(crate) model: Model,
    pub(crate) config: AppConfig,
    pub(crate) pane: Pane,
    pub(crate) help: bool,
    /// `Some(text)` while the filter is being typed.
    pub(crate) filter_input: Option<String>,
    pub(crate) message: Option<String>,
    pub(crate) engine_stopped: bool,
    /// Rows per page of the current list, as the last frame laid it out.
    pub(crate) page: usize,
    /// Where the last frame put things, for mouse hits.
    pub(crate) hits: HitMap,
    /// Test holders, the operator's hands and the open form or dialog.
    pub(crate) operator: Operator,
    /// Lines the details pane is scrolled by (back to 0 on any other
    /// action: a new selection starts at its top).
    pub(crate) details_scroll: u16,
    /// Whether an unbound key already said "? for help" (said once).
    pub(crate) unknown_key_hinted: bool,
    /// Text waiting to be put on the clipboard by the event loop.
    pub(crate) clipboard: Option<String>,
    /// The terminal is to be cleared before the next frame (Ctrl-L).
    pub(crate) clear_screen: bool,
    /// Lines the help overlay is scrolled by (clamped at draw).
    pub(crate) help_scroll: u16,
    /// `y` presses on the current selection (any other action resets).
    pub(crate) copy_press: usize,
    /// While the tree's selection follows the most urgent key: the
    /// model's selection count when it last moved it. `None` once the
    /// operator moved a selection (until `u` says to follow again).
    pub(crate) following_urgent: Option<u64>,
    /// On a recording (`locktop replay`): where its cursor is, and what the
    /// operator asked of it since the player last looked.
    pub(crate) replay: Option<super::replay_status::ReplayStatus>,
    /// `Some(text)` while a replay's jump time is being typed.
    pub(crate) time_input: Option<String>,
    pub(crate) replay_requests: Vec<super::replay_status::ReplayRequest>,
    quit: bool,
    dirty: bool,
}

impl App {
    /// A UI on `model` (usually empty; deltas fill it).
    pub fn new(config: AppConfig, mut model: Model) -> Self {
        model.set_materializing(config.materializing_after);
        Self {
            model,
            config,
            pane: Pane::Tree,
            help: false,
            filter_input: None,
            message: None,
            engine_stopped: false,
            page: 10,
            hits: HitMap::default(),
            operator: Operator::default(),
            details_scroll: 0,
            unknown_key_hinted: false,
            clipboard: None,
            clear_screen: false,
            help_scroll: 0,
            copy_press: 0,
            following_urgent: Some(0),
            replay: None,
            time_input: None,
            replay_requests: Vec::new(),
            quit: false,
            dirty: true,
        }
    }

    /// Gives the UI its hands: holders, checks, engine commands.
    pub(crate) fn with_ops(mut self, ops: Ops) -> Self {
        self.operator.ops = Some(ops);
        self
    }

    /// The test holders started from this UI.
    pub fn test_holders(&self) -> &crate::model::TestHolders {
        &self.operator.test_holders
    }

    /// Whether a form or dialog is open.
    #[cfg(test)]
    pub(crate) fn has_overlay(&self) -> bool {
        self.operator.overlay.is_some()
    }

    /// Sets the status line (e.g. why the holder manager is missing).
    pub(crate) fn set_message(&mut self, message: impl Into<String>) {
        self.message = Some(message.into());
        self.dirty = true;
    }

    /// The status line's message, if any.
    pub fn message(&self) -> Option<&str> {
        self.message.as_deref()
    }

    /// The model (read-only).
    pub fn model(&self) -> &Model {
        &self.model
    }

    /// The model, for tests and callers that drive it directly.
    pub(crate) fn model_mut(&mut self) -> &mut Model {
        self.dirty = true;
        &mut self.model
    }

    /// Where the last frame put the list and the tabs (for mouse hits).
    pub fn hits(&self) -> HitMap {
        self.hits
    }

    /// The pane shown.
    pub fn pane(&self) -> Pane {
        self.pane
    }

    /// Whether the operator asked to quit.
    pub(crate) fn should_quit(&self) -> bool {
        self.quit
    }

    /// Asks the event loop to stop (signals, end of input).
    pub fn quit(&mut self) {
        self.quit = true;
    }

    /// True once after Ctrl-L: clear the terminal before the next frame.
    pub(crate) fn take_clear_screen(&mut self) -> bool {
        std::mem::take(&mut self.clear_screen)
    }

    /// True once since the last call if anything changed (then draw).
    pub(crate) fn take_dirty(&mut self) -> bool {
        std::mem::take(&mut self.dirty)
    }

    /// Marks the screen as needing a redraw (e.g. after a resize).
    pub(crate) fn mark_dirty(&mut self) {
        self.dirty = true;
    }

    /// Folds an engine delta in.
    pub fn apply(&mut self, delta: Delta) {
        self.model.apply(delta);
        self.dirty = true;
    }

    /// The keys the last burst of deltas left unsettled are judged, once
    /// `now` is past [`Model::settle_due`] (the event loop wakes then).
    pub fn settle(&mut self, now: SystemTime) {
        if self.model.settle(now) {
            self.dirty = true;
        }
    }

    /// Notes that the engine's channel closed: no more updates.
    pub(crate) fn engine_stopped(&mut self) {
        self.engine_stopped = true;
        self.message = Some("engine stopped: the view is no longer updated".into());
        self.dirty = true;
    }

    /// The clock moved. Redraws only when something on screen shows a
    /// running age (a held key), rows aged out, or the header's clock
    /// (minutes) turned; a paused view keeps its clock.
    pub fn tick(&mut self, now: SystemTime) {
        self.watch_signalled();
        if self.model.paused() {
            return;
        }
        let minute = |t: SystemTime| crate::time_format::rfc3339(t).get(..16).map(str::to_owned);
        let minute_turned = minute(now) != minute(self.model.now());
        let rows_changed = self.model.set_now(now) || minute_turned;
        let counts = self.model.data().counts;
        let ages_shown = counts.live + counts.own + counts.in_flight > 0
            || (self.pane == Pane::TestHolders && self.operator.test_holders.running() > 0);
        if rows_changed || ages_shown {
            self.dirty = true;
        }
    }

    /// Draws the whole screen: derives the model's rows if the data
    /// changed, draws from the view state, then keeps what the frame laid
    /// out (hits, page, scroll) for the next input.
    pub fn draw(&mut self, frame: &mut Frame) {
        self.follow_selections();
        let drawn = views::draw(&self.view_state(), frame);
        self.laid_out(drawn);
    }

    /// What the views draw, borrowed from the app.
    pub(crate) fn view_state(&self) -> views::ViewState<'_> {
        views::ViewState {
            model: &self.model,
            config: &self.config,
            pane: self.pane,
            help: self.help,
            help_scroll: self.help_scroll,
            filter_input: &self.filter_input,
            time_input: &self.time_input,
            message: &self.message,
            engine_stopped: self.engine_stopped,
            details_scroll: self.details_scroll,
            operator: &self.operator,
            replay: &self.replay,
        }
    }

    fn laid_out(&mut self, drawn: Drawn) {
        self.hits = drawn.hits;
        self.help_scroll = self.help_scroll.min(drawn.help_max);
        self.details_scroll = self.details_scroll.min(drawn.details_max);
        if let Some(page) = drawn.page {
            self.page = page;
            self.record_offset(drawn.hits.offset);
        }
        if let (Some(area), Some(Overlay::Report(report))) =
            (drawn.report, self.operator.overlay.as_mut())
        {
            report.scroll = report.scroll.min(area.max_scroll);
            report.page = area.page;
        }
    }

    /// Performs one action.
    pub(crate) fn perform(&mut self, action: Action) {
        self.dirty = true;
        if !action.keeps_following() {
            self.following_urgent = None;
        }
        self.follow_selections();
        if !matches!(action, Action::DetailsUp | Action::DetailsDown) {
            self.details_scroll = 0;
        }
        if action != Action::Copy {
            self.copy_press = 0;
        }
        match action {
            Action::DetailsUp => self.details_scroll = self.details_scroll.saturating_sub(1),
            Action::DetailsDown => self.details_scroll = self.details_scroll.saturating_add(1),
            Action::Quit => self.quit = true,
            Action::ToggleHelp => {
                self.help = !self.help;
                self.help_scroll = 0;
            }
            Action::Redraw => self.clear_screen = true,
            Action::Escape => {
                if self.help {
                    self.help = false;
                } else if !self.model.settings().filter.is_empty() {
                    self.model.set_filter("");
                } else {
                    self.message = None;
                }
            }
            Action::Up => self.move_by(-1),
            Action::Down => self.move_by(1),
            Action::PageUp => self.move_by(-(self.page.max(1) as isize)),
            Action::PageDown => self.move_by(self.page.max(1) as isize),
            Action::Top => self.move_to(0),
            Action::Bottom => self.move_to(usize::MAX),
            Action::Collapse if self.pane == Pane::Tree => self.model.collapse(),
            Action::Expand if self.pane == Pane::Tree => self.model.expand(),
            Action::Toggle => self.toggle(),
            Action::Collapse | Action::Expand => {}
            Action::NextMatch => self.next_match(true),
            Action::PrevMatch => self.next_match(false),
            Action::StartFilter => {
                self.filter_input = Some(self.model.settings().filter.clone());
            }
            Action::NextPane => self.pane = self.pane.cycle(true),
            Action::PrevPane => self.pane = self.pane.cycle(false),
            Action::Show(pane) => self.pane = pane,
            Action::ToggleFree => {
                let show = !self.model.settings().show_free;
                self.model.set_show_free(show);
            }
            Action::CycleSort => self.cycle_sort(),
            Action::Copy => self.copy_selection(),
            Action::TogglePause if self.replay.is_some() => {
                self.replay_requests
                    .push(super::replay_status::ReplayRequest::PlayPause);
            }
            Action::TogglePause => {
                let paused = !self.model.paused();
                self.model.set_paused(paused);
            }
            Action::NewHolder | Action::Release | Action::Kill | Action::Check => self.act(action),
            Action::FollowUrgent => self.follow_urgent_again(),
            Action::StepBack
            | Action::StepForward
            | Action::JumpToTime
            | Action::Faster
            | Action::Slower
            | Action::ToStart
            | Action::ToEnd => self.replay_action(action),
        }
    }

    /// A replay key: a request for the player, or, live, a message.
    fn replay_action(&mut self, action: Action) {
        use super::replay_status::ReplayRequest;
        if self.replay.is_none() {
            self.message = Some(format!(
                "{} moves through a recording: locktop replay FILE",
                super::keymap::key_of(action)
            ));
            return;
        }
        let request = match action {
            Action::StepBack => ReplayRequest::StepBack,
            Action::StepForward => ReplayRequest::StepForward,
            Action::Faster => ReplayRequest::Faster,
            Action::Slower => ReplayRequest::Slower,
            Action::ToStart => ReplayRequest::Start,
            Action::ToEnd => ReplayRequest::End,
            _ => {
                self.time_input = Some(String::new());
                return;
            }
        };
        self.replay_requests.push(request);
    }

    /// What the operator asked of the replay since the last call.
    pub(crate) fn take_replay_requests(&mut self) -> Vec<super::replay_status::ReplayRequest> {
        std::mem::take(&mut self.replay_requests)
    }

    /// The replay's cursor and playing, as the header shows them.
    pub(crate) fn set_replay_status(&mut self, status: super::replay_status::ReplayStatus) {
        self.replay = Some(status);
        self.dirty = true;
    }

    fn move_by(&mut self, by: isize) {
        let index = self.selected_index();
        self.select_index(index.saturating_add_signed(by));
    }

    fn move_to(&mut self, index: usize) {
        self.select_index(index);
    }
}
