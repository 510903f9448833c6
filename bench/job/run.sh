#!/usr/bin/env bash
# Real training jobs against cgtune's prediction: Megatron-LM's
# pretrain_gpt.py (mock data, --transformer-impl local, bf16, one GPU through
# torchrun) for the dense-small shape (8 layers, hidden 2048, FFN 8192, 16
# heads, 4 query groups, SwiGLU, vocab 32000, seq 1024, mbs 1, gbs 4: the
# layout of bench/megatron/presets/dense-small-mbs1.yaml). The megatron
# engine's exhaustive search of that preset (which measures the framework
# profile first) predicts; `cgtune validate --launcher local` runs eager and
# the top two candidates as real jobs; `cgtune calibrate --dry-run` reads
# the three jobs' logs.
#
#   bench/job/run.sh OUT_DIR
#
# Needs, in the repository root: bin/cgtune (CGO_ENABLED=1 go build -o
# bin/cgtune ./cmd/cgtune) and a Megatron-LM checkout in $MLM (default
# .mlm/, git-ignored) with megatron/, pretrain_gpt.py, gpt_builders.py and
# model_provider.py; one GPU, torch with CUDA, numpy, pybind11 and a C++
# compiler (Megatron-LM builds its dataset helpers at start; without them a
# pure-Python stand-in is used and the output says so). No Transformer
# Engine, no apex, no network. About 6 minutes on an H200. JOB_GPU (default
# h200) is the GPU type the jobs run on, which the calibration predicts
# with.
#
# Output in OUT_DIR (created; must not hold a previous run): summary.txt
# (the comparison table), search.txt/.err (the predictions), validate.err
# (job states), calibrate.txt, run/ (the run folder: journal, validate/
# validation.json, each job's log under validate/cgtune-*/).
set -uo pipefail
[ $# -eq 1 ] || { echo "usage: bench/job/run.sh OUT_DIR" >&2; exit 2; }
out=$1
root=$(cd "$(dirname "$0")/../.." && pwd)
[ -e "$out/run" ] && { echo "run.sh: $out already holds a run; give another OUT_DIR" >&2; exit 2; }
mkdir -p "$out" && out=$(cd "$out" && pwd)
cd "$root"
exec > >(tee "$out/run.txt") 2>&1
export XDG_CACHE_HOME=$out/cache XDG_CONFIG_HOME=$out/config
mlm=${MLM:-$root/.mlm}
export PYTHONPATH=$mlm PYTHONUNBUFFERED=1
preset=$root/bench/megatron/presets/dense-small-mbs1.yaml
jobgpu=${JOB_GPU:-h200}

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

t0=$SECONDS
echo "== predictions: the megatron engine's exhaustive search of $(basename "$preset")"
timeout 900 bin/cgtune --headless --preset "$preset" --engine megatron --strategy exhaustive --run-dir "$out/run" \
	>"$out/search.txt" 2>"$out/search.err" || { tail -5 "$out/search.err"; die "no search to validate"; }
sed -n '1,/^why/p' "$out/search.txt"
echo "search: $((SECONDS - t0)) s"

# The training command: the dense-small shape, mock data, no TE/apex
# kernels (no gradient-accumulation, masked-softmax, RoPE, bias-SwiGLU or
# bias-dropout fusion, no persistent layer norm: torch's LayerNorm refuses it), a log
# line every iteration, no evaluation. cgtune fills in {iters} and {flags}
# (--cuda-graph-impl, --cuda-graph-warmup-steps, and for full iteration
# --no-check-for-nan-in-loss-and-grad).
cache=$out/mlm-data-cache
command="torchrun --standalone --nproc-per-node 1 $mlm/pretrain_gpt.py \
 --num-layers 8 --hidden-size 2048 --ffn-hidden-size 8192 --num-attention-heads 16 \
 --group-query-attention --num-query-groups 4 --swiglu --normalization RMSNorm \
 --position-embedding-type rope --no-rope-fusion --disable-bias-linear --untie-embeddings-and-output-weights \
 --attention-dropout 0.0 --hidden-dropout 0.0 --seq-length 1024 --max-position-embeddings 1024 \
 --micro-batch-size 1 --global-batch-size 4 --lr 1.0e-4 --min-lr 1.0e-5 --lr-decay-style constant \
 --mock-data --tokenizer-type NullTokenizer --vocab-size 32000 --split 99,1,0 \
 --no-create-attention-mask-in-dataloader --num-workers 1 --data-cache-path $cache \
 --transformer-impl local --bf16 --no-gradient-accumulation-fusion --no-masked-softmax-fusion \
 --no-persist-layer-norm --no-bias-swiglu-fusion --no-bias-dropout-fusion \
 --log-interval 1 --eval-iters 0 --eval-interval 1000000 \
 --train-iters {iters} {flags}"

echo "== validate: eager + top 2 (local whole layer, full iteration), 30 iterations each"
t0=$SECONDS
# --mbridge 0.6: Megatron-LM HEAD's field names (--cuda-graph-modules,
# --cuda-graph-impl full_iteration), whatever generation the search used.
bin/cgtune validate "$out/run" --launcher local --gpus-per-node 1 --top 2 --iters 30 --mbridge 0.6 --job-timeout 3m --job-gpu "$jobgpu" \
	--command "$command" >"$out/summary.txt" 2>"$out/validate.err"
rc=$?
echo "validate: exit $rc, $((SECONDS - t0)) s"
cat "$out/summary.txt"
grep -E '^\[' "$out/validate.err"
logs=()
for log in "$out"/run/validate/cgtune-*/*.log; do
	[ -f "$log" ] || continue
	logs+=(--log "$log")
	echo "== $(basename "$log"): last lines"
	grep -E 'iteration +[0-9]+/|memory \(MB\)|Error|error' "$log" | tail -4 | cut -c1-220
done
echo "== calibrate from the jobs' logs"
bin/cgtune calibrate "${logs[@]}" --preset "$preset" --job-gpu "$jobgpu" --dry-run 2>&1 | tee "$out/calibrate.txt"
exit $rc
