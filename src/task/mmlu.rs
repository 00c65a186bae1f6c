//! MMLU: four-choice questions; accuracy overall, per subject and per category, from a letter
//! read robustly out of free-form output ("Answer: B" is B, not A).

use std::collections::BTreeMap;
use std::path::Path;
use std::sync::LazyLock;

use regex::Regex;
use serde::Deserialize;

use super::{read_jsonl, DatasetError, Sample, Score, TaskDef};
use crate::spec::Scoring;

pub(crate) const TEMPLATE: &str = "mmlu/1\n\
The following is a multiple choice question about {subject}. Reply with the letter of the correct answer.\n\n\
{shots: question, A-D choices, `Answer: X`, blank line}\n\
{question}\nA. {A}\nB. {B}\nC. {C}\nD. {D}\nAnswer:";
pub(crate) const METRIC: &str = "mmlu-accuracy/1 (letter extraction v4)";

/// The prompt of `scoring "logprobs"` (part of run keys): lm-evaluation-harness's MMLU format.
pub(crate) const LOGPROBS_TEMPLATE: &str = "mmlu-logprobs/1\n\
The following are multiple choice questions (with answers) about {subject}.\n\n\
{shots: question, A-D choices, `Answer: X`, blank line}\n\
{question}\nA. {A}\nB. {B}\nC. {C}\nD. {D}\nAnswer:";

/// The metric of `scoring "constrained"`: the label the engine was forced to write, read as
/// generative output is.
pub(crate) const CONSTRAINED_METRIC: &str =
    "mmlu-accuracy/1 (constrained to A-D, letter extraction v4)";

/// The metric of `scoring "logprobs"`: the option label most likely at the answer position.
pub(crate) const LOGPROBS_METRIC: &str =
    "mmlu-accuracy/1 (option log-probabilities v2, ties to the earlier label)";

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
        let subject = item.subject.replace('_', " ");
        let head = match def.scoring {
            Scoring::Generative | Scoring::Constrained => format!(
                "The following is a multiple choice question about {subject}. Reply with the letter of the correct answer.\n\n"
            ),
            // lm-evaluation-harness's MMLU prompt: the answer position follows "Answer:".
            Scoring::Logprobs => format!(
                "The following are multiple choice questions (with answers) about {subject}.\n\n"
            ),
        };
        let mut turns = super::Shots::new(head, def.fewshot_as_turns);
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
                turns.push(&question_block(shot), &shot.answer);
            }
        }
        let (prompt, history) = turns.finish(&question_block(item));
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
            history,
            ..Default::default()
        });
    }
    Ok(out)
}

/// Unicode dashes, colons and emphasis folded to ASCII before reading.
fn fold(output: &str) -> String {
    let mut s = String::with_capacity(output.len());
    for c in output.chars() {
        match c {
            '\u{2010}'..='\u{2015}' | '\u{2212}' | '\u{FE58}' | '\u{FE63}' | '\u{FF0D}' => {
                s.push('-')
            }
            '\u{FF1A}' | '\u{FE55}' | '\u{A789}' => s.push(':'),
            '\u{FF08}' => s.push('('),
            '\u{FF09}' => s.push(')'),
            '*' | '_' | '`' => s.push(' '),
            c => s.push(c),
        }
    }
    s
}

/// Explicit statements of the chosen letter: "the answer is (B)", "Answer: B", "Answer - B",
/// "answer is: Option B", "Option C is correct", "I would choose D", "correct choice is c)".
static EXPLICIT: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(
        r"(?xi)
        (?:
            (?:answer|(?:correct|right|best)\s+(?:option|choice|letter|statement|response))
            \s*(?:is|would\s+be|will\s+be|should\s+be|=|:|-)?
            (?:\s+(?:actually|clearly|probably|likely|definitely|therefore|thus))?
            \s*[:\-]?\s*
            (?:(?:option|choice|letter)\s*)?
          | (?:i\s+would|i'd|i\s+will|i'll|i)\s+(?:choose|pick|select|go\s+with|answer)\s+
            (?:(?:option|choice|letter)\s*)?
          | (?:^|[^a-z])(?:option|choice)\s*
        )
        (?-i:
            \(\s*(?P<p>[A-Da-d])\s*\)
          | \[\s*(?P<b>[A-Da-d])\s*\]
          | (?P<u>[A-D])(?:[^A-Za-z0-9'-]|$)
          | (?P<l>[a-d])(?:[.):,;!]|\s*$)
          | (?P<w>[a-d])\s+(?:because|since|as|which|given|due)\b
        )",
    )
    .expect("valid regex")
});

/// After an "Option X" match, what makes it a statement of the answer.
static OPTION_AFFIRMED: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(r"(?i)^\s*[).:]?\s*(?:is|would\s+be|seems|appears)\s+(?:to\s+be\s+)?(?:the\s+)?(?:correct|right|best|true|answer)")
        .expect("valid regex")
});

/// Letter ranges and lists that name the options rather than choose one: "(A-D)", "A to D",
/// "A, B, C or D".
static RANGE: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(r"\(?\b[A-D]\s*(?:-|to|through)\s*[A-D]\b\)?").expect("valid regex")
});

/// A letter token: in parentheses or brackets, or standing alone between non-letters.
static TOKEN: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(r"(?:\(\s*([A-D])\s*\)|\[\s*([A-D])\s*\]|(?:^|[^A-Za-z0-9'’-])([A-D])(?:$|[^A-Za-z0-9'’-]))")
        .expect("valid regex")
});

static NEGATED_BEFORE: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(r"(?i)(?:\bnot|n't|\bnor|\bexcept|\bexclude|\beliminate|\brule\s+out|\bneither)\s*(?:option|choice|letter)?\s*\(?\s*$")
        .expect("valid regex")
});
static NEGATED_AFTER: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(r"(?i)^\s*\)?\s*(?:(?:,|and|or|&)\s*\(?[A-D]\)?\s*)*(?:is|are|seems|seem)\s+(?:also\s+)?(?:wrong|incorrect|not|false|unlikely|ruled\s+out)")
        .expect("valid regex")
});
/// Another letter right after an explicit one ("The correct answer is A. B."): the statement
/// names several.
static NEXT_LETTER: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(r"^[\s.,)\]*]{0,4}(?:(?:and|or|&|/)\s*)?\(?[A-D](?:[^A-Za-z0-9'’-]|$)")
        .expect("valid regex")
});

/// The whole answer is one option letter, in either case: "b", "(c)", "d.", "**a**".
static WHOLE: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(r"^\s*[(\[]?\s*([A-Da-d])\s*[)\]]?\s*[.!]?\s*$").expect("valid regex")
});

/// A final preference after hedging: "It could be A or C, but C is best", "…, but (D) seems
/// the better answer".
static PREFERENCE: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(r"(?i)\bbut\s+(?:option\s+|choice\s+)?\(?(?-i:([A-D]))\)?\s+(?:is|seems|would\s+be|looks)\s+(?:to\s+be\s+)?(?:the\s+)?(?:best|better|correct|right|most\s+likely|(?:more\s+)?likely)\b")
        .expect("valid regex")
});

/// A parenthetical after an explicit answer: "(option A would …)", "(C is a distractor)" — a
/// letter followed by words inside parentheses, not a second letter.
static PARENTHETICAL: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(r"^[\s.,]{0,3}\(\s*(?:(?i:option|choice)\s+)?[A-D]\s+[A-Za-z]").expect("valid regex")
});

/// A line that restates an option: "A. Paris", "(B) London".
static OPTION_LINE: LazyLock<Regex> =
    LazyLock::new(|| Regex::new(r"^\s*\(?([A-D])[.)]\s+\S").expect("valid regex"));

/// Byte ranges of the output that echo the option list (three or more of "A. …", "B. …",
/// "C. …", "D. …" on consecutive lines, in order): their letters are not choices.
fn echoed_options(text: &str) -> Vec<(usize, usize)> {
    let mut lines = Vec::new();
    let mut at = 0;
    for l in text.split_inclusive('\n') {
        lines.push((at, at + l.len(), l));
        at += l.len();
    }
    let mut out = Vec::new();
    let mut i = 0;
    while i < lines.len() {
        let mut j = i;
        let mut expect = b'A';
        while j < lines.len() {
            match OPTION_LINE.captures(lines[j].2) {
                Some(c) if c[1].as_bytes()[0] == expect => {
                    expect += 1;
                    j += 1;
                }
                _ => break,
            }
        }
        if j - i >= 3 {
            out.push((lines[i].0, lines[j - 1].1));
            i = j;
        } else {
            i += 1;
        }
    }
    out
}

/// Words after which a bare capital letter is a choice ("it is C", "go with B").
static CUE_BEFORE: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(r"(?i)(?:\bis|\bbe|\bwith|\bchoose|\bpick|\bselect|\banswer|\boption|\bchoice|\bletter|:|-|=)\s*$")
        .expect("valid regex")
});

/// How an output answered: one letter, or none (unreadable, or several asserted).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Reading {
    Letter(char),
    /// No letter could be read.
    None,
    /// Several different letters were asserted: no guess is made.
    Ambiguous,
}

fn one_of(letters: &[char]) -> Reading {
    match letters.first() {
        None => Reading::None,
        Some(&l) if letters.iter().all(|&x| x == l) => Reading::Letter(l),
        Some(_) => Reading::Ambiguous,
    }
}

/// Reads the letter an output chooses, as a careful reader would (docs/tasks.md, "Answer
/// extraction"). First explicit statements ("The answer is B", "Answer: (C)", "Answer — B",
/// "Option C is correct", "I would choose D"); if they name several different letters, the
/// answer is ambiguous. Otherwise the letters the output asserts: letter tokens ("B", "(B)",
/// "B.", "**B**") that are not negated ("not A", "A and B are wrong"), not part of a range
/// ("(A-D)") and not an English article ("A common…"). One distinct letter is the answer;
/// several or none leave the output unparsed.
pub(crate) fn read_letter(output: &str) -> Reading {
    let text = fold(output);
    if let Some(c) = WHOLE.captures(&text) {
        return Reading::Letter(c[1].chars().next().expect("one char").to_ascii_uppercase());
    }
    // Hedging resolved by a final preference: the last "but X is best" is the answer.
    if let Some(c) = PREFERENCE.captures_iter(&text).last() {
        return Reading::Letter(c[1].chars().next().expect("one char"));
    }
    let mut explicit = Vec::new();
    let mut denied = Vec::new();
    for c in EXPLICIT.captures_iter(&text) {
        let whole = c.get(0).expect("match");
        let m = ["p", "b", "u", "l", "w"]
            .iter()
            .find_map(|n| c.name(n))
            .expect("one letter group");
        let letter = m
            .as_str()
            .chars()
            .next()
            .expect("one char")
            .to_ascii_uppercase();
        let lead = whole.as_str().trim_start().to_ascii_lowercase();
        let bare_option = !lead.contains("answer")
            && !lead.contains("correct")
            && !lead.contains("best")
            && !lead.starts_with('i');
        if bare_option && !OPTION_AFFIRMED.is_match(&text[m.end()..]) {
            continue;
        }
        if NEGATED_AFTER.is_match(&text[m.end()..]) {
            // "The answer B is not a valid option": that letter is denied.
            denied.push(letter);
            continue;
        }
        let rest = &text[m.end()..];
        if NEXT_LETTER.is_match(rest) && !PARENTHETICAL.is_match(rest) {
            return Reading::Ambiguous;
        }
        explicit.push(letter);
    }
    if !explicit.is_empty() {
        return match one_of(&explicit) {
            Reading::Letter(l) if denied.contains(&l) => Reading::Ambiguous,
            r => r,
        };
    }
    let cleaned = RANGE.replace_all(&text, " ");
    let echoed = echoed_options(&cleaned);
    let mut asserted = Vec::new();
    for c in TOKEN.captures_iter(&cleaned) {
        let (m, bracketed) = match (c.get(1).or(c.get(2)), c.get(3)) {
            (Some(m), _) => (m, true),
            (None, Some(m)) => (m, false),
            _ => continue,
        };
        if echoed.iter().any(|&(a, b)| m.start() >= a && m.start() < b) {
            continue;
        }
        let before = &cleaned[..m.start()];
        // Markdown headings ("### Option A: …") announce an analysis, not a choice.
        if before
            .rsplit('\n')
            .next()
            .unwrap_or("")
            .trim_start()
            .starts_with('#')
        {
            continue;
        }
        let before = before.strip_suffix('(').unwrap_or(before);
        let after = &cleaned[m.end()..];
        if NEGATED_BEFORE.is_match(before) || NEGATED_AFTER.is_match(after) {
            continue;
        }
        if !bracketed {
            let line_start = before.rsplit('\n').next().unwrap_or("").trim().is_empty();
            let punct_after = after.starts_with(['.', ')', ':', ',', ';', '!', '?'])
                || after.trim().is_empty()
                || after.starts_with('\n');
            let cued = CUE_BEFORE.is_match(before);
            // "A common mistake…", "A 25-year-old…": an article, not a choice ("A or B" is).
            let next_word: String = after
                .trim_start_matches(' ')
                .chars()
                .take_while(|c| c.is_alphanumeric())
                .collect();
            let article = m.as_str() == "A"
                && after.starts_with(' ')
                && next_word.starts_with(|ch: char| ch.is_lowercase() || ch.is_ascii_digit())
                && !matches!(next_word.as_str(), "or" | "and" | "nor");
            if article || !(line_start || punct_after || cued) {
                continue;
            }
        }
        asserted.push(m.as_str().chars().next().expect("one char"));
    }
    one_of(&asserted)
}

/// The letter an output chooses, or None when it names none or several.
pub(crate) fn extract_letter(output: &str) -> Option<char> {
    match read_letter(output) {
        Reading::Letter(l) => Some(l),
        Reading::None | Reading::Ambiguous => None,
    }
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

/// The option a `logprobs` request chose, and whether it was tied: each label's
/// log-probability is the largest among the listed tokens that are that label once trimmed
/// (" A" or "A"), and the most likely label wins. A label that is not listed is less likely
/// than every listed token, so the choice is exact whenever any label is listed. Labels tied
/// at the engine's precision (bf16 logits tie often) go to the earliest, as
/// lm-evaluation-harness's argmax does; the tie is reported. None when no label is listed or
/// `top` is not the JSON the client records (`[[token, logprob], …]`).
pub(crate) fn choose_by_logprobs(top: &str) -> Option<(char, f64, bool)> {
    let (i, lp, tie) = choose_among(top, &["A", "B", "C", "D"])?;
    Some((LETTERS[i], lp, tie))
}

/// The option most likely at the answer position among `options`, from recorded top
/// log-probabilities: each option's log-probability is the largest among the tokens that are
/// that option once trimmed (`" yes"` or `"yes"`); ties go to the earlier option. Returns
/// (option index, its log-probability, whether it was tied); None when no option is listed.
pub(crate) fn choose_among(top: &str, options: &[&str]) -> Option<(usize, f64, bool)> {
    let pairs: Vec<(String, f64)> = serde_json::from_str(top).ok()?;
    let mut best: Vec<Option<f64>> = vec![None; options.len()];
    for (tok, lp) in &pairs {
        let t = tok.trim();
        if let Some(i) = options.iter().position(|o| !t.is_empty() && o.trim() == t) {
            best[i] = Some(best[i].map_or(*lp, |b: f64| b.max(*lp)));
        }
    }
    let top_lp = best
        .iter()
        .flatten()
        .copied()
        .fold(f64::NEG_INFINITY, f64::max);
    let mut at_top = best
        .iter()
        .enumerate()
        .filter(|(_, b)| **b == Some(top_lp))
        .map(|(i, _)| i);
    let first = at_top.next()?;
    Some((first, top_lp, at_top.next().is_some()))
}

/// A `logprobs` request's score: `top` is its recorded top log-probabilities (empty when the
/// server sent none: unparsed). `label_tie` is 1 where the choice was a tie.
pub(crate) fn score_logprobs(sample: &Sample, top: &str) -> Score {
    let chosen = choose_by_logprobs(top);
    let correct = chosen.is_some_and(|(l, _, _)| sample.reference.starts_with(l));
    let v = f64::from(u8::from(correct));
    let tie = f64::from(u8::from(chosen.is_some_and(|(_, _, t)| t)));
    Score {
        score: v,
        correct: Some(correct),
        extracted: chosen.map(|(l, _, _)| String::from(l)),
        parsed: Some(chosen.is_some()),
        metrics: BTreeMap::from([("accuracy".to_string(), v), ("label_tie".to_string(), tie)]),
        ..Score::default()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_most_likely_label_at_the_answer_position_is_the_choice() {
        // llama.cpp's SmolLM2 after "Answer:": an end of sequence first, then " A".
        let top = r#"[["",-0.57],[" A",-2.41],[" ",-2.6],["B",-3.0],[" B",-2.9]]"#;
        assert_eq!(choose_by_logprobs(top), Some(('A', -2.41, false)));
        // The largest of a label's forms counts.
        assert_eq!(
            choose_by_logprobs(r#"[[" C",-1.5],["C",-0.5],[" D",-0.7]]"#),
            Some(('C', -0.5, false))
        );
        // vLLM's bf16 logits on the H200 (high_school_macroeconomics/test/1): A and C tie;
        // the earlier label, as the harness's argmax, and the tie said.
        assert_eq!(
            choose_by_logprobs(r#"[[" A",-1.3397],[" B",-1.5272],[" C",-1.3397],[" D",-1.5272]]"#),
            Some(('A', -1.3397, true))
        );
        // Any declared options (a custom `choice` task): trimmed, exact, ties to the earlier.
        assert_eq!(
            choose_among(
                r#"[[" yes",-0.9],["Yes",-0.1],[" no",-0.9]]"#,
                &["yes", "no"]
            ),
            Some((0, -0.9, true))
        );
        assert_eq!(choose_among(r#"[[" maybe",-0.1]]"#, &["yes", "no"]), None);
        // No label listed, or no record: no choice.
        assert_eq!(choose_by_logprobs(r#"[[" The",-0.1],[" A.",-0.2]]"#), None);
        assert_eq!(choose_by_logprobs(""), None);
        let s = Sample {
            reference: "C".into(),
            ..Default::default()
        };
        let sc = score_logprobs(&s, r#"[[" C",-0.2],[" A",-1.9]]"#);
        assert_eq!(
            (sc.score, sc.parsed, sc.extracted.as_deref()),
            (1.0, Some(true), Some("C"))
        );
        assert_eq!(sc.metrics["label_tie"], 0.0);
        assert_eq!(score_logprobs(&s, "").parsed, Some(false));
        let tied = score_logprobs(&s, r#"[[" C",-0.5],[" B",-0.5]]"#);
        assert_eq!((tied.extracted.as_deref(), tied.score), (Some("B"), 0.0));
        assert_eq!(tied.metrics["label_tie"], 1.0);
    }

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
            // Issue 14's phrasings.
            ("The answer is not A. It is C.", Some('C')),
            ("A and B are wrong; C", Some('C')),
            ("The answer is: Option B", Some('B')),
            ("Answer \u{2014} B", Some('B')),
            ("Option C is correct.", Some('C')),
            ("I would choose D because it is the largest.", Some('D')),
            ("None of the options (A-D) is correct.", None),
            ("Answer\u{FF1A}D", Some('D')),
            ("A common mistake is to pick the first option.", None),
            ("A. Paris\nB. London\nC. Rome\nD. Madrid", None),
            ("The answer is A. No wait, the answer is B.", None),
            // Issue 25's three classes: a lowercase letter as the whole answer or after "the
            // answer is" …
            ("b", Some('B')),
            ("  (c)", Some('C')),
            ("d.", Some('D')),
            ("a", Some('A')),
            ("the answer is c because the others are smaller", Some('C')),
            ("The answer is b since it doubles", Some('B')),
            // … an explicit answer followed by a parenthetical naming another letter …
            (
                "The answer is B (option A would hold only for ideal gases).",
                Some('B'),
            ),
            ("The answer is B (C is a common distractor).", Some('B')),
            // … and a final preference after hedging between two letters.
            ("It could be A or C, but C is best.", Some('C')),
            (
                "Both B and D seem plausible, but D is the better answer.",
                Some('D'),
            ),
            // Where a careful reader would not guess, neither does the reader.
            ("The correct answer is A (B)", None),
            ("It could be A or C, but C is wrong.", None),
            ("A or C, I am not sure.", None),
            ("the answer is a bit unclear", None),
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
