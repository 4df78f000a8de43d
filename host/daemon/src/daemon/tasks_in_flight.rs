//! The event loop's tasks whose every outcome the pipeline must hear (plugin calls, approval
//! POSTs): a tokio `JoinSet` and, for each task, what it works on, so a task that failed (a
//! panic: a forewarn bug) still says what it was for and the loop can answer in its stead.

use std::collections::HashMap;
use std::future::Future;

use tokio::task::{Id, JoinError, JoinSet};

/// Tasks in flight, each with the work it does (`W`), ending with an outcome (`T`).
pub(crate) struct TasksInFlight<T, W> {
    tasks: JoinSet<T>,
    work: HashMap<Id, W>,
}

impl<T: Send + 'static, W> TasksInFlight<T, W> {
    pub(crate) fn new() -> Self {
        TasksInFlight {
            tasks: JoinSet::new(),
            work: HashMap::new(),
        }
    }

    /// Runs `task`, which does `work`, on the runtime.
    pub(crate) fn spawn(&mut self, work: W, task: impl Future<Output = T> + Send + 'static) {
        let id = self.tasks.spawn(task).id();
        self.work.insert(id, work);
    }

    /// The next task to end: its outcome, or the work of a task that failed and why. None
    /// when no task is in flight. Cancel-safe (as `JoinSet::join_next_with_id`), so it can
    /// be an arm of `select!`.
    pub(crate) async fn next_ended(&mut self) -> Option<Result<T, (W, JoinError)>> {
        loop {
            match self.tasks.join_next_with_id().await? {
                Ok((id, outcome)) => {
                    self.work.remove(&id);
                    return Some(Ok(outcome));
                }
                Err(error) => {
                    // Every task is spawned with its work; a task without it is not ours.
                    if let Some(work) = self.work.remove(&error.id()) {
                        return Some(Err((work, error)));
                    }
                }
            }
        }
    }

    /// How many tasks are in flight.
    pub(crate) fn len(&self) -> usize {
        self.tasks.len()
    }

    /// Whether no task is in flight.
    pub(crate) fn is_empty(&self) -> bool {
        self.tasks.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn a_task_that_panics_still_gives_its_work_back() {
        let mut tasks: TasksInFlight<u32, &str> = TasksInFlight::new();
        tasks.spawn("fine", async { 7 });
        tasks.spawn("broken", async { panic!("a bug") });
        let mut outcomes = Vec::new();
        while let Some(ended) = tasks.next_ended().await {
            outcomes.push(match ended {
                Ok(outcome) => format!("ok {outcome}"),
                Err((work, error)) => format!("{work} panicked: {}", error.is_panic()),
            });
        }
        outcomes.sort();
        assert_eq!(outcomes, ["broken panicked: true", "ok 7"]);
        assert!(tasks.is_empty() && tasks.work.is_empty());
    }
}
