//! The real Slurm: `sbatch`, `squeue`, `sacct` and `scancel`, run as commands (their text
//! output is Slurm's stable interface; no library or REST daemon is needed on the submit host).

use std::collections::BTreeMap;
use std::io::Write;
use std::process::{Command, Stdio};

use super::{JobInfo, Scheduler, SlurmError};

/// The Slurm client commands on `PATH`.
pub(crate) struct SlurmCommands;

fn run(
    cmd: &str,
    args: &[String],
    stdin: Option<&str>,
) -> Result<(bool, String, String), SlurmError> {
    let mut c = Command::new(cmd);
    c.args(args)
        .stdin(if stdin.is_some() {
            Stdio::piped()
        } else {
            Stdio::null()
        })
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    let failed = |what: &'static str| {
        move |source: std::io::Error| SlurmError::Command {
            what,
            cmd: cmd.to_string(),
            source,
        }
    };
    let mut child = c.spawn().map_err(|e| {
        if e.kind() == std::io::ErrorKind::NotFound {
            SlurmError::NotOnPath { cmd: cmd.into() }
        } else {
            failed("cannot run")(e)
        }
    })?;
    if let Some(text) = stdin {
        let mut pipe = child.stdin.take().expect("piped stdin");
        pipe.write_all(text.as_bytes())
            .map_err(failed("cannot write the job script to"))?;
    }
    let out = child
        .wait_with_output()
        .map_err(failed("cannot wait for"))?;
    Ok((
        out.status.success(),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).trim().to_string(),
    ))
}

/// `squeue -o '%i|%T|%r|%N|%S|%e'` lines.
pub(super) fn parse_squeue(text: &str) -> BTreeMap<String, JobInfo> {
    let mut out = BTreeMap::new();
    for line in text.lines() {
        let f: Vec<&str> = line.trim().split('|').collect();
        if f.len() < 2 || f[0].is_empty() {
            continue;
        }
        let opt = |i: usize| {
            f.get(i)
                .map(|s| s.trim())
                .filter(|s| !s.is_empty() && !matches!(*s, "None" | "(null)" | "N/A" | "Unknown"))
                .map(String::from)
        };
        out.insert(
            f[0].to_string(),
            JobInfo {
                state: crate::slurm::JobState::parse(f[1]),
                reason: opt(2),
                node: opt(3),
                start: opt(4),
                end: opt(5),
                exit_code: None,
            },
        );
    }
    out
}

/// `sacct -n -P -o jobid,state,exitcode,nodelist,start,end` lines (job steps skipped; a
/// requeued job's last line wins).
pub(super) fn parse_sacct(text: &str) -> BTreeMap<String, JobInfo> {
    let mut out = BTreeMap::new();
    for line in text.lines() {
        let f: Vec<&str> = line.trim().split('|').collect();
        if f.len() < 3 || f[0].is_empty() || f[0].contains('.') {
            continue;
        }
        let opt = |i: usize| {
            f.get(i)
                .map(|s| s.trim())
                .filter(|s| !s.is_empty() && !matches!(*s, "None" | "None assigned" | "Unknown"))
                .map(String::from)
        };
        out.insert(
            f[0].to_string(),
            JobInfo {
                state: crate::slurm::JobState::parse(f[1]),
                reason: None,
                exit_code: opt(2),
                node: opt(3),
                start: opt(4),
                end: opt(5),
            },
        );
    }
    out
}

impl Scheduler for SlurmCommands {
    fn submit(&self, args: &[String], script: &str) -> Result<String, SlurmError> {
        let mut all = vec!["--parsable".to_string()];
        all.extend(args.iter().cloned());
        let (ok, stdout, stderr) = run("sbatch", &all, Some(script))?;
        // `--parsable` prints `<id>` or `<id>;<cluster>`.
        let id = stdout
            .trim()
            .split(';')
            .next()
            .unwrap_or("")
            .trim()
            .to_string();
        if !ok || id.is_empty() || !id.bytes().all(|b| b.is_ascii_digit()) {
            return Err(SlurmError::Refused {
                cmd: "sbatch",
                refused: "refused the job",
                said: if stderr.is_empty() {
                    stdout.trim().to_string()
                } else {
                    stderr
                },
            });
        }
        Ok(id)
    }

    fn query(&self, ids: &[String]) -> Result<BTreeMap<String, JobInfo>, SlurmError> {
        if ids.is_empty() {
            return Ok(BTreeMap::new());
        }
        let list = ids.join(",");
        let (ok, stdout, stderr) = run(
            "squeue",
            &[
                "-h".into(),
                "-t".into(),
                "all".into(),
                "-j".into(),
                list,
                "-o".into(),
                "%i|%T|%r|%N|%S|%e".into(),
            ],
            None,
        )?;
        // Jobs that all left slurmctld's memory (MinJobAge) make squeue fail with this; any
        // other failure (controller down) must not be mistaken for "no job is queued".
        if !ok && !stderr.contains("Invalid job id") {
            return Err(SlurmError::Refused {
                cmd: "squeue",
                refused: "failed",
                said: stderr,
            });
        }
        let mut found = if ok {
            parse_squeue(&stdout)
        } else {
            BTreeMap::new()
        };
        let missing: Vec<String> = ids
            .iter()
            .filter(|id| !found.contains_key(*id))
            .cloned()
            .collect();
        if !missing.is_empty() {
            // Accounting database first; without one, the job completion log (`-c`).
            for extra in [None, Some("-c")] {
                let mut args: Vec<String> = extra.iter().map(|s| s.to_string()).collect();
                args.extend(
                    [
                        "-n",
                        "-P",
                        "-X",
                        "-j",
                        &missing.join(","),
                        "-o",
                        "jobid,state,exitcode,nodelist,start,end",
                    ]
                    .iter()
                    .map(|s| s.to_string()),
                );
                if extra.is_some() {
                    // The completion log has no allocation/step distinction.
                    args.retain(|a| a != "-X");
                }
                if let Ok((true, stdout, _)) = run("sacct", &args, None) {
                    let got = parse_sacct(&stdout);
                    if !got.is_empty() {
                        for (id, info) in got {
                            if missing.contains(&id) {
                                found.insert(id, info);
                            }
                        }
                        break;
                    }
                }
            }
        }
        Ok(found)
    }

    fn cancel(&self, ids: &[String]) -> Result<(), SlurmError> {
        if ids.is_empty() {
            return Ok(());
        }
        let (ok, _, stderr) = run("scancel", ids, None)?;
        if ok {
            Ok(())
        } else {
            Err(SlurmError::Refused {
                cmd: "scancel",
                refused: "failed",
                said: stderr,
            })
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn squeue_and_sacct_lines_are_read() {
        let q = parse_squeue(
            "12|RUNNING|None|vm|2026-11-29T16:19:34|2026-11-29T17:19:34\n13|PENDING|Dependency||N/A|N/A\n",
        );
        assert_eq!(q["12"].state, crate::slurm::JobState::Running);
        assert_eq!(q["12"].node.as_deref(), Some("vm"));
        assert_eq!(q["12"].reason, None);
        assert_eq!(q["13"].reason.as_deref(), Some("Dependency"));
        assert_eq!(q["13"].start, None);
        let ended =
            parse_squeue("14|FAILED|NonZeroExitCode|vm|2026-11-29T16:19:34|2026-11-29T16:19:35\n");
        assert_eq!(
            super::super::describe(&ended["14"]),
            "FAILED (NonZeroExitCode)"
        );
        let a = parse_sacct(
            "8|FAILED|3:0|vm|2026-11-29T16:19:34|2026-11-29T16:19:35\n8.batch|FAILED|3:0|vm||\n9|CANCELLED by 0|0:15|None assigned|Unknown|Unknown\n",
        );
        assert_eq!(a.len(), 2);
        assert_eq!(a["8"].exit_code.as_deref(), Some("3:0"));
        assert_eq!(a["9"].state, crate::slurm::JobState::Cancelled);
        assert_eq!(a["9"].node, None);
    }
}
