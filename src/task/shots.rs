//! Few-shot examples: which items are shown (never the item itself) and how they are put
//! before the question — inside one prompt, or as earlier chat turns.

use crate::record::rng::SplitMix64;

/// Few-shot examples for item `item`: drawn (seeded by the item's id) from the dataset's
/// items that are not evaluated, or — when every item is evaluated — from the others; never
/// the item itself.
pub(crate) fn shot_indices(
    len: usize,
    evaluated: &[usize],
    item: usize,
    shots: u32,
    seed: u64,
    id: &str,
) -> Vec<usize> {
    if shots == 0 {
        return Vec::new();
    }
    let taken: std::collections::HashSet<usize> = evaluated.iter().copied().collect();
    let mut pool: Vec<usize> = (0..len).filter(|i| !taken.contains(i)).collect();
    if pool.len() < shots as usize {
        pool = (0..len).filter(|&i| i != item).collect();
    }
    SplitMix64::derive(seed, &format!("shots/{id}")).shuffle(&mut pool);
    pool.truncate(shots as usize);
    pool
}

/// The K-shot examples of one item, put before its question in one prompt (each
/// `{example} {answer}` and a blank line) or, with `fewshot-as-turns`, sent as earlier chat
/// turns (the example as the user's message, its answer as the assistant's). The task's
/// instruction heads the first message either way.
pub(crate) struct Shots {
    head: String,
    turns: Vec<(String, String)>,
    as_turns: bool,
}

impl Shots {
    pub(crate) fn new(head: impl Into<String>, as_turns: bool) -> Self {
        Shots {
            head: head.into(),
            turns: Vec::new(),
            as_turns,
        }
    }

    pub(crate) fn push(&mut self, example: &str, answer: &str) {
        self.turns.push((example.to_string(), answer.to_string()));
    }

    /// The prompt and the earlier turns of the item whose question is `question`.
    pub(crate) fn finish(self, question: &str) -> (String, Vec<(String, String)>) {
        if !self.as_turns || self.turns.is_empty() {
            let mut prompt = self.head;
            for (example, answer) in &self.turns {
                prompt.push_str(&format!("{example} {answer}\n\n"));
            }
            prompt.push_str(question);
            return (prompt, Vec::new());
        }
        let mut turns = self.turns;
        turns[0].0 = format!("{}{}", self.head, turns[0].0);
        (question.to_string(), turns)
    }
}

#[cfg(test)]
mod tests {
    use super::super::{tests::def, Builtin, Task};
    use super::*;
    use crate::spec::TaskKind;

    #[test]
    fn shots_go_into_one_prompt_or_into_earlier_turns() {
        let build = |as_turns| {
            let mut s = Shots::new("Do this.\n\n", as_turns);
            s.push("Q: 1+1?", "2");
            s.push("Q: 2+2?", "4");
            s.finish("Q: 3+3?")
        };
        assert_eq!(
            build(false),
            (
                "Do this.\n\nQ: 1+1? 2\n\nQ: 2+2? 4\n\nQ: 3+3?".to_string(),
                vec![]
            )
        );
        let (prompt, turns) = build(true);
        assert_eq!(prompt, "Q: 3+3?");
        assert_eq!(
            turns,
            [
                ("Do this.\n\nQ: 1+1?".to_string(), "2".to_string()),
                ("Q: 2+2?".to_string(), "4".to_string())
            ]
        );
        // No shots: the instruction stays with the question.
        let (prompt, turns) = Shots::new("Do this.\n\n", true).finish("Q: 3+3?");
        assert_eq!((prompt.as_str(), turns.len()), ("Do this.\n\nQ: 3+3?", 0));
    }

    #[test]
    fn mmlu_shots_as_turns_end_with_the_question_alone_and_are_keyed() {
        let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("datasets/mmlu");
        let mut d = def(TaskKind::Mmlu, Some(2));
        d.shots = 2;
        let one = Builtin {
            def: d.clone(),
            dir: dir.clone(),
        };
        d.fewshot_as_turns = true;
        let turns = Builtin { def: d, dir };
        let (a, b) = (one.load(1).unwrap(), turns.load(1).unwrap());
        assert_eq!(a[0].id, b[0].id);
        assert!(a[0].history.is_empty());
        assert_eq!(b[0].history.len(), 2);
        // The same text, cut into turns: the shots' questions and answers, then the question.
        let joined: String = b[0]
            .history
            .iter()
            .map(|(q, a)| format!("{q} {a}\n\n"))
            .collect::<String>()
            + &b[0].prompt;
        assert_eq!(joined, a[0].prompt);
        assert_ne!(one.template(), turns.template());
    }
}
