//! Helpers every TUI test uses: an app on the demo model (fixed clock),
//! key presses, typing, selecting a tree row, drawing to a `TestBackend`.

use crossterm::event::{KeyCode, KeyEvent, KeyModifiers};
use ratatui::Terminal;
use ratatui::backend::TestBackend;

use crate::liveness::probe::ProbeMode;
use crate::model::fixtures::{STATE, demo_model};
use crate::model::{Model, Section};
use crate::operate::signal::Target;
use crate::tui::{App, AppConfig, Theme};

/// An app on `model` watching `state_dir`, with `theme`.
pub(super) fn app_with(theme: Theme, model: Model, state_dir: &std::path::Path) -> App {
    let config = AppConfig {
        state_dir: state_dir.to_path_buf(),
        probe: ProbeMode::Acquire,
        probe_fallback: None,
        source: crate::engine::source_choice::SourceKind::Inference,
        source_fallback: None,
        read_only: false,
        theme,
        materializing_after: crate::model::MATERIALIZING_AFTER,
        attached: None,
        attach_note: None,
    };
    App::new(config, model)
}

/// An app on `model` watching `state_dir`, in colour.
pub(super) fn app_on(model: Model, state_dir: &std::path::Path) -> App {
    app_with(Theme::color(), model, state_dir)
}

/// An app on the demo model (every state, nested AIHs, fixed clock). Its
/// holders are fixtures, not processes: the signal dialog binds them
/// detached (it can draw, never send).
pub(super) fn demo_app() -> App {
    let mut app = app_on(demo_model(), STATE.as_ref());
    app.operator.verify = Box::new(|process, _, _| Ok(Target::detached(process.clone())));
    app
}

/// One frame of `app` at `width`×`height`.
pub(super) fn render(app: &mut App, width: u16, height: u16) -> Terminal<TestBackend> {
    let mut terminal = Terminal::new(TestBackend::new(width, height)).unwrap();
    terminal.draw(|frame| app.draw(frame)).unwrap();
    terminal
}

/// One 80×24 frame of `app`.
pub(super) fn screen(app: &mut App) -> Terminal<TestBackend> {
    render(app, 80, 24)
}

/// The text of one 80×24 frame.
pub(super) fn text_of(app: &mut App) -> String {
    screen(app).backend().to_string()
}

/// Presses `code` (no modifiers).
pub(super) fn press(app: &mut App, code: KeyCode) {
    app.handle_key(KeyEvent::new(code, KeyModifiers::NONE));
}

/// Types `text`, one key per character.
pub(super) fn type_text(app: &mut App, text: &str) {
    text.chars().for_each(|c| press(app, KeyCode::Char(c)));
}

/// Selects the tree row of `(section, path)`.
pub(super) fn select(app: &mut App, section: Section, path: &str) {
    let model = app.model_mut();
    let id = model.data().tree.find(section, path).unwrap();
    assert!(model.select_node(id), "{path} is a row");
}

/// The step of a sweep over terminal widths: `full`, or four times it in
/// the quick tier (`LOCKTOP_QUICK=1`; CI never sets it).
pub(super) fn size_step(full: usize) -> usize {
    let quick = std::env::var_os("LOCKTOP_QUICK").is_some_and(|v| v != "0");
    if quick { full * 4 } else { full }
}
