#!/usr/bin/env bash
# Drives the interactive program with tmux as a person would, on a GPU
# machine: pick qwen3_30b_a3b, keep GPU 0, start the search, watch it, write
# the overrides. Screens are captured to OUT_DIR/tui-*.txt.
#
#   bench/gpu/tui.sh OUT_DIR
#
# Needs: an NVIDIA GPU, tmux and bin/cgtune (CGO_ENABLED=1 go build -o
# bin/cgtune ./cmd/cgtune). Run `bin/cgtune probe` first so that the probe
# cache in $XDG_CACHE_HOME is filled and the worker starts at once.
set -uo pipefail
out=${1:?usage: bench/gpu/tui.sh OUT_DIR}
mkdir -p "$out" && out=$(cd "$out" && pwd)
root=$(cd "$(dirname "$0")/../.." && pwd)
work=$out/tui-work
mkdir -p "$work"
S=cgtune
cap() { sleep "$2"; tmux capture-pane -t $S -p >"$out/tui-$1.txt"; }
k() { tmux send-keys -t $S "$@"; }
tmux new -d -s $S -x 160 -y 48 "cd $work && XDG_CONFIG_HOME=$work/cfg $root/bin/cgtune; echo cgtune exited with status \$?; sleep 600"
cap 1-model 2
k q w e n 3; cap 2-model-qwen 0.5
k Enter; cap 3-gpu 2
k Enter; cap 4-space 3
k Enter; cap 5-run-start 20
cap 6-run 40
for i in $(seq 60); do
	sleep 5
	tmux capture-pane -t $S -p | grep -q Ranking && break
done
cap 7-results 1
k w; cap 8-write-prompt 0.5
k Enter; cap 9-written 1
k q; cap 10-exit 2
ls -la "$work"
cat "$work"/cgtune-overrides.* 2>/dev/null
tmux kill-session -t $S
