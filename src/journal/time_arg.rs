//! The times `replay` takes: RFC 3339 (`2026-12-02T03:12:00Z`, or with a
//! space and no zone, read as UTC) or relative to now (`-2h`, `-90s`,
//! `-1h30m`). Invariant: anything else is a one-line error naming the
//! forms.

use std::time::SystemTime;

/// Reads `text` as a time, `now` being the reference of relative ones.
pub fn parse(text: &str, now: SystemTime) -> anyhow::Result<SystemTime> {
    let text = text.trim();
    if let Some(ago) = text.strip_prefix('-') {
        let ago = humantime::parse_duration(ago).map_err(|_| bad(text))?;
        return now.checked_sub(ago).ok_or_else(|| bad(text));
    }
    humantime::parse_rfc3339_weak(text).map_err(|_| bad(text))
}

fn bad(text: &str) -> anyhow::Error {
    anyhow::anyhow!(
        "bad time {text:?}: give RFC 3339 (2026-12-02T03:12:00Z) or a time ago (-2h, -15m, -90s)"
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[test]
    fn times_are_rfc3339_or_ago() {
        let now = SystemTime::UNIX_EPOCH + Duration::from_secs(100_000);
        assert_eq!(parse("-2h", now).unwrap(), now - Duration::from_secs(7200));
        assert_eq!(
            parse("-1h30m", now).unwrap(),
            now - Duration::from_secs(5400)
        );
        assert_eq!(parse("1970-01-02T03:46:40Z", now).unwrap(), now);
        assert_eq!(parse("1970-01-02 03:46:40", now).unwrap(), now);
        for bad in ["yesterday", "-", "-2 parsecs", "2h", ""] {
            let error = parse(bad, now).unwrap_err().to_string();
            assert!(error.contains("RFC 3339"), "{bad}: {error}");
        }
    }
}
