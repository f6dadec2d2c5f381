//! The one-shot and streaming commands as a user runs them: real `locktop`
//! processes (`check`, `snapshot`, `watch`) against real holders — their
//! exit codes and output, and that a look never takes or leaves anything.

mod attach;
mod bad_input;
mod check;
mod hostile;
mod journal;
mod journal_faults;
mod serve;
mod serve_exposed;
mod serve_flood;
mod serve_tls;
mod snapshot_watch;
mod unfit;
mod unlinked;
mod unprivileged;
mod verdicts;
mod waits;
