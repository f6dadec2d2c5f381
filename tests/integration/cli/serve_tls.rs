//! `locktop serve --web-config FILE`: TLS and basic authentication in the
//! exporter web-config format, with certificates the tests make (rcgen):
//! a real Prometheus scrapes it over HTTPS with basic auth; requests
//! without credentials or with a wrong password get 401; plain HTTP to
//! the TLS port fails; an unusable file is one line and exit 2 at start.

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use base64::Engine as _;

use super::serve::{PROMETHEUS_PACKAGE, Prometheus, Serve};
use crate::common::{self, Holder, serial_blocking, state_in_tempdir};

pub(super) const USER: &str = "prometheus";
pub(super) const PASSWORD: &str = "s3cret passw0rd";

/// A test CA, a server certificate it signed for 127.0.0.1, and the
/// files of a web config using them, in a temporary directory.
pub(super) struct Pki {
    pub(super) dir: tempfile::TempDir,
    ca_pem: String,
    /// A client certificate the CA signed, and its key (PEM).
    client: (String, String),
}

impl Pki {
    pub(super) fn new() -> Self {
        let dir = tempfile::tempdir().expect("tempdir");
        let mut ca_params = rcgen::CertificateParams::new(Vec::<String>::new()).expect("CA");
        ca_params.is_ca = rcgen::IsCa::Ca(rcgen::BasicConstraints::Unconstrained);
        ca_params
            .distinguished_name
            .push(rcgen::DnType::CommonName, "locktop test CA");
        let ca_key = rcgen::KeyPair::generate().expect("CA key");
        let ca = ca_params.self_signed(&ca_key).expect("CA cert");
        let server = |not_after: Option<(i32, u8, u8)>| {
            let mut params =
                rcgen::CertificateParams::new(vec!["localhost".to_string()]).expect("params");
            params
                .subject_alt_names
                .push(rcgen::SanType::IpAddress("127.0.0.1".parse().expect("IP")));
            if let Some((year, month, day)) = not_after {
                params.not_before = rcgen::date_time_ymd(year - 1, month, day);
                params.not_after = rcgen::date_time_ymd(year, month, day);
            }
            let key = rcgen::KeyPair::generate().expect("key");
            let cert = params.signed_by(&key, &ca, &ca_key).expect("signed");
            (cert.pem(), key.serialize_pem())
        };
        let (cert, key) = server(None);
        let (expired, expired_key) = server(Some((2021, 1, 1)));
        let (_, other_key) = server(None);
        let client = server(None);
        let write = |name: &str, text: &str| {
            std::fs::write(dir.path().join(name), text).expect("write");
        };
        write("ca.crt", &ca.pem());
        write("server.crt", &cert);
        write("server.key", &key);
        write("expired.crt", &expired);
        write("expired.key", &expired_key);
        write("other.key", &other_key);
        write("client.crt", &client.0);
        write("client.key", &client.1);
        Self {
            dir,
            ca_pem: ca.pem(),
            client,
        }
    }

    /// A web config named `name`: TLS with `cert`/`key`, basic auth of
    /// [`USER`] with `hash`; returns its path.
    pub(super) fn config(&self, name: &str, cert: &str, key: &str, hash: &str) -> PathBuf {
        let path = self.dir.path().join(name);
        std::fs::write(
            &path,
            format!(
                "tls_server_config:\n  cert_file: {cert}\n  key_file: {key}\n\
                 basic_auth_users:\n  {USER}: '{hash}'\n"
            ),
        )
        .expect("write the web config");
        path
    }

    pub(super) fn good_config(&self) -> PathBuf {
        let hash = bcrypt::hash(PASSWORD, 4).expect("bcrypt");
        self.config("web.yml", "server.crt", "server.key", &hash)
    }

    /// An HTTPS client trusting the test CA.
    pub(super) fn agent(&self) -> ureq::Agent {
        self.agent_with(None)
    }

    /// [`Self::agent`], presenting the CA's client certificate when
    /// `with_cert`.
    pub(super) fn agent_with(&self, with_cert: Option<()>) -> ureq::Agent {
        let ca = ureq::tls::Certificate::from_pem(self.ca_pem.as_bytes()).expect("CA PEM");
        let client = with_cert.map(|()| {
            let cert = ureq::tls::Certificate::from_pem(self.client.0.as_bytes()).expect("PEM");
            let key = ureq::tls::PrivateKey::from_pem(self.client.1.as_bytes()).expect("key");
            ureq::tls::ClientCert::new_with_certs(&[cert], key)
        });
        let tls = ureq::tls::TlsConfig::builder()
            .root_certs(ureq::tls::RootCerts::new_with_certs(&[ca]))
            .client_cert(client)
            .build();
        ureq::Agent::config_builder()
            .tls_config(tls)
            .http_status_as_error(false)
            .timeout_global(Some(Duration::from_secs(10)))
            .build()
            .into()
    }
}

/// `serve --listen ADDR --web-config FILE`.
pub(super) fn start_tls(state: &Path, listen: &str, config: &Path) -> Serve {
    let config = config.to_str().expect("UTF-8 path");
    let serve = Serve::start_on(state, listen, &["--web-config", config]);
    assert!(serve.base.starts_with("https://"), "{}", serve.base);
    serve
}

pub(super) fn basic(user: &str, password: &str) -> String {
    let pair = format!("{user}:{password}");
    format!(
        "Basic {}",
        base64::engine::general_purpose::STANDARD.encode(pair)
    )
}

/// (status, body) of a GET with `authorization`, if any.
pub(super) fn get(agent: &ureq::Agent, url: &str, authorization: Option<&str>) -> (u16, String) {
    let mut request = agent.get(url);
    if let Some(value) = authorization {
        request = request.header("Authorization", value);
    }
    let mut response = request.call().unwrap_or_else(|e| panic!("GET {url}: {e}"));
    let status = response.status().as_u16();
    let body = response.body_mut().read_to_string().unwrap_or_default();
    (status, body)
}

/// Over TLS with basic auth, on a non-loopback address: no credentials
/// or a wrong password is 401 (with a challenge), the right ones open
/// every endpoint — authentication is what lets holders' details out
/// beyond loopback — and plain HTTP to the TLS port gets nothing.
#[test]
fn tls_and_basic_auth_guard_every_endpoint() {
    let pki = Pki::new();
    let (_tmp, state) = state_in_tempdir();
    let holder = Holder::hold(&state, &["--tag", "over tls"]);
    let serve = start_tls(&state, "0.0.0.0:0", &pki.good_config());
    let agent = pki.agent();
    let url = |path: &str| format!("https://{}{path}", serve.address);
    for path in ["/metrics", "/healthz", "/snapshot.json", "/events", "/"] {
        assert_eq!(
            get(&agent, &url(path), None).0,
            401,
            "{path} without credentials"
        );
        let wrong = basic(USER, "not the password");
        assert_eq!(
            get(&agent, &url(path), Some(&wrong)).0,
            401,
            "{path} wrong password"
        );
        let nobody = basic("mallory", PASSWORD);
        assert_eq!(
            get(&agent, &url(path), Some(&nobody)).0,
            401,
            "{path} unknown user"
        );
    }
    let right = basic(USER, PASSWORD);
    let deadline = Instant::now() + common::PROCESS_TIMEOUT;
    loop {
        let (status, body) = get(&agent, &url("/snapshot.json"), Some(&right));
        if status == 200 && body.contains(&format!("\"pid\":{}", holder.pid())) {
            break;
        }
        assert!(Instant::now() < deadline, "{status}: {body}");
        std::thread::sleep(Duration::from_millis(100));
    }
    let (status, metrics) = get(&agent, &url("/metrics"), Some(&right));
    assert_eq!(status, 200);
    assert!(metrics.contains("tag=\"over tls\""), "{metrics}");
    let plain: ureq::Agent = ureq::Agent::config_builder()
        .http_status_as_error(false)
        .timeout_global(Some(Duration::from_secs(10)))
        .build()
        .into();
    let answered = plain
        .get(&format!("http://{}/metrics", serve.address))
        .header("Authorization", &right)
        .call()
        .ok()
        .map(|response| response.status().as_u16());
    assert!(
        answered.is_none_or(|status| status != 200),
        "plain HTTP got {answered:?}"
    );
}

/// With `client_auth_type: RequireAndVerifyClientCert` a client without
/// a certificate the CA signed gets no answer at all, one with it gets
/// every endpoint — a client certificate authenticates, so holders'
/// details are served beyond loopback too.
#[test]
fn a_required_client_certificate_authenticates() {
    let pki = Pki::new();
    let (_tmp, state) = state_in_tempdir();
    let holder = Holder::hold(&state, &["--tag", "by certificate"]);
    let config = pki.dir.path().join("mtls.yml");
    std::fs::write(
        &config,
        "tls_server_config:\n  cert_file: server.crt\n  key_file: server.key\n  \
         client_auth_type: RequireAndVerifyClientCert\n  client_ca_file: ca.crt\n",
    )
    .expect("write");
    let serve = start_tls(&state, "0.0.0.0:0", &config);
    let url = format!("https://{}/snapshot.json", serve.address);
    let refused = pki.agent().get(&url).call();
    assert!(
        refused.is_err(),
        "answered without a client certificate: {refused:?}"
    );
    let agent = pki.agent_with(Some(()));
    let deadline = Instant::now() + common::PROCESS_TIMEOUT;
    loop {
        let (status, body) = get(&agent, &url, None);
        if status == 200 && body.contains(&format!("\"pid\":{}", holder.pid())) {
            break;
        }
        assert!(Instant::now() < deadline, "{status}: {body}");
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// A web config that cannot be used stops `serve` at start, one line and
/// exit 2: unreadable, an unknown field, a key that is not the
/// certificate's, an expired certificate, a hash that is not bcrypt.
#[test]
fn an_unusable_web_config_is_one_line_and_exit_2() {
    let pki = Pki::new();
    let (_tmp, state) = state_in_tempdir();
    let hash = bcrypt::hash(PASSWORD, 4).expect("bcrypt");
    let unknown = pki.dir.path().join("unknown.yml");
    std::fs::write(&unknown, "tls_server_config:\n  cert_file: server.crt\n  key_file: server.key\n  cipher_suites: [TLS_AES_128_GCM_SHA256]\n").expect("write");
    let cases = [
        (pki.dir.path().join("missing.yml"), "cannot read"),
        (unknown, "cipher_suites"),
        (
            pki.config("wrong-key.yml", "server.crt", "other.key", &hash),
            "usable pair",
        ),
        (
            pki.config("expired.yml", "expired.crt", "expired.key", &hash),
            "expired",
        ),
        (
            pki.config("plain.yml", "server.crt", "server.key", "hunter2"),
            "not bcrypt",
        ),
    ];
    for (config, needle) in cases {
        let config_arg = config.to_str().expect("UTF-8");
        let out = common::run_locktop(
            &state,
            &[
                "serve",
                "--listen",
                "127.0.0.1:0",
                "--web-config",
                config_arg,
            ],
        );
        assert_eq!(out.code(), 2, "{config:?}: {out:?}");
        let lines = out.stderr_lines();
        assert_eq!(lines.len(), 1, "{config:?}: one line: {lines:?}");
        assert!(lines[0].contains(needle), "{config:?}: {lines:?}");
        assert!(!lines[0].contains("panicked"), "{lines:?}");
    }
}

/// A real Prometheus scrapes `serve` over HTTPS with basic auth — its own
/// scrape config (`scheme: https`, `tls_config`, `basic_auth`), unchanged
/// — and sees a held tag.
#[test]
#[ignore = "soak: seconds of load or churn; the full suite runs it (cargo test -- --include-ignored)"]
fn a_real_prometheus_scrapes_over_https_with_basic_auth() {
    if !common::have_program("prometheus", PROMETHEUS_PACKAGE) {
        return;
    }
    let _serial = serial_blocking();
    let pki = Pki::new();
    let (_tmp, state) = state_in_tempdir();
    let holder = Holder::hold(&state, &["--tag", "scraped over tls"]);
    let serve = start_tls(&state, "127.0.0.1:0", &pki.good_config());
    let job = format!(
        "    scheme: https\n    tls_config:\n      ca_file: {}\n    basic_auth:\n      \
         username: {USER}\n      password: '{PASSWORD}'\n",
        pki.dir.path().join("ca.crt").display()
    );
    let prometheus = Prometheus::start_with(&serve.address, Duration::from_secs(1), &job);
    let query = r#"locktop_tag_held_seconds{tag="scraped over tls"}"#;
    prometheus.wait_for_pid(query, &holder.pid().to_string());
}

/// The shipped example web config is usable as it is: next to a
/// certificate and key under the names it uses, `serve` starts with it
/// over TLS and admits its documented password.
#[test]
fn the_shipped_web_config_is_usable() {
    let pki = Pki::new();
    let example = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("assets/serve/web-config.yml");
    let config = pki.dir.path().join("web-config.yml");
    std::fs::copy(&example, &config).expect("copy the example");
    std::fs::copy(
        pki.dir.path().join("server.crt"),
        pki.dir.path().join("tls.crt"),
    )
    .expect("cert");
    std::fs::copy(
        pki.dir.path().join("server.key"),
        pki.dir.path().join("tls.key"),
    )
    .expect("key");
    let (_tmp, state) = state_in_tempdir();
    let serve = start_tls(&state, "127.0.0.1:0", &config);
    let url = format!("https://{}/metrics", serve.address);
    assert_eq!(
        get(&pki.agent(), &url, Some(&basic(USER, "change me"))).0,
        200
    );
    assert_eq!(get(&pki.agent(), &url, None).0, 401);
}

/// Every stderr line `serve` wrote at start: once it answers, its start
/// lines are written (they come before it serves); a moment more for
/// the reader.
fn start_lines(serve: &Serve, agent: &ureq::Agent) -> String {
    let _ = agent.get(&serve.url("/healthz")).call();
    std::thread::sleep(Duration::from_millis(300));
    serve.stderr()
}

/// Basic auth without TLS beyond loopback sends the password (and
/// holders' command lines) in clear: `serve` says so at start, as it does
/// for `--expose-holders-without-auth`; not on loopback, nor with TLS.
#[test]
fn basic_auth_without_tls_beyond_loopback_is_said_at_start() {
    let pki = Pki::new();
    let (_tmp, state) = state_in_tempdir();
    let hash = bcrypt::hash(PASSWORD, 4).expect("bcrypt");
    let plain = pki.dir.path().join("plain.yml");
    std::fs::write(&plain, format!("basic_auth_users:\n  {USER}: '{hash}'\n")).expect("write");
    let plain_arg = plain.to_str().expect("UTF-8");
    let http: ureq::Agent = ureq::Agent::config_builder()
        .http_status_as_error(false)
        .build()
        .into();
    let warning = "unencrypted";

    let exposed = Serve::start_on(&state, "0.0.0.0:0", &["--web-config", plain_arg]);
    let lines = start_lines(&exposed, &http);
    assert!(
        lines.contains(warning) && lines.contains("basic_auth_users"),
        "{lines}"
    );
    // It still serves, behind the password.
    let (status, _) = get(
        &http,
        &exposed.url("/metrics"),
        Some(&basic(USER, PASSWORD)),
    );
    assert_eq!(status, 200);
    drop(exposed);

    let local = Serve::start_on(&state, "127.0.0.1:0", &["--web-config", plain_arg]);
    let lines = start_lines(&local, &http);
    assert!(!lines.contains(warning), "{lines}");
    drop(local);

    let tls = start_tls(&state, "0.0.0.0:0", &pki.good_config());
    let lines = start_lines(&tls, &pki.agent());
    assert!(!lines.contains(warning), "{lines}");
}

/// With `client_auth_type: VerifyClientCertIfGiven` a client certificate
/// the client CA verified authenticates (reported from the field: it got
/// 403): beyond loopback, its client reads holders' details, a client
/// without one gets `/metrics` but not them, and a stderr line says so.
/// Where a password is configured too, it is asked of everyone, as
/// exporter-toolkit does: the certificate does not replace it.
#[test]
fn a_verified_optional_client_certificate_authenticates() {
    let pki = Pki::new();
    let (_tmp, state) = state_in_tempdir();
    let holder = Holder::hold(&state, &["--tag", "by optional certificate"]);
    let tls = "tls_server_config:\n  cert_file: server.crt\n  key_file: server.key\n  \
               client_auth_type: VerifyClientCertIfGiven\n  client_ca_file: ca.crt\n";
    let config = pki.dir.path().join("optional.yml");
    std::fs::write(&config, tls).expect("write");
    let serve = start_tls(&state, "0.0.0.0:0", &config);
    let url = |path: &str| format!("https://{}{path}", serve.address);
    let with_cert = pki.agent_with(Some(()));
    let deadline = Instant::now() + common::PROCESS_TIMEOUT;
    loop {
        let (status, body) = get(&with_cert, &url("/snapshot.json"), None);
        if status == 200 && body.contains(&format!("\"pid\":{}", holder.pid())) {
            break;
        }
        assert!(Instant::now() < deadline, "{status}: {body}");
        std::thread::sleep(Duration::from_millis(100));
    }
    // (A stream: its status only.)
    let events = |agent: &ureq::Agent| agent.get(&url("/events")).call().expect("/events");
    assert_eq!(events(&with_cert).status(), 200);
    let without = pki.agent();
    assert_eq!(get(&without, &url("/snapshot.json"), None).0, 403);
    assert_eq!(events(&without).status(), 403);
    assert_eq!(get(&without, &url("/metrics"), None).0, 200);
    let lines = start_lines(&serve, &without);
    assert!(lines.contains("verified certificate"), "{lines}");
    drop(serve);

    let hash = bcrypt::hash(PASSWORD, 4).expect("bcrypt");
    let both = pki.dir.path().join("both.yml");
    std::fs::write(
        &both,
        format!("{tls}basic_auth_users:\n  {USER}: '{hash}'\n"),
    )
    .expect("write");
    let serve = start_tls(&state, "0.0.0.0:0", &both);
    let url = format!("https://{}/snapshot.json", serve.address);
    assert_eq!(get(&with_cert, &url, None).0, 401);
    let right = basic(USER, PASSWORD);
    let deadline = Instant::now() + common::PROCESS_TIMEOUT;
    // 503 until the first scan is done.
    while get(&with_cert, &url, Some(&right)).0 == 503 && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(100));
    }
    assert_eq!(get(&with_cert, &url, Some(&right)).0, 200);
    assert_eq!(get(&without, &url, Some(&right)).0, 200);
}
