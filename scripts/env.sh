# Sourced by run.sh, test.sh and .ci/run: makes sure a Go toolchain of the
# version go.mod asks for, gcc (cgo: the CUDA shim and NVML) and unzip are
# there, installing what is missing, then exports the build environment.
# Go comes from the Go module proxy's golang.org/toolchain module (the same
# source `GOTOOLCHAIN=auto` uses), so only the module proxy must be reachable.
# Everything the build keeps (the Go toolchain, Go's build and module
# caches) lives in cgtune's own cache folder under the home folder, not
# under XDG_CACHE_HOME: a run with another XDG_CACHE_HOME (a sandbox's, a
# test's) must not fetch Go again or build from cold.
set -e
_root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
_cgcache=$HOME/.cache/cgtune
_want=$(sed -n 's/^go \([0-9.]*\)$/\1/p' "$_root/go.mod")

_have_go() {
	command -v go >/dev/null 2>&1 || return 1
	local v
	v=$(go env GOVERSION 2>/dev/null | sed 's/^go//')
	[ "$(printf '%s\n%s\n' "$_want" "$v" | sort -V | head -1)" = "$_want" ]
}

_apt() {
	local missing=()
	for p in "$@"; do command -v "$p" >/dev/null 2>&1 || missing+=("$p"); done
	[ ${#missing[@]} -eq 0 ] && return 0
	local sudo=""
	[ "$(id -u)" -ne 0 ] && sudo=sudo
	echo "env.sh: installing ${missing[*]}" >&2
	$sudo apt-get update -qq >&2 && $sudo apt-get install -y -qq "${missing[@]}" >&2
}

if ! _have_go; then
	_cache=$_cgcache/go$_want
	if [ ! -x "$_cache/go/bin/go" ]; then
		_apt curl unzip
		_arch=$(uname -m); case $_arch in x86_64) _arch=amd64 ;; aarch64) _arch=arm64 ;; esac
		_proxy=${GOPROXY:-https://proxy.golang.org}; _proxy=${_proxy%%,*}
		echo "env.sh: fetching Go $_want from $_proxy" >&2
		mkdir -p "$_cache"
		curl -fsSL -o "$_cache/go.zip" "$_proxy/golang.org/toolchain/@v/v0.0.1-go$_want.linux-$_arch.zip"
		unzip -q -o "$_cache/go.zip" -d "$_cache/unpacked"
		rm -rf "$_cache/go"
		mv "$_cache/unpacked/golang.org/toolchain@v0.0.1-go$_want.linux-$_arch" "$_cache/go"
		chmod +x "$_cache/go/bin/"* "$_cache/go/pkg/tool/"*/* 2>/dev/null || true
		rm -rf "$_cache/unpacked" "$_cache/go.zip"
	fi
	export PATH="$_cache/go/bin:$PATH" GOROOT="$_cache/go"
fi
_apt gcc python3
export CGO_ENABLED=1
# go-nvml's header marks old entry points deprecated; the warnings are noise.
export CGO_CFLAGS="${CGO_CFLAGS:--O2 -g} -Wno-deprecated-declarations"
export GOTOOLCHAIN=local
# Go's own defaults follow XDG_CACHE_HOME (the build cache) or GOPATH (the
# modules); a GOCACHE or GOMODCACHE set by the caller is kept.
export GOCACHE=${GOCACHE:-$_cgcache/go-build} GOMODCACHE=${GOMODCACHE:-$_cgcache/go-mod}
