//! Matrix expansion: the cartesian product of the sweep's axes, in a fixed order, minus the
//! exclude rules. Pure.

use std::collections::BTreeMap;

use serde::Serialize;

use super::{Exclude, Sampling, SaturationSpec, ScenarioSpec, Spanned, Sweep};

/// One concrete scenario: every axis of the declared scenario fixed to one value.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(tag = "kind", rename_all = "kebab-case")]
pub(crate) enum ScenarioInstance {
    Single {
        requests: Option<u64>,
        early_stop: Option<f64>,
    },
    Batch {
        batch_size: u64,
        batches: u64,
    },
    Server {
        users: u64,
        /// Requests per minute per user.
        rate: f64,
        duration_s: f64,
    },
    Rate {
        /// Requests per second in total.
        rate: f64,
        burstiness: f64,
        duration_s: f64,
        ramp_from: Option<f64>,
    },
    Concurrency {
        concurrency: u64,
        requests: Option<u64>,
        early_stop: Option<f64>,
    },
    Offline {
        requests: Option<u64>,
    },
    Replay {
        /// The trace file, resolved against the sweep's folder.
        trace: String,
        speed: f64,
    },
    Saturation(SaturationSpec),
}

/// Number of values of each parameter of a declared scenario (axes have more than one).
fn axis_sizes(spec: &ScenarioSpec) -> Vec<(&'static str, usize)> {
    match spec {
        ScenarioSpec::Single { requests, .. } => vec![("requests", requests.len())],
        ScenarioSpec::Batch {
            batch_size,
            batches,
        } => vec![("batch-size", batch_size.len()), ("batches", batches.len())],
        ScenarioSpec::Server {
            users,
            rate,
            duration_s,
        } => vec![
            ("users", users.len()),
            ("rate", rate.len()),
            ("duration", duration_s.len()),
        ],
        ScenarioSpec::Rate {
            rate,
            burstiness,
            duration_s,
            ..
        } => {
            vec![
                ("rate", rate.len()),
                ("burstiness", burstiness.len()),
                ("duration", duration_s.len()),
            ]
        }
        ScenarioSpec::Concurrency {
            concurrency,
            requests,
            ..
        } => vec![
            ("concurrency", concurrency.len()),
            ("requests", requests.len()),
        ],
        ScenarioSpec::Offline { requests } => vec![("requests", requests.len())],
        ScenarioSpec::Replay { speed, .. } => vec![("speed", speed.len())],
        ScenarioSpec::Saturation(_) => vec![],
    }
}

impl ScenarioInstance {
    pub fn kind(&self) -> &'static str {
        match self {
            ScenarioInstance::Single { .. } => "single",
            ScenarioInstance::Batch { .. } => "batch",
            ScenarioInstance::Server { .. } => "server",
            ScenarioInstance::Rate { .. } => "rate",
            ScenarioInstance::Concurrency { .. } => "concurrency",
            ScenarioInstance::Offline { .. } => "offline",
            ScenarioInstance::Replay { .. } => "replay",
            ScenarioInstance::Saturation(_) => "saturation",
        }
    }

    /// The parameters that vary along axes, for labels ("batch-size=4"), in declared order.
    pub fn axis_params(&self, spec: &ScenarioSpec) -> Vec<(String, String)> {
        let params = self.params();
        axis_sizes(spec)
            .into_iter()
            .filter(|(_, n)| *n > 1)
            .filter_map(|(name, _)| params.get(name).map(|v| (name.to_string(), v.clone())))
            .collect()
    }

    /// Every parameter, for node keys and trace columns.
    pub fn params(&self) -> BTreeMap<String, String> {
        let mut m = BTreeMap::new();
        let mut put = |k: &str, v: String| {
            m.insert(k.to_string(), v);
        };
        match self {
            ScenarioInstance::Single {
                requests,
                early_stop,
            } => {
                put("requests", fmt_opt(requests));
                if let Some(w) = early_stop {
                    put("early-stop", w.to_string());
                }
            }
            ScenarioInstance::Batch {
                batch_size,
                batches,
            } => {
                put("batch-size", batch_size.to_string());
                put("batches", batches.to_string());
            }
            ScenarioInstance::Server {
                users,
                rate,
                duration_s,
            } => {
                put("users", users.to_string());
                put("rate", rate.to_string());
                put("duration", duration_s.to_string());
            }
            ScenarioInstance::Rate {
                rate,
                burstiness,
                duration_s,
                ramp_from,
            } => {
                put("rate", rate.to_string());
                put("burstiness", burstiness.to_string());
                put("duration", duration_s.to_string());
                if let Some(r) = ramp_from {
                    put("ramp-from", r.to_string());
                }
            }
            ScenarioInstance::Concurrency {
                concurrency,
                requests,
                early_stop,
            } => {
                put("concurrency", concurrency.to_string());
                put("requests", fmt_opt(requests));
                if let Some(w) = early_stop {
                    put("early-stop", w.to_string());
                }
            }
            ScenarioInstance::Offline { requests } => put("requests", fmt_opt(requests)),
            ScenarioInstance::Replay { trace, speed } => {
                put("trace", trace.clone());
                put("speed", speed.to_string());
            }
            ScenarioInstance::Saturation(x) => {
                put("start", x.start.to_string());
                put("factor", x.factor.to_string());
                put("max-rate", x.max_rate.to_string());
                put("step-duration", x.step_s.to_string());
                put("precision", x.precision.to_string());
                put("burstiness", x.burstiness.to_string());
                put(
                    "ttft-p95",
                    x.ttft_p95.map_or("none".into(), |v| v.to_string()),
                );
                put(
                    "e2e-p95",
                    x.e2e_p95.map_or("none".into(), |v| v.to_string()),
                );
                put("max-error-rate", x.max_error_rate.to_string());
            }
        }
        m
    }
}

fn fmt_opt(v: &Option<u64>) -> String {
    v.map(|v| v.to_string()).unwrap_or_else(|| "all".into())
}

fn instances(spec: &ScenarioSpec, sweep: &Sweep) -> Vec<ScenarioInstance> {
    let mut out = Vec::new();
    match spec {
        ScenarioSpec::Single {
            requests,
            early_stop,
        } => {
            for r in requests {
                out.push(ScenarioInstance::Single {
                    requests: *r,
                    early_stop: *early_stop,
                });
            }
        }
        ScenarioSpec::Batch {
            batch_size,
            batches,
        } => {
            for b in batch_size {
                for n in batches {
                    out.push(ScenarioInstance::Batch {
                        batch_size: *b,
                        batches: *n,
                    });
                }
            }
        }
        ScenarioSpec::Server {
            users,
            rate,
            duration_s,
        } => {
            for u in users {
                for r in rate {
                    for d in duration_s {
                        out.push(ScenarioInstance::Server {
                            users: *u,
                            rate: *r,
                            duration_s: *d,
                        });
                    }
                }
            }
        }
        ScenarioSpec::Rate {
            rate,
            burstiness,
            duration_s,
            ramp_from,
        } => {
            for r in rate {
                for b in burstiness {
                    for d in duration_s {
                        out.push(ScenarioInstance::Rate {
                            rate: *r,
                            burstiness: *b,
                            duration_s: *d,
                            ramp_from: *ramp_from,
                        });
                    }
                }
            }
        }
        ScenarioSpec::Concurrency {
            concurrency,
            requests,
            early_stop,
        } => {
            for c in concurrency {
                for r in requests {
                    out.push(ScenarioInstance::Concurrency {
                        concurrency: *c,
                        requests: *r,
                        early_stop: *early_stop,
                    });
                }
            }
        }
        ScenarioSpec::Offline { requests } => {
            for r in requests {
                out.push(ScenarioInstance::Offline { requests: *r });
            }
        }
        // The scenario's own thresholds, else the sweep's SLO.
        ScenarioSpec::Saturation(x) => out.push(ScenarioInstance::Saturation(SaturationSpec {
            ttft_p95: x.ttft_p95.or(sweep.slo.ttft_p95),
            e2e_p95: x.e2e_p95.or(sweep.slo.e2e_p95),
            ..x.clone()
        })),
        ScenarioSpec::Replay { trace, speed } => {
            let path = sweep.resolve_path(&trace.value).display().to_string();
            for s in speed {
                out.push(ScenarioInstance::Replay {
                    trace: path.clone(),
                    speed: *s,
                });
            }
        }
    }
    out
}

/// One point of the matrix. Indices point into the sweep's definitions.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Config {
    pub model: usize,
    pub variant: usize,
    pub engine: usize,
    pub task: usize,
    pub scenario: usize,
    pub instance: ScenarioInstance,
    pub sampling: Sampling,
    pub repeat: u32,
    /// The cold start this configuration runs on: its repeat with `cold-repeats`, else 0.
    pub start: u32,
}

/// The engine + model + quantization a config runs on.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub(crate) struct DeploymentRef {
    pub model: usize,
    pub variant: usize,
    pub engine: usize,
    /// Which cold start of it (`cold-repeats`: the repeat index; else 0).
    pub start: u32,
}

impl Config {
    pub fn deployment(&self) -> DeploymentRef {
        DeploymentRef {
            model: self.model,
            variant: self.variant,
            engine: self.engine,
            start: self.start,
        }
    }

    /// Value of a matrix axis, as `exclude` rules name it.
    fn axis(&self, sweep: &Sweep, axis: &str) -> String {
        match axis {
            "model" => sweep.models[self.model].name.value.clone(),
            "quantization" => sweep.models[self.model].variants[self.variant]
                .quantization
                .value
                .clone(),
            "engine" => sweep.engines[self.engine].name.value.clone(),
            a if super::ENGINE_AXES.contains(&a) => sweep.engines[self.engine].setting(a),
            "task" => sweep.tasks[self.task].name.value.clone(),
            "scenario" => sweep.scenarios[self.scenario].name.value.clone(),
            "max-tokens" => self.sampling.max_tokens.to_string(),
            "temperature" => self.sampling.temperature.to_string(),
            "top-p" => self.sampling.top_p.to_string(),
            other => unreachable!("exclude axis `{other}` validated by the resolver"),
        }
    }
}

impl Config {
    /// Whether an `exclude` condition holds: an engine block's name names all its
    /// combinations; numbers compare as numbers.
    fn matches(&self, sweep: &Sweep, axis: &str, value: &str) -> bool {
        match axis {
            "engine" => sweep.engines[self.engine].named(value),
            _ => same_value(&self.axis(sweep, axis), value),
        }
    }
}

fn same_value(a: &str, b: &str) -> bool {
    match (a.parse::<f64>(), b.parse::<f64>()) {
        (Ok(x), Ok(y)) => x == y,
        _ => a == b,
    }
}

fn selected<T>(named: &[Spanned<String>], all: &[T], name: impl Fn(&T) -> &str) -> Vec<usize> {
    if named.is_empty() {
        (0..all.len()).collect()
    } else {
        named
            .iter()
            .filter_map(|n| all.iter().position(|x| name(x) == n.value))
            .collect()
    }
}

fn or_default<T: Clone>(axis: &[T], default: T) -> Vec<T> {
    if axis.is_empty() {
        vec![default]
    } else {
        axis.to_vec()
    }
}

fn expand_all(sweep: &Sweep, apply_excludes: bool) -> Vec<Config> {
    let m = &sweep.matrix;
    let d = &sweep.defaults.sampling;
    let models = selected(&m.models, &sweep.models, |x| &x.name.value);
    // An engine block's name selects every combination of its setting axes.
    let engines: Vec<usize> = (0..sweep.engines.len())
        .filter(|&i| {
            m.engines.is_empty() || m.engines.iter().any(|n| sweep.engines[i].named(&n.value))
        })
        .collect();
    let tasks = selected(&m.tasks, &sweep.tasks, |x| &x.name.value);
    let scenarios = selected(&m.scenarios, &sweep.scenarios, |x| &x.name.value);
    let max_tokens = or_default(&m.max_tokens, d.max_tokens);
    let temperature = or_default(&m.temperature, d.temperature);
    let top_p = or_default(&m.top_p, d.top_p);
    let mut out = Vec::new();
    for &model in &models {
        let variants = &sweep.models[model].variants;
        for (variant, v) in variants.iter().enumerate() {
            if !m.quantizations.is_empty()
                && !m
                    .quantizations
                    .iter()
                    .any(|q| q.value == v.quantization.value)
            {
                continue;
            }
            for &engine in &engines {
                for &task in &tasks {
                    // A task's own max-tokens and stop replace the sweep's.
                    let t_def = &sweep.tasks[task];
                    // `reason N`: N more tokens for the reasoning before the answer.
                    let max_tokens: Vec<u32> = match t_def.max_tokens {
                        Some(x) => vec![x],
                        None => max_tokens.clone(),
                    }
                    .into_iter()
                    .map(|m| m.saturating_add(t_def.reason.unwrap_or(0)))
                    .collect();
                    let stop = if t_def.stop.is_empty() {
                        d.stop.clone()
                    } else {
                        t_def.stop.clone()
                    };
                    // Logprobs scoring asks for the answer position's top log-probabilities.
                    let mut extra_body = d.extra_body.clone();
                    match t_def.scoring {
                        crate::spec::Scoring::Logprobs => {
                            extra_body.insert(
                                "logprobs".into(),
                                serde_json::json!(crate::spec::LOGPROBS_TOP),
                            );
                        }
                        // The engine's own form of "one of the labels" (refused at resolve
                        // time where it has none).
                        crate::spec::Scoring::Constrained => {
                            if let Some(c) = sweep.engines[engine].catalog.choice_constraint {
                                // A custom task's declared options, else MMLU's labels.
                                let custom: Vec<&str> = t_def
                                    .custom
                                    .iter()
                                    .flat_map(|c| c.choices.iter().map(String::as_str))
                                    .collect();
                                let choices = if custom.is_empty() {
                                    crate::spec::CHOICE_LABELS
                                } else {
                                    &custom
                                };
                                let (k, v) = c.field(choices);
                                extra_body.insert(k.into(), v);
                            }
                        }
                        crate::spec::Scoring::Generative => {}
                    }
                    for &scenario in &scenarios {
                        let repeats = sweep.scenarios[scenario].repeats(sweep.repeats);
                        for instance in instances(&sweep.scenarios[scenario].spec, sweep) {
                            for &mt in &max_tokens {
                                for &t in &temperature {
                                    for &p in &top_p {
                                        for repeat in 0..repeats {
                                            if !m.repeats.is_empty() && !m.repeats.contains(&repeat)
                                            {
                                                continue;
                                            }
                                            let cfg = Config {
                                                model,
                                                variant,
                                                engine,
                                                task,
                                                scenario,
                                                instance: instance.clone(),
                                                sampling: Sampling {
                                                    max_tokens: mt,
                                                    temperature: t,
                                                    top_p: p,
                                                    stop: stop.clone(),
                                                    extra_body: extra_body.clone(),
                                                    ignore_eos: t_def
                                                        .ignore_eos
                                                        .unwrap_or(d.ignore_eos),
                                                    ..d.clone()
                                                },
                                                repeat,
                                                start: if sweep.cold_repeats { repeat } else { 0 },
                                            };
                                            let excluded = apply_excludes
                                                && m.excludes.iter().any(|e| {
                                                    e.conditions.iter().all(|(axis, value)| {
                                                        cfg.matches(sweep, axis, value)
                                                    })
                                                });
                                            if !excluded {
                                                out.push(cfg);
                                            }
                                        }
                                    }
                                }
                            }
                        }
                    }
                }
            }
        }
    }
    out
}

/// Whether an exclude rule removes at least one configuration of the full matrix.
pub(crate) fn exclude_matches(sweep: &Sweep, e: &Exclude) -> bool {
    expand_all(sweep, false).iter().any(|cfg| {
        e.conditions
            .iter()
            .all(|(axis, value)| cfg.matches(sweep, axis, value))
    })
}

/// The matrix, in its fixed order: model → quantization → engine → task → scenario →
/// scenario axes (as declared) → max-tokens → temperature → top-p → repeat.
pub(crate) fn configs(sweep: &Sweep) -> Vec<Config> {
    expand_all(sweep, true)
}

/// Distinct deployments of the (excluded-filtered) matrix, in order of first appearance.
pub(crate) fn deployments(sweep: &Sweep) -> Vec<DeploymentRef> {
    let mut out: Vec<DeploymentRef> = Vec::new();
    for c in expand_all(sweep, true) {
        let d = c.deployment();
        if !out.contains(&d) {
            out.push(d);
        }
    }
    out
}
