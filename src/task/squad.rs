//! SQuAD v2: reading comprehension with unanswerable questions. Exact match and F1 exactly as
//! the official v2.0 evaluation script defines them: answers normalised (lower case, ASCII
//! punctuation removed, articles a/an/the removed, whitespace collapsed); F1 over the multiset
//! of normalised tokens; the maximum over the gold answers; a question without gold answers
//! is scored against the empty answer (so only an empty prediction is right).

use std::collections::{BTreeMap, HashMap};
use std::path::Path;
use std::sync::LazyLock;

use regex::Regex;
use serde::Deserialize;

use super::{read_jsonl, DatasetError, Sample, Score, TaskDef};

pub(crate) const TEMPLATE: &str = "squad_v2/1\n\
Answer the question with a short span copied from the context. If the context does not contain the answer, reply: unanswerable\n\n\
{shots: Context/Question/Answer blocks}\n\
Context: {context}\nQuestion: {question}\nAnswer:";
pub(crate) const METRIC: &str = "squad_v2-official/2 (answer extraction v3)";

/// Python's `string.punctuation`.
const PUNCTUATION: &str = "!\"#$%&'()*+,-./:;<=>?@[\\]^_`{|}~";

/// Runs of Python `re` word characters (`str.isalnum()` or `_`): letters and numbers of every
/// script, superscripts included, combining marks and other connector punctuation not. The
/// official script's `\b(a|an|the)\b` removes exactly the runs that are an article.
static PY_WORDS: LazyLock<Regex> =
    LazyLock::new(|| Regex::new(r"[\p{L}\p{N}_]+").expect("valid regex"));

fn remove_articles(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    let mut last = 0;
    for m in PY_WORDS.find_iter(s) {
        if matches!(m.as_str(), "a" | "an" | "the") {
            out.push_str(&s[last..m.start()]);
            out.push(' ');
            last = m.end();
        }
    }
    out.push_str(&s[last..]);
    out
}

/// Python's `str.isspace` (what `str.split()` splits on): Unicode white space plus the
/// information separators U+001C..U+001F.
fn py_space(c: char) -> bool {
    c.is_whitespace() || ('\u{1c}'..='\u{1f}').contains(&c)
}

pub(crate) fn normalize_answer(s: &str) -> String {
    let lower = s.to_lowercase();
    let no_punc: String = lower
        .chars()
        .filter(|c| !PUNCTUATION.contains(*c))
        .collect();
    let no_articles = remove_articles(&no_punc);
    no_articles
        .split(py_space)
        .filter(|t| !t.is_empty())
        .collect::<Vec<_>>()
        .join(" ")
}

fn tokens(s: &str) -> Vec<String> {
    if s.is_empty() {
        return Vec::new();
    }
    normalize_answer(s)
        .split(py_space)
        .filter(|t| !t.is_empty())
        .map(str::to_string)
        .collect()
}

pub(crate) fn exact(gold: &str, pred: &str) -> f64 {
    f64::from(u8::from(normalize_answer(gold) == normalize_answer(pred)))
}

pub(crate) fn f1(gold: &str, pred: &str) -> f64 {
    let g = tokens(gold);
    let p = tokens(pred);
    if g.is_empty() || p.is_empty() {
        return f64::from(u8::from(g == p));
    }
    let mut counts: HashMap<&str, i64> = HashMap::new();
    for t in &g {
        *counts.entry(t).or_default() += 1;
    }
    let mut same = 0i64;
    for t in &p {
        if let Some(c) = counts.get_mut(t.as_str()) {
            if *c > 0 {
                *c -= 1;
                same += 1;
            }
        }
    }
    if same == 0 {
        return 0.0;
    }
    let precision = same as f64 / p.len() as f64;
    let recall = same as f64 / g.len() as f64;
    2.0 * precision * recall / (precision + recall)
}

/// (EM, F1) of one prediction: the best over the gold answers whose normalised form is not
/// empty; none left → the empty answer.
pub(crate) fn score_answers(golds: &[String], pred: &str) -> (f64, f64) {
    let mut g: Vec<&str> = golds
        .iter()
        .map(String::as_str)
        .filter(|a| !normalize_answer(a).is_empty())
        .collect();
    if g.is_empty() {
        g.push("");
    }
    let em = g.iter().map(|a| exact(a, pred)).fold(0.0, f64::max);
    let f = g.iter().map(|a| f1(a, pred)).fold(0.0, f64::max);
    (em, f)
}

static ANSWER_PREFIX: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(
        r"(?i)^\s*(?:\*\*)?(?:the\s+)?(?:final\s+)?answer\b(?:\s+to\s+(?:the|this|your)\s+question)?\s*(?:\*\*)?\s*(?:is\b)?\s*[:\-]?\s*",
    )
    .expect("valid regex")
});
/// "…the answer is X" inside the first sentence ("Based on the context, the answer is 1066.").
static ANSWER_IS: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(
        r"(?i)^[^.!?\n]*?\b(?:the\s+)?(?:final\s+|correct\s+|short\s+)?answer(?:\s+to\s+(?:the|this|your)\s+question)?\s+(?:is|would\s+be|will\s+be)\s*:?\s*",
    )
    .expect("valid regex")
});
/// "Based on the context (provided), …", "According to the given passage, …".
static GROUNDING: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(
        r"(?i)^(?:based\s+on|according\s+to|from|given|in)\s+(?:the\s+|this\s+)?(?:given\s+|provided\s+)?(?:context|passage|text|information|article|paragraph)(?:\s+(?:provided|given|above))?\s*,\s*",
    )
    .expect("valid regex")
});
/// A later line that states the answer ("The answer is: 6").
static ANSWER_LINE: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(r"(?i)^\W*(?:the\s+)?(?:final\s+|correct\s+|short\s+)?answer(?:\s+to\s+(?:the|this|your)\s+question)?\s*(?:is|would\s+be|:)")
        .expect("valid regex")
});

/// The model declines: what a careful reader takes as "no answer".
static NO_ANSWER: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(
        r"(?ix)
        ^\W*(?:n/?a|none|unknown|no\s+answer|unanswerable|not\s+answerable|no\s+information)\W*$
      | \bunanswerable\b
      | \bnot\s+answerable\b
      | \b(?:cannot|can\s*not|can't|could\s+not|couldn't|unable\s+to|impossible\s+to|not\s+possible\s+to)\s+
          (?:be\s+)?(?:answer(?:ed)?|determine(?:d)?|find|found|know|infer(?:red)?|tell|say|provide|identif(?:y|ied))\b
      | \b(?:is|are)\s+not\s+(?:mentioned|provided|stated|given|specified|found|included|available|answerable|possible\s+to\s+determine)\b
      | \b(?:does|do)\s*(?:not|n't)\s+(?:contain|say|mention|provide|specify|state|include|give|answer|tell|indicate)\b
      | \bthere\s+is\s+no\s+(?:answer|information|mention)\b
      | \b(?:no|not\s+enough|insufficient)\s+(?:information|context|details?)\b
      | ^\W*no\s+answer\b
      | \bi\s+(?:don't|do\s+not)\s+know\b",
    )
    .expect("valid regex")
});

/// The answer a model gave, as a careful reader takes it (docs/tasks.md, "Answer extraction"): its
/// first non-empty line; a model declining ("unanswerable", "N/A", "I cannot answer this from
/// the context", "The answer cannot be determined…") is the empty answer; otherwise without
/// an "Answer:" prefix, without a leading "…the answer is" in its first sentence, and without
/// surrounding quotes or emphasis.
pub(crate) fn extract_answer(output: &str) -> String {
    let mut lines = output.lines().map(str::trim).filter(|l| !l.is_empty());
    let first = lines.next().unwrap_or("");
    // A later line that states the answer outright wins over the first.
    let line = if ANSWER_LINE.is_match(first) {
        first
    } else {
        lines
            .find(|l| {
                ANSWER_LINE.is_match(l)
                    && !ANSWER_PREFIX
                        .replace(l, "")
                        .trim_matches(|c: char| !c.is_alphanumeric())
                        .is_empty()
            })
            .unwrap_or(first)
    };
    if NO_ANSWER.is_match(line) {
        return String::new();
    }
    let line = GROUNDING.replace(line, "");
    let stated = ANSWER_PREFIX.is_match(&line) || ANSWER_IS.is_match(&line);
    let line = ANSWER_PREFIX.replace(&line, "");
    let line = ANSWER_IS.replace(&line, "");
    // After "the answer is", the answer is that sentence, not the explanation after it.
    let line = match (stated, line.find(". ")) {
        (true, Some(i)) => &line[..i],
        _ => &line[..],
    };
    let line = line
        .trim()
        .trim_matches(|c| c == '"' || c == '*' || c == '\'' || c == '`')
        .trim();
    let line = line.strip_suffix('.').unwrap_or(line).trim();
    line.trim_matches(|c| c == '"' || c == '*')
        .trim()
        .to_string()
}

#[derive(Debug, Deserialize)]
struct Item {
    id: String,
    context: String,
    question: String,
    answers: Vec<String>,
    #[serde(default)]
    title: Option<String>,
}

fn block(item: &Item) -> String {
    format!(
        "Context: {}\nQuestion: {}\nAnswer:",
        item.context.trim(),
        item.question.trim()
    )
}

pub(crate) fn load(def: &TaskDef, dir: &Path, seed: u64) -> Result<Vec<Sample>, DatasetError> {
    let path = dir.join("dev_subset.jsonl");
    let items: Vec<Item> = read_jsonl(&path)?;
    if items.is_empty() {
        return Err(DatasetError::File {
            path: path.display().to_string(),
            message: "no questions".into(),
        });
    }
    let order = super::sample_order(items.len(), def.samples, seed, "squad_v2/order");
    let chosen: Vec<usize> = order.clone();
    let mut out = Vec::with_capacity(chosen.len());
    for &i in &chosen {
        let item = &items[i];
        let mut shots = super::Shots::new(
            "Answer the question with a short span copied from the context. If the context does not contain the answer, reply: unanswerable\n\n",
            def.fewshot_as_turns,
        );
        for s in super::shot_indices(items.len(), &chosen, i, def.shots, seed, &item.id) {
            let shot = &items[s];
            let answer = shot.answers.first().map_or("unanswerable", String::as_str);
            shots.push(&block(shot), answer);
        }
        let (prompt, history) = shots.finish(&block(item));
        let mut groups = BTreeMap::new();
        groups.insert(
            "answerable".to_string(),
            if item.answers.is_empty() {
                "no_answer".to_string()
            } else {
                "has_answer".to_string()
            },
        );
        if let Some(t) = &item.title {
            groups.insert("title".to_string(), t.clone());
        }
        out.push(Sample {
            id: item.id.clone(),
            system: def.system.clone(),
            prompt,
            reference: item.answers.first().cloned().unwrap_or_default(),
            references: item.answers.clone(),
            groups,
            extra: BTreeMap::new(),
            history,
            ..Default::default()
        });
    }
    Ok(out)
}

pub(crate) fn score(sample: &Sample, output: &str) -> Score {
    let answer = extract_answer(output);
    let (em, f) = score_answers(&sample.references, &answer);
    Score {
        score: f,
        correct: Some(em == 1.0),
        extracted: Some(answer),
        metrics: BTreeMap::from([("exact".to_string(), em), ("f1".to_string(), f)]),
        ..Score::default()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn normalizes_like_the_official_script() {
        assert_eq!(normalize_answer("The  Normans!"), "normans");
        assert_eq!(normalize_answer("a theory of an apple"), "theory of apple");
        assert_eq!(normalize_answer("10th-century"), "10thcentury");
        assert_eq!(normalize_answer("  "), "");
        // Articles only as whole words; Unicode lower-casing.
        assert_eq!(normalize_answer("Theatre ÉTÉ"), "theatre été");
    }

    #[test]
    fn f1_counts_token_multisets_not_sets() {
        // Set-based F1 would give 1.0 here.
        let f = f1("the cat cat", "cat");
        // gold tokens [cat, cat], pred [cat]: P = 1, R = 1/2.
        assert!((f - 2.0 / 3.0).abs() < 1e-12, "{f}");
        assert_eq!(f1("Paris", "paris."), 1.0);
        assert_eq!(f1("Paris", "London"), 0.0);
        assert_eq!(f1("", ""), 1.0);
        assert_eq!(f1("", "something"), 0.0);
        assert_eq!(f1("a", "the"), 1.0, "both normalise to nothing");
        let f = f1("in the 10th century", "10th and 11th centuries");
        // gold [in, 10th, century]; pred [10th, and, 11th, centuries]: 1 shared.
        assert!((f - 2.0 * (0.25 * (1.0 / 3.0)) / (0.25 + 1.0 / 3.0)).abs() < 1e-12);
    }

    #[test]
    fn takes_the_best_gold_and_scores_unanswerable_against_empty() {
        let golds = vec!["France".to_string(), "in France".to_string()];
        assert_eq!(score_answers(&golds, "France"), (1.0, 1.0));
        let (em, f) = score_answers(&golds, "northern France");
        assert_eq!(em, 0.0);
        assert!((f - 2.0 / 3.0).abs() < 1e-12, "{f}");
        assert_eq!(score_answers(&[], ""), (1.0, 1.0));
        assert_eq!(score_answers(&[], "France"), (0.0, 0.0));
        // A gold answer that normalises to nothing counts as no answer.
        assert_eq!(score_answers(&["the".to_string()], ""), (1.0, 1.0));
    }

    #[test]
    fn extracts_the_answer_line() {
        assert_eq!(extract_answer(" France\nBecause…"), "France");
        assert_eq!(extract_answer("Answer: \"Rollo\""), "Rollo");
        assert_eq!(extract_answer("**Answer:** Rollo"), "Rollo");
        assert_eq!(
            extract_answer("The answer to the question is: \"mineral\""),
            "mineral"
        );
        assert_eq!(extract_answer("The answer is Paris"), "Paris");
        assert_eq!(
            extract_answer("Answerable questions"),
            "Answerable questions"
        );
        assert_eq!(extract_answer("unanswerable"), "");
        assert_eq!(extract_answer("Unanswerable."), "");
        assert_eq!(extract_answer("The context does not contain it"), "");
        assert_eq!(extract_answer(""), "");
        // Issue 14's phrasings.
        assert_eq!(extract_answer("I cannot answer this from the context."), "");
        assert_eq!(extract_answer("N/A"), "");
        assert_eq!(
            extract_answer("The answer cannot be determined from the context."),
            ""
        );
        assert_eq!(
            extract_answer("Based on the context, the answer is 1066."),
            "1066"
        );
    }

    #[test]
    fn articles_are_removed_with_python_word_boundaries() {
        // A combining mark is not a Python word character, so "a" before one is a whole
        // word and removed, as Python's re.sub(r"\b(a|an|the)\b", " ", …) does.
        assert_eq!(normalize_answer("a\u{301} b"), "\u{301} b");
        // A superscript is a Python word character ("²".isalnum()): "a²" is one word.
        assert_eq!(normalize_answer("a² b"), "a² b");
        // Connector punctuation other than "_" is not a word character in Python.
        assert_eq!(normalize_answer("the\u{203F}x"), "\u{203F}x");
        assert_eq!(normalize_answer("The Norman a an"), "norman");
    }

    #[test]
    fn loads_with_splits_and_shots_from_other_questions() {
        let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("datasets/squad_v2");
        let mut def = super::super::tests::def(crate::spec::TaskKind::SquadV2, Some(20));
        def.shots = 2;
        let s = load(&def, &dir, 3).unwrap();
        assert_eq!(s.len(), 20);
        for x in &s {
            assert_eq!(x.prompt.matches("Context: ").count(), 3);
            assert!(x.prompt.ends_with("Answer:"));
            // The question itself is never one of its shots.
            let q = x.prompt.rsplit("Question: ").next().unwrap();
            assert_eq!(x.prompt.matches(q).count(), 1);
        }
        assert!(s.iter().any(|x| x.groups["answerable"] == "no_answer"));
        assert!(s.iter().any(|x| x.groups["answerable"] == "has_answer"));
    }
}
