//! Host helpers: what this machine and process are (hostname, process liveness, wall-clock
//! stamps, the GPUs this process was given). The lowest layer: imports nothing of the crate.

pub(crate) mod gpus;

use std::fs;

pub(crate) fn hostname() -> String {
    fs::read_to_string("/proc/sys/kernel/hostname")
        .map(|s| s.trim().to_string())
        .unwrap_or_else(|_| "unknown-host".into())
}

pub(crate) fn now_rfc3339() -> String {
    humantime::format_rfc3339_millis(std::time::SystemTime::now()).to_string()
}

/// A process that exists and is not a zombie (a killed process whose parent has not reaped
/// it still has a /proc entry).
pub(crate) fn pid_alive(pid: u32) -> bool {
    match fs::read_to_string(format!("/proc/{pid}/stat")) {
        // The state follows the parenthesised command name, which may itself contain spaces.
        Ok(stat) => {
            stat.rsplit_once(')')
                .and_then(|(_, rest)| rest.split_whitespace().next())
                != Some("Z")
        }
        Err(_) => false,
    }
}
