//! The process-wide context: the state dir and the in-process agent lock
//! gate. Cheap to clone; every clone shares ONE [`AgentLockMap`], which is
//! what makes two holders in this process exclude each other.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use crate::locks::AgentLockMap;

/// Shared handles of one locktop process. Invariant: all clones see the
/// same state dir and the same agent lock map.
#[derive(Clone, Debug)]
pub struct Context {
    state_dir: Arc<PathBuf>,
    agent_locks: Arc<AgentLockMap>,
}

impl Context {
    /// A context on `state_dir` with a fresh, empty agent lock map.
    pub fn new(state_dir: PathBuf) -> Self {
        Self {
            state_dir: Arc::new(state_dir),
            agent_locks: Arc::new(AgentLockMap::new()),
        }
    }

    /// The ObjectiveAI state dir (`<state>`; locks live in `<state>/locks`).
    pub fn state_dir(&self) -> &Path {
        &self.state_dir
    }

    /// The in-process agent lock gate shared by every clone.
    pub fn agent_locks(&self) -> &AgentLockMap {
        &self.agent_locks
    }
}
