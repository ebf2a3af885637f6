"""Which interval should ``optimize`` decide on? Paired ratios (after/before) of alternating
runs, simulated with the noise this project's machines show, judged by each candidate method
as the adaptive loop would: from 3 pairs, one more pair at a time while the interval
straddles the threshold, up to a maximum.

    python bench/judge_stats.py [--trials 400] [--max-pairs 12] [--seed 0]

Each simulated run's time is ``true x drift x noise``: a drift shared by the two runs of a
pair (the machine's load changing slowly: sd 5%), a per-run log-normal noise (sd 3%, the
spread of the zoo's program times), and one run in 12 slowed by 25% (another job on a core).
For each true ratio (0.92: the hold-out shape's gain; 0.97: a gain under the 2% bar after
noise; 1.00: no change; 1.05: slower) and each method, the table gives how often it decided
keep / no gain / slower / undecided, the mean number of pairs it used, and how often its
95% interval held the true ratio at the stopping point (coverage).

Methods (all from ``scipy.stats``):

- ``t-log``: Student's t interval of the mean log ratio (``ttest_1samp(...).confidence_interval``),
  back-transformed: a geometric-mean ratio;
- ``boot-median``: ``bootstrap`` (BCa where it can, else percentile) of the median ratio;
- ``wilcoxon-hl``: the Hodges-Lehmann estimate (median of the Walsh averages of the log
  ratios) with its Wilcoxon signed-rank interval: order statistics of the Walsh averages at
  the exact signed-rank distribution's quantiles (scipy's ``wilcoxon`` gives the test, not
  this interval, so its few lines are written here).
"""

from __future__ import annotations

import argparse
import math
import warnings

import numpy as np
from scipy import stats

THRESHOLD = 0.98  # 1 - min_gain (2%)
CONFIDENCE = 0.95


def t_log(ratios: np.ndarray) -> tuple[float, float, float]:
    logs = np.log(ratios)
    if np.ptp(logs) == 0:
        v = float(np.exp(logs[0]))
        return v, v, v
    ci = stats.ttest_1samp(logs, 0.0).confidence_interval(CONFIDENCE)
    return float(np.exp(logs.mean())), float(np.exp(ci.low)), float(np.exp(ci.high))


def boot_median(ratios: np.ndarray, rng) -> tuple[float, float, float]:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        try:
            res = stats.bootstrap((ratios,), np.median, confidence_level=CONFIDENCE, method="BCa",
                                  n_resamples=999, random_state=rng)
            lo, hi = res.confidence_interval
            if not (math.isfinite(lo) and math.isfinite(hi)):
                raise ValueError
        except Exception:  # noqa: BLE001 - degenerate BCa on 3 values: the percentile interval
            res = stats.bootstrap((ratios,), np.median, confidence_level=CONFIDENCE, method="percentile",
                                  n_resamples=999, random_state=rng)
            lo, hi = res.confidence_interval
    return float(np.median(ratios)), float(lo), float(hi)


def wilcoxon_hl(ratios: np.ndarray) -> tuple[float, float, float]:
    logs = np.log(ratios)
    n = len(logs)
    walsh = np.sort([(logs[i] + logs[j]) / 2 for i in range(n) for j in range(i, n)])
    est = float(np.exp(np.median(walsh)))
    # the exact null distribution of the signed-rank statistic T (counts of rank subsets by sum):
    # the interval is the C-th smallest and C-th largest Walsh average, C = #{t: P(T <= t) <= alpha/2}
    alpha = 1 - CONFIDENCE
    counts = np.zeros(n * (n + 1) // 2 + 1)
    counts[0] = 1
    for r in range(1, n + 1):
        counts[r:] = counts[r:] + counts[:-r].copy()
    cdf = np.cumsum(counts) / 2 ** n
    k = int(np.searchsorted(cdf, alpha / 2, side="right"))  # P(T < k) <= alpha/2
    if k == 0:  # too few pairs for any interval at this confidence: the whole line
        return est, 0.0, math.inf
    return est, float(np.exp(walsh[k - 1])), float(np.exp(walsh[len(walsh) - k]))


def decide(lo: float, hi: float) -> str:
    if lo > 1.0:
        return "slower"
    if hi < THRESHOLD:
        return "keep"
    if lo >= THRESHOLD:
        return "no gain"
    return "undecided"


def simulate(true_ratio: float, method: str, trials: int, max_pairs: int, rng) -> dict:
    outcomes: dict[str, int] = {}
    pairs_used, covered = [], 0
    for _ in range(trials):
        ratios = []
        outcome = "undecided"
        for n in range(1, max_pairs + 1):
            drift = math.exp(rng.normal(0, 0.05))
            before = 6.0 * drift * math.exp(rng.normal(0, 0.03)) * (1.25 if rng.random() < 1 / 12 else 1.0)
            after = 6.0 * true_ratio * drift * math.exp(rng.normal(0, 0.03)) * (1.25 if rng.random() < 1 / 12 else 1.0)
            ratios.append(after / before)
            if n < 3:
                continue
            r = np.array(ratios)
            est, lo, hi = (t_log(r) if method == "t-log" else boot_median(r, rng) if method == "boot-median"
                           else wilcoxon_hl(r))
            outcome = decide(lo, hi)
            if outcome != "undecided" or n == max_pairs:
                covered += lo <= true_ratio <= hi
                break
        outcomes[outcome] = outcomes.get(outcome, 0) + 1
        pairs_used.append(len(ratios))
    return {"outcomes": outcomes, "pairs": float(np.mean(pairs_used)), "coverage": covered / trials}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--trials", type=int, default=400)
    ap.add_argument("--max-pairs", type=int, default=12)
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args()
    print("| true ratio | method | keep | no gain | slower | undecided | mean pairs | coverage |")
    print("|---|---|---|---|---|---|---|---|")
    for true_ratio in (0.92, 0.97, 1.00, 1.05):
        for method in ("t-log", "boot-median", "wilcoxon-hl"):
            rng = np.random.default_rng(args.seed)
            r = simulate(true_ratio, method, args.trials, args.max_pairs, rng)
            o = r["outcomes"]
            share = lambda k: f"{100 * o.get(k, 0) / args.trials:.0f}%"  # noqa: E731
            print(f"| {true_ratio:.2f} | {method} | {share('keep')} | {share('no gain')} | {share('slower')} | "
                  f"{share('undecided')} | {r['pairs']:.1f} | {100 * r['coverage']:.0f}% |")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
