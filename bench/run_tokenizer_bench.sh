#!/usr/bin/env bash
# Tokenizer encoding throughput, frank vs HuggingFace tokenizers, on the same ~10 MB of mixed code
# and prose, single thread, same machine, same run. Writes bench/results/tokenizer-<date>.md.
#
#   bench/run_tokenizer_bench.sh            (after building: cmake --build build -j2)
#
# BUILD_DIR (default build) holds tokenizer_bench; HF_PYTHON (default /tmp/tokenv/bin/python) is
# a Python with tokenizers installed outside the repository:
#   python3 -m venv /tmp/tokenv && /tmp/tokenv/bin/pip install tokenizers==0.23.3
# RUNS (default 7) encodes after the cold one; CPU (default 0) is the core both are pinned to.
set -euo pipefail
cd "$(dirname "$0")/.."

build_dir=${BUILD_DIR:-build}
hf_python=${HF_PYTHON:-/tmp/tokenv/bin/python}
runs=${RUNS:-7}
cpu=${CPU:-0}
tokenizer=tests/fixtures/tokenizer/deepseek-v4/tokenizer.json
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

[ -x "$build_dir/tokenizer_bench" ] || { echo "build $build_dir/tokenizer_bench first" >&2; exit 1; }
"$hf_python" -c "import tokenizers" 2>/dev/null || { echo "$hf_python has no tokenizers (see the header)" >&2; exit 1; }

text_info=$(python3 bench/make_bench_text.py --out "$work/docs.jsonl")
load_before=$(cut -d' ' -f1-3 /proc/loadavg)
frank_cmd="taskset -c $cpu $build_dir/tokenizer_bench --tokenizer $tokenizer --docs \$DOCS --runs $runs --ids-out \$IDS"
hf_cmd="taskset -c $cpu $hf_python bench/tokenizer_hf.py --tokenizer $tokenizer --docs \$DOCS --runs $runs --ids-out \$IDS"
frank_json=$(DOCS="$work/docs.jsonl" IDS="$work/frank.ids" eval "$frank_cmd")
hf_json=$(DOCS="$work/docs.jsonl" IDS="$work/hf.ids" eval "$hf_cmd")
if cmp -s "$work/frank.ids" "$work/hf.ids"; then same_ids=yes; else same_ids=NO; fi

field() { python3 -c "import json,sys; v=json.loads(sys.argv[1])[sys.argv[2]]; print(v if not isinstance(v, dict) else json.dumps(v))" "$1" "$2"; }
frank_median=$(field "$frank_json" median_mb_s)
hf_median=$(field "$hf_json" median_mb_s)
speedup=$(python3 -c "print(f'{$frank_median / $hf_median:.2f}')")

mkdir -p bench/results
out=bench/results/tokenizer-$(date +%F).md
cat > "$out" <<MD
# Tokenizer encoding throughput, $(date +%F)

- Machine: $(lscpu | sed -n 's/^Model name: *//p'), $(nproc) cores (both runs pinned to core $cpu), $(uname -sr);
  load average $load_before before the runs (other work shares this machine)
- Date: $(date -Is)
- Text: $(field "$text_info" bytes) bytes of mixed code and prose in $(field "$text_info" documents) documents from
  \`bench/make_bench_text.py\` (bytes by kind: $(field "$text_info" bytes_by_kind); JSONL sha256
  $(field "$text_info" sha256)); one encode call per document, no BOS
- Tokenizer: DeepSeek-V4 \`$tokenizer\`
- Each side: one cold pass over all documents (empty caches), then $runs passes; MB/s = 10^6 bytes per second
- Same ids from both: **$same_ids** ($(field "$frank_json" tokens) tokens)

| | median MB/s | min | max | cold MB/s | load s |
|---|---|---|---|---|---|
| frank | **$frank_median** | $(field "$frank_json" min_mb_s) | $(field "$frank_json" max_mb_s) | $(field "$frank_json" cold_mb_s) | $(field "$frank_json" load_s) |
| $(field "$hf_json" impl) | **$hf_median** | $(field "$hf_json" min_mb_s) | $(field "$hf_json" max_mb_s) | $(field "$hf_json" cold_mb_s) | $(field "$hf_json" load_s) |

frank / HF (medians): **${speedup}x**

Commands (\$DOCS, \$IDS: temporary files):

\`\`\`
bench/run_tokenizer_bench.sh   # BUILD_DIR=$build_dir RUNS=$runs CPU=$cpu
$frank_cmd
$hf_cmd
\`\`\`

Raw:

\`\`\`
$frank_json
$hf_json
\`\`\`
MD
cat "$out"
