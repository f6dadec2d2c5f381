//! `cargo bench --bench serve`: what a Prometheus scrape of `locktop
//! serve` costs, at 10,000 and 100,000 keys (`cargo test` runs a smoke
//! pass at 2,000). Each size: a release `serve` child on free keys made
//! on disk, then GET `/healthz` (the HTTP floor: same server, same
//! client, no work) and GET `/metrics` (OpenMetrics, as Prometheus asks)
//! in turns; the figures are p50/p99 of each and the ratio of the
//! scrape to the floor measured in the same run. Target: a scrape ≤ 10 ms
//! at 10,000 keys. Also the series count of a scrape, which must not
//! grow with keys, and serve's peak RSS. Last, SIGKILL of a holder → its
//! `free` line on `/events`, without and with 100 threads scraping (10/s
//! each): the engine must keep up while it is scraped. And at 10,000 keys
//! (2,000 in the smoke pass) the cost of TLS and basic auth: `/metrics`
//! from a `serve --web-config` (a CA and certificate made by rcgen, a
//! bcrypt password) against the same scrape in clear, in turns, over
//! kept-alive connections as Prometheus scrapes.

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use base64::Engine as _;
use locktop::locks::agent_tag_lock;
use locktop::locks::escape::{announce_path, gate_path};

/// The scrape target at 10,000 keys.
const TARGET_10K: Duration = Duration::from_millis(10);

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let full = args.iter().any(|a| a == "--bench") && !args.iter().any(|a| a == "--smoke");
    let (sizes, samples): (&[usize], usize) = if full {
        (&[10_000, 100_000], 300)
    } else {
        (&[2_000], 40)
    };
    println!(
        "locktop serve scrape bench ({}): {} samples per endpoint; load at start: {}",
        if full { "full" } else { "SMOKE" },
        samples,
        std::fs::read_to_string("/proc/loadavg")
            .unwrap_or_default()
            .trim()
    );
    for &keys in sizes {
        measure(keys, samples);
    }
    kills_under_scrapers(if full { 10_000 } else { 500 }, if full { 30 } else { 4 });
}

/// A `locktop hold --group TAG` child, killed and reaped on drop.
struct Holder(Child);

impl Drop for Holder {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

fn hold(state: &Path, tag: &str) -> Holder {
    let (child, line) = spawn_first_line(state, &["hold", "--group", tag], false);
    assert!(line.contains("\"held\":true"), "{line}");
    Holder(child)
}

/// SIGKILL of a holder → its `free` line on `/events`, `kills` times,
/// without and then with 100 threads each scraping `/metrics` ten times a
/// second: the scrapes must not slow the engine down.
fn kills_under_scrapers(keys: usize, kills: usize) {
    let tmp = tempfile::tempdir().expect("tempdir");
    let state = tmp.path().join("state");
    free_keys(&state, keys);
    let serve = start(&state);
    let events = agent()
        .get(&format!("{}/events", serve.1))
        .call()
        .expect("GET /events");
    let (tx, lines) = std::sync::mpsc::channel::<(Instant, String)>();
    std::thread::spawn(move || {
        let reader = BufReader::new(events.into_body().into_reader());
        for line in reader.lines().map_while(Result::ok) {
            if tx.send((Instant::now(), line)).is_err() {
                break;
            }
        }
    });
    let mut rows = Vec::new();
    for scrapers in [0, 100] {
        let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
        let threads: Vec<_> = (0..scrapers)
            .map(|_| {
                let (url, stop) = (format!("{}/metrics", serve.1), stop.clone());
                std::thread::spawn(move || {
                    let agent = agent();
                    let mut n = 0u64;
                    while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                        let _ = get(&agent, &url, true);
                        n += 1;
                        // 10 scrapes a second each: 1,000/s in all, a
                        // hundred thousand times what a 15 s Prometheus
                        // interval asks, yet not a CPU-bound load
                        // generator starving everything on this machine.
                        std::thread::sleep(Duration::from_millis(100));
                    }
                    n
                })
            })
            .collect();
        let (mut took, mut seen) = (Vec::new(), Vec::new());
        for k in 0..kills {
            let tag = format!("victim-{scrapers}-{k}");
            let mut holder = hold(&state, &tag);
            let live = format!("\"name\":\"{tag}\"");
            wait_line(&lines, |line| {
                line.contains(&live) && line.contains("\"to\":\"live\"")
            });
            let (killed, killed_wall) = (Instant::now(), std::time::SystemTime::now());
            let _ = holder.0.kill();
            let (at, line) = wait_line(&lines, |line| {
                line.contains(&live) && line.contains("\"to\":\"free\"")
            });
            took.push(at.saturating_duration_since(killed));
            // The line's own time: when the engine observed the release.
            let observed = serde_json::from_str::<serde_json::Value>(&line)
                .ok()
                .and_then(|v| v["time"].as_str().map(str::to_string))
                .and_then(|time| humantime::parse_rfc3339_weak(&time).ok())
                .and_then(|time| time.duration_since(killed_wall).ok())
                .unwrap_or_default();
            seen.push(observed);
        }
        stop.store(true, std::sync::atomic::Ordering::Relaxed);
        let scrapes: u64 = threads.into_iter().map(|t| t.join().unwrap_or(0)).sum();
        took.sort();
        seen.sort();
        let p = |v: &[Duration]| [percentile(v, 0.5), percentile(v, 0.99)];
        rows.push((scrapers, p(&seen), p(&took), scrapes));
    }
    for (scrapers, seen, read, scrapes) in &rows {
        println!(
            "kill, {keys} keys, {kills} kills, {scrapers:>3} scrapers ({scrapes} scrapes meanwhile): \
             the engine saw it free (the line's time, ms precision) p50 {:.1?} p99 {:.1?} · \
             the line read by this client p50 {:.1?} p99 {:.1?}",
            seen[0], seen[1], read[0], read[1]
        );
    }
}

/// Waits (≤ 30 s) for a line matching `pred`; when it was read, and the line.
fn wait_line(
    lines: &std::sync::mpsc::Receiver<(Instant, String)>,
    pred: impl Fn(&str) -> bool,
) -> (Instant, String) {
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let left = deadline.saturating_duration_since(Instant::now());
        let (at, line) = lines
            .recv_timeout(left)
            .expect("an /events line within 30 s");
        if pred(&line) {
            return (at, line);
        }
    }
}

/// `keys` free tags written on disk (empty gate, announce `1`), with the
/// SDK's escaping.
fn free_keys(state: &Path, keys: usize) {
    for i in 0..keys {
        let (dir, key) = agent_tag_lock(state, &format!("scrape-{i}"));
        if i == 0 {
            std::fs::create_dir_all(&dir).expect("tags dir");
        }
        std::fs::write(gate_path(&dir, &key), b"").expect("gate");
        std::fs::write(announce_path(&dir, &key), b"1").expect("announce");
    }
}

/// A child killed and reaped on drop.
struct Serve(Child, String);

impl Drop for Serve {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

fn locktop_bin() -> PathBuf {
    option_env!("CARGO_BIN_EXE_locktop")
        .map(PathBuf::from)
        .filter(|path| path.is_file())
        .expect("the locktop binary (built with the bench)")
}

/// Spawns `locktop --state-dir STATE <args>` and reads its first line
/// (from stderr when `from_stderr`, else stdout).
fn spawn_first_line(state: &Path, args: &[&str], from_stderr: bool) -> (Child, String) {
    let piped = |yes: bool| if yes { Stdio::piped() } else { Stdio::null() };
    let mut child = Command::new(locktop_bin())
        .arg("--state-dir")
        .arg(state)
        .args(args)
        .stdin(Stdio::piped())
        .stdout(piped(!from_stderr))
        .stderr(piped(from_stderr))
        .spawn()
        .expect("spawn locktop");
    let mut line = String::new();
    let mut read = |out: &mut dyn std::io::Read| BufReader::new(out).read_line(&mut line);
    let got = if from_stderr {
        read(child.stderr.as_mut().expect("stderr"))
    } else {
        read(child.stdout.as_mut().expect("stdout"))
    };
    got.expect("the child's first line");
    (child, line)
}

fn start(state: &Path) -> Serve {
    start_with(state, &[])
}

/// `serve` on a free loopback port, no periodic sweep, with `extra`
/// arguments.
fn start_with(state: &Path, extra: &[&str]) -> Serve {
    let mut args = vec!["serve", "--listen", "127.0.0.1:0", "--sweep", "3600"];
    args.extend_from_slice(extra);
    let (child, line) = spawn_first_line(state, &args, true);
    let base = line
        .trim()
        .strip_prefix("locktop serve: listening on ")
        .expect("listening line")
        .to_string();
    Serve(child, base)
}

fn agent() -> ureq::Agent {
    ureq::Agent::config_builder()
        .timeout_global(Some(Duration::from_secs(30)))
        .build()
        .into()
}

/// One GET: (time, body).
fn get(agent: &ureq::Agent, url: &str, openmetrics: bool) -> (Duration, String) {
    let start = Instant::now();
    let mut request = agent.get(url);
    if openmetrics {
        request = request.header("Accept", "application/openmetrics-text;version=1.0.0");
    }
    let body = request
        .call()
        .expect("GET")
        .body_mut()
        .with_config()
        .limit(1 << 30)
        .read_to_string()
        .expect("body");
    (start.elapsed(), body)
}

fn percentile(sorted: &[Duration], p: f64) -> Duration {
    sorted[((sorted.len() - 1) as f64 * p).round() as usize]
}

fn measure(keys: usize, samples: usize) {
    let tmp = tempfile::tempdir().expect("tempdir");
    let state = tmp.path().join("state");
    let made = Instant::now();
    free_keys(&state, keys);
    let made = made.elapsed();
    let serve = start(&state);
    let agent = agent();
    let metrics = format!("{}/metrics", serve.1);
    let healthz = format!("{}/healthz", serve.1);
    let all_free = format!(r#"locktop_keys{{kind="tag",liveness="free"}} {keys}"#);
    let synced = Instant::now();
    loop {
        let (_, body) = get(&agent, &metrics, false);
        if body.contains(&all_free) {
            break;
        }
        assert!(
            synced.elapsed() < Duration::from_secs(300),
            "serve never saw every key"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    let synced = synced.elapsed();
    let (mut floor, mut scrape) = (Vec::new(), Vec::new());
    let mut series = 0;
    for _ in 0..samples {
        floor.push(get(&agent, &healthz, false).0);
        let (took, body) = get(&agent, &metrics, true);
        scrape.push(took);
        series = body
            .lines()
            .filter(|line| !line.starts_with('#') && !line.is_empty())
            .count();
    }
    floor.sort();
    scrape.sort();
    let (f50, f99) = (percentile(&floor, 0.5), percentile(&floor, 0.99));
    let (s50, s99) = (percentile(&scrape, 0.5), percentile(&scrape, 0.99));
    let peak = std::fs::read_to_string(format!("/proc/{}/status", serve.0.id()))
        .unwrap_or_default()
        .lines()
        .find_map(|line| line.strip_prefix("VmHWM:"))
        .map(|v| v.trim().to_string())
        .unwrap_or_default();
    if keys <= 10_000 {
        tls_cost(&state, &serve, &metrics, keys, samples);
    }
    let verdict = if keys == 10_000 {
        if s99 <= TARGET_10K {
            "  PASS (p99 ≤ 10 ms)"
        } else {
            "  MISS (p99 > 10 ms)"
        }
    } else {
        ""
    };
    println!(
        "{keys:>7} keys (made in {made:.1?}, seen by serve {synced:.1?} after start): \
         /healthz p50 {f50:.2?} p99 {f99:.2?} · /metrics p50 {s50:.2?} p99 {s99:.2?} \
         = {:.2}× / {:.2}× the floor · {series} series · serve peak RSS {peak}{verdict}",
        s50.as_secs_f64() / f50.as_secs_f64(),
        s99.as_secs_f64() / f99.as_secs_f64(),
    );
}

/// `/metrics` over TLS with basic auth against the same scrape in clear
/// (`plain`), in turns: p50 / p99 of each and their ratio.
fn tls_cost(state: &Path, plain: &Serve, plain_url: &str, keys: usize, samples: usize) {
    let pki = tempfile::tempdir().expect("tempdir");
    let mut ca_params = rcgen::CertificateParams::new(Vec::<String>::new()).expect("CA");
    ca_params.is_ca = rcgen::IsCa::Ca(rcgen::BasicConstraints::Unconstrained);
    let ca_key = rcgen::KeyPair::generate().expect("CA key");
    let ca = ca_params.self_signed(&ca_key).expect("CA");
    let mut params = rcgen::CertificateParams::new(vec!["localhost".to_string()]).expect("cert");
    params
        .subject_alt_names
        .push(rcgen::SanType::IpAddress("127.0.0.1".parse().expect("IP")));
    let key = rcgen::KeyPair::generate().expect("key");
    let cert = params.signed_by(&key, &ca, &ca_key).expect("signed");
    std::fs::write(pki.path().join("tls.crt"), cert.pem()).expect("cert");
    std::fs::write(pki.path().join("tls.key"), key.serialize_pem()).expect("key");
    let hash = bcrypt::hash("bench", 10).expect("bcrypt");
    let config = pki.path().join("web.yml");
    std::fs::write(
        &config,
        format!(
            "tls_server_config:\n  cert_file: tls.crt\n  key_file: tls.key\n\
             basic_auth_users:\n  bench: '{hash}'\n"
        ),
    )
    .expect("web config");
    let secure = start_with(state, &["--web-config", config.to_str().expect("UTF-8")]);
    let ca_cert = ureq::tls::Certificate::from_pem(ca.pem().as_bytes()).expect("CA PEM");
    let tls = ureq::tls::TlsConfig::builder()
        .root_certs(ureq::tls::RootCerts::new_with_certs(&[ca_cert]))
        .build();
    let agent: ureq::Agent = ureq::Agent::config_builder()
        .tls_config(tls)
        .timeout_global(Some(Duration::from_secs(30)))
        .build()
        .into();
    let url = format!("{}/metrics", secure.1);
    let login = format!(
        "Basic {}",
        base64::engine::general_purpose::STANDARD.encode("bench:bench")
    );
    let scrape = |agent: &ureq::Agent| {
        let start = Instant::now();
        let body = agent
            .get(&url)
            .header("Authorization", &login)
            .header("Accept", "application/openmetrics-text;version=1.0.0")
            .call()
            .expect("GET over TLS")
            .body_mut()
            .read_to_string()
            .expect("body");
        (start.elapsed(), body)
    };
    let all_free = format!(r#"locktop_keys{{kind="tag",liveness="free"}} {keys}"#);
    let waited = Instant::now();
    while !scrape(&agent).1.contains(&all_free) {
        assert!(
            waited.elapsed() < Duration::from_secs(300),
            "the TLS serve never synced"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    let clear = self::agent();
    let (mut over_tls, mut in_clear) = (Vec::new(), Vec::new());
    for _ in 0..samples {
        over_tls.push(scrape(&agent).0);
        in_clear.push(get(&clear, plain_url, true).0);
    }
    let _ = plain;
    over_tls.sort();
    in_clear.sort();
    let (t50, t99) = (percentile(&over_tls, 0.5), percentile(&over_tls, 0.99));
    let (c50, c99) = (percentile(&in_clear, 0.5), percentile(&in_clear, 0.99));
    println!(
        "{keys:>7} keys, TLS + basic auth (kept-alive, credentials verified once): /metrics \
         p50 {t50:.2?} p99 {t99:.2?} · in clear p50 {c50:.2?} p99 {c99:.2?} (same run, in turns) \
         = {:.2}× / {:.2}×",
        t50.as_secs_f64() / c50.as_secs_f64(),
        t99.as_secs_f64() / c99.as_secs_f64(),
    );
}
