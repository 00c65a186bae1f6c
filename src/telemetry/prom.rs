//! Prometheus text exposition format: a parser, and the mapping from each engine's metric
//! names to requests running / waiting and KV-cache usage. Pure.

pub(crate) use crate::record::PromSample;

/// Parses the text format (comments, labels with escaped quotes, optional timestamps, NaN and
/// ±Inf). Lines that do not parse are skipped: a scrape is data, not configuration.
pub(crate) fn parse(text: &str) -> Vec<PromSample> {
    let mut out = Vec::new();
    for line in text.lines() {
        let line = line.trim();
        if line.is_empty() || line.starts_with('#') {
            continue;
        }
        let (name, rest) = match line.find(['{', ' ', '\t']) {
            Some(i) => (&line[..i], &line[i..]),
            None => continue,
        };
        let (labels, rest) = if let Some(body) = rest.strip_prefix('{') {
            // Find the closing brace outside quoted values.
            let mut in_quotes = false;
            let mut escaped = false;
            let mut end = None;
            for (i, c) in body.char_indices() {
                match c {
                    _ if escaped => escaped = false,
                    '\\' => escaped = true,
                    '"' => in_quotes = !in_quotes,
                    '}' if !in_quotes => {
                        end = Some(i);
                        break;
                    }
                    _ => {}
                }
            }
            let Some(end) = end else { continue };
            (
                body[..end].trim_end_matches(',').to_string(),
                &body[end + 1..],
            )
        } else {
            (String::new(), rest)
        };
        let Some(value) = rest.split_whitespace().next() else {
            continue;
        };
        let value = match value {
            "NaN" => f64::NAN,
            "+Inf" | "Inf" => f64::INFINITY,
            "-Inf" => f64::NEG_INFINITY,
            v => match v.parse::<f64>() {
                Ok(x) => x,
                Err(_) => continue,
            },
        };
        out.push(PromSample {
            name: name.to_string(),
            labels,
            value,
        });
    }
    out
}

/// What bench360 reads out of an engine's metrics.
#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub(crate) struct EngineGauges {
    pub running: Option<f64>,
    pub waiting: Option<f64>,
    /// KV-cache usage in percent.
    pub kv_cache_pct: Option<f64>,
}

/// Metric names per engine (llama.cpp, vLLM, SGLang, TGI) and the factor to the unit used.
const RUNNING: &[(&str, f64)] = &[
    ("llamacpp:requests_processing", 1.0),
    ("vllm:num_requests_running", 1.0),
    ("sglang:num_running_reqs", 1.0),
    ("lmdeploy:num_requests_running", 1.0),
    ("tgi_batch_current_size", 1.0),
];
const WAITING: &[(&str, f64)] = &[
    ("llamacpp:requests_deferred", 1.0),
    ("vllm:num_requests_waiting", 1.0),
    ("sglang:num_queue_reqs", 1.0),
    ("lmdeploy:num_requests_waiting", 1.0),
    ("tgi_queue_size", 1.0),
];
/// All of these are fractions in [0, 1] (vLLM's `_perc` names included).
const KV_CACHE: &[(&str, f64)] = &[
    ("llamacpp:kv_cache_usage_ratio", 100.0),
    ("vllm:kv_cache_usage_perc", 100.0),
    ("vllm:gpu_cache_usage_perc", 100.0),
    ("sglang:token_usage", 100.0),
    ("lmdeploy:gpu_cache_usage_perc", 100.0),
];

fn pick(
    samples: &[PromSample],
    names: &[(&str, f64)],
    combine: fn(f64, f64) -> f64,
) -> Option<f64> {
    for (name, factor) in names {
        let vals: Vec<f64> = samples
            .iter()
            .filter(|s| s.name == *name && s.value.is_finite())
            .map(|s| s.value * factor)
            .collect();
        if let Some(first) = vals.first() {
            return Some(vals[1..].iter().fold(*first, |a, b| combine(a, *b)));
        }
    }
    None
}

pub(crate) fn gauges(samples: &[PromSample]) -> EngineGauges {
    EngineGauges {
        // Several label sets (one per model or engine rank) add up; KV usage takes the fullest.
        running: pick(samples, RUNNING, |a, b| a + b),
        waiting: pick(samples, WAITING, |a, b| a + b),
        kv_cache_pct: pick(samples, KV_CACHE, f64::max),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_real_llama_server_metrics() {
        let text = include_str!("../../tests/fixtures/metrics/llama-server-0.3.36.txt");
        let s = parse(text);
        assert_eq!(s.len(), 15);
        let get = |n: &str| s.iter().find(|x| x.name == n).map(|x| x.value);
        assert_eq!(get("llamacpp:tokens_predicted_total"), Some(5.0));
        assert_eq!(get("llamacpp:prompt_tokens_seconds"), Some(89.4614));
        let g = gauges(&s);
        assert_eq!(
            (g.running, g.waiting, g.kv_cache_pct),
            (Some(0.0), Some(0.0), None)
        );
    }

    #[test]
    fn parses_labels_timestamps_and_special_values() {
        let text = r#"
# TYPE vllm:num_requests_running gauge
vllm:num_requests_running{engine="0",model_name="m"} 3.0
vllm:num_requests_running{engine="1",model_name="m"} 2.0 1712345678000
vllm:num_requests_waiting{model_name="a \"quoted\" } name"} 7
vllm:gpu_cache_usage_perc{model_name="m"} 0.25
odd_metric NaN
broken{ 1
"#;
        let s = parse(text);
        assert_eq!(s.len(), 5);
        assert_eq!(s[2].labels, r#"model_name="a \"quoted\" } name""#);
        assert!(s[4].value.is_nan());
        let g = gauges(&s);
        assert_eq!(
            (g.running, g.waiting, g.kv_cache_pct),
            (Some(5.0), Some(7.0), Some(25.0))
        );
    }
}
