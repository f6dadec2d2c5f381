//! The SDK's on-disk naming of a claim, for reading the tree: the gate is
//! `<dir>/<escape(key)>.lock`, the announce `<dir>/<escape(key)>.live.lock`.
//!
//! The SDK keeps its escaping private, so a monitor that lists directories
//! or stats gate files must spell it again; `tests/escape_matches_sdk.rs`
//! proves it byte-for-byte against real SDK acquisitions. This module only
//! NAMES files — taking, testing and releasing locks stays in the SDK.
//! Invariant: `unescape(escape(k)) == Some(k)` for every key.

use std::path::{Path, PathBuf};

/// Suffix of a gate file.
pub const GATE_SUFFIX: &str = ".lock";
/// Suffix of an announce file.
pub const ANNOUNCE_SUFFIX: &str = ".live.lock";

/// Percent-escapes `key` as the SDK does: `[A-Za-z0-9_-]` pass through,
/// every other byte becomes `%XX` (uppercase hex).
pub fn escape(key: &str) -> String {
    let mut out = Vec::with_capacity(key.len());
    escape_into(key, &mut out);
    // Only ASCII was pushed.
    String::from_utf8(out).expect("escaped keys are ASCII")
}

/// [`escape`], appended to `out` (a bulk probe reuses one buffer).
pub fn escape_into(key: &str, out: &mut Vec<u8>) {
    for byte in key.bytes() {
        match byte {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'_' | b'-' => out.push(byte),
            _ => {
                const HEX: &[u8; 16] = b"0123456789ABCDEF";
                out.extend_from_slice(&[
                    b'%',
                    HEX[usize::from(byte >> 4)],
                    HEX[usize::from(byte & 0xF)],
                ]);
            }
        }
    }
}

/// Inverts [`escape`]; `None` for a malformed escape, a lowercase one
/// (`%2a`: the SDK writes `%2A`, so such a name is no claim's file) or a
/// non-UTF-8 result — a foreign file, not something the SDK wrote.
pub fn unescape(escaped: &str) -> Option<String> {
    let bytes = escaped.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        match bytes[i] {
            b'%' => {
                let hex = bytes.get(i + 1..i + 3)?;
                if !hex
                    .iter()
                    .all(|b| b.is_ascii_digit() || (b'A'..=b'F').contains(b))
                {
                    return None;
                }
                out.push(u8::from_str_radix(std::str::from_utf8(hex).ok()?, 16).ok()?);
                i += 3;
            }
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'_' | b'-' => {
                out.push(bytes[i]);
                i += 1;
            }
            _ => return None,
        }
    }
    String::from_utf8(out).ok()
}

/// The gate file of `(dir, key)`.
pub fn gate_path(dir: &Path, key: &str) -> PathBuf {
    dir.join(format!("{}{GATE_SUFFIX}", escape(key)))
}

/// The announce file of `(dir, key)`.
pub fn announce_path(dir: &Path, key: &str) -> PathBuf {
    dir.join(format!("{}{ANNOUNCE_SUFFIX}", escape(key)))
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn dots_percent_and_spaces_are_escaped() {
        assert_eq!(escape("a.b%c d"), "a%2Eb%25c%20d");
        assert_eq!(escape("ok_-Z9"), "ok_-Z9");
        assert_eq!(escape("é"), "%C3%A9");
    }

    #[test]
    fn malformed_escapes_are_foreign() {
        assert_eq!(unescape("%4"), None);
        assert_eq!(unescape("%ZZ"), None);
        assert_eq!(unescape("a.b"), None);
        assert_eq!(unescape("%FF"), None);
        assert_eq!(unescape("%2a"), None, "the SDK writes uppercase hex only");
        assert_eq!(unescape("%2A"), Some("*".into()));
    }

    proptest! {
        #[test]
        fn unescape_inverts_escape(key in any::<String>()) {
            prop_assert_eq!(unescape(&escape(&key)), Some(key));
        }

        #[test]
        fn unescape_never_panics_and_accepts_only_what_escape_writes(text in any::<String>()) {
            if let Some(key) = unescape(&text) {
                prop_assert_eq!(escape(&key), text, "one spelling per key");
            }
        }

        #[test]
        fn escaped_keys_cannot_imitate_suffixes(key in any::<String>()) {
            let escaped = escape(&key);
            prop_assert!(!escaped.contains('.'));
            prop_assert!(!escaped.contains('/'));
        }
    }
}
