//! The operator's side of the UI, apart from what is being looked at: the
//! hands actions act through ([`Ops`]), the test holders started from this
//! monitor, and the form or dialog in progress.
//!
//! Invariants: without [`Ops`] (tests, a missing holder manager) every
//! action says so instead of acting; an open overlay takes every key.

use crate::model::TestHolders;

use super::ops::Ops;
use super::overlay::Overlay;

/// What the operator is doing, and with what.
#[derive(Default)]
pub struct Operator {
    /// The handles operator actions act through (`None` in tests).
    pub(crate) ops: Option<Ops>,
    /// The test holders started from this monitor.
    pub(crate) test_holders: TestHolders,
    /// The form or dialog above the panes, if any (it takes every key).
    pub(crate) overlay: Option<Overlay>,
}
