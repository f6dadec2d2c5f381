//! The real event loop ([`run_main_loop`]) on a `TestBackend`: input, deltas
//! and the stop request come from channels and streams a test controls, so
//! the loop a person runs is the loop these tests prove. Time is paused:
//! a stop after a sleep fires only once the loop has handled everything
//! that was ready (tokio advances paused time only when all tasks idle).

use std::future::Future;
use std::time::Duration;

use crossterm::event::{Event, KeyCode, KeyEvent, KeyModifiers};
use futures::stream::{self, Stream, StreamExt};
use ratatui::Terminal;
use ratatui::backend::TestBackend;
use tokio::sync::mpsc;

use super::support::demo_app;
use crate::engine::{Delta, Liveness};
use crate::model::fixtures::*;
use crate::tui::{Sources, run_main_loop};

fn key(code: KeyCode) -> std::io::Result<Event> {
    Ok(Event::Key(KeyEvent::new(code, KeyModifiers::NONE)))
}

fn typed(text: &str) -> Vec<std::io::Result<Event>> {
    text.chars().map(|c| key(KeyCode::Char(c))).collect()
}

/// Keys, then silence (the terminal stays open).
fn keys_then_silence(
    keys: Vec<std::io::Result<Event>>,
) -> impl Stream<Item = std::io::Result<Event>> + Unpin {
    stream::iter(keys).chain(stream::pending())
}

/// Runs the loop on an 80×24 `TestBackend` until it returns.
async fn run_loop(
    input: impl Stream<Item = std::io::Result<Event>> + Unpin,
    deltas: Vec<Delta>,
    stop: impl Future<Output = ()>,
) -> Terminal<TestBackend> {
    let (delta_tx, delta_rx) = mpsc::channel(crate::engine::DELTA_QUEUE);
    for delta in deltas {
        delta_tx.try_send(delta).unwrap();
    }
    let mut terminal = Terminal::new(TestBackend::new(80, 24)).unwrap();
    let sources = Sources {
        deltas: delta_rx,
        ops: None,
        stop,
    };
    let run = run_main_loop(&mut terminal, demo_app(), input, sources);
    // Paused time: this fires only if the loop never returns by itself.
    tokio::time::timeout(Duration::from_secs(60), run)
        .await
        .expect("the loop returned")
        .expect("the loop succeeded");
    drop(delta_tx);
    terminal
}

#[tokio::test(start_paused = true)]
async fn deltas_and_typed_keys_are_drawn_before_a_stop_request_ends_the_loop() {
    let state = held(Liveness::Live, 4343, HOLD, t(500));
    let delta = key_delta(tag("fresh-from-the-engine"), state, None, t(500));
    let mut keys = typed("/fresh");
    keys.push(key(KeyCode::Enter));
    let stop = tokio::time::sleep(Duration::from_secs(5));
    let terminal = run_loop(keys_then_silence(keys), vec![delta], stop).await;
    let screen = terminal.backend().to_string();
    assert!(screen.contains("fresh-from-the-engine"), "{screen}");
    assert!(screen.contains("4343"), "{screen}");
    assert!(screen.contains("/fresh"), "the filter is shown: {screen}");
    assert!(
        !screen.contains("▾ cli/"),
        "the filter hides other keys: {screen}"
    );
}

#[tokio::test(start_paused = true)]
async fn q_ends_the_loop() {
    let input = keys_then_silence(typed("q"));
    run_loop(input, Vec::new(), std::future::pending()).await;
}

#[tokio::test(start_paused = true)]
async fn the_end_of_terminal_input_ends_the_loop() {
    run_loop(stream::empty(), Vec::new(), std::future::pending()).await;
}

/// A burst's consequences for its holder's other keys are logged once it
/// has settled (50 ms after its last delta), not at the next clock tick
/// (1 s): a spawn claiming its AIH ends its tag's `materializing too
/// long` within half a second, with no other delta or tick to prompt it.
#[tokio::test(start_paused = true)]
async fn the_loop_wakes_when_a_burst_has_settled_and_logs_what_it_caused() {
    let now = std::time::SystemTime::now();
    let long_ago = now - Duration::from_secs(120);
    let spawn = held(Liveness::Live, 9191, "spawn --tag late", long_ago);
    let claimed = held(Liveness::Live, 9191, "spawn --tag late", now);
    let deltas = vec![
        key_delta(tag("late"), spawn, None, now),
        key_delta(instance("cli/late"), claimed, None, now),
    ];
    let keys = keys_then_silence(vec![key(KeyCode::Char('3'))]);
    let stop = tokio::time::sleep(Duration::from_millis(500));
    let terminal = run_loop(keys, deltas, stop).await;
    let screen = terminal.backend().to_string();
    assert!(screen.contains("⚠ materializing"), "{screen}");
    assert!(
        screen.contains("│event    not materializing too long"),
        "ended once the burst settled (the newest event, selected):\n{screen}"
    );
}
