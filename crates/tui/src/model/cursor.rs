//! One list's selection and scroll position.
//!
//! Invariants: the selection is read clamped to the list's current length
//! (a list that shrank never points past its end); the scroll offset is
//! the one the last frame showed, and [`ListCursor::scrolled`] is a pure
//! function of it, so drawing computes the next offset without writing.

/// Selection and scroll of one list pane.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ListCursor {
    selected: usize,
    offset: usize,
}

impl ListCursor {
    /// The selected index, clamped to a list of `len` rows.
    pub fn selected(&self, len: usize) -> usize {
        self.selected.min(len.saturating_sub(1))
    }

    /// Selects `index`, clamped to a list of `len` rows.
    pub fn select(&mut self, index: usize, len: usize) {
        self.selected = index.min(len.saturating_sub(1));
    }

    /// The first visible row, as of the last frame.
    pub fn offset(&self) -> usize {
        self.offset
    }

    /// Records the first visible row the last frame showed.
    pub(crate) fn set_offset(&mut self, offset: usize) {
        self.offset = offset;
    }

    /// The offset that keeps the selection inside a viewport of `height`
    /// rows over `len` rows, moving as little as possible from the last one.
    pub(crate) fn scrolled(&self, height: usize, len: usize) -> usize {
        if height == 0 {
            return self.offset;
        }
        let selected = self.selected(len);
        let mut offset = self.offset;
        if selected < offset {
            offset = selected;
        } else if selected >= offset + height {
            offset = selected + 1 - height;
        }
        offset.min(len.saturating_sub(height))
    }
}

/// A list cursor anchored on the selected row's identity `K` (a key, a
/// PID, an id), so the selection stays on the same thing while rows are
/// inserted, removed or re-sorted around it.
///
/// Invariant: after [`KeyedCursor::follow`] with the list's current keys,
/// the cursor's index is the anchored key's row; only when that key is no
/// longer a row does the index stay where it was (clamped), and the row
/// there becomes the anchor. Until a row is selected there is no anchor:
/// the selection is the first row of the list as it is now.
#[derive(Debug, Clone)]
pub(crate) struct KeyedCursor<K> {
    cursor: ListCursor,
    key: Option<K>,
}

impl<K> Default for KeyedCursor<K> {
    fn default() -> Self {
        Self {
            cursor: ListCursor::default(),
            key: None,
        }
    }
}

impl<K: PartialEq + Clone> KeyedCursor<K> {
    /// The index and scroll, as of the last follow or select.
    pub fn cursor(&self) -> &ListCursor {
        &self.cursor
    }

    /// The anchored identity, if any row was ever selected.
    #[cfg(test)]
    pub fn key(&self) -> Option<&K> {
        self.key.as_ref()
    }

    /// Puts the cursor back on its key among `keys` (the rows' identities,
    /// in display order); see the type's invariant for a key that is gone.
    pub fn follow(&mut self, keys: &[K]) {
        let found = self
            .key
            .as_ref()
            .and_then(|key| keys.iter().position(|k| k == key));
        match found {
            Some(index) => self.cursor.select(index, keys.len()),
            // Never selected: the first row, whatever it is now (the most
            // urgent, in a list ordered by urgency).
            None if self.key.is_none() => {}
            None => {
                // Gone: the row now at its index becomes the anchor; with
                // no row at all, the old key stays (it may come back).
                if let Some(row) = keys.get(self.cursor.selected(keys.len())) {
                    self.key = Some(row.clone());
                }
            }
        }
    }

    /// Selects row `index` (clamped) of the rows whose identities are
    /// `keys`, and anchors on it.
    pub fn select(&mut self, index: usize, keys: &[K]) {
        self.cursor.select(index, keys.len());
        self.key = keys.get(self.cursor.selected(keys.len())).cloned();
    }

    /// Records the first visible row the last frame showed.
    pub(crate) fn set_offset(&mut self, offset: usize) {
        self.cursor.set_offset(offset);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn selection_is_clamped_to_the_list() {
        let mut cursor = ListCursor::default();
        cursor.select(10, 3);
        assert_eq!(cursor.selected(3), 2);
        assert_eq!(cursor.selected(1), 0, "a list that shrank");
        assert_eq!(cursor.selected(0), 0);
    }

    #[test]
    fn scrolling_moves_only_as_far_as_needed() {
        let mut cursor = ListCursor::default();
        cursor.select(12, 100);
        assert_eq!(cursor.scrolled(10, 100), 3);
        cursor.set_offset(3);
        cursor.select(5, 100);
        assert_eq!(cursor.scrolled(10, 100), 3, "still visible: no move");
        cursor.select(1, 100);
        assert_eq!(cursor.scrolled(10, 100), 1);
    }

    #[test]
    fn a_keyed_cursor_stays_on_its_key_and_falls_back_to_the_same_row() {
        let mut cursor = KeyedCursor::default();
        cursor.select(1, &["a", "c", "d"]);
        cursor.follow(&["a", "b", "c", "d"]);
        assert_eq!(cursor.cursor().selected(4), 2, "a row inserted above");
        cursor.follow(&["d", "c", "b", "a"]);
        assert_eq!(cursor.cursor().selected(4), 1, "re-sorted");
        cursor.follow(&["d", "b", "a"]);
        assert_eq!(cursor.key(), Some(&"b"), "gone: the row now at its index");
        cursor.follow(&["x"]);
        assert_eq!((cursor.cursor().selected(1), cursor.key()), (0, Some(&"x")));
    }

    proptest! {
        #[test]
        fn the_selection_is_always_in_view(
            selected in 0usize..500, offset in 0usize..500, height in 1usize..60, len in 1usize..500,
        ) {
            let mut cursor = ListCursor::default();
            cursor.select(selected, len);
            cursor.set_offset(offset);
            let top = cursor.scrolled(height, len);
            let shown = cursor.selected(len);
            prop_assert!(top <= shown && shown < top + height);
        }
    }
}
