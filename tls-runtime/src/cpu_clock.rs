//! The calling thread's CPU clock: time the thread ran, without the time the OS ran
//! something else. Profile mode times epochs by it; the adaptive policy's measuring
//! stretches time the plain loop by it.

/// This thread's CPU time in nanoseconds, where the platform tells it: an epoch's
/// duration should not include the time the OS ran something else (on a busy
/// machine that is often more than the epoch itself).
pub(crate) fn thread_cpu_ns() -> Option<f64> {
    #[cfg(target_os = "linux")]
    {
        #[repr(C)]
        struct Timespec {
            sec: i64,
            nsec: i64,
        }
        unsafe extern "C" {
            fn clock_gettime(clock: i32, ts: *mut Timespec) -> i32;
        }
        const CLOCK_THREAD_CPUTIME_ID: i32 = 3;
        let mut ts = Timespec { sec: 0, nsec: 0 };
        // SAFETY: `ts` is a valid, writable `struct timespec` (two 64-bit fields on
        // 64-bit Linux); the clock id is Linux's per-thread CPU clock.
        let rc = unsafe { clock_gettime(CLOCK_THREAD_CPUTIME_ID, &mut ts) };
        if rc == 0 && cfg!(target_pointer_width = "64") {
            return Some(ts.sec as f64 * 1e9 + ts.nsec as f64);
        }
    }
    None
}

/// The CPU time one read of the thread's CPU clock adds to the interval between two
/// reads (its part after the first reading and before the second), measured once: a
/// system call in some VMs, as long as a short epoch's accesses together.
pub(crate) fn cpu_clock_cost() -> f64 {
    static COST: std::sync::OnceLock<f64> = std::sync::OnceLock::new();
    *COST.get_or_init(|| {
        let mut deltas: Vec<f64> = (0..64)
            .filter_map(|_| {
                let first = thread_cpu_ns()?;
                Some(thread_cpu_ns()? - first)
            })
            .collect();
        if deltas.is_empty() {
            return 0.0;
        }
        deltas.sort_by(f64::total_cmp);
        deltas[deltas.len() / 2].max(0.0)
    })
}
