//! The monthly budgets as the loop sees them. They live in the table, not
//! on the task, so [`super::next`] cannot read them: it asks for them to
//! be read ([`super::next::Next::ReadMonthly`]) just before each model
//! call, and decides on what they say ([`Monthly`]).

use crate::deps::Deps;
use crate::error::WorkerError;
use baton_core::{Instant, LedgerError, Task};

/// What the monthly budgets say of the next model call.
#[derive(Clone, Debug, Default, PartialEq)]
pub(super) enum Monthly {
    /// Not read for this decision: a reading serves the one decision
    /// after it, since anything carried out since may have spent.
    #[default]
    Unread,
    /// The call may be made.
    Within,
    /// A budget is spent; the message says whose.
    Spent(String),
}

/// The budgets' answer as the loop takes it. A counter that cannot be
/// read will not heal by retrying: the call goes on uncounted rather than
/// every task failing. Any other error fails the segment, whose wake is
/// tried again.
fn reading(read: Result<Option<String>, LedgerError>) -> Result<Monthly, LedgerError> {
    match read {
        Ok(None) | Err(LedgerError::Corrupt(_)) => Ok(Monthly::Within),
        Ok(Some(spent)) => Ok(Monthly::Spent(spent)),
        Err(e) => Err(e),
    }
}

/// Reads the monthly budgets for the next decision on `task`, serving
/// the person of `roles`.
pub(super) async fn read(
    deps: &Deps,
    task: &Task,
    roles: &[String],
) -> Result<Monthly, WorkerError> {
    let Some(budgets) = &deps.budgets else {
        return Ok(Monthly::Within);
    };
    let read = budgets.exhausted(task, roles, Instant::now()).await;
    if let Err(e @ LedgerError::Corrupt(_)) = &read {
        tracing::error!(error = %e, "monthly budget counter unreadable; not enforced for this step");
    }
    Ok(reading(read)?)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_unreadable_counter_lets_the_call_go_on_and_other_errors_fail() {
        let spent = "the monthly budget is spent";
        let cases = [
            ("within", Ok(None), Some(Monthly::Within)),
            (
                "spent",
                Ok(Some(spent.into())),
                Some(Monthly::Spent(spent.into())),
            ),
            (
                "unreadable",
                Err(LedgerError::Corrupt("?".into())),
                Some(Monthly::Within),
            ),
            ("conflict", Err(LedgerError::Conflict), None),
        ];
        for (case, read, expected) in cases {
            assert_eq!(reading(read).ok(), expected, "{case}");
        }
    }
}
