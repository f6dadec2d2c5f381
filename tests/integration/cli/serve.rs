//! `locktop serve` as an operator runs it: a real `serve` child over real
//! holders, read with an HTTP client, and scraped by a real Prometheus
//! (Debian's `prometheus`, installed by `.ci/run`) whose own query API
//! must see a held tag appear and vanish.

use std::io::{BufRead, BufReader, Read};
use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use nix::sys::signal::{self, Signal};
use nix::unistd::Pid;
use serde_json::Value;

use crate::common::{
    self, Holder, PROCESS_TIMEOUT, serial_blocking, state_in_tempdir, wait_with_timeout,
};

/// How long an endpoint may take to show a change. A correctness bound.
const SHOW_TIMEOUT: Duration = Duration::from_secs(15);

/// A running `locktop serve` child; dropping it kills it. Its stderr is
/// read on to the end (a serve whose stderr nobody reads would fail to
/// write its next line), the lines kept.
pub(super) struct Serve {
    pub(super) child: Child,
    /// `http(s)://127.0.0.1:PORT`: where it answers, on loopback.
    pub(super) base: String,
    /// `127.0.0.1:PORT`.
    pub(super) address: String,
    stderr: std::sync::Arc<std::sync::Mutex<Vec<String>>>,
}

impl Serve {
    /// `serve --listen 127.0.0.1:0 <args>`; waits for its "listening on" line.
    fn start(state: &Path, args: &[&str]) -> Self {
        Self::start_on(state, "127.0.0.1:0", args)
    }

    /// `serve --listen LISTEN <args>` (a port of 0); waits for its
    /// "listening on" line.
    pub(super) fn start_on(state: &Path, listen: &str, args: &[&str]) -> Self {
        let mut all = vec!["serve", "--listen", listen];
        all.extend_from_slice(args);
        let mut child = common::locktop_command(state, &all)
            .spawn()
            .expect("spawn serve");
        let mut lines = BufReader::new(child.stderr.take().expect("stderr"))
            .lines()
            .map_while(Result::ok)
            .filter(|line| !common::is_source_note(line));
        let first = lines.next().expect("serve's first line");
        let bound = first
            .strip_prefix("locktop serve: listening on ")
            .unwrap_or_else(|| panic!("unexpected first line {first:?}"));
        let (scheme, at) = bound.split_once("://").expect("a URL");
        let port = at.rsplit_once(':').expect("IP:PORT").1;
        let address = format!("127.0.0.1:{port}");
        let stderr = std::sync::Arc::new(std::sync::Mutex::new(vec![first.clone()]));
        let sink = stderr.clone();
        std::thread::spawn(move || {
            for line in lines {
                sink.lock().expect("stderr lines").push(line);
            }
        });
        Self {
            child,
            base: format!("{scheme}://{address}"),
            address,
            stderr,
        }
    }

    /// Every stderr line so far.
    pub(super) fn stderr(&self) -> String {
        self.stderr.lock().expect("stderr lines").join("\n")
    }

    pub(super) fn url(&self, path: &str) -> String {
        format!("{}{path}", self.base)
    }

    /// SIGTERM, then the exit status.
    fn terminate(&mut self) -> std::process::ExitStatus {
        let pid = Pid::from_raw(i32::try_from(self.child.id()).expect("pid"));
        signal::kill(pid, Signal::SIGTERM).expect("SIGTERM serve");
        wait_with_timeout(&mut self.child, PROCESS_TIMEOUT).expect("serve exits after SIGTERM")
    }
}

impl Drop for Serve {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn agent() -> ureq::Agent {
    ureq::Agent::config_builder()
        .http_status_as_error(false)
        .timeout_global(Some(Duration::from_secs(10)))
        .build()
        .into()
}

/// GET `url`: (status, body).
fn get(url: &str) -> (u16, String) {
    let mut response = agent()
        .get(url)
        .call()
        .unwrap_or_else(|e| panic!("GET {url}: {e}"));
    let status = response.status().as_u16();
    let body = response.body_mut().read_to_string().expect("body");
    (status, body)
}

/// Polls `url` until `pred(body)` holds; panics naming `what` after
/// [`SHOW_TIMEOUT`].
pub(super) fn wait_body(url: &str, what: &str, pred: impl Fn(&str) -> bool) -> String {
    let deadline = Instant::now() + SHOW_TIMEOUT;
    loop {
        let (_, body) = get(url);
        if pred(&body) {
            return body;
        }
        assert!(
            Instant::now() < deadline,
            "{url} never showed {what}; last:\n{body}"
        );
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// The value of a counter (`name_total`) in a scrape.
fn counter(scrape: &str, name: &str) -> u64 {
    scrape
        .lines()
        .find_map(|line| line.strip_prefix(&format!("{name}_total ")))
        .and_then(|value| value.trim().parse().ok())
        .unwrap_or_else(|| panic!("no {name}_total in the scrape"))
}

/// `promtool check metrics` on a scrape: (success, its output).
/// Where `prometheus` and `promtool` come from.
pub(super) const PROMETHEUS_PACKAGE: &str =
    "Debian's prometheus package: apt-get install prometheus";

pub(super) fn promtool_check_metrics(scrape: &str) -> (bool, String) {
    let mut child = Command::new("promtool")
        .args(["check", "metrics"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("promtool (Debian's prometheus package) is needed by this test");
    std::io::Write::write_all(&mut child.stdin.take().expect("stdin"), scrape.as_bytes())
        .expect("feed promtool");
    let out = child.wait_with_output().expect("promtool");
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    (out.status.success(), text)
}

#[test]
fn every_endpoint_answers_from_the_live_view_and_a_scrape_probes_nothing() {
    let _serial = serial_blocking();
    let (_tmp, state) = state_in_tempdir();
    drop(Holder::hold(&state, &["--tag", "seed"]));
    let mut serve = Serve::start(&state, &["--sweep", "3600"]);
    let health = wait_body(&serve.url("/healthz"), "ok", |body| body.starts_with("ok"));
    // Which build answers: the version and commit `--version` names.
    let version = crate::common::run_locktop(&state, &["--version"]);
    let version = version.stdout.trim_end();
    assert!(
        health.contains(&format!("version: {version}\n")),
        "{health:?} names {version}"
    );

    let mut holder = Holder::hold(
        &state,
        &["--aih", "cli/daemon/served-1", "--tag", "served tag"],
    );
    let pid = holder.pid();
    let series =
        format!(r#"locktop_tag_held_seconds{{tag="served tag",pid="{pid}",role="agent"}}"#);
    let scrape = wait_body(&serve.url("/metrics"), &series, |body| {
        body.contains(&series)
    });
    assert!(
        scrape.contains(r#"locktop_live_agents{root="cli"} 1"#),
        "{scrape}"
    );
    assert!(
        scrape.contains(r#"locktop_keys{kind="tag",liveness="live"} 1"#),
        "{scrape}"
    );
    let open_metrics = agent()
        .get(&serve.url("/metrics"))
        .header("Accept", "application/openmetrics-text;version=1.0.0")
        .call()
        .expect("GET /metrics")
        .body_mut()
        .read_to_string()
        .expect("body");
    assert!(
        open_metrics.ends_with("# EOF\n"),
        "asked for, OpenMetrics: {open_metrics}"
    );
    assert!(
        !scrape.contains("# EOF"),
        "by default, the classic text format"
    );
    if crate::common::have_program("promtool", PROMETHEUS_PACKAGE) {
        let (ok, promtool) = promtool_check_metrics(&scrape);
        assert!(
            ok,
            "promtool check metrics refused the scrape:\n{promtool}\n{scrape}"
        );
    }

    // A scrape reads the view: no probe, no /proc/locks read of its own.
    // (Once the engine is quiet: the holder's own events may still be in
    // flight, and no periodic sweep runs in this test.)
    let quiet = |scrape: &str| {
        (
            counter(scrape, "locktop_probes"),
            counter(scrape, "locktop_proc_locks_reads"),
        )
    };
    let mut before = quiet(&scrape);
    loop {
        std::thread::sleep(Duration::from_millis(500));
        let now = quiet(&get(&serve.url("/metrics")).1);
        if now == before {
            break;
        }
        before = now;
    }
    let (probes, reads) = before;
    for _ in 0..5 {
        get(&serve.url("/metrics"));
    }
    let again = get(&serve.url("/metrics")).1;
    assert_eq!(counter(&again, "locktop_probes"), probes, "a scrape probed");
    assert_eq!(
        counter(&again, "locktop_proc_locks_reads"),
        reads,
        "a scrape read /proc/locks"
    );

    let (status, snapshot) = get(&serve.url("/snapshot.json"));
    assert_eq!(status, 200);
    let doc: Value = serde_json::from_str(&snapshot).expect("snapshot JSON");
    assert_eq!(doc["probe"], "lock-free", "serve takes no lock by default");
    let tag = doc["keys"]
        .as_array()
        .expect("keys")
        .iter()
        .find(|key| key["kind"] == "tag" && key["name"] == "served tag")
        .unwrap_or_else(|| panic!("no served tag in {doc}"));
    assert_eq!(tag["holders"][0]["pid"], pid);
    assert_eq!(tag["verdict"]["kind"], "agent_active", "{tag}");

    // /events: the watch --json stream, from the moment it connected.
    let response = agent()
        .get(&serve.url("/events"))
        .call()
        .expect("GET /events");
    assert_eq!(response.status().as_u16(), 200);
    let (lines_tx, lines) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let reader = BufReader::new(response.into_body().into_reader());
        for line in reader.lines().map_while(Result::ok) {
            if lines_tx.send(line).is_err() {
                break;
            }
        }
    });
    holder.kill();
    let deadline = Instant::now() + SHOW_TIMEOUT;
    loop {
        let left = deadline.saturating_duration_since(Instant::now());
        let line = lines
            .recv_timeout(left)
            .expect("a free line for the tag on /events");
        let value: Value = serde_json::from_str(&line).expect("NDJSON");
        if value["name"] == "served tag" && value["to"] == "free" {
            assert_eq!(value["from"], "live", "{line}");
            break;
        }
    }
    let gone = wait_body(&serve.url("/metrics"), "the tag gone", |body| {
        !body.contains("served tag")
    });
    assert!(
        gone.contains(r#"locktop_keys{kind="tag",liveness="free"} 2"#),
        "{gone}"
    );

    // SIGTERM with an /events stream still open: a clean, prompt exit.
    let status = serve.terminate();
    assert_eq!(status.code(), Some(0), "{status:?}");
}

#[test]
fn a_bad_listen_address_or_a_busy_port_is_one_line_and_exit_2() {
    let (_tmp, state) = state_in_tempdir();
    let busy = TcpListener::bind("127.0.0.1:0").expect("bind");
    let port = busy.local_addr().expect("addr").port();
    for listen in [
        "nonsense".to_string(),
        "127.0.0.1:99999".to_string(),
        format!("127.0.0.1:{port}"),
    ] {
        let done = common::run_locktop(&state, &["serve", "--listen", &listen]);
        assert_eq!(done.code(), 2, "{listen}: {done:?}");
        let lines = done.stderr_lines();
        assert_eq!(lines.len(), 1, "{listen}: {lines:?}");
        assert!(lines[0].starts_with("locktop: "), "{lines:?}");
        assert!(!lines[0].contains("panicked"), "{lines:?}");
    }
}

/// A real Prometheus, scraping every second on loopback.
pub(super) struct Prometheus {
    child: Child,
    base: String,
    _data: tempfile::TempDir,
}

impl Prometheus {
    fn start(target: &str, interval: Duration) -> Self {
        Self::start_with(target, interval, "")
    }

    /// [`Self::start`], the scrape job given `job` too (YAML lines
    /// indented for the job: `scheme`, `tls_config`, `basic_auth`).
    pub(super) fn start_with(target: &str, interval: Duration, job: &str) -> Self {
        let data = tempfile::tempdir().expect("tempdir");
        let config = data.path().join("prometheus.yml");
        let secs = interval.as_secs();
        std::fs::write(
            &config,
            format!(
                "global:\n  scrape_interval: {secs}s\n  scrape_timeout: {secs}s\n\
                 scrape_configs:\n  - job_name: locktop\n{job}    static_configs:\n      - targets: ['{target}']\n"
            ),
        )
        .expect("write config");
        let port = free_port();
        let child = Command::new("prometheus")
            .arg(format!("--config.file={}", config.display()))
            .arg(format!(
                "--storage.tsdb.path={}",
                data.path().join("tsdb").display()
            ))
            .arg(format!("--web.listen-address=127.0.0.1:{port}"))
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("prometheus (Debian's prometheus package) is needed by this test");
        Self {
            child,
            base: format!("http://127.0.0.1:{port}"),
            _data: data,
        }
    }

    /// The result vector of an instant query (empty on any error: the
    /// server may still be starting).
    /// The result of `query` once one of its series has the label `pid`;
    /// panics after a minute.
    pub(super) fn wait_for_pid(&self, query: &str, pid: &str) -> Vec<Value> {
        let deadline = Instant::now() + Duration::from_secs(60);
        loop {
            let result = self.query(query);
            if result.iter().any(|series| series["metric"]["pid"] == pid) {
                return result;
            }
            assert!(
                Instant::now() < deadline,
                "Prometheus never saw {query} with pid {pid}: {result:?}"
            );
            std::thread::sleep(Duration::from_millis(200));
        }
    }

    /// The API's `status` for `promql` ("success", or "error" for a query
    /// it cannot run).
    fn query_status(&self, promql: &str) -> String {
        let url = format!("{}/api/v1/query", self.base);
        let body = match agent().get(&url).query("query", promql).call() {
            Ok(mut response) => response.body_mut().read_to_string().unwrap_or_default(),
            Err(error) => return format!("{error}"),
        };
        serde_json::from_str::<Value>(&body)
            .ok()
            .and_then(|doc| doc["status"].as_str().map(str::to_string))
            .unwrap_or(body)
    }

    pub(super) fn query(&self, promql: &str) -> Vec<Value> {
        let url = format!("{}/api/v1/query", self.base);
        let Ok(mut response) = agent().get(&url).query("query", promql).call() else {
            return Vec::new();
        };
        let body = response.body_mut().read_to_string().unwrap_or_default();
        serde_json::from_str::<Value>(&body)
            .ok()
            .and_then(|doc| doc["data"]["result"].as_array().cloned())
            .unwrap_or_default()
    }
}

impl Drop for Prometheus {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .and_then(|listener| listener.local_addr())
        .expect("a free port")
        .port()
}

#[test]
#[ignore = "soak: seconds of load or churn; the full suite runs it (cargo test -- --include-ignored)"]
fn a_real_prometheus_sees_a_held_tag_and_sees_it_go_within_two_scrapes() {
    if !crate::common::have_program("prometheus", PROMETHEUS_PACKAGE) {
        return;
    }
    let _serial = serial_blocking();
    let (_tmp, state) = state_in_tempdir();
    drop(Holder::hold(&state, &["--tag", "seed"]));
    let serve = Serve::start(&state, &[]);
    let interval = Duration::from_secs(1);
    let prometheus = Prometheus::start(&serve.address, interval);

    let mut holder = Holder::hold(&state, &["--group", "prom tag"]);
    let pid = holder.pid().to_string();
    let query = r#"locktop_tag_held_seconds{tag="prom tag"}"#;
    let result = prometheus.wait_for_pid(query, &pid);
    assert_eq!(result[0]["metric"]["role"], "materializing", "{result:?}");
    assert_eq!(result[0]["metric"]["job"], "locktop", "{result:?}");

    holder.kill();
    let killed = Instant::now();
    loop {
        if prometheus.query(query).is_empty() {
            break;
        }
        // Two scrape intervals, plus one for the engine, the query and
        // this poll: a correctness bound on freshness, not a speed test.
        assert!(
            killed.elapsed() < 3 * interval + Duration::from_secs(1),
            "Prometheus still shows the tag {:?} after its holder was killed",
            killed.elapsed()
        );
        std::thread::sleep(Duration::from_millis(100));
    }
    let mut serve = serve;
    assert_eq!(serve.terminate().code(), Some(0));
}

/// The dashboard's panels, from the shipped JSON.
fn dashboard_panels() -> Vec<Value> {
    let path =
        PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("assets/grafana/locktop-dashboard.json");
    let dashboard: Value =
        serde_json::from_str(&std::fs::read_to_string(path).expect("read")).expect("JSON");
    dashboard["panels"].as_array().expect("panels").clone()
}

/// The panel whose title starts with `title`.
fn dashboard_panel(panels: &[Value], title: &str) -> Value {
    panels
        .iter()
        .find(|p| p["title"].as_str().is_some_and(|t| t.starts_with(title)))
        .unwrap_or_else(|| panic!("no panel {title}"))
        .clone()
}

/// A panel's PromQL expressions.
fn panel_exprs(panel: &Value) -> Vec<String> {
    panel["targets"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|t| t["expr"].as_str().map(str::to_string))
        .collect()
}

/// The dashboard's shape, without a Prometheus: suspect keys have a
/// table, "Watcher healthy" maps 1 and 0 to words, and no query sums the
/// instance label away.
#[test]
fn the_dashboard_has_its_suspect_table_and_health_words_and_keeps_the_instance() {
    let panels = dashboard_panels();
    let panel = |title: &str| dashboard_panel(&panels, title);
    let exprs = panel_exprs;
    let table = panel("Suspect keys:");
    assert_eq!(table["type"], "table");
    assert!(exprs(&table)[0].starts_with("locktop_suspect{"), "{table}");
    let healthy = panel("Watcher healthy");
    let mapping = &healthy["fieldConfig"]["defaults"]["mappings"][0]["options"];
    assert_eq!(mapping["1"]["text"], "healthy", "{healthy}");
    assert_eq!(mapping["0"]["text"], "degraded", "{healthy}");
    for panel in &panels {
        for expr in exprs(panel) {
            if let Some((_, by)) = expr.split_once("by (") {
                assert!(by.starts_with("instance"), "{expr} sums instance away");
            }
        }
    }
}

/// The shipped dashboard, read as Grafana would: every query runs on a
/// real Prometheus scraping `serve`; when all is well (a live agent, no
/// suspect, nobody waiting) the suspect and waiter panels read 0, not
/// "no data".
#[test]
#[ignore = "soak: seconds of load or churn; the full suite runs it (cargo test -- --include-ignored)"]
fn the_dashboard_queries_run_on_a_real_prometheus_and_read_0_when_all_is_well() {
    if !crate::common::have_program("prometheus", PROMETHEUS_PACKAGE) {
        return;
    }
    let panels = dashboard_panels();
    let panel = |title: &str| dashboard_panel(&panels, title);
    let exprs = panel_exprs;
    let _serial = serial_blocking();
    let (_tmp, state) = state_in_tempdir();
    let _agent = Holder::hold(&state, &["--aih", "cli/daemon/well", "--tag", "well"]);
    let serve = Serve::start(&state, &[]);
    let prometheus = Prometheus::start(&serve.address, Duration::from_secs(1));
    let deadline = Instant::now() + Duration::from_secs(60);
    while prometheus.query("locktop_live_agents").is_empty() {
        assert!(Instant::now() < deadline, "Prometheus never scraped serve");
        std::thread::sleep(Duration::from_millis(200));
    }
    for panel in &panels {
        for expr in exprs(panel) {
            let promql = expr.replace("$instance", ".*");
            let status = prometheus.query_status(&promql);
            assert_eq!(status, "success", "{promql}");
        }
    }
    for title in [
        "Suspect keys now",
        "Suspect keys by verdict",
        "Waiting processes now",
        "Waiters:",
    ] {
        let promql = exprs(&panel(title))[0].replace("$instance", ".*");
        let result = prometheus.query(&promql);
        assert!(
            !result.is_empty(),
            "{title}: no data when all is well ({promql})"
        );
        for series in &result {
            assert_eq!(series["value"][1], "0", "{title}: {series}");
        }
    }
}

/// The shipped rules pass `promtool check rules`, and their unit tests
/// (the stuck-tag alert among them) pass `promtool test rules`.
#[test]
fn the_shipped_alert_rules_check_and_pass_their_tests() {
    if !crate::common::have_program("promtool", PROMETHEUS_PACKAGE) {
        return;
    }
    let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("assets/prometheus");
    for args in [
        ["check", "rules", "locktop-rules.yml"],
        ["test", "rules", "locktop-rules.test.yml"],
    ] {
        let out = Command::new("promtool")
            .args(args)
            .current_dir(&dir)
            .output()
            .expect("promtool");
        assert!(
            out.status.success(),
            "promtool {args:?}:\n{}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
    }
}

/// Every metric the shipped dashboard and rules use is one `serve` exports.
#[test]
fn the_dashboard_and_rules_only_use_metrics_serve_exports() {
    let (tmp, state) = state_in_tempdir();
    drop(Holder::hold(&state, &["--tag", "seed"])); // the locks dir
    // With a journal: its series are exported (and alerted on) too.
    let history = tmp.path().join("history");
    let serve = Serve::start(&state, &["--journal", history.to_str().expect("utf-8")]);
    // Before the first scan is over serve exports no key metric (its view
    // is not complete yet): scrape once it is healthy. (This test failed
    // now and then when its scrape came first.)
    wait_body(&serve.url("/healthz"), "ok", |body| body.starts_with("ok"));
    let scrape = get(&serve.url("/metrics")).1;
    let exported: Vec<String> = scrape
        .lines()
        .filter_map(|line| line.strip_prefix("# TYPE "))
        .filter_map(|line| line.split_whitespace().next())
        .map(str::to_string)
        .collect();
    let root = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("assets");
    for file in [
        "grafana/locktop-dashboard.json",
        "prometheus/locktop-rules.yml",
    ] {
        let mut text = String::new();
        std::fs::File::open(root.join(file))
            .and_then(|mut f| f.read_to_string(&mut text))
            .expect("read asset");
        for used in text.split(|c: char| !(c.is_ascii_alphanumeric() || c == '_')) {
            let Some(name) = used.strip_prefix("locktop_").map(|_| used) else {
                continue;
            };
            // The classic text format names counters with `_total`.
            let counter = format!("{name}_total");
            assert!(
                exported.iter().any(|e| e == name || *e == counter),
                "{file} uses {name}, which serve does not export ({exported:?})"
            );
        }
    }
}

/// Scrapers hammering `serve` on 10,000 keys.
const SCRAPERS: usize = 100;
const LOAD_KEYS: usize = 10_000;
const LOAD_FOR: Duration = Duration::from_secs(10);

/// 100 concurrent scrapers of `/metrics` (and a few of `/snapshot.json`
/// and `/healthz`) for 10 s on 10,000 keys: no request fails, the engine
/// keeps up (a holder killed meanwhile is seen free, on `/events` and in
/// the metrics), and `serve`'s memory stays bounded.
#[test]
#[ignore = "soak: seconds of load or churn; the full suite runs it (cargo test -- --include-ignored)"]
fn a_hundred_concurrent_scrapers_get_answers_and_the_engine_keeps_up() {
    let _serial = serial_blocking();
    let (_tmp, state) = state_in_tempdir();
    let tags = crate::common::engine::tags_dir(&state);
    std::fs::create_dir_all(&tags).expect("tags dir");
    for i in 0..LOAD_KEYS {
        std::fs::write(tags.join(format!("load{i}.lock")), b"").expect("gate");
        std::fs::write(tags.join(format!("load{i}.live.lock")), b"").expect("announce");
    }
    let serve = Serve::start(&state, &[]);
    let free = format!(r#"locktop_keys{{kind="tag",liveness="free"}} {LOAD_KEYS}"#);
    wait_body(&serve.url("/metrics"), "every key", |body| {
        body.contains(&free)
    });
    let pid = serve.child.id();

    let stop_at = Instant::now() + LOAD_FOR;
    let scrapers: Vec<_> = (0..SCRAPERS)
        .map(|i| {
            let path = match i % 10 {
                0 => "/snapshot.json",
                1 => "/healthz",
                _ => "/metrics",
            };
            let url = serve.url(path);
            std::thread::spawn(move || {
                let (mut ok, mut failed) = (0u64, Vec::new());
                while Instant::now() < stop_at {
                    match agent().get(&url).call() {
                        Ok(mut response) if response.status() == 200 => {
                            let _ = response.body_mut().read_to_string();
                            ok += 1;
                        }
                        Ok(response) => failed.push(format!("{url}: {}", response.status())),
                        Err(error) => failed.push(format!("{url}: {error}")),
                    }
                }
                (ok, failed)
            })
        })
        .collect();

    // Meanwhile a holder comes and goes: the engine must still see both.
    let mut holder = Holder::hold(&state, &["--group", "under load"]);
    let held = format!(r#"tag="under load",pid="{}""#, holder.pid());
    wait_body(&serve.url("/metrics"), "the held tag", |body| {
        body.contains(&held)
    });
    holder.kill();
    wait_body(&serve.url("/metrics"), "the tag free again", |body| {
        !body.contains("under load")
    });

    let mut answered = 0;
    for scraper in scrapers {
        let (ok, failed) = scraper.join().expect("scraper thread");
        assert!(failed.is_empty(), "failed requests: {failed:?}");
        answered += ok;
    }
    assert!(answered >= SCRAPERS as u64, "{answered} answers");
    let peak_mib = crate::common::proc::peak_rss_kib(pid) / 1024;
    eprintln!(
        "serve under {SCRAPERS} scrapers on {LOAD_KEYS} keys: {answered} answers in {LOAD_FOR:?}, peak RSS {peak_mib} MiB"
    );
    assert!(peak_mib < 256, "serve's peak RSS {peak_mib} MiB");
}

/// `serve` on a state dir without a locks dir (a mistyped `--state-dir`)
/// says so on stderr at start, after its address, instead of waiting in
/// silence with only a 503 to show; `/healthz` names what it waits for.
#[test]
fn serve_on_a_state_dir_without_locks_says_so_at_start() {
    let (_tmp, state) = state_in_tempdir();
    let mut child = common::locktop_command(&state, &["serve", "--listen", "127.0.0.1:0"])
        .spawn()
        .expect("spawn serve");
    let mut stderr = BufReader::new(child.stderr.take().expect("stderr"))
        .lines()
        .map_while(Result::ok)
        .filter(|line| !common::is_source_note(line));
    let first = stderr.next().expect("first line");
    let second = stderr.next().expect("second line");
    let base = first
        .trim()
        .strip_prefix("locktop serve: listening on ")
        .unwrap_or_else(|| panic!("unexpected first line {first:?}"))
        .to_string();
    let root = state.join("locks");
    assert!(
        second.contains(&root.display().to_string()) && second.contains("does not exist"),
        "{second:?}"
    );
    let body = wait_body(&format!("{base}/healthz"), "waiting", |body| {
        body.contains("waiting for locks dir")
    });
    assert!(body.starts_with("unhealthy"), "{body}");
    let _ = child.kill();
    let _ = child.wait();
}

/// `/snapshot.json?all=true` lists every key, free ones too — `serve`
/// keeps only the noteworthy ones, so the list is the engine's — and it
/// is `snapshot --all --json`'s list: same keys, same order, same
/// liveness, the held one with its holder. It is streamed, one at a
/// time: while a client that stopped reading holds the one in progress, a
/// second gets 503 with `Retry-After`; once that client goes, the next
/// is answered whole.
#[test]
#[ignore = "soak: seconds of load or churn; the full suite runs it (cargo test -- --include-ignored)"]
fn the_full_snapshot_is_every_key_streamed_one_client_at_a_time() {
    use std::io::Write;
    const FREE: usize = 25_000;
    let _serial = serial_blocking();
    let (_tmp, state) = state_in_tempdir();
    // Stale keys as dead agents leave them (written directly, SDK names).
    for i in 0..FREE {
        let (dir, key) = locktop::locks::agent_tag_lock(&state, &format!("stale tag {i:05}"));
        std::fs::create_dir_all(&dir).expect("tags dir");
        std::fs::write(locktop::locks::escape::gate_path(&dir, &key), b"").expect("gate");
        std::fs::write(locktop::locks::escape::announce_path(&dir, &key), b"1").expect("announce");
    }
    let holder = Holder::hold(&state, &["--tag", "held tag"]);
    let serve = Serve::start(&state, &["--sweep", "3600"]);
    wait_body(&serve.url("/healthz"), "ok", |body| body.starts_with("ok"));
    let url = serve.url("/snapshot.json?all=true");
    let names = |doc: &Value| -> Vec<(String, String)> {
        doc["keys"]
            .as_array()
            .expect("keys")
            .iter()
            .map(|key| {
                let name = format!("{} {}", key["kind"], key["name"]);
                (name, key["liveness"].as_str().unwrap_or("?").to_string())
            })
            .collect()
    };
    let body = wait_body(&url, "the held tag", |body| body.contains("\"live\""));
    let served: Value = serde_json::from_str(&body).expect("full snapshot JSON");
    let snapshot = common::run_locktop(&state, &["snapshot", "--all", "--json"]);
    assert_eq!(snapshot.code(), 0, "{snapshot:?}");
    let taken: Value = serde_json::from_str(&snapshot.stdout).expect("snapshot JSON");
    assert_eq!(names(&served).len(), FREE + 1);
    assert_eq!(
        names(&served),
        names(&taken),
        "serve's full list is snapshot's"
    );
    let held = served["keys"]
        .as_array()
        .unwrap()
        .iter()
        .find(|key| key["name"] == "held tag")
        .expect("the held tag");
    assert_eq!(held["holders"][0]["pid"], holder.pid(), "{held}");

    // A client that asks and never reads: the body (~6 MB, more than
    // loopback buffers hold) stays in
    // flight, and a second full snapshot is refused meanwhile.
    let mut stalled = std::net::TcpStream::connect(&serve.address).expect("connect");
    write!(
        stalled,
        "GET /snapshot.json?all=true HTTP/1.1\r\nHost: {}\r\n\r\n",
        serve.address
    )
    .expect("request");
    let deadline = Instant::now() + SHOW_TIMEOUT;
    loop {
        let response = agent().get(&url).call().expect("GET");
        if response.status().as_u16() == 503 {
            assert!(response.headers().contains_key("retry-after"));
            break;
        }
        assert!(
            Instant::now() < deadline,
            "a second full snapshot was answered while the first was stalled"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    drop(stalled);
    let body = wait_body(
        &url,
        "a whole answer once the stalled client left",
        |body| serde_json::from_str::<Value>(body).is_ok(),
    );
    let again: Value = serde_json::from_str(&body).unwrap();
    assert_eq!(names(&again).len(), FREE + 1);
}
