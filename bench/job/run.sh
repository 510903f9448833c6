#!/usr/bin/env bash
# The real-job acceptance of `cgtune validate` on a GPU machine: Megatron-LM's
# pretrain_gpt.py (mock data, --transformer-impl local, bf16, one GPU through
# torchrun) for the dense-small shape of bench/job/dense-small.yaml, run by
# `cgtune validate --launcher local` for eager, the local per-layer graphs and
# the full-iteration graph, next to the cuda engine's predictions.
#
# Needs, in the repository root: bin/cgtune (CGO_ENABLED=1 go build -o
# bin/cgtune ./cmd/cgtune) and .mlm/ with Megatron-LM's megatron/,
# pretrain_gpt.py, gpt_builders.py and model_provider.py (e.g. git archive of
# NVIDIA/Megatron-LM HEAD; git-ignored, never committed); torch with CUDA,
# numpy, pybind11 and a C++ compiler (Megatron-LM builds its dataset helpers
# at start; without them a pure-Python stand-in is used and the output says
# so). No Transformer Engine, no apex, no network. About 4 minutes.
#
# Usage: bench/job/run.sh [OUTDIR]   (default $OUT, else /tmp/cgtune-job)
# Output: OUTDIR/summary.txt (the comparison table), validate.err (progress),
# search.txt (the cuda engine's ranking), run/ (the run folder: journal,
# validate/validation.json, each job's log under validate/cgtune-*/).
set -uo pipefail
out=${1:-${OUT:-/tmp/cgtune-job}}
root=$(cd "$(dirname "$0")/../.." && pwd)
cd "$root"
mkdir -p "$out"
exec > >(tee "$out/run.txt") 2>&1
export XDG_CACHE_HOME=$out/cache XDG_CONFIG_HOME=$out/config
mlm=$root/.mlm
preset=$root/bench/job/dense-small.yaml

die() { echo "run.sh: $*"; exit 1; }
[ -x bin/cgtune ] || die "no bin/cgtune (CGO_ENABLED=1 go build -o bin/cgtune ./cmd/cgtune)"
[ -f "$mlm/pretrain_gpt.py" ] || die "no $mlm/pretrain_gpt.py (extract Megatron-LM into .mlm/)"
command -v torchrun >/dev/null || die "no torchrun on PATH"
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader
python -c 'import torch, numpy; print("torch", torch.__version__, "cuda", torch.version.cuda)' || die "python lacks torch or numpy"
git -C "$mlm" log -1 --format='Megatron-LM %h %cd' 2>/dev/null || echo "Megatron-LM: $(ls "$mlm")"

echo "== dataset helpers"
if ! make -C "$mlm/megatron/core/datasets" >"$out/helpers-make.txt" 2>&1; then
	tail -3 "$out/helpers-make.txt"
	echo "could not compile Megatron-LM's helpers.cpp: using bench/job/helpers_cpp_fallback.py instead (pure Python, same sample index)"
	cp bench/job/helpers_cpp_fallback.py "$mlm/megatron/core/datasets/helpers_cpp.py"
	# pretrain_gpt.py runs make again at start and exits if it fails.
	mkdir -p "$out/shim"
	printf '#!/bin/sh\n# bench/job/run.sh: the dataset helpers are the Python stand-in\nexit 0\n' >"$out/shim/make"
	chmod +x "$out/shim/make"
	export PATH=$out/shim:$PATH
fi

echo "== predictions: cuda engine, exhaustive (eager, local whole layer, full iteration)"
t0=$SECONDS
if ! timeout 150 bin/cgtune --headless --preset "$preset" --engine cuda --strategy exhaustive --run-dir "$out/run" \
	>"$out/search.txt" 2>"$out/search.err"; then
	tail -5 "$out/search.err"
	echo "the cuda engine did not finish: predictions from the estimate engine for h200 instead"
	rm -rf "$out/run"
	bin/cgtune --headless --preset "$preset" --engine estimate --estimate-gpu h200 --strategy exhaustive --run-dir "$out/run" \
		>"$out/search.txt" 2>"$out/search.err" || { cat "$out/search.err"; die "no search to validate"; }
fi
echo "search: $((SECONDS - t0)) s"
head -6 "$out/search.txt"

# The training command: the dense-small shape, mock data, no TE/apex
# kernels (no gradient-accumulation, masked-softmax or RoPE fusion), a log
# line every iteration, no evaluation. cgtune fills in {iters} and {flags}
# (--cuda-graph-impl, --cuda-graph-warmup-steps, and for full iteration
# --no-check-for-nan-in-loss-and-grad).
cache=/tmp/cgtune-mlm-data-cache
command="torchrun --standalone --nproc-per-node 1 $mlm/pretrain_gpt.py \
 --num-layers 8 --hidden-size 2048 --ffn-hidden-size 8192 --num-attention-heads 16 \
 --group-query-attention --num-query-groups 4 --swiglu --normalization RMSNorm \
 --position-embedding-type rope --no-rope-fusion --disable-bias-linear --untie-embeddings-and-output-weights \
 --attention-dropout 0.0 --hidden-dropout 0.0 --seq-length 1024 --max-position-embeddings 1024 \
 --micro-batch-size 1 --global-batch-size 1 --lr 1.0e-4 --min-lr 1.0e-5 --lr-decay-style constant \
 --mock-data --tokenizer-type NullTokenizer --vocab-size 32000 --split 99,1,0 \
 --no-create-attention-mask-in-dataloader --num-workers 1 --data-cache-path $cache \
 --transformer-impl local --bf16 --no-gradient-accumulation-fusion --no-masked-softmax-fusion \
 --log-interval 1 --eval-iters 0 --eval-interval 1000000 \
 --train-iters {iters} {flags}"

echo "== validate: eager + top 2 (local whole layer, full iteration), 30 iterations each"
t0=$SECONDS
bin/cgtune validate "$out/run" --launcher local --gpus-per-node 1 --top 2 --iters 30 --job-timeout 3m \
	--command "$command" >"$out/summary.txt" 2>"$out/validate.err"
rc=$?
echo "validate: exit $rc, $((SECONDS - t0)) s"
cat "$out/summary.txt"
grep -E '^\[' "$out/validate.err"
for log in "$out"/run/validate/cgtune-*/*.log; do
	[ -f "$log" ] || continue
	echo "== $(basename "$log"): last lines"
	grep -E 'iteration +[0-9]+/|memory \(MB\)|Error|error' "$log" | tail -4 | cut -c1-220
done
exit $rc
