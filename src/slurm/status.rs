//! Waiting on, describing, cancelling jobs and the status table (see the parent module).

use super::*;

/// Polls until none of `jobs` is queued or running; says each change of state. Returns the
/// last known state of each.
pub(crate) fn wait(
    sched: &dyn Scheduler,
    jobs: &[(String, String)],
    poll: std::time::Duration,
    say: &mut dyn FnMut(&str),
) -> BTreeMap<String, JobInfo> {
    let ids: Vec<String> = jobs.iter().map(|j| j.0.clone()).collect();
    let mut last: BTreeMap<String, JobInfo> = BTreeMap::new();
    let mut failures = 0;
    loop {
        match sched.query(&ids) {
            Ok(now) => {
                failures = 0;
                for (id, what) in jobs {
                    let Some(info) = now.get(id) else { continue };
                    if last.get(id).map(|l| &l.state) != Some(&info.state) {
                        say(&format!("job {id} ({what}): {}", describe(info)));
                    }
                    last.insert(id.clone(), info.clone());
                }
                // A job Slurm no longer knows at all has left the queue too.
                if !ids
                    .iter()
                    .any(|id| now.get(id).is_some_and(JobInfo::is_active))
                {
                    return last;
                }
            }
            Err(e) => {
                failures += 1;
                // slurmctld restarts and failovers answer nothing for a while: keep waiting.
                if failures == 1 || failures % 30 == 0 {
                    say(&format!("cannot ask Slurm ({e}); still waiting"));
                }
            }
        }
        std::thread::sleep(poll);
    }
}

/// `RUNNING on node01 since …`, `PENDING (Resources)`, `FAILED (exit 1:0)`.
pub(crate) fn describe(info: &JobInfo) -> String {
    let mut s = info.state.to_string();
    if info.state == JobState::Pending {
        if let Some(r) = &info.reason {
            s.push_str(&format!(" ({r})"));
        }
    } else if info.state.is_running() {
        if let Some(n) = &info.node {
            s.push_str(&format!(" on {n}"));
        }
        if let Some(t) = &info.start {
            s.push_str(&format!(" since {t}"));
        }
    } else if let Some(x) = info.exit_code.as_ref().filter(|x| *x != "0:0") {
        s.push_str(&format!(" (exit {x})"));
    } else if let Some(r) = &info.reason {
        // squeue's reason for an ended job: NonZeroExitCode, TimeLimit, OutOfMemory…
        s.push_str(&format!(" ({r})"));
    }
    s
}

/// Cancels the sweep's recorded jobs that are queued or running: (id, what, state before).
pub(crate) fn cancel(
    store: &Store,
    sweep: &str,
    sched: &dyn Scheduler,
    say: &mut dyn FnMut(&str),
) -> Result<Vec<(String, String, String)>, SlurmError> {
    let dir = SweepDir::new(store, sweep);
    if !dir.root().is_dir() {
        return Ok(Vec::new());
    }
    let _lock = dir.lock(say)?;
    let records = dir.records();
    let ids: Vec<String> = records.iter().map(|r| r.job_id.clone()).collect();
    let states = sched.query(&ids)?;
    let live: Vec<(String, String, String)> = records
        .iter()
        .filter_map(|r| {
            let info = states.get(&r.job_id).filter(|i| i.is_active())?;
            Some((r.job_id.clone(), r.what.clone(), info.state.to_string()))
        })
        .collect();
    let ids: Vec<String> = live.iter().map(|l| l.0.clone()).collect();
    sched.cancel(&ids)?;
    Ok(live)
}

/// Per deployment: label, key, cache state, Slurm state; then the report. For `status SWEEP`.
pub(crate) fn status_table(
    store: &Store,
    plan: &Plan,
    status: &[Status],
    sched: &dyn Scheduler,
) -> String {
    let dir = SweepDir::new(store, &plan.sweep);
    let records = dir.records();
    let ids: Vec<String> = records.iter().map(|r| r.job_id.clone()).collect();
    let (states, slurm_error) = match sched.query(&ids) {
        Ok(s) => (s, None),
        Err(e) => (BTreeMap::new(), Some(e)),
    };
    let job = |rec: Option<JobRecord>| -> String {
        let Some(r) = rec else {
            return "no job".into();
        };
        let mut s = format!("job {} ", r.job_id);
        match states.get(&r.job_id) {
            Some(info) => {
                s.push_str(&describe(info));
                if !info.is_active() && info.state != JobState::Completed && r.log.exists() {
                    s.push_str(&format!(": log {}", r.log.display()));
                }
            }
            None if slurm_error.is_some() => s.push_str("(Slurm not reachable)"),
            None => {
                // Slurm forgot it; its own record may say how it ended.
                match dir.run(&r.job_id) {
                    Some(run) => s.push_str(&match run.exit_code {
                        Some(0) => "ended (exit 0)".to_string(),
                        Some(c) => format!("ended (exit {c}): log {}", r.log.display()),
                        None => format!("ended without finishing: log {}", r.log.display()),
                    }),
                    None => s.push_str("unknown to Slurm"),
                }
            }
        }
        s
    };
    let mut rows: Vec<[String; 4]> = vec![[
        "deployment".into(),
        "key".into(),
        "cache".into(),
        "slurm".into(),
    ]];
    for (d, dep) in plan.deployments.iter().enumerate() {
        let nodes: Vec<_> = plan
            .deployment_nodes(d)
            .into_iter()
            .filter(|&i| plan.graph[i].kind != NodeKind::Warmup)
            .collect();
        let (mut cached, mut to_run, mut blocked, mut failed, mut interrupted) = (0, 0, 0, 0, 0);
        for &i in &nodes {
            match &status[i.index()] {
                Status::Cached => cached += 1,
                Status::Blocked { .. } => blocked += 1,
                Status::WillRun { why } => {
                    to_run += 1;
                    match why {
                        Why::FailedLastTime(_) => failed += 1,
                        Why::Interrupted => interrupted += 1,
                        _ => {}
                    }
                }
                Status::Skipped => {}
            }
        }
        let record = dir.deployment(&dep.label);
        // A `started` record of a deployment whose job runs is in progress, not interrupted.
        let running = record
            .as_ref()
            .and_then(|r| states.get(&r.job_id))
            .is_some_and(|i| i.state == JobState::Running);
        let mut cache = format!("{cached}/{} cached", nodes.len());
        if to_run > 0 {
            let mut why = Vec::new();
            if failed > 0 {
                why.push(format!("{failed} failed"));
            }
            if interrupted > 0 {
                why.push(format!(
                    "{interrupted} {}",
                    if running { "running" } else { "interrupted" }
                ));
            }
            cache.push_str(&format!(", {to_run} to run"));
            if !why.is_empty() {
                cache.push_str(&format!(" ({})", why.join(", ")));
            }
        }
        if blocked > 0 {
            cache.push_str(&format!(", {blocked} blocked"));
        }
        rows.push([
            dep.label.clone(),
            plan.graph[dep.coldstart].key[..12].to_string(),
            cache,
            job(record),
        ]);
    }
    rows.push([
        "report".into(),
        plan.graph[plan.report].key[..12].to_string(),
        match &status[plan.report.index()] {
            Status::Cached => "cached".into(),
            _ => "to run".into(),
        },
        job(dir.report()),
    ]);
    let w: Vec<usize> = (0..3)
        .map(|c| rows.iter().map(|r| r[c].chars().count()).max().unwrap_or(0))
        .collect();
    let mut out = String::new();
    for r in &rows {
        let line = if records.is_empty() {
            // Never submitted to Slurm: the cache side only.
            format!(
                "{:<w0$}  {:<w1$}  {}",
                r[0],
                r[1],
                r[2],
                w0 = w[0],
                w1 = w[1]
            )
        } else {
            format!(
                "{:<w0$}  {:<w1$}  {:<w2$}  {}",
                r[0],
                r[1],
                r[2],
                r[3],
                w0 = w[0],
                w1 = w[1],
                w2 = w[2]
            )
        };
        out.push_str(line.trim_end());
        out.push('\n');
    }
    if let Some(e) = slurm_error {
        out.push_str(&format!("(cannot ask Slurm: {e})\n"));
    }
    out
}
