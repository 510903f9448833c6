"""Import Megatron-Bridge (MB) and Megatron-Core (MCore) without torch,
Transformer Engine, apex or a GPU, so that MB's recipe functions and config
classes run for real: they only build config objects.

Entry point (Python standard library only; PyYAML where MB's to_yaml runs):

    import mbsandbox
    trees = mbsandbox.prepare_trees(mb_repo, "067f987", mcore_repo)   # or prepare.trees_from_args
    mbsandbox.activate(trees)
    from megatron.bridge.perf_recipes.qwen.h100.qwen3_moe import ...

activate() puts the trees on sys.path, installs the import stubs
(stubs.py) and the HuggingFace config shim (hfconfig.py): AutoConfig
answers from hf_configs.json, the published config.json values of the
models MB's recipes load. See README.md.
"""

import os
import sys
import tempfile

from . import hfconfig, stubs, versionshim
from .prepare import PrepareError, Trees, add_repo_args, prepare_trees, trees_from_args

__all__ = ["PrepareError", "Trees", "activate", "add_repo_args", "prepare_trees", "trees_from_args"]

_active = []


def _backport_typing():
    """MCore imports typing.override (Python 3.12); before 3.12 it is the
    no-op decorator it is there, so the sandbox runs on Debian's 3.11."""
    import typing

    if not hasattr(typing, "override"):
        typing.override = lambda method: method


def activate(trees, hf_configs=None, real=()):
    """Make MB and MCore of trees importable with their heavy imports
    stubbed. Once per process: a second call with other trees fails.

    real names modules of stubs.HEAVY to import for real instead (numpy,
    which MB's config validation computes with); they must be installed."""
    if _active:
        if _active[0] != trees:
            raise RuntimeError("mbsandbox is already active for another tree")
        return
    lock = os.path.join(trees.mb_root, "uv.lock")
    versions = {}
    if os.path.exists(lock):
        with open(lock, encoding="utf-8") as f:
            versions = stubs.lock_versions(f.read())
    # MB loads HF configs under a file lock in ~/.cache/huggingface; keep
    # that out of the user's home.
    os.environ.setdefault("MEGATRON_CONFIG_LOCK_DIR", tempfile.mkdtemp(prefix="mbsandbox-locks-"))
    versionshim.install_if_missing()
    _backport_typing()
    for p in reversed(trees.python_paths):
        if p not in sys.path:
            sys.path.insert(0, p)
    stubs.install(versions, heavy=tuple(m for m in stubs.HEAVY if m not in real))
    hfconfig.install(hf_configs or hfconfig.load_default())
    _active.append(trees)
