//! Colours and glyphs. Invariant: no state is told by colour alone —
//! every state has a glyph AND a word ([`state_label`]), and the
//! monochrome theme (chosen when `NO_COLOR` is set and non-empty) tells
//! states apart with bold / underline / reverse / dim instead of colour.
//! The colour theme uses only the 16 named ANSI colours and attributes,
//! never 256-colour or RGB values: it follows the terminal's own palette
//! (Solarized, light themes) and needs no colour-depth detection — a
//! 16-colour terminal gets exactly these styles. Free keys are dimmed
//! (the DIM attribute), not painted a fixed grey that vanishes on some
//! palettes.

use ratatui::style::{Color, Modifier, Style};

use crate::engine::Liveness;

/// Glyph and word of a liveness: `● live`, `◆ own`, `○ free`,
/// `◐ in-flight`, `✖ error`.
pub(crate) fn state_label(liveness: Liveness) -> (&'static str, &'static str) {
    let glyph = match liveness {
        Liveness::Live => "●",
        Liveness::Own => "◆",
        Liveness::Free => "○",
        Liveness::InFlight => "◐",
        Liveness::Shared => "◑",
        Liveness::Error => "✖",
    };
    (glyph, liveness.as_str())
}

/// Every style the views use.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Theme {
    /// Live keys.
    pub live: Style,
    /// This process's keys.
    pub own: Style,
    /// Free (stale) keys.
    pub free: Style,
    /// Keys with an acquisition or release in flight.
    pub in_flight: Style,
    /// Keys whose probe failed, and scan problems.
    pub error: Style,
    /// Directory-only nodes.
    pub directory: Style,
    /// Section rows and headings.
    pub section: Style,
    /// The selected row.
    pub selected: Style,
    /// The PAUSED / READ-ONLY markers.
    pub marker: Style,
    /// Secondary text (labels, hints).
    pub dim: Style,
    /// Keys in hints and help.
    pub key: Style,
    /// The active tab.
    pub tab_active: Style,
    /// True for the NO_COLOR theme.
    pub monochrome: bool,
}

impl Theme {
    /// The colour theme (16 ANSI colours only).
    pub fn color() -> Self {
        let plain = Style::new();
        Self {
            live: plain.fg(Color::Green).add_modifier(Modifier::BOLD),
            own: plain.fg(Color::Cyan).add_modifier(Modifier::BOLD),
            free: plain.add_modifier(Modifier::DIM),
            in_flight: plain.fg(Color::Yellow),
            error: plain.fg(Color::Red).add_modifier(Modifier::BOLD),
            directory: plain.fg(Color::LightBlue),
            section: plain.add_modifier(Modifier::BOLD),
            selected: plain.bg(Color::DarkGray).add_modifier(Modifier::BOLD),
            marker: plain
                .fg(Color::Black)
                .bg(Color::Yellow)
                .add_modifier(Modifier::BOLD),
            dim: plain.fg(Color::Gray),
            key: plain.fg(Color::Cyan).add_modifier(Modifier::BOLD),
            tab_active: plain
                .fg(Color::Black)
                .bg(Color::Cyan)
                .add_modifier(Modifier::BOLD),
            monochrome: false,
        }
    }

    /// The NO_COLOR theme: attributes only.
    pub(crate) fn monochrome() -> Self {
        let plain = Style::new();
        Self {
            live: plain.add_modifier(Modifier::BOLD),
            own: plain.add_modifier(Modifier::BOLD | Modifier::UNDERLINED),
            free: plain.add_modifier(Modifier::DIM),
            in_flight: plain.add_modifier(Modifier::ITALIC | Modifier::UNDERLINED),
            error: plain.add_modifier(Modifier::BOLD | Modifier::REVERSED),
            directory: plain,
            section: plain.add_modifier(Modifier::BOLD | Modifier::UNDERLINED),
            selected: plain.add_modifier(Modifier::REVERSED),
            marker: plain.add_modifier(Modifier::BOLD | Modifier::REVERSED),
            dim: plain.add_modifier(Modifier::DIM),
            key: plain.add_modifier(Modifier::BOLD),
            tab_active: plain.add_modifier(Modifier::BOLD | Modifier::REVERSED),
            monochrome: true,
        }
    }

    /// Monochrome when `NO_COLOR` is set to a non-empty value (per
    /// no-color.org), colour otherwise.
    pub(crate) fn from_env() -> Self {
        match std::env::var_os("NO_COLOR") {
            Some(value) if !value.is_empty() => Self::monochrome(),
            _ => Self::color(),
        }
    }

    /// The style of a liveness.
    pub fn liveness(&self, liveness: Liveness) -> Style {
        match liveness {
            Liveness::Live => self.live,
            Liveness::Own => self.own,
            Liveness::Free => self.free,
            Liveness::InFlight | Liveness::Shared => self.in_flight,
            Liveness::Error => self.error,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_colour_theme_uses_the_16_colour_palette_only_and_dims_free_keys() {
        let theme = Theme::color();
        let styles = [
            theme.live,
            theme.own,
            theme.free,
            theme.in_flight,
            theme.error,
            theme.directory,
            theme.section,
            theme.selected,
            theme.marker,
            theme.dim,
            theme.key,
            theme.tab_active,
        ];
        for style in styles {
            for colour in [style.fg, style.bg].into_iter().flatten() {
                assert!(
                    !matches!(colour, Color::Indexed(_) | Color::Rgb(..)),
                    "{colour:?} is not one of the 16 palette colours"
                );
            }
        }
        assert_eq!(theme.free.fg, None, "free keys follow the palette");
        assert!(theme.free.add_modifier.contains(Modifier::DIM));
    }
}
