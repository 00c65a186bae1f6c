"""Outside check (docs/study/README.md, "The answer slice") of the report's paired comparison: per-item means from scores.parquet with
duckdb, the paired difference, and a numpy bootstrap (independent RNG) of its interval."""
import duckdb, glob, sys
import numpy as np
con = duckdb.connect()
files = glob.glob(sys.argv[1] + '/objects/*/scores.parquet')
q = f"""select model, engine, scenario, sample_id, avg(score) s
        from read_parquet({files!r}, union_by_name=true) where task='mmlu'
        group by all"""
items = {}
for m, e, sc, sid, s in con.execute(q).fetchall():
    items.setdefault((m, e, sc), {})[sid] = s
a = items[('qwen2.5-coder-1.5b', 'llama-p32', 'c32')]
b = items[('qwen2.5-coder-1.5b', 'llama-p8', 'c32')]
c = items[('qwen2.5-coder-0.5b', 'llama-p32', 'c32')]
rng = np.random.default_rng(1)
for name, x, y in [('p8 - p32 (1.5B, c32)', a, b), ('0.5B - 1.5B (p32, c32)', a, c)]:
    keys = sorted(set(x) & set(y))
    d = np.array([y[k] - x[k] for k in keys])
    boots = [d[rng.integers(0, len(d), len(d))].mean() for _ in range(4000)]
    print(f"{name}: items {len(d)}, delta {100*d.mean():+.2f} pt, 95% [{100*np.percentile(boots,2.5):+.2f}, {100*np.percentile(boots,97.5):+.2f}]")
