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
    pub fn set_offset(&mut self, offset: usize) {
        self.offset = offset;
    }

    /// The offset that keeps the selection inside a viewport of `height`
    /// rows over `len` rows, moving as little as possible from the last one.
    pub fn scrolled(&self, height: usize, len: usize) -> usize {
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
            prop_assert!(top + height.min(len) <= len.max(top + height.min(len)));
        }
    }
}
