#!/usr/bin/env python3
"""One decode step's kernels, as ncu timed them one at a time (run2.sh: --graph-profiling node,
caches and clocks as found). Reads run2/ncu.csv.xz; prints the step from its embedding kernel to its
head, with each kernel's time, DRAM bytes read and their rate, and the sum by kind of kernel."""
import collections, csv, io, lzma, re, sys

path = sys.argv[1] if len(sys.argv) > 1 else "run2/ncu.csv.xz"
text = lzma.open(path, "rt").read()
rows = csv.DictReader(io.StringIO("\n".join(l for l in text.splitlines() if l.startswith('"'))))
to_us_or_mb = {"ns": 1e-3, "us": 1.0, "ms": 1e3, "byte": 1e-6, "Kbyte": 1e-3, "Mbyte": 1.0, "Gbyte": 1e3}
kernels = collections.OrderedDict()
for r in rows:
    name = re.sub(r"^(void )?unnamed>::", "", re.sub(r"\(.*", "", r["Kernel Name"]))
    k = kernels.setdefault(int(r["ID"]), {"name": name, "grid": r["Grid Size"].strip("()").split(",")[0]})
    k[r["Metric Name"]] = float(r["Metric Value"].replace(",", "")) * to_us_or_mb.get(r["Metric Unit"], 1.0)
ks = list(kernels.values())
first = next(i for i, k in enumerate(ks) if k["name"] == "embed_streams_kernel")
last = next(i for i in range(first, len(ks)) if ks[i]["name"].startswith("linear_kernel") and ks[i]["grid"] == "8080")
step = ks[first:last + 1]
print("| # | kernel | grid | us alone | MB read | GB/s |\n|---|---|---|---|---|---|")
by_kind = collections.defaultdict(lambda: [0, 0.0, 0.0])
for i, k in enumerate(step):
    t, mb = k["gpu__time_duration.sum"], k["dram__bytes_read.sum"]
    print(f"| {i} | {k['name']} | {k['grid']} | {t:.2f} | {mb:.2f} | {mb / t * 1e3:.0f} |")
    kind = re.sub(r"<.*", "", k["name"])
    by_kind[kind][0] += 1
    by_kind[kind][1] += t
    by_kind[kind][2] += mb
print(f"\n{len(step)} kernels, {sum(k['gpu__time_duration.sum'] for k in step):.1f} us one at a time\n")
print("| kernel | launches | us alone | MB read |\n|---|---|---|---|")
for kind, (n, t, mb) in sorted(by_kind.items(), key=lambda x: -x[1][1]):
    print(f"| {kind} | {n} | {t:.1f} | {mb:.1f} |")
