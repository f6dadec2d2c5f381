//! The operator's side of the UI, apart from what is being looked at: the
//! hands actions act through ([`Ops`]), the test holders started from this
//! monitor, and the form or dialog in progress.
//!
//! Invariants: without [`Ops`] (tests, a missing holder manager) every
//! action says so instead of acting; an open overlay takes every key.

use std::time::SystemTime;

use crate::liveness::ProcessInfo;
use crate::liveness::proc_locks::FileId;
use crate::model::TestHolders;
use crate::operate::signal::{SignalError, Target, verify_target};

use super::handles::Ops;
use super::overlay::Overlay;

/// Binds a shown holder for signalling (see [`verify_target`]): the
/// process, the files of the claims it is shown holding, the earliest
/// claim's "held since".
pub(crate) type VerifyHolder =
    Box<dyn Fn(&ProcessInfo, &[FileId], Option<SystemTime>) -> Result<Target, SignalError> + Send>;

/// What the operator is doing, and with what.
pub(crate) struct Operator {
    /// The handles operator actions act through (`None` in tests).
    pub(crate) ops: Option<Ops>,
    /// The test holders started from this monitor.
    pub(crate) test_holders: TestHolders,
    /// The form or dialog above the panes, if any (it takes every key).
    pub(crate) overlay: Option<Overlay>,
    /// How a holder is bound before the signal dialog asks.
    pub(crate) verify: VerifyHolder,
}

impl Default for Operator {
    fn default() -> Self {
        Self {
            ops: None,
            test_holders: TestHolders::default(),
            overlay: None,
            verify: Box::new(verify_target),
        }
    }
}
