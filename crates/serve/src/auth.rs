//! Basic authentication of every request, against the bcrypt hashes of
//! the web-config file ([`super::web_config`]).
//!
//! Invariants: a request without valid credentials gets `401` with a
//! `WWW-Authenticate` challenge and nothing else (or `503` when its
//! password check did not get a turn: [`super::password_checks`]); a
//! password is checked with bcrypt (its own constant-time comparison) off
//! the async threads, a bounded number at once, and an unknown user costs
//! the same bcrypt check as a known one, so the answer's time does not
//! tell which users exist; a user and password once verified are
//! remembered by their SHA-256 only (bounded), so that a scrape every few
//! seconds does not cost a bcrypt check each, nor waits behind anyone's;
//! a check the request needs stands in its origin's line by its
//! connection's history ([`super::password_checks::Standing`]): a
//! connection that authenticated before goes before any stranger, and a
//! stranger's request that asked for a check and was not let through
//! (`401` or `503`) counts against its connection
//! ([`super::connections::Slot::refuse`]), so a first scrape is not
//! queued behind a flood of wrong passwords from its own address; a
//! request let through carries [`Authenticated`], and its connection is
//! admitted ([`super::connections::Slot::admit`]).

use std::collections::HashSet;
use std::net::{IpAddr, Ipv4Addr};
use std::sync::{Arc, Mutex, OnceLock};

use axum::extract::{Request, State};
use axum::http::{StatusCode, header};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use base64::Engine as _;

use super::connections::{Origin, Slot};
use super::password_checks::{PasswordChecks, Standing};
use super::web_config::Users;

/// Marks a request whose client proved who it is: the password of a
/// configured user, or a client certificate the client CA verified.
#[derive(Debug, Clone, Copy)]
pub struct Authenticated;

/// How many verified credentials are remembered before it starts afresh.
const REMEMBERED_MAX: usize = 64;

/// The users, and the credentials verified so far.
pub struct Gate {
    users: Users,
    verified: Mutex<HashSet<[u8; 32]>>,
    checks: Arc<PasswordChecks>,
}

/// What the gate says of a request's credentials.
#[derive(Debug, PartialEq, Eq)]
enum Verdict {
    Admitted,
    Refused,
    /// Its password check did not get a turn in time.
    Busy,
}

impl Gate {
    /// A gate for `users`.
    pub fn new(users: Users) -> Arc<Self> {
        Arc::new(Self {
            users,
            verified: Mutex::new(HashSet::new()),
            checks: PasswordChecks::new(),
        })
    }

    /// Whether `user` and `password`, sent from `origin` on a connection
    /// standing as `standing`, match a configured user.
    async fn admits(
        self: &Arc<Self>,
        origin: Origin,
        standing: Standing,
        user: String,
        password: String,
    ) -> Verdict {
        let digest = digest(&user, &password);
        if self.remembered(&digest) {
            return Verdict::Admitted;
        }
        let gate = self.clone();
        let checked = self.checks.check(origin, standing, move || {
            let hash = gate
                .users
                .hash_of(&user)
                .unwrap_or_else(|| unknown_user_hash());
            let matches = bcrypt::verify(&password, hash).unwrap_or(false);
            matches && gate.users.hash_of(&user).is_some()
        });
        match checked.await {
            None => Verdict::Busy,
            Some(false) => Verdict::Refused,
            Some(true) => {
                if let Ok(mut verified) = self.verified.lock() {
                    if verified.len() >= REMEMBERED_MAX {
                        verified.clear();
                    }
                    verified.insert(digest);
                }
                Verdict::Admitted
            }
        }
    }

    fn remembered(&self, digest: &[u8; 32]) -> bool {
        self.verified
            .lock()
            .is_ok_and(|verified| verified.contains(digest))
    }
}

/// The middleware: the request goes on only with valid credentials.
pub async fn require(State(gate): State<Arc<Gate>>, mut request: Request, next: Next) -> Response {
    let slot = request.extensions().get::<Arc<Slot>>().cloned();
    let verdict = match credentials(request.headers()) {
        Some((user, password)) => {
            // Outside `listen` (no slot), one origin for all.
            let origin = slot
                .as_ref()
                .map_or(Origin::of(IpAddr::V4(Ipv4Addr::UNSPECIFIED)), |slot| {
                    slot.origin()
                });
            // Its connection's history places it in its origin's line.
            let standing = match &slot {
                Some(slot) if slot.admitted() => Standing::Admitted,
                Some(slot) => Standing::Stranger {
                    refusals: slot.refusals(),
                },
                None => Standing::Stranger { refusals: 0 },
            };
            let _checking = slot.as_ref().map(Slot::checking);
            let verdict = gate.admits(origin, standing, user, password).await;
            if let (Some(slot), Verdict::Refused | Verdict::Busy) = (&slot, &verdict) {
                slot.refuse();
            }
            verdict
        }
        None => Verdict::Refused,
    };
    match verdict {
        Verdict::Admitted => {
            if let Some(slot) = &slot {
                slot.admit();
            }
            request.extensions_mut().insert(Authenticated);
            next.run(request).await
        }
        Verdict::Refused => (
            StatusCode::UNAUTHORIZED,
            [(header::WWW_AUTHENTICATE, "Basic realm=\"locktop\"")],
            "unauthorized\n",
        )
            .into_response(),
        Verdict::Busy => (
            StatusCode::SERVICE_UNAVAILABLE,
            [(header::RETRY_AFTER, "1")],
            "busy: too many password checks waiting\n",
        )
            .into_response(),
    }
}

/// The user and password of a `Authorization: Basic …` header.
fn credentials(headers: &axum::http::HeaderMap) -> Option<(String, String)> {
    let value = headers.get(header::AUTHORIZATION)?.to_str().ok()?;
    let (scheme, encoded) = value.split_once(' ')?;
    if !scheme.eq_ignore_ascii_case("basic") {
        return None;
    }
    let decoded = base64::engine::general_purpose::STANDARD
        .decode(encoded.trim())
        .ok()?;
    let decoded = String::from_utf8(decoded).ok()?;
    let (user, password) = decoded.split_once(':')?;
    Some((user.to_string(), password.to_string()))
}

fn digest(user: &str, password: &str) -> [u8; 32] {
    let mut context = ring::digest::Context::new(&ring::digest::SHA256);
    context.update(user.as_bytes());
    context.update(&[0]);
    context.update(password.as_bytes());
    let mut out = [0u8; 32];
    out.copy_from_slice(context.finish().as_ref());
    out
}

/// A bcrypt hash no password is checked against in earnest: what an
/// unknown user's password is compared with, at the usual cost.
fn unknown_user_hash() -> &'static str {
    static HASH: OnceLock<String> = OnceLock::new();
    HASH.get_or_init(|| bcrypt::hash("locktop: no such user", 10).unwrap_or_default())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn basic_credentials_are_read_and_anything_else_is_not() {
        let mut headers = axum::http::HeaderMap::new();
        assert_eq!(credentials(&headers), None);
        headers.insert(
            header::AUTHORIZATION,
            "Basic YWxpY2U6czNjcjp0".parse().unwrap(),
        );
        assert_eq!(
            credentials(&headers),
            Some(("alice".to_string(), "s3cr:t".to_string()))
        );
        headers.insert(
            header::AUTHORIZATION,
            "Bearer YWxpY2U6czNjcjp0".parse().unwrap(),
        );
        assert_eq!(credentials(&headers), None);
        headers.insert(header::AUTHORIZATION, "Basic !!!".parse().unwrap());
        assert_eq!(credentials(&headers), None);
    }
}
