//! The live engine on real state dirs, real holders and real inotify: its
//! view equals what the holders hold, every change arrives as a delta from
//! events alone, foreign names are problems (never followed through a
//! symlink), its own probes never feed a probe loop, an inotify overflow
//! ends in a correct rescan, the periodic sweep catches what no event
//! reports (a claim file unlinked under a live holder included); and
//! monitors in their default probe mode never refuse an agent's
//! `try_acquire` (`interference`). The chaos runs (random holders, kills
//! and stops never break mutual exclusion nor the view's convergence)
//! need the machine to themselves: they are `tests/machine`.

mod echo;
mod foreign;
mod idle;
mod interference;
mod kernel;
mod live;
mod overflow;
mod stalled;
mod sweep;
mod unlinked;
