#!/usr/bin/env python3
"""Golden tokenizer fixtures from HuggingFace tokenizers (the reference frank must equal).

Writes, under tests/fixtures/tokenizer/:
  corpus.jsonl        one line per text: name, text, ids (add_special_tokens=False), ids_bos
                      (BOS + text), and post_unicode14 for texts with characters newer than
                      Unicode 14.0 (see README.md there)
  decode_cases.jsonl  id sequences (random ids, specials, broken UTF-8) and HF's decode of them,
                      with and without skip_special_tokens
  split_cases.jsonl   HF's Split pre-tokenizer, every behaviour, inverted or not, on small texts
  tiny-flags/         a small byte-level BPE tokenizer.json with added tokens using lstrip,
                      rstrip, single_word and normalized, and HF's ids for texts that exercise them
  meta.json           versions, seed, counts and what the script checked

Run it with tokenizers 0.23.3 in a venv outside the repository (tools/reference/README.md):
    /tmp/tokenv/bin/python tools/reference/make_tokenizer_fixtures.py
It needs the DeepSeek tokenizer in tests/fixtures/tokenizer/deepseek-v4 (fetch_tokenizer.py).
"""
from __future__ import annotations

import json
import pathlib
import platform
import random
import sys
import unicodedata

import tokenizers
from tokenizers import AddedToken, Regex, Tokenizer, decoders, models, pre_tokenizers

import tokenizer_corpus

REQUIRED_TOKENIZERS = "0.23.3"
# The corpus draws random code points among those Unicode 14.0 assigns, the version of Debian 12's
# PCRE2 10.42; Python 3.11's unicodedata is 14.0.0 too.
REQUIRED_UNICODEDATA = "14.0.0"
SEED = 20240607
REPO = pathlib.Path(__file__).resolve().parents[2]
OUT = REPO / "tests/fixtures/tokenizer"
BOS = "<｜begin▁of▁sentence｜>"


def write_jsonl(path: pathlib.Path, rows: list[dict]) -> None:
    with path.open("w", encoding="utf-8", newline="\n") as f:
        for row in rows:
            f.write(json.dumps(row, ensure_ascii=False, separators=(",", ":")) + "\n")


def probe_regex_unicode_version(tok: Tokenizer) -> str:
    """The newest Unicode version whose new letters HF's regexes (Oniguruma) know.

    A letter between two ASCII letters stays in one pre-token; an unassigned code point does not.
    """
    probes = [("15.0", "\U00011F04"), ("15.1", "\U0002EBF0"), ("16.0", "\U00010D4A"), ("17.0", "\U00016EA0")]
    known = "14.0"
    for version, letter in probes:
        if len(tok.pre_tokenizer.pre_tokenize_str(f"a{letter}b")) != 1:
            break
        known = version
    return known


def corpus_rows(tok: Tokenizer) -> tuple[list[dict], dict]:
    special = [t.content for t in tok.get_added_tokens_decoder().values()]
    special.sort()
    texts = tokenizer_corpus.build_corpus(SEED, special, n_random_mixes=190, n_random_code_points=40)
    rows = []
    bos_id = tok.token_to_id(BOS)
    for entry in texts:
        ids = tok.encode(entry["text"], add_special_tokens=False).ids
        # This tokenizer.json's post-processor is ByteLevel, so add_special_tokens adds nothing;
        # BOS comes from writing it in the text, as DeepSeek's chat template does.
        assert tok.encode(entry["text"], add_special_tokens=True).ids == ids, entry["name"]
        ids_bos = tok.encode(BOS + entry["text"], add_special_tokens=False).ids
        assert ids_bos == [bos_id] + ids, entry["name"]
        assert tok.decode(ids, skip_special_tokens=False) == entry["text"], f"HF does not round-trip {entry['name']}"
        row = {"name": entry["name"], "text": entry["text"], "ids": ids, "ids_bos": ids_bos}
        if tokenizer_corpus.uses_post_unicode14(entry["text"]):
            row["post_unicode14"] = True
        rows.append(row)
    facts = {"add_special_tokens_adds_nothing": True, "ids_bos_is_bos_plus_ids": True, "hf_round_trips": True}
    return rows, facts


def decode_rows(tok: Tokenizer, rng: random.Random) -> list[dict]:
    vocab = tok.get_vocab_size()
    byte_ids = [tok.token_to_id(c) for c in "ĀāĂăĄąĆćĈĉĊċČčĎďĐđĒēĔĕĖėĘęĚěĜĝĞğĠġĢģĤĥĦħĨĩĪīĬĭĮįİıĲĳĴĵĶķĸĹĺĻļĽľĿŀŁłŃ"]
    high_bytes = [tok.token_to_id(chr(c)) for c in range(0xA1, 0x100) if c != 0xAD]  # bytes 0xA1.. as themselves
    sequences = [[], [0], [1, 2], [128803, 128804, 128821], [0, 19923, 1]]
    sequences += [[rng.randrange(vocab) for _ in range(rng.randrange(1, 30))] for _ in range(60)]
    sequences += [[rng.choice(high_bytes + byte_ids) for _ in range(rng.randrange(1, 12))] for _ in range(60)]
    sequences += [[rng.randrange(128000, vocab) for _ in range(rng.randrange(1, 8))] for _ in range(20)]
    return [{"ids": ids, "text": tok.decode(ids, skip_special_tokens=False),
             "text_skip_special": tok.decode(ids, skip_special_tokens=True)} for ids in sequences]


def split_rows() -> list[dict]:
    patterns = [({"Regex": r"\s+"}), ({"Regex": r"\p{L}+|[^\p{L}\s]+"}), ({"Regex": r"\p{N}{1,3}"}), ({"Regex": "x*"}),
                ({"Regex": "(?=a)"}), ({"Regex": "-"}), ({"String": " "}), ({"String": "ab"}), ({"String": "."}),
                ({"Regex": r"\s+(?!\S)|\s+"}), ({"Regex": "^a|b$"}),
                ({"Regex": r"[^\S\n]+"})]
    texts = ["How are you doing?", "the-final--countdown", "  leading and trailing  ", "", "aaa", "abcabcab",
             "日本語 text 1234567", "a\nb\r\nc.", "x", "--", "a.b..c", "xxaxx", "ab\nba\nab",
             "a \u180e\u00a0\u2028 b\u3000\t\n c"]
    behaviors = ["Removed", "Isolated", "MergedWithPrevious", "MergedWithNext", "Contiguous"]
    rows = []
    for pattern in patterns:
        for behavior in behaviors:
            for invert in (False, True):
                spec = {"type": "Split", "pattern": pattern, "behavior": behavior, "invert": invert}
                pre = Tokenizer.from_str(json.dumps(tiny_tokenizer_spec(pre_tokenizer=spec))).pre_tokenizer
                for text in texts:
                    rows.append({"split": spec, "text": text,
                                 "pieces": [piece for piece, _ in pre.pre_tokenize_str(text)]})
    return rows


def byte_alphabet() -> list[str]:
    printable = [*range(ord("!"), ord("~") + 1), *range(0xA1, 0xAD), *range(0xAE, 0x100)]
    chars, moved = {}, 0
    for b in range(256):
        if b in printable:
            chars[b] = chr(b)
        else:
            chars[b] = chr(0x100 + moved)
            moved += 1
    return [chars[b] for b in range(256)]


def tiny_tokenizer_spec(pre_tokenizer: dict) -> dict:
    """A minimal byte-level BPE tokenizer.json around the given pre-tokenizer."""
    vocab = {c: i for i, c in enumerate(byte_alphabet())}
    merges = [("h", "e"), ("l", "l"), ("he", "ll"), ("hell", "o"), ("Ġ", "w"), ("o", "r"), ("Ġw", "or"),
              ("l", "d"), ("Ġwor", "ld"), ("w", "or"), ("wor", "d")]
    for a, b in merges:
        vocab.setdefault(a + b, len(vocab))
    return {"version": "1.0", "truncation": None, "padding": None, "added_tokens": [], "normalizer": None,
            "pre_tokenizer": pre_tokenizer, "post_processor": None, "decoder": {"type": "ByteLevel", "add_prefix_space": True, "trim_offsets": True, "use_regex": True},
            "model": {"type": "BPE", "dropout": None, "unk_token": None, "continuing_subword_prefix": None,
                      "end_of_word_suffix": None, "fuse_unk": False, "byte_fallback": False, "ignore_merges": False,
                      "vocab": vocab, "merges": [f"{a} {b}" for a, b in merges]}}


def tiny_flags_tokenizer() -> Tokenizer:
    split = {"type": "Split", "pattern": {"Regex": r" ?\p{L}+| ?\p{N}+|\s+(?!\S)|\s+|[^\s\p{L}\p{N}]+"},
             "behavior": "Isolated", "invert": False}
    byte_level = {"type": "ByteLevel", "add_prefix_space": False, "trim_offsets": True, "use_regex": False}
    tok = Tokenizer.from_str(json.dumps(tiny_tokenizer_spec({"type": "Sequence",
                                                             "pretokenizers": [split, byte_level]})))
    tok.add_special_tokens([AddedToken("<s>", normalized=False), AddedToken("[SW]", single_word=True, normalized=False)])
    tok.add_tokens([AddedToken("[LS]", lstrip=True), AddedToken("[RS]", rstrip=True),
                    AddedToken("[BOTH]", lstrip=True, rstrip=True), AddedToken("blob", single_word=True),
                    AddedToken("<ab>", normalized=True), AddedToken("<ab>c", normalized=True),
                    AddedToken("<ra", normalized=True), AddedToken("aw>", normalized=False)])
    return tok


def tiny_flags_rows(tok: Tokenizer) -> list[dict]:
    # "blob" is single_word; no merge of the tiny vocab can spell it, so only the added token gives its id.
    texts = ["hello world", "hello [LS] world", "  [LS]x", "a[RS]   b", "x [BOTH]  y", "[LS][LS]  [RS]  [RS]",
             "blob", "a blob b", "ablob b", "blob_", "bloby", "1blob", "blob1", "日本blob", "é blob", "blob\u00a0x",
             "[SW] x", "x[SW]", "(blob)", "<ab>cd", "<ab>d", "<raw>", "<ab><ab>c<s>", "<s>hello<s>", " \u3000[LS]",
             "[RS]\u2028\u2029z", "[BOTH]", "b\u0301blob", "blob\u0301", "blab blob\u200dx", "\u200dblob",
             "blob blob", "blobblob", "[SW][SW]", "x\n[LS]", "[RS]\t\t\n"]
    return [{"text": t, "ids": tok.encode(t, add_special_tokens=False).ids} for t in texts]


def main() -> int:
    if tokenizers.__version__ != REQUIRED_TOKENIZERS:
        sys.exit(f"needs tokenizers {REQUIRED_TOKENIZERS}, found {tokenizers.__version__}")
    if unicodedata.unidata_version != REQUIRED_UNICODEDATA:
        sys.exit(f"needs Python's unicodedata {REQUIRED_UNICODEDATA} (Python 3.11), found {unicodedata.unidata_version}")
    tok = Tokenizer.from_file(str(OUT / "deepseek-v4/tokenizer.json"))
    rows, facts = corpus_rows(tok)
    write_jsonl(OUT / "corpus.jsonl", rows)
    write_jsonl(OUT / "decode_cases.jsonl", decode_rows(tok, random.Random(SEED + 1)))
    write_jsonl(OUT / "split_cases.jsonl", split_rows())
    flags = tiny_flags_tokenizer()
    (OUT / "tiny-flags").mkdir(exist_ok=True)
    flags.save(str(OUT / "tiny-flags/tokenizer.json"), pretty=True)
    write_jsonl(OUT / "tiny-flags/cases.jsonl", tiny_flags_rows(flags))
    meta = {
        "tokenizers_version": tokenizers.__version__, "python_version": platform.python_version(),
        "python_unicodedata_version": unicodedata.unidata_version, "seed": SEED,
        "hf_regex_unicode_version": probe_regex_unicode_version(tok),
        "corpus_texts": len(rows), "corpus_post_unicode14_texts": sum(1 for r in rows if r.get("post_unicode14")),
        "corpus_tokens": sum(len(r["ids"]) for r in rows), "vocab_size": tok.get_vocab_size(), **facts,
    }
    (OUT / "meta.json").write_text(json.dumps(meta, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")
    print(json.dumps(meta, indent=2, ensure_ascii=False))
    return 0


if __name__ == "__main__":
    sys.exit(main())
