//! An engine process's group: the engine is started as the leader of its own process group,
//! and its workers (vLLM's engine core, tensor-parallel ranks, SGLang's scheduler) are in it.
//! Stopping the leader is not stopping the engine: a worker may hold the GPU a moment longer,
//! or forever when the leader died first. What follows a stop — the next engine's start, the
//! device locks being let go — waits until the whole group is gone.

use std::time::{Duration, Instant};

/// Whether any process of group `pgid` is still running (a zombie, which holds nothing but
/// its pid, does not count: its reaper may be a container's init that never reaps).
pub(crate) fn alive(pgid: i32) -> bool {
    let Ok(dir) = std::fs::read_dir("/proc") else {
        // Without procfs, ask the kernel (zombies then count too).
        return unsafe { libc::kill(-pgid, 0) } == 0;
    };
    dir.flatten()
        .filter(|e| {
            e.file_name()
                .to_string_lossy()
                .bytes()
                .all(|b| b.is_ascii_digit())
        })
        .filter_map(|e| std::fs::read_to_string(e.path().join("stat")).ok())
        .any(|stat| {
            let f = crate::host::stat_fields(&stat);
            f.len() > 2 && f[2] == pgid.to_string() && f[0] != "Z" && f[0] != "X"
        })
}

/// Waits until no process of group `pgid` runs, at most `grace`; then SIGKILLs what is left
/// and waits for it (at most 5 s more). Whether any had to be killed.
pub(crate) async fn reap(pgid: i32, grace: Duration) -> bool {
    let t0 = Instant::now();
    while alive(pgid) {
        if t0.elapsed() >= grace {
            // SAFETY: kill has no memory preconditions.
            unsafe { libc::kill(-pgid, libc::SIGKILL) };
            let t1 = Instant::now();
            while alive(pgid) && t1.elapsed() < Duration::from_secs(5) {
                tokio::time::sleep(Duration::from_millis(50)).await;
            }
            return true;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    false
}

/// Kills the group when dropped while armed: an engine abandoned mid-start or mid-run (a
/// cancelled apply, a failed start) takes its workers with it, not only its leader.
#[derive(Debug)]
pub(crate) struct Guard {
    pub pgid: i32,
    pub armed: bool,
}

impl Drop for Guard {
    fn drop(&mut self) {
        if self.armed {
            // SAFETY: kill has no memory preconditions.
            unsafe { libc::kill(-self.pgid, libc::SIGKILL) };
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::process::CommandExt;

    #[tokio::test]
    async fn a_group_is_gone_only_when_its_workers_are() {
        // A leader that starts a worker and exits at once: the worker keeps the group alive.
        let mut leader = std::process::Command::new("sh");
        leader.args(["-c", "sleep 30 & exit 0"]).process_group(0);
        let mut child = leader.spawn().unwrap();
        let pgid = child.id() as i32;
        child.wait().unwrap();
        assert!(alive(pgid), "the worker outlives its leader");
        assert!(
            reap(pgid, Duration::from_millis(300)).await,
            "it had to be killed"
        );
        assert!(!alive(pgid));
        // A group whose processes all exit is gone without a kill.
        let mut quick = std::process::Command::new("sh");
        quick.args(["-c", "sleep 0.2 & wait"]).process_group(0);
        let mut child = quick.spawn().unwrap();
        let pgid = child.id() as i32;
        child.wait().unwrap();
        assert!(!reap(pgid, Duration::from_secs(10)).await);
    }

    #[test]
    fn an_armed_guard_kills_the_group_when_dropped() {
        let mut c = std::process::Command::new("sh");
        c.args(["-c", "sleep 30 & wait"]).process_group(0);
        let mut child = c.spawn().unwrap();
        let pgid = child.id() as i32;
        drop(Guard { pgid, armed: true });
        let _ = child.wait();
        let t = Instant::now();
        while alive(pgid) && t.elapsed() < Duration::from_secs(5) {
            std::thread::sleep(Duration::from_millis(20));
        }
        assert!(!alive(pgid));
    }
}
