//! Sub-millisecond wake-ups for open-loop sends.
//!
//! tokio's timer wheel ticks at 1 ms, so an open-loop send waiting with `sleep_until` leaves
//! up to a millisecond late (p50 ~0.5 ms): at 1 000 jobs/s that lateness would be most of the
//! reported latency. A load thread's [`Pacer`] keeps the waiting sends' deadlines in a heap and one
//! Linux `timerfd` armed for the earliest, watched by the runtime's epoll through `AsyncFd`:
//! the kernel's hrtimer fires it with microsecond precision (timerfds take no timer slack),
//! and the thread wakes only when a send is due, so the precision costs about three syscalls
//! per timer fire (re-arm, read, epoll), not a spinning core. wrk2 paces from its event loop's timers the same way;
//! rpc-perf uses a ratelimiter over a busy loop, which would cost a core per thread here.
//!
//! Deadlines nearer than [`SPIN`] are not worth a syscall and a wake-up: the future yields to
//! the runtime until they pass (a bounded spin of at most `SPIN` per send). A thread that
//! sleeps long (a low rate) wakes late by the VM's and the CPU's idle exit, tens of µs that
//! vary from wake to wake: the pacer learns that lateness (its moving mean and mean
//! deviation, as TCP learns a round trip) and arms the timer mean + 2 deviations early (at
//! most [`MAX_EARLY`]), then spins the rest. A busy thread wakes in time, learns ~0
//! and spins nothing, so the spin costs CPU only where the thread was idle anyway.

use std::cell::RefCell;
use std::cmp::Reverse;
use std::collections::BinaryHeap;
use std::future::Future;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::pin::Pin;
use std::rc::Rc;
use std::task::{Context, Poll, Waker};
use std::time::{Duration, Instant};
use tokio::io::unix::AsyncFd;

/// Below this the wait yields instead of arming the timer.
pub const SPIN: Duration = Duration::from_micros(20);
/// The most the timer is armed ahead of a deadline to make up for a late wake-up.
pub const MAX_EARLY: Duration = Duration::from_micros(250);

/// One thread's precise timer. Cheap to clone (shared); `!Send`: it belongs to the load
/// thread whose runtime drives it ([`Pacer::drive`]).
#[derive(Clone)]
pub struct Pacer {
    state: Rc<RefCell<State>>,
}

struct State {
    /// Waiting sends, earliest first; a woken entry is popped, a dropped wait's entry wakes its
    /// task once for nothing (harmless).
    heap: BinaryHeap<Reverse<Entry>>,
    /// The deadline the timerfd is armed for (`None`: disarmed); it fires [`State::ahead`]
    /// before it, at the second instant.
    armed: Option<(Instant, Instant)>,
    fd: Rc<AsyncFd<OwnedFd>>,
    seq: u64,
    /// How late the timer's wake-ups have been: moving mean and mean deviation, µs.
    late_mean_us: f64,
    late_dev_us: f64,
    /// The timerfd failed (settime or read): no wait is served any more.
    broken: bool,
}

struct Entry {
    at: Instant,
    seq: u64,
    waker: Waker,
}

impl PartialEq for Entry {
    fn eq(&self, other: &Self) -> bool {
        (self.at, self.seq) == (other.at, other.seq)
    }
}
impl Eq for Entry {}
impl PartialOrd for Entry {
    fn partial_cmp(&self, other: &Self) -> Option<std::cmp::Ordering> {
        Some(self.cmp(other))
    }
}
impl Ord for Entry {
    fn cmp(&self, other: &Self) -> std::cmp::Ordering {
        (self.at, self.seq).cmp(&(other.at, other.seq))
    }
}

impl Pacer {
    /// A pacer with its timerfd registered on the current runtime (call inside it).
    ///
    /// Errors: the timerfd cannot be created or registered (no Linux timerfd).
    pub fn new() -> std::io::Result<Pacer> {
        // SAFETY: timerfd_create has no memory preconditions; the fd is owned from here on.
        let raw = unsafe { libc::timerfd_create(libc::CLOCK_MONOTONIC, libc::TFD_NONBLOCK | libc::TFD_CLOEXEC) };
        if raw < 0 {
            return Err(std::io::Error::last_os_error());
        }
        // SAFETY: `raw` is a fresh fd nobody else owns.
        let fd = unsafe { OwnedFd::from_raw_fd(raw) };
        // SAFETY: the AsyncFd owns the OwnedFd, which stays open (and the same fd) until the
        // AsyncFd is dropped.
        let fd = unsafe { AsyncFd::register_with_interest(fd, tokio::io::Interest::READABLE) }
            .map_err(|e| std::io::Error::other(e.to_string()))?;
        let fd = Rc::new(fd);
        let state = State {
            heap: BinaryHeap::with_capacity(1024),
            armed: None,
            fd,
            seq: 0,
            late_mean_us: 0.0,
            late_dev_us: 0.0,
            broken: false,
        };
        Ok(Pacer { state: Rc::new(RefCell::new(state)) })
    }

    /// Resolves at `at` (within tens of µs; at once if it has passed).
    pub fn until(&self, at: Instant) -> PaceUntil {
        PaceUntil { pacer: self.clone(), at }
    }

    /// The task that wakes the due waits: run it on the thread's `LocalSet` for as long as
    /// waits are made. Ends only with its runtime, or on a timerfd error: then every wait is
    /// woken and the pacer is [`broken`](Pacer::is_broken) (callers fall back to tokio's timer).
    pub async fn drive(self) {
        let fd = self.state.borrow().fd.clone();
        loop {
            let Ok(mut guard) = fd.readable().await else { return };
            let mut expirations = [0u8; 8];
            // SAFETY: reading 8 bytes into our own buffer from our own fd.
            let n = unsafe { libc::read(fd.get_ref().as_raw_fd(), expirations.as_mut_ptr().cast(), 8) };
            // One read takes every expiration: the readiness is spent either way.
            guard.clear_ready();
            if n < 0 {
                if std::io::Error::last_os_error().kind() != std::io::ErrorKind::WouldBlock {
                    self.break_down();
                    return;
                }
                // Not expired after all (re-armed meanwhile): wait again, learn nothing.
                continue;
            }
            self.fire(Instant::now());
        }
    }

    /// True once the timerfd failed: waits must use another timer.
    pub fn is_broken(&self) -> bool {
        self.state.borrow().broken
    }

    /// Marks the pacer broken and wakes every wait (each then sees the flag).
    fn break_down(&self) {
        let mut st = self.state.borrow_mut();
        st.broken = true;
        while let Some(Reverse(entry)) = st.heap.pop() {
            entry.waker.wake();
        }
    }

    /// Wakes every wait due by `now` (and within the spin window of it), learns how late this
    /// wake-up was, then arms for the next.
    fn fire(&self, now: Instant) {
        let mut st = self.state.borrow_mut();
        if let Some((_, fires_at)) = st.armed.take() {
            let late = now.saturating_duration_since(fires_at).as_secs_f64() * 1e6;
            // A wake-up held up far beyond the usual (the thread was busy with other tasks, or
            // preempted) says nothing of the timer: left out, so one outlier does not pin the
            // lead at its maximum.
            if late <= 4.0 * (st.late_mean_us + st.late_dev_us) + 50.0 {
                st.late_dev_us += ((late - st.late_mean_us).abs() - st.late_dev_us) / 4.0;
                st.late_mean_us += (late - st.late_mean_us) / 8.0;
            }
        }
        let window = st.ahead() + SPIN;
        while st.heap.peek().is_some_and(|Reverse(e)| e.at <= now + window) {
            let Reverse(entry) = st.heap.pop().expect("peeked");
            entry.waker.wake();
        }
        if let Some(next) = st.heap.peek().map(|Reverse(e)| e.at) {
            st.arm(next, now);
        }
    }

    fn register(&self, at: Instant, waker: &Waker) {
        let mut st = self.state.borrow_mut();
        st.seq += 1;
        let seq = st.seq;
        st.heap.push(Reverse(Entry { at, seq, waker: waker.clone() }));
        if st.armed.is_none_or(|(armed, _)| at < armed) {
            st.arm(at, Instant::now());
        }
        if st.broken {
            drop(st);
            self.break_down();
        }
    }
}

impl State {
    /// How far ahead of a deadline the timer fires: the learnt lateness, mean + 2 deviations.
    fn ahead(&self) -> Duration {
        Duration::from_secs_f64((self.late_mean_us + 2.0 * self.late_dev_us) / 1e6).min(MAX_EARLY)
    }

    /// Arms the timerfd to fire [`State::ahead`] before `at` (relative to `now`; at least
    /// 1 ns, since 0 disarms).
    fn arm(&mut self, at: Instant, now: Instant) {
        let fires_at = at.checked_sub(self.ahead()).unwrap_or(at).max(now);
        let wait = fires_at.saturating_duration_since(now).max(Duration::from_nanos(1));
        let spec = libc::itimerspec {
            it_interval: libc::timespec { tv_sec: 0, tv_nsec: 0 },
            it_value: libc::timespec { tv_sec: wait.as_secs() as libc::time_t, tv_nsec: wait.subsec_nanos() as _ },
        };
        let fd: RawFd = self.fd.get_ref().as_raw_fd();
        // SAFETY: `spec` is a valid itimerspec we own; the old value is not asked for.
        if unsafe { libc::timerfd_settime(fd, 0, &spec, std::ptr::null_mut()) } < 0 {
            self.broken = true;
            return;
        }
        self.armed = Some((at, fires_at));
    }
}

/// The future of [`Pacer::until`].
pub struct PaceUntil {
    pacer: Pacer,
    at: Instant,
}

impl Future for PaceUntil {
    type Output = ();

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<()> {
        let now = Instant::now();
        // Broken: ends at once; the caller's loop sees the pacer broken and sleeps on tokio's timer.
        if now >= self.at || self.pacer.is_broken() {
            return Poll::Ready(());
        }
        if self.at - now <= self.pacer.state.borrow().ahead() + SPIN {
            // A bounded spin: other tasks run in between.
            cx.waker().wake_by_ref();
            return Poll::Pending;
        }
        // Registered on every poll that is not due: the task is woken by the pacer only, and an
        // extra poll (woken by something else) leaves one extra entry, one spare wake-up later.
        self.pacer.register(self.at, cx.waker());
        Poll::Pending
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The pacer wakes each wait at (not before) its deadline, in order, and far closer to it
    /// than tokio's 1 ms timer; the exact lateness is measured by `scripts/bench-pacing`
    /// (a timing bound here would not hold on a loaded CI box).
    #[test]
    fn waits_end_at_or_after_their_deadline_in_order() {
        let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
        let local = tokio::task::LocalSet::new();
        local.block_on(&runtime, async {
            let pacer = Pacer::new().unwrap();
            tokio::task::spawn_local(pacer.clone().drive());
            let start = Instant::now();
            let order = Rc::new(RefCell::new(Vec::new()));
            let mut tasks = Vec::new();
            for (i, ms) in [30u64, 5, 15, 20, 10, 25].into_iter().enumerate() {
                let (pacer, order) = (pacer.clone(), order.clone());
                let at = start + Duration::from_millis(ms);
                tasks.push(tokio::task::spawn_local(async move {
                    pacer.until(at).await;
                    assert!(Instant::now() >= at, "woke before its deadline");
                    order.borrow_mut().push(i);
                }));
            }
            for t in tasks {
                t.await.unwrap();
            }
            assert_eq!(*order.borrow(), [1, 4, 2, 3, 5, 0]);
        });
    }
}
