"""Analysis of a bench360 cache from Python, as a notebook would do it.

Loads the sweep's summary (one row per run) and the raw per-request traces of every run with
duckdb, prints the configurations ranked by p95 TTFT, and redraws one plot of the report —
TTFT p50 and p99 per run with their request counts — as a standalone SVG (no plotting
library needed; with matplotlib, `df.plot` on the same frames does it).

Usage: python notebooks/analysis.py CACHE_DIR SWEEP_NAME [OUT.svg]
Requires: duckdb (pyarrow for the optional Arrow tables).
"""
import os
import sys

import duckdb


def main(cache, sweep, out_svg):
    summary = os.path.join(cache, "reports", sweep, "summary.parquet")
    requests = os.path.join(cache, "objects", "*", "requests.parquet")
    con = duckdb.connect()
    runs = con.execute(
        f"""select label, scenario_kind, ok, requests, ttft_p50_ms, ttft_p95_ms, output_tokens_per_s, quality
            from read_parquet('{summary}') where status = 'ok' order by ttft_p95_ms"""
    ).fetchall()
    print(f"{len(runs)} finished runs, fastest p95 TTFT first:")
    for label, kind, ok, n, p50, p95, tps, acc in runs:
        print(f"  {label:60s} {kind:8s} {ok}/{n}  TTFT p50 {p50:8.1f} ms  p95 {p95:8.1f} ms  {tps:7.1f} tok/s  quality {acc}")
    # The same percentiles recomputed from the raw traces of this sweep's runs.
    per_run = con.execute(
        f"""select r.node_key, s.label, count(*) n,
                   quantile_cont(r.ttft_ms, 0.5) p50, quantile_cont(r.ttft_ms, 0.99) p99
            from read_parquet('{requests}') r join read_parquet('{summary}') s on r.node_key = s.node_key
            where r.ok group by 1, 2 order by 2"""
    ).fetchall()
    for key, label, n, p50, p99 in per_run:
        row = con.execute(f"select ttft_p50_ms from read_parquet('{summary}') where node_key = ?", [key]).fetchone()
        assert abs(row[0] - p50) < 1e-6, (label, row[0], p50)
    # Redraw: TTFT p50 and p99 per run.
    width, height, left, bottom = 760, 40 + 26 * len(per_run), 330, 30
    top = max((p99 for *_, p99 in per_run), default=1.0) or 1.0
    scale = (width - left - 60) / top
    parts = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height + bottom}" font-family="sans-serif" font-size="11">',
             '<text x="10" y="18" font-size="14" font-weight="bold">TTFT per run (p50 bar, p99 tick), ms</text>']
    for i, (_, label, n, p50, p99) in enumerate(per_run):
        y = 36 + 26 * i
        parts.append(f'<text x="{left - 6}" y="{y + 13}" text-anchor="end">{label[-52:]} (n={n})</text>')
        parts.append(f'<rect class="p50" x="{left}" y="{y}" width="{p50 * scale:.1f}" height="18" fill="#1f77b4"/>')
        parts.append(f'<line class="p99" x1="{left + p99 * scale:.1f}" y1="{y - 2}" x2="{left + p99 * scale:.1f}" y2="{y + 20}" stroke="#d62728" stroke-width="2"/>')
        parts.append(f'<text x="{left + p99 * scale + 4:.1f}" y="{y + 13}">{p50:.0f} / {p99:.0f}</text>')
    parts.append("</svg>")
    with open(out_svg, "w") as f:
        f.write("\n".join(parts))
    print(f"wrote {out_svg} ({len(per_run)} runs)")


if __name__ == "__main__":
    if len(sys.argv) < 3:
        sys.exit(__doc__)
    main(sys.argv[1], sys.argv[2], sys.argv[3] if len(sys.argv) > 3 else "ttft.svg")
