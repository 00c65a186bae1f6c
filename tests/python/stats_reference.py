"""Writes tests/fixtures/stats/reference.json: the reference values that src/record/paired.rs
is tested against. Run once when a case is added, never by the test suite:

    python3 -m venv /tmp/ref && /tmp/ref/bin/pip install scipy==1.16.3 numpy==2.4.6
    /tmp/ref/bin/python tests/python/stats_reference.py > tests/fixtures/stats/reference.json

- McNemar's exact test: scipy.stats.binomtest(min(b, c), b + c, 0.5).pvalue (two-sided),
  which is statsmodels' mcnemar(exact=True) for the discordant counts.
- The paired bootstrap: written out here from its textbook definition (resample the items
  with replacement, take the mean difference, the 2.5th and 97.5th percentiles with numpy's
  default linear interpolation), driven by the same SplitMix64 generator bench360 uses, so
  that the two must agree to rounding.
- The slope: scipy.stats.linregress, interval slope ± t.ppf(0.975, n − 2) · stderr.
- Order-statistic intervals: the ranks found with scipy.stats.binom.cdf by the same rule.
- Items needed: the normal-approximation sample size of a paired test at 5 % with 80 % power,
  from scipy's normal quantiles.
"""

import json
import math

import numpy as np
from scipy import stats

MASK = (1 << 64) - 1


class SplitMix64:
    def __init__(self, seed):
        self.state = seed & MASK

    def next_u64(self):
        self.state = (self.state + 0x9E3779B97F4A7C15) & MASK
        z = self.state
        z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & MASK
        z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & MASK
        return z ^ (z >> 31)

    def below(self, n):
        return (self.next_u64() * n) >> 64


def paired_bootstrap(diffs, rounds, seed):
    rng = SplitMix64(seed)
    n = len(diffs)
    means = []
    for _ in range(rounds):
        s = 0.0
        for _ in range(n):
            s += diffs[rng.below(n)]
        means.append(s / n)
    return float(np.percentile(means, 2.5)), float(np.percentile(means, 97.5))


def main():
    out = {"mcnemar": [], "paired_bootstrap": []}
    for b, c in [(0, 0), (1, 0), (3, 7), (10, 10), (12, 30), (40, 25), (0, 9), (150, 190), (600, 520)]:
        p = 1.0 if b + c == 0 else stats.binomtest(min(b, c), b + c, 0.5).pvalue
        out["mcnemar"].append({"b": b, "c": c, "p": min(1.0, float(p))})

    rng = np.random.default_rng(20261201)
    cases = [
        ([1, 0, 0, -1, 1, 1, 0, 0, 1, 0], 17, 1000),
        ([float(x) for x in rng.integers(-1, 2, size=200)], 4242, 2000),
        ([round(float(x), 6) for x in rng.normal(0.03, 0.2, size=57)], 9, 500),
    ]
    for diffs, seed, rounds in cases:
        diffs = [float(d) for d in diffs]
        lo, hi = paired_bootstrap(diffs, rounds, seed)
        out["paired_bootstrap"].append(
            {"diffs": diffs, "seed": seed, "rounds": rounds, "low": lo, "high": hi}
        )

    x = [float(i) for i in range(40)]
    y = [round(100 + 2.5 * xi + float(e), 6) for xi, e in zip(x, rng.normal(0, 8, size=40))]
    fit = stats.linregress(x, y)
    t = stats.t.ppf(0.975, len(x) - 2)
    out["slope"] = {
        "x": x,
        "y": y,
        "slope": float(fit.slope),
        "low": float(fit.slope - t * fit.stderr),
        "high": float(fit.slope + t * fit.stderr),
    }

    # Order-statistic intervals of a percentile: 1-based ranks from scipy's binomial.
    out["order_statistic"] = []
    for n, q, alpha in [(12, 50, 0.025), (12, 99, 0.025), (100, 50, 0.05), (100, 95, 0.05),
                        (400, 99, 0.05), (500, 99, 0.025), (36, 90, 0.05), (35, 90, 0.05)]:
        p = q / 100
        lo = 0
        while lo < n and stats.binom.cdf(lo, n, p) <= alpha / 2:
            lo += 1
        hi = 1
        while hi <= n and stats.binom.cdf(hi - 1, n, p) < 1 - alpha / 2:
            hi += 1
        ranks = [float(lo), float(hi)] if lo >= 1 and hi <= n else None
        out["order_statistic"].append({"n": n, "q": q, "alpha": alpha, "ranks": ranks})
    out["binomial_cdf"] = [
        {"k": k, "n": n, "p": p, "cdf": float(stats.binom.cdf(k, n, p))}
        for k, n, p in [(3, 12, 0.5), (0, 368, 0.99), (360, 368, 0.99), (40, 100, 0.5), (2, 50, 0.05)]
    ]

    diffs = [float(x) for x in rng.choice([-1.0, 0.0, 0.0, 0.0, 1.0, 1.0], size=300)]
    d = np.array(diffs)
    z = stats.norm.ppf(0.975) + stats.norm.ppf(0.8)
    n = math.ceil((z * d.std(ddof=1) / abs(d.mean())) ** 2)
    out["items_needed"] = {"diffs": diffs, "n": n}
    print(json.dumps(out, indent=1))


if __name__ == "__main__":
    main()
