#!/usr/bin/env python3
"""Example external scorer for bench360 custom tasks (standard library only).

Reads one JSON object per line on stdin — {"id", "prompt", "output", "reference",
"references", "fields"} — and writes one per line on stdout: {"id", "score", ...}. Here: 1 when
the first word of the output is the reference ("yes"/"no"), plus `hedged` = 1 when the output
contains both words (recorded by bench360 as `scorer_hedged`)."""
import json
import re
import sys

for line in sys.stdin:
    if not line.strip():
        continue
    item = json.loads(line)
    words = re.findall(r"[a-z]+", item["output"].lower())
    first = words[0] if words else ""
    print(json.dumps({
        "id": item["id"],
        "score": 1.0 if first == item["reference"].strip().lower() else 0.0,
        "hedged": 1.0 if {"yes", "no"} <= set(words) else 0.0,
    }))
