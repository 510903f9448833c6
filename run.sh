#!/usr/bin/env bash
# Builds cgtune and runs it with the given arguments. With a GPU it measures
# on the embedded CUDA engine; without one it says so and uses the estimate
# engine, whose every result is labelled "estimated".
#   ./run.sh                                   interactive (needs a terminal)
#   ./run.sh --headless --model qwen3_30b_a3b --emit overrides.yaml
#   ./run.sh install [--prefix DIR]            build, then put cgtune in
#                                              ~/.local/bin (or DIR/bin)
# It builds in the repository but runs cgtune where it was called from, so
# the paths given to it (a recipe to check, --emit, --report, the TUI's
# w and r) are where the caller stands.
set -e
here=$PWD
root=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)

# install's arguments are read before anything is built: a bad one
# builds nothing.
install=""
if [ "${1-}" = install ]; then
	install=yes
	prefix=$HOME/.local
	shift
	while [ $# -gt 0 ]; do
		case $1 in
		--prefix) [ $# -ge 2 ] && [ -n "$2" ] || { echo "run.sh install: --prefix needs a folder" >&2; exit 2; }
			prefix=$2; shift 2 ;;
		--prefix=?*) prefix=${1#--prefix=}; shift ;;
		*) echo "run.sh install: unknown argument $1 (allowed: --prefix DIR)" >&2; exit 2 ;;
		esac
	done
	case $prefix in /*) ;; *) prefix=$here/$prefix ;; esac
fi

cd "$root"
. scripts/env.sh
# The revision `cgtune version` names: the commit, -dirty with changes.
rev=$(git rev-parse --short=12 HEAD 2>/dev/null || true)
if [ -n "$rev" ] && ! git diff --quiet HEAD -- 2>/dev/null; then rev=$rev-dirty; fi
go build -ldflags "-X main.revision=$rev" -o bin/cgtune ./cmd/cgtune

if [ -n "$install" ]; then
	dest=$prefix/bin/cgtune
	# Never replace a program that is not a cgtune.
	if [ -e "$dest" ] && ! { [ -f "$dest" ] && "$dest" --version 2>/dev/null | head -1 | grep -q '^cgtune '; }; then
		echo "run.sh install: $dest exists and is not a cgtune; nothing installed (remove it or give --prefix DIR)" >&2
		exit 2
	fi
	mkdir -p "$prefix/bin"
	# Copied beside it and renamed: a running cgtune keeps its old file.
	tmp=$(mktemp "$prefix/bin/.cgtune.XXXXXX")
	cp bin/cgtune "$tmp" && chmod 755 "$tmp" && mv -f "$tmp" "$dest" || { rm -f "$tmp"; exit 1; }
	echo "installed cgtune to $dest ($("$dest" --version | head -1))"
	case ":$PATH:" in
	*":$prefix/bin:"* | *":$prefix/bin/:"*) echo "$prefix/bin is on PATH: run cgtune" ;;
	*) echo "$prefix/bin is not on PATH: add it, e.g. echo 'export PATH=\"$prefix/bin:\$PATH\"' >> ~/.bashrc, then open a new shell" ;;
	esac
	exit 0
fi
cd "$here"
exec "$root/bin/cgtune" "$@"
