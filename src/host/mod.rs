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
    cpu_model_of(&fs::read_to_string("/proc/cpuinfo").unwrap_or_default())
}

/// The CPU model a /proc/cpuinfo text names: its `model name` (x86), else, on Arm, where the
/// kernel gives no name, the first core's implementer and part numbers (with the core's name
/// for the server cores whose numbers Arm publishes), so that two Arm machines of other cores
/// do not read alike; `unknown` where it says neither.
pub(crate) fn cpu_model_of(cpuinfo: &str) -> String {
    let field = |key: &str| {
        cpuinfo
            .lines()
            .find(|l| l.split(':').next().is_some_and(|k| k.trim() == key))
            .and_then(|l| l.split_once(':'))
            .map(|(_, v)| v.trim().to_string())
            .filter(|v| !v.is_empty())
    };
    // x86: exactly as bench360 has always read it (the text between the first and a second
    // colon, trimmed, empty if empty; `unknown` without a colon), so that no x86 key moves.
    if let Some(l) = cpuinfo.lines().find(|l| l.starts_with("model name")) {
        return l
            .split(':')
            .nth(1)
            .map_or_else(|| "unknown".into(), |v| v.trim().to_string());
    }
    let (Some(implementer), Some(part)) = (field("CPU implementer"), field("CPU part")) else {
        return "unknown".into();
    };
    // Arm Ltd's (0x41) Neoverse server cores, by their part numbers.
    let core = match (implementer.as_str(), part.as_str()) {
        ("0x41", "0xd0c") => Some("Arm Neoverse-N1"),
        ("0x41", "0xd40") => Some("Arm Neoverse-V1"),
        ("0x41", "0xd49") => Some("Arm Neoverse-N2"),
        ("0x41", "0xd4f") => Some("Arm Neoverse-V2"),
        _ => None,
    };
    let ids = format!("implementer {implementer}, part {part}");
    match core {
        Some(c) => format!("{c} ({ids})"),
        None => format!("Arm CPU ({ids})"),
    }
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
    fn the_cpu_model_is_named_on_x86_and_on_arm() {
        let x86 = "processor\t: 0\nvendor_id\t: GenuineIntel\nmodel\t\t: 143\n\
                   model name\t: Intel(R) Xeon(R) Platinum 8480+\n";
        assert_eq!(super::cpu_model_of(x86), "Intel(R) Xeon(R) Platinum 8480+");
        // Arm: no model name; Grace's cores and an unlisted part.
        let grace = "processor\t: 0\nBogoMIPS\t: 2000.00\nCPU implementer\t: 0x41\n\
                     CPU architecture: 8\nCPU variant\t: 0x0\nCPU part\t: 0xd4f\n";
        assert_eq!(
            super::cpu_model_of(grace),
            "Arm Neoverse-V2 (implementer 0x41, part 0xd4f)"
        );
        let other = grace.replace("0xd4f", "0xd05");
        assert_eq!(
            super::cpu_model_of(&other),
            "Arm CPU (implementer 0x41, part 0xd05)"
        );
        assert_ne!(super::cpu_model_of(grace), super::cpu_model_of(&other));
        assert_eq!(super::cpu_model_of(""), "unknown");
    }

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
