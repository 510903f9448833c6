"""Prepare the Megatron-Bridge and Megatron-Core source trees the sandbox imports.

The trees are extracted from git repositories (bare mirrors are fine) at a
pinned commit into a cache folder, never edited afterwards:

    <cache>/mb-<commit>/      MB's src/ and scripts/performance/
    <cache>/mcore-<commit>/   Megatron-LM's megatron/ at the commit MB pins

MB pins Megatron-Core as the git submodule 3rdparty/Megatron-LM, so the MCore
commit is read from the MB tree itself. Run as a script to prepare both and
print their paths:

    python3 tools/mbsandbox/prepare.py --mb 067f987 \
        --mb-repo PATH/TO/Megatron-Bridge.git --mcore-repo PATH/TO/Megatron-LM.git
"""

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
from dataclasses import dataclass

# What the sandbox needs of each project: the Python packages and, for MB,
# the performance harness (its argument parser and overrides).
MB_PATHS = ("src", "scripts/performance", "uv.lock")
MCORE_PATHS = ("megatron",)
MCORE_SUBMODULE = "3rdparty/Megatron-LM"
DEFAULT_CACHE = ".mbcache"
COMPLETE = ".complete"


class PrepareError(Exception):
    """A tree could not be prepared (bad commit, not a repository, ...)."""


@dataclass(frozen=True)
class Trees:
    """The prepared source trees of one MB commit and the MCore it pins."""

    mb_commit: str
    mcore_commit: str
    mb_root: str  # holds src/megatron/bridge and scripts/performance
    mcore_root: str  # holds megatron/core and megatron/training

    @property
    def python_paths(self):
        """The folders to put on sys.path: MB's src first, then MCore."""
        return [os.path.join(self.mb_root, "src"), self.mcore_root]


def _git(repo, *args, binary=False):
    try:
        out = subprocess.run(["git", "-C", repo, *args], check=True, capture_output=True)
    except FileNotFoundError as e:
        raise PrepareError("git is not installed") from e
    except subprocess.CalledProcessError as e:
        msg = e.stderr.decode(errors="replace").strip().splitlines()
        raise PrepareError(f"git -C {repo} {' '.join(args)}: {msg[-1] if msg else 'failed'}") from e
    return out.stdout if binary else out.stdout.decode()


def resolve(repo, rev):
    """The full commit hash of rev (a tag, branch or abbreviated hash) in repo."""
    return _git(repo, "rev-parse", "--verify", "--quiet", rev + "^{commit}").strip()


def pinned_mcore(mb_repo, mb_commit):
    """The Megatron-LM commit MB's 3rdparty/Megatron-LM submodule pins."""
    line = _git(mb_repo, "ls-tree", mb_commit, MCORE_SUBMODULE).strip()
    parts = line.split()
    if len(parts) < 3 or parts[1] != "commit":
        raise PrepareError(f"MB {mb_commit[:12]} has no {MCORE_SUBMODULE} submodule to read the MCore commit from")
    return parts[2]


def list_blobs(repo, commit, paths):
    """(mode, sha, path) of every file under paths at commit."""
    out = _git(repo, "ls-tree", "-r", "-z", commit, "--", *paths, binary=True)
    blobs = []
    for entry in out.split(b"\0"):
        if not entry:
            continue
        meta, path = entry.split(b"\t", 1)
        mode, kind, sha = meta.split()
        if kind == b"blob":
            blobs.append((mode.decode(), sha.decode(), path.decode()))
    return blobs


def extract(repo, commit, paths, dest):
    """Write the files under paths at commit into dest.

    Reads blobs with one `git cat-file --batch`; a blob a partial mirror does
    not hold (large binary assets) is skipped: the sandbox imports Python.
    """
    blobs = list_blobs(repo, commit, paths)
    if not blobs:
        raise PrepareError(f"{repo} has no files under {', '.join(paths)} at {commit[:12]}")
    proc = subprocess.Popen(["git", "-C", repo, "cat-file", "--batch"], stdin=subprocess.PIPE, stdout=subprocess.PIPE)
    try:
        for mode, sha, path in blobs:
            proc.stdin.write(sha.encode() + b"\n")
            proc.stdin.flush()
            header = proc.stdout.readline().split()
            if len(header) == 2 and header[1] == b"missing":
                continue
            size = int(header[2])
            data = proc.stdout.read(size)
            proc.stdout.read(1)  # the newline after each object
            if mode == "120000":
                continue  # symlinks are not needed to import
            target = os.path.join(dest, path)
            os.makedirs(os.path.dirname(target), exist_ok=True)
            with open(target, "wb") as f:
                f.write(data)
    finally:
        proc.stdin.close()
        proc.stdout.close()
        proc.wait()


def _prepare_one(repo, commit, paths, final):
    if os.path.exists(os.path.join(final, COMPLETE)):
        return
    parent = os.path.dirname(final)
    os.makedirs(parent, exist_ok=True)
    tmp = tempfile.mkdtemp(prefix=".tmp-", dir=parent)
    try:
        extract(repo, commit, paths, tmp)
        with open(os.path.join(tmp, COMPLETE), "w") as f:
            f.write(commit + "\n")
        if os.path.exists(final):
            shutil.rmtree(final)  # an earlier extraction that did not finish
        os.rename(tmp, final)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise


def prepare_trees(mb_repo, mb_rev, mcore_repo, cache=DEFAULT_CACHE):
    """Extract MB at mb_rev and the MCore it pins into cache; return their Trees."""
    mb_commit = resolve(mb_repo, mb_rev)
    if not mb_commit:
        raise PrepareError(f"{mb_repo}: no commit {mb_rev!r}")
    mcore_commit = pinned_mcore(mb_repo, mb_commit)
    if not resolve(mcore_repo, mcore_commit):
        raise PrepareError(f"{mcore_repo}: no commit {mcore_commit[:12]} (the MCore MB {mb_rev} pins); fetch it first")
    trees = Trees(
        mb_commit=mb_commit,
        mcore_commit=mcore_commit,
        mb_root=os.path.abspath(os.path.join(cache, "mb-" + mb_commit)),
        mcore_root=os.path.abspath(os.path.join(cache, "mcore-" + mcore_commit)),
    )
    _prepare_one(mb_repo, mb_commit, MB_PATHS, trees.mb_root)
    _prepare_one(mcore_repo, mcore_commit, MCORE_PATHS, trees.mcore_root)
    return trees


def add_repo_args(parser):
    """The command-line arguments every sandbox tool takes to find the trees."""
    parser.add_argument("--mb", default="HEAD", help="MB commit, tag or branch (default HEAD)")
    parser.add_argument("--mb-repo", default=os.environ.get("MB_REPO"), help="Megatron-Bridge git repository (or $MB_REPO)")
    parser.add_argument("--mcore-repo", default=os.environ.get("MCORE_REPO"), help="Megatron-LM git repository (or $MCORE_REPO)")
    parser.add_argument("--cache", default=DEFAULT_CACHE, help=f"cache folder (default {DEFAULT_CACHE})")


def trees_from_args(args):
    """Prepare the trees the parsed add_repo_args arguments name."""
    if not args.mb_repo or not args.mcore_repo:
        raise PrepareError("need --mb-repo and --mcore-repo (or $MB_REPO and $MCORE_REPO): git repositories of Megatron-Bridge and Megatron-LM")
    return prepare_trees(args.mb_repo, args.mb, args.mcore_repo, args.cache)


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    add_repo_args(parser)
    args = parser.parse_args(argv)
    try:
        trees = trees_from_args(args)
    except PrepareError as e:
        print(f"prepare: {e}", file=sys.stderr)
        return 2
    print(f"mb    {trees.mb_commit}  {trees.mb_root}")
    print(f"mcore {trees.mcore_commit}  {trees.mcore_root}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
