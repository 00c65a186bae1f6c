//! MMLU: four-choice questions; accuracy overall, per subject and per category, from a letter
//! read robustly out of free-form output ("Answer: B" is B, not A).

use std::collections::BTreeMap;
use std::path::Path;
use std::sync::LazyLock;

use regex::Regex;
use serde::Deserialize;

use super::{read_jsonl, DatasetError, Sample, Score, TaskDef};

pub(crate) const TEMPLATE: &str = "mmlu/1\n\
The following is a multiple choice question about {subject}. Reply with the letter of the correct answer.\n\n\
{shots: question, A-D choices, `Answer: X`, blank line}\n\
{question}\nA. {A}\nB. {B}\nC. {C}\nD. {D}\nAnswer:";
pub(crate) const METRIC: &str = "mmlu-accuracy/1 (letter extraction v1)";

const LETTERS: [char; 4] = ['A', 'B', 'C', 'D'];

#[derive(Debug, Deserialize)]
struct Item {
    id: String,
    subject: String,
    category: String,
    question: String,
    choices: Vec<String>,
    answer: String,
}

fn check(path: &Path, line: usize, item: &Item) -> Result<(), DatasetError> {
    let err = |message: String| DatasetError::Line {
        path: path.display().to_string(),
        line,
        message,
    };
    if item.choices.len() != 4 {
        return Err(err(format!(
            "`{}` has {} choices, expected 4",
            item.id,
            item.choices.len()
        )));
    }
    if !matches!(item.answer.as_str(), "A" | "B" | "C" | "D") {
        return Err(err(format!(
            "`{}` has answer {:?}, expected one of A, B, C, D",
            item.id, item.answer
        )));
    }
    Ok(())
}

fn question_block(item: &Item) -> String {
    let mut s = format!("{}\n", item.question.trim());
    for (l, c) in LETTERS.iter().zip(&item.choices) {
        s.push_str(&format!("{l}. {}\n", c.trim()));
    }
    s.push_str("Answer:");
    s
}

pub(crate) fn load(def: &TaskDef, dir: &Path, seed: u64) -> Result<Vec<Sample>, DatasetError> {
    let test_path = dir.join("test.jsonl");
    let dev_path = dir.join("dev.jsonl");
    let test: Vec<Item> = read_jsonl(&test_path)?;
    for (i, item) in test.iter().enumerate() {
        check(&test_path, i + 1, item)?;
    }
    let dev: Vec<Item> = if def.shots > 0 {
        read_jsonl(&dev_path)?
    } else {
        Vec::new()
    };
    let mut by_subject: BTreeMap<&str, Vec<&Item>> = BTreeMap::new();
    for (i, item) in dev.iter().enumerate() {
        check(&dev_path, i + 1, item)?;
        by_subject.entry(&item.subject).or_default().push(item);
    }
    if test.is_empty() {
        return Err(DatasetError::File {
            path: test_path.display().to_string(),
            message: "no questions".into(),
        });
    }
    let order = super::sample_order(test.len(), def.samples, seed, "mmlu/order");
    let mut out = Vec::with_capacity(order.len());
    for i in order {
        let item = &test[i];
        let mut prompt = format!(
            "The following is a multiple choice question about {}. Reply with the letter of the correct answer.\n\n",
            item.subject.replace('_', " ")
        );
        if def.shots > 0 {
            let shots = by_subject
                .get(item.subject.as_str())
                .map(Vec::as_slice)
                .unwrap_or(&[]);
            if shots.len() < def.shots as usize {
                return Err(DatasetError::File {
                    path: dev_path.display().to_string(),
                    message: format!(
                        "subject `{}` has {} dev examples, {} shots asked",
                        item.subject,
                        shots.len(),
                        def.shots
                    ),
                });
            }
            for shot in &shots[..def.shots as usize] {
                prompt.push_str(&question_block(shot));
                prompt.push_str(&format!(" {}\n\n", shot.answer));
            }
        }
        prompt.push_str(&question_block(item));
        let mut groups = BTreeMap::new();
        groups.insert("subject".to_string(), item.subject.clone());
        groups.insert("category".to_string(), item.category.clone());
        out.push(Sample {
            id: item.id.clone(),
            system: def.system.clone(),
            prompt,
            reference: item.answer.clone(),
            references: vec![item.answer.clone()],
            groups,
            extra: BTreeMap::new(),
        });
    }
    Ok(out)
}

static EXPLICIT: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(
        r"(?i:answer|correct option|correct choice)\s*(?:is|:|=|would be)?\s*(?i:option|choice|letter)?\s*[:\-]?\s*(?:\*\*)?(?:\(([A-Da-d])\)|\[([A-Da-d])\]|([A-D])\b|([a-d])(?:[.):,*]|\s*$))",
    )
    .expect("valid regex")
});
static LEADING: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(r"^\s*(?:\*\*)?[\(\[]?([A-D])(?:[\)\].:,*]|\s|$)").expect("valid regex")
});
static PARENS: LazyLock<Regex> = LazyLock::new(|| Regex::new(r"\(([A-D])\)").expect("valid regex"));
static DOTTED: LazyLock<Regex> =
    LazyLock::new(|| Regex::new(r"\b([A-D])[.)]").expect("valid regex"));

/// The letter an output chooses, or None when it names none. Tried in order: an explicit
/// "answer is X" / "Answer: (X)" phrase, a letter opening the output, a parenthesised
/// letter, a letter followed by "." or ")". Lower-case letters count only inside an explicit
/// phrase and then only when delimited (so "the answer is a bit unclear" is not A).
pub(crate) fn extract_letter(output: &str) -> Option<char> {
    let first = |re: &Regex| {
        re.captures(output).and_then(|c| {
            c.iter()
                .skip(1)
                .flatten()
                .next()
                .and_then(|m| m.as_str().chars().next())
                .map(|l| l.to_ascii_uppercase())
        })
    };
    first(&EXPLICIT)
        .or_else(|| first(&LEADING))
        .or_else(|| first(&PARENS))
        .or_else(|| first(&DOTTED))
}

pub(crate) fn score(sample: &Sample, output: &str) -> Score {
    let letter = extract_letter(output);
    let correct = letter.is_some_and(|l| sample.reference.starts_with(l));
    let v = f64::from(u8::from(correct));
    Score {
        score: v,
        correct: Some(correct),
        extracted: letter.map(String::from),
        parsed: Some(letter.is_some()),
        metrics: BTreeMap::from([("accuracy".to_string(), v)]),
        ..Score::default()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_letters_the_way_a_person_would() {
        let cases = [
            ("Answer: B", Some('B')),
            ("answer: b", Some('B')),
            ("(C)", Some('C')),
            ("the answer is d", Some('D')),
            ("The answer is (A).", Some('A')),
            ("B. Paris", Some('B')),
            (" D", Some('D')),
            ("C", Some('C')),
            ("I think it's (B) because…", Some('B')),
            ("The correct option is C: 42", Some('C')),
            ("**B**", Some('B')),
            ("the answer is a bit unclear", None),
            ("I am not sure", None),
            ("", None),
            ("A. 4\nAnswer: D", Some('D')),
        ];
        for (text, want) in cases {
            assert_eq!(extract_letter(text), want, "{text:?}");
        }
    }

    #[test]
    fn a_bad_dataset_line_is_reported_with_file_and_line() {
        let dir = tempfile::tempdir().unwrap();
        let good = r#"{"id":"a/test/0","subject":"a","subcategory":"x","category":"STEM","question":"q","choices":["1","2","3","4"],"answer":"B"}"#;
        let bad = r#"{"id":"a/test/1","subject":"a","subcategory":"x","category":"STEM","question":"q","choices":["1","2","3","4"],"answer":"E"}"#;
        std::fs::write(dir.path().join("test.jsonl"), format!("{good}\n{bad}\n")).unwrap();
        let def = super::super::tests::def(crate::spec::TaskKind::Mmlu, None);
        let err = load(&def, dir.path(), 1).unwrap_err().to_string();
        assert!(
            err.contains("test.jsonl:2:") && err.contains("\"E\""),
            "{err}"
        );
        std::fs::write(
            dir.path().join("test.jsonl"),
            format!("{good}\n{{not json\n"),
        )
        .unwrap();
        let err = load(&def, dir.path(), 1).unwrap_err().to_string();
        assert!(err.contains("test.jsonl:2:"), "{err}");
    }

    #[test]
    fn prompts_carry_question_choices_and_shots() {
        let mut def = super::super::tests::def(crate::spec::TaskKind::Mmlu, Some(5));
        def.shots = 2;
        let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("datasets/mmlu");
        let a = load(&def, &dir, 9).unwrap();
        assert_eq!(a.len(), 5);
        assert_eq!(a, load(&def, &dir, 9).unwrap(), "seeded order");
        assert_ne!(a[0].id, load(&def, &dir, 10).unwrap()[0].id);
        let p = &a[0].prompt;
        assert_eq!(
            p.matches("\nA. ").count(),
            3,
            "2 shots + the question:\n{p}"
        );
        assert_eq!(p.matches("Answer:").count(), 3);
        assert!(p.ends_with("Answer:"));
    }

    #[test]
    fn scores_against_the_reference_letter() {
        let s = Sample {
            reference: "B".into(),
            ..Sample::default()
        };
        assert_eq!(score(&s, "Answer: B").correct, Some(true));
        assert_eq!(score(&s, "Answer: A").correct, Some(false));
        assert_eq!(score(&s, "hmm").extracted, None);
    }
}
