"""Unit tests of run_recipe.py's pure parts (no Megatron-Bridge): run by ./test.sh."""
import types
import unittest

import run_recipe


def module(name, **fns):
    m = types.ModuleType(name)
    for fname, f in fns.items():
        f.__module__ = name
        setattr(m, fname, f)
    return m


class SplitTest(unittest.TestCase):
    def test_forms(self):
        self.assertEqual(run_recipe.split_target("a.b:c"), ("a.b", "c"))
        self.assertEqual(run_recipe.split_target("llama3_8b_pretrain_2gpu_h100_bf16_config"),
                         (None, "llama3_8b_pretrain_2gpu_h100_bf16_config"))
        for bad in ("a.b:", ":c", "a b", "a.b:c-d"):
            with self.assertRaises(run_recipe.RecipeError):
                run_recipe.split_target(bad)


class FindTest(unittest.TestCase):
    def test_only_functions_defined_in_the_module(self):
        def recipe():
            return None

        def other():
            return None

        a = module("pkg.a", recipe=recipe)
        b = module("pkg.b")
        b.recipe = recipe  # imported, not defined: not a hit
        c = module("pkg.c", other=other)
        self.assertEqual(run_recipe.find("recipe", [("pkg.a", a), ("pkg.b", b), ("pkg.c", c)]), ["pkg.a:recipe"])
        self.assertEqual(run_recipe.find("missing", [("pkg.a", a)]), [])


class MainTest(unittest.TestCase):
    def test_bad_name_is_one_line_and_status_2(self):
        import contextlib
        import io

        err = io.StringIO()
        with contextlib.redirect_stderr(err):
            code = run_recipe.main(["--recipe", "not a name", "--out", "/nonexistent/x.yaml"])
        self.assertEqual(code, 2)
        self.assertEqual(len(err.getvalue().strip().splitlines()), 1)
        self.assertIn("want MODULE:FUNCTION", err.getvalue())


if __name__ == "__main__":
    unittest.main()
