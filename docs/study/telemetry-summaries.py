#!/usr/bin/env python3
"""Every run's telemetry summary in a bench360 cache, keyed by the run's label, as one JSON
object on stdout (what the device scripts bring back: telemetry-summaries.json).

    python3 docs/study/telemetry-summaries.py CACHE_DIR
"""
import glob
import json
import os
import sys

c = sys.argv[1]
out = {}
for f in sorted(glob.glob(os.path.join(c, "records", "*.json"))):
    r = json.load(open(f))
    t = os.path.join(c, "objects", r.get("key", ""), "telemetry.json")
    if os.path.exists(t):
        out[r.get("label", r.get("key"))] = json.load(open(t))
json.dump(out, sys.stdout, indent=1)
