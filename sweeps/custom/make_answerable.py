#!/usr/bin/env python3
"""Derives answerable.jsonl (the custom-task example's dataset) from the SQuAD v2 subset in
datasets/squad_v2: every 12th question, with its context, title and whether the context
answers it ("yes"/"no", from SQuAD's own `is_impossible`). Deterministic: re-running writes the
same bytes. Usage: python3 sweeps/custom/make_answerable.py"""
import json
import pathlib

here = pathlib.Path(__file__).resolve().parent
src = here.parent.parent / "datasets" / "squad_v2" / "dev_subset.jsonl"
rows = [json.loads(line) for line in src.read_text(encoding="utf-8").splitlines() if line.strip()]
with open(here / "answerable.jsonl", "w", encoding="utf-8") as out:
    for row in rows[::12]:
        out.write(json.dumps({
            "id": row["id"],
            "title": row["title"],
            "context": row["context"],
            "question": row["question"],
            "answerable": "no" if row["is_impossible"] else "yes",
        }, ensure_ascii=False) + "\n")
