//! `--aih A [--tag T …]` / `--tag T …` / `--group T …`: a [`Family`] named
//! on the command line. Shared by `hold` and `check`.
//!
//! Invariant: the three forms do not mix — `--group` with `--aih` or
//! `--tag` is refused (exit 2), never merged into a family nobody named.

use crate::locks::Family;

/// Flags that name no family.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum FamilyArgsError {
    /// Neither `--aih`, `--tag` nor `--group` was given.
    #[error("name a family: --aih AIH [--tag TAG …], --tag TAG …, or --group TAG …")]
    Empty,
}

/// A lock family as command-line flags.
#[derive(Debug, Clone, Default, clap::Args)]
pub struct FamilyArgs {
    /// An agent_instance_hierarchy (a/b/c): its instance lock, then the --tag locks.
    #[arg(long, value_name = "AIH")]
    pub aih: Option<String>,
    /// A tag lock: bound to --aih; without it, the --tag locks are one
    /// group (as --group).
    #[arg(long = "tag", value_name = "TAG")]
    pub tags: Vec<String>,
    /// A member of a GROUPED tag family (repeat for each tag of the
    /// group; not with --aih or --tag).
    #[arg(long = "group", value_name = "TAG", conflicts_with_all = ["aih", "tags"])]
    pub group: Vec<String>,
}

impl FamilyArgs {
    /// The family these flags name. Errors (one line) when they name
    /// nothing; member validation is `family_coords`' job.
    pub fn family(&self) -> Result<Family, FamilyArgsError> {
        if let Some(aih) = &self.aih {
            return Ok(Family::Hierarchy {
                aih: aih.clone(),
                tags: self.tags.clone(),
            });
        }
        let members: Vec<String> = self.group.iter().chain(&self.tags).cloned().collect();
        if members.is_empty() {
            return Err(FamilyArgsError::Empty);
        }
        Ok(Family::Group(members))
    }
}
