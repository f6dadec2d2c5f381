//! Taking and refusing claims: the `locks` module in this process against
//! real `locktop hold` children. One process's tasks exclude each other,
//! processes exclude each other (and a SIGKILLed holder frees its keys),
//! families are validated, deduplicated and taken in order, many tasks at
//! once never give a key two owners, and the files on disk are named
//! exactly as the SDK names them.

mod claim_states;
mod coords;
mod create_race;
mod cross_process;
mod escape_matches_sdk;
mod family_order;
mod in_process;
mod lock_free_matches_sdk;
mod shared_probe_matches_sdk;
mod stress;
