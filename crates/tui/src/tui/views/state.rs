//! What the views draw: a [`ViewState`], built from the app for each
//! frame ([`crate::tui::App::draw`]) or in a test from a model and a
//! config alone. No view reads the app: a view is a function of this
//! state and the frame's area.
//!
//! Invariants: it borrows, never copies, what the app keeps; its answers
//! (what is selected, the blocking view's rows) are computed from what it
//! borrows, by the same functions the app's actions use, so what is drawn
//! highlighted is what an action acts on.

use crate::model::{BlockingRow, Model};

use super::super::action::Pane;
use super::super::config::AppConfig;
use super::super::operator::Operator;
use super::super::replay_status::ReplayStatus;
use super::super::selected::{Selected, selected_in};

/// Everything a frame shows.
pub struct ViewState<'a> {
    /// The data, the view settings, each pane's cursor, the clock.
    pub model: &'a Model,
    /// What the monitor was told at its start.
    pub config: &'a AppConfig,
    /// The pane shown.
    pub pane: Pane,
    /// Whether the help overlay is open, and its scroll.
    pub help: bool,
    /// Lines the help overlay is scrolled by (clamped when drawn).
    pub help_scroll: u16,
    /// The filter being typed, if it is.
    pub filter_input: &'a Option<String>,
    /// A replay's jump time being typed, if it is.
    pub time_input: &'a Option<String>,
    /// The footer's message, if any.
    pub message: &'a Option<String>,
    /// The engine ended (the header says so).
    pub engine_stopped: bool,
    /// Lines the details pane is scrolled by.
    pub details_scroll: u16,
    /// The test holders and the open form or dialog.
    pub operator: &'a Operator,
    /// On a recording: where its cursor is.
    pub replay: &'a Option<ReplayStatus>,
}

impl ViewState<'_> {
    /// What the shown pane has selected.
    pub(crate) fn selected(&self) -> Selected {
        selected_in(
            self.pane,
            self.model,
            &self.operator.test_holders,
            self.config.materializing_after,
        )
    }

    /// The blocking view's rows, in the chosen order.
    pub(crate) fn blocking_rows(&self) -> Vec<BlockingRow> {
        self.model
            .blocking_rows_shown(self.config.materializing_after)
    }
}

#[cfg(test)]
mod tests {
    use ratatui::Terminal;
    use ratatui::backend::TestBackend;

    use super::*;
    use crate::liveness::probe::ProbeMode;
    use crate::model::fixtures::{STATE, demo_model};
    use crate::tui::Theme;

    /// A frame is drawn from a state built here — a model, a config, no
    /// app: what the holders pane shows comes from the model alone.
    #[test]
    fn a_frame_is_drawn_from_a_state_built_without_an_app() {
        let mut model = demo_model();
        model.refresh();
        let config = AppConfig {
            state_dir: STATE.into(),
            probe: ProbeMode::LockFree,
            probe_fallback: None,
            source: crate::engine::source_choice::SourceKind::Kernel,
            source_fallback: None,
            read_only: true,
            theme: Theme::monochrome(),
            materializing_after: crate::model::MATERIALIZING_AFTER,
            attached: None,
            attach_note: None,
        };
        let operator = Operator::default();
        let (nothing, no_replay) = (None, None);
        let state = ViewState {
            model: &model,
            config: &config,
            pane: Pane::Holders,
            help: false,
            help_scroll: 0,
            filter_input: &nothing,
            time_input: &nothing,
            message: &nothing,
            engine_stopped: false,
            details_scroll: 0,
            operator: &operator,
            replay: &no_replay,
        };
        let mut terminal = Terminal::new(TestBackend::new(100, 30)).unwrap();
        terminal
            .draw(|frame| {
                super::super::draw(&state, frame);
            })
            .unwrap();
        let screen = terminal.backend().to_string();
        for shown in ["HOLDER", "pid 1201", "cli/daemon/abc", "by age"] {
            assert!(screen.contains(shown), "{shown}:\n{screen}");
        }
        assert_eq!(state.selected(), Selected::Process { pid: 1201 });
    }
}
