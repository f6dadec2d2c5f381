//! The real binary in a real pseudo-terminal, read the way a person reads
//! the screen: the monitor shows holders and their deaths, its test holders
//! are driven from the keyboard, `demo` runs a swarm, every way out
//! restores the terminal, and no holder outlives the monitor.

mod attached;
mod demo;
mod holders;
mod operator;
mod read_only;
mod replay;
mod tui;
