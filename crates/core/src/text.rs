//! Text for a terminal: every name that comes from the watched tree (a tag
//! an agent chose, a file someone dropped there, a holder's command line)
//! is made inert before any text face prints it — the monitor, `watch`,
//! `snapshot`, `check`, `replay`, their stderr lines.
//!
//! Invariant: [`visible`]'s output holds no character for which
//! [`is_hazard`] is true, so nothing in a name can move the cursor, end a
//! line, set the window title or the clipboard (ESC, BEL, CSI/OSC as C1),
//! reorder what follows it on screen (bidi overrides and isolates) or
//! hide itself (zero-width marks). Each hazard becomes a visible stand-in,
//! so the name stays readable and two different names never print alike
//! because something was dropped. JSON output keeps every name exactly
//! ([`write_json`], [`to_json`]): a hazard is written as a `\uXXXX`
//! escape, which parses back to the same character — `serde_json` alone
//! escapes C0 controls but passes DEL, C1 and bidi controls through.

/// A line on stderr that never panics: a closed stderr (`2>&1 | head`)
/// loses the line, never the exit status (`eprintln!` would panic).
/// Every line locktop's commands write to stderr goes through it.
#[macro_export]
macro_rules! say {
    ($($arg:tt)*) => {{
        use std::io::Write as _;
        let _ = writeln!(std::io::stderr().lock(), $($arg)*);
    }};
}

use std::borrow::Cow;

/// Characters that re-order the text around them: the Unicode bidi
/// embeddings, overrides, isolates and marks.
const BIDI_CONTROLS: [char; 12] = [
    '\u{061C}', '\u{200E}', '\u{200F}', '\u{202A}', '\u{202B}', '\u{202C}', '\u{202D}', '\u{202E}',
    '\u{2066}', '\u{2067}', '\u{2068}', '\u{2069}',
];

/// True for a character no text face prints as it is: a control (C0, DEL,
/// C1), a bidi control, a line or paragraph separator, or an invisible
/// format mark that could hide part of a name (zero-width space, word
/// joiner and the invisible operators, the byte-order mark).
pub(crate) fn is_hazard(c: char) -> bool {
    c.is_control()
        || BIDI_CONTROLS.contains(&c)
        || matches!(
            c,
            '\u{2028}' | '\u{2029}' | '\u{200B}' | '\u{2060}'..='\u{2064}' | '\u{FEFF}'
        )
}

/// `text` with every hazard ([`is_hazard`]) replaced by a visible
/// stand-in: C0 controls by their Control Pictures glyph (`\t` → `␉`,
/// ESC → `␛`, `\n` → `␊`), DEL by `␡`, every other hazard by its code
/// point (`\u{202e}`). Borrowed when there is none.
pub fn visible(text: &str) -> Cow<'_, str> {
    if !text.chars().any(is_hazard) {
        return Cow::Borrowed(text);
    }
    let mut shown = String::with_capacity(text.len() + 8);
    for c in text.chars() {
        match c {
            '\0'..='\u{1f}' => shown.push(char::from_u32(0x2400 + c as u32).unwrap_or('?')),
            '\u{7f}' => shown.push('␡'),
            c if is_hazard(c) => shown.push_str(&c.escape_unicode().to_string()),
            c => shown.push(c),
        }
    }
    Cow::Owned(shown)
}

/// Writes `value` as compact JSON, as `serde_json::to_writer` does, with
/// every hazard ([`is_hazard`]) in a string escaped as `\uXXXX`: the same
/// JSON value, and nothing in it a terminal would obey.
pub fn write_json<W: std::io::Write, T: serde::Serialize + ?Sized>(
    out: W,
    value: &T,
) -> serde_json::Result<()> {
    value.serialize(&mut serde_json::Serializer::with_formatter(
        out,
        HazardEscaping,
    ))
}

/// [`write_json`] into a string.
pub fn to_json<T: serde::Serialize + ?Sized>(value: &T) -> serde_json::Result<String> {
    let mut out = Vec::new();
    write_json(&mut out, value)?;
    // Only UTF-8 was written: the escapes are ASCII, the rest is `str`.
    Ok(String::from_utf8(out).expect("JSON is UTF-8"))
}

/// `serde_json`'s compact formatter, but a string's hazards it leaves
/// as they are (DEL, C1, bidi controls, invisible marks) are escaped.
struct HazardEscaping;

impl serde_json::ser::Formatter for HazardEscaping {
    fn write_string_fragment<W: ?Sized + std::io::Write>(
        &mut self,
        writer: &mut W,
        fragment: &str,
    ) -> std::io::Result<()> {
        let mut start = 0;
        for (at, c) in fragment.char_indices().filter(|(_, c)| is_hazard(*c)) {
            writer.write_all(&fragment.as_bytes()[start..at])?;
            let mut units = [0u16; 2];
            for unit in c.encode_utf16(&mut units) {
                write!(writer, "\\u{unit:04x}")?;
            }
            start = at + c.len_utf8();
        }
        writer.write_all(&fragment.as_bytes()[start..])
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn controls_and_bidi_overrides_are_shown_not_obeyed() {
        assert_eq!(visible("a\tb"), "a␉b");
        assert_eq!(visible("x\ny\u{7f}"), "x␊y␡");
        assert_eq!(visible("a\u{1b}]2;PWNED\u{7}b"), "a␛]2;PWNED␇b");
        assert_eq!(visible("\u{85}"), "\\u{85}");
        assert_eq!(visible("\u{9b}31m"), "\\u{9b}31m");
        assert_eq!(visible("abc\u{202e}fed"), "abc\\u{202e}fed");
        assert_eq!(visible("a\u{2066}b\u{2069}"), "a\\u{2066}b\\u{2069}");
        assert_eq!(visible("zero\u{200b}width"), "zero\\u{200b}width");
        assert!(matches!(visible("plain: v2.1 日本"), Cow::Borrowed(_)));
    }

    #[test]
    fn json_escapes_what_serde_json_leaves_as_it_is() {
        let name = "a\u{1b}b\u{7f}\u{9b}c\u{202e}d 日本";
        assert_eq!(
            to_json(name).unwrap(),
            r#""a\u001bb\u007f\u009bc\u202ed 日本""#
        );
        assert!(serde_json::to_string(name).unwrap().contains('\u{202e}'));
    }

    proptest! {
        #[test]
        fn visible_text_holds_no_hazard(
            text in "\\PC{0,20}[\\x00-\\x1f\\x7f\\u{80}-\\u{9f}\\u{202a}-\\u{202e}\\u{2066}-\\u{2069}\\u{200e}\\u{200f}\\u{2028}\\u{2029}]{0,5}\\PC{0,5}"
        ) {
            prop_assert!(!visible(&text).chars().any(is_hazard));
        }

        /// JSON keeps every name exactly and holds no hazard as it is.
        #[test]
        fn json_holds_no_hazard_and_reads_back_the_same(
            text in "\\PC{0,20}[\\x00-\\x1f\\x7f\\u{80}-\\u{9f}\\u{202a}-\\u{202e}\\u{2066}-\\u{2069}\\u{200e}\\u{200f}\\u{2028}\\u{2029}\\u{feff}]{0,5}\\PC{0,5}"
        ) {
            let value = serde_json::json!({ text.clone(): [text.clone()] });
            let json = to_json(&value).expect("JSON");
            prop_assert!(!json.chars().any(is_hazard), "{}", json);
            let back: serde_json::Value = serde_json::from_str(&json).expect("parses");
            prop_assert_eq!(back, value);
        }

        #[test]
        fn text_without_hazards_is_unchanged(text in "\\PC{0,40}") {
            prop_assume!(!text.chars().any(is_hazard));
            let shown = visible(&text);
            prop_assert_eq!(shown.as_ref(), text.as_str());
        }
    }
}
