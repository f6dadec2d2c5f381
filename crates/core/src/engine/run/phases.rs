//! The engine's phases: waiting for the locks root to exist, watching it
//! with inotify (the event phase), and polling it when inotify cannot
//! (the poll phase); and when the loop wakes next.
//!
//! Invariant: a phase ends only by a [`PhaseEnd`] the loop in
//! [`super::Engine::run`] acts on; every degradation it meets is a
//! visible [`WatcherHealth`].

use super::*;

impl Engine {
    /// Waits until the locks root exists, watching its nearest existing
    /// ancestor. False if the engine was stopped meanwhile.
    pub(super) async fn wait_for_root(
        &mut self,
        commands: &mut UnboundedReceiver<EngineCommand>,
    ) -> bool {
        loop {
            let ancestor = nearest_existing_ancestor(&self.tree.root);
            self.view.set_health(WatcherHealth::WaitingForRoot {
                ancestor: ancestor.clone(),
                state_dir_missing: !self.tree.state_dir.is_dir(),
            });
            let (tx, mut rx) = mpsc::channel(fs_events::CHANGE_QUEUE);
            let filter = self.view.filter.clone();
            let _watcher = fs_events::subscribe(
                &self.tree.state_dir,
                &ancestor,
                filter,
                tx,
                fs_events::WatchMounts::No,
            )
            .ok();
            loop {
                self.view.flush_outbox();
                tokio::select! {
                    _ = rx.recv() => {}
                    _ = tokio::time::sleep(ROOT_RECHECK) => {}
                    command = commands.recv() => match command {
                        None => return false,
                        Some(command) => self.command(command).await,
                    },
                }
                if self.tree.root.is_dir() {
                    return true;
                }
                if nearest_existing_ancestor(&self.tree.root) != ancestor {
                    break;
                }
            }
        }
    }

    pub(super) async fn event_phase(
        &mut self,
        mut changes: fs_events::Changes,
        commands: &mut UnboundedReceiver<EngineCommand>,
    ) -> PhaseEnd {
        loop {
            let wake = self.next_wake();
            let consumer = self.view.deltas.clone();
            tokio::select! {
                room = consumer.reserve(), if !self.view.outbox.is_empty() => {
                    let from = self.clock();
                    if let (Ok(room), Some(delta)) = (room, self.view.outbox.pop()) {
                        room.send(delta);
                    }
                    self.view.flush_outbox();
                    self.span("flush outbox", from, 1);
                }
                change = changes.recv() => {
                    let from = self.clock();
                    let Some(change) = change else { return PhaseEnd::RootGone };
                    let mut batch = vec![change];
                    while let Some(more) = changes.try_recv() {
                        batch.push(more);
                    }
                    if self.view.filter.take_lost() {
                        // The engine fell behind the watcher: what did not
                        // fit is lost, as in an inotify overflow.
                        batch.push(FsChange::LostInQueue);
                    }
                    let items = batch.len();
                    for change in batch {
                        match self.on_change(change).await {
                            None => {}
                            Some(PhaseEnd::Poll) => {
                                return self.poll_instead(changes, commands).await;
                            }
                            Some(end) => return end,
                        }
                    }
                    self.view.flush_problems();
                    self.span("take changes", from, items);
                }
                command = commands.recv() => match command {
                    None => return PhaseEnd::Stop,
                    Some(command) => self.command(command).await,
                },
                Some(report) = self.tree.dir_scans.recv() => {
                    let from = self.clock();
                    let items = report.keys.len();
                    if let Some(PhaseEnd::Poll) = self.on_dir_scanned(report) {
                        return self.poll_instead(changes, commands).await;
                    }
                    self.span("new dir scanned", from, items);
                }
                Some(told) = self.source.told() => {
                    let from = self.clock();
                    let (source, mut judging) = self.split();
                    let asks = source.apply(&mut judging, told);
                    if !asks.judge_now.is_empty() {
                        self.probe_batch(asks.judge_now).await;
                    }
                    if asks.resync {
                        self.resync().await;
                    }
                    self.span("source told", from, asks.items);
                }
                outcome = self.sweeps.results.recv() => {
                    let from = self.clock();
                    let mut items = 0;
                    if let Some(Some(outcome)) = outcome
                        && outcome.generation == self.sweeps.generation
                    {
                        items = outcome.len();
                        self.begin_merge(outcome);
                    }
                    self.span("begin sweep merge", from, items);
                }
                () = std::future::ready(()), if self.may_merge() => {
                    let from = self.clock();
                    let items = self.merge_some(sweep::MERGE_CHUNK);
                    self.span("apply sweep", from, items);
                }
                _ = tokio::time::sleep_until(wake) => {
                    if !self.tree.root.is_dir() {
                        return PhaseEnd::RootGone;
                    }
                    self.on_timers().await;
                }
            }
        }
    }

    /// Gives up inotify (its watch limit was reached): drops the watches,
    /// sweeps, and polls from now on.
    async fn poll_instead(
        &mut self,
        changes: fs_events::Changes,
        commands: &mut UnboundedReceiver<EngineCommand>,
    ) -> PhaseEnd {
        self.tree.watcher = None;
        drop(changes);
        self.full_sweep().await;
        self.poll_phase(commands).await
    }

    pub(super) async fn poll_phase(
        &mut self,
        commands: &mut UnboundedReceiver<EngineCommand>,
    ) -> PhaseEnd {
        loop {
            self.view.flush_outbox();
            let consumer = self.view.deltas.clone();
            tokio::select! {
                command = commands.recv() => match command {
                    None => return PhaseEnd::Stop,
                    Some(command) => self.command(command).await,
                },
                _ = consumer.reserve(), if !self.view.outbox.is_empty() => {}
                () = std::future::ready(()), if self.may_merge() => {
                    self.merge_some(sweep::MERGE_CHUNK);
                }
                _ = tokio::time::sleep(POLL_EVERY.min(self.config.sweep_every)) => {
                    if !self.tree.root.is_dir() {
                        return PhaseEnd::RootGone;
                    }
                    self.full_sweep().await;
                }
            }
        }
    }

    pub(super) fn next_wake(&self) -> Instant {
        // Nothing due: the loop sleeps until something happens.
        let mut wake = self
            .sweep_due()
            .unwrap_or_else(|| Instant::now() + Duration::from_secs(3600));
        if let Some(due) = self.holder_refresh_due() {
            wake = wake.min(due);
        }
        if matches!(self.view.health, Some(WatcherHealth::SelfInflicted { .. })) {
            // Quiet now? The next second's count takes the alarm back.
            wake = wake.min(Instant::now() + Duration::from_secs(1));
        }
        if let Some(due) = self.source.next_due() {
            wake = wake.min(due);
        }
        wake
    }
}

/// The nearest directory above `path` that exists (`/` at worst).
fn nearest_existing_ancestor(path: &Path) -> PathBuf {
    path.ancestors()
        .skip(1)
        .find(|dir| dir.is_dir())
        .unwrap_or(Path::new("/"))
        .to_path_buf()
}
