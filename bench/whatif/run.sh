#!/usr/bin/env bash
# The what-if rows on the real framework: one drop-and-pad what-if measured
# by the megatron engine next to the same search given drop-and-pad with
# --set.
#
#   bench/whatif/run.sh OUT_DIR
#
# The search (bench/whatif/qwen3-b200.yaml): qwen3_30b_a3b on its b200
# recipe (EP 8, 16 micro-batches, dropless experts, no EP overlap), none
# and local full_iteration at warm-up 1, exhaustive. The megatron engine
# builds one rank's slice of 2 layers and runs 2 micro-batches at world
# size 1 (its EP all-to-all is modelled). The recipe rejects local
# full_iteration (its dropless experts sync with the host inside the
# graph): with --what-if it runs with drop-and-pad, on the slice for
# real; the second search gives drop-and-pad with --set, where it is a
# candidate like the others. Each search also measures the recipe's own
# setting, te attn,moe_router,moe_preprocess w3 (the cuda engine's
# emulation where Transformer Engine is not importable).
#
# Writes OUT_DIR/whatif.json and OUT_DIR/set.json (cgtune --headless
# --json), their progress (whatif.err, set.err) and run folders
# (run-whatif, run-set); each search is bounded by LIMIT seconds (default
# 225, so both end within 8 minutes). Then, anywhere:
#   go run ./bench/whatif/compare OUT_DIR
#
# Needs: one GPU; torch with CUDA and Megatron-Core importable by the
# python3 on PATH (or $CGTUNE_PYTHON) with PYTHONPATH set; bin/cgtune built
# in the repository root with CGO_ENABLED=1 go build -o bin/cgtune ./cmd/cgtune.
# ENGINE=estimate runs the same two searches on the estimate engine (no
# GPU), to try the script.
set -uo pipefail
cd "$(dirname "$0")/../.."
die() { echo "bench/whatif/run.sh: $*" >&2; exit 2; }
[ $# -eq 1 ] || { sed -n '2,/^set -uo/p' "$0" | sed '$d; s/^# \{0,1\}//' >&2; exit 2; }
out=$1
[ -x bin/cgtune ] || die "no bin/cgtune (CGO_ENABLED=1 go build -o bin/cgtune ./cmd/cgtune)"
for f in whatif.json set.json run-whatif run-set; do
	[ -e "$out/$f" ] && die "$out/$f exists: give another OUT_DIR or remove it"
done
mkdir -p "$out" || die "cannot create $out"
out=$(cd "$out" && pwd)
# Its own cache: no framework profile or probe of another run is used.
export PYTHONUNBUFFERED=1 NCCL_NVLS_ENABLE=0 XDG_CACHE_HOME=$out/cache
LIMIT=${LIMIT:-225}
ENGINE=${ENGINE:-megatron}
exec > >(tee "$out/progress.txt") 2>&1
command -v nvidia-smi >/dev/null && nvidia-smi --query-gpu=index,name,driver_version,memory.used --format=csv,noheader

common=(--headless --json --engine "$ENGINE" --preset bench/whatif/qwen3-b200.yaml --strategy exhaustive)
[ "$ENGINE" = megatron ] && common+=(--gpu 0 --max-layers 2 --max-microbatches 2 --skip-profile)

# search NAME FLAGS...: one headless search, its result in NAME.json.
search() {
	local name=$1 t0=$SECONDS rc
	shift
	timeout -s INT -k 15 "$LIMIT" bin/cgtune "${common[@]}" --run-dir "$out/run-$name" "$@" >"$out/$name.json" 2>"$out/$name.err"
	rc=$?
	echo "== $name: exit $rc, $((SECONDS - t0)) s"
	# One line per finished run: the candidate, its step, its eager step.
	python3 -c '
import json, sys
for line in open(sys.argv[1]):
    try:
        e = json.loads(line)
    except ValueError:
        continue
    if e.get("event") == "result":
        r = e["result"]; c = r["candidate"]
        print("  %s %s %s w%d%s: step %.2f ms, eager %.2f ms, %s %s" % (r.get("source"), c["impl"], ",".join(c.get("scopes") or []) or "-",
              c.get("warmup", 0), " [" + ", ".join(c["what_if"]) + "]" if c.get("what_if") else "",
              r["step"]["median_ms"], r["eager"]["median_ms"], r.get("error_kind", ""), r.get("error", "")[:160]))
    elif e.get("event") in ("error", "notice"):
        print("  " + e["event"] + ": " + e.get("message", ""))
' "$out/$name.err"
	return $rc
}

search whatif --what-if
search set --set model.moe_expert_capacity_factor=1.0 --set model.moe_pad_expert_input_to_capacity=true
echo "== next: go run ./bench/whatif/compare $out"
