#!/usr/bin/env python3
"""Independent reference values for frank's lab statistics: writes tests/fixtures/lab/*.json.

Everything here is computed without frank's code, from scipy, numpy, hashlib and exact rational
arithmetic (fractions), following the procedures documented in docs/lab.md:

  distributions.json  scipy.stats.t.ppf/cdf, norm.ppf, special.betainc, binom.sf
  sha256.json         hashlib.sha256 of messages around SHA-256's padding boundaries
  canonical.json      json.dumps(sort_keys=True, separators=(",", ":"), ensure_ascii=False) and
                      hashlib.sha256 of the result, for assorted JSON values
  designs.json        explicit designs: canonical text, design id and the hash-derived start
                      order of every block (the documented SHA-256 counter procedure)
  effects.json        row datasets (k = 1..12, ties, zero effects, 3 draws per start, 2 starts per
                      arm, 24 blocks): per-block values and effects, mean, the 95% t-interval
                      (t.ppf, cross-checked against ttest_1samp's interval), the sign test
                      (binomtest) and the within-block permutation test (permutation_test with
                      permutation_type='samples', exact; cross-checked by exact rational
                      enumeration; brute force over label subsets for 2 starts per arm; for 24
                      blocks an exact meet-in-the-middle count plus scipy's Monte Carlo value)
  power.json          the planning estimate: variance components by one-way ANOVA (numpy) and the
                      detectable improvement per rule (norm.ppf, binom.sf + brentq, t.ppf)

Run (CPU, seconds):  python3 -m venv /tmp/labenv && /tmp/labenv/bin/pip install -r
tools/reference/requirements-lab.txt && /tmp/labenv/bin/python tools/reference/make_lab_fixtures.py
"""
import argparse
import hashlib
import itertools
import json
import math
import pathlib
from fractions import Fraction

import numpy as np
import scipy
import scipy.optimize as opt
import scipy.special as sp
import scipy.stats as st

# ---------------------------------------------------------------------------------------------
# Distributions


def distributions():
    dfs = [1, 2, 3, 4, 5, 6, 7, 9, 11, 15, 23, 30, 50, 100, 1000, 2.5]
    ps = [1e-9, 1e-4, 0.001, 0.01, 0.025, 0.05, 0.1, 0.2, 0.4, 0.5, 0.6, 0.8, 0.9, 0.95, 0.975, 0.99, 0.995, 0.999,
          0.9999]
    t_ppf = [{"p": p, "df": df, "value": float(st.t.ppf(p, df))} for df in dfs for p in ps]
    ts = [-50.0, -7.5, -2.0, -0.3, 0.0, 0.01, 1.0, 2.5, 12.0]
    t_cdf = [{"t": t, "df": df, "value": float(st.t.cdf(t, df))} for df in dfs for t in ts]
    norm_ppf = [{"p": p, "value": float(st.norm.ppf(p))} for p in ps]
    betainc = [{"a": a, "b": b, "x": x, "value": float(sp.betainc(a, b, x))}
               for a, b in [(0.5, 0.5), (0.5, 3.0), (2.0, 0.5), (5.0, 5.0), (50.0, 0.5), (0.5, 500.0), (30.0, 70.0)]
               for x in [1e-6, 0.01, 0.2, 0.5, 0.7, 0.99, 0.999999]]
    binom = [{"n": n, "k": k, "value": float(st.binom.sf(k - 1, n, 0.5))}
             for n in [1, 2, 3, 5, 10, 20, 37, 64, 200, 1000] for k in sorted({0, 1, n // 3, n // 2, n - 1, n})]
    return {"t_ppf": t_ppf, "t_cdf": t_cdf, "norm_ppf": norm_ppf, "betainc": betainc, "binomial_half_sf": binom}


# ---------------------------------------------------------------------------------------------
# Canonical JSON, design ids and the hash-derived start order


def canonical(value):
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False)


def canonical_cases():
    values = [
        {"b": 1, "a": [1.0, 2.5, -0.0, 1e-05, 0.0001, 1e16, 1e15, 123456789.125, 0.1 + 0.2, 5e-324,
                       1.7976931348623157e308]},
        {"z": {"y": None, "x": True, "w": False}, "": "empty key", "A": "upper before lower"},
        {"text": "caf\u00e9 \u2014 \u65e5\u672c \U0001F600", "escapes": "quote\" backslash\\ slash/ nl\n tab\t cr\r "
                 "bs\b ff\f ctl\u0001\u001f del\u007f"},
        {"k\u00e9y": 1, "key": 2, "k\u00e8y": 3, "ke": 4},
        [[], {}, [{}], -17, 18446744073709551615, -9223372036854775808],
        "just a string",
        3.0,
    ]
    return [{"value": v, "canonical": canonical(v), "sha256": hashlib.sha256(canonical(v).encode()).hexdigest()}
            for v in values]


def sha256_cases():
    """Messages around the padding boundaries (55/56 bytes fit one block or not, 64 fills one)."""
    messages = ["a" * n for n in [0, 1, 55, 56, 57, 63, 64, 65, 119, 120, 127, 128, 1000]]
    messages += ["caf\u00e9 \U0001F600", "".join(chr(c) for c in range(1, 128))]
    return [{"message": m, "sha256": hashlib.sha256(m.encode()).hexdigest()} for m in messages]


def hash_words(design_id, block):
    """Word j: the first 8 bytes, big-endian, of SHA-256("<design id>:<block>:<j>")."""
    j = 0
    while True:
        digest = hashlib.sha256(f"{design_id}:{block}:{j}".encode()).digest()
        yield int.from_bytes(digest[:8], "big")
        j += 1


def uniform_below(m, words):
    reject_from = 2**64 - (2**64 % m)
    while True:
        w = next(words)
        if w < reject_from:
            return w % m


def block_order(design_id, block, arms, starts_per_arm):
    order = [a for a in arms for _ in range(starts_per_arm)]
    words = hash_words(design_id, block)
    for i in range(len(order) - 1, 0, -1):
        k = uniform_below(i + 1, words)
        order[i], order[k] = order[k], order[i]
    return order


def arm(name, port):
    return {"name": name, "start": f"frank serve --port {port}", "url": f"http://127.0.0.1:{port}", "health": "/health"}


def designs():
    """Designs written out in full (every default explicit), as frank registers them."""
    base = {
        "format": "frank-lab-design/1",
        "name": "mtp3-vs-mtp2",
        "description": "",
        "arms": [arm("mtp2", 8100), arm("mtp3", 8101)],
        "baseline": "mtp2",
        "blocks": 12,
        "starts_per_arm": 1,
        "draws_per_start": 5,
        "workload": {"name": "agent-long-context", "turns": 8},
        "metric": {"name": "task_time_s", "better": "lower"},
        "decision": {"kind": "permutation", "alpha": 0.05},
        "quality_guards": [],
        "monte_carlo_samples": 100000,
    }
    second = dict(base, name="three starts, bands, guards", description="caf\u00e9 \u2014 unicode", blocks=7,
                  starts_per_arm=3, draws_per_start=2,
                  covariate={"name": "tokens_per_step", "reference": 2.5, "slope": {"mtp2": -1.25, "mtp3": -1.5},
                             "estimand": "fixed_covariate"},
                  decision={"kind": "bands", "expected_improvement": 0.08, "adopt_if_lower_at_least": 0.5,
                            "reject_if_upper_below": 0.25},
                  quality_guards=[{"metric": "passed", "better": "higher", "scale": "absolute", "margin": 0.02}],
                  drift_guard={"reference_mean": 41.5, "max_relative_drift": 0.05}, monte_carlo_samples=20000)
    third = dict(base, name="two starts, sign test", blocks=30, starts_per_arm=2, draws_per_start=1,
                 metric={"name": "decode_tok_s", "better": "higher"}, decision={"kind": "sign_test", "alpha": 0.01})
    out = []
    for d in [base, second, third]:
        text = canonical(d)
        design_id = hashlib.sha256(text.encode()).hexdigest()
        arms = [a["name"] for a in d["arms"]]
        orders = [block_order(design_id, b, arms, d["starts_per_arm"]) for b in range(d["blocks"])]
        out.append({"design": d, "canonical": text, "design_id": design_id, "block_orders": orders})
    return out


# ---------------------------------------------------------------------------------------------
# Effects: sign test, permutation test, t-interval


def rows_from_pairs(pairs):
    """pairs[b] = (baseline, treatment): one value each, or a list of draws each."""
    rows = []
    for b, (base, treat) in enumerate(pairs):
        for arm_name, values in (("base", base), ("treat", treat)):
            values = values if isinstance(values, list) else [values]
            for v in values:
                rows.append([b, arm_name, 0, v])
    return rows


def exact_sum(values):
    """The values as the decimals they were written as, summed without rounding."""
    return sum(Fraction(repr(v)) for v in values)


def start_totals(rows):
    """block -> arm -> start -> list of values."""
    blocks = {}
    for b, a, s, v in rows:
        blocks.setdefault(b, {"base": {}, "treat": {}})[a].setdefault(s, []).append(v)
    return [blocks[b] for b in sorted(blocks)]


def block_options_exact(block):
    """Every way to give the treatment label to as many of the block's starts as it had; the
    effect as an exact fraction, and the observed one."""
    starts = [(exact_sum(v), len(v)) for v in block["base"].values()]
    n_base = len(starts)
    starts += [(exact_sum(v), len(v)) for v in block["treat"].values()]
    treated = len(starts) - n_base
    options, observed = [], None
    for chosen in itertools.combinations(range(len(starts)), treated):
        t_sum = sum(starts[i][0] for i in chosen)
        t_n = sum(starts[i][1] for i in chosen)
        b_sum = sum(starts[i][0] for i in range(len(starts)) if i not in chosen)
        b_n = sum(starts[i][1] for i in range(len(starts)) if i not in chosen)
        effect = (t_sum / t_n) / (b_sum / b_n) - 1
        options.append(effect)
        if chosen == tuple(range(n_base, len(starts))):
            observed = effect
    return options, observed


def exact_permutation_p(blocks, better):
    """Exact enumeration in rational arithmetic: no rounding, so ties are ties."""
    opts = [block_options_exact(b) for b in blocks]
    observed = sum(o[1] for o in opts)
    low = high = total = 0
    for combo in itertools.product(*[o[0] for o in opts]):
        s = sum(combo)
        low += s <= observed
        high += s >= observed
        total += 1
    p_low, p_high = low / total, high / total
    return (p_low, p_high) if better == "lower" else (p_high, p_low)


def meet_in_the_middle_p(effects_plus, effects_minus, better):
    """Exact p for one start per arm and many blocks: split the blocks in two halves, list each
    half's 2^(k/2) sums, count pairs with a sorted search (ties within 1e-11 of the observed)."""
    k = len(effects_plus)
    half = k // 2

    def sums(idx):
        s = np.zeros(1)
        for i in idx:
            s = np.concatenate([s + effects_plus[i], s + effects_minus[i]])
        return s

    left, right = sums(range(half)), np.sort(sums(range(half, k)))
    observed = float(np.sum(effects_plus))
    tol = 1e-11 * float(np.sum(np.maximum(np.abs(effects_plus), np.abs(effects_minus))))
    total = len(left) * len(right)
    low = int(np.sum(np.searchsorted(right, observed + tol - left, side="right")))
    high = int(np.sum(len(right) - np.searchsorted(right, observed - tol - left, side="left")))
    p_low, p_high = low / total, high / total
    return (p_low, p_high) if better == "lower" else (p_high, p_low)


def sign_p(better_count, worse_count):
    n = better_count + worse_count
    if n == 0:
        return 1.0  # scipy's binomtest refuses n = 0; no signed block is no evidence
    return float(st.binomtest(better_count, n, 0.5, alternative="greater").pvalue)


def effect_case(name, better, rows, monte_carlo=False):
    blocks = start_totals(rows)
    base_vals = np.array([np.mean([v for vs in b["base"].values() for v in vs]) for b in blocks])
    treat_vals = np.array([np.mean([v for vs in b["treat"].values() for v in vs]) for b in blocks])
    effects = treat_vals / base_vals - 1
    k = len(effects)
    improvements = -effects if better == "lower" else effects
    n_better = int(np.sum(improvements > 0))
    n_worse = int(np.sum(improvements < 0))
    case = {
        "name": name,
        "better": better,
        "rows": rows,
        "baseline_values": base_vals.tolist(),
        "treatment_values": treat_vals.tolist(),
        "effects": effects.tolist(),
        "mean_effect": float(np.mean(effects)),
        "sign_better": n_better,
        "sign_worse": n_worse,
        "sign_ties": k - n_better - n_worse,
        "sign_test_p": sign_p(n_better, n_worse),
        "sign_test_p_worse": sign_p(n_worse, n_better),
    }
    if k >= 2:
        sd = float(np.std(effects, ddof=1))
        half = float(st.t.ppf(0.975, k - 1)) * sd / math.sqrt(k)
        ci = [case["mean_effect"] - half, case["mean_effect"] + half]
        if sd > 0:
            ref = st.ttest_1samp(effects, 0.0).confidence_interval(0.95)
            assert abs(ref.low - ci[0]) < 1e-12 and abs(ref.high - ci[1]) < 1e-12, (name, ref, ci)
        case["ci95"] = ci
    else:
        case["ci95"] = None

    one_start = all(len(b["base"]) == 1 and len(b["treat"]) == 1 for b in blocks)
    if monte_carlo:
        plus = effects
        minus = base_vals / treat_vals - 1
        p, p_worse = meet_in_the_middle_p(plus, minus, better)
        res = st.permutation_test((treat_vals, base_vals), lambda x, y, axis: np.mean(x / y - 1, axis=axis),
                                  permutation_type="samples", alternative="less" if better == "lower" else "greater",
                                  n_resamples=100000, vectorized=True, rng=np.random.default_rng(7))
        assert abs(res.pvalue - p) < 5 * math.sqrt(p * (1 - p) / 100000) + 1e-4, (name, res.pvalue, p)
        case.update(permutation_p=p, permutation_p_worse=p_worse, scipy_monte_carlo_p=float(res.pvalue),
                    permutation_assignments=2.0**k)
        return case

    p, p_worse = exact_permutation_p(blocks, better)
    assignments = math.prod(math.comb(len(b["base"]) + len(b["treat"]), len(b["treat"])) for b in blocks)
    if one_start and k >= 2:  # scipy wants two pairs at least
        res = st.permutation_test((treat_vals, base_vals), lambda x, y, axis: np.mean(x / y - 1, axis=axis),
                                  permutation_type="samples", alternative="less" if better == "lower" else "greater",
                                  n_resamples=np.inf, vectorized=True)
        assert abs(res.pvalue - p) < 1e-12, (name, res.pvalue, p)
    case.update(permutation_p=p, permutation_p_worse=p_worse, permutation_assignments=float(assignments))
    return case


def effects():
    rng = np.random.default_rng(20261129)

    def random_pairs(k, base=40.0, effect=-0.03, noise=0.04):
        b = base * (1 + noise * rng.standard_normal(k))
        t = b * (1 + effect + noise * rng.standard_normal(k))
        return [(round(float(x), 3), round(float(y), 3)) for x, y in zip(b, t)]

    cases = [
        effect_case("three_blocks_all_better", "lower", rows_from_pairs([(10.0, 9.0), (10.0, 9.5), (12.0, 11.0)])),
        effect_case("one_block", "lower", rows_from_pairs([(10.0, 9.0)])),
        effect_case("two_blocks_split", "lower", rows_from_pairs([(10.0, 9.0), (10.0, 10.5)])),
        effect_case("all_zero_effects", "lower", rows_from_pairs([(5.0, 5.0), (7.25, 7.25), (6.5, 6.5), (8.0, 8.0)])),
        effect_case("ties_and_zero_blocks", "lower",
                    rows_from_pairs([(10.0, 9.0), (10.0, 10.0), (10.0, 9.0), (10.0, 11.0), (20.0, 20.0),
                                     (10.0, 9.0)])),
        effect_case("repeated_blocks_higher", "higher",
                    rows_from_pairs([(100.0, 110.0), (100.0, 110.0), (100.0, 90.0), (100.0, 110.0), (100.0, 110.0)])),
    ]
    for k in [4, 5, 6, 7, 8, 9, 10, 11, 12]:
        better = "lower" if k % 2 == 0 else "higher"
        cases.append(effect_case(f"random_k{k}_{better}", better,
                                 rows_from_pairs(random_pairs(k, effect=-0.03 if better == "lower" else 0.02))))
    three_draws = [([round(float(v), 2) for v in 30 + rng.standard_normal(3)],
                    [round(float(v), 2) for v in 29.2 + rng.standard_normal(3)]) for _ in range(6)]
    cases.append(effect_case("three_draws_per_start", "lower", rows_from_pairs(three_draws)))
    # Two starts per arm, two draws per start: brute force over the C(4, 2) = 6 labellings per block.
    rows = []
    for b in range(5):
        for arm_name, centre in (("base", 20.0), ("treat", 19.4)):
            for s in range(2):
                level = centre * (1 + 0.03 * rng.standard_normal())
                for _ in range(2):
                    rows.append([b, arm_name, s, round(float(level + 0.2 * rng.standard_normal()), 3)])
    cases.append(effect_case("two_starts_per_arm", "lower", rows))
    cases.append(effect_case("monte_carlo_24_blocks", "lower",
                             rows_from_pairs(random_pairs(24, effect=-0.01, noise=0.05)), monte_carlo=True))
    return cases


# ---------------------------------------------------------------------------------------------
# Power: variance components and the detectable improvement


def anova_components(rows):
    """rows: (arm, start id, value). Values relative to their arm's mean; one-way ANOVA by start."""
    arms = sorted({r[0] for r in rows})
    groups = {}
    for a, s, v in rows:
        groups.setdefault((a, s), []).append(v)
    arm_mean = {a: np.mean([r[2] for r in rows if r[0] == a]) for a in arms}
    rel = {g: np.array(v) / arm_mean[g[0]] for g, v in groups.items()}
    n_rows, n_groups = len(rows), len(groups)
    within = sum(float(np.sum((x - x.mean()) ** 2)) for x in rel.values())
    between = sum(len(x) * (x.mean() - 1.0) ** 2 for x in rel.values())
    ms_between = between / (n_groups - len(arms))
    if n_rows == n_groups:
        return ms_between, 0.0
    ms_within = within / (n_rows - n_groups)
    n0 = n_rows - sum(sum(len(x) ** 2 for g, x in rel.items() if g[0] == a) / sum(len(x) for g, x in rel.items() if
                                                                                    g[0] == a) for a in arms)
    n0 /= n_groups - len(arms)
    return max(0.0, (ms_between - ms_within) / n0), ms_within


def detectable(kind, k, sd, alpha=None, expected=None, adopt=None):
    if kind == "all_blocks_better":
        return sd * float(st.norm.ppf(0.8 ** (1.0 / k)))
    if kind == "sign_test":
        needed = next(c for c in range(k + 1) if st.binom.sf(c - 1, k, 0.5) <= alpha)
        q = opt.brentq(lambda q: st.binom.sf(needed - 1, k, q) - 0.8, 0.5, 1 - 1e-15, xtol=1e-15)
        return sd * float(st.norm.ppf(q))
    if kind == "permutation":
        return (st.t.ppf(1 - alpha, k - 1) + st.t.ppf(0.8, k - 1)) * sd / math.sqrt(k)
    return adopt * expected + (st.t.ppf(0.975, k - 1) + st.t.ppf(0.8, k - 1)) * sd / math.sqrt(k)


def power():
    rng = np.random.default_rng(99)
    rows = []  # earlier rows: arm "old" 6 starts of 4 draws (one short), arm "older" 3 starts of 3 draws
    for s in range(6):
        level = 40 * (1 + 0.03 * rng.standard_normal())
        for _ in range(4 if s != 2 else 3):
            rows.append(["old", s, round(float(level * (1 + 0.02 * rng.standard_normal())), 3)])
    for s in range(3):
        level = 44 * (1 + 0.03 * rng.standard_normal())
        for _ in range(3):
            rows.append(["older", s, round(float(level * (1 + 0.02 * rng.standard_normal())), 3)])
    start_var, draw_var = anova_components(rows)
    single_draw_rows = [["old", s, round(float(40 * (1 + 0.03 * rng.standard_normal())), 3)] for s in range(8)]
    single_start_var, _ = anova_components(single_draw_rows)
    cases = []
    for blocks, starts, draws, rule in [
        (8, 1, 5, {"kind": "all_blocks_better"}),
        (10, 1, 3, {"kind": "sign_test", "alpha": 0.05}),
        (16, 2, 4, {"kind": "permutation", "alpha": 0.05}),
        (12, 1, 10, {"kind": "bands", "expected_improvement": 0.05, "adopt_if_lower_at_least": 0.5}),
    ]:
        sd = math.sqrt(2 * (start_var / starts + draw_var / (starts * draws)))
        cases.append({"blocks": blocks, "starts_per_arm": starts, "draws_per_start": draws, "decision": rule,
                      "block_effect_sd": sd,
                      "detectable": float(detectable(rule["kind"], blocks, sd, rule.get("alpha"),
                                                     rule.get("expected_improvement"),
                                                     rule.get("adopt_if_lower_at_least")))})
    return {"rows": rows, "start_variance": start_var, "draw_variance": draw_var,
            "mean": float(np.mean([r[2] for r in rows])),
            "cases": cases, "single_draw_rows": single_draw_rows, "single_draw_start_variance": single_start_var}


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", default="tests/fixtures/lab")
    out = pathlib.Path(parser.parse_args().out)
    out.mkdir(parents=True, exist_ok=True)
    meta = {"scipy_version": scipy.__version__, "numpy_version": np.__version__}
    files = {"distributions.json": distributions(), "sha256.json": sha256_cases(), "canonical.json": canonical_cases(),
             "designs.json": designs(),
             "effects.json": effects(), "power.json": power()}
    for name, content in files.items():
        with open(out / name, "w", encoding="utf-8") as f:
            json.dump({"meta": meta, "cases": content}, f, indent=1, ensure_ascii=False)
            f.write("\n")
        print(f"wrote {out / name}")


if __name__ == "__main__":
    main()
