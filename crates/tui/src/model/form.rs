//! The "hold a family" form (`n`) and its "check a family" mode (`c`):
//! what the operator typed and chose, validated as they type.
//!
//! Invariants: [`HolderForm::family`] is the only way out of the form and
//! it validates every member with the `locks` rules (`validate_aih`,
//! `validate_tag`: an AIH has no empty, `.` or `..` segment, no NUL and
//! no leading `/`; a tag is escaped whole into one file name), so nothing
//! typed here can become a path
//! outside `<state>/locks`; the message the form shows is exactly the
//! error `family` returns. Pure: no terminal, no I/O.

use crate::locks::{Family, LocksError, validate_aih, validate_tag};
use crate::operate::test_holders::{HoldMode, HolderSpec, Placement};

/// What submitting the form does.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum FormPurpose {
    /// Start a test holder of the family.
    Hold,
    /// Run a family check with `probe` (the monitor's: only `acquire`
    /// takes the family, for an instant).
    Check {
        /// How the members are probed.
        probe: crate::liveness::ProbeMode,
    },
}

/// Group (tags that upgrade together) or hierarchy (AIH + bound tags).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum FamilyKind {
    /// `Family::Group`: one lock per tag of the group.
    Group,
    /// `Family::Hierarchy`: the AIH lock first, then its bound tags.
    Hierarchy,
}

/// One line of the form, in display order.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum FormField {
    /// Group or hierarchy.
    Kind,
    /// The AIH (hierarchy only).
    Aih,
    /// Tag names, comma-separated.
    Tags,
    /// In-process or child process (hold only).
    Placement,
    /// Try or wait (hold only).
    Mode,
}

impl FormField {
    /// True for the fields that take typed text.
    pub(crate) fn is_text(self) -> bool {
        matches!(self, FormField::Aih | FormField::Tags)
    }
}

/// The form's state.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct HolderForm {
    /// Hold or check.
    pub purpose: FormPurpose,
    /// Group or hierarchy.
    pub kind: FamilyKind,
    /// The AIH as typed.
    pub aih: String,
    /// The tags as typed: names separated by commas.
    pub tags: String,
    /// Where a test holder lives.
    pub placement: Placement,
    /// Try or wait.
    pub mode: HoldMode,
    /// The field keys go to.
    pub focus: FormField,
}

impl HolderForm {
    /// An empty hold form: a group, in-process, try; the cursor in tags.
    pub fn hold() -> Self {
        Self {
            purpose: FormPurpose::Hold,
            kind: FamilyKind::Group,
            aih: String::new(),
            tags: String::new(),
            placement: Placement::InProcess,
            mode: HoldMode::Try,
            focus: FormField::Tags,
        }
    }

    /// A check form filled with `family` (usually the selected key alone),
    /// the cursor at the end of the tags so more can be typed.
    pub fn check(family: Family, probe: crate::liveness::ProbeMode) -> Self {
        let (kind, aih, tags) = match family {
            Family::Group(tags) => (FamilyKind::Group, String::new(), tags),
            Family::Hierarchy { aih, tags } => (FamilyKind::Hierarchy, aih, tags),
        };
        Self {
            purpose: FormPurpose::Check { probe },
            kind,
            aih,
            tags: tags.join(", "),
            placement: Placement::InProcess,
            mode: HoldMode::Try,
            focus: FormField::Tags,
        }
    }

    /// The fields shown for the current kind and purpose, in order.
    pub fn fields(&self) -> Vec<FormField> {
        let mut fields = vec![FormField::Kind];
        if self.kind == FamilyKind::Hierarchy {
            fields.push(FormField::Aih);
        }
        fields.push(FormField::Tags);
        if self.purpose == FormPurpose::Hold {
            fields.extend([FormField::Placement, FormField::Mode]);
        }
        fields
    }

    /// Moves the focus to the next (or previous) field, wrapping.
    pub(crate) fn move_focus(&mut self, forward: bool) {
        let fields = self.fields();
        let index = fields.iter().position(|&f| f == self.focus).unwrap_or(0);
        let len = fields.len();
        let next = if forward { index + 1 } else { index + len - 1 };
        self.focus = fields[next % len];
    }

    /// Flips the focused choice (kind, placement or mode). No-op on text.
    pub(crate) fn toggle(&mut self) {
        match self.focus {
            FormField::Kind => {
                self.kind = match self.kind {
                    FamilyKind::Group => FamilyKind::Hierarchy,
                    FamilyKind::Hierarchy => FamilyKind::Group,
                };
            }
            FormField::Placement => {
                self.placement = match self.placement {
                    Placement::InProcess => Placement::Child,
                    Placement::Child => Placement::InProcess,
                };
            }
            FormField::Mode => {
                self.mode = match self.mode {
                    HoldMode::Try => HoldMode::Wait,
                    HoldMode::Wait => HoldMode::Try,
                };
            }
            FormField::Aih | FormField::Tags => {}
        }
    }

    /// The text of the focused field, if it is a text field.
    pub(crate) fn text_mut(&mut self) -> Option<&mut String> {
        match self.focus {
            FormField::Aih => Some(&mut self.aih),
            FormField::Tags => Some(&mut self.tags),
            _ => None,
        }
    }

    /// Types `c` into the focused text field.
    pub(crate) fn type_char(&mut self, c: char) {
        if let Some(text) = self.text_mut() {
            text.push(c);
        }
    }

    /// Deletes the last character of the focused text field.
    pub(crate) fn backspace(&mut self) {
        if let Some(text) = self.text_mut() {
            text.pop();
        }
    }

    /// Empties the focused text field.
    pub(crate) fn clear_field(&mut self) {
        if let Some(text) = self.text_mut() {
            text.clear();
        }
    }

    /// The typed tags: split on commas, trimmed, empty items dropped (so a
    /// trailing comma while typing is not an error). A tag containing a
    /// comma cannot be typed here (`locktop hold --group` takes any).
    pub(crate) fn tag_list(&self) -> Vec<String> {
        self.tags
            .split(',')
            .map(str::trim)
            .filter(|tag| !tag.is_empty())
            .map(str::to_string)
            .collect()
    }

    /// The validated family, or the one-line reason it is not valid yet.
    pub fn family(&self) -> Result<Family, FormError> {
        let tags = self.tag_list();
        let family = match self.kind {
            FamilyKind::Group => {
                if tags.is_empty() {
                    return Err(FormError::NoTag);
                }
                Family::Group(tags)
            }
            FamilyKind::Hierarchy => {
                if self.aih.is_empty() {
                    return Err(FormError::NoAih);
                }
                validate_aih(&self.aih)?;
                Family::Hierarchy {
                    aih: self.aih.clone(),
                    tags,
                }
            }
        };
        let members = match &family {
            Family::Group(tags) | Family::Hierarchy { tags, .. } => tags,
        };
        for tag in members {
            validate_tag(tag)?;
        }
        Ok(family)
    }

    /// The holder to start, when the form is valid.
    pub fn spec(&self) -> Result<HolderSpec, FormError> {
        Ok(HolderSpec {
            family: self.family()?,
            placement: self.placement,
            mode: self.mode,
        })
    }
}

/// Why the form cannot be submitted yet (one line, shown under it).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub(crate) enum FormError {
    /// A group with no tag typed.
    #[error("type at least one tag name")]
    NoTag,
    /// A hierarchy with no AIH typed.
    #[error("type the AIH, e.g. cli/daemon/<agent id>")]
    NoAih,
    /// A member the `locks` module refuses.
    #[error(transparent)]
    Invalid(#[from] LocksError),
}

/// `group a, b` / `aih x/y + a, b` — a family in one short line.
pub(crate) fn describe_family(family: &Family) -> String {
    match family {
        Family::Group(tags) => format!("group {}", tags.join(", ")),
        Family::Hierarchy { aih, tags } if tags.is_empty() => format!("aih {aih}"),
        Family::Hierarchy { aih, tags } => format!("aih {aih} + {}", tags.join(", ")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn hierarchy(aih: &str) -> HolderForm {
        let mut form = HolderForm::hold();
        form.focus = FormField::Kind;
        form.toggle();
        form.focus = FormField::Aih;
        for c in aih.chars() {
            form.type_char(c);
        }
        form
    }

    #[test]
    fn a_parent_segment_is_refused_with_the_reason() {
        let form = hierarchy("../x");
        assert_eq!(
            form.family().map_err(|e| e.to_string()),
            Err(r#"invalid agent instance hierarchy "../x": it has a '..' segment"#.to_string())
        );
        assert!(form.spec().is_err());
    }

    #[test]
    fn every_aih_rule_of_the_design_is_enforced_as_typed() {
        for (aih, reason) in [
            ("/a/b", "it starts with '/'"),
            ("a//b", "it has an empty segment"),
            ("a/./b", "it has a '.' segment"),
            ("a/b/", "it has an empty segment"),
            ("a\0b", "it contains a NUL byte"),
            ("x.lock/b", "a parent segment ends in '.lock'"),
        ] {
            let message = hierarchy(aih).family().unwrap_err().to_string();
            assert!(message.contains(reason), "{aih:?}: {message}");
        }
    }

    #[test]
    fn a_nested_aih_with_bound_tags_is_valid() {
        let mut form = hierarchy("a/b");
        assert_eq!(
            form.family(),
            Ok(Family::Hierarchy {
                aih: "a/b".into(),
                tags: vec![]
            })
        );
        form.focus = FormField::Tags;
        for c in "deploy, my tag: v1.0 ,".chars() {
            form.type_char(c);
        }
        assert_eq!(
            form.family(),
            Ok(Family::Hierarchy {
                aih: "a/b".into(),
                tags: vec!["deploy".into(), "my tag: v1.0".into()]
            })
        );
    }

    #[test]
    fn a_group_needs_a_tag_and_refuses_a_nul() {
        let mut form = HolderForm::hold();
        assert_eq!(
            form.family().map_err(|e| e.to_string()),
            Err("type at least one tag name".into())
        );
        form.type_char('a');
        assert_eq!(form.family(), Ok(Family::Group(vec!["a".into()])));
        form.type_char('\0');
        assert!(form.family().unwrap_err().to_string().contains("NUL"));
        form.backspace();
        form.type_char(',');
        form.type_char('b');
        let spec = form.spec().unwrap();
        assert_eq!(spec.family, Family::Group(vec!["a".into(), "b".into()]));
        assert_eq!(
            (spec.placement, spec.mode),
            (Placement::InProcess, HoldMode::Try)
        );
    }

    #[test]
    fn focus_skips_hidden_fields_and_choices_toggle() {
        let mut form = HolderForm::hold();
        assert_eq!(
            form.fields(),
            [
                FormField::Kind,
                FormField::Tags,
                FormField::Placement,
                FormField::Mode
            ]
        );
        form.move_focus(true);
        assert_eq!(form.focus, FormField::Placement);
        form.toggle();
        form.move_focus(true);
        form.toggle();
        assert_eq!(
            (form.placement, form.mode),
            (Placement::Child, HoldMode::Wait)
        );
        form.move_focus(true);
        assert_eq!(form.focus, FormField::Kind, "wraps");
        form.type_char('x'); // a choice takes no text
        assert_eq!(form.tags, "");
        let check = HolderForm::check(
            Family::Group(vec!["t".into()]),
            crate::liveness::ProbeMode::Passive,
        );
        assert_eq!(check.fields(), [FormField::Kind, FormField::Tags]);
        assert_eq!(check.tags, "t");
    }

    #[test]
    fn families_read_in_one_line() {
        assert_eq!(
            describe_family(&Family::Group(vec!["a".into(), "b".into()])),
            "group a, b"
        );
        let family = Family::Hierarchy {
            aih: "x/y".into(),
            tags: vec!["t".into()],
        };
        assert_eq!(describe_family(&family), "aih x/y + t");
    }
}
