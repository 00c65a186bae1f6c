//! What a run's quality figure rests on, said beside it: answers that could not be read
//! (format failures) and answers cut by the token budget. Pure.

use super::Row;

/// How often the token budget cut a run's answers.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub(crate) struct Truncation {
    pub ok: usize,
    /// Successful requests whose `finish_reason` was `length`.
    pub cut: usize,
    /// Scored answers, those cut among them, and the unparsed ones by cause.
    pub scored: usize,
    pub scored_cut: usize,
    pub unparsed_cut: usize,
    pub unparsed_other: usize,
}

/// Above this share of scored answers cut at max-tokens, a run carries a warning.
pub(crate) const CUT_WARNING: f64 = 0.10;

impl Truncation {
    pub fn cut_share(&self) -> Option<f64> {
        (self.ok > 0).then(|| self.cut as f64 / self.ok as f64)
    }

    pub fn of_scored(&self, n: usize) -> Option<f64> {
        (self.scored > 0).then(|| n as f64 / self.scored as f64)
    }
}

/// The warning of a run whose scored answers were often cut at max-tokens.
pub(crate) fn truncation_note(r: &Row) -> Option<String> {
    let t = r.data.truncation?;
    let share = t.of_scored(t.scored_cut)?;
    if share <= CUT_WARNING {
        return None;
    }
    let max_tokens = r.data.columns.as_ref().map(|c| c.max_tokens).unwrap_or(0);
    Some(format!(
        "{}: {:.0}% of scored answers stopped at max-tokens ({max_tokens}){} — its quality mixes what the model knows with whether its answer fits in {max_tokens} tokens; raise the task's `max-tokens` to tell them apart.",
        r.data.label,
        100.0 * share,
        if t.unparsed_cut > 0 {
            format!(
                ", {} of them with no readable answer",
                t.unparsed_cut
            )
        } else {
            String::new()
        }
    ))
}

/// Synthetic prompts checked against the server's own count (`usage.prompt_tokens`).
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub(crate) struct PromptLengths {
    /// Successful requests with a target and the server's count.
    pub checked: usize,
    /// Of them, those whose count is not the target, and the largest difference (count −
    /// target, tokens).
    pub differ: usize,
    pub largest: i64,
}

/// The warning of a synthetic run whose prompts the server counted at another length than
/// they were written for: its lengths are not the sweep's (bench360 sizes them with the
/// engine's tokenizer endpoints, whose count can differ from the one the server bills).
pub(crate) fn prompt_length_note(r: &Row) -> Option<String> {
    let p = r.data.prompt_lengths?;
    (p.differ > 0).then(|| {
        format!(
            "{}: the server counted {} of {} prompts at another length than their target (largest difference {:+} tokens, usage.prompt_tokens vs prompts.jsonl) — its prompt lengths are not the ones the task asked for.",
            r.data.label, p.differ, p.checked, p.largest
        )
    })
}

/// The warning of a run whose engine reported no token usage for some successful requests:
/// their output tokens count as none in its tokens/s and J/token, and they have no TPOT.
pub(crate) fn usage_note(r: &Row) -> Option<String> {
    let s = r.data.stats.as_ref()?;
    (s.usage_missing > 0).then(|| {
        format!(
            "{}: {} of {} successful requests came without the engine's token usage (usage.completion_tokens) — its output tokens/s and J/token count none of their tokens, and they have no TPOT.",
            r.data.label, s.usage_missing, s.ok
        )
    })
}

/// How coarsely a run's engine streamed: over its successful requests of two tokens or more
/// without reasoning, the median of completion tokens per stream event that carried them, and
/// how many came whole in a single event.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub(crate) struct StreamGrain {
    pub checked: usize,
    pub tokens_per_event_p50: f64,
    pub one_event: usize,
}

/// From this many tokens per stream event (median) on, a run's TPOT and ITL time when the
/// tokens arrived, not the engine's decode steps.
pub(crate) const COARSE_STREAM: f64 = 4.0;

impl Row {
    /// The engine streamed [`COARSE_STREAM`] tokens per event or more: the run's TPOT is the
    /// stream's delivery, not the decode, and ranks nothing (objectives, Pareto fronts).
    pub fn coarse_stream(&self) -> bool {
        self.data
            .stream
            .is_some_and(|g| g.tokens_per_event_p50 >= COARSE_STREAM)
    }

    /// TPOT p50 where it times the decode (None for a coarse stream).
    pub fn decode_tpot_p50(&self) -> Option<f64> {
        let p50 = self.data.stats.as_ref()?.tpot_ms.p50;
        p50.filter(|_| !self.coarse_stream())
    }
}

/// The caveat of a run whose engine sent its tokens in few large stream events (LMDeploy under
/// batch load sends a whole answer at once): TPOT and ITL there say how the stream was cut, and
/// the decode time sits in TTFT and E2E.
pub(crate) fn stream_note(r: &Row) -> Option<String> {
    let g = r.data.stream?;
    r.coarse_stream().then(|| {
        format!(
            "{}: the engine streamed {:.1} tokens per event (median; {} of {} requests came whole in one event) — its TPOT and ITL time when tokens arrived, not each decode step, and the decode sits in TTFT and E2E; compare it by tokens/s and E2E.",
            r.data.label, g.tokens_per_event_p50, g.one_event, g.checked
        )
    })
}

/// How a run's quality was read, when it was not from free generated text: `scoring
/// "logprobs"` runs generate one token, so their timing is a prefill's; `constrained` ones were
/// forced to a label.
pub(crate) fn scoring_note(r: &Row) -> Option<String> {
    if r.data.scoring == crate::spec::Scoring::Constrained {
        return Some(format!(
            "{}: answers forced to one option label by the engine's constrained decoding (`scoring \"constrained\"`): no format failures by construction, and the model cannot reason before it answers.",
            r.data.label
        ));
    }
    (r.data.scoring == crate::spec::Scoring::Logprobs).then(|| {
        let ties = match r.data.metrics.get("label_tie") {
            Some(t) if *t > 0.0 => format!(
                " At {:.1}% of answer positions two labels were tied at the engine's precision (bf16 logits tie often): the earlier label was taken, as lm-evaluation-harness's argmax does.",
                100.0 * t
            ),
            _ => String::new(),
        };
        format!(
            "{}: quality read from the options' log-probabilities at the answer position (`scoring \"logprobs\"`; for MMLU, lm-evaluation-harness's prompt), not from generated text; one token per request, so its TTFT is a prefill's and its TPOT, ITL and throughput are not a generation's.{ties}",
            r.data.label
        )
    })
}

/// A run whose model reasoned before answering (text the engine returned apart as
/// `reasoning_content`, never scored): how long the answer took to begin, beside TTFT (which
/// counts the first reasoning token), and how much of the output was reasoning.
pub(crate) fn reasoning_note(r: &Row) -> Option<String> {
    let s = r.data.stats.as_ref()?;
    if s.reasoning_requests == 0 {
        return None;
    }
    let ms = |v: Option<f64>| v.map_or("–".to_string(), |v| format!("{v:.0} ms"));
    let tokens = match s.reasoning_tokens {
        Some(t) if s.output_tokens > 0 => format!(
            "{t} of its {} output tokens were reasoning (as the engine reported them)",
            s.output_tokens
        ),
        _ => "the engine did not report how many output tokens were reasoning".to_string(),
    };
    Some(format!(
        "{}: {} of {} answers came after reasoning the engine returned apart (`reasoning_content`, never scored as the answer). Time to the first answer token p50 {} / p95 {}, against TTFT p50 {} (the first token of any kind); {tokens}. TPOT and throughput count reasoning tokens as output.",
        r.data.label,
        s.reasoning_requests,
        s.ok,
        ms(s.ttfa_ms.p50),
        ms(s.ttfa_ms.p95),
        ms(s.ttft_ms.p50),
    ))
}

/// Where a run's quality is mostly format failures — outputs whose answer could not be read
/// at all (counted as wrong) — a note that says so, with the quality among readable outputs,
/// so that a model that knows the answers but formats them badly is not taken for one that
/// does not. None below 20 % unparsed.
pub(crate) fn format_note(r: &Row) -> Option<String> {
    let unparsed = *r.data.metrics.get("unparsed_rate")?;
    let quality = *r.data.metrics.get("quality")?;
    if unparsed < 0.2 {
        return None;
    }
    let readable = if unparsed < 1.0 {
        format!(
            "; among readable outputs its quality is {:.1}%",
            100.0 * quality / (1.0 - unparsed)
        )
    } else {
        String::new()
    };
    let mostly = if unparsed >= 0.5 {
        "mostly format failures"
    } else {
        "held down by format failures"
    };
    if r.data.scoring == crate::spec::Scoring::Logprobs {
        return Some(format!(
            "{}: quality {:.1}% is {mostly} — at {:.0}% of answer positions no option label was among the {} most likely tokens (scored 0){readable}: the model is not answering with a label there (a chat model without its template, say).",
            r.data.label,
            100.0 * quality,
            100.0 * unparsed,
            crate::spec::LOGPROBS_TOP
        ));
    }
    Some(format!(
        "{}: quality {:.1}% is {mostly} — {:.0}% of outputs had no readable answer (scored 0){readable}. Try the task's `answer-format` or `extract`.",
        r.data.label,
        100.0 * quality,
        100.0 * unparsed
    ))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::record::Columns;

    #[test]
    fn quality_held_down_by_format_failures_is_said_so() {
        let mut r = Row::default();
        r.data.label = "m@e mmlu single".into();
        r.data.metrics.insert("quality".into(), 0.3);
        r.data.metrics.insert("unparsed_rate".into(), 0.6);
        let note = format_note(&r).unwrap();
        assert!(note.contains("mostly format failures"), "{note}");
        assert!(
            note.contains("among readable outputs its quality is 75.0%"),
            "{note}"
        );
        r.data.metrics.insert("unparsed_rate".into(), 0.05);
        assert_eq!(format_note(&r), None);
    }

    #[test]
    fn answers_cut_at_max_tokens_are_counted_apart_and_warned_of() {
        let mut r = Row::default();
        r.data.label = "m@e mmlu c32".into();
        r.data.columns = Some(Columns {
            max_tokens: 16,
            ..Default::default()
        });
        r.data.truncation = Some(Truncation {
            ok: 48,
            cut: 11,
            scored: 48,
            scored_cut: 11,
            unparsed_cut: 11,
            unparsed_other: 0,
        });
        let note = truncation_note(&r).unwrap();
        assert!(
            note.contains("23% of scored answers stopped at max-tokens (16), 11 of them with no readable answer"),
            "{note}"
        );
        let t = r.data.truncation.unwrap();
        assert!((t.cut_share().unwrap() - 11.0 / 48.0).abs() < 1e-12);
        // At or below the stated share: no warning.
        r.data.truncation = Some(Truncation { scored_cut: 4, ..t });
        assert_eq!(truncation_note(&r), None);
    }

    #[test]
    fn a_synthetic_run_whose_prompts_missed_their_target_carries_a_warning() {
        let mut r = Row::default();
        r.data.label = "m:q@e synth batch".into();
        r.data.prompt_lengths = Some(PromptLengths {
            checked: 384,
            differ: 0,
            largest: 0,
        });
        assert_eq!(prompt_length_note(&r), None);
        r.data.prompt_lengths = Some(PromptLengths {
            checked: 384,
            differ: 12,
            largest: -3,
        });
        let note = prompt_length_note(&r).unwrap();
        assert!(
            note.starts_with("m:q@e synth batch: the server counted 12 of 384 prompts"),
            "{note}"
        );
        assert!(note.contains("largest difference -3 tokens"), "{note}");
    }

    #[test]
    fn a_run_streamed_in_large_events_says_its_tpot_times_the_delivery() {
        let mut r = Row::default();
        r.data.label = "m:q@e synth batch".into();
        // A token or two per event: TPOT is the decode's.
        r.data.stream = Some(StreamGrain {
            checked: 300,
            tokens_per_event_p50: 1.4,
            one_event: 0,
        });
        assert_eq!(stream_note(&r), None);
        let mut stats = crate::record::stats::RunStats::default();
        stats.tpot_ms.p50 = Some(1.9);
        r.data.stats = Some(stats);
        assert_eq!(r.decode_tpot_p50(), Some(1.9));
        // LMDeploy under batch load: whole answers in one event.
        r.data.stream = Some(StreamGrain {
            checked: 3712,
            tokens_per_event_p50: 18.0,
            one_event: 3500,
        });
        let note = stream_note(&r).unwrap();
        assert!(
            note.starts_with("m:q@e synth batch: the engine streamed 18.0 tokens per event"),
            "{note}"
        );
        assert!(
            note.contains("3500 of 3712 requests came whole in one event"),
            "{note}"
        );
        // Its TPOT ranks nothing: no objective value, no point on the TPOT front.
        assert_eq!(r.decode_tpot_p50(), None);
    }

    #[test]
    fn requests_without_token_usage_are_said() {
        let mut r = Row::default();
        r.data.label = "m:q@e mmlu single".into();
        assert_eq!(usage_note(&r), None);
        let mut stats = crate::record::stats::RunStats {
            ok: 40,
            ..Default::default()
        };
        r.data.stats = Some(stats.clone());
        assert_eq!(usage_note(&r), None);
        stats.usage_missing = 3;
        r.data.stats = Some(stats);
        assert_eq!(
            usage_note(&r).unwrap(),
            "m:q@e mmlu single: 3 of 40 successful requests came without the engine's token usage (usage.completion_tokens) — its output tokens/s and J/token count none of their tokens, and they have no TPOT."
        );
    }
}
