#!/usr/bin/env bash
# The reproduction run of docs/results/README.md: every offline model on the main, membership,
# thresholds and classify-then-map analyses of the three datasets, one store, then the tables and
# figures into docs/results/. Each command's wall time and the load average go to
# benchmarks/results/reproduce_runs.json (with the machine and the date).
#   scripts/reproduce.sh            # after `make install llamacpp models`
#   OUT=/tmp/r STORE=/tmp/r/store scripts/reproduce.sh
set -euo pipefail
cd "$(dirname "$0")/.."
export PFR_DATA_DIR="${PFR_DATA_DIR:-$(cd .. && pwd)/shared/data}" HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1
PFR=.venv/bin/pfr
OUT="${OUT:-docs/results}"
STORE="${STORE:-runs/reproduction}"
# model spec, --limit (texts per panel), the main study and any --model-opt key=value: the router is
# fast, the small LMs are not on two cores. Qwen 1.5B runs in bfloat16 (QWEN_OPTS="dtype=float32" on a
# CPU without fast bfloat16: see docs/results/README.md) on the main panel only (no development panel,
# so no selection rules): studies/reproduction-1.5b.toml. The small LMs stay in float32, as stored
# (dtype=auto would choose bfloat16 on an AMX CPU and score them again).
QWEN_LIMIT="${QWEN_LIMIT:-64}"
QWEN_OPTS="${QWEN_OPTS:-dtype=bfloat16}"
MODELS=(
  "minilm-router 64 reproduction"
  "qwen2.5-coder-1.5b $QWEN_LIMIT reproduction-1.5b $QWEN_OPTS"
  "smollm2-135m 8 reproduction dtype=float32"
  "gemma3-270m 4 reproduction dtype=float32"
)
mkdir -p "$OUT"
log=$(mktemp)
printf 'command\tseconds\tload_before\tload_after\n' > "$log"
step() {
  local before after t0
  before=$(cut -d' ' -f1 /proc/loadavg); t0=$(date +%s)
  "$@" --no-progress
  after=$(cut -d' ' -f1 /proc/loadavg)
  printf '%s\t%d\t%s\t%s\n' "$*" "$(( $(date +%s) - t0 ))" "$before" "$after" | tee -a "$log"
}
for entry in "${MODELS[@]}"; do
  read -r model limit main opts <<< "$entry"
  mopts=()
  for o in $opts; do mopts+=(--model-opt "$o"); done
  step $PFR study "studies/$main.toml" --model "$model" "${mopts[@]}" --limit "$limit" --store "$STORE"
  step $PFR study studies/reproduction-reference.toml --model "$model" "${mopts[@]}" --limit "$limit" --store "$STORE"
done
# the router has no symbol limit: its reference on CLINC150 and BANKING77 too
step $PFR study studies/reference.toml --model minilm-router --limit 64 --store "$STORE"
$PFR report "$STORE" --format markdown --out "$OUT/report.md"
$PFR report "$STORE" --format json --out "$OUT/report.json"
$PFR report "$STORE" --format html --out "$OUT/report.html" --figures "$OUT/figures"
cp "$STORE/thresholds.txt" "$STORE/thresholds.json" "$OUT/" 2>/dev/null || true
# the times, with the machine, its CPU flags and the date (benchmarks/_common.py)
.venv/bin/python - "$log" <<'PY'
import csv, sys
sys.path.insert(0, "benchmarks")
from _common import write_results
runs = [{**r, "seconds": int(r["seconds"])} for r in csv.DictReader(open(sys.argv[1]), delimiter="\t")]
write_results("reproduce_runs", {"runs": runs}, command="scripts/reproduce.sh")
PY
rm -f "$log"
