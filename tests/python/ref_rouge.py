"""Reference ROUGE scores from Google's rouge-score package (the implementation behind most
published ROUGE numbers), for cross-checking bench360's Rust port.

Reads JSONL on stdin, one object per line: {"id": ..., "prediction": str, "reference": str}.
Writes JSONL on stdout, one line per input line, in order:
  {"id": ..., "rouge1": F, "rouge2": F, "rougeL": F, "rougeLsum": F}
where F is the F-measure (floats as Python's shortest round-trip repr). Scored as
RougeScorer([...], use_stemmer=True).score(target=reference, prediction=prediction), with the
default split_summaries=False, so no nltk data (punkt) is ever loaded.

What the Rust side must match (rouge_score 0.1.2, rouge_score/tokenize.py and rouge_scorer.py):
- Tokenizing: text.lower() (full Unicode lowercasing), then every run of characters outside
  ASCII [a-z0-9] becomes one space, split on whitespace; tokens longer than 3 characters go
  through nltk's PorterStemmer (NLTK_EXTENSIONS mode); empty tokens are dropped.
- rougeN: clipped n-gram overlap counts; P = overlap / max(#pred n-grams, 1),
  R = overlap / max(#ref n-grams, 1); F = 2PR/(P+R), or 0 when P+R == 0.
- rougeL: LCS over the whole token sequences; 0 when either side has no tokens.
- rougeLsum: each text is split on "\n" only (str.split("\n"): not "\r", not other Unicode line
  breaks; a "\r" left at a line end is just a separator to the tokenizer); empty lines
  (length 0) are dropped; every line is tokenized on its own. Summary-level LCS: for each
  reference line, the union of the token positions of one LCS with every prediction line
  (one LCS per pair, read from the DP table by backtracking from the end: on a match take it,
  else step left (prediction side) only when table[i][j-1] > table[i-1][j], otherwise step up),
  each union token counted as a hit only while both sides' remaining token counts (over the
  whole summaries) are positive, which are then decremented. P = hits / total prediction
  tokens, R = hits / total reference tokens. With no "\n" in either text, rougeLsum equals
  rougeL exactly.
"""
import json
import sys

from rouge_score import rouge_scorer

TYPES = ["rouge1", "rouge2", "rougeL", "rougeLsum"]


def main():
    scorer = rouge_scorer.RougeScorer(TYPES, use_stemmer=True)
    out = sys.stdout
    for line in sys.stdin:
        if not line.strip():
            continue
        row = json.loads(line)
        scores = scorer.score(row["reference"], row["prediction"])
        result = {"id": row.get("id")}
        for t in TYPES:
            result[t] = float(scores[t].fmeasure)
        out.write(json.dumps(result) + "\n")
    out.flush()


if __name__ == "__main__":
    main()
