#!/usr/bin/env bash
# Bank conflicts and speed of the bitonic reducers' tile layouts (issue 3),
# on the GPU host. Arguments: the folder holding gknn_bench_layout_{padded,
# swizzled,unpadded} (and any other gknn_bench_layout_* there, e.g. an
# earlier build to compare with) and the output folder. Writes per layout a
# timing table (n = 2^28) and ncu's shared-memory counters of every reducer
# kernel at n = 2^24 for k = 2 ... 1024 (clocks left alone, as the host
# asks), summarised by ncu_summary.py into ncu-summary.md.
set -euo pipefail
bin=${1:?folder with the binaries} out=${2:?output folder}
mkdir -p "$out"
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader >"$out/device.txt"
metrics=l1tex__data_bank_conflicts_pipe_lsu_mem_shared_op_ld.sum,l1tex__data_bank_conflicts_pipe_lsu_mem_shared_op_st.sum,l1tex__data_pipe_lsu_wavefronts_mem_shared_op_ld.sum,l1tex__data_pipe_lsu_wavefronts_mem_shared_op_st.sum,smsp__inst_executed_op_shared_ld.sum,smsp__inst_executed_op_shared_st.sum,gpu__time_duration.sum
here=$(dirname "$0")
for exe in "$bin"/gknn_bench_layout_*; do
  layout=${exe##*/gknn_bench_layout_}
  "$bin/gknn_bench_layout_$layout" 28 >"$out/time-$layout.md" 2>&1 || echo "FAILED $layout" >>"$out/time-$layout.md"
  for k in 2 8 16 32 256 1024; do
    ncu --clock-control none -k regex:reducer --metrics "$metrics" --csv \
      "$bin/gknn_bench_layout_$layout" 24 "$k" >"$out/ncu-$layout-k$k.csv" 2>"$out/ncu-$layout-k$k.err" || true
  done
done
python3 "$here/ncu_summary.py" "$out" >"$out/ncu-summary.md"
