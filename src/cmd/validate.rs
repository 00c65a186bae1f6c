//! `bench360 validate SWEEP… [--syntax-only]`: every problem of every file at once.

use std::cell::RefCell;
use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

use serde::Serialize;

use super::{plural, Ctx, Outcome, Text};
use crate::{exec, spec, sweep};

#[derive(Debug, Serialize)]
pub(crate) struct Validated {
    pub files: Vec<FileCheck>,
}

#[derive(Debug, Serialize)]
pub(crate) struct FileCheck {
    pub path: PathBuf,
    /// `${VAR}`s unset here (`--syntax-only`: named, not an error).
    pub unset: Vec<String>,
    pub verdict: Verdict,
}

#[derive(Debug, Serialize)]
#[serde(rename_all = "snake_case", tag = "verdict")]
pub(crate) enum Verdict {
    Ok {
        runs: usize,
        deployments: usize,
    },
    /// The sweep file itself: its diagnostics, rendered at their spans.
    Invalid {
        rendered: String,
    },
    /// The files it reads (datasets, traces, scorers, weights), rendered at the sweep's
    /// spans that name them.
    Inputs {
        rendered: String,
    },
}

pub(crate) fn run(ctx: &Ctx, sweeps: &[PathBuf], syntax_only: bool) -> Validated {
    let files = sweeps
        .iter()
        .map(|p| check_one(ctx, p, syntax_only))
        .collect();
    Validated { files }
}

fn check_one(ctx: &Ctx, p: &Path, syntax_only: bool) -> FileCheck {
    // --syntax-only checks a sweep meant for another machine: a variable unset here stands in
    // as `/unset/VAR` and is named, not an error.
    let unset = RefCell::new(BTreeSet::new());
    let env = |k: &str| {
        std::env::var(k).ok().or_else(|| {
            syntax_only.then(|| {
                unset.borrow_mut().insert(k.to_string());
                format!("/unset/{k}")
            })
        })
    };
    let loaded = sweep::load_with_env(p, &env, &ctx.overrides);
    let verdict = match loaded {
        Err(e) => Verdict::Invalid {
            rendered: super::render_error(e.into()),
        },
        Ok((s, _)) if syntax_only => ok(&s),
        Ok((s, _)) => match exec::preflight::check(&s, None) {
            Err(e) => Verdict::Inputs {
                rendered: sweep::diag::render_for_stderr(&e),
            },
            Ok(_) => ok(&s),
        },
    };
    FileCheck {
        path: p.to_path_buf(),
        unset: unset.into_inner().into_iter().collect(),
        verdict,
    }
}

fn ok(s: &spec::Sweep) -> Verdict {
    Verdict::Ok {
        runs: spec::expand::configs(s).len(),
        deployments: spec::expand::deployments(s).len(),
    }
}

impl Outcome for Validated {
    fn exit_code(&self) -> u8 {
        if self
            .files
            .iter()
            .all(|f| matches!(f.verdict, Verdict::Ok { .. }))
        {
            0
        } else {
            2
        }
    }

    fn render(&self, t: &mut Text) {
        for f in &self.files {
            let p = f.path.display();
            if !f.unset.is_empty() {
                let names: Vec<String> = f.unset.iter().map(|v| format!("${{{v}}}")).collect();
                t.err(format!(
                    "note: {p}: not set here (the machine that runs the sweep must set them): {}",
                    names.join(", ")
                ));
            }
            match &f.verdict {
                Verdict::Ok { runs, deployments } => t.out(format!(
                    "{p}: ok ({runs} run{} on {deployments} deployment{})",
                    plural(*runs),
                    plural(*deployments)
                )),
                Verdict::Invalid { rendered } | Verdict::Inputs { rendered } => {
                    t.err.push_str(rendered)
                }
            }
        }
    }
}
