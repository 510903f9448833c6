#!/usr/bin/env bash
# Builds cgtune and runs it with the given arguments. With a GPU it measures
# on the embedded CUDA engine; without one it says so and uses the estimate
# engine, whose every result is labelled "estimated".
#   ./run.sh                                   interactive (needs a terminal)
#   ./run.sh --headless --model qwen3_30b_a3b --emit overrides.yaml
set -e
cd "$(dirname "$0")"
. scripts/env.sh
go build -o bin/cgtune ./cmd/cgtune
exec bin/cgtune "$@"
