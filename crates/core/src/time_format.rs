//! Timestamps as people and scripts read them: RFC 3339 (UTC, seconds) in
//! JSON, "3m12s"-style ages on screen.

use std::time::{Duration, SystemTime};

/// RFC 3339 in UTC with millisecond precision.
pub fn rfc3339(time: SystemTime) -> String {
    humantime::format_rfc3339_millis(time).to_string()
}

/// A compact age: `42s`, `3m12s`, `5h03m`, `2d04h`. Future times read `0s`.
pub fn age(since: SystemTime, now: SystemTime) -> String {
    let secs = now
        .duration_since(since)
        .unwrap_or(Duration::ZERO)
        .as_secs();
    match secs {
        0..60 => format!("{secs}s"),
        60..3600 => format!("{}m{:02}s", secs / 60, secs % 60),
        3600..86400 => format!("{}h{:02}m", secs / 3600, secs % 3600 / 60),
        _ => format!("{}d{:02}h", secs / 86400, secs % 86400 / 3600),
    }
}

/// Serializes a path as a (lossy) UTF-8 string: JSON output never fails,
/// even on a non-UTF-8 name (those are reported as scan problems).
pub(crate) fn lossy_path<S: serde::Serializer>(
    path: &std::path::Path,
    serializer: S,
) -> Result<S::Ok, S::Error> {
    serializer.serialize_str(&path.to_string_lossy())
}

/// serde helper for a `SystemTime` as an RFC 3339 string.
pub mod plain {
    use std::time::SystemTime;

    /// Serializes `time` as an RFC 3339 string.
    pub fn serialize<S: serde::Serializer>(
        time: &SystemTime,
        serializer: S,
    ) -> Result<S::Ok, S::Error> {
        serializer.serialize_str(&super::rfc3339(*time))
    }

    /// Reads an RFC 3339 string back.
    pub fn deserialize<'de, D: serde::Deserializer<'de>>(
        deserializer: D,
    ) -> Result<SystemTime, D::Error> {
        let text = <std::borrow::Cow<'de, str> as serde::Deserialize>::deserialize(deserializer)?;
        humantime::parse_rfc3339(&text).map_err(serde::de::Error::custom)
    }
}

/// serde helpers for `Option<SystemTime>` as RFC 3339 strings.
pub mod option {
    use std::time::SystemTime;

    use serde::Deserialize;

    /// Reads an RFC 3339 string (or null) back.
    pub fn deserialize<'de, D: serde::Deserializer<'de>>(
        deserializer: D,
    ) -> Result<Option<SystemTime>, D::Error> {
        Option::<String>::deserialize(deserializer)?
            .map(|text| humantime::parse_rfc3339(&text).map_err(serde::de::Error::custom))
            .transpose()
    }

    /// Serializes `Some(t)` as an RFC 3339 string, `None` as null.
    pub fn serialize<S: serde::Serializer>(
        time: &Option<SystemTime>,
        serializer: S,
    ) -> Result<S::Ok, S::Error> {
        match time {
            Some(time) => serializer.serialize_str(&super::rfc3339(*time)),
            None => serializer.serialize_none(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ages_are_compact() {
        let t0 = SystemTime::UNIX_EPOCH + Duration::from_secs(1_000_000);
        let at = |secs| t0 + Duration::from_secs(secs);
        assert_eq!(age(t0, at(42)), "42s");
        assert_eq!(age(t0, at(192)), "3m12s");
        assert_eq!(age(t0, at(5 * 3600 + 180)), "5h03m");
        assert_eq!(age(t0, at(2 * 86400 + 4 * 3600)), "2d04h");
        assert_eq!(age(at(10), t0), "0s");
    }
}
