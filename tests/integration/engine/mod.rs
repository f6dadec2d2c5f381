//! The live engine on real state dirs, real holders and real inotify: its
//! view equals what the holders hold, every change arrives as a delta from
//! events alone, foreign names are problems (never followed through a
//! symlink), its own probes never feed a probe loop, an inotify overflow
//! ends in a correct rescan, and the periodic sweep catches what no event
//! reports.

mod echo;
mod foreign;
mod live;
mod overflow;
mod sweep;
