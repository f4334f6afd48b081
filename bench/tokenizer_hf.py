#!/usr/bin/env python3
"""Encoding throughput of HuggingFace tokenizers, single thread: the same measurement as
tokenizer_bench.cpp (a cold pass over all documents, then --runs passes, each document encoded
with one `encode` call), printed as one JSON line.

    python tokenizer_hf.py --tokenizer FILE --docs FILE.jsonl [--runs N] [--ids-out FILE]
"""
import argparse
import json
import os
import statistics
import struct
import time

# One sequence never uses tokenizers' thread pool, but make sure nothing runs in parallel.
os.environ["RAYON_NUM_THREADS"] = "1"
os.environ["TOKENIZERS_PARALLELISM"] = "false"

import tokenizers  # noqa: E402  (after the environment above)
from tokenizers import Tokenizer  # noqa: E402


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--tokenizer", required=True)
    parser.add_argument("--docs", required=True)
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--ids-out")
    args = parser.parse_args()
    with open(args.docs, encoding="utf-8") as f:
        texts = [json.loads(line)["text"] for line in f]
    size = sum(len(t.encode()) for t in texts)
    size_mb = size / 1e6

    start = time.perf_counter()
    tok = Tokenizer.from_file(args.tokenizer)
    load_s = time.perf_counter() - start

    def encode():
        ids = []
        start = time.perf_counter()
        for text in texts:
            ids.extend(tok.encode(text, add_special_tokens=False).ids)
        return time.perf_counter() - start, ids

    cold_s, ids = encode()
    runs = []
    for _ in range(args.runs):
        seconds, ids = encode()
        runs.append(seconds)
    if args.ids_out:
        with open(args.ids_out, "wb") as f:
            f.write(struct.pack(f"<{len(ids)}i", *ids))
    median = statistics.median(runs)
    print(json.dumps({"impl": f"hf-tokenizers {tokenizers.__version__}", "documents": len(texts), "bytes": size,
                      "tokens": len(ids), "load_s": round(load_s, 3), "cold_mb_s": round(size_mb / cold_s, 2),
                      "median_mb_s": round(size_mb / median, 2), "min_mb_s": round(size_mb / max(runs), 2),
                      "max_mb_s": round(size_mb / min(runs), 2), "runs_s": [round(r, 4) for r in runs]}))


if __name__ == "__main__":
    main()
