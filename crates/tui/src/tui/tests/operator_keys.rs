//! The keys operators of htop / k9s expect: sorting the holders and
//! blocking views, F-key aliases, and a first unknown key that points at
//! the help.

use crossterm::event::{KeyCode, KeyEvent, KeyModifiers};

use crate::model::Sort;

use super::support::{demo_app, press, text_of};

/// The PIDs of the holders pane's process rows, top to bottom.
fn holder_pids(app: &mut crate::tui::App) -> Vec<String> {
    text_of(app)
        .lines()
        .filter_map(|line| {
            line.strip_prefix("\">pid ")
                .or(line.strip_prefix("\" pid "))
        })
        .filter_map(|rest| rest.split_whitespace().next().map(str::to_string))
        .collect()
}

#[test]
fn s_sorts_the_holders_by_age_pid_then_name_and_the_tab_bar_says_so() {
    let mut app = demo_app();
    press(&mut app, KeyCode::Char('2'));
    assert!(text_of(&mut app).contains("by age"));
    assert_eq!(
        holder_pids(&mut app),
        ["1201", "1202", "777"],
        "oldest first"
    );
    press(&mut app, KeyCode::Char('s'));
    let shown = text_of(&mut app);
    assert!(shown.contains("by PID"), "{shown}");
    assert_eq!(holder_pids(&mut app), ["777", "1201", "1202"]);
    press(&mut app, KeyCode::Char('s'));
    assert!(text_of(&mut app).contains("by name"));
    // "locktop" < "locktop hold …" < "objectiveai …"
    assert_eq!(holder_pids(&mut app), ["777", "1201", "1202"]);
    press(&mut app, KeyCode::Char('s'));
    assert_eq!(
        app.model().settings().holders_sort,
        Sort::Age,
        "holders skip urgency"
    );
}

/// The PID of the selected process row of the holders pane.
fn selected_pid(app: &mut crate::tui::App) -> Option<String> {
    text_of(app).lines().find_map(|line| {
        let rest = line.strip_prefix("\">pid ")?;
        rest.split_whitespace().next().map(str::to_string)
    })
}

/// Re-sorting keeps the selected row selected, wherever it moves — also
/// before the operator ever moved the selection (it stayed on the first
/// row, which became another process).
#[test]
fn s_keeps_the_selected_holder_selected() {
    let mut app = demo_app();
    press(&mut app, KeyCode::Char('2'));
    assert_eq!(
        selected_pid(&mut app).as_deref(),
        Some("1201"),
        "the first row"
    );
    for order in ["by PID", "by name", "by age"] {
        press(&mut app, KeyCode::Char('s'));
        let shown = text_of(&mut app);
        assert!(shown.contains(order), "{shown}");
        assert_eq!(
            selected_pid(&mut app).as_deref(),
            Some("1201"),
            "{order}: {shown}"
        );
    }
    press(&mut app, KeyCode::Down);
    press(&mut app, KeyCode::Down);
    press(&mut app, KeyCode::Down);
    let chosen = selected_pid(&mut app).expect("a process row");
    press(&mut app, KeyCode::Char('s'));
    assert_eq!(selected_pid(&mut app), Some(chosen));
}

#[test]
fn s_sorts_the_blocking_view_from_suspects_first_to_name() {
    let mut app = demo_app();
    press(&mut app, KeyCode::Char('5'));
    assert!(text_of(&mut app).contains("by urgency"));
    for _ in 0..3 {
        press(&mut app, KeyCode::Char('s'));
    }
    let shown = text_of(&mut app);
    assert!(shown.contains("by name"), "{shown}");
    let data = app.model().data();
    let keys: Vec<String> = app
        .blocking_rows()
        .iter()
        .filter_map(|row| data.lock(row.node).map(|lock| lock.key.name().to_string()))
        .collect();
    assert!(keys.len() > 3, "{keys:?}");
    let mut sorted = keys.clone();
    sorted.sort_unstable();
    assert_eq!(keys, sorted, "by name");
    press(&mut app, KeyCode::Char('s'));
    assert_eq!(app.model().settings().blocking_sort, Sort::Urgency);
}

/// Each view keeps its own order: sorting the holders by PID leaves the
/// blocking view most urgent first, and the other way round.
#[test]
fn s_in_one_of_holders_and_blocking_leaves_the_others_order_alone() {
    let mut app = demo_app();
    press(&mut app, KeyCode::Char('2'));
    press(&mut app, KeyCode::Char('s'));
    assert!(text_of(&mut app).contains("by PID"));
    press(&mut app, KeyCode::Char('5'));
    let shown = text_of(&mut app);
    assert!(shown.contains("by urgency"), "{shown}");
    assert_eq!(app.model().settings().blocking_sort, Sort::Urgency);
    press(&mut app, KeyCode::Char('s'));
    press(&mut app, KeyCode::Char('s'));
    assert!(text_of(&mut app).contains("by PID"));
    press(&mut app, KeyCode::Char('2'));
    assert!(text_of(&mut app).contains("by PID"));
    press(&mut app, KeyCode::Char('s'));
    assert!(text_of(&mut app).contains("by name"));
    press(&mut app, KeyCode::Char('5'));
    assert!(
        text_of(&mut app).contains("by PID"),
        "blocking kept its own"
    );
}

#[test]
fn s_outside_holders_and_blocking_says_where_it_sorts() {
    let mut app = demo_app();
    press(&mut app, KeyCode::Char('s'));
    assert_eq!(app.message(), Some("s sorts 2 Holders and 5 Blocking"));
}

#[test]
fn f_keys_do_what_htop_users_expect() {
    let mut app = demo_app();
    press(&mut app, KeyCode::Char('3'));
    press(&mut app, KeyCode::F(5));
    assert_eq!(app.pane(), crate::tui::Pane::Tree);
    press(&mut app, KeyCode::F(1));
    assert!(text_of(&mut app).contains("Help"));
    press(&mut app, KeyCode::F(1));
    press(&mut app, KeyCode::F(3));
    assert!(text_of(&mut app).contains("Enter keep · Esc clear"));
    press(&mut app, KeyCode::Esc);
    press(&mut app, KeyCode::F(10));
    assert!(app.should_quit());
}

#[test]
fn the_first_unknown_key_says_where_help_is_and_only_once() {
    let mut app = demo_app();
    press(&mut app, KeyCode::Char('z'));
    assert_eq!(app.message(), Some("unknown key: ? for help"));
    assert!(text_of(&mut app).contains("unknown key: ? for help"));
    press(&mut app, KeyCode::Esc);
    assert_eq!(app.message(), None);
    press(&mut app, KeyCode::Char('z'));
    assert_eq!(app.message(), None, "said once");
    let shift = KeyEvent::new(
        KeyCode::Modifier(crossterm::event::ModifierKeyCode::LeftShift),
        KeyModifiers::SHIFT,
    );
    let mut fresh = demo_app();
    fresh.handle_key(shift);
    assert_eq!(fresh.message(), None, "a modifier alone is no key");
}

#[test]
fn y_copies_the_pid_then_the_command_line_then_the_path() {
    let mut app = demo_app();
    super::support::select(&mut app, crate::model::Section::Tags, "deploy");
    let mut copied = Vec::new();
    for _ in 0..4 {
        press(&mut app, KeyCode::Char('y'));
        copied.push(app.take_clipboard().expect("something to copy"));
    }
    let gate = "/state/locks/agents/tags/deploy.lock";
    let hold = crate::model::fixtures::HOLD.to_string();
    assert_eq!(
        copied,
        ["1201".to_string(), hold, gate.into(), "1201".into()]
    );
    assert!(
        app.message()
            .unwrap()
            .starts_with("copied PID to the clipboard (OSC 52): 1201")
    );
    press(&mut app, KeyCode::Down);
    press(&mut app, KeyCode::Char('y'));
    assert!(
        app.message().unwrap().contains("copied"),
        "a new selection starts over"
    );
}

/// `.` (and `,`) with a filter no row matches says so, instead of
/// leaving the operator to guess why nothing moved.
#[test]
fn next_match_with_no_match_says_so() {
    for pane in ['1', '2', '5'] {
        let mut app = demo_app();
        press(&mut app, KeyCode::Char(pane));
        press(&mut app, KeyCode::Char('/'));
        for c in "zzz-none".chars() {
            press(&mut app, KeyCode::Char(c));
        }
        press(&mut app, KeyCode::Enter);
        text_of(&mut app);
        press(&mut app, KeyCode::Char('.'));
        assert_eq!(
            app.message(),
            Some("no row matches the filter /zzz-none"),
            "pane {pane}"
        );
        let screen = text_of(&mut app);
        assert!(
            screen.contains("no row matches the filter /zzz-none"),
            "{screen}"
        );
    }
}
