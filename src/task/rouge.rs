//! ROUGE-1, ROUGE-2, ROUGE-L and ROUGE-Lsum F-measures, computed the way the `rouge-score`
//! package (Google Research) computes them with `use_stemmer=True`:
//! - tokens: lower-case, every run of characters outside `[a-z0-9]` becomes a space, split on
//!   whitespace, tokens longer than 3 characters Porter-stemmed (NLTK's variant), then only
//!   tokens matching `^[a-z0-9]+$` kept;
//! - ROUGE-N: clipped n-gram overlap; precision over the prediction's n-grams, recall over the
//!   reference's (denominators at least 1);
//! - ROUGE-L: longest common subsequence over the whole texts;
//! - ROUGE-Lsum: summary-level LCS over sentences separated by newlines (union LCS per
//!   reference sentence, each token counted at most as often as it occurs on both sides);
//! - F = 2PR / (P + R), 0 when P + R = 0.

use std::collections::HashMap;

use super::porter;

#[derive(Debug, Clone, Copy, PartialEq, Default, serde::Serialize)]
pub(crate) struct Prf {
    pub precision: f64,
    pub recall: f64,
    pub f: f64,
}

fn prf(precision: f64, recall: f64) -> Prf {
    let f = if precision + recall > 0.0 {
        2.0 * precision * recall / (precision + recall)
    } else {
        0.0
    };
    Prf {
        precision,
        recall,
        f,
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Default, serde::Serialize)]
pub(crate) struct Rouge {
    pub rouge1: Prf,
    pub rouge2: Prf,
    pub rouge_l: Prf,
    pub rouge_lsum: Prf,
}

pub(crate) fn tokenize(text: &str) -> Vec<String> {
    let lower = text.to_lowercase();
    let mut tokens = Vec::new();
    let mut cur = String::new();
    // Python's `re.sub(r"[^a-z0-9]+", " ")` then split on whitespace: every character other
    // than ASCII lower-case letters and digits separates tokens.
    for c in lower.chars() {
        if c.is_ascii_lowercase() || c.is_ascii_digit() {
            cur.push(c);
        } else if !cur.is_empty() {
            tokens.push(std::mem::take(&mut cur));
        }
    }
    if !cur.is_empty() {
        tokens.push(cur);
    }
    tokens
        .into_iter()
        .map(|t| if t.len() > 3 { porter::stem(&t) } else { t })
        .filter(|t| !t.is_empty())
        .collect()
}

fn ngrams(tokens: &[String], n: usize) -> HashMap<&[String], usize> {
    let mut m = HashMap::new();
    if tokens.len() >= n {
        for w in tokens.windows(n) {
            *m.entry(w).or_insert(0) += 1;
        }
    }
    m
}

fn rouge_n(reference: &[String], prediction: &[String], n: usize) -> Prf {
    let r = ngrams(reference, n);
    let p = ngrams(prediction, n);
    let overlap: usize = r
        .iter()
        .map(|(g, c)| (*c).min(p.get(g).copied().unwrap_or(0)))
        .sum();
    let rc: usize = r.values().sum();
    let pc: usize = p.values().sum();
    prf(
        overlap as f64 / pc.max(1) as f64,
        overlap as f64 / rc.max(1) as f64,
    )
}

/// Dynamic-programming LCS table, (len(a)+1) × (len(b)+1), row-major.
fn lcs_table(a: &[String], b: &[String]) -> Vec<u32> {
    let cols = b.len() + 1;
    let mut t = vec![0u32; (a.len() + 1) * cols];
    for i in 1..=a.len() {
        for j in 1..=b.len() {
            t[i * cols + j] = if a[i - 1] == b[j - 1] {
                t[(i - 1) * cols + j - 1] + 1
            } else {
                t[(i - 1) * cols + j].max(t[i * cols + j - 1])
            };
        }
    }
    t
}

fn rouge_l(reference: &[String], prediction: &[String]) -> Prf {
    if reference.is_empty() || prediction.is_empty() {
        return Prf::default();
    }
    let t = lcs_table(reference, prediction);
    let lcs = t[t.len() - 1] as f64;
    prf(lcs / prediction.len() as f64, lcs / reference.len() as f64)
}

/// Indices into `a` of one LCS of `a` and `b`, chosen by the same backtracking rule as
/// rouge-score (move left only when the cell to the left is strictly larger than the one up).
fn lcs_indices(a: &[String], b: &[String]) -> Vec<usize> {
    let t = lcs_table(a, b);
    let cols = b.len() + 1;
    let (mut i, mut j) = (a.len(), b.len());
    let mut out = Vec::new();
    while i > 0 && j > 0 {
        if a[i - 1] == b[j - 1] {
            out.push(i - 1);
            i -= 1;
            j -= 1;
        } else if t[i * cols + j - 1] > t[(i - 1) * cols + j] {
            j -= 1;
        } else {
            i -= 1;
        }
    }
    out.reverse();
    out
}

fn rouge_lsum(reference: &[Vec<String>], prediction: &[Vec<String>]) -> Prf {
    let m: usize = reference.iter().map(Vec::len).sum();
    let n: usize = prediction.iter().map(Vec::len).sum();
    if reference.is_empty() || prediction.is_empty() || m == 0 || n == 0 {
        return Prf::default();
    }
    let mut count_r: HashMap<&str, i64> = HashMap::new();
    let mut count_p: HashMap<&str, i64> = HashMap::new();
    for t in reference.iter().flatten() {
        *count_r.entry(t).or_default() += 1;
    }
    for t in prediction.iter().flatten() {
        *count_p.entry(t).or_default() += 1;
    }
    let mut hits = 0usize;
    for r in reference {
        let mut union: Vec<usize> = prediction.iter().flat_map(|p| lcs_indices(r, p)).collect();
        union.sort_unstable();
        union.dedup();
        for i in union {
            let t = r[i].as_str();
            let (cr, cp) = (count_r.get(t).copied(), count_p.get(t).copied());
            if cr.unwrap_or(0) > 0 && cp.unwrap_or(0) > 0 {
                hits += 1;
                *count_r.get_mut(t).expect("present") -= 1;
                *count_p.get_mut(t).expect("present") -= 1;
            }
        }
    }
    prf(hits as f64 / n as f64, hits as f64 / m as f64)
}

/// Non-empty lines, as rouge-score splits texts for ROUGE-Lsum.
fn lines(text: &str) -> Vec<&str> {
    text.split('\n').filter(|l| !l.is_empty()).collect()
}

/// All four scores of `prediction` against `reference`. For ROUGE-Lsum, sentences are the
/// texts' lines: pass texts through [`sentence_lines`] first to score sentence by sentence.
pub(crate) fn score(reference: &str, prediction: &str) -> Rouge {
    let r = tokenize(reference);
    let p = tokenize(prediction);
    let rs: Vec<Vec<String>> = lines(reference).into_iter().map(tokenize).collect();
    let ps: Vec<Vec<String>> = lines(prediction).into_iter().map(tokenize).collect();
    Rouge {
        rouge1: rouge_n(&r, &p, 1),
        rouge2: rouge_n(&r, &p, 2),
        rouge_l: rouge_l(&r, &p),
        rouge_lsum: rouge_lsum(&rs, &ps),
    }
}

/// One sentence per line: splits each line after `.`, `!` or `?` (optionally followed by
/// closing quotes or brackets) when whitespace follows. PTB-tokenised references such as
/// CNN/DailyMail's highlights ("… Friday . The club …") split the same way. Empty sentences
/// are dropped.
pub(crate) fn sentence_lines(text: &str) -> String {
    let mut out: Vec<String> = Vec::new();
    for line in text.lines() {
        let chars: Vec<char> = line.chars().collect();
        let mut cur = String::new();
        let mut i = 0;
        while i < chars.len() {
            let c = chars[i];
            cur.push(c);
            if matches!(c, '.' | '!' | '?') {
                let mut j = i + 1;
                while j < chars.len() && matches!(chars[j], '"' | '\'' | ')' | ']' | '’' | '”')
                {
                    cur.push(chars[j]);
                    j += 1;
                }
                if j >= chars.len() || chars[j].is_whitespace() {
                    let s = cur.trim();
                    if !s.is_empty() {
                        out.push(s.to_string());
                    }
                    cur.clear();
                }
                i = j;
                continue;
            }
            i += 1;
        }
        let s = cur.trim();
        if !s.is_empty() {
            out.push(s.to_string());
        }
    }
    out.join("\n")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn close(a: f64, b: f64) {
        assert!((a - b).abs() < 1e-12, "{a} vs {b}");
    }

    #[test]
    fn tokenizes_lowercases_and_stems_like_rouge_score() {
        assert_eq!(
            tokenize("The Cats' running-shoes, 2015!"),
            ["the", "cat", "run", "shoe", "2015"]
        );
        // Non-ASCII letters separate tokens, as `[^a-z0-9]+` does.
        assert_eq!(tokenize("café naïve"), ["caf", "na", "ve"]);
        assert!(tokenize(" ... ").is_empty());
    }

    #[test]
    fn hand_checked_scores() {
        // Reference "the cat sat on the mat", prediction "the cat lay on the mat".
        let s = score("the cat sat on the mat", "the cat lay on the mat");
        close(s.rouge1.f, 5.0 / 6.0);
        // Bigrams: ref {the cat, cat sat, sat on, on the, the mat}; pred {the cat, cat lay,
        // lay on, on the, the mat}: 3 shared of 5.
        close(s.rouge2.f, 3.0 / 5.0);
        // LCS "the cat on the mat" = 5 of 6.
        close(s.rouge_l.f, 5.0 / 6.0);
        close(s.rouge_lsum.f, 5.0 / 6.0);
        // Clipping: "the the the" vs "the cat": 1 overlap; P = 1/3, R = 1/2.
        let s = score("the cat", "the the the");
        close(s.rouge1.precision, 1.0 / 3.0);
        close(s.rouge1.recall, 0.5);
        close(s.rouge1.f, 0.4);
        // Nothing in common, or empty.
        assert_eq!(score("a b", "c d").rouge1.f, 0.0);
        assert_eq!(score("", "c d").rouge_l.f, 0.0);
        assert_eq!(score("a", "").rouge_lsum.f, 0.0);
    }

    #[test]
    fn summary_level_lcs_unions_over_prediction_sentences() {
        // Lin (2004), section 3.2: r = "w1 w2 w3 w4 w5", c1 = "w1 w2 w6 w7 w8",
        // c2 = "w1 w3 w8 w9 w5": union LCS = w1 w2 w3 w5 → 4 hits.
        let r = "w1 w2 w3 w4 w5";
        let c = "w1 w2 w6 w7 w8\nw1 w3 w8 w9 w5";
        let s = score(r, c);
        close(s.rouge_lsum.recall, 4.0 / 5.0);
        close(s.rouge_lsum.precision, 4.0 / 10.0);
        // Whole-text LCS differs: w1 w2 w3 w5 as well here, but over the joined text.
        close(s.rouge_l.recall, 4.0 / 5.0);
    }

    #[test]
    fn splits_sentences_one_per_line() {
        assert_eq!(
            sentence_lines("Locke will be confirmed on Friday . The club went unbeaten . "),
            "Locke will be confirmed on Friday .\nThe club went unbeaten ."
        );
        assert_eq!(
            sentence_lines("He said \"no.\" Then left!\nWhy? 3.5 is fine"),
            "He said \"no.\"\nThen left!\nWhy?\n3.5 is fine"
        );
    }
}
