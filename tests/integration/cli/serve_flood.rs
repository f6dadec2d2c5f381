//! `locktop serve --web-config` flooded by strangers, as an attacker on
//! another host would: connections held open without a word, and wrong
//! passwords by the hundred. An authenticated scraper must still get its
//! answers, in time — its place and its CPU are not the strangers' to
//! take. Everything runs on loopback: the strangers come from 127.0.0.2
//! (another host, as the server sees it), or from 127.0.0.1 as the
//! scraper does (a second process on its host, clients behind its NAT).

use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use super::serve_tls::{PASSWORD, Pki, USER, basic, start_tls};
use crate::common::{self, state_in_tempdir};

/// Where the strangers connect from: another host, as the server sees it.
const STRANGERS_FROM: &str = "127.0.0.2:0";

/// Where the scraper connects from.
const SCRAPER_FROM: &str = "127.0.0.1:0";

/// The open files a test here may need, its neighbours' included: 520
/// strangers' sockets (and as many in `serve`), beside another such test.
const OPEN_FILES: u64 = 4096;

/// `count` connections from `from` to `address` that never send a byte, each reopened 20 ms after the server closes it (as the
/// field test did), on a thread of their own; dropping it stops them.
struct Strangers {
    open: Arc<AtomicUsize>,
    stop: tokio::sync::watch::Sender<bool>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl Strangers {
    fn connect(from: &'static str, address: SocketAddr, count: usize) -> Self {
        let open = Arc::new(AtomicUsize::new(0));
        let (stop, stopped) = tokio::sync::watch::channel(false);
        let counted = open.clone();
        let thread = std::thread::spawn(move || {
            let runtime = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .expect("a runtime");
            runtime.block_on(async move {
                let tasks: Vec<_> = (0..count)
                    .map(|_| {
                        let (open, stop) = (counted.clone(), stopped.clone());
                        tokio::spawn(stranger(from, address, open, stop))
                    })
                    .collect();
                for task in tasks {
                    let _ = task.await;
                }
            });
        });
        Self {
            open,
            stop,
            thread: Some(thread),
        }
    }

    /// Waits until `count` are connected at once.
    fn wait_open(&self, count: usize) {
        let deadline = Instant::now() + common::PROCESS_TIMEOUT;
        while self.open.load(Ordering::SeqCst) < count {
            assert!(
                Instant::now() < deadline,
                "only {} strangers connected",
                self.open.load(Ordering::SeqCst)
            );
            std::thread::sleep(Duration::from_millis(20));
        }
    }
}

impl Drop for Strangers {
    fn drop(&mut self) {
        let _ = self.stop.send(true);
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}

/// One stranger: connect, say nothing, reconnect when closed; until told
/// to stop.
async fn stranger(
    from: &'static str,
    address: SocketAddr,
    open: Arc<AtomicUsize>,
    mut stop: tokio::sync::watch::Receiver<bool>,
) {
    use tokio::io::AsyncReadExt as _;
    while !*stop.borrow() {
        let socket = tokio::net::TcpSocket::new_v4().expect("a socket");
        socket
            .bind(from.parse().expect("an address"))
            .expect("bind the strangers' address");
        if let Ok(mut stream) = socket.connect(address).await {
            open.fetch_add(1, Ordering::SeqCst);
            let mut buf = [0u8; 256];
            tokio::select! {
                _ = async { while matches!(stream.read(&mut buf).await, Ok(n) if n > 0) {} } => {}
                _ = stop.changed() => {}
            }
            open.fetch_sub(1, Ordering::SeqCst);
        }
        tokio::select! {
            () = tokio::time::sleep(Duration::from_millis(20)) => {}
            _ = stop.changed() => {}
        }
    }
}

/// GET `url` with `authorization` on a new connection (a fresh agent, as
/// a Prometheus whose keep-alive the server closed): the status, or
/// `None` when the server closed the connection or did not answer.
fn scrape_on_a_new_connection(pki: &Pki, url: &str, authorization: &str) -> Option<u16> {
    let response = pki
        .agent()
        .get(url)
        .header("Authorization", authorization)
        .call();
    match response {
        Ok(mut response) => {
            let _ = response.body_mut().read_to_string();
            Some(response.status().as_u16())
        }
        Err(_) => None,
    }
}

/// The threads of process `pid` now.
fn threads(pid: u32) -> usize {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).expect("status");
    status
        .lines()
        .find_map(|line| line.strip_prefix("Threads:"))
        .and_then(|value| value.trim().parse().ok())
        .expect("Threads in status")
}

/// Reported from the field: 520 idle connections from another host (the
/// cap is 512), reopened as they close, made 12 of 14 authenticated
/// scrapes on new connections fail and Prometheus mark the host down.
/// Strangers now share the places among themselves: at least 90 % of the
/// scraper's 20 scrapes, each on a new connection, are answered.
#[test]
#[ignore = "soak: seconds of load or churn; the full suite runs it (cargo test -- --include-ignored)"]
fn strangers_holding_every_connection_do_not_keep_an_authenticated_scraper_out() {
    scrapes_beside_idle_strangers_from(STRANGERS_FROM);
}

/// Issue 52, item 6: the same from the scraper's own address (a second
/// process on its host, clients behind its NAT) answered 0 of 14 scrapes
/// (a newcomer could push out only a stranger of an origin holding two
/// more places than its own). Now a newcomer pushes out the longest-idle
/// stranger of its own address too.
#[test]
#[ignore = "soak: seconds of load or churn; the full suite runs it (cargo test -- --include-ignored)"]
fn strangers_on_the_scrapers_own_address_do_not_keep_it_out() {
    scrapes_beside_idle_strangers_from(SCRAPER_FROM);
}

/// 520 idle strangers from `from`, reopened as they close, beside a
/// scraper on 127.0.0.1: at least 90 % of its 20 scrapes, each on a new
/// connection, are answered, and the strangers keep their connections.
fn scrapes_beside_idle_strangers_from(from: &'static str) {
    if !common::open_files_or_skip(
        &format!("cli::serve_flood (520 strangers from {from})"),
        OPEN_FILES,
    ) {
        return;
    }
    let pki = Pki::new();
    let (_tmp, state) = state_in_tempdir();
    let serve = start_tls(&state, "127.0.0.1:0", &pki.good_config());
    let url = format!("https://{}/metrics", serve.address);
    let right = basic(USER, PASSWORD);
    assert_eq!(scrape_on_a_new_connection(&pki, &url, &right), Some(200));
    let strangers = Strangers::connect(from, serve.address.parse().expect("address"), 520);
    strangers.wait_open(512);
    // Time for serve to take every one of them.
    std::thread::sleep(Duration::from_millis(500));
    let scrapes = 20;
    let mut answered = 0;
    for _ in 0..scrapes {
        if scrape_on_a_new_connection(&pki, &url, &right) == Some(200) {
            answered += 1;
        }
        // Over 10 s: two rounds of the strangers' 5 s header timeout.
        std::thread::sleep(Duration::from_millis(500));
    }
    let still_open = strangers.open.load(Ordering::SeqCst);
    drop(strangers);
    println!("{answered} of {scrapes} scrapes answered beside {still_open} strangers from {from}");
    assert!(still_open >= 500, "the strangers let go: {still_open}");
    assert!(
        answered * 10 >= scrapes * 9,
        "{answered} of {scrapes} scrapes answered"
    );
}

/// Reported from the field: 200 clients sending wrong passwords grew
/// `serve` to 264 threads (a bcrypt check each, at once) and a scrape
/// with credentials verified before took 2.7 s at the median. Now the
/// checks are bounded: serve's threads stay few, and the verified
/// scraper's scrapes, each on a new connection (TLS handshake included),
/// take at most 200 ms at the median (the field's bound; they take a few
/// ms when nothing else runs — a median, so a build next door that
/// stalls one scrape does not fail it).
#[test]
#[ignore = "soak: seconds of load or churn; the full suite runs it (cargo test -- --include-ignored)"]
fn a_flood_of_wrong_passwords_neither_grows_threads_nor_slows_a_verified_scraper() {
    if !common::open_files_or_skip(
        "cli::serve_flood::a_flood_of_wrong_passwords_neither_grows_threads_nor_slows_a_verified_scraper",
        OPEN_FILES,
    ) {
        return;
    }
    let pki = Pki::new();
    let (_tmp, state) = state_in_tempdir();
    // The cost `htpasswd -nBC 10` gives: ~0.2 s a check in a debug build.
    let hash = bcrypt::hash(PASSWORD, 10).expect("bcrypt");
    let config = pki.config("cost-10.yml", "server.crt", "server.key", &hash);
    let serve = start_tls(&state, "127.0.0.1:0", &config);
    let pid = serve.child.id();
    let url = format!("https://{}/metrics", serve.address);
    let right = basic(USER, PASSWORD);
    assert_eq!(scrape_on_a_new_connection(&pki, &url, &right), Some(200));
    let before = threads(pid);

    let stop = Arc::new(AtomicBool::new(false));
    let flood: Vec<_> = (0..200)
        .map(|i| {
            let (agent, url, stop) = (pki.agent(), url.clone(), stop.clone());
            let wrong = basic(USER, &format!("wrong password {i}"));
            std::thread::spawn(move || {
                let deadline = Instant::now() + Duration::from_secs(120);
                while !stop.load(Ordering::SeqCst) && Instant::now() < deadline {
                    let _ = agent.get(&url).header("Authorization", &wrong).call();
                }
            })
        })
        .collect();
    // The flood's TLS handshakes done, its checks under way.
    std::thread::sleep(Duration::from_secs(3));
    let mut took = Vec::new();
    let mut statuses = Vec::new();
    let mut most_threads = 0;
    for _ in 0..15 {
        most_threads = most_threads.max(threads(pid));
        let began = Instant::now();
        let status = scrape_on_a_new_connection(&pki, &url, &right);
        took.push(began.elapsed());
        statuses.push(status);
        std::thread::sleep(Duration::from_millis(200));
    }
    stop.store(true, Ordering::SeqCst);
    // Their requests wait for a check: ending serve ends them.
    drop(serve);
    for client in flood {
        client.join().expect("a flooding client");
    }
    took.sort();
    let median = took[took.len() / 2];
    println!(
        "threads: {before} before, {most_threads} at most during the flood; \
         verified scrapes: median {median:?}, slowest {:?}; {statuses:?}",
        took.last().expect("scrapes")
    );
    assert!(
        statuses.iter().all(|status| *status == Some(200)),
        "every verified scrape is answered: {statuses:?}"
    );
    assert!(
        most_threads <= before + 8,
        "serve grew from {before} to {most_threads} threads"
    );
    assert!(
        median <= Duration::from_millis(200),
        "a verified scrape took {median:?} at the median: {took:?}"
    );
}
