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
//! because something was dropped. JSON output needs none of this: its
//! strings are escaped by `serde_json`.

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
pub fn is_hazard(c: char) -> bool {
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

    proptest! {
        #[test]
        fn visible_text_holds_no_hazard(
            text in "\\PC{0,20}[\\x00-\\x1f\\x7f\\u{80}-\\u{9f}\\u{202a}-\\u{202e}\\u{2066}-\\u{2069}\\u{200e}\\u{200f}\\u{2028}\\u{2029}]{0,5}\\PC{0,5}"
        ) {
            prop_assert!(!visible(&text).chars().any(is_hazard));
        }

        #[test]
        fn text_without_hazards_is_unchanged(text in "\\PC{0,40}") {
            prop_assume!(!text.chars().any(is_hazard));
            let shown = visible(&text);
            prop_assert_eq!(shown.as_ref(), text.as_str());
        }
    }
}
