//! CPU-heavy work inside async code.
//!
//! The runtime has one worker per core, and a task's poll holds its worker until it
//! yields. Deciding a chain batch or checking a thousand-claim intake batch is many
//! milliseconds of computation with next to no waiting; polled on a worker, it keeps
//! every task queued there waiting too, among them the one holding SQLite's single
//! writer, whose next statement cannot start until it is polled. So such work runs
//! through [`heavy`], which hands the worker's other tasks to another thread meanwhile.

use std::future::Future;

use tokio::runtime::{Handle, RuntimeFlavor};

/// Runs `work` to completion on this thread, after handing the worker's other tasks to
/// another (`block_in_place`). On a current-thread runtime (tests) it is awaited as is.
pub async fn heavy<F: Future>(work: F) -> F::Output {
    let handle = Handle::current();
    match handle.runtime_flavor() {
        RuntimeFlavor::MultiThread => tokio::task::block_in_place(|| handle.block_on(work)),
        _ => work.await,
    }
}
