"""Run a Megatron-Bridge recipe function and write its ConfigContainer
with MB's own to_yaml, for `cgtune --recipe NAME`.

    python run_recipe.py --recipe NAME --out FILE

NAME is MODULE:FUNCTION, or a recipe function's name, looked up in
megatron.bridge.recipes and megatron.bridge.perf_recipes. The function runs
in this Python, with the installed Megatron-Bridge: it only builds config
objects. On success it prints one JSON line, {"recipe": "MODULE:FUNCTION"};
on failure one line on stderr and exit status 2. Standard library and
Megatron-Bridge only.
"""

import argparse
import contextlib
import importlib
import io
import json
import pkgutil
import sys

PACKAGES = ("megatron.bridge.perf_recipes", "megatron.bridge.recipes")


class RecipeError(Exception):
    """A recipe name that resolves to no function, or to several."""


def split_target(name):
    """(module, function) of MODULE:FUNCTION; (None, name) for a bare name."""
    if ":" in name:
        module, _, fn = name.partition(":")
        if not module or not fn or not fn.isidentifier():
            raise RecipeError(f"recipe {name!r}: want MODULE:FUNCTION or a recipe function's name")
        return module, fn
    if not name.isidentifier():
        raise RecipeError(f"recipe {name!r}: want MODULE:FUNCTION or a recipe function's name")
    return None, name


def find(name, modules):
    """The MODULE:FUNCTION targets among modules ((name, module) pairs)
    that define a function called name."""
    hits = []
    for modname, mod in modules:
        fn = getattr(mod, name, None)
        if callable(fn) and getattr(fn, "__module__", None) == modname:
            hits.append(f"{modname}:{name}")
    return hits


def recipe_modules(packages=PACKAGES):
    """(name, module) of every module of the recipe packages that imports."""
    for pkg_name in packages:
        try:
            pkg = importlib.import_module(pkg_name)
        except ImportError:
            continue
        for info in pkgutil.walk_packages(pkg.__path__, pkg_name + "."):
            try:
                yield info.name, importlib.import_module(info.name)
            except Exception:  # a module this installation cannot import holds no recipe of ours
                continue


def resolve(name):
    """The function NAME names, and its MODULE:FUNCTION."""
    module, fn = split_target(name)
    if module is None:
        hits = find(fn, recipe_modules())
        if not hits:
            raise RecipeError(f"recipe {name!r}: no function of that name in {', '.join(PACKAGES)}")
        if len(hits) > 1:
            raise RecipeError(f"recipe {name!r} is defined in several modules: give one of {', '.join(hits)}")
        module = hits[0].partition(":")[0]
    try:
        f = getattr(importlib.import_module(module), fn)
    except (ImportError, AttributeError) as e:
        raise RecipeError(f"recipe {module}:{fn}: {e}") from e
    return f, f"{module}:{fn}"


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--recipe", required=True)
    parser.add_argument("--out", required=True)
    args = parser.parse_args(argv)
    try:
        fn, target = resolve(args.recipe)
        with contextlib.redirect_stdout(io.StringIO()):
            cfg = fn()
        if not hasattr(cfg, "to_yaml"):
            raise RecipeError(f"recipe {target} returned a {type(cfg).__name__}, not a ConfigContainer")
        cfg.to_yaml(args.out)
    except Exception as e:  # one line for cgtune, whatever the recipe raised
        print(f"{type(e).__name__}: {' '.join(str(e).split())}", file=sys.stderr)
        return 2
    print(json.dumps({"recipe": target}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
