//! Summarization on CNN/DailyMail: ROUGE-1/2/L/Lsum F-measures (rouge-score with stemming)
//! of the whole output against the reference highlights. Both sides are put one sentence per
//! line before scoring, so ROUGE-Lsum is summary-level as intended.

use std::collections::BTreeMap;
use std::path::Path;

use serde::Deserialize;

use super::rouge;
use super::{read_jsonl, DatasetError, Sample, Score, TaskDef};

pub(crate) const TEMPLATE: &str = "summarization/1\n\
Summarize the following news article in three sentences.\n\n\
{shots: Article/Summary blocks}\n\
Article: {article, cut to `article-words` words}\n\nSummary:";
pub(crate) const METRIC: &str = "rouge-score-0.1.2-stemmed/1 (sentence lines v1)";

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
        let mut prompt =
            String::from("Summarize the following news article in three sentences.\n\n");
        for s in super::shot_indices(items.len(), &order, i, def.shots, seed, &item.id) {
            let shot = &items[s];
            prompt.push_str(&format!(
                "Article: {}\n\nSummary: {}\n\n",
                cut(&shot.article, words),
                shot.highlights.trim()
            ));
        }
        prompt.push_str(&format!(
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
        });
    }
    Ok(out)
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
    let metrics = rouge_metrics(&sample.reference, output);
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
