//! The TUI's tests, without a real terminal: [`screens`] (insta snapshots
//! of every screen on a `TestBackend`), [`ops`] (operator actions, nothing
//! signalled or taken), [`live`] (real processes and real locks),
//! [`main_loop`] (the real event loop driven on a `TestBackend`). The
//! helpers they share are in [`support`].

mod live;
mod long_names;
mod main_loop;
mod operator_keys;
mod ops;
mod replay;
mod screens;
mod selection;
mod support;
mod waits;
