#!/usr/bin/env bash
# Builds cgtune and runs it with the given arguments. With a GPU it measures
# on the embedded CUDA engine; without one it says so and uses the estimate
# engine, whose every result is labelled "estimated".
#   ./run.sh                                   interactive (needs a terminal)
#   ./run.sh --headless --model qwen3_30b_a3b --emit overrides.yaml
# It builds in the repository but runs cgtune where it was called from, so
# the paths given to it (a recipe to check, --emit, --report, the TUI's
# w and r) are where the caller stands.
set -e
here=$PWD
root=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
cd "$root"
. scripts/env.sh
go build -o bin/cgtune ./cmd/cgtune
cd "$here"
exec "$root/bin/cgtune" "$@"
