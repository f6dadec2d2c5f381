//! Frame render time at 100k keys (a README Performance row): the TUI's
//! model fed by
//! engine deltas, drawn on ratatui's `TestBackend` at 80×24, one keystroke
//! (↓) plus one full draw per sample — against the same loop on a 100-key
//! model in the same run.

use std::path::Path;
use std::time::{Duration, Instant, SystemTime};

use crossterm::event::{KeyCode, KeyEvent, KeyModifiers};
use locktop::disk::key::LockKey;
use locktop::engine::{Delta, KeyState, Liveness};
use locktop::liveness::probe::ProbeMode;
use locktop::locks::agent_instance_lock;
use locktop::model::Model;
use locktop::tui::{App, AppConfig, Theme};
use ratatui::Terminal;
use ratatui::backend::TestBackend;

use super::{fmt_dur, median, say, thousands};

/// A model of `keys` instance keys (one in 100 live, the rest free, all
/// shown), and how long feeding it the deltas took.
fn model_of(keys: usize) -> (Model, Duration) {
    let state = Path::new("/bench-state");
    let mut model = Model::default();
    let at = SystemTime::now();
    let started = Instant::now();
    for i in 0..keys {
        let aih = format!("cli/daemon/agent{:06}-r{}", i, i % 7);
        let (dir, key) = agent_instance_lock(state, &aih);
        let liveness = if i % 100 == 0 {
            Liveness::Live
        } else {
            Liveness::Free
        };
        model.apply(Delta::Key {
            key: LockKey::from_coord(state, &dir, &key),
            state: KeyState::bare(liveness),
            previous: None,
            at,
        });
    }
    (model, started.elapsed())
}

/// Median of `samples` (↓ + draw) on a model of `keys` keys.
fn keystroke_and_draw(keys: usize, samples: usize) -> (Duration, Duration, Duration) {
    let (model, build) = model_of(keys);
    let mut app = App::new(
        AppConfig {
            state_dir: "/bench-state".into(),
            probe: ProbeMode::Acquire,
            probe_fallback: None,
            source: locktop::engine::source_choice::SourceKind::Inference,
            source_fallback: None,
            read_only: false,
            theme: Theme::color(),
            materializing_after: locktop::model::MATERIALIZING_AFTER,
            attached: None,
            attach_note: None,
        },
        model,
    );
    let mut terminal = Terminal::new(TestBackend::new(80, 24)).expect("test backend");
    // Show free keys too: every key is a row.
    app.handle_key(KeyEvent::new(KeyCode::Char('a'), KeyModifiers::NONE));
    let first = Instant::now();
    terminal.draw(|frame| app.draw(frame)).expect("draw");
    let first = first.elapsed();
    let mut times = Vec::with_capacity(samples);
    for _ in 0..samples {
        let started = Instant::now();
        app.handle_key(KeyEvent::new(KeyCode::Down, KeyModifiers::NONE));
        terminal.draw(|frame| app.draw(frame)).expect("draw");
        times.push(started.elapsed());
    }
    (build, first, median(&times))
}

/// Runs the section and prints it.
pub fn section_frames(big: usize, samples: usize) {
    let small = 100;
    say(format!(
        "\n6. FRAME RENDER  TUI model fed {} engine deltas (1 in 100 live), drawn on ratatui's \
         TestBackend 80×24; a sample = one ↓ keystroke + one full draw; median of {samples}; \
         baseline: the same on {small} keys",
        thousands(big)
    ));
    let (_, base_first, base) = keystroke_and_draw(small, samples);
    let (build, first, big_time) = keystroke_and_draw(big, samples);
    let ratio = big_time.as_secs_f64() / base.as_secs_f64().max(1e-9);
    say(format!(
        "   {:>7} keys: keystroke + draw median {}  (first draw {})",
        thousands(small),
        fmt_dur(base),
        fmt_dur(base_first)
    ));
    say(format!(
        "   {:>7} keys: keystroke + draw median {}  (first draw {}; feeding the deltas {})  → {ratio:.2}× the {small}-key frame",
        thousands(big),
        fmt_dur(big_time),
        fmt_dur(first),
        fmt_dur(build)
    ));
}
