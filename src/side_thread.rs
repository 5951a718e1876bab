//! A thread of its own with a current-thread tokio runtime, for work beside the run that must
//! neither wait on the coordinator's runtime nor make it wait: the nemesis and the probe.

use std::future::Future;

/// Starts a thread named `name` that builds a current-thread runtime (timers and I/O enabled)
/// and runs the future `make` returns to its end; joining the handle gives its output. The
/// future is made on the new thread, so it need not be `Send`.
///
/// Panics when the OS cannot start a thread or the runtime cannot be built.
pub fn spawn<F, Fut>(name: &str, make: F) -> std::thread::JoinHandle<Fut::Output>
where
    F: FnOnce() -> Fut + Send + 'static,
    Fut: Future,
    Fut::Output: Send + 'static,
{
    std::thread::Builder::new()
        .name(name.into())
        .spawn(move || {
            let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build().expect("tokio runtime");
            runtime.block_on(make())
        })
        .unwrap_or_else(|e| panic!("spawn the {name} thread: {e}"))
}
