//! The extraction rules against a hand-labelled corpus of real model outputs
//! (`tests/fixtures/extraction/`: SmolLM2-135M and Qwen2.5-Coder-0.5B/1.5B on llama.cpp, chat
//! prompts as the tasks build them, each output labelled by a person with what a careful
//! reader takes as the answer). Agreement must be at least 98 % per task; every disagreement
//! is printed.

use std::path::PathBuf;

use serde_json::Value;

fn corpus(task: &str) -> Vec<Value> {
    let p = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures/extraction")
        .join(format!("{task}.jsonl"));
    std::fs::read_to_string(&p)
        .unwrap_or_else(|e| panic!("{}: {e}", p.display()))
        .lines()
        .filter(|l| !l.trim().is_empty())
        .map(|l| serde_json::from_str(l).expect("corpus line"))
        .collect()
}

/// Compares `read(output)` with each label; prints every disagreement; returns the rate.
fn agreement(task: &str, same: &dyn Fn(&Value) -> (bool, String, String)) -> f64 {
    let items = corpus(task);
    let mut bad = Vec::new();
    for it in &items {
        let (ok, got, want) = same(it);
        if !ok {
            bad.push(format!(
                "  {}: got {got:?}, labelled {want:?}\n    output: {:?}",
                it["id"].as_str().unwrap_or("?"),
                it["output"]
                    .as_str()
                    .unwrap_or("")
                    .chars()
                    .take(300)
                    .collect::<String>()
            ));
        }
    }
    let rate = 1.0 - bad.len() as f64 / items.len() as f64;
    println!(
        "{task}: {} of {} agree ({:.1}%)",
        items.len() - bad.len(),
        items.len(),
        rate * 100.0
    );
    for b in &bad {
        println!("{b}");
    }
    assert!(
        items.len() >= 150,
        "{task}: only {} labelled outputs",
        items.len()
    );
    rate
}

fn output(it: &Value) -> &str {
    it["output"].as_str().unwrap_or("")
}

fn collapse(s: &str) -> String {
    s.split_whitespace().collect::<Vec<_>>().join(" ")
}

#[test]
fn mmlu_letters_agree_with_the_labels() {
    let rate = agreement("mmlu", &|it| {
        let got = super::mmlu::extract_letter(output(it)).map(String::from);
        let want = it["label"].as_str().map(String::from);
        (got == want, format!("{got:?}"), format!("{want:?}"))
    });
    assert!(rate >= 0.98, "mmlu agreement {rate:.3}");
}

#[test]
fn squad_answers_agree_with_the_labels() {
    let rate = agreement("squad_v2", &|it| {
        let got = super::squad::extract_answer(output(it));
        let want = it["label"].as_str().unwrap_or("").to_string();
        // What is scored: the answers after SQuAD's normalisation.
        let same = super::squad::normalize_answer(&got) == super::squad::normalize_answer(&want);
        (same, got, want)
    });
    assert!(rate >= 0.98, "squad agreement {rate:.3}");
}

#[test]
fn sql_statements_agree_with_the_labels() {
    let rate = agreement("text2sql", &|it| {
        let got = super::sql::extract_sql(output(it));
        let want = it["label"].as_str().map(String::from);
        let norm = |s: &Option<String>| {
            s.as_deref()
                .map(|x| collapse(x.trim().trim_end_matches(';')))
        };
        (
            norm(&got) == norm(&want),
            format!("{got:?}"),
            format!("{want:?}"),
        )
    });
    assert!(rate >= 0.98, "text2sql agreement {rate:.3}");
}

#[test]
fn summaries_agree_with_the_labels() {
    let rate = agreement("summarization", &|it| {
        let got = super::summarization::summary_text(output(it));
        let want = it["label"].as_str().unwrap_or("").to_string();
        (collapse(&got) == collapse(&want), got, want)
    });
    assert!(rate >= 0.98, "summarization agreement {rate:.3}");
}
