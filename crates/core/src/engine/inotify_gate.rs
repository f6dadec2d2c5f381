//! inotify that wakes the engine's thread at most once per drain of the
//! kernel's lock events.
//!
//! Every inotify event of the tree asks for a drain of the rings: a
//! moment later after a close ([`crate::liveness::kernel::wait::FOLLOW_UP`]:
//! a dying process's unlocks follow its closes), with the judgement a
//! coalescing window later after an open or a write (an agent's flock
//! follows its open). That drain wakes the thread anyway, so the events
//! that come between the first of a burst and the drain are worth no
//! wake-up of their own: they are read when the drain begins. An agent's
//! acquisition makes a dozen events (create, open, write and close of
//! each of its files), a directory listed by any process two more; read
//! as they came, each woke the thread.
//!
//! How: the inotify fd sits alone in an epoll of its own, armed for one
//! readiness at a time (`EPOLLONESHOT`), and that epoll is what the
//! runtime's reactor watches. Once woken, the gate stays shut while a
//! drain is asked and not yet begun ([`Nudges::answered`]), then reads
//! what came meanwhile and opens again when nothing did.
//!
//! Invariants: no event is lost or reordered (the queue is the kernel's,
//! read whole each time); the gate stays shut at most [`MOST_SHUT`] (a
//! reader that stopped draining never blinds the watch); arming checks the
//! fd's readiness, so an event that came just before is heard; without a
//! nudger (no drain to wait for) the gate never stays shut.

use std::io;
use std::os::fd::{AsFd, AsRawFd, RawFd};
use std::time::Duration;

use inotify::Inotify;
use nix::sys::epoll::{Epoll, EpollCreateFlags, EpollEvent, EpollFlags, EpollTimeout};
use tokio::io::unix::AsyncFd;

use crate::liveness::kernel::live_table::Nudger;

/// The longest the gate stays shut waiting for a drain (which is due a
/// fraction of a millisecond after the nudge that asked for it).
pub(crate) const MOST_SHUT: Duration = Duration::from_millis(10);

/// The epoll the inotify fd sits in, as the reactor sees it.
struct GateFd(Epoll);

impl AsRawFd for GateFd {
    fn as_raw_fd(&self) -> RawFd {
        self.0.0.as_raw_fd()
    }
}

/// inotify behind a gate (see the module doc).
pub(crate) struct GatedInotify {
    inotify: Inotify,
    gate: AsyncFd<GateFd>,
    /// The inotify fd is armed in the gate: its next readiness wakes the
    /// reactor.
    armed: bool,
    /// What says when the drain asked for has begun (`None`: no drain to
    /// wait for).
    nudge: Option<Nudger>,
}

/// What one readiness asks for: the inotify fd readable, armed once.
fn one_shot() -> EpollEvent {
    EpollEvent::new(EpollFlags::EPOLLIN | EpollFlags::EPOLLONESHOT, 0)
}

impl GatedInotify {
    /// `inotify` behind a gate, registered with the current runtime, open.
    pub(crate) fn new(inotify: Inotify, nudge: Option<Nudger>) -> io::Result<Self> {
        let epoll = Epoll::new(EpollCreateFlags::EPOLL_CLOEXEC).map_err(io::Error::from)?;
        epoll
            .add(inotify.as_fd(), one_shot())
            .map_err(io::Error::from)?;
        // SAFETY: the AsyncFd owns the epoll, whose fd stays open and the
        // same for as long as it lives.
        let gate = unsafe {
            AsyncFd::register_with_interest(GateFd(epoll), tokio::io::Interest::READABLE)
        }?;
        Ok(Self {
            inotify,
            gate,
            armed: true,
            nudge,
        })
    }

    /// The inotify instance (to read it without waiting).
    pub(crate) fn inotify(&mut self) -> &mut Inotify {
        &mut self.inotify
    }

    /// Waits until inotify is worth reading: at once when events came
    /// while the gate was shut, else at its next readiness — the gate
    /// shut meanwhile until the drain asked for begins. The caller then
    /// reads inotify (what one read leaves is worth reading at the next
    /// call). Cancel-safe.
    pub(crate) async fn readable(&mut self) -> io::Result<()> {
        loop {
            if !self.armed {
                if let Some(nudge) = &self.nudge {
                    // Shut until the drain begins: it wakes the thread,
                    // and what came meanwhile is read then.
                    let _ = tokio::time::timeout(MOST_SHUT, nudge.answered()).await;
                }
                if inotify_has_events(&self.inotify)? {
                    return Ok(());
                }
                self.gate
                    .get_ref()
                    .0
                    .modify(self.inotify.as_fd(), &mut one_shot())
                    .map_err(io::Error::from)?;
                self.armed = true;
            }
            let mut ready = self.gate.readable().await?;
            // Taking the readiness disarms the inotify fd (one-shot).
            let mut events = [EpollEvent::empty()];
            let taken = ready
                .get_inner()
                .0
                .wait(&mut events, EpollTimeout::ZERO)
                .map_err(io::Error::from)?;
            ready.clear_ready();
            if taken > 0 {
                self.armed = false;
                return Ok(());
            }
        }
    }
}

/// Whether `inotify` has events queued, without reading them.
fn inotify_has_events(inotify: &Inotify) -> io::Result<bool> {
    crate::unread::unread_bytes(inotify.as_fd()).map(|unread| unread > 0)
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;
    use std::sync::atomic::{AtomicBool, Ordering};

    use inotify::WatchMask;

    use super::*;
    use crate::liveness::kernel::live_table::Nudges;

    /// A drain asked at every nudge, begun when the test says.
    #[derive(Default)]
    struct Scripted {
        asked: AtomicBool,
        begun: tokio::sync::Notify,
    }

    impl Scripted {
        /// The drain asked for begins.
        fn drain(&self) {
            self.asked.store(false, Ordering::Release);
            self.begun.notify_waiters();
        }
    }

    impl Nudges for Scripted {
        fn now(&self) {
            self.asked.store(true, Ordering::Release);
        }

        fn answered(&self) -> std::pin::Pin<Box<dyn std::future::Future<Output = ()> + Send + '_>> {
            Box::pin(async move {
                let begun = self.begun.notified();
                tokio::pin!(begun);
                begun.as_mut().enable();
                if self.asked.load(Ordering::Acquire) {
                    begun.await;
                }
            })
        }
    }

    /// A gate on a fresh directory's inotify.
    fn gated(nudge: Option<Nudger>) -> (tempfile::TempDir, GatedInotify) {
        let dir = tempfile::tempdir().expect("tempdir");
        let inotify = Inotify::init().expect("inotify");
        inotify
            .watches()
            .add(dir.path(), WatchMask::CREATE | WatchMask::MODIFY)
            .expect("watch");
        let gate = GatedInotify::new(inotify, nudge).expect("gate");
        (dir, gate)
    }

    /// Reads what inotify has: how many events.
    fn read(gate: &mut GatedInotify) -> usize {
        let mut buffer = [0; 4096];
        match gate.inotify().read_events(&mut buffer) {
            Ok(events) => events.count(),
            Err(error) if error.kind() == io::ErrorKind::WouldBlock => 0,
            Err(error) => panic!("read: {error}"),
        }
    }

    /// Whether `readable` is done at its first poll.
    async fn ready_at_once(gate: &mut GatedInotify) -> bool {
        tokio::select! {
            biased;
            done = gate.readable() => {
                done.expect("readable");
                true
            }
            () = std::future::ready(()) => false,
        }
    }

    /// The first event opens the gate; while the drain it asked for has
    /// not begun, the events that come after wake nobody (the gate stays
    /// shut though they wait in inotify); when it begins they are read at
    /// once, in one read; with none left, the gate waits for the next.
    #[tokio::test(flavor = "current_thread")]
    async fn events_after_the_first_wait_for_the_drain_it_asked_for() {
        let drains = Arc::new(Scripted::default());
        let (dir, mut gate) = gated(Some(drains.clone()));
        std::fs::write(dir.path().join("a.lock"), b"1").expect("write");
        tokio::time::timeout(Duration::from_secs(5), gate.readable())
            .await
            .expect("the first event opens the gate")
            .expect("readable");
        assert!(read(&mut gate) > 0);
        drains.now();

        std::fs::write(dir.path().join("b.lock"), b"1").expect("write");
        assert!(
            inotify_has_events(&gate.inotify).expect("FIONREAD"),
            "the event waits in inotify"
        );
        assert!(
            !ready_at_once(&mut gate).await,
            "shut while the drain is asked and not begun"
        );

        drains.drain();
        assert!(ready_at_once(&mut gate).await, "open once it begins");
        assert!(read(&mut gate) > 0, "what came meanwhile is read then");

        assert!(!ready_at_once(&mut gate).await, "nothing left: it waits");
        std::fs::write(dir.path().join("c.lock"), b"1").expect("write");
        tokio::time::timeout(Duration::from_secs(5), gate.readable())
            .await
            .expect("armed again: the next event opens it")
            .expect("readable");
        assert!(read(&mut gate) > 0);
    }

    /// A drain that never begins (a reader that stopped) keeps the gate
    /// shut no longer than MOST_SHUT; without a nudger it never stays
    /// shut.
    #[tokio::test(flavor = "current_thread")]
    async fn the_gate_never_stays_shut_for_good() {
        let drains = Arc::new(Scripted::default());
        let (dir, mut gate) = gated(Some(drains.clone()));
        std::fs::write(dir.path().join("a.lock"), b"1").expect("write");
        gate.readable().await.expect("readable");
        read(&mut gate);
        drains.now();
        std::fs::write(dir.path().join("b.lock"), b"1").expect("write");
        tokio::time::timeout(Duration::from_secs(5), gate.readable())
            .await
            .expect("open after MOST_SHUT though no drain began")
            .expect("readable");
        assert!(read(&mut gate) > 0);

        let (dir, mut gate) = gated(None);
        std::fs::write(dir.path().join("a.lock"), b"1").expect("write");
        gate.readable().await.expect("readable");
        read(&mut gate);
        std::fs::write(dir.path().join("b.lock"), b"1").expect("write");
        assert!(
            ready_at_once(&mut gate).await,
            "no drain to wait for: what came is read at once"
        );
    }
}
