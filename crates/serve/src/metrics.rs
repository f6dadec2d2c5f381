//! `/metrics`: the live view as OpenMetrics, through `prometheus-client`.
//!
//! Invariants: a scrape reads the view and the engine's counters — it
//! never probes, rescans or reads `/proc/locks`; it walks the held keys
//! only (the per-(kind, liveness) counts are kept as deltas arrive), so
//! its cost does not grow with free keys. The series count is bounded:
//! - `locktop_keys`: kinds × livenesses (at most 18);
//! - one `locktop_tag_held_seconds` per held TAG (tags are few, and are
//!   what relocations trip over), one `locktop_tag_waiters` per held tag
//!   someone waits for;
//! - live agents by AIH root (the first segment), never per AIH;
//! - one `locktop_suspect` per suspect key (suspects need someone to
//!   act: they are meant to be few, and their count is there too);
//! - fixed-size health, counters and build info.

use std::collections::BTreeMap;
use std::sync::atomic::Ordering;
use std::sync::{Arc, RwLock};
use std::time::{Duration, SystemTime};

use prometheus_client::collector::Collector;
use prometheus_client::encoding::{DescriptorEncoder, EncodeMetric};
use prometheus_client::metrics::MetricType;
use prometheus_client::metrics::counter::ConstCounter;
use prometheus_client::metrics::gauge::ConstGauge;
use prometheus_client::registry::Registry;

use super::view::LiveView;
use crate::disk::{KeyKind, LockKey};
use crate::engine::{EngineStats, KeyState, Liveness, WatcherHealth};

/// Every health state, for the `locktop_watcher_health` state set.
const HEALTH_STATES: [&str; 6] = [
    "starting",
    "watching",
    "waiting_for_root",
    "rescanning",
    "self_inflicted",
    "polling",
];

/// Reads the live view on each scrape.
#[derive(Debug)]
pub struct Exporter {
    /// The view the delta task keeps.
    pub view: Arc<RwLock<LiveView>>,
    /// The engine's own counters.
    pub stats: Arc<EngineStats>,
    /// The "materializing too long" threshold.
    pub materializing: Duration,
    /// The engine runs the kernel's lock events, which tell refused tries
    /// (under inference nobody counts them: the series is absent, not 0).
    pub refusals_counted: bool,
    /// With `--journal`: its health (the `locktop_journal_*` series;
    /// absent without a journal).
    pub journal: Option<Arc<super::JournalHealth>>,
}

impl Exporter {
    /// The text of one scrape: OpenMetrics (what Prometheus asks for), or
    /// the classic Prometheus text format (what `curl` and `promtool check
    /// metrics` read), both from the same collector.
    pub fn render(self: &Arc<Self>, format: Format) -> String {
        let mut registry = Registry::default();
        registry.register_collector(Box::new(self.clone()));
        let mut text = String::new();
        // Writing into a String cannot fail.
        let _ = match format {
            Format::OpenMetrics => prometheus_client::encoding::text::encode(&mut text, &registry),
            Format::PrometheusText => {
                prometheus_client::encoding::prometheus_text::encode(&mut text, &registry)
            }
        };
        text
    }
}

/// The two text formats a scrape may get.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Format {
    /// `application/openmetrics-text; version=1.0.0`.
    OpenMetrics,
    /// `text/plain; version=0.0.4`.
    PrometheusText,
}

impl Format {
    /// OpenMetrics when the `Accept` header asks for it, else the classic
    /// text format.
    pub fn from_accept(accept: Option<&str>) -> Self {
        match accept {
            Some(accept) if accept.contains("application/openmetrics-text") => Format::OpenMetrics,
            _ => Format::PrometheusText,
        }
    }

    /// The `Content-Type` of a scrape in this format.
    pub fn content_type(self) -> &'static str {
        match self {
            Format::OpenMetrics => "application/openmetrics-text; version=1.0.0; charset=utf-8",
            Format::PrometheusText => "text/plain; version=0.0.4; charset=utf-8",
        }
    }
}

impl Collector for Exporter {
    fn encode(&self, mut encoder: DescriptorEncoder) -> Result<(), std::fmt::Error> {
        let view = self
            .view
            .read()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        let now = SystemTime::now();
        if view.watcher().synced() {
            // Before the first full scan, the keys seen so far are not the
            // keys on disk: no key gauge at all (absent, not 0 — a restart
            // must not read as every agent gone).
            encode_keys(&mut encoder, &view)?;
            encode_held(&mut encoder, &view, now)?;
        }
        encode_health(&mut encoder, &view)?;
        drop(view);
        encode_counters(&mut encoder, &self.stats)?;
        if self.refusals_counted {
            encode_refused(&mut encoder, &self.stats)?;
        }
        if let Some(journal) = &self.journal {
            encode_journal(&mut encoder, journal)?;
        }
        // A gauge, not an OpenMetrics `info`: promtool's linter and
        // Prometheus's text format know no `info` type.
        gauges(
            &mut encoder,
            "locktop_build_info",
            "locktop's version (always 1).",
            [([("version", env!("CARGO_PKG_VERSION"))], 1.0)],
        )
    }
}

/// A gauge family from (labels, value) pairs.
fn gauges<L: prometheus_client::encoding::EncodeLabelSet>(
    encoder: &mut DescriptorEncoder,
    name: &str,
    help: &str,
    series: impl IntoIterator<Item = (L, f64)>,
) -> Result<(), std::fmt::Error> {
    let mut metric = encoder.encode_descriptor(name, help, None, MetricType::Gauge)?;
    for (labels, value) in series {
        metric.encode_family(&labels)?.encode_gauge(&value)?;
    }
    Ok(())
}

fn encode_keys(encoder: &mut DescriptorEncoder, view: &LiveView) -> Result<(), std::fmt::Error> {
    // Every (kind, liveness) pair, so each series exists even at 0.
    let series = KeyKind::ALL.iter().flat_map(|kind| {
        Liveness::ALL.iter().map(move |liveness| {
            let count = view.counts().get(&(*kind, *liveness)).copied().unwrap_or(0);
            (
                [("kind", kind.as_str()), ("liveness", liveness.as_str())],
                count as f64,
            )
        })
    });
    gauges(
        encoder,
        "locktop_keys",
        "Claims on disk by kind and liveness.",
        series,
    )?;
    gauge(
        encoder,
        "locktop_problems",
        "Paths under the locks root that are not claims (foreign files, symlinks, FIFOs…).",
        view.watcher().problems.len() as f64,
    )
}

/// One gauge without labels.
fn gauge(
    encoder: &mut DescriptorEncoder,
    name: &str,
    help: &str,
    value: f64,
) -> Result<(), std::fmt::Error> {
    let gauge = ConstGauge::new(value);
    let metric = encoder.encode_descriptor(name, help, None, gauge.metric_type())?;
    gauge.encode(metric)
}

/// What the held keys say: tags, agents by root, waiters, suspects.
fn encode_held(
    encoder: &mut DescriptorEncoder,
    view: &LiveView,
    now: SystemTime,
) -> Result<(), std::fmt::Error> {
    let held: Vec<(&LockKey, &KeyState)> = view.held().held().collect();
    let role_of = |pid: u32| view.held().role_of(pid);
    let mut tags = Vec::new();
    let mut tag_waiters = Vec::new();
    let mut roots: BTreeMap<String, u64> = BTreeMap::new();
    let mut waiters = [0u64; 2];
    let mut suspects = Vec::new();
    // Every suspect verdict has a series, 0 when no key has it: a panel
    // or an alert reads 0, not "no data", when all is well.
    let mut suspect_counts: BTreeMap<String, u64> = SUSPECT_KINDS
        .iter()
        .map(|kind| (kind.to_string(), 0))
        .collect();
    for &(key, state) in &held {
        let pid = state.holders.first().map(|p| p.pid);
        waiters[0] += state.waiters.len() as u64;
        waiters[1] += state.watchers.len() as u64;
        if key.kind() == KeyKind::Tag {
            let seconds = state
                .since
                .and_then(|since| now.duration_since(since).ok())
                .map_or(0.0, |held_for| held_for.as_secs_f64());
            let role = pid.map_or("unknown", |pid| role_of(pid).word());
            let pid = pid.map_or_else(|| "unknown".to_string(), |pid| pid.to_string());
            tags.push((
                vec![
                    ("tag", label_value(key.name())),
                    ("pid", pid),
                    ("role", role.into()),
                ],
                seconds,
            ));
            for (kind, count) in [
                ("contender", state.waiters.len()),
                ("watcher", state.watchers.len()),
            ] {
                if count > 0 {
                    tag_waiters.push((
                        vec![("tag", label_value(key.name())), ("kind", kind.into())],
                        count as f64,
                    ));
                }
            }
        }
        if key.kind() == KeyKind::Instance && state.liveness != Liveness::Own {
            let root = label_value(key.name().split('/').next().unwrap_or_default());
            *roots.entry(root).or_default() += 1;
        }
        let verdict = view.held().judge(key, state, now);
        if let Some(verdict) = verdict.filter(|v| v.is_suspect()) {
            let word = verdict_word(&verdict);
            *suspect_counts.entry(word.clone()).or_default() += 1;
            suspects.push((
                vec![
                    ("verdict", word),
                    ("kind", key.kind().as_str().into()),
                    ("key", label_value(key.name())),
                ],
                1.0,
            ));
        }
    }
    gauges(
        encoder,
        "locktop_tag_held_seconds",
        "Seconds each held tag has been held (0 when unknown), by tag, holder PID and role.",
        tags,
    )?;
    gauges(
        encoder,
        "locktop_tag_waiters",
        "Processes waiting on a held tag, by kind (contender: wait_acquire; watcher: wait_released).",
        tag_waiters,
    )?;
    gauges(
        encoder,
        "locktop_live_agents",
        "Held instance locks (live agents) by AIH root, the first segment.",
        roots
            .into_iter()
            .map(|(root, n)| ([("root", root)], n as f64)),
    )?;
    gauges(
        encoder,
        "locktop_waiters",
        "Processes waiting on held keys, by kind.",
        [
            ([("kind", "contender")], waiters[0] as f64),
            ([("kind", "watcher")], waiters[1] as f64),
        ],
    )?;
    gauges(
        encoder,
        "locktop_suspect",
        "1 for each key whose verdict needs someone to act, by verdict, kind and key.",
        suspects,
    )?;
    gauges(
        encoder,
        "locktop_suspects",
        "Keys whose verdict needs someone to act, by verdict.",
        suspect_counts
            .into_iter()
            .map(|(verdict, n)| ([("verdict", verdict)], n as f64)),
    )?;
    let waits = view.held().waits();
    gauge(
        encoder,
        "locktop_deadlocks",
        "Cycles of waits between processes that cannot clear by themselves (deadlocks).",
        waits.deadlocks(now).count() as f64,
    )?;
    gauge(
        encoder,
        "locktop_wait_cycles",
        "Cycles of waits between processes, deadlocks or not (those may still clear).",
        waits.cycles().len() as f64,
    )?;
    gauge(
        encoder,
        "locktop_longest_wait_chain",
        "The most waits in a row: a process waiting on a key whose holder waits on another…, or around a cycle (0 when nobody waits).",
        waits.longest_chain() as f64,
    )
}

/// A name from the watched tree as a label value: a scrape read with
/// `curl` in a terminal shows it inert (the exposition format escapes
/// only `\\`, `"` and a line feed; a bidi override or an ESC would pass).
fn label_value(name: &str) -> String {
    crate::text::visible(name).into_owned()
}

fn encode_health(encoder: &mut DescriptorEncoder, view: &LiveView) -> Result<(), std::fmt::Error> {
    let current = health_word(&view.watcher().health);
    gauges(
        encoder,
        "locktop_watcher_health",
        "1 for the watcher's current state, 0 for the others.",
        HEALTH_STATES
            .iter()
            .map(|state| ([("state", *state)], f64::from(u8::from(*state == current)))),
    )?;
    gauge(
        encoder,
        "locktop_watcher_healthy",
        "1 while the watcher watches and the first scan is done (as /healthz).",
        f64::from(u8::from(view.healthy().is_ok())),
    )
}

fn encode_counters(
    encoder: &mut DescriptorEncoder,
    stats: &EngineStats,
) -> Result<(), std::fmt::Error> {
    for (name, help, value) in [
        (
            "locktop_probes",
            "Liveness probes run (event-driven and sweeps).",
            &stats.probes,
        ),
        (
            "locktop_fs_events",
            "Filesystem changes received.",
            &stats.events,
        ),
        (
            "locktop_proc_locks_reads",
            "Reads of /proc/locks.",
            &stats.index_reads,
        ),
        (
            "locktop_sweeps",
            "Full sweeps (initial, rescans, periodic).",
            &stats.sweeps,
        ),
        (
            "locktop_holder_refreshes",
            "Holder processes re-read by the once-a-second refresh.",
            &stats.holder_refreshes,
        ),
    ] {
        let counter = ConstCounter::new(value.load(Ordering::Relaxed));
        let metric = encoder.encode_descriptor(name, help, None, counter.metric_type())?;
        counter.encode(metric)?;
    }
    Ok(())
}

/// `locktop_journal_up`, `locktop_journal_written_bytes_total` and
/// `locktop_journal_last_error_timestamp_seconds` (0 before any error).
fn encode_journal(
    encoder: &mut DescriptorEncoder,
    journal: &super::JournalHealth,
) -> Result<(), std::fmt::Error> {
    gauge(
        encoder,
        "locktop_journal_up",
        "1 while serve --journal writes its journal, 0 while it cannot (a full disk: it retries).",
        if journal.up() { 1.0 } else { 0.0 },
    )?;
    let written = ConstCounter::new(journal.bytes());
    let metric = encoder.encode_descriptor(
        "locktop_journal_written_bytes",
        "Bytes written to the journal since the start.",
        None,
        written.metric_type(),
    )?;
    written.encode(metric)?;
    let last_error = journal.last_failure().map_or(0.0, |failure| {
        failure
            .since
            .duration_since(SystemTime::UNIX_EPOCH)
            .map_or(0.0, |since| since.as_secs_f64())
    });
    gauge(
        encoder,
        "locktop_journal_last_error_timestamp_seconds",
        "When the journal last failed to be written (Unix time; 0: never).",
        last_error,
    )
}

/// `locktop_refused_tries_total{kind}`: every refused `LOCK_NB` request
/// on a claim's files since the start, by the claim's kind (never by
/// key: which keys and which PIDs are `/snapshot.json`'s).
fn encode_refused(
    encoder: &mut DescriptorEncoder,
    stats: &EngineStats,
) -> Result<(), std::fmt::Error> {
    let mut metric = encoder.encode_descriptor(
        "locktop_refused_tries",
        "LOCK_NB lock requests refused on claims' files, by the claim's kind (from the kernel's lock events).",
        None,
        MetricType::Counter,
    )?;
    for kind in KeyKind::ALL {
        let value = stats.refused_tries.of(kind).load(Ordering::Relaxed);
        ConstCounter::new(value).encode(metric.encode_family(&[("kind", kind.as_str())])?)?;
    }
    Ok(())
}

/// The verdict's own JSON `kind` (the word `snapshot --json` prints).
fn verdict_word(verdict: &crate::operate::verdict::Verdict) -> String {
    verdict.kind().to_string()
}

/// The `verdict` label values of `locktop_suspects`, each always present.
const SUSPECT_KINDS: [&str; 6] = [
    "deadlock",
    "wait_cycle",
    "stopped",
    "orphaned_child",
    "materializing_too_long",
    "idle",
];

/// The health's own JSON `health` word (as `watch --json` prints it).
fn health_word(health: &WatcherHealth) -> &'static str {
    match health {
        WatcherHealth::Starting => "starting",
        WatcherHealth::Watching => "watching",
        WatcherHealth::WaitingForRoot { .. } => "waiting_for_root",
        WatcherHealth::Rescanning { .. } => "rescanning",
        WatcherHealth::SelfInflicted { .. } => "self_inflicted",
        WatcherHealth::Polling { .. } => "polling",
        WatcherHealth::Reconnecting { .. } => "reconnecting",
    }
}

#[cfg(test)]
mod tests {
    /// Every suspect verdict has its always-present `locktop_suspects`
    /// series (a new suspect kind must be added to the fixed set).
    #[test]
    fn every_suspect_kind_has_a_series() {
        for verdict in crate::operate::verdict::one_of_each() {
            let listed = super::SUSPECT_KINDS.contains(&verdict.kind());
            assert_eq!(listed, verdict.is_suspect(), "{}", verdict.kind());
        }
    }
}
