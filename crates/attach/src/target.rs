//! Where `--connect` attaches: `unix:PATH`, `http://HOST:PORT` or
//! `https://HOST:PORT`.
//!
//! Invariant: anything else is refused in one line naming the forms that
//! are accepted; a URL with a path, query, user or password is refused
//! (credentials never come from the command line).

use std::fmt;
use std::path::PathBuf;

/// A service to attach to.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Target {
    /// A unix socket on this host (`serve --socket`).
    Unix(PathBuf),
    /// A service over TCP.
    Http {
        /// Over TLS.
        tls: bool,
        /// The host, as given (a name or an address; IPv6 in brackets).
        host: String,
        /// The port.
        port: u16,
    },
}

/// Why a `--connect` value is refused.
#[derive(Debug, thiserror::Error)]
#[error(
    "--connect {given:?}: {why}; give unix:PATH (a serve --socket on this host), \
     http://HOST:PORT or https://HOST:PORT"
)]
pub struct BadTarget {
    given: String,
    why: &'static str,
}

impl Target {
    /// Reads a `--connect` value.
    pub fn parse(given: &str) -> Result<Self, BadTarget> {
        let bad = |why| BadTarget {
            given: given.to_string(),
            why,
        };
        if let Some(path) = given.strip_prefix("unix:") {
            if path.is_empty() {
                return Err(bad("no socket path"));
            }
            return Ok(Target::Unix(PathBuf::from(path)));
        }
        let (tls, rest) = if let Some(rest) = given.strip_prefix("https://") {
            (true, rest)
        } else if let Some(rest) = given.strip_prefix("http://") {
            (false, rest)
        } else {
            return Err(bad("unknown scheme"));
        };
        let rest = rest.strip_suffix('/').unwrap_or(rest);
        if rest.contains(['/', '?', '#']) {
            return Err(bad("a path or query is not allowed"));
        }
        if rest.contains('@') {
            return Err(bad(
                "credentials are never taken from the command line (--connect-config, or the environment)",
            ));
        }
        let (host, port) = rest.rsplit_once(':').ok_or_else(|| bad("no port"))?;
        let port: u16 = port.parse().map_err(|_| bad("the port is not a number"))?;
        if host.is_empty() || (host.starts_with('[') != host.ends_with(']')) {
            return Err(bad("no host"));
        }
        Ok(Target::Http {
            tls,
            host: host.to_string(),
            port,
        })
    }

    /// Whether it is on this host's filesystem (a unix socket).
    pub fn is_local(&self) -> bool {
        matches!(self, Target::Unix(_))
    }
}

impl fmt::Display for Target {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Target::Unix(path) => write!(f, "unix:{}", path.display()),
            Target::Http { tls, host, port } => {
                let scheme = if *tls { "https" } else { "http" };
                write!(f, "{scheme}://{host}:{port}")
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_three_forms_are_read_and_everything_else_is_refused() {
        assert_eq!(
            Target::parse("unix:/run/locktop/locktop.sock").unwrap(),
            Target::Unix("/run/locktop/locktop.sock".into())
        );
        assert_eq!(
            Target::parse("https://host.example:9742").unwrap(),
            Target::Http {
                tls: true,
                host: "host.example".into(),
                port: 9742
            }
        );
        assert_eq!(
            Target::parse("http://[::1]:9742/").unwrap().to_string(),
            "http://[::1]:9742"
        );
        for bad in [
            "",
            "unix:",
            "ftp://h:1",
            "https://h",
            "https://h:x",
            "https://u:p@h:1",
            "https://h:1/view",
            "/run/locktop/locktop.sock",
        ] {
            let refused = Target::parse(bad).unwrap_err().to_string();
            assert!(refused.contains("unix:PATH"), "{bad}: {refused}");
        }
    }
}
