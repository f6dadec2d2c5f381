//! Matching the filter's text: ASCII case ignored, nothing allocated (a
//! filter runs over a million names).

/// `needle` in `haystack`, ASCII case-insensitive, without allocating.
pub(crate) fn contains_ignore_ascii_case(haystack: &str, needle: &str) -> bool {
    let (hay, needle) = (haystack.as_bytes(), needle.as_bytes());
    needle.is_empty()
        || hay
            .windows(needle.len())
            .any(|window| window.eq_ignore_ascii_case(needle))
}
