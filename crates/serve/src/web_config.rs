//! `serve --web-config FILE`: TLS and basic authentication, configured in
//! the format of Prometheus' exporter-toolkit (node_exporter's
//! `--web.config.file`), so that Prometheus' own scrape config (`scheme:
//! https`, `tls_config`, `basic_auth`) talks to it unchanged:
//!
//! ```yaml
//! tls_server_config:
//!   cert_file: server.crt        # paths relative to this file
//!   key_file: server.key
//!   client_auth_type: RequireAndVerifyClientCert   # optional
//!   client_ca_file: ca.crt                          # with it
//!   min_version: TLS12                              # or TLS13
//! basic_auth_users:
//!   prometheus: $2y$10$…         # bcrypt hashes (htpasswd -nBC 10 "")
//! ```
//!
//! Invariants: a file that cannot be used — unreadable, not this format,
//! a field this implementation does not support (refused by name, never
//! ignored), a key that is not the certificate's, a certificate expired
//! or not yet valid, a password hash that is not bcrypt — is an error at
//! start, never a server that runs without what was asked for.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use anyhow::{Context as _, anyhow, bail};
use rustls::pki_types::pem::PemObject as _;
use rustls::pki_types::{CertificateDer, PrivateKeyDer};
use rustls::server::WebPkiClientVerifier;

/// What a web-config file asks for, loaded and checked.
pub struct WebConfig {
    /// TLS, when `tls_server_config` is given.
    pub tls: Option<Arc<rustls::ServerConfig>>,
    /// Basic-auth users and their bcrypt hashes, when given.
    pub users: Option<Users>,
    /// Whether clients present certificates (then verified by the
    /// client CA: an authentication of its own).
    pub client_auth: ClientAuth,
}

impl WebConfig {
    /// True when every request is authenticated (a password, or a client
    /// certificate the CA verifies).
    pub fn authenticates_everyone(&self) -> bool {
        self.users.is_some() || self.client_auth == ClientAuth::RequireAndVerifyClientCert
    }
}

/// Basic-auth users: name → bcrypt hash. Invariant: every hash parses as
/// bcrypt.
#[derive(Debug, Clone)]
pub struct Users(BTreeMap<String, String>);

impl Users {
    /// The bcrypt hash of `user`, if such a user is configured.
    pub fn hash_of(&self, user: &str) -> Option<&str> {
        self.0.get(user).map(String::as_str)
    }
}

#[derive(serde::Deserialize)]
#[serde(deny_unknown_fields)]
struct File {
    tls_server_config: Option<TlsFile>,
    basic_auth_users: Option<BTreeMap<String, String>>,
}

#[derive(serde::Deserialize)]
#[serde(deny_unknown_fields)]
struct TlsFile {
    cert_file: PathBuf,
    key_file: PathBuf,
    #[serde(default)]
    client_auth_type: ClientAuth,
    client_ca_file: Option<PathBuf>,
    min_version: Option<TlsVersion>,
}

/// exporter-toolkit's `client_auth_type`, the values this server
/// implements (the two that accept unverified certificates are refused).
/// Invariant: a certificate a client presents is verified by the client
/// CA, or the handshake fails.
#[derive(serde::Deserialize, Default, Debug, PartialEq, Eq, Clone, Copy)]
pub enum ClientAuth {
    /// No certificate is asked for.
    #[default]
    NoClientCert,
    /// A client may present one.
    VerifyClientCertIfGiven,
    /// Every client must present one.
    RequireAndVerifyClientCert,
}

#[derive(serde::Deserialize, Clone, Copy)]
enum TlsVersion {
    #[serde(rename = "TLS12")]
    Tls12,
    #[serde(rename = "TLS13")]
    Tls13,
}

/// Loads and checks the web-config file at `path` (relative paths in it
/// are relative to its own directory).
pub fn load(path: &Path) -> anyhow::Result<WebConfig> {
    let text = std::fs::read_to_string(path)
        .with_context(|| format!("--web-config {}: cannot read it", path.display()))?;
    let file: File = serde_yaml_ng::from_str(&text).map_err(|error| {
        anyhow!(
            "--web-config {}: {}",
            path.display(),
            one_line(&error.to_string())
        )
    })?;
    let dir = path.parent().unwrap_or(Path::new("."));
    let users = file
        .basic_auth_users
        .map(|users| check_users(path, users))
        .transpose()?;
    let (tls, client_auth) = match file.tls_server_config {
        Some(tls) => {
            let client_auth = tls.client_auth_type;
            (Some(Arc::new(server_config(path, dir, tls)?)), client_auth)
        }
        None => (None, ClientAuth::NoClientCert),
    };
    Ok(WebConfig {
        tls,
        users,
        client_auth,
    })
}

fn check_users(path: &Path, users: BTreeMap<String, String>) -> anyhow::Result<Users> {
    if users.is_empty() {
        bail!(
            "--web-config {}: basic_auth_users lists nobody",
            path.display()
        );
    }
    for (user, hash) in &users {
        if hash.parse::<bcrypt::HashParts>().is_err() {
            bail!(
                "--web-config {}: the password hash of {user:?} is not bcrypt \
                 (make one with `htpasswd -nBC 10 \"\"`)",
                path.display()
            );
        }
    }
    Ok(Users(users))
}

fn server_config(path: &Path, dir: &Path, tls: TlsFile) -> anyhow::Result<rustls::ServerConfig> {
    let place = |file: &Path| dir.join(file);
    let what = |file: &Path| format!("--web-config {}: {}", path.display(), file.display());
    let cert_path = place(&tls.cert_file);
    let chain: Vec<CertificateDer<'static>> = CertificateDer::pem_file_iter(&cert_path)
        .and_then(Iterator::collect)
        .map_err(|error| anyhow!("{}: {error}", what(&cert_path)))?;
    let Some(leaf) = chain.first() else {
        bail!("{}: no certificate in it", what(&cert_path));
    };
    check_validity(leaf).map_err(|error| anyhow!("{}: {error}", what(&cert_path)))?;
    let key_path = place(&tls.key_file);
    let key = PrivateKeyDer::from_pem_file(&key_path)
        .map_err(|error| anyhow!("{}: {error}", what(&key_path)))?;
    let versions: &[&rustls::SupportedProtocolVersion] = match tls.min_version {
        Some(TlsVersion::Tls13) => &[&rustls::version::TLS13],
        _ => &[&rustls::version::TLS12, &rustls::version::TLS13],
    };
    let builder = rustls::ServerConfig::builder_with_protocol_versions(versions);
    let builder = match (tls.client_auth_type, &tls.client_ca_file) {
        (ClientAuth::NoClientCert, _) => builder.with_no_client_auth(),
        (_, None) => bail!(
            "--web-config {}: client_auth_type needs client_ca_file",
            path.display()
        ),
        (auth, Some(ca_file)) => {
            let ca_path = place(ca_file);
            let mut roots = rustls::RootCertStore::empty();
            for cert in CertificateDer::pem_file_iter(&ca_path)
                .map_err(|error| anyhow!("{}: {error}", what(&ca_path)))?
            {
                let cert = cert.map_err(|error| anyhow!("{}: {error}", what(&ca_path)))?;
                roots
                    .add(cert)
                    .map_err(|error| anyhow!("{}: {error}", what(&ca_path)))?;
            }
            let verifier = WebPkiClientVerifier::builder(Arc::new(roots));
            let verifier = if auth == ClientAuth::VerifyClientCertIfGiven {
                verifier.allow_unauthenticated()
            } else {
                verifier
            };
            let verifier = verifier
                .build()
                .map_err(|error| anyhow!("{}: {error}", what(&ca_path)))?;
            builder.with_client_cert_verifier(verifier)
        }
    };
    builder.with_single_cert(chain, key).map_err(|error| {
        anyhow!(
            "--web-config {}: {} and {} do not make a usable pair: {error}",
            path.display(),
            cert_path.display(),
            key_path.display()
        )
    })
}

/// An error unless `cert` is valid now.
fn check_validity(cert: &CertificateDer<'_>) -> anyhow::Result<()> {
    let (_, parsed) = x509_parser::parse_x509_certificate(cert.as_ref())
        .map_err(|error| anyhow!("not an X.509 certificate: {error}"))?;
    let validity = parsed.validity();
    let now = x509_parser::time::ASN1Time::now();
    if now > validity.not_after {
        bail!("the certificate expired on {}", validity.not_after);
    }
    if now < validity.not_before {
        bail!(
            "the certificate is not valid before {}",
            validity.not_before
        );
    }
    Ok(())
}

/// `text` on one line (YAML errors span several).
fn one_line(text: &str) -> String {
    text.split_whitespace().collect::<Vec<_>>().join(" ")
}
