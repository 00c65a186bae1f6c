//! Host helpers: what this machine and process are (hostname, process liveness, wall-clock
//! stamps, the GPUs this process was given). The lowest layer: imports nothing of the crate.

pub(crate) mod devlock;
pub(crate) mod gpus;

use std::fs;

pub(crate) fn hostname() -> String {
    fs::read_to_string("/proc/sys/kernel/hostname")
        .map(|s| s.trim().to_string())
        .unwrap_or_else(|_| "unknown-host".into())
}

/// The machine a run ran on, as the kernel describes it (provenance; never part of a key).
#[derive(Debug, Clone, serde::Serialize, serde::Deserialize, PartialEq, Default)]
pub(crate) struct HostInfo {
    pub hostname: String,
    pub cpu_model: String,
    /// The logical CPUs this process may use (its affinity and cgroup quota: all online CPUs
    /// unless narrowed), so one machine seen through another CPU set records other cores.
    pub cores: usize,
    pub memory_bytes: u64,
    /// The kernel's release (`uname -r`).
    pub kernel: String,
}

impl HostInfo {
    /// What tells machines apart, as a report names it: (name, value) per field.
    pub(crate) fn fields(&self) -> [(&'static str, String); 5] {
        [
            ("host", self.hostname.clone()),
            ("CPU", self.cpu_model.clone()),
            ("cores", self.cores.to_string()),
            ("memory", format!("{} kB", self.memory_bytes / 1024)),
            ("kernel", self.kernel.clone()),
        ]
    }
}

/// The CPU's model name as /proc/cpuinfo gives it (`unknown` where it gives none).
pub(crate) fn cpu_model() -> String {
    fs::read_to_string("/proc/cpuinfo")
        .unwrap_or_default()
        .lines()
        .find(|l| l.starts_with("model name"))
        .and_then(|l| l.split(':').nth(1))
        .map(|s| s.trim().to_string())
        .unwrap_or_else(|| "unknown".into())
}

/// This machine's [`HostInfo`] (`unknown` for what /proc does not say).
pub(crate) fn host_info() -> HostInfo {
    let memory_bytes = fs::read_to_string("/proc/meminfo")
        .ok()
        .and_then(|t| {
            let l = t.lines().find(|l| l.starts_with("MemTotal:"))?;
            l.split_whitespace().nth(1)?.parse::<u64>().ok()
        })
        .map_or(0, |kib| kib * 1024);
    HostInfo {
        hostname: hostname(),
        cpu_model: cpu_model(),
        cores: std::thread::available_parallelism().map_or(0, |n| n.get()),
        memory_bytes,
        kernel: fs::read_to_string("/proc/sys/kernel/osrelease")
            .map(|s| s.trim().to_string())
            .unwrap_or_else(|_| "unknown".into()),
    }
}

pub(crate) fn now_rfc3339() -> String {
    humantime::format_rfc3339_millis(std::time::SystemTime::now()).to_string()
}

/// The fields of a `/proc/PID/stat` line after the parenthesised command name (which may
/// itself hold spaces and parentheses): `[0]` the state, `[1]` the parent, `[2]` the process
/// group, `[11]`/`[12]` user and system time in clock ticks.
pub(crate) fn stat_fields(stat: &str) -> Vec<&str> {
    stat.rsplit_once(')')
        .map_or_else(Vec::new, |(_, rest)| rest.split_whitespace().collect())
}

/// A process that exists and is not a zombie (a killed process whose parent has not reaped
/// it still has a /proc entry).
pub(crate) fn pid_alive(pid: u32) -> bool {
    match fs::read_to_string(format!("/proc/{pid}/stat")) {
        Ok(stat) => stat_fields(&stat).first() != Some(&"Z"),
        Err(_) => false,
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn stat_fields_follow_a_command_name_with_spaces_and_parentheses() {
        let f = super::stat_fields("4242 (vllm (engine) 0) S 4200 4242 4242 0 -1");
        assert_eq!(&f[..4], ["S", "4200", "4242", "4242"]);
        assert!(super::stat_fields("garbage").is_empty());
        let me = std::fs::read_to_string("/proc/self/stat").unwrap();
        let parent = unsafe { libc::getppid() }.to_string();
        assert_eq!(super::stat_fields(&me)[1], parent);
    }
}
