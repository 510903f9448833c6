#!/usr/bin/env bash
# Benchmarks of the megatron engine on real Megatron-Core, one GPU.
#
#   bench/megatron/run.sh search CASE OUT_DIR
#       The megatron engine's search of CASE (exhaustive; halving with a
#       budget for the qwen3_30b_a3b cases): its JSON result, journal and
#       one line per run (bench/megatron/table.py).
#   bench/megatron/run.sh three-way CASE OUT_DIR
#       A halving megatron search of CASE that measures the framework
#       profile first (its eager runs are the search's eager baseline), then
#       bench/threeway: the megatron engine's results against the cuda
#       engine (this GPU) and the estimate engine, both from that profile.
#   bench/megatron/run.sh calibrated-search CASE OUT_DIR
#       The framework profile of CASE (cgtune probe --framework), then the
#       cuda engine's exhaustive search calibrated by it: the ranking and
#       tie groups the emulation gives.
#   bench/megatron/run.sh host-variance OUT_DIR
#       bench/megatron/hostvar.py: moe-small's eager step in three processes
#       free and three pinned to four of the GPU's CPUs, and where the host
#       is against the GPU through a step of each graph mode.
#   bench/megatron/run.sh gaps OUT_DIR
#       bench/megatron/gaps.py: where the GPU waits in dense-small's step
#       (torch.profiler) per graph mode, at 1 and 8 layers and 1, 2 and 4
#       micro-batches.
#
# CASE: dense-small-mbs1 dense-small-mbs4 moe-small-mbs1-droppad
# moe-small-mbs4-droppad moe-small-mbs1-dropless moe-small-mbs4-dropless
# qwen-h100 qwen-h100-droppad qwen-tp2pp2ep4 (three-way and
# calibrated-search: the first four and qwen-h100-droppad).
#
# Results go to OUT_DIR/BENCHMARK-CASE/ (OUT_DIR/BENCHMARK/ without a case),
# which must not exist yet; the cgtune cache (probes, framework profiles)
# lives inside it, so every run measures afresh.
#
# Needs: one GPU, torch with CUDA, Megatron-LM's megatron/ package in $MLM
# (default ./.mlm, git-ignored), and, built in the repository root,
#   CGO_ENABLED=1 go build -o bin/cgtune ./cmd/cgtune
#   go build -o bin/threeway ./bench/threeway     (three-way)
# LIMIT=SECONDS bounds each step (default 900).
set -uo pipefail
cd "$(dirname "$0")/../.."
root=$PWD
usage() {
	sed -n '2,/^set -uo/p' "$0" | sed '$d; s/^# \{0,1\}//' >&2
	exit 2
}
die() { echo "bench/megatron/run.sh: $*" >&2; exit 2; }

bench=${1:-}
case "$bench" in
search | three-way | calibrated-search) [ $# -eq 3 ] || usage; kase=$2 out=$3 ;;
host-variance | gaps) [ $# -eq 2 ] || usage; kase="" out=$2 ;;
*) usage ;;
esac

P=bench/megatron/presets
DROPPAD=(--set model.moe_expert_capacity_factor=1.0 --set model.moe_pad_expert_input_to_capacity=true)
QWEN=(--model qwen3_30b_a3b --gpu-type h100)
# case_args CASE: the cgtune arguments of a case (in $args), its search
# strategy (in $strategy) and whether its experts drop and pad (in $droppad).
case_args() {
	droppad=no strategy=(--strategy exhaustive)
	case "$1" in
	dense-small-mbs1 | dense-small-mbs4) args=(--preset $P/$1.yaml) ;;
	moe-small-mbs1-droppad | moe-small-mbs4-droppad) args=(--preset $P/${1%-droppad}.yaml "${DROPPAD[@]}"); droppad=yes ;;
	moe-small-mbs1-dropless | moe-small-mbs4-dropless) args=(--preset $P/${1%-dropless}.yaml --run-predicted-failures) ;;
	qwen-h100) args=("${QWEN[@]}"); strategy=(--strategy halving --budget 120s) ;;
	qwen-h100-droppad) args=("${QWEN[@]}" "${DROPPAD[@]}"); strategy=(--strategy halving --budget 60s); droppad=yes ;;
	qwen-tp2pp2ep4) args=(--preset $P/qwen3-tp2pp2ep4.yaml); strategy=(--strategy halving --budget 90s) ;;
	*) die "unknown case '$1' (want dense-small-mbs1, dense-small-mbs4, moe-small-mbs1-droppad, moe-small-mbs4-droppad, moe-small-mbs1-dropless, moe-small-mbs4-dropless, qwen-h100, qwen-h100-droppad or qwen-tp2pp2ep4)" ;;
	esac
}
[ -z "$kase" ] || case_args "$kase"
if [ "$bench" = three-way ] || [ "$bench" = calibrated-search ]; then
	case "$kase" in
	dense-small-mbs1 | dense-small-mbs4 | moe-small-mbs1-droppad | moe-small-mbs4-droppad | qwen-h100-droppad) ;;
	*) die "$bench runs dense-small-mbs1, dense-small-mbs4, moe-small-mbs1-droppad, moe-small-mbs4-droppad or qwen-h100-droppad, not '$kase'" ;;
	esac
fi

mlm=${MLM:-$root/.mlm}
[ -d "$mlm/megatron" ] || die "no Megatron-LM at $mlm (set MLM to a checkout)"
[ "$bench" = host-variance ] || [ "$bench" = gaps ] || [ -x bin/cgtune ] || die "no bin/cgtune (CGO_ENABLED=1 go build -o bin/cgtune ./cmd/cgtune)"
[ "$bench" != three-way ] || [ -x bin/threeway ] || die "no bin/threeway (go build -o bin/threeway ./bench/threeway)"
R=$out/$bench${kase:+-$kase}
[ -e "$R" ] && die "$R exists: give another OUT_DIR or remove it"
mkdir -p "$R" || die "cannot create $R"
R=$(cd "$R" && pwd)
export PYTHONPATH=$mlm PYTHONUNBUFFERED=1 NCCL_NVLS_ENABLE=0 XDG_CACHE_HOME=$R/cache
LIMIT=${LIMIT:-900}
exec > >(tee "$R/progress.txt") 2>&1
nvidia-smi --query-gpu=index,name,driver_version,memory.used --format=csv,noheader

# search NAME ARGS...: a headless megatron search with its JSON result in
# NAME.json, progress events in NAME.err and its run folder run-NAME.
search() {
	local name=$1 t0=$SECONDS rc
	shift
	timeout -s INT -k 10 "$LIMIT" bin/cgtune --headless --json --engine megatron --run-dir "$R/run-$name" "$@" \
		>"$R/$name.json" 2>"$R/$name.err"
	rc=$?
	echo "== search $name: exit $rc, $((SECONDS - t0)) s"
	[ -f "$R/run-$name/journal.jsonl" ] || { tail -3 "$R/$name.err"; return $rc; }
	python3 bench/megatron/table.py "$R/run-$name/journal.jsonl" | grep -v "note: \(collectives\|python gc\|last step\)" | cut -c1-260
	return $rc
}

# threeway NAME PROFILE: bench/threeway on the search NAME.json and PROFILE.
threeway() {
	local name=$1 prof=$2 t0=$SECONDS tw=("${args[@]}")
	if [ $droppad = yes ]; then tw=("${tw[@]:0:${#tw[@]}-4}" --drop-pad); fi
	timeout -s INT -k 10 "$LIMIT" bin/threeway --profile "$prof" --megatron "$R/$name.json" "${tw[@]}" --gpu 0 \
		--json "$R/threeway-$name.json" >"$R/threeway-$name.txt" 2>&1
	echo "== threeway $name: exit $?, $((SECONDS - t0)) s"
	cat "$R/threeway-$name.txt"
}

case "$bench" in
search)
	search "$kase" "${args[@]}" "${strategy[@]}"
	;;
three-way)
	# Without a cached profile the search measures it first and says where
	# it saved it in a "prepare" event.
	case "$kase" in
	dense-small-*) budget=30s ;;
	moe-small-mbs1-droppad) budget=35s ;;
	moe-small-mbs4-droppad) budget=45s ;;
	qwen-h100-droppad) budget=60s ;;
	esac
	search "$kase" "${args[@]}" --strategy halving --budget $budget
	python3 -c 'import json, sys
for line in open(sys.argv[1]):
    if line.startswith("{\"event\":\"prepare\""):
        print(json.loads(line)["message"])' "$R/$kase.err" >"$R/profile-$kase.txt"
	prof=$(sed -n 's/^framework profile: saved //p' "$R/profile-$kase.txt")
	[ -n "$prof" ] || die "the search saved no framework profile (see $R/$kase.err)"
	cp "$prof" "$R/profile-$kase.json"
	threeway "$kase" "$prof"
	;;
calibrated-search)
	t0=$SECONDS
	timeout -s INT -k 10 "$LIMIT" bin/cgtune probe --framework "${args[@]}" >"$R/profile-$kase.txt" 2>&1
	echo "== probe --framework: exit $?, $((SECONDS - t0)) s"
	cut -c1-250 "$R/profile-$kase.txt"
	t0=$SECONDS
	timeout -s INT -k 10 "$LIMIT" bin/cgtune --headless --engine cuda --strategy exhaustive "${args[@]}" \
		--run-dir "$R/run-cuda-$kase" >"$R/cuda-$kase.txt" 2>"$R/cuda-$kase.err"
	echo "== cuda search: exit $?, $((SECONDS - t0)) s"
	sed -n '1,/^why/p' "$R/cuda-$kase.txt"
	;;
host-variance)
	bus=$(nvidia-smi --query-gpu=pci.bus_id --format=csv,noheader | head -1 | tr 'A-F' 'a-f' | sed 's/^0000//')
	cpus=$(cat "/sys/bus/pci/devices/$bus/local_cpulist" 2>/dev/null || echo 0-3)
	pin=$(python3 -c 'import sys
cpus = [c for part in sys.argv[1].split(",") for c in range(int(part.split("-")[0]), int(part.split("-")[-1]) + 1)]
print(",".join(map(str, cpus[:4])))' "$cpus")
	echo "GPU $bus, its CPUs $cpus; pinned runs: taskset -c $pin"
	hv() { # LABEL COMMAND...
		local label=$1 t0=$SECONDS
		shift
		timeout -s INT -k 10 "$LIMIT" "$@" "$R/$label.json" 2>"$R/$label.err" | tail -1 | cut -c1-400
		echo "== $label: exit ${PIPESTATUS[0]}, $((SECONDS - t0)) s"
	}
	for i in 1 2 3; do
		hv moe-none-free$i python3 bench/megatron/hostvar.py moe none 8 4 5
		hv moe-none-pinned$i taskset -c "$pin" python3 bench/megatron/hostvar.py moe none 8 4 5
	done
	for m in local full_iteration none; do hv dense-$m python3 bench/megatron/hostvar.py dense $m 8 4 8; done
	hv moe-local python3 bench/megatron/hostvar.py moe local 8 4 8
	;;
gaps)
	for run in "none 8 4" "local 8 4" "full_iteration 8 4" "none 1 4" "local 1 4" "full_iteration 1 4" \
		"local 8 1" "full_iteration 8 1" "local 8 2" "full_iteration 8 2"; do
		read -r mode layers mbs <<<"$run"
		g=$mode-$layers-$mbs t0=$SECONDS
		timeout -s INT -k 10 "$LIMIT" python3 bench/megatron/gaps.py $mode $layers $mbs "$R/$g.json" >"$R/$g.txt" 2>"$R/$g.err"
		echo "== gaps $run: exit $?, $((SECONDS - t0)) s"
		python3 bench/megatron/gaps_show.py "$R/$g.json" || tail -3 "$R/$g.err"
	done
	;;
esac
echo "results: $R"
