#!/usr/bin/env bash
# A stand-in for Megatron-LM's pretrain_gpt.py in cgtune's tests (local and
# Slurm): it reads the arguments cgtune renders with {flags}
# (--cuda-graph-impl, --cuda-graph-modules, --cuda-graph-warmup-steps,
# --no-check-for-nan-in-loss-and-grad) and --train-iters, checks them the
# way Megatron-LM's validate_args does, and prints Megatron-LM's argument
# list, iteration lines and memory report in the formats of
# megatron/training/training.py and megatron/training/utils/common_utils.py,
# sleeping for the time each iteration reports.
#
# What it does depends only on those arguments:
#   iteration time (ms): none 40, local whole layer 30, local with modules 34,
#     transformer_engine 32, full_iteration (or local with scope
#     full_iteration) 22 (each +0.0/0.3/0.6 by iteration);
#     the warm-up iterations run at 40, the capture iteration at 40 + 150;
#     as in Megatron-Core, local per-layer graphs are captured in iteration 1,
#     the others in iteration warm-up + 1.
#   modules with mlp:   CUDA out of memory at the capture iteration (exit 1)
#   modules with moe:   stream-capture error at the capture iteration (exit 1)
#   modules with mamba: NaN in the loss at the capture iteration (exit 1)
#   warm-up 7:          hangs after the capture iteration (for time-outs)
#   warm-up 8:          exits 0 after the warm-up without further iterations
set -u
impl=none warm=3 iters=10 nancheck=1
mods=()
while [ $# -gt 0 ]; do
	case $1 in
	--cuda-graph-impl) impl=$2; shift 2 ;;
	--cuda-graph-modules | --cuda-graph-scope)
		shift
		while [ $# -gt 0 ] && [ "${1#--}" = "$1" ]; do mods+=("$1"); shift; done
		;;
	--cuda-graph-warmup-steps) warm=$2; shift 2 ;;
	--train-iters) iters=$2; shift 2 ;;
	--no-check-for-nan-in-loss-and-grad) nancheck=0; shift ;;
	*) echo "pretrain_gpt.py: error: unrecognized arguments: $1" >&2; exit 2 ;;
	esac
done
has() { local m; for m in "${mods[@]+"${mods[@]}"}"; do [ "$m" = "$1" ] && return 0; done; return 1; }
case $impl in none | local | transformer_engine | full_iteration) ;;
*) echo "pretrain_gpt.py: error: argument --cuda-graph-impl: invalid choice: '$impl'" >&2; exit 2 ;;
esac

modlist="[$(IFS=,; echo "${mods[*]+"${mods[*]}"}")]"
echo "------------------------ arguments ------------------------"
echo "  cuda_graph_impl ................................. $impl"
echo "  cuda_graph_modules .............................. $modlist"
echo "  cuda_graph_warmup_steps ......................... $warm"
echo "  train_iters ..................................... $iters"
echo "-------------------- end of arguments ---------------------"
if [ "$impl" = full_iteration ] && [ $nancheck = 1 ]; then
	echo "AssertionError: --no-check-for-nan-in-loss-and-grad should be set with --cuda-graph-impl=full_iteration for training."
	exit 1
fi

# Megatron-Core before cuda_graph_modules (MB v0.3-v0.4, MLM core 0.15)
# wrote full iteration as impl local with scope full_iteration.
if [ "$impl" = local ] && has full_iteration; then
	if [ $nancheck = 1 ]; then
		echo "AssertionError: --no-check-for-nan-in-loss-and-grad should be set with --cuda-graph-scope=full_iteration for training."
		exit 1
	fi
	impl=full_iteration mods=()
fi
graphed=1 step=40 mem=1000
case $impl in
none) graphed=0 ;;
local) if [ ${#mods[@]} -eq 0 ]; then step=30; else step=34; fi; mem=1200 ;;
transformer_engine) step=32; mem=1300 ;;
full_iteration) step=22; mem=1400 ;;
esac

capture=$((warm + 1))
[ "$impl" = local ] && capture=1
for ((i = 1; i <= iters; i++)); do
	ms=$step
	if [ $graphed = 1 ] && [ $i -lt $capture ]; then ms=40; fi
	if [ $graphed = 1 ] && [ $i -eq $capture ]; then
		if has mlp; then
			echo "[rank0]: Traceback (most recent call last):"
			echo "[rank0]:   File \"pretrain_gpt.py\", line 300, in <module>"
			echo "[rank0]: torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB. GPU 0 has a total capacity of 139.72 GiB of which 1.10 GiB is free."
			exit 1
		fi
		if has moe; then
			echo "[rank0]: RuntimeError: CUDA error: operation not permitted when stream is capturing"
			echo "[rank0]: torch.AcceleratorError: CUDA error: operation failed due to a previous error during capture"
			exit 1
		fi
		if has mamba; then
			echo "RuntimeError: Rank 0, node ci, device 0, iteration $i: Unexpected result nan (message='found NaN in local forward loss calculation')"
			exit 1
		fi
		ms=$((40 + 150))
	fi
	[ "$warm" = 8 ] && [ $i -gt 8 ] && exit 0
	ms=$(printf '%d.%d' "$ms" $((i % 3 * 3)))
	sleep "$(printf '0.%03d' "${ms%.*}")"
	printf ' [%s] iteration %8d/%8d | consumed samples: %12d | elapsed time per iteration (ms): %s | learning rate: 1.000000E-04 | global batch size:     1 | lm loss: 1.037843E+01 | loss scale: 1.0 | grad norm: 3.142 | number of skipped iterations:   0 | number of nan iterations:   0 |\n' \
		"$(date '+%Y-%m-%d %H:%M:%S.%6N')" "$i" "$iters" "$i" "$ms"
	if [ $i -eq 2 ]; then
		echo "[Rank 0] (after 2 iterations) memory (MB) | allocated: $((mem / 2)).00 | max allocated: $((mem - 100)).50 | reserved: $mem.00 | max reserved: $mem.00"
	fi
	if [ "$warm" = 7 ] && [ $i -eq 8 ]; then
		sleep 3600
	fi
done
