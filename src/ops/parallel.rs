//! Work shared between the calling thread and the rayon pool, without
//! waiting for threads that have not started.
//!
//! A rayon parallel loop (or scope) finishes only when every thread it
//! handed work to has done it. When the other cores are busy with other
//! processes, a pool thread may start late, or be preempted while it holds
//! a share, and the caller waits a scheduler time slice for it: on this
//! 2-core machine such loops measured slower than one thread whenever the
//! other core had other work. Here the caller works through the tasks
//! itself, helpers claim what is left when they start, and the caller waits
//! only for tasks a helper has claimed.
//!
//! A helper that has finished spins for [`SPIN`] watching for the next
//! `share` call before it gives its pool thread back. On this machine (a
//! virtual one) a thread that sleeps can take a millisecond or more to
//! start again, as long as a whole convolution: without the spin, helpers
//! arrived after the caller had done the work alone, and both Conv and
//! onnxruntime with its spinning turned off ran two threads at one
//! thread's speed. A model runs kernel after kernel, so the spin keeps the
//! helpers warm across them.
//!
//! Part of that delay is where Linux puts a woken thread: a scheduler trace
//! (`perf record -e sched:*`) showed the helper queued on its caller's CPU
//! while the other CPU idled, running there only when the caller's time
//! slice ended and staying there, both threads at half speed, until the
//! next load balance 4-8 ms later. In rounds of calls after a pause, as
//! `cargo xtask bench` times them, a quarter of the first calls took 5-6
//! ms instead of 1, which is how two-thread runs of the bench sometimes
//! measured one thread's speed. So the caller yields once after waking a
//! helper, and a helper that finds itself on its caller's CPU moves off it
//! ([`leave_cpu`]).

use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// How long an idle helper watches for more work before it returns its
/// pool thread (onnxruntime's threads spin likewise by default), and how
/// long the caller spins for a helper's last task. Measured on a C64 3x3
/// Conv run in rounds of six after 50 ms pauses (as the bench runs it),
/// two threads: medians of 1.70-2.59 ms with 1 ms, 1.42-1.46 ms with 5 ms,
/// 1.43-1.45 ms with 20 ms.
const SPIN: Duration = Duration::from_millis(5);

/// The latest shared work, for helpers that are spinning; `EPOCH` counts
/// its changes.
static LATEST: Mutex<Option<Arc<Tasks>>> = Mutex::new(None);
static EPOCH: AtomicUsize = AtomicUsize::new(0);
/// Helpers spinning now, which will take the next work without a spawn.
static SPINNING: AtomicUsize = AtomicUsize::new(0);

/// Runs `task(i)` once for every `i` in `0..count`, on the calling thread
/// and on as many pool threads as start while tasks remain; returns when
/// all are done. A panic in a task panics here once every claimed task has
/// finished.
pub(crate) fn share(count: usize, task: &(dyn Fn(usize) + Sync)) {
    let helpers = rayon::current_num_threads().saturating_sub(1);
    if count <= 1 || helpers == 0 {
        (0..count).for_each(task);
        return;
    }
    // SAFETY: this function returns only after `wait`, when every task is
    // done, and a helper that starts later claims nothing.
    let tasks = Arc::new(unsafe { Tasks::new(count, task) });
    *LATEST.lock().unwrap_or_else(|e| e.into_inner()) = Some(Arc::clone(&tasks));
    // SeqCst here and where a helper stops spinning: each side writes one
    // counter and then reads the other's, and at least one must see the
    // other's write, or the work would wait for a helper that has left.
    EPOCH.fetch_add(1, Ordering::SeqCst);
    let spinning = SPINNING.load(Ordering::SeqCst);
    let spawned = helpers.min(count - 1).saturating_sub(spinning.min(helpers));
    for _ in 0..spawned {
        let tasks = Arc::clone(&tasks);
        rayon::spawn(move || helper(tasks));
    }
    if spawned > 0 {
        // A woken helper may be queued on this CPU (see `leave_cpu`), where
        // it would wait for this thread's time slice to end (4 ms here)
        // before it could move: yielding lets it run and move at once. In
        // rounds of C64 3x3 calls after 50 ms pauses on two threads, the
        // first call of a round took 1.50-1.58 ms instead of 1.80-1.82 and
        // the second 1.11-1.18 instead of 1.25-1.32 (medians of 40 rounds).
        std::thread::yield_now();
    }
    tasks.run();
    tasks.wait();
    // Every task is claimed, so a helper that still picks these up claims
    // nothing; dropping them here frees them sooner.
    let mut latest = LATEST.lock().unwrap_or_else(|e| e.into_inner());
    if latest.as_ref().is_some_and(|t| Arc::ptr_eq(t, &tasks)) {
        *latest = None;
    }
}

/// A pool thread's part: `first`'s tasks, then whatever `share` publishes
/// while it spins.
fn helper(first: Arc<Tasks>) {
    leave_cpu(first.caller_cpu);
    first.help();
    drop(first);
    SPINNING.fetch_add(1, Ordering::AcqRel);
    let mut seen = EPOCH.load(Ordering::Acquire);
    let mut until = Instant::now() + SPIN;
    let mut spins = 0u32;
    loop {
        let epoch = EPOCH.load(Ordering::Acquire);
        if epoch != seen {
            seen = epoch;
            let latest = LATEST.lock().unwrap_or_else(|e| e.into_inner()).clone();
            if let Some(tasks) = latest {
                leave_cpu(tasks.caller_cpu);
                SPINNING.fetch_sub(1, Ordering::AcqRel);
                tasks.run();
                SPINNING.fetch_add(1, Ordering::AcqRel);
            }
            until = Instant::now() + SPIN;
            continue;
        }
        spins = spins.wrapping_add(1);
        if spins.is_multiple_of(64) && Instant::now() > until {
            break;
        }
        std::hint::spin_loop();
    }
    SPINNING.fetch_sub(1, Ordering::SeqCst);
    // Work published while this helper was leaving: take it rather than
    // leave the caller alone with it.
    if EPOCH.load(Ordering::SeqCst) != seen {
        let latest = LATEST.lock().unwrap_or_else(|e| e.into_inner()).clone();
        if let Some(tasks) = latest {
            tasks.run();
        }
    }
}

/// The CPU this thread is running on, where the OS tells.
fn current_cpu() -> Option<usize> {
    #[cfg(target_os = "linux")]
    {
        // SAFETY: no arguments; returns -1 on failure.
        let cpu = unsafe { libc::sched_getcpu() };
        usize::try_from(cpu).ok()
    }
    #[cfg(not(target_os = "linux"))]
    None
}

/// Moves this thread off `cpu` if it runs there and may run elsewhere.
///
/// Linux starts a woken thread on the CPU of the thread that woke it when
/// it judges that cache-friendly, and moves it to an idle CPU only at its
/// next load balance. On this machine (a 2-vCPU VM) a scheduler trace of
/// C64 3x3 calls in rounds after 50 ms pauses showed both pool threads on
/// one CPU for 4-8 ms of every round while the other CPU idled: calls
/// took 5-6 ms instead of 1. A helper sharing its caller's CPU does no
/// good, so it takes that CPU out of its affinity mask, which migrates it
/// at once, and puts the mask back (the scheduler does not move it back).
fn leave_cpu(cpu: Option<usize>) {
    #[cfg(target_os = "linux")]
    {
        let Some(cpu) = cpu else { return };
        if current_cpu() != Some(cpu) || cpu >= libc::CPU_SETSIZE as usize {
            return;
        }
        // SAFETY: cpu_set_t is plain data; the calls get its size and
        // address; pid 0 is this thread.
        unsafe {
            let mut mask: libc::cpu_set_t = std::mem::zeroed();
            let size = std::mem::size_of::<libc::cpu_set_t>();
            if libc::sched_getaffinity(0, size, &mut mask) != 0 || !libc::CPU_ISSET(cpu, &mask) {
                return;
            }
            let mut elsewhere = mask;
            libc::CPU_CLR(cpu, &mut elsewhere);
            if libc::CPU_COUNT(&elsewhere) == 0 {
                return;
            }
            if libc::sched_setaffinity(0, size, &elsewhere) == 0 {
                libc::sched_setaffinity(0, size, &mask);
            }
        }
    }
    #[cfg(not(target_os = "linux"))]
    let _ = cpu;
}

/// Where the pieces of `count` tasks start, for `threads` threads, then
/// `count`. Each piece takes a 2 x threads-th of what is left, so pieces
/// shrink towards the end and the last ones, which decide how long the
/// other threads wait, are single tasks; there are about 2 x threads x
/// (ln(count) + 1) of them, few enough that claiming them (two atomic
/// updates on a line every core writes) costs little even for the
/// smallest tasks callers hand in (a depthwise plane: a couple of
/// microseconds). Measured against 8 equal pieces per thread, on two
/// threads in alternating pairs: 1-7% faster on the bench's direct Conv
/// shapes, whose 16 items left one thread idle for half an item at the end.
fn pieces(count: usize, threads: usize) -> Vec<usize> {
    let mut bounds = vec![0];
    let mut start = 0;
    while start < count {
        start += (count - start).div_ceil(2 * threads);
        bounds.push(start);
    }
    bounds
}

/// The shared state of one [`share`] call.
struct Tasks {
    task: *const (dyn Fn(usize) + Sync),
    count: usize,
    /// Tasks are claimed in `pieces` runs of consecutive indices, shrinking
    /// towards the end ([`pieces`]).
    pieces: usize,
    /// Where each piece starts (and, last, `count`).
    bounds: Vec<usize>,
    /// The next piece to claim; values from `pieces` on claim nothing.
    next: AtomicUsize,
    /// Pieces finished (or panicked).
    done: AtomicUsize,
    failed: AtomicBool,
    /// The calling thread, woken when the last task is done.
    waiter: std::thread::Thread,
    /// The CPU the calling thread ran on when it shared the tasks.
    caller_cpu: Option<usize>,
}

// SAFETY: `task` is Sync and only called (see `run`); the rest is atomic.
unsafe impl Send for Tasks {}
// SAFETY: as for Send.
unsafe impl Sync for Tasks {}

impl Tasks {
    /// The state for running `task` on `0..count`, waking the calling
    /// thread when done.
    ///
    /// # Safety
    /// `task` is called through a pointer whose lifetime is erased: it must
    /// outlive every `run` that claims a task, which holds when the caller
    /// `wait`s before `task` goes away.
    unsafe fn new(count: usize, task: &(dyn Fn(usize) + Sync)) -> Tasks {
        let bounds = pieces(count, rayon::current_num_threads().max(1));
        let task: *const (dyn Fn(usize) + Sync + '_) = task;
        Tasks {
            // SAFETY: only the lifetime changes (see above).
            task: unsafe {
                std::mem::transmute::<
                    *const (dyn Fn(usize) + Sync + '_),
                    *const (dyn Fn(usize) + Sync),
                >(task)
            },
            count,
            pieces: bounds.len() - 1,
            bounds,
            next: AtomicUsize::new(0),
            done: AtomicUsize::new(0),
            failed: AtomicBool::new(false),
            waiter: std::thread::current(),
            caller_cpu: current_cpu(),
        }
    }

    /// A helper's share: nothing when it starts after the caller has done a
    /// quarter of the tasks. A helper the scheduler kept waiting that long
    /// had no free core, and on such a busy machine it is likely to be
    /// preempted again while it holds a task, stalling the caller. The
    /// tasks done are those of the pieces claimed before the latest, which
    /// may still be running: the first piece alone is about a quarter.
    fn help(&self) {
        let claimed = self.next.load(Ordering::Relaxed).min(self.pieces);
        if self.bounds[claimed.saturating_sub(1)] <= self.count / 4 {
            self.run();
        }
    }

    /// Claims and runs tasks until none is left.
    fn run(&self) {
        loop {
            let piece = self.next.fetch_add(1, Ordering::Relaxed);
            if piece >= self.pieces {
                return;
            }
            let (i0, i1) = (self.bounds[piece], self.bounds[piece + 1]);
            // A panic must still count the piece done, or the caller would
            // wait for it forever; the caller panics in turn. The piece's
            // other tasks still run, as they would in pieces of their own.
            for i in i0..i1 {
                let ran = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
                    // SAFETY: the piece (of tasks below count) is claimed
                    // and not yet counted done, so `share` has not returned
                    // and the closure is alive.
                    unsafe { (*self.task)(i) }
                }));
                if ran.is_err() {
                    self.failed.store(true, Ordering::Relaxed);
                }
            }
            // Release: the task's writes are visible to the caller's Acquire
            // load before it reads them.
            if self.done.fetch_add(1, Ordering::Release) + 1 == self.pieces {
                self.waiter.unpark();
            }
        }
    }

    /// Returns once every task is done; called after `run`, when every task
    /// is claimed, so what is left is a helper's last task. Spinning for up
    /// to [`SPIN`] covers a helper that is running: parking the caller would
    /// cost a wake-up as long as a convolution here. Past it the helper was
    /// likely preempted, and parking frees this core for it.
    fn wait(&self) {
        let start = Instant::now();
        let mut spins = 0u32;
        while self.done.load(Ordering::Acquire) < self.pieces {
            spins = spins.wrapping_add(1);
            if !spins.is_multiple_of(64) || start.elapsed() < SPIN {
                std::hint::spin_loop();
            } else {
                std::thread::park_timeout(Duration::from_micros(200));
            }
        }
        assert!(
            !self.failed.load(Ordering::Relaxed),
            "internal: a task shared between threads panicked"
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every index runs exactly once, from pools of one to four threads,
    /// for counts around the helper cut-off.
    /// Pieces cover every task once, in order, shrink to single tasks at
    /// the end, and stay few.
    #[test]
    fn pieces_cover_the_tasks_and_shrink() {
        for threads in 1..=4 {
            for count in [0, 1, 2, 3, 7, 16, 100, 1000, 100_000] {
                let b = pieces(count, threads);
                assert_eq!((b[0], *b.last().unwrap()), (0, count));
                assert!(b.windows(2).all(|w| w[0] < w[1]), "{b:?}");
                let sizes: Vec<usize> = b.windows(2).map(|w| w[1] - w[0]).collect();
                assert!(sizes.windows(2).all(|w| w[0] >= w[1]), "{sizes:?}");
                if count > 0 {
                    assert_eq!(*sizes.last().unwrap(), 1, "{sizes:?}");
                }
                let ln = (count.max(1) as f64).ln();
                assert!(
                    sizes.len() as f64 <= 2.0 * threads as f64 * (ln + 1.0) + 1.0,
                    "{count} tasks on {threads} threads: {} pieces",
                    sizes.len()
                );
            }
        }
    }

    /// A thread on its caller's CPU moves to another one it may run on,
    /// and keeps the CPUs it may run on.
    #[cfg(target_os = "linux")]
    #[test]
    fn a_helper_on_its_callers_cpu_moves_off_it() {
        std::thread::spawn(|| {
            let size = std::mem::size_of::<libc::cpu_set_t>();
            // SAFETY: plain data, and this thread's own mask.
            let mask = unsafe {
                let mut mask: libc::cpu_set_t = std::mem::zeroed();
                assert_eq!(libc::sched_getaffinity(0, size, &mut mask), 0);
                mask
            };
            // SAFETY: as above.
            if unsafe { libc::CPU_COUNT(&mask) } < 2 {
                eprintln!("skipped: this thread may run on one CPU only");
                return;
            }
            let here = current_cpu().expect("sched_getcpu");
            leave_cpu(Some(here));
            assert_ne!(current_cpu(), Some(here));
            // SAFETY: as above.
            let after = unsafe {
                let mut after: libc::cpu_set_t = std::mem::zeroed();
                assert_eq!(libc::sched_getaffinity(0, size, &mut after), 0);
                after
            };
            let same = (0..libc::CPU_SETSIZE as usize)
                // SAFETY: both masks are initialised; cpu < CPU_SETSIZE.
                .all(|cpu| unsafe { libc::CPU_ISSET(cpu, &mask) == libc::CPU_ISSET(cpu, &after) });
            assert!(same, "the affinity mask was not restored");
        })
        .join()
        .unwrap();
    }

    #[test]
    fn every_task_runs_once() {
        for threads in 1..=4 {
            let pool = rayon::ThreadPoolBuilder::new()
                .num_threads(threads)
                .build()
                .unwrap();
            for count in [0, 1, 2, 3, 7, 64, 1000] {
                let hits: Vec<AtomicUsize> = (0..count).map(|_| AtomicUsize::new(0)).collect();
                pool.install(|| {
                    share(count, &|i| {
                        hits[i].fetch_add(1, Ordering::Relaxed);
                    })
                });
                assert!(
                    hits.iter().all(|h| h.load(Ordering::Relaxed) == 1),
                    "{threads} threads, {count} tasks"
                );
            }
        }
    }

    /// Helpers that start at once (not late, as pool threads may) share
    /// the tasks, and each still runs once.
    #[test]
    fn tasks_claimed_by_several_threads_run_once() {
        let count = 5000;
        let hits: Vec<AtomicUsize> = (0..count).map(|_| AtomicUsize::new(0)).collect();
        let task = |i: usize| {
            hits[i].fetch_add(1, Ordering::Relaxed);
        };
        // SAFETY: `task` outlives `wait` below.
        let tasks = unsafe { Tasks::new(count, &task) };
        std::thread::scope(|s| {
            for _ in 0..4 {
                s.spawn(|| tasks.run());
            }
        });
        tasks.wait();
        assert!(hits.iter().all(|h| h.load(Ordering::Relaxed) == 1));
    }

    #[test]
    fn a_panicking_task_panics_the_caller_after_the_others() {
        let pool = rayon::ThreadPoolBuilder::new()
            .num_threads(2)
            .build()
            .unwrap();
        let ran = AtomicUsize::new(0);
        let result = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            pool.install(|| {
                share(50, &|i| {
                    ran.fetch_add(1, Ordering::Relaxed);
                    assert!(i != 17, "task 17 fails");
                })
            })
        }));
        assert!(result.is_err());
        assert_eq!(ran.load(Ordering::Relaxed), 50);
    }
}
