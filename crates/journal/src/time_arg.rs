//! The times `replay` takes: RFC 3339 with any offset and either case of
//! `T` and `Z` (`2026-12-02T03:12:00Z`, `2026-12-03T07:41:30+01:00`;
//! a space for the `T`; no zone read as UTC) or relative to now (`-2h`,
//! `-90s`, `-1h30m`). Invariant: anything else is a one-line error
//! naming the forms. RFC 3339 is read by `chrono`, not by hand.

use std::time::SystemTime;

use chrono::DateTime;

/// Reads `text` as a time, `now` being the reference of relative ones.
pub fn parse(text: &str, now: SystemTime) -> anyhow::Result<SystemTime> {
    let text = text.trim();
    if let Some(ago) = text.strip_prefix('-') {
        let ago = humantime::parse_duration(ago).map_err(|_| bad(text))?;
        return now.checked_sub(ago).ok_or_else(|| bad(text));
    }
    // With its zone, or without one: then it is UTC's.
    DateTime::parse_from_rfc3339(text)
        .or_else(|_| DateTime::parse_from_rfc3339(&format!("{text}Z")))
        .map(SystemTime::from)
        .map_err(|_| bad(text))
}

fn bad(text: &str) -> anyhow::Error {
    anyhow::anyhow!(
        "bad time {text:?}: give RFC 3339 (2026-12-02T03:12:00Z, 2026-12-02T04:12:00+01:00) or a time ago (-2h, -15m, -90s)"
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

    /// Reported from the field: `--at 2026-12-03T07:41:30+01:00` was
    /// refused. Every form RFC 3339 allows names the same instant.
    #[test]
    fn any_offset_and_either_case_name_the_same_instant() {
        let now = SystemTime::UNIX_EPOCH;
        let utc = parse("2026-12-03T06:41:30Z", now).unwrap();
        for same in [
            "2026-12-03T07:41:30+01:00",
            "2026-12-03T01:11:30-05:30",
            "2026-12-03t06:41:30z",
            "2026-12-03T06:41:30+00:00",
            "2026-12-03T06:41:30-00:00",
            "2026-12-03 06:41:30Z",
            "2026-12-03T06:41:30",
            "2026-12-03t06:41:30",
            "2026-12-03T07:41:30.000+01:00",
        ] {
            assert_eq!(parse(same, now).unwrap(), utc, "{same}");
        }
        assert_eq!(
            parse("2026-12-03T07:41:30.250+01:00", now).unwrap(),
            utc + Duration::from_millis(250)
        );
        for bad in [
            "2026-12-03T07:41:30+01",
            "2026-12-03T07:41:30+25:00",
            "2026-12-03T07:41:30+01:00Z",
            "2026-13-03T07:41:30Z",
        ] {
            let error = parse(bad, now).unwrap_err().to_string();
            assert!(error.contains("RFC 3339"), "{bad}: {error}");
        }
    }
}
