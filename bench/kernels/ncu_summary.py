#!/usr/bin/env python3
"""Summarises ncu-layouts.sh's CSVs: per layout, k and reducer kernel, the
shared-memory wavefronts per instruction (ideal: 2 for 8-byte words, a warp
moving 256 bytes) and the bank conflicts as a share of all wavefronts."""
import csv, glob, io, os, re, sys
from collections import defaultdict

folder = sys.argv[1]
rows = []
for path in sorted(glob.glob(os.path.join(folder, "ncu-*-k*.csv"))):
    layout, k = re.match(r"ncu-(\w+)-k(\d+)\.csv", os.path.basename(path)).groups()
    text = open(path).read()
    start = text.find('"ID"')
    if start < 0:
        continue
    m = defaultdict(lambda: defaultdict(float))
    for r in csv.DictReader(io.StringIO(text[start:])):
        kernel = re.sub(r"<unsigned long, (\d+), (\d), (\d).*", r"<K=\1,sort=\2,final=\3>", r["Kernel Name"].replace("void ", ""))
        kernel = re.sub(r"<unsigned long, (\d+), .*", r"<K=\1>", kernel)
        m[kernel][r["Metric Name"]] += float(r["Metric Value"].replace(",", "") or 0)
    for kernel, v in m.items():
        ld_i, st_i = v["smsp__inst_executed_op_shared_ld.sum"], v["smsp__inst_executed_op_shared_st.sum"]
        ld_w = v["l1tex__data_pipe_lsu_wavefronts_mem_shared_op_ld.sum"]
        st_w = v["l1tex__data_pipe_lsu_wavefronts_mem_shared_op_st.sum"]
        conf = v["l1tex__data_bank_conflicts_pipe_lsu_mem_shared_op_ld.sum"] + v["l1tex__data_bank_conflicts_pipe_lsu_mem_shared_op_st.sum"]
        rows.append((layout, int(k), kernel, v["gpu__time_duration.sum"] / 1000,
                     ld_w / max(ld_i, 1), st_w / max(st_i, 1), 100 * conf / max(ld_w + st_w, 1)))
print("| layout | k | kernel | µs | ld wavefronts/instr | st wavefronts/instr | conflicts % of wavefronts |")
print("|---|---:|---|---:|---:|---:|---:|")
for r in sorted(rows, key=lambda r: (r[1], r[2], r[0])):
    print("| %s | %d | %s | %.1f | %.2f | %.2f | %.1f %% |" % r)
