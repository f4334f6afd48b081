#!/usr/bin/env python3
"""Writes the benchmark text: about 10 MB of mixed code and prose, the same on every run, as
JSON lines of documents ({"kind": ..., "text": ...}); the benchmarks encode each document.

Sources that every machine building frank has: C++ headers of g++ 12 (/usr/include/c++/12),
Python's standard library (code and docstrings, from the interpreter running this script),
/usr/share/common-licenses (English prose), and the non-ASCII texts of
tests/fixtures/tokenizer/corpus.jsonl (prose in many scripts, emoji, code; repeated to their
share; without those marked post_unicode14). Files are taken in sorted order and interleaved, so no kind of text sits in one block.

    python3 bench/make_bench_text.py --out /tmp/frank_bench_docs.jsonl [--megabytes 10]
"""
import argparse
import hashlib
import json
import pathlib
import sysconfig

REPO = pathlib.Path(__file__).resolve().parents[1]


def read_texts(paths, budget):
    texts, total = [], 0
    for path in paths:
        try:
            text = path.read_text(encoding="utf-8")
        except (UnicodeDecodeError, OSError):
            continue
        texts.append(text)
        total += len(text.encode())
        if total >= budget:
            break
    return texts


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--out", type=pathlib.Path, required=True)
    parser.add_argument("--megabytes", type=float, default=10.0)
    args = parser.parse_args()
    size = int(args.megabytes * 1_000_000)

    cpp = sorted(p for p in pathlib.Path("/usr/include/c++/12").rglob("*") if p.is_file())
    python = sorted(pathlib.Path(sysconfig.get_paths()["stdlib"]).rglob("*.py"))
    licenses = sorted(p for p in pathlib.Path("/usr/share/common-licenses").iterdir() if p.is_file())
    corpus = [json.loads(line) for line in (REPO / "tests/fixtures/tokenizer/corpus.jsonl").open()]
    # Without the texts whose characters are newer than Debian 12's PCRE2 (see the corpus README),
    # so that both tokenizers must give the same ids.
    multilingual = [r["text"] for r in corpus
                    if not r["text"].isascii() and len(r["text"]) < 4000 and not r.get("post_unicode14")]

    shares = {"cpp": 0.35, "python": 0.35, "english": 0.1, "multilingual": 0.2}
    sources = {
        "cpp": read_texts(cpp, size),
        "python": read_texts(python, size),
        "english": read_texts(licenses, size),
        # The multilingual texts are few and short, so they repeat up to their share.
        "multilingual": multilingual * (1 + int(size * shares["multilingual"] / sum(len(t.encode()) for t in multilingual))),
    }
    # Interleave documents, always taking from the kind furthest below its share of the bytes.
    documents, used = [], {kind: 0 for kind in shares}
    iterators = {kind: iter(texts) for kind, texts in sources.items()}
    while sum(used.values()) < size and iterators:
        kind = min(iterators, key=lambda k: used[k] / shares[k])
        text = next(iterators[kind], None)
        if text is None:
            del iterators[kind]
            continue
        documents.append({"kind": kind, "text": text})
        used[kind] += len(text.encode())
    lines = "".join(json.dumps(d, ensure_ascii=False) + "\n" for d in documents)
    args.out.write_text(lines, encoding="utf-8")
    print(json.dumps({"documents": len(documents), "bytes": sum(used.values()),
                      "sha256": hashlib.sha256(lines.encode()).hexdigest(), "bytes_by_kind": used}))


if __name__ == "__main__":
    main()
