"""The texts of the tokenizer golden corpus, built deterministically from a seed.

Hand-written samples (code in several languages, prose in many scripts, emoji, combining marks,
digits, every kind of whitespace and newline, special tokens inside text, long repeats) plus
seeded random mixes of them and seeded random code points from every plane. Used by
make_tokenizer_fixtures.py; the C++ tests compare frank's ids with HF's on all of them.
"""
from __future__ import annotations

import random
import unicodedata

CODE = {
    "cpp": '''#include <vector>
#include <fmt/format.h>

template <typename T>
T sum(const std::vector<T>& xs) {
  T total{};
  for (const auto& x : xs) total += x;  // accumulate
  return total;
}

int main(int argc, char** argv) {
  std::vector<int> v{1, 2, 3, 42, 1000000};
  if (argc > 1 && v[0] != 0x1F) fmt::print("sum={}\\n", sum(v));
  return v.size() >= 3 ? 0 : -1;
}
''',
    "cpp_class": '''namespace frank::engine {
class Session final : public Base<Session> {
 public:
  explicit Session(int64_t max_tokens) noexcept : max_tokens_{max_tokens} {}
  [[nodiscard]] auto& cache() { return cache_; }
 private:
  std::unordered_map<std::string, std::unique_ptr<Layer>> cache_;
  int64_t max_tokens_ = 1'000'000;
};
}  // namespace frank::engine''',
    "python": '''import numpy as np

def softmax(x: np.ndarray, axis: int = -1) -> np.ndarray:
    """Numerically stable softmax."""
    x = x - x.max(axis=axis, keepdims=True)
    e = np.exp(x)
    return e / e.sum(axis=axis, keepdims=True)


class Cache(dict):
    def __missing__(self, key):
        self[key] = value = len(self) ** 2 + 0.5e-3
        return value

if __name__ == "__main__":
    print(f"{softmax(np.arange(10)):.3f}", end='\\n\\n')
''',
    "python_tabs": "def f(a,b):\n\tif a:\n\t\treturn b  # tab-indented\n\telse:\n\t\treturn [i*i for i in range(100) if i%3==0]\n",
    "rust": '''use std::collections::HashMap;

#[derive(Debug, Clone, PartialEq)]
pub struct Token<'a> {
    pub text: &'a str,
    pub id: u32,
}

impl<'a> Token<'a> {
    pub fn new(text: &'a str, id: u32) -> Self { Self { text, id } }
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let mut counts: HashMap<&str, usize> = HashMap::new();
    for w in "a b a c".split_whitespace() { *counts.entry(w).or_insert(0) += 1; }
    println!("{:?}", counts);
    Ok(())
}
''',
    "javascript": '''const fetchJson = async (url, { retries = 3 } = {}) => {
  for (let i = 0; i < retries; i++) {
    try {
      const res = await fetch(`${url}?page=${i}`);
      if (!res.ok) throw new Error(`HTTP ${res.status}`);
      return await res.json();
    } catch (e) { console.warn(e?.message ?? e); }
  }
  return null;
};
export default fetchJson;
''',
    "typescript": "interface User { id: number; name?: string; tags: Array<string> }\nconst u: User = { id: 7, tags: [] };\ntype Fn = (x: number) => Promise<void>;\n",
    "shell": '''#!/usr/bin/env bash
set -euo pipefail
for f in "$@"; do
  if [[ -f "$f" ]]; then
    wc -l "$f" | awk '{print $1}' >> /tmp/counts.txt 2>&1
  fi
done
echo "done: $(date +%Y-%m-%d)" && exit 0
''',
    "json": '''{
  "model_type": "deepseek_v4",
  "vocab_size": 129280,
  "rope_scaling": {"type": "yarn", "factor": 16.0, "beta_fast": 32},
  "layers": [0, 4, 128, 4, 128],
  "nested": {"a": [true, false, null], "b": "\\u00e9\\n"},
  "empty": {}
}''',
    "json_compact": '{"id":"chatcmpl-123","object":"chat.completion","created":1677652288,"choices":[{"index":0,"message":{"role":"assistant","content":"Hello!"}}]}',
    "diff": '''diff --git a/src/main.cpp b/src/main.cpp
index 3b18e51..a9c2f0d 100644
--- a/src/main.cpp
+++ b/src/main.cpp
@@ -10,7 +10,8 @@ int main() {
-  int x = 0;
+  int x = 1;
+  int y = x + 1;
   return 0;
 }
''',
    "sql": "SELECT u.id, COUNT(*) AS n\nFROM users u\nJOIN orders o ON o.user_id = u.id\nWHERE o.created_at >= '2024-01-01'\nGROUP BY u.id\nHAVING n > 5;",
    "html": '<!DOCTYPE html>\n<html lang="en">\n<head><meta charset="utf-8"><title>Test &amp; more</title></head>\n<body><p class="x">Hello, <b>world</b>!</p><br/></body>\n</html>',
    "yaml": "name: ci\non: [push]\njobs:\n  build:\n    runs-on: ubuntu-latest\n    steps:\n      - uses: actions/checkout@v4\n      - run: make -j2\n",
    "go": 'package main\n\nimport "fmt"\n\nfunc main() {\n\tch := make(chan int, 10)\n\tgo func() { ch <- 42 }()\n\tfmt.Println(<-ch)\n}\n',
    "markdown": "# Title\n\nSome *emphasis*, **bold** and `code`.\n\n- item 1\n- item 2\n\n```python\nprint('hi')\n```\n\n| a | b |\n|---|---|\n| 1 | 2 |\n",
    "latex": r"\begin{equation} E = mc^2 \quad \sum_{i=1}^{n} x_i^2 \leq \frac{\alpha}{\beta} \end{equation}",
}

PROSE = {
    "english": "The quick brown fox jumps over the lazy dog. It's 5 o'clock somewhere, isn't it? "
               "\"Well,\" she said, \"we'll see.\" Mr. Smith's car cost $12,345.67 (about €11k) in 2023.",
    "english_2": "Tokenizers split text into pieces. Byte-level BPE never fails: every byte has a token, "
                 "so even unusual text -- like emoji, URLs (https://example.com/a?b=c&d=e#f) or e-mail "
                 "addresses (someone@example.org) -- can be encoded and decoded losslessly.",
    "chinese": "深度求索发布了新的大语言模型。它在代码、数学和推理任务上表现出色，支持一百万个词元的上下文长度。"
               "我们今天去公园散步，天气很好！你呢？",
    "chinese_trad": "臺灣的夜市非常熱鬧，有許多美味的小吃。謝謝你的幫忙。",
    "japanese": "今日はいい天気ですね。東京タワーに行きました。カタカナとひらがなと漢字が混ざっています。"
                "ｶﾀｶﾅ（半角）もあります。",
    "korean": "안녕하세요. 저는 한국어를 공부하고 있습니다. 오늘 날씨가 정말 좋네요!",
    "arabic": "مرحبا بالعالم. اللغة العربية جميلة جدا، وهي تكتب من اليمين إلى اليسار. ١٢٣ ٤٥٦",
    "hindi": "नमस्ते दुनिया। मैं हिंदी सीख रहा हूँ। यह भाषा देवनागरी लिपि में लिखी जाती है।",
    "russian": "Съешь же ещё этих мягких французских булок, да выпей чаю. Москва — столица России.",
    "greek": "Γειά σου Κόσμε! Η ελληνική γλώσσα έχει μακρά ιστορία.",
    "hebrew": "שלום עולם! עברית נכתבת מימין לשמאל.",
    "thai": "สวัสดีชาวโลก ภาษาไทยไม่มีการเว้นวรรคระหว่างคำ",
    "vietnamese": "Xin chào thế giới! Tiếng Việt có rất nhiều dấu thanh điệu.",
    "german_french": "Grüße aus München! Straße, Maß, Fußgänger. Ça va? Où est la bibliothèque? Noël, naïve, cœur.",
    "turkish_polish": "İstanbul'da ığdır şişe. Zażółć gęślą jaźń.",
    "mixed_cjk_latin": "使用Python3.11和C++20编写的DeepSeek-V4推理引擎，速度提升了300%。テストtest테스트",
}

EMOJI = [
    "😀", "👍🏽", "👍🏿", "👨‍👩‍👧‍👦", "🏳️‍🌈", "👩🏽‍💻", "🧑🏻‍🤝‍🧑🏾", "❤️", "❤️‍🔥", "🇯🇵", "🇺🇸", "🇪🇺",
    "1️⃣", "#️⃣", "©️", "™", "🤷‍♂️", "👁️‍🗨️", "🐈‍⬛", "🫠", "🥹", "✨", "🔥", "🚀", "☺", "♥",
]

COMBINING = [
    "e\u0301", "a\u0308\u0304", "n\u0303", "Z\u0351\u036b\u0343\u036a\u0302\u036b\u033d\u034f\u0334\u0319\u0324",
    "\u1100\u1161\u11a8", "क\u094d\u0937", "\u0915\u093f", "o\u0328\u0301", "\u05e9\u05c1\u05b8", "i\u0307",
    "\u0041\u030a", "\u212b", "ﬁ", "\u0644\u0627", "x\u20dd", "\u0301\u0301\u0301",
]

WHITESPACE = [
    " ", "  ", "\t", "\n", "\r\n", "\r", "\u2028", "\u2029", "\u0085", "\u000b", "\u000c", "\u00a0",
    "\u3000", "\u2000", "\u2003", "\u2009", "\u200a", "\u202f", "\u205f", "\u1680", "\u180e", "\u200b",
    "\ufeff", "\u2060", " \n", "\n ", " \t ", "\n\n\n", "\r\r", "\n\r",
    "  \u180e", " \u180e ", "\t\u180e\u200b ",  # U+180E is not White_Space (since Unicode 6.3)
]

DIGITS = ["0", "7", "42", "123", "1234", "12345", "123456", "1234567", "3.14159", "1e-9", "0xFF", "1,000,000",
          "٠١٢٣٤٥٦٧٨٩", "०१२३", "１２３４５", "²³", "½", "Ⅻ", "①②③", "𝟘𝟙𝟚", "1st", "2nd", "v1.2.3", "-5", "+7"]

# Characters assigned after Unicode 14.0: PCRE2 10.42 (Debian 12) does not know them, HF's Oniguruma does.
POST_UNICODE_14 = [
    "\U0001FA77", "\U0001FAE8", "\U0001FACE", "\U0001FABF", "\U0001F6DC",  # 15.0 emoji (pink heart, shaking face, ...)
    "\U00011F04\U00011F05", "\U0001E4D0\U0001E4D1",  # 15.0 letters (Kawi, Nag Mundari)
    "\U00031350\U00031351", "\U0002EBF0\U0002EBF1",  # 15.0 / 15.1 CJK extensions H and I
    "\U0001FAE9", "\U00010D4A\U00010D4B", "\U000105C0",  # 16.0 (emoji, Garay, Todhri)
]


def long_repeats() -> list[tuple[str, str]]:
    return [
        ("repeat_a_5000", "a" * 5000), ("repeat_space_3000", " " * 3000), ("repeat_newline_2000", "\n" * 2000),
        ("repeat_ab_1000", "ab" * 1000), ("repeat_cjk_2000", "中" * 2000), ("repeat_emoji_500", "😀" * 500),
        ("repeat_digit_3000", "1" * 3000), ("repeat_tab_2000", "\t" * 2000), ("repeat_a_space_1000", "a " * 1000),
        ("repeat_space_newline_1000", " \n" * 1000), ("repeat_dot_3000", "." * 3000), ("repeat_dash_2000", "-" * 2000),
        ("repeat_crlf_500", "\r\n" * 500), ("repeat_spaces_then_word", " " * 3000 + "word"),
        ("repeat_nbsp_1000", "\u00a0" * 1000), ("repeat_combining_500", "a" + "\u0301" * 500),
        ("repeat_zwj_300", "👨‍👩‍👧‍👦" * 300), ("repeat_special_200", "<｜User｜>" * 200),
    ]


def edge_cases(special: list[str]) -> list[tuple[str, str]]:
    return [
        ("empty", ""), ("one_space", " "), ("one_newline", "\n"), ("one_letter", "a"), ("nul", "\x00"),
        ("controls", "\x01\x02\x1b[31mred\x1b[0m\x7f"), ("bos_only", special[0]), ("special_only", "<｜User｜>"),
        ("specials_adjacent", "<｜User｜><｜Assistant｜><think></think>"),
        ("special_spaces", "  <｜User｜>  hello  <｜Assistant｜>  "),
        ("partial_specials", "<｜User <｜Assistant｜ <think </think <｜ ｜> <dsml: </dsml:tool> ｜DSML｜x"),
        ("nested_specials", "<<｜User｜>> <<think>> <|EOT|><|EOT|>"),
        ("chat_template", "<｜begin▁of▁sentence｜>You are helpful.<｜User｜>What is 2+2?<｜Assistant｜><think>\n"
                          "Simple.\n</think>\n\n4<｜end▁of▁sentence｜>"),
        ("dsml_call", "<｜DSML｜function_calls>\n<｜DSML｜invoke name=\"get_weather\">\n"
                      "<｜DSML｜parameter name=\"city\" string=\"true\">北京</｜DSML｜parameter>\n"
                      "</｜DSML｜invoke>\n</｜DSML｜function_calls>"),
        ("table_tokens", "<｜table｜><｜tr｜><｜td｜>1<｜/td｜><｜/tr｜><｜/table>｜"),
        ("fim", "<｜fim▁begin｜>def f():\n    <｜fim▁hole｜>\n<｜fim▁end｜>"),
        ("placeholders", "<｜place▁holder▁no▁0｜><|place_holder_mm_span_0021|><｜place▁holder▁no▁799｜>"),
        ("space_before_punct", "a , b ; c ! d ? e ... f !!! g"),
        ("punct_letters", "$var @user #tag %d &amp *ptr -flag --long .hidden /usr/bin ~home"),
        ("apostrophes", "don't won't I'm you're we've they'll she'd DON'T 'quoted'"),
        ("urls", "https://www.example.com:8080/path/to/file.html?query=1&x=y#frag mailto:a@b.co"),
        ("fullwidth", "ＡＢＣ　ｄｅｆ！？（全角）"),
        ("invisible", "a\u200db\u200cc\u2066d\u2069e\u00adf"),
        ("variation_selectors", "☺\ufe0f ☺\ufe0e 葛\U000E0100"),
        ("surrogate_neighbors", "\ud7ff\ue000\uffef\ufffd\U00010000\U0010fffd"),
        ("noncharacters", "\ufdd0\ufffe\uffff\U0001fffe\U0010ffff"),
        ("private_use", "\ue000\uf8ff\U000f0000\U00100000"),
    ]


def assigned_code_point(rng: random.Random, plane: int) -> str:
    """A random code point of `plane` that Unicode 14.0 assigns (or reserves for private use)."""
    while True:
        cp = plane * 0x10000 + rng.randrange(0x10000)
        if 0xD800 <= cp <= 0xDFFF:
            continue
        if unicodedata.category(chr(cp)) != "Cn":
            return chr(cp)


def random_mix(rng: random.Random, special: list[str], pools: list[list[str]]) -> str:
    parts = []
    for _ in range(rng.randrange(1, 40)):
        kind = rng.random()
        if kind < 0.1:
            parts.append(rng.choice(special))
        elif kind < 0.15:
            parts.append(assigned_code_point(rng, rng.choice([0, 0, 0, 1, 2, 3, 14, 15])))
        else:
            pool = rng.choice(pools)
            item = rng.choice(pool)
            if len(item) > 40:  # a slice of a longer sample, cut anywhere
                start = rng.randrange(len(item))
                item = item[start:start + rng.randrange(1, 120)]
            parts.append(item)
    return "".join(parts)


def random_code_points(rng: random.Random) -> str:
    planes = [0, 1, 2, 3, 14, 15, 16]
    return "".join(assigned_code_point(rng, rng.choice(planes)) if rng.random() < 0.8 else rng.choice(WHITESPACE)
                   for _ in range(rng.randrange(1, 200)))


def build_corpus(seed: int, special: list[str], n_random_mixes: int, n_random_code_points: int) -> list[dict]:
    """Returns [{"name": ..., "text": ...}] in a fixed order; `special` are the added tokens' contents."""
    rng = random.Random(seed)
    texts: list[tuple[str, str]] = []
    texts += [(f"code_{k}", v) for k, v in CODE.items()]
    texts += [(f"prose_{k}", v) for k, v in PROSE.items()]
    texts += [(f"emoji_{i}", f"I {e} this{e}{e} ok {e}.") for i, e in enumerate(EMOJI)]
    texts += [(f"combining_{i}", f"{c} x{c}y {c}{c}") for i, c in enumerate(COMBINING)]
    texts += [(f"whitespace_{i}", f"a{w}b{w}{w}c {w}d{w}") for i, w in enumerate(WHITESPACE)]
    texts += [(f"digits_{i}", f"x{d} {d}y {d}{d} ({d})") for i, d in enumerate(DIGITS)]
    texts += [(f"digit_run_{n}", "".join(str(rng.randrange(10)) for _ in range(n)) + " end") for n in range(1, 41)]
    texts += [(f"post_unicode14_{i}", f"a{c}b {c} {c}{c}x") for i, c in enumerate(POST_UNICODE_14)]
    texts += edge_cases(special)
    texts += long_repeats()
    texts += [(f"special_in_text_{i}", f"text{s}more {s} end{s}") for i, s in enumerate(rng.sample(special, 24))]
    pools = [list(CODE.values()), list(PROSE.values()), EMOJI, COMBINING, WHITESPACE, DIGITS]
    texts += [(f"random_mix_{i}", random_mix(rng, special, pools)) for i in range(n_random_mixes)]
    texts += [(f"random_code_points_{i}", random_code_points(rng)) for i in range(n_random_code_points)]
    return [{"name": name, "text": text} for name, text in texts]


def uses_post_unicode14(text: str) -> bool:
    """Whether the text has a code point Unicode 14.0 leaves unassigned (noncharacters aside)."""
    def unassigned(c: str) -> bool:
        cp = ord(c)
        noncharacter = 0xFDD0 <= cp <= 0xFDEF or (cp & 0xFFFE) == 0xFFFE
        return unicodedata.category(c) == "Cn" and not noncharacter
    return any(unassigned(c) for c in text)
