//! `--connect-config FILE`: how to reach a service over HTTPS — the
//! client side of `serve --web-config`, in the shape of a Prometheus
//! scrape config's `tls_config` and `basic_auth`:
//!
//! ```yaml
//! tls_config:
//!   ca_file: ca.crt          # the CA that signed the service's certificate
//!   cert_file: client.crt    # a client certificate, with its key
//!   key_file: client.key
//!   server_name: host.example   # when the URL's host is not the name
//! basic_auth:
//!   username: operator
//!   password_file: password  # its first line
//! ```
//!
//! Paths are relative to the file. Without `ca_file` the system's roots
//! verify the service. The user and password may come from the
//! environment instead (`LOCKTOP_CONNECT_USERNAME`,
//! `LOCKTOP_CONNECT_PASSWORD`); never from the command line.
//!
//! Invariants: a file that cannot be used (unreadable, a field this
//! implementation does not know, a certificate or key that does not
//! load, a password without a user) is an error before connecting,
//! never a connection made without what was asked for; a password is
//! sent only over TLS: never over plain HTTP, nor a unix socket.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use anyhow::{Context as _, bail};

use crate::target::Target;
use rustls::pki_types::pem::PemObject as _;
use rustls::pki_types::{CertificateDer, PrivateKeyDer};

/// The environment variable a user name may come from.
pub const USERNAME_ENV: &str = "LOCKTOP_CONNECT_USERNAME";
/// The environment variable a password may come from.
pub const PASSWORD_ENV: &str = "LOCKTOP_CONNECT_PASSWORD";

#[derive(Debug, Default, serde::Deserialize)]
#[serde(deny_unknown_fields)]
struct File {
    #[serde(default)]
    tls_config: Option<TlsFile>,
    #[serde(default)]
    basic_auth: Option<AuthFile>,
}

#[derive(Debug, serde::Deserialize)]
#[serde(deny_unknown_fields)]
struct TlsFile {
    ca_file: Option<PathBuf>,
    cert_file: Option<PathBuf>,
    key_file: Option<PathBuf>,
    server_name: Option<String>,
}

#[derive(Debug, serde::Deserialize)]
#[serde(deny_unknown_fields)]
struct AuthFile {
    username: Option<String>,
    password_file: Option<PathBuf>,
}

/// How to reach a service, loaded and checked.
#[derive(Clone, Default)]
pub struct ClientConfig {
    /// TLS as configured (for an `https://` target).
    pub tls: Option<Arc<rustls::ClientConfig>>,
    /// The name the service's certificate must carry, when not the host.
    pub server_name: Option<String>,
    /// `user:password`, for basic authentication.
    pub basic_auth: Option<(String, String)>,
    /// Whether the file gave `tls_config` (it applies to `https://` only).
    pub tls_given: bool,
    /// Whether the file gave `basic_auth` (the environment's credentials
    /// are simply not sent where they do not apply).
    pub auth_in_file: bool,
}

impl std::fmt::Debug for ClientConfig {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ClientConfig")
            .field("tls", &self.tls.is_some())
            .field("server_name", &self.server_name)
            .field("user", &self.basic_auth.as_ref().map(|(user, _)| user))
            .finish()
    }
}

impl ClientConfig {
    /// Loads `file` (if given) and the environment.
    pub fn load(file: Option<&Path>) -> anyhow::Result<Self> {
        let (parsed, base) = match file {
            Some(path) => {
                let text = std::fs::read_to_string(path)
                    .with_context(|| format!("--connect-config {}", path.display()))?;
                let parsed: File = serde_yaml_ng::from_str(&text).with_context(|| {
                    format!("--connect-config {}: not a connect config", path.display())
                })?;
                (
                    parsed,
                    path.parent().unwrap_or(Path::new(".")).to_path_buf(),
                )
            }
            None => (File::default(), PathBuf::from(".")),
        };
        let resolve = |path: &Path| base.join(path);
        let tls = client_tls(parsed.tls_config.as_ref(), &resolve)?;
        let server_name = parsed
            .tls_config
            .as_ref()
            .and_then(|tls| tls.server_name.clone());
        let mut user = parsed
            .basic_auth
            .as_ref()
            .and_then(|auth| auth.username.clone());
        let mut password = match parsed
            .basic_auth
            .as_ref()
            .and_then(|auth| auth.password_file.as_ref())
        {
            Some(path) => {
                let path = resolve(path);
                let text = std::fs::read_to_string(&path).with_context(|| {
                    format!("--connect-config: password_file {}", path.display())
                })?;
                Some(text.lines().next().unwrap_or("").to_string())
            }
            None => None,
        };
        if user.is_none() {
            user = std::env::var(USERNAME_ENV)
                .ok()
                .filter(|user| !user.is_empty());
        }
        if password.is_none() {
            password = std::env::var(PASSWORD_ENV).ok();
        }
        let basic_auth = match (user, password) {
            (Some(user), Some(password)) => Some((user, password)),
            (None, Some(_)) => bail!(
                "--connect-config: a password without a user name (basic_auth.username, or {USERNAME_ENV})"
            ),
            (Some(user), None) => bail!(
                "--connect-config: no password for {user:?} (basic_auth.password_file, or {PASSWORD_ENV})"
            ),
            (None, None) => None,
        };
        Ok(Self {
            tls: Some(tls),
            server_name,
            basic_auth,
            tls_given: parsed.tls_config.is_some(),
            auth_in_file: parsed.basic_auth.is_some(),
        })
    }

    /// Why this file does not apply to `target`, if it does not: TLS
    /// settings for a target without TLS; a password for a unix socket
    /// (its permissions authenticate) or plain HTTP (never sent in
    /// clear).
    pub fn refused_for(&self, target: &Target) -> Option<String> {
        let https = matches!(target, Target::Http { tls: true, .. });
        if self.tls_given && !https {
            return Some(format!(
                "tls_config applies to https:// targets, not {target}"
            ));
        }
        if self.auth_in_file && !https {
            return Some(format!(
                "basic auth is sent only over https://, not to {target} (a unix socket's permissions say who may)"
            ));
        }
        None
    }
}

fn client_tls(
    file: Option<&TlsFile>,
    resolve: &dyn Fn(&Path) -> PathBuf,
) -> anyhow::Result<Arc<rustls::ClientConfig>> {
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let mut roots = rustls::RootCertStore::empty();
    match file.and_then(|tls| tls.ca_file.as_ref()) {
        Some(ca) => {
            let ca = resolve(ca);
            for cert in CertificateDer::pem_file_iter(&ca)
                .with_context(|| format!("--connect-config: ca_file {}", ca.display()))?
            {
                let cert =
                    cert.with_context(|| format!("--connect-config: ca_file {}", ca.display()))?;
                roots
                    .add(cert)
                    .with_context(|| format!("--connect-config: ca_file {}", ca.display()))?;
            }
            if roots.is_empty() {
                bail!(
                    "--connect-config: ca_file {} holds no certificate",
                    ca.display()
                );
            }
        }
        None => {
            let found = rustls_native_certs::load_native_certs();
            for cert in found.certs {
                let _ = roots.add(cert);
            }
        }
    }
    let builder = rustls::ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .context("TLS")?
        .with_root_certificates(roots);
    let cert = file.and_then(|tls| tls.cert_file.as_ref());
    let key = file.and_then(|tls| tls.key_file.as_ref());
    let config = match (cert, key) {
        (Some(cert), Some(key)) => {
            let (cert, key) = (resolve(cert), resolve(key));
            let chain: Vec<CertificateDer<'static>> = CertificateDer::pem_file_iter(&cert)
                .with_context(|| format!("--connect-config: cert_file {}", cert.display()))?
                .collect::<Result<_, _>>()
                .with_context(|| format!("--connect-config: cert_file {}", cert.display()))?;
            let key = PrivateKeyDer::from_pem_file(&key)
                .with_context(|| format!("--connect-config: key_file {}", key.display()))?;
            builder
                .with_client_auth_cert(chain, key)
                .context("--connect-config: the client key is not the certificate's")?
        }
        (None, None) => builder.with_no_client_auth(),
        _ => bail!("--connect-config: cert_file and key_file go together"),
    };
    Ok(Arc::new(config))
}
