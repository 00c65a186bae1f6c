//! Reason, then answer (`reason N`): the prompt asks the model to think step by step and end
//! with a line `Final answer: …`; the task's own reading is applied to what follows the last
//! such marker, so that an option letter or a number written while reasoning is never read as
//! the answer. N tokens are added to the task's max-tokens for the reasoning
//! ([`crate::spec::expand`]). Text the engine returns apart as `reasoning_content` never
//! reaches a scorer at all: the client keeps only the answer's content as the output.

use std::path::PathBuf;
use std::sync::LazyLock;

use regex::Regex;

use super::{DatasetError, Sample, Score, ScoreError, Task};

/// Appended to every prompt (after the task's `answer-format`).
pub(crate) const INSTRUCTION: &str = "Think it through step by step first. Then write your final answer on its own last line, beginning with \"Final answer:\".";

/// The marker the final answer follows (case-insensitive; a Markdown emphasis around it and a
/// full-width colon are taken too).
static MARKER: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(r"(?i)\**final\s+answer\**\s*(?:[:：]|is\b)\s*\**").expect("valid regex")
});

/// What follows the last `Final answer:` marker, trimmed; None when there is none.
pub(crate) fn final_answer(output: &str) -> Option<&str> {
    let m = MARKER.find_iter(output).last()?;
    Some(output[m.end()..].trim())
}

/// A task whose prompts ask for reasoning first and whose scores read the final answer.
pub(crate) struct Reasoned {
    pub inner: Box<dyn Task>,
    pub budget: u32,
}

impl Task for Reasoned {
    fn files(&self) -> Vec<PathBuf> {
        self.inner.files()
    }

    fn template(&self) -> String {
        format!(
            "{}\nreason/1 budget={} {INSTRUCTION:?}",
            self.inner.template(),
            self.budget
        )
    }

    fn metric(&self) -> String {
        format!("{} final-answer/1", self.inner.metric())
    }

    fn primary(&self) -> &'static str {
        self.inner.primary()
    }

    fn load(&self, seed: u64) -> Result<Vec<Sample>, DatasetError> {
        let mut samples = self.inner.load(seed)?;
        for s in &mut samples {
            s.prompt = format!("{}\n\n{INSTRUCTION}", s.prompt.trim_end());
        }
        Ok(samples)
    }

    fn score(&self, items: &[(&Sample, &str)]) -> Result<Vec<Score>, ScoreError> {
        let finals: Vec<Option<&str>> = items.iter().map(|(_, o)| final_answer(o)).collect();
        let inner: Vec<(&Sample, &str)> = items
            .iter()
            .zip(&finals)
            .map(|((s, _), f)| (*s, f.unwrap_or("")))
            .collect();
        let mut scores = self.inner.score(&inner)?;
        for (s, f) in scores.iter_mut().zip(&finals) {
            if f.is_none() && !s.unscorable {
                // No final answer stated: unparsed, and worth nothing.
                s.parsed = Some(false);
                s.correct = s.correct.map(|_| false);
                s.score = 0.0;
                for v in s.metrics.values_mut() {
                    *v = 0.0;
                }
                s.error
                    .get_or_insert_with(|| "no `Final answer:` line".into());
            }
            s.extracted = s.extracted.take().or_else(|| f.map(str::to_string));
        }
        Ok(scores)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::spec::TaskKind;

    #[test]
    fn the_answer_is_what_follows_the_last_final_answer_marker() {
        assert_eq!(
            final_answer("A looks right, but B is better.\nFinal answer: B"),
            Some("B")
        );
        assert_eq!(
            final_answer("Final answer: A? No.\n**Final Answer:** C"),
            Some("C")
        );
        assert_eq!(final_answer("The final answer is D."), Some("D."));
        assert_eq!(final_answer("A, since B and C are wrong."), None);
    }

    #[test]
    fn letters_written_while_reasoning_are_never_read_as_the_answer() {
        let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("datasets/mmlu");
        let mut def = super::super::tests::def(TaskKind::Mmlu, Some(3));
        def.dataset = crate::spec::Spanned::new(dir.display().to_string(), (0..0).into());
        def.reason = Some(256);
        let sweep_task = Reasoned {
            inner: Box::new(super::super::Builtin { def, dir }),
            budget: 256,
        };
        let samples = sweep_task.load(1).unwrap();
        assert!(samples.iter().all(|s| s.prompt.ends_with(INSTRUCTION)));
        assert!(sweep_task.template().contains("reason/1 budget=256"));
        assert!(sweep_task.metric().ends_with("final-answer/1"));
        let right = &samples[0].reference;
        let wrong = if right == "A" { "B" } else { "A" };
        let reasoned =
            format!("Option {wrong} is tempting. Answer: {wrong}?\nFinal answer: {right}");
        let cut = format!("Option {right} seems right, so the answer is {right}, unless");
        let scores = sweep_task
            .score(&[(&samples[0], &reasoned), (&samples[0], &cut)])
            .unwrap();
        assert_eq!(scores[0].correct, Some(true), "{:?}", scores[0]);
        assert_eq!(scores[0].extracted.as_deref(), Some(right.as_str()));
        // Cut before its final answer: unparsed and wrong, though the letter was there.
        assert_eq!(scores[1].correct, Some(false), "{:?}", scores[1]);
        assert_eq!(scores[1].parsed, Some(false));
        assert_eq!(scores[1].score, 0.0);
    }
}
