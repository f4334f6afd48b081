#!/usr/bin/env python3
"""Critical values for the statistical test of speculative sampling (tests/unit/test_speculative_acceptance.cpp).

The test draws many tokens through the acceptance rule and compares their frequencies with the
target distribution by Pearson's chi-square; it fails when the statistic exceeds the value a
correct sampler exceeds with probability 1e-6. scipy computes those values here.

Usage:  python tools/reference/make_speculative_fixtures.py --out tests/fixtures/speculative
(needs scipy, e.g. the venv of requirements-lab.txt)
"""
import argparse
import json
import os

import scipy
from scipy.stats import chi2


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--out", required=True)
    args = parser.parse_args()
    os.makedirs(args.out, exist_ok=True)
    alpha = 1e-6
    doc = {
        "source": f"scipy {scipy.__version__} scipy.stats.chi2.isf(alpha, df)",
        "alpha": alpha,
        "critical": {str(df): chi2.isf(alpha, df) for df in range(1, 11)},
    }
    with open(os.path.join(args.out, "chi2.json"), "w") as f:
        json.dump(doc, f, indent=1)
        f.write("\n")


if __name__ == "__main__":
    main()
