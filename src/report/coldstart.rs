//! The report's *Cold starts*: one row per deployment start, and per deployment started more
//! than once the time to healthy and to the first token across its starts, with what those
//! starts were (their machines, whether the engine's compile caches were warm). Pure.

use std::collections::BTreeMap;
use std::fmt::Write;

use super::summary::Row;
use super::{table, ColdStart};

/// A cold start recorded before bench360 kept its host takes the host its runs recorded, when
/// they all recorded the same one. Runs of a deployment usually ran on its start's machine, but
/// not always: a later apply that reruns a failed run, or runs a new task, starts the engine
/// again without a new cold-start record, maybe elsewhere; runs that disagree leave the start
/// without a host (the line across starts then says so).
pub(super) fn with_hosts_of_runs(
    coldstarts: Vec<(String, Option<ColdStart>)>,
    rows: &[Row],
) -> Vec<(String, Option<ColdStart>)> {
    coldstarts
        .into_iter()
        .map(|(label, c)| {
            let c = c.map(|mut c| {
                if c.host.is_none() {
                    let mut hosts = rows
                        .iter()
                        .filter(|r| r.data.deployment == label)
                        .filter_map(|r| r.data.provenance.as_ref().map(|p| &p.host));
                    if let Some(first) = hosts.next() {
                        if hosts.all(|h| h == first) {
                            c.host = Some(first.clone());
                        }
                    }
                }
                c
            });
            (label, c)
        })
        .collect()
}

/// How the line across starts names each of the machines: by kernel when the kernels tell them
/// apart, else by every field that differs between them (host name, CPU, cores, memory, kernel).
fn machine_names(hosts: &[&crate::host::HostInfo]) -> Vec<String> {
    let kernels: Vec<&str> = hosts.iter().map(|h| h.kernel.as_str()).collect();
    if kernels
        .iter()
        .enumerate()
        .all(|(i, k)| !kernels[..i].contains(k))
    {
        return kernels.iter().map(|k| format!("kernel {k}")).collect();
    }
    let all: Vec<_> = hosts.iter().map(|h| h.fields()).collect();
    let differs = |i: usize| all.iter().any(|f| f[i].1 != all[0][i].1);
    all.iter()
        .map(|f| {
            f.iter()
                .enumerate()
                .filter(|(i, _)| differs(*i))
                .map(|(_, (name, v))| format!("{name} {v}"))
                .collect::<Vec<_>>()
                .join(", ")
        })
        .collect()
}

/// The cold-start table's columns.
const HEADER: [&str; 8] = [
    "deployment",
    "process start s",
    "healthy s",
    "first token s",
    "model MB",
    "GPU mem after load MB",
    "weights in HF cache",
    "compile caches before",
];

/// One row per deployment: the cold start's phases, model size, memory after load.
fn start_rows(coldstarts: &[(String, Option<ColdStart>)]) -> Vec<Vec<String>> {
    coldstarts
        .iter()
        .map(|(d, c)| match c {
            Some(c) => vec![
                d.clone(),
                format!("{:.2}", c.phases.start_s),
                format!("{:.2}", c.phases.healthy_s),
                c.first_token_s
                    .map(|x| format!("{x:.2}"))
                    .unwrap_or_else(|| "–".into()),
                c.model_bytes
                    .map(|b| format!("{:.1}", b as f64 / 1e6))
                    .unwrap_or_else(|| "–".into()),
                c.gpu_mem_after_load_mb
                    .map(|m| format!("{m:.0}"))
                    .unwrap_or_else(|| "–".into()),
                match c.weights_cached {
                    Some(true) => "yes".into(),
                    Some(false) => "no (downloaded)".into(),
                    None => "–".into(),
                },
                compile_caches_cell(c),
            ],
            None => {
                let mut row = vec!["–".to_string(); HEADER.len()];
                row[0] = d.clone();
                row
            }
        })
        .collect()
}

/// The table, then which folders its compile-cache cells looked in and, per deployment started
/// more than once, its starts' mean and interval.
pub(super) fn coldstart_section(coldstarts: &[(String, Option<ColdStart>)]) -> String {
    let mut out = table(&HEADER, &start_rows(coldstarts));
    out.push_str(&compile_cache_folders(coldstarts));
    out.push_str(&across_cold_starts(coldstarts));
    out
}

/// The same for report.html — the table, the lines under it and the runs that stood on a
/// later start ([`restarts`]) — or nothing when the plan has no deployment.
pub(super) fn html(rows: &[Row], coldstarts: &[(String, Option<ColdStart>)]) -> Option<String> {
    if coldstarts.is_empty() {
        return None;
    }
    let mut out = super::html_table(&HEADER, start_rows(coldstarts));
    let lines = [
        compile_cache_folders(coldstarts),
        across_cold_starts(coldstarts),
        restarts(rows, coldstarts),
    ];
    for line in lines
        .iter()
        .flat_map(|l| l.lines())
        .filter(|l| !l.is_empty())
    {
        let _ = write!(out, "<p>{}</p>", super::plain(line));
    }
    Some(out)
}

/// report.html's chart: the phases of each deployment's first start, stacked.
pub(super) fn chart(rows: &[Row]) -> Option<String> {
    let mut cold: Vec<(String, Vec<f64>)> = Vec::new();
    for r in rows {
        if let Some(c) = &r.data.coldstart {
            if !cold.iter().any(|x| x.0 == r.data.deployment) {
                let ft = c
                    .first_token_s
                    .map(|f| (f - c.phases.healthy_s).max(0.0))
                    .unwrap_or(0.0);
                cold.push((
                    r.data.deployment.clone(),
                    vec![
                        c.phases.start_s,
                        (c.phases.healthy_s - c.phases.start_s).max(0.0),
                        ft,
                    ],
                ));
            }
        }
    }
    (!cold.is_empty()).then(|| {
        super::svg::stacked_bars(
            "Cold start by phase",
            "s",
            &["start", "load → healthy", "→ first token"],
            &cold,
        )
    })
}

/// The runs that stood on a later start of their deployment's engine than the one in its
/// cold-start row — a later apply started it again: resuming after a kill or on another
/// machine, retrying failed runs, running runs added since — grouped by that start. Their
/// start is in no cold-start row, and what they measured stands on another process (its
/// prefix cache, compiled graphs, machine) than the runs before them. A run is matched to the
/// row by launch time where both recorded one, else by its start's own `cold_start`.
pub(super) fn restarts(rows: &[Row], coldstarts: &[(String, Option<ColdStart>)]) -> String {
    let mut starts: Vec<(&str, &crate::record::EngineStart, Vec<&str>)> = Vec::new();
    for r in rows {
        let Some(s) = r.data.engine_start.as_ref() else {
            continue;
        };
        let dep = r.data.deployment.as_str();
        let row = coldstarts
            .iter()
            .find(|(d, _)| d == dep)
            .and_then(|(_, c)| c.as_ref()?.launched_utc.as_deref());
        let later = match row {
            Some(t) => t != s.launched_utc,
            None => !s.cold_start,
        };
        if !later {
            continue;
        }
        match starts
            .iter_mut()
            .find(|(d, t, _)| *d == dep && t.launched_utc == s.launched_utc)
        {
            Some((_, _, labels)) => labels.push(&r.data.label),
            None => starts.push((dep, s, vec![&r.data.label])),
        }
    }
    let mut out = String::new();
    for (dep, s, labels) in starts {
        let _ = writeln!(
            out,
            "\n{dep}: {} run{} stood on a later start of the engine than its cold-start row's, launched at {} (healthy after {:.2} s) by a later apply (resuming after a kill or on another machine, or running runs added or retried since): {}.",
            labels.len(),
            if labels.len() == 1 { "" } else { "s" },
            s.launched_utc,
            s.phases.healthy_s,
            labels.join(", ")
        );
    }
    out
}

/// Which folders the `compile caches before` cells looked in, one entry per distinct set with
/// the rows that checked it: a cell's `empty` covers only its own start's folders, and an
/// earlier bench360 checked fewer (SGLang's TVM-FFI kernels, before 2026-12-03).
fn compile_cache_folders(coldstarts: &[(String, Option<ColdStart>)]) -> String {
    let mut sets: Vec<(Vec<&str>, Vec<&str>)> = Vec::new();
    for (label, c) in coldstarts {
        let Some(states) = c.as_ref().and_then(|c| c.compile_caches.as_deref()) else {
            continue;
        };
        let folders: Vec<&str> = states.iter().map(|s| s.path.as_str()).collect();
        let row = label.strip_prefix("coldstart ").unwrap_or(label);
        match sets.iter_mut().find(|(f, _)| *f == folders) {
            Some((_, rows)) => rows.push(row),
            None => sets.push((folders, vec![row])),
        }
    }
    let list = |folders: &[&str]| {
        if folders.is_empty() {
            "none".to_string()
        } else {
            folders
                .iter()
                .map(|f| format!("`{f}`"))
                .collect::<Vec<_>>()
                .join(", ")
        }
    };
    match sets.as_slice() {
        [] => String::new(),
        [(folders, _)] => format!(
            "\nThe compile caches were looked for in {} before each start that records them.\n",
            list(folders)
        ),
        _ => {
            let per: Vec<String> = sets
                .iter()
                .map(|(folders, rows)| format!("{} before {}", list(folders), rows.join(", ")))
                .collect();
            format!(
                "\nThe compile caches were looked for in {} (a cell covers only the folders of its own start).\n",
                per.join("; ")
            )
        }
    }
}

/// What the engine's compile caches held before a start: `empty`, or `filled (N MB)`;
/// `–` when not recorded (a container, an engine without them, an earlier bench360).
fn compile_caches_cell(c: &ColdStart) -> String {
    match &c.compile_caches {
        Some(st) if crate::engine::caches::warm(st) => {
            format!("filled ({:.1} MB)", crate::engine::caches::megabytes(st))
        }
        Some(_) => "empty".into(),
        None => "–".into(),
    }
}

/// With `cold-repeats`, one line per deployment started more than once: the mean time to
/// healthy and to the first token over its cold starts, with their 95 % Student t intervals.
fn across_cold_starts(coldstarts: &[(String, Option<ColdStart>)]) -> String {
    let mut groups: BTreeMap<&str, Vec<&ColdStart>> = BTreeMap::new();
    for (label, c) in coldstarts {
        if let (Some((base, _)), Some(c)) = (label.split_once(" (start "), c) {
            groups.entry(base).or_default().push(c);
        }
    }
    let mut out = String::new();
    for (base, cs) in groups.into_iter().filter(|(_, cs)| cs.len() > 1) {
        let ci = |v: Vec<f64>| {
            crate::record::stats::repeat_ci(&v)
                .map_or("–".to_string(), |(m, h)| format!("{m:.2} ± {h:.2} s"))
        };
        let healthy = ci(cs.iter().map(|c| c.phases.healthy_s).collect());
        let first: Vec<f64> = cs.iter().filter_map(|c| c.first_token_s).collect();
        let first = if first.len() == cs.len() {
            ci(first)
        } else {
            "–".into()
        };
        let mut hosts: Vec<&crate::host::HostInfo> = Vec::new();
        for h in cs.iter().filter_map(|c| c.host.as_ref()) {
            if !hosts.contains(&h) {
                hosts.push(h);
            }
        }
        let mut machines = if hosts.len() > 1 {
            let names = machine_names(&hosts);
            let per: Vec<String> = hosts
                .iter()
                .zip(&names)
                .map(|(h, name)| {
                    let on: Vec<f64> = cs
                        .iter()
                        .filter(|c| c.host.as_ref() == Some(*h))
                        .map(|c| c.phases.healthy_s)
                        .collect();
                    let n = on.len();
                    let fig = if n == 1 {
                        format!("{:.2} s", on[0])
                    } else {
                        ci(on)
                    };
                    format!("{name}: {fig} ({n} start{})", if n == 1 { "" } else { "s" })
                })
                .collect();
            format!(
                " They ran on {} machines ({}): the interval holds the machines' difference too; healthy per machine: {}.",
                hosts.len(),
                names.join("; "),
                per.join("; ")
            )
        } else {
            String::new()
        };
        let unrecorded = cs.iter().filter(|c| c.host.is_none()).count();
        if unrecorded > 0 && !hosts.is_empty() {
            let _ = write!(
                machines,
                " {unrecorded} of them recorded no machine (an earlier bench360) and their finished runs name none or more than one: they may have run on another machine than the rest."
            );
        }
        let recorded: Vec<bool> = cs
            .iter()
            .filter_map(|c| c.compile_caches.as_deref().map(crate::engine::caches::warm))
            .collect();
        let filled = recorded.iter().filter(|w| **w).count();
        let caches = if filled > 0 && filled < recorded.len() {
            format!(
                " {filled} of them found the engine's compile caches non-empty (filled by an earlier start of it, or of another model or engine that shares them) and {} found them empty: the interval holds first starts and repeated ones (the table says which was which).",
                recorded.len() - filled
            )
        } else {
            String::new()
        };
        let _ = writeln!(
            out,
            "\n{base}: over {} cold starts, healthy {healthy}, first token {first} (mean ± 95 % half-width, Student t).{machines}{caches}",
            cs.len()
        );
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn start(healthy_s: f64, kernel: Option<&str>) -> Option<ColdStart> {
        Some(ColdStart {
            phases: crate::record::Phases {
                start_s: 0.1,
                healthy_s,
            },
            first_token_s: Some(healthy_s + 1.0),
            model_bytes: None,
            gpu_mem_after_load_mb: None,
            weights_cached: None,
            host: kernel.map(|k| crate::host::HostInfo {
                kernel: k.into(),
                ..Default::default()
            }),
            compile_caches: None,
            launched_utc: None,
        })
    }

    /// vLLM's starts on one machine: the first compiles into an empty cache, the next read
    /// it. The line says the interval mixes them; the table says which was which.
    #[test]
    fn cold_starts_that_found_filled_compile_caches_are_said_to_be() {
        let d = "coldstart m:q@vllm";
        let with = |healthy_s: f64, bytes: u64| {
            let mut c = start(healthy_s, Some("v1147"));
            if let Some(c) = c.as_mut() {
                c.compile_caches = Some(vec![crate::engine::caches::CacheState {
                    path: "/root/.cache/vllm".into(),
                    bytes,
                }]);
            }
            c
        };
        let mixed = [
            (format!("{d} (start 2)"), with(104.5, 0)),
            (format!("{d} (start 3)"), with(72.1, 41_900_000)),
        ];
        let line = across_cold_starts(&mixed);
        assert!(
            line.contains("1 of them found the engine's compile caches non-empty (filled by an earlier start of it, or of another model or engine that shares them) and 1 found them empty"),
            "{line}"
        );
        let table = coldstart_section(&mixed);
        assert!(table.contains("| empty |"), "{table}");
        assert!(table.contains("| filled (41.9 MB) |"), "{table}");
        // All first starts (each on a fresh machine), or none recorded: nothing to say.
        let fresh = [
            (format!("{d} (start 1)"), with(122.5, 0)),
            (format!("{d} (start 2)"), with(104.5, 0)),
        ];
        assert!(!across_cold_starts(&fresh).contains("compile caches"));
        let old = [
            (format!("{d} (start 1)"), start(122.5, None)),
            (format!("{d} (start 2)"), start(104.5, None)),
        ];
        assert!(!across_cold_starts(&old).contains("compile caches"));
        assert!(coldstart_section(&old).contains("| – |"));
        assert!(!coldstart_section(&old).contains("looked for"));
        let table = coldstart_section(&fresh);
        assert!(
            table.contains("The compile caches were looked for in `/root/.cache/vllm` before each start that records them."),
            "{table}"
        );
    }

    /// The seed study's twelfth hold: vLLM's start 4 recorded on one machine, five of its runs
    /// finished on a second after the first was lost. Those five are named, with their start;
    /// runs on the recorded start, and runs from before the start was kept, are not.
    #[test]
    fn runs_on_a_resumed_engine_are_named_with_its_start() {
        use crate::report::summary::{Row, RunData};
        let dep = "m:q@vllm (start 4)";
        let on = |label: &str, cold_start: bool, at: &str, healthy_s: f64| Row {
            data: RunData {
                deployment: dep.into(),
                label: label.into(),
                engine_start: Some(crate::record::EngineStart {
                    cold_start,
                    launched_utc: at.into(),
                    phases: crate::record::Phases {
                        start_s: 0.0,
                        healthy_s,
                    },
                }),
                ..Default::default()
            },
            ..Default::default()
        };
        let mut old = on("m:q@vllm mmlu single #3", false, "x", 1.0);
        old.data.engine_start = None;
        let rows = [
            on(
                "m:q@vllm spider single #4",
                true,
                "2026-12-03T22:43:22Z",
                117.5,
            ),
            on(
                "m:q@vllm synth batch[batch-size=128] #4",
                false,
                "2026-12-03T22:57:40Z",
                61.2,
            ),
            on(
                "m:q@vllm synth single #4",
                false,
                "2026-12-03T22:57:40Z",
                61.2,
            ),
            old,
        ];
        let text = restarts(&rows, &[]);
        assert_eq!(
            text,
            "\nm:q@vllm (start 4): 2 runs stood on a later start of the engine than its cold-start row's, launched at 2026-12-03T22:57:40Z (healthy after 61.20 s) by a later apply (resuming after a kill or on another machine, or running runs added or retried since): m:q@vllm synth batch[batch-size=128] #4, m:q@vllm synth single #4.\n"
        );
        // The cold-start row's launch time decides where both have one: a run whose start
        // claims to be the cold start but was launched at another time (the cold start was
        // recorded again since) stood on a later start; one launched with the row does not.
        let mut row = start(117.5, None).unwrap();
        row.launched_utc = Some("2026-12-03T22:57:40Z".into());
        let starts = [(dep.to_string(), Some(row))];
        let text = restarts(&rows, &starts);
        assert!(text.contains(": 1 run stood on a later start"), "{text}");
        assert!(text.contains("launched at 2026-12-03T22:43:22Z"), "{text}");
        assert!(text.ends_with(": m:q@vllm spider single #4.\n"), "{text}");
        assert_eq!(restarts(&rows[..1], &[]), "");
        // report.html says the same under its cold-start table, a paragraph per line; the
        // interval across two starts of the deployment is there too.
        let mut two = starts.to_vec();
        two.push(("m:q@vllm (start 3)".into(), start(104.5, None)));
        let html = html(&rows, &two).unwrap();
        assert!(
            html.starts_with("<table><thead><tr><th>deployment</th>"),
            "{html}"
        );
        assert!(html.contains("<td>m:q@vllm (start 3)</td><td>"), "{html}");
        assert!(
            html.contains("<p>m:q@vllm: over 2 cold starts, healthy 111.00 ± "),
            "{html}"
        );
        assert!(
            html.contains("<p>m:q@vllm (start 4): 1 run stood on a later start"),
            "{html}"
        );
        assert_eq!(super::html(&rows, &[]), None);
    }

    /// SGLang's starts recorded before its TVM-FFI folder was checked, beside one recorded
    /// after: the note names each set of folders and the rows that checked it.
    #[test]
    fn the_folders_each_start_checked_are_named() {
        let d = "coldstart m:q@sglang";
        let with = |folders: &[&str]| {
            let mut c = start(90.0, Some("v1147"));
            if let Some(c) = c.as_mut() {
                c.compile_caches = Some(
                    folders
                        .iter()
                        .map(|f| crate::engine::caches::CacheState {
                            path: (*f).into(),
                            bytes: 0,
                        })
                        .collect(),
                );
            }
            c
        };
        let old = ["/root/.triton/cache", "/tmp/torchinductor_root"];
        let new = [
            "/root/.cache/tvm-ffi",
            "/root/.triton/cache",
            "/tmp/torchinductor_root",
        ];
        let starts = [
            (format!("{d} (start 2)"), with(&old)),
            (format!("{d} (start 3)"), with(&old)),
            (format!("{d} (start 4)"), with(&new)),
            (format!("{d} (start 1)"), start(70.0, None)),
        ];
        let table = coldstart_section(&starts);
        assert!(
            table.contains("The compile caches were looked for in `/root/.triton/cache`, `/tmp/torchinductor_root` before m:q@sglang (start 2), m:q@sglang (start 3); `/root/.cache/tvm-ffi`, `/root/.triton/cache`, `/tmp/torchinductor_root` before m:q@sglang (start 4) (a cell covers only the folders of its own start)."),
            "{table}"
        );
    }

    /// Cold starts of one deployment on two kernels: the line says so; on one (or recorded
    /// before the host was kept), it does not.
    #[test]
    fn cold_starts_on_several_machines_are_said_to_be() {
        let d = "coldstart m:q@e";
        let two = [
            (format!("{d} (start 1)"), start(70.7, Some("v973"))),
            (format!("{d} (start 2)"), start(85.1, Some("v1147"))),
            (format!("{d} (start 3)"), start(84.9, Some("v1147"))),
        ];
        let line = across_cold_starts(&two);
        assert!(
            line.contains("over 3 cold starts, healthy 80.23 ±"),
            "{line}"
        );
        assert!(
            line.contains("They ran on 2 machines (kernel v973; kernel v1147): the interval holds"),
            "{line}"
        );
        assert!(
            line.contains("healthy per machine: kernel v973: 70.70 s (1 start); kernel v1147: 85.00 ± 1.27 s (2 starts)."),
            "{line}"
        );
        let one = [
            (format!("{d} (start 1)"), start(70.7, Some("v973"))),
            (format!("{d} (start 2)"), start(71.1, Some("v973"))),
        ];
        assert!(!across_cold_starts(&one).contains("machine"));
        // A start recorded before the host was kept may be another machine's: said, not pooled quietly.
        let unknown = [
            (format!("{d} (start 1)"), start(113.4, None)),
            (format!("{d} (start 2)"), start(151.8, Some("v1147"))),
            (format!("{d} (start 3)"), start(45.3, Some("v1147"))),
        ];
        let line = across_cold_starts(&unknown);
        assert!(
            line.contains("1 of them recorded no machine (an earlier bench360) and their finished runs name none or more than one: they may have run on another machine than the rest."),
            "{line}"
        );
        assert!(!line.contains("They ran on"), "{line}");
        let none = [
            (format!("{d} (start 1)"), start(70.7, None)),
            (format!("{d} (start 2)"), start(71.1, None)),
        ];
        assert!(!across_cold_starts(&none).contains("machine"));
    }

    /// Cold starts recorded before their host was kept (the seed study's first holds) take
    /// the host their own runs recorded, so starts on two machines are not pooled quietly; a
    /// start with a host keeps it, and one whose runs recorded none stays without.
    #[test]
    fn a_start_without_a_host_takes_its_runs_host() {
        use crate::report::summary::{Row, RunData};
        let d = "coldstart m:q@e";
        let run = |deployment: &str, kernel: &str| Row {
            data: RunData {
                deployment: deployment.into(),
                provenance: Some(crate::record::provenance::Provenance {
                    host: crate::host::HostInfo {
                        kernel: kernel.into(),
                        ..Default::default()
                    },
                    ..Default::default()
                }),
                ..Default::default()
            },
            ..Default::default()
        };
        let starts = vec![
            (format!("{d} (start 1)"), start(113.4, None)),
            (format!("{d} (start 2)"), start(151.8, Some("v1147"))),
            (format!("{d} (start 3)"), start(45.3, Some("v1147"))),
            (format!("{d} (start 4)"), start(50.0, None)),
        ];
        let rows = [
            run(&format!("{d} (start 1)"), "v973"),
            run(&format!("{d} (start 2)"), "v0"),
        ];
        let filled = with_hosts_of_runs(starts, &rows);
        let kernel = |i: usize| {
            filled[i]
                .1
                .as_ref()
                .unwrap()
                .host
                .as_ref()
                .map(|h| h.kernel.clone())
        };
        assert_eq!(kernel(0).as_deref(), Some("v973"));
        assert_eq!(
            kernel(1).as_deref(),
            Some("v1147"),
            "a recorded host is kept"
        );
        assert_eq!(kernel(3), None, "no run of it recorded one");
        let line = across_cold_starts(&filled);
        assert!(
            line.contains("They ran on 2 machines (kernel v973; kernel v1147)"),
            "{line}"
        );
        assert!(line.contains("1 of them recorded no machine"), "{line}");
    }

    /// Runs of one start that recorded two machines (a later apply started the engine again
    /// elsewhere) do not name the start's machine; two machines with one kernel are named by
    /// what differs between them.
    #[test]
    fn runs_that_disagree_leave_a_start_without_a_host_and_machines_are_named_by_what_differs() {
        use crate::report::summary::{Row, RunData};
        let d = "coldstart m:q@e (start 1)";
        let host = |kernel: &str, cores: usize| crate::host::HostInfo {
            kernel: kernel.into(),
            cores,
            ..Default::default()
        };
        let run = |h: crate::host::HostInfo| Row {
            data: RunData {
                deployment: d.into(),
                provenance: Some(crate::record::provenance::Provenance {
                    host: h,
                    ..Default::default()
                }),
                ..Default::default()
            },
            ..Default::default()
        };
        let filled = with_hosts_of_runs(
            vec![(d.to_string(), start(70.0, None))],
            &[run(host("v973", 16)), run(host("v1147", 16))],
        );
        assert_eq!(filled[0].1.as_ref().unwrap().host, None);
        let two = |cores: usize, healthy_s: f64| {
            let mut c = start(healthy_s, None);
            c.as_mut().unwrap().host = Some(host("v973", cores));
            c
        };
        let line = across_cold_starts(&[
            ("coldstart m:q@e (start 1)".into(), two(16, 70.0)),
            ("coldstart m:q@e (start 2)".into(), two(8, 90.0)),
        ]);
        assert!(
            line.contains("They ran on 2 machines (cores 16; cores 8)"),
            "{line}"
        );
        assert!(line.contains("cores 8: 90.00 s (1 start)"), "{line}");
    }
}
