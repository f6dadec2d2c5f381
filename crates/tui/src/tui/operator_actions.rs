//! Operator actions on the [`App`]: `n` (hold a family), `r` (release a
//! test holder), `K` (signal a holder), `c` (why is this stuck?), and
//! folding in what those actions report back (holder updates, check
//! outcomes).
//!
//! Invariants: read-only mode refuses everything that takes, releases or
//! signals (checked here too, not only in the key map) and turns checks
//! into passive probes; a child test holder's PID is announced to the
//! engine as own while it lives and withdrawn when it is over; opening a
//! dialog never acts — only its confirmation does (see [`super::overlay`]).

use std::time::SystemTime;

use nix::sys::signal::Signal;

use crate::disk::key::KeyKind;
use crate::engine::EngineCommand;
use crate::liveness::ProbeMode;
use crate::liveness::verify::claim_files;
use crate::locks::Family;
use crate::model::{HolderForm, Lock, OwnPid, describe_family};
use crate::operate::check::report_lines;
use crate::operate::signal::{SignalError, refuse_pid, signal_target};
use crate::operate::test_holders::{HolderSpec, HolderStatus, HolderUpdate, Placement, StopError};

use super::action::{Action, Pane};
use super::app::App;
use super::handles::CheckOutcome;
use super::hints;
use super::overlay::{KillTestHolder, Overlay, ReportDialog, SignalDialog, SignalStage};

/// Said when an action needs the live monitor's handles (tests, or the
/// holder manager could not start).
const NO_OPS: &str = "not available: this view has no holder manager";

impl App {
    /// Performs one of the operator actions (`n`, `r`, `K`, `c`).
    pub(crate) fn act(&mut self, action: Action) {
        if action.writes() && self.config.read_only {
            self.message = Some("disabled: locktop runs --read-only".into());
            return;
        }
        if action.writes()
            && let Some(why) = self.config.refuses_local_actions()
        {
            self.message = Some(why);
            return;
        }
        match action {
            Action::NewHolder => self.operator.overlay = Some(Overlay::Form(HolderForm::hold())),
            Action::Release => self.release_selected(),
            Action::Kill => self.open_kill(),
            Action::Check if self.replay.is_some() || self.config.attached.is_some() => {
                match self.selected_family() {
                    Ok(family) => self.recorded_check(family),
                    Err(why) => self.message = Some(why.to_string()),
                }
            }
            Action::Check => match self.selected_family() {
                Ok(family) => {
                    let form = HolderForm::check(family, self.check_probe(self.config.probe));
                    self.operator.overlay = Some(Overlay::Form(form));
                }
                Err(why) => self.message = Some(why.to_string()),
            },
            _ => {}
        }
    }

    /// The selected key as a family of one (an instance is a hierarchy
    /// without tags, a tag a group of one), or a test holder's family.
    fn selected_family(&mut self) -> Result<Family, NotCheckable> {
        if self.pane == Pane::TestHolders {
            return match self.operator.test_holders.selected_holder() {
                Some(holder) => Ok(holder.spec.family.clone()),
                None => Err(NotCheckable::NoTestHolder),
            };
        }
        let key = self.selected_key().ok_or(NotCheckable::NoKey)?;
        match key.kind() {
            KeyKind::Instance => Ok(Family::Hierarchy {
                aih: key.name().to_string(),
                tags: Vec::new(),
            }),
            KeyKind::Tag => Ok(Family::Group(vec![key.name().to_string()])),
            KeyKind::Other => Err(NotCheckable::NotAnAgentLock(key.name().to_string())),
        }
    }

    /// Starts a test holder from a validated spec and shows it in pane 4.
    pub(crate) fn spawn_test_holder(&mut self, spec: HolderSpec) {
        if self.config.read_only {
            self.message = Some("disabled: locktop runs --read-only".into());
            return;
        }
        let Some(ops) = self.operator.ops.as_mut() else {
            self.message = Some(format!("test holders {NO_OPS}"));
            return;
        };
        let id = ops.holders().spawn(spec.clone());
        self.message = Some(format!(
            "test holder #{id} starting: {} ({}, {})",
            describe_family(&spec.family),
            spec.placement.word(),
            spec.mode.word()
        ));
        self.operator.test_holders.add(id, spec, SystemTime::now());
        self.pane = Pane::TestHolders;
        self.operator.test_holders.select(usize::MAX);
    }

    /// Starts a family check in the background and opens its report
    /// dialog (filled in when the outcome arrives). Never `acquire` in
    /// read-only (it takes the family for an instant): passive instead.
    pub(crate) fn run_check(&mut self, family: Family, probe: ProbeMode) {
        let probe = self.check_probe(probe);
        let Some(ops) = self.operator.ops.as_mut() else {
            self.message = Some(format!("family checks {NO_OPS}"));
            return;
        };
        let seq = ops.check(family.clone(), probe);
        self.open_report(seq, &family, probe);
    }

    /// The probe a family check runs when `probe` is asked for: never one
    /// that writes in read-only (`acquire` takes the family for an
    /// instant).
    fn check_probe(&self, probe: ProbeMode) -> ProbeMode {
        if self.config.read_only && probe.writes() {
            ProbeMode::Passive
        } else {
            probe
        }
    }

    /// Opens the (empty, "checking…") report dialog of check `seq`.
    pub(crate) fn open_report(&mut self, seq: u64, family: &Family, probe: ProbeMode) {
        let how = format!("probe: {}", crate::operate::check::probe_words(probe));
        self.open_report_saying(seq, family, how);
    }

    fn open_report_saying(&mut self, seq: u64, family: &Family, how: String) {
        self.operator.overlay = Some(Overlay::Report(ReportDialog {
            seq,
            family: describe_family(family),
            how,
            lines: None,
            scroll: 0,
            page: 1,
        }));
    }

    /// `c` in a replay, or attached to a service: the family checked
    /// against the state shown (the model's held keys: the recording's at
    /// the cursor, or the service's), at once.
    fn recorded_check(&mut self, family: Family) {
        let now = self.model.now();
        let data = self.model.data();
        let held: Vec<(&crate::disk::LockKey, &crate::liveness::KeyState)> = data
            .tree
            .locks()
            .map(|(_, lock)| (&lock.key, &*lock.state))
            .filter(|(_, state)| state.liveness.is_held())
            .collect();
        let result = crate::operate::check::report_from_states(
            &self.config.state_dir,
            &family,
            held.iter().copied(),
            &data.watcher.problems,
            now,
            self.config.materializing_after,
            data.held().waits(),
        );
        let how = if self.replay.is_some() {
            format!(
                "from the recording at {} (nothing probed)",
                crate::time_format::rfc3339(now)
            )
        } else {
            "from the service's view (nothing probed here)".to_string()
        };
        self.open_report_saying(0, &family, how);
        self.check_done(CheckOutcome { seq: 0, result });
    }

    /// A check finished: fills its dialog if it is still open.
    pub(crate) fn check_done(&mut self, outcome: CheckOutcome) {
        let now = self.model.now();
        if let Some(Overlay::Report(report)) = self.operator.overlay.as_mut()
            && report.seq == outcome.seq
        {
            report.lines = Some(match outcome.result {
                Ok(mut checked) => {
                    with_known_refusals(&mut checked, self.model.data());
                    report_lines(&checked, now)
                }
                Err(error) => vec![format!("the check could not run: {error}")],
            });
            self.mark_dirty();
        }
    }

    fn release_selected(&mut self) {
        if self.pane != Pane::TestHolders {
            self.message = Some(hints::release_where());
            return;
        }
        let Some(holder) = self.operator.test_holders.selected_holder() else {
            self.message = Some(hints::no_test_holder());
            return;
        };
        let id = holder.id;
        if holder.status.is_over() {
            let word = holder.status.word();
            self.operator.test_holders.remove_over(id);
            self.message = Some(format!("test holder #{id} ({word}) removed from the list"));
            return;
        }
        let Some(ops) = self.operator.ops.as_mut() else {
            self.message = Some(format!("releasing {NO_OPS}"));
            return;
        };
        self.message = Some(match ops.holders().release(id) {
            Ok(()) => format!("releasing test holder #{id}…"),
            Err(error) => error.to_string(),
        });
    }

    /// `K`: on a test holder, confirm a SIGKILL; on a held key or a holder
    /// process, open the signal dialog.
    fn open_kill(&mut self) {
        if self.pane == Pane::TestHolders {
            return self.open_kill_test_holder();
        }
        let from = self.selected_key().map(|key| key.label());
        let Some(process) = self.selected_holder() else {
            self.message = Some(hints::signal_where());
            return;
        };
        if let Some(refusal) = refuse_pid(process.pid) {
            self.message = Some(signal_error_text(&refusal));
            return;
        }
        let data = self.model.data();
        let locks: Vec<&Lock> = data
            .held_by(process.pid)
            .into_iter()
            .filter_map(|id| data.lock(id))
            .collect();
        let holds = locks.iter().map(|lock| lock.key.label()).collect();
        let files: Vec<_> = locks
            .iter()
            .flat_map(|lock| claim_files(&lock.key))
            .collect();
        let since = locks.iter().filter_map(|lock| lock.state.since).min();
        let target = (self.operator.verify)(&process, &files, since);
        self.operator.overlay = Some(Overlay::Signal(Box::new(SignalDialog {
            process,
            from,
            target,
            holds,
            stage: SignalStage::Confirm,
            error: None,
            exited: false,
            continued: false,
        })));
    }

    fn open_kill_test_holder(&mut self) {
        let Some(holder) = self.operator.test_holders.selected_holder() else {
            self.message = Some(hints::no_test_holder());
            return;
        };
        if holder.spec.placement == Placement::InProcess {
            self.message = Some(hints::in_process_kill());
        } else if holder.status.is_over() {
            let id = holder.id;
            self.message = Some(format!(
                "test holder #{id} is already {}",
                holder.status.word()
            ));
        } else {
            self.operator.overlay = Some(Overlay::KillTestHolder(KillTestHolder {
                id: holder.id,
                pid: holder.pid,
                family: describe_family(&holder.spec.family),
            }));
        }
    }

    /// SIGKILLs child test holder `id` (after its confirmation).
    pub(crate) fn kill_test_holder(&mut self, id: u64) {
        let Some(ops) = self.operator.ops.as_mut() else {
            self.message = Some(format!("killing {NO_OPS}"));
            return;
        };
        let pid = self.operator.test_holders.get(id).and_then(|h| h.pid);
        self.message = Some(match ops.holders().kill(id) {
            Ok(()) => {
                if let Some(pid) = pid {
                    self.model.note_signalled(pid, None);
                }
                format!("sent SIGKILL to test holder #{id}")
            }
            Err(StopError::InProcessKill) => hints::in_process_kill(),
            Err(error) => error.to_string(),
        });
    }

    /// First confirmation of the signal dialog: SIGTERM.
    pub(crate) fn send_term(&mut self) {
        self.send_signal(Signal::SIGTERM, SignalStage::TermSent);
    }

    /// Second confirmation of the signal dialog: SIGKILL.
    pub(crate) fn send_kill(&mut self) {
        self.send_signal(Signal::SIGKILL, SignalStage::KillSent);
    }

    /// SIGCONT to a stopped holder, so a pending SIGTERM is handled (the
    /// dialog stays at its stage).
    pub(crate) fn send_cont(&mut self) {
        let stage = match self.operator.overlay.as_ref() {
            Some(Overlay::Signal(dialog)) => dialog.stage,
            _ => return,
        };
        self.send_signal(Signal::SIGCONT, stage);
    }

    fn send_signal(&mut self, signal: Signal, next: SignalStage) {
        if self.config.read_only || self.config.refuses_local_actions().is_some() {
            return;
        }
        let Some(Overlay::Signal(dialog)) = self.operator.overlay.as_mut() else {
            return;
        };
        let sent = match &dialog.target {
            Ok(target) => signal_target(target, signal),
            Err(error) => Err(error.clone()),
        };
        match sent {
            Ok(()) => {
                tracing::info!(
                    pid = dialog.process.pid,
                    signal = signal.as_str(),
                    "signalled a holder"
                );
                dialog.stage = next;
                dialog.error = None;
                if signal == Signal::SIGCONT {
                    dialog.continued = true;
                    return;
                }
                let (pid, started) = (dialog.process.pid, dialog.process.started);
                self.model.note_signalled(pid, started);
            }
            Err(error) => dialog.error = Some(signal_error_text(&error)),
        }
    }

    /// Notes whether a signalled holder has exited, and its latest
    /// scheduler state as the engine saw it (on the clock tick).
    pub(crate) fn watch_signalled(&mut self) {
        let Some(Overlay::Signal(dialog)) = self.operator.overlay.as_ref() else {
            return;
        };
        let seen = self.latest_state_of(&dialog.process);
        if let Some(Overlay::Signal(dialog)) = self.operator.overlay.as_mut()
            && seen.is_some()
            && seen != dialog.process.state
        {
            dialog.process.state = seen;
            if seen != Some(crate::liveness::process::ProcState::Stopped) {
                dialog.continued = false;
            }
            self.mark_dirty();
        }
        let Some(Overlay::Signal(dialog)) = self.operator.overlay.as_ref() else {
            return;
        };
        if dialog.stage != SignalStage::Confirm && !dialog.exited {
            let gone = !self.model.pid_alive(dialog.process.pid);
            if let Some(Overlay::Signal(dialog)) = self.operator.overlay.as_mut()
                && gone
            {
                dialog.exited = true;
                self.mark_dirty();
            }
        }
    }

    /// The scheduler state the engine last reported for `process` (same
    /// PID and start time), from any key it holds.
    fn latest_state_of(
        &self,
        process: &crate::liveness::process::ProcessInfo,
    ) -> Option<crate::liveness::process::ProcState> {
        let data = self.model.live_data();
        data.held_by(process.pid)
            .into_iter()
            .filter_map(|id| data.lock(id))
            .flat_map(|lock| &lock.state.holders)
            .find(|p| p.pid == process.pid && p.started == process.started)
            .and_then(|p| p.state)
    }

    /// Folds in a test holder's progress; tells the engine which child
    /// PIDs are own.
    pub(crate) fn holder_update(&mut self, update: HolderUpdate) {
        self.mark_dirty();
        let own = self.operator.test_holders.apply(&update);
        if let (Some(own), Some(ops)) = (own, self.operator.ops.as_ref()) {
            ops.engine(match own {
                OwnPid::Add(pid) => EngineCommand::AddOwnPid(pid),
                OwnPid::Remove(pid) => EngineCommand::RemoveOwnPid(pid),
            });
        }
        let Some(holder) = self.operator.test_holders.get(update.id) else {
            return;
        };
        let (id, family) = (holder.id, describe_family(&holder.spec.family));
        let pid = holder
            .pid
            .map_or_else(String::new, |pid| format!(" (pid {pid})"));
        self.message = match &update.status {
            HolderStatus::Holding => Some(format!("test holder #{id} holds {family}{pid}")),
            HolderStatus::Failed(reason) => Some(format!("test holder #{id} failed: {reason}")),
            HolderStatus::Exited(detail) => Some(format!("test holder #{id} exited: {detail}")),
            HolderStatus::Waiting(busy) => {
                let on: Vec<String> = busy.iter().map(|member| member.describe()).collect();
                Some(format!("test holder #{id} waiting on {}", on.join(", ")))
            }
            HolderStatus::Starting => return,
        };
    }

    /// On quit: releases every test holder still running; returns how
    /// many are not over yet (their final updates are still to come).
    pub(crate) fn release_all_test_holders(&mut self) -> usize {
        if let Some(ops) = self.operator.ops.as_mut() {
            ops.holders().release_all();
        }
        self.operator.test_holders.running()
    }

    /// Test holders that are not over yet.
    pub(crate) fn test_holders_running(&self) -> usize {
        self.operator.test_holders.running()
    }
}

/// A refused or failed signal, with the way out where there is one.
fn signal_error_text(error: &SignalError) -> String {
    match error {
        SignalError::ThisProcess(_) => {
            format!("{error}: {}", hints::release_in_process_holders())
        }
        other => other.to_string(),
    }
}

/// Why `c` has no family to check.
#[derive(Debug, thiserror::Error)]
enum NotCheckable {
    /// The pane has no key selected.
    #[error(
        "c checks a key: select an instance or a tag (1 Tree, 2 Holders, 3 Events, 5 Blocking) or a test holder (4)"
    )]
    NoKey,
    /// The test holders pane is empty.
    #[error("{}", hints::no_test_holder())]
    NoTestHolder,
    /// The key is neither an instance nor a tag lock.
    #[error("{0} is not an agent lock: c checks instances and tags")]
    NotAnAgentLock(String),
}

/// A probe checks the members as they are now; the tries refused on them
/// in the last minute are what the monitor's kernel lock events told it:
/// each member the check left without them gets the model's.
fn with_known_refusals(report: &mut crate::operate::check::CheckReport, data: &crate::model::Data) {
    for member in report.members.iter_mut().filter(|m| m.refused.is_none()) {
        let section = crate::model::Section::of(member.kind);
        member.refused = data
            .tree
            .find(section, &member.name)
            .and_then(|id| data.lock(id))
            .and_then(|lock| lock.state.refused.clone());
    }
}
