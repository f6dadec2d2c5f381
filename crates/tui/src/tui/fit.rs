//! Fitting text into columns: control characters made visible, and
//! middle-ellipsis shortening that keeps both ends of a name (the root of
//! an AIH and its agent id, the program and the last arguments of a
//! command line).
//!
//! Invariants: widths are terminal columns (`unicode-width`), never bytes
//! or chars; [`middle`] never returns more than `width` columns, returns
//! the text unchanged when it fits, and otherwise a prefix, `…` and a
//! suffix of it, cut on char boundaries; [`visible`] (the crate's one escaping,
//! [`crate::text::visible`]) maps every control and bidi character to a
//! printable one, so nothing typed into a name can move the cursor,
//! reorder the line or vanish.

use std::borrow::Cow;

use unicode_width::{UnicodeWidthChar, UnicodeWidthStr};

/// The mark a shortened text carries where its middle was.
pub(crate) const ELLIPSIS: char = '…';

/// Columns `text` takes on screen (after [`visible`]).
pub fn width(text: &str) -> usize {
    visible(text).width()
}

pub use crate::text::visible;

/// `text` shortened in the middle to at most `width` columns: unchanged if
/// it fits, else its head, `…`, its tail (the head gets the odd column).
pub fn middle(text: &str, width: usize) -> Cow<'_, str> {
    if text.width() <= width {
        return Cow::Borrowed(text);
    }
    if width == 0 {
        return Cow::Borrowed("");
    }
    let room = width - 1; // the ellipsis takes one column
    let head_room = room.div_ceil(2);
    let (mut head, head_used) = take_columns(text.chars(), head_room);
    let (mut tail, _) = take_columns(text.chars().rev(), room - head_used);
    loop {
        let mut shortened = String::with_capacity(width * 4);
        shortened.extend(&head);
        shortened.push(ELLIPSIS);
        shortened.extend(tail.iter().rev());
        // Chars' own widths can undercount a sequence's (a digit then
        // U+FE0F is an emoji, two columns): the inner ends give until the
        // whole fits.
        if shortened.width() <= width || (head.is_empty() && tail.is_empty()) {
            return Cow::Owned(shortened);
        }
        if tail.len() >= head.len() {
            tail.pop();
        } else {
            head.pop();
        }
    }
}

/// `text` cut to at most `width` columns, its end replaced by `…` when
/// it does not fit (a table line on a terminal: the last column gives).
pub fn cut_end(text: &str, width: usize) -> String {
    if text.width() <= width {
        return text.to_string();
    }
    let (mut head, _) = take_columns(text.chars(), width.saturating_sub(1));
    loop {
        let mut cut: String = head.iter().collect();
        if width > 0 {
            cut.push(ELLIPSIS);
        }
        // As in `middle`: a sequence may be wider than its chars.
        if cut.width() <= width || head.pop().is_none() {
            return cut;
        }
    }
}

/// [`visible`], then [`middle`]: how every name is put in a column.
pub fn fit(text: &str, width: usize) -> String {
    middle(&visible(text), width).into_owned()
}

/// The leading chars of `chars` that fit in `room` columns, and the
/// columns they take.
fn take_columns(chars: impl Iterator<Item = char>, room: usize) -> (Vec<char>, usize) {
    let mut taken = Vec::new();
    let mut used = 0;
    for c in chars {
        let w = c.width().unwrap_or(0);
        if used + w > room {
            break;
        }
        used += w;
        taken.push(c);
    }
    (taken, used)
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn a_long_aih_keeps_its_root_and_its_agent_id() {
        let aih = "cli/daemon/3Bk4hBIOrMDdNaDL3atd1b-F1LTN4MMGSB1wpHXF/sub/agent-7";
        let short = middle(aih, 30);
        assert_eq!(short, "cli/daemon/3Bk4…XF/sub/agent-7");
        assert_eq!(short.width(), 30);
    }

    #[test]
    fn text_that_fits_is_unchanged_and_zero_width_is_empty() {
        assert_eq!(middle("abc", 3), "abc");
        assert_eq!(middle("abcd", 3), "a…d");
        assert_eq!(middle("abcd", 1), "…");
        assert_eq!(middle("abcd", 0), "");
    }

    #[test]
    fn wide_characters_are_never_split_across_the_limit() {
        // Each ideograph takes two columns.
        let short = middle("日本語のタグ名", 6);
        assert!(short.width() <= 6, "{short}");
        assert_eq!(short, "日…名"); // 5 columns: half an ideograph is no column
    }

    /// A char's own width can undercount a sequence's: a digit then
    /// U+FE0F (emoji presentation) takes two columns, not one. Found by
    /// the property below (its minimal failing input, kept).
    #[test]
    fn a_sequence_wider_than_its_chars_never_overflows() {
        let found = "𑾰0 ᰻֍ 🌀aA ®¡®0\u{fe0f}Σ𞋀0aaA𖭣ₐa 𑵠0  A A0𐨙   𞹤A\u{fffc}எΣA¡ aഒ";
        for width in 0..40 {
            let short = middle(found, width);
            assert!(short.width() <= width, "{short:?} wider than {width}");
            let cut = cut_end(found, width);
            assert!(cut.width() <= width, "{cut:?} wider than {width}");
        }
        let keycaps = "1\u{fe0f}2\u{fe0f}3\u{fe0f}4\u{fe0f}5\u{fe0f}";
        assert!(middle(keycaps, 5).width() <= 5, "{}", middle(keycaps, 5));
        assert!(cut_end(keycaps, 5).width() <= 5, "{}", cut_end(keycaps, 5));
    }

    #[test]
    fn control_characters_are_shown_not_swallowed() {
        assert_eq!(visible("a\tb"), "a␉b");
        assert_eq!(visible("x\ny\u{7f}"), "x␊y␡");
        assert_eq!(visible("\u{85}"), "\\u{85}");
        assert!(matches!(visible("plain"), Cow::Borrowed(_)));
        assert_eq!(fit("cli/\tx", 10), "cli/␉x");
    }

    proptest! {
        #[test]
        fn middle_never_exceeds_the_width_and_keeps_both_ends(
            text in "\\PC{0,60}|[a-z/日本\u{301}]{0,60}",
            width in 0usize..80,
        ) {
            // A text that has its own ellipsis cannot be split at ours.
            prop_assume!(!text.contains(ELLIPSIS));
            let short = middle(&text, width);
            prop_assert!(short.width() <= width, "{short:?} wider than {width}");
            if text.width() <= width {
                prop_assert_eq!(short.as_ref(), text.as_str());
            } else if width > 0 {
                let (head, tail) = short.split_once(ELLIPSIS).expect("an ellipsis");
                prop_assert!(text.starts_with(head));
                prop_assert!(text.ends_with(tail));
                // Both ends survive once there is room for a wide char on
                // each side of the ellipsis.
                if width >= 5 {
                    prop_assert!(!head.is_empty() && !tail.is_empty(), "{short:?}");
                }
            }
        }

        #[test]
        fn a_wider_column_never_shows_less(
            text in "[a-z/日]{0,60}",
            width in 0usize..70,
        ) {
            let narrow = middle(&text, width);
            let wide = middle(&text, width + 1);
            let shown = |s: &str| s.chars().filter(|&c| c != ELLIPSIS).count();
            prop_assert!(shown(&wide) >= shown(&narrow));
        }

    }
}
