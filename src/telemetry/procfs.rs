//! CPU and memory from procfs (engine process tree, host, bench360 itself) and CPU package
//! energy from RAPL (`/sys/class/powercap`). Linux only; what cannot be read is said, not
//! zeroed.

use std::fs;
use std::path::PathBuf;

fn clk_tck() -> f64 {
    // SAFETY: sysconf has no preconditions.
    (unsafe { libc::sysconf(libc::_SC_CLK_TCK) }).max(1) as f64
}

fn page_size() -> f64 {
    // SAFETY: sysconf has no preconditions.
    (unsafe { libc::sysconf(libc::_SC_PAGESIZE) }).max(1) as f64
}

/// utime + stime of a process, in clock ticks.
fn cpu_ticks(pid: u32) -> Option<u64> {
    let stat = fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    let f = crate::host::stat_fields(&stat);
    Some(f.get(11)?.parse::<u64>().ok()? + f.get(12)?.parse::<u64>().ok()?)
}

/// The parent of a process.
pub(crate) fn parent(pid: u32) -> Option<u32> {
    let stat = fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    crate::host::stat_fields(&stat).get(1)?.parse().ok()
}

/// A process's name as the kernel keeps it (`comm`, at most 15 bytes): never its arguments,
/// which may hold secrets.
pub(crate) fn comm(pid: u32) -> Option<String> {
    let c = fs::read_to_string(format!("/proc/{pid}/comm")).ok()?;
    Some(c.trim().to_string())
}

/// Resident memory of a process, bytes.
pub(crate) fn rss_bytes(pid: u32) -> Option<f64> {
    let statm = fs::read_to_string(format!("/proc/{pid}/statm")).ok()?;
    Some(statm.split_whitespace().nth(1)?.parse::<f64>().ok()? * page_size())
}

/// The process and all its descendants.
pub(crate) fn tree(root: u32) -> Vec<u32> {
    let mut out = vec![root];
    let mut i = 0;
    while i < out.len() {
        let pid = out[i];
        if let Ok(tasks) = fs::read_dir(format!("/proc/{pid}/task")) {
            for t in tasks.flatten() {
                if let Ok(c) = fs::read_to_string(t.path().join("children")) {
                    out.extend(c.split_whitespace().filter_map(|p| p.parse::<u32>().ok()));
                }
            }
        }
        i += 1;
    }
    out.sort_unstable();
    out.dedup();
    out
}

/// CPU % (of one core) of a set of processes between two calls, and their RSS.
pub(crate) struct ProcessTreeMeter {
    root: u32,
    descendants: bool,
    last: Option<(i64, u64)>,
}

impl ProcessTreeMeter {
    /// The process and all its descendants (an engine and its workers).
    pub fn new(root: u32) -> Self {
        ProcessTreeMeter {
            root,
            descendants: true,
            last: None,
        }
    }

    /// The process alone (bench360 itself, whose child is the engine).
    pub fn single(pid: u32) -> Self {
        ProcessTreeMeter {
            root: pid,
            descendants: false,
            last: None,
        }
    }

    /// (cpu %, rss MB, pids) at time t_ns; cpu is None on the first call.
    pub fn sample(&mut self, t_ns: i64) -> Option<(Option<f64>, f64, Vec<u32>)> {
        let pids = if self.descendants {
            tree(self.root)
        } else {
            vec![self.root]
        };
        let ticks: u64 = pids.iter().filter_map(|p| cpu_ticks(*p)).sum();
        let rss: f64 = pids.iter().filter_map(|p| rss_bytes(*p)).sum();
        // The root gone means the engine is gone: no sample rather than zeros.
        cpu_ticks(self.root)?;
        let cpu = self.last.map(|(t0, k0)| {
            let dt = (t_ns - t0) as f64 / 1e9;
            if dt > 0.0 {
                (ticks.saturating_sub(k0)) as f64 / clk_tck() / dt * 100.0
            } else {
                0.0
            }
        });
        self.last = Some((t_ns, ticks));
        Some((cpu, rss / 1e6, pids))
    }
}

/// Host CPU % (all cores, 0–100) and memory used (MemTotal − MemAvailable).
pub(crate) struct HostMeter {
    last: Option<(u64, u64)>,
}

impl HostMeter {
    pub fn new() -> Self {
        HostMeter { last: None }
    }

    pub fn sample(&mut self) -> (Option<f64>, Option<f64>, Option<f64>) {
        let stat = fs::read_to_string("/proc/stat").unwrap_or_default();
        let cpu = stat.lines().next().and_then(|l| {
            let v: Vec<u64> = l
                .split_whitespace()
                .skip(1)
                .filter_map(|x| x.parse().ok())
                .collect();
            if v.len() < 5 {
                return None;
            }
            let idle = v[3] + v[4];
            let total: u64 = v.iter().take(8).sum();
            let out = self.last.map(|(t0, i0)| {
                let dt = total.saturating_sub(t0);
                if dt == 0 {
                    0.0
                } else {
                    100.0 * (1.0 - idle.saturating_sub(i0) as f64 / dt as f64)
                }
            });
            self.last = Some((total, idle));
            out
        });
        let mem = fs::read_to_string("/proc/meminfo").unwrap_or_default();
        let field = |name: &str| {
            mem.lines()
                .find(|l| l.starts_with(name))
                .and_then(|l| l.split_whitespace().nth(1))
                .and_then(|v| v.parse::<f64>().ok())
                .map(|kb| kb * 1024.0 / 1e6)
        };
        let total = field("MemTotal:");
        let used = match (total, field("MemAvailable:")) {
            (Some(t), Some(a)) => Some(t - a),
            _ => None,
        };
        (cpu, used, total)
    }
}

/// One RAPL package domain.
#[derive(Debug, Clone)]
pub(crate) struct RaplDomain {
    pub name: String,
    path: PathBuf,
    /// Counter range in mJ (it wraps there).
    pub wrap_mj: Option<f64>,
}

impl RaplDomain {
    pub fn read_mj(&self) -> Option<f64> {
        fs::read_to_string(&self.path)
            .ok()?
            .trim()
            .parse::<f64>()
            .ok()
            .map(|uj| uj / 1000.0)
    }
}

/// The readable RAPL package domains, or why there are none.
pub(crate) fn rapl_domains() -> Result<Vec<RaplDomain>, super::Unavailable> {
    use super::Unavailable;
    let root = PathBuf::from("/sys/class/powercap");
    let entries = fs::read_dir(&root).map_err(|e| Unavailable::Unreadable {
        path: root.clone(),
        why: e.to_string(),
    })?;
    let mut out = Vec::new();
    let mut denied = None;
    for e in entries.flatten() {
        let name = e.file_name().to_string_lossy().into_owned();
        // Top-level domains only (intel-rapl:0, not intel-rapl:0:1), which are the packages.
        if !(name.starts_with("intel-rapl:") || name.starts_with("amd-rapl:"))
            || name.matches(':').count() != 1
        {
            continue;
        }
        let dir = e.path();
        let label = fs::read_to_string(dir.join("name"))
            .map(|s| s.trim().to_string())
            .unwrap_or(name.clone());
        let path = dir.join("energy_uj");
        match fs::read_to_string(&path) {
            Ok(_) => out.push(RaplDomain {
                name: label,
                path,
                wrap_mj: fs::read_to_string(dir.join("max_energy_range_uj"))
                    .ok()
                    .and_then(|s| s.trim().parse::<f64>().ok())
                    .map(|uj| uj / 1000.0),
            }),
            Err(err) => {
                denied = Some(Unavailable::Unreadable {
                    path: path.clone(),
                    why: err.to_string(),
                })
            }
        }
    }
    if out.is_empty() {
        return Err(denied.unwrap_or(Unavailable::NoRapl { root }));
    }
    out.sort_by(|a, b| a.name.cmp(&b.name));
    Ok(out)
}

/// CPU time consumed by the calling thread, ns (for the samplers' own cost).
pub(crate) fn thread_cpu_ns() -> u64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: ts is a valid out-pointer for the duration of the call.
    unsafe {
        libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &mut ts);
    }
    ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn measures_a_busy_child_process_tree() {
        // A shell whose child spins: the tree includes the child and its CPU shows.
        let mut child = std::process::Command::new("sh")
            .args(["-c", "timeout 3 sh -c 'while :; do :; done' & wait"])
            .spawn()
            .unwrap();
        std::thread::sleep(std::time::Duration::from_millis(300));
        let mut m = ProcessTreeMeter::new(child.id());
        let t0 = std::time::Instant::now();
        let (cpu0, _, _) = m.sample(0).unwrap();
        assert_eq!(cpu0, None);
        std::thread::sleep(std::time::Duration::from_millis(700));
        let (cpu, rss, pids) = m.sample(t0.elapsed().as_nanos() as i64).unwrap();
        assert!(pids.len() >= 2, "{pids:?}");
        // Well above zero even on a loaded machine (a spinning child gets its share).
        assert!(cpu.unwrap() > 10.0, "busy child measured at {cpu:?} %");
        assert!(rss > 0.5, "rss {rss} MB");
        child.kill().unwrap();
        child.wait().unwrap();
    }

    #[test]
    fn host_meter_reads_cpu_and_memory() {
        let mut h = HostMeter::new();
        let (first, used, total) = h.sample();
        assert_eq!(first, None);
        assert!(used.unwrap() > 0.0 && total.unwrap() > used.unwrap());
        std::thread::sleep(std::time::Duration::from_millis(50));
        let (cpu, _, _) = h.sample();
        assert!((0.0..=100.0).contains(&cpu.unwrap()));
    }

    #[test]
    fn rapl_is_read_or_its_absence_explained() {
        match rapl_domains() {
            Ok(d) => assert!(d.iter().all(|x| x.read_mj().is_some())),
            Err(why) => {
                let why = why.to_string();
                assert!(
                    why.contains("/sys/class/powercap") || why.contains("energy_uj"),
                    "{why}"
                )
            }
        }
    }
}
