//! How much of a run's prompts the engine did not compute: the tokens its prefix cache served,
//! read from the engine's own counter over the run's window. A run that sends prompts the
//! engine has already seen — the same items after a quality pass, the same synthetic prompts in
//! the next scenario on the same start, a repeat — measures a cache hit's TTFT, not a prefill,
//! and an engine without a prefix cache (LMDeploy's default) computes every token of the same
//! requests. The share is said beside the run so that the two are not compared quietly. Pure.

use super::Row;

/// The engines' counters of prompt tokens served from their prefix cache, in order of
/// preference (the first one the run's scrapes hold is read). Each counts tokens, summed over
/// its label sets; llama.cpp's `prompt_tokens_total` leaves these out, the others' count them,
/// so the share is taken against the requests' own prompt tokens (`usage.prompt_tokens`).
pub(crate) const CACHED_COUNTERS: &[&str] = &[
    "vllm:prompt_tokens_cached_total",
    "vllm:prefix_cache_hits_total",
    "sglang:cached_tokens_total",
    "llamacpp:prompt_tokens_cached_total",
    "lmdeploy:cached_tokens_total",
];

/// A run's prompt tokens and those its engine's prefix cache served.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) struct PrefixCache {
    /// The counter's increase over the window (the last scrape at or before its start to the
    /// first at or after its end).
    pub cached: f64,
    /// The prompt tokens of the window's requests as the server counted them.
    pub prompt: f64,
    pub counter: &'static str,
    /// The run's requests and the distinct prompts (sample ids) among them: a prompt sent
    /// again within the run is a hit whatever the task does between runs.
    pub requests: usize,
    pub distinct: usize,
}

impl PrefixCache {
    pub fn share(&self) -> f64 {
        self.cached / self.prompt
    }

    /// How many times the run sent each of its distinct prompts, on average.
    pub fn sends_per_prompt(&self) -> Option<f64> {
        (self.distinct > 0).then(|| self.requests as f64 / self.distinct as f64)
    }
}

/// From this many sends per distinct prompt on, the note says that the run repeated itself.
pub(crate) const REPEATED_PROMPTS: f64 = 1.1;

/// From this share of prompt tokens served by the cache on, a run carries a note.
pub(crate) const PREFIX_CACHE_NOTE: f64 = 0.20;

/// The prefix cache's part of a run: `scrapes` are the engine's Prometheus samples (time on the
/// run's clock in ns, metric name, value; one row per label set), `window` the run's (first
/// request scheduled, last request ended, ns), `prompt` the requests' prompt tokens. None when
/// the engine exposes no such counter, no scrape brackets the window, or no prompt was counted.
pub(crate) fn prefix_cache(
    scrapes: &[(f64, &str, f64)],
    window: (f64, f64),
    prompt: f64,
    sent: (usize, usize),
) -> Option<PrefixCache> {
    if prompt <= 0.0 {
        return None;
    }
    let counter = CACHED_COUNTERS
        .iter()
        .find(|c| scrapes.iter().any(|(_, m, _)| m == *c))?;
    // Per scrape time, the counter summed over its label sets.
    let mut series: Vec<(f64, f64)> = Vec::new();
    let mut rows: Vec<(f64, f64)> = scrapes
        .iter()
        .filter(|(_, m, _)| m == counter)
        .map(|(t, _, v)| (*t, *v))
        .collect();
    rows.sort_by(|a, b| a.0.total_cmp(&b.0));
    for (t, v) in rows {
        match series.last_mut() {
            Some((lt, lv)) if *lt == t => *lv += v,
            _ => series.push((t, v)),
        }
    }
    let before = series.iter().rev().find(|(t, _)| *t <= window.0)?.1;
    let after = series.iter().find(|(t, _)| *t >= window.1)?.1;
    // A counter that went down was reset (the engine restarted): nothing to read.
    (after >= before).then_some(PrefixCache {
        cached: after - before,
        prompt,
        counter,
        requests: sent.0,
        distinct: sent.1,
    })
}

/// The note of a run whose engine served much of its prompts from its prefix cache.
pub(crate) fn prefix_cache_note(r: &Row) -> Option<String> {
    let p = r.data.prefix_cache?;
    (p.share() >= PREFIX_CACHE_NOTE).then(|| {
        let repeats = match p.sends_per_prompt() {
            Some(x) if x >= REPEATED_PROMPTS => format!(
                " It sent each of its {} distinct prompts {x:.1} times on average: a prompt sent again within the run is a hit whatever `fresh-prompts` says; a task with as many `samples` as the run sends requests sends each once.",
                p.distinct
            ),
            _ => String::new(),
        };
        format!(
            "{}: {:.1}% of its {:.0} prompt tokens came from the engine's prefix cache ({}) — its TTFT and prefill energy are a warm cache's: prefixes its prompts share (a schema, a context, an instruction) or prompts sent before on this start (the items again, an earlier scenario's synthetic prompts, a repeat); compare its TTFT only with runs whose `prefix_cache_share` is alike.{repeats}",
            r.data.label,
            100.0 * p.share(),
            p.prompt,
            p.counter
        )
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_counter_is_read_over_the_window_summed_over_label_sets() {
        let s = [
            (0.0, "sglang:cached_tokens_total", 100.0),
            (0.0, "sglang:cached_tokens_total", 5.0),
            (10.0, "sglang:cached_tokens_total", 150.0),
            (10.0, "sglang:cached_tokens_total", 5.0),
            (20.0, "sglang:cached_tokens_total", 400.0),
            (20.0, "sglang:cached_tokens_total", 5.0),
            (30.0, "sglang:cached_tokens_total", 900.0),
            (30.0, "sglang:cached_tokens_total", 5.0),
            (10.0, "sglang:prompt_tokens_total", 1e6),
        ];
        // The last scrape at or before the start (10: 155), the first at or after the end (30).
        let p = prefix_cache(&s, (12.0, 25.0), 1000.0, (4, 4)).unwrap();
        assert_eq!(p.cached, 905.0 - 155.0);
        assert_eq!(p.counter, "sglang:cached_tokens_total");
        assert_eq!(p.share(), 0.75);
        // A scrape exactly at the window's edges is its own bracket.
        assert_eq!(
            prefix_cache(&s, (10.0, 20.0), 1000.0, (4, 4))
                .unwrap()
                .cached,
            250.0
        );
    }

    #[test]
    fn no_counter_no_bracket_or_a_reset_reads_nothing() {
        let s = [
            (0.0, "llamacpp:prompt_tokens_total", 10.0),
            (9.0, "llamacpp:prompt_tokens_total", 20.0),
        ];
        assert_eq!(prefix_cache(&s, (1.0, 8.0), 100.0, (4, 4)), None);
        let s = [
            (5.0, "lmdeploy:cached_tokens_total", 0.0),
            (9.0, "lmdeploy:cached_tokens_total", 0.0),
        ];
        // The window starts before the first scrape.
        assert_eq!(prefix_cache(&s, (1.0, 8.0), 100.0, (4, 4)), None);
        let p = prefix_cache(&s, (5.0, 8.0), 100.0, (4, 4)).unwrap();
        assert_eq!((p.cached, p.share()), (0.0, 0.0));
        assert_eq!(prefix_cache(&s, (5.0, 8.0), 0.0, (4, 4)), None);
        let reset = [
            (0.0, "vllm:prompt_tokens_cached_total", 50.0),
            (9.0, "vllm:prompt_tokens_cached_total", 3.0),
        ];
        assert_eq!(prefix_cache(&reset, (1.0, 8.0), 100.0, (4, 4)), None);
    }

    #[test]
    fn the_note_says_the_share_and_a_run_that_repeated_its_prompts() {
        let mut r = Row::default();
        r.data.label = "m:q@e synth batch".into();
        let p = PrefixCache {
            cached: 950.0,
            prompt: 1000.0,
            counter: "vllm:prompt_tokens_cached_total",
            requests: 400,
            distinct: 100,
        };
        r.data.prefix_cache = Some(p);
        let note = prefix_cache_note(&r).unwrap();
        assert!(note.starts_with("m:q@e synth batch: 95.0% of its 1000 prompt tokens came from the engine's prefix cache (vllm:prompt_tokens_cached_total)"), "{note}");
        assert!(
            note.contains("sent each of its 100 distinct prompts 4.0 times"),
            "{note}"
        );
        r.data.prefix_cache = Some(PrefixCache { requests: 100, ..p });
        assert!(!prefix_cache_note(&r).unwrap().contains("distinct"));
        r.data.prefix_cache = Some(PrefixCache { cached: 150.0, ..p });
        assert_eq!(prefix_cache_note(&r), None);
    }

    #[test]
    fn vllm_cached_prompt_tokens_come_before_its_older_hit_counter() {
        let s = [
            (0.0, "vllm:prefix_cache_hits_total", 0.0),
            (0.0, "vllm:prompt_tokens_cached_total", 0.0),
            (9.0, "vllm:prefix_cache_hits_total", 64.0),
            (9.0, "vllm:prompt_tokens_cached_total", 48.0),
        ];
        let p = prefix_cache(&s, (1.0, 8.0), 96.0, (4, 4)).unwrap();
        assert_eq!(
            (p.counter, p.cached),
            ("vllm:prompt_tokens_cached_total", 48.0)
        );
    }
}
