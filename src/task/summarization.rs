//! Summarization on CNN/DailyMail: ROUGE-1/2/L/Lsum F-measures (rouge-score with stemming)
//! of the output (without chat framing) against the reference highlights. Both sides are put one sentence per
//! line before scoring, so ROUGE-Lsum is summary-level as intended.

use std::collections::BTreeMap;
use std::path::Path;
use std::sync::LazyLock;

use regex::Regex;
use serde::Deserialize;

use super::rouge;
use super::{read_jsonl, DatasetError, Sample, Score, TaskDef};

pub(crate) const TEMPLATE: &str = "summarization/1\n\
Summarize the following news article in three sentences.\n\n\
{shots: Article/Summary blocks}\n\
Article: {article, cut to `article-words` words}\n\nSummary:";
pub(crate) const METRIC: &str =
    "rouge-score-0.1.2-stemmed/1 (sentence lines v1; chat framing removed v2)";

#[derive(Debug, Deserialize)]
struct Item {
    id: String,
    article: String,
    highlights: String,
    #[serde(default)]
    source: Option<String>,
}

fn cut(article: &str, words: usize) -> String {
    let w: Vec<&str> = article.split_whitespace().collect();
    if w.len() <= words {
        w.join(" ")
    } else {
        format!("{} …", w[..words].join(" "))
    }
}

pub(crate) fn load(def: &TaskDef, dir: &Path, seed: u64) -> Result<Vec<Sample>, DatasetError> {
    let path = dir.join("test_subset.jsonl");
    let items: Vec<Item> = read_jsonl(&path)?;
    for (i, item) in items.iter().enumerate() {
        if item.highlights.trim().is_empty() {
            return Err(DatasetError::Line {
                path: path.display().to_string(),
                line: i + 1,
                message: format!("`{}` has an empty reference summary", item.id),
            });
        }
    }
    if items.is_empty() {
        return Err(DatasetError::File {
            path: path.display().to_string(),
            message: "no articles".into(),
        });
    }
    let words = def.article_words;
    let order = super::sample_order(items.len(), def.samples, seed, "summarization/order");
    let mut out = Vec::with_capacity(order.len());
    for &i in &order {
        let item = &items[i];
        let mut shots = super::Shots::new(
            "Summarize the following news article in three sentences.\n\n",
            def.fewshot_as_turns,
        );
        for s in super::shot_indices(items.len(), &order, i, def.shots, seed, &item.id) {
            let shot = &items[s];
            shots.push(
                &format!("Article: {}\n\nSummary:", cut(&shot.article, words)),
                shot.highlights.trim(),
            );
        }
        let (prompt, history) = shots.finish(&format!(
            "Article: {}\n\nSummary:",
            cut(&item.article, words)
        ));
        let mut groups = BTreeMap::new();
        if let Some(s) = &item.source {
            groups.insert("source".to_string(), s.clone());
        }
        out.push(Sample {
            id: item.id.clone(),
            system: def.system.clone(),
            prompt,
            reference: item.highlights.clone(),
            references: vec![item.highlights.clone()],
            groups,
            extra: BTreeMap::new(),
            history,
            ..Default::default()
        });
    }
    Ok(out)
}

static FRAMING_FIRST: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(r"(?i)^\W*(?:(?:sure|certainly|of course|okay|ok|here(?:'s| is| are)|below is|the following is)\b[^\n]*?(?:summary|summari[sz]ed?|sentences?|version)[^\n]*|summary)\s*:\s*$")
        .expect("valid regex")
});
static INTERJECTION: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(r"^(?i:sure|certainly|of course|absolutely|okay)[!,.]\s+").expect("valid regex")
});
static FRAMING_LAST: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(r"(?i)^\W*(?:let me know|i hope (?:this|that)\b|feel free to|if you (?:need|want|have)|is there anything else)")
        .expect("valid regex")
});

/// The summary in an output: all of it but chat framing — a first line that announces the
/// summary and ends with ":" ("Sure! Here is a three-sentence summary:"), and a last line that
/// offers more help ("Let me know if you need anything else.").
pub(crate) fn summary_text(output: &str) -> String {
    let mut lines: Vec<&str> = output.lines().collect();
    while lines.first().is_some_and(|l| l.trim().is_empty()) {
        lines.remove(0);
    }
    if lines.len() > 1 && FRAMING_FIRST.is_match(lines[0].trim()) {
        lines.remove(0);
    }
    while lines.last().is_some_and(|l| l.trim().is_empty()) {
        lines.pop();
    }
    if lines.len() > 1 && FRAMING_LAST.is_match(lines[lines.len() - 1].trim()) {
        lines.pop();
    }
    let text = lines.join("\n");
    // A leading interjection on the summary's own line: "Certainly! John Travolta says …".
    INTERJECTION.replace(text.trim(), "").trim().to_string()
}

/// ROUGE of a whole output (every line of it) against one reference.
pub(crate) fn rouge_metrics(reference: &str, output: &str) -> BTreeMap<String, f64> {
    let r = rouge::score(
        &rouge::sentence_lines(reference),
        &rouge::sentence_lines(output),
    );
    BTreeMap::from([
        ("rouge1".to_string(), r.rouge1.f),
        ("rouge2".to_string(), r.rouge2.f),
        ("rougeL".to_string(), r.rouge_l.f),
        ("rougeLsum".to_string(), r.rouge_lsum.f),
    ])
}

pub(crate) fn score(sample: &Sample, output: &str) -> Score {
    let metrics = rouge_metrics(&sample.reference, &summary_text(output));
    Score {
        score: metrics["rougeL"],
        metrics,
        ..Score::default()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn scores_the_whole_output_not_its_first_line() {
        let s = Sample {
            reference: "The cat sat on the mat . It was happy .".into(),
            ..Sample::default()
        };
        let one = score(&s, "The cat sat on the mat.");
        let two = score(&s, "The cat sat on the mat.\nIt was happy.");
        assert!(two.metrics["rouge1"] > one.metrics["rouge1"]);
        assert!((two.metrics["rouge1"] - 1.0).abs() < 1e-12);
        assert!((two.metrics["rougeLsum"] - 1.0).abs() < 1e-12);
    }

    #[test]
    fn loads_articles_cut_to_length() {
        let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("datasets/cnn_dailymail");
        let mut def = super::super::tests::def(crate::spec::TaskKind::Summarization, Some(4));
        def.article_words = 50;
        let s = load(&def, &dir, 1).unwrap();
        assert_eq!(s.len(), 4);
        for x in &s {
            let article = x.prompt.split("Article: ").nth(1).unwrap();
            assert!(article.split_whitespace().count() <= 53, "{article}");
            assert!(x.prompt.ends_with("Summary:"));
        }
    }
}
