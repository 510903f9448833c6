"""Unit tests of the sandbox's pure parts (no MB, no torch): run by ./test.sh."""
import functools
import importlib.util
import inspect
import json
import os
import subprocess
import sys
import tempfile
import unittest

import hfconfig
import prepare
import stubs
import versionshim


def write(path, text):
    with open(path, "w", encoding="utf-8") as f:
        f.write(text)


def stub_module(name, versions=None):
    finder = stubs.StubFinder([name.split(".")[0]], versions or {}, fallback=False)
    spec = finder.find_spec(name)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


class PlaceholderTest(unittest.TestCase):
    def test_attributes_are_placeholders_that_subclass_and_decorate(self):
        torch = stub_module("torch", {"torch": "2.13.0"})
        self.assertEqual(torch.__version__, "2.13.0")

        class Net(torch.nn.Module):  # a real class on a placeholder base
            def __init__(self):
                super().__init__()
                self.width = 3

        self.assertEqual(Net().width, 3)
        with self.assertRaises(AttributeError):
            Net().missing  # a real subclass has no invented attributes

        @torch.jit.script
        def f(x):
            return x + 1

        self.assertEqual(f(1), 2)  # a decorator passes the function through
        self.assertFalse(torch.cuda.is_available())  # nothing is initialised
        self.assertNotIn("x", torch.Tensor)  # membership ends: no endless __getitem__ iteration
        with torch.no_grad():
            pass

    def test_dtypes_are_named_sentinels(self):
        torch = stub_module("torch")
        self.assertIsInstance(torch.bfloat16, torch.dtype)
        self.assertEqual(str(torch.bfloat16), "torch.bfloat16")
        self.assertIs(torch.float, torch.float32)
        self.assertIs(torch.long, torch.int64)

    def test_placeholders_do_not_claim_serialisation_hooks(self):
        # MCore's config containers probe to_cfg_dict/as_dict with hasattr;
        # a placeholder activation function must serialise as a reference.
        torch = stub_module("torch")
        silu = torch.nn.functional.silu
        for hook in ("to_cfg_dict", "as_dict", "__dataclass_fields__", "__wrapped__"):
            self.assertFalse(hasattr(silu, hook), hook)
        self.assertIn("anything", inspect.signature(torch.optim.Adam).parameters)

    def test_fallback_leaves_standard_library_and_megatron_alone(self):
        finder = stubs.StubFinder([], {}, fallback=True)
        self.assertIsNone(finder.find_spec("_winapi"))
        self.assertIsNone(finder.find_spec("megatron.core.no_such_module"))
        self.assertIsNotNone(finder.find_spec("some_missing_package"))
        self.assertIsNotNone(finder.find_spec("megatron.energon"))

    def test_lock_versions(self):
        lock = '[[package]]\nname = "transformer-engine"\nversion = "2.18.0+e7c550c5"\nsource = {}\n\n[[package]]\nname = "torch"\nversion = "2.13.0"\n'
        self.assertEqual(stubs.lock_versions(lock), {"transformer_engine": "2.18.0", "torch": "2.13.0"})


class VersionShimTest(unittest.TestCase):
    def test_orders_as_pep440(self):
        V = versionshim.Version
        self.assertLess(V("2.7.0"), V("2.18.0"))
        self.assertLess(V("2.18.0rc1"), V("2.18.0"))
        self.assertLess(V("2.18.0.dev0"), V("2.18.0rc1"))
        self.assertEqual(V("2.18"), V("2.18.0"))
        self.assertGreaterEqual(V("2.18.0+e7c550c5"), "2.18.0")
        with self.assertRaises(versionshim.InvalidVersion):
            V("not a version")


class HFConfigTest(unittest.TestCase):
    def test_every_model_cites_its_sources(self):
        with open(hfconfig.DATA, encoding="utf-8") as f:
            data = json.load(f)
        for mid, e in data["models"].items():
            self.assertTrue(e["source"].startswith("https://huggingface.co/" + mid + "/"), mid)
            self.assertTrue(e["checked_against"], mid)
            for key in list(e.get("value_sources", {})) + list(e.get("assumed", {})):
                self.assertIn(key, e["config"], f"{mid}: a cited key the config does not hold")

    def test_unknown_model_fails_with_the_known_ones(self):
        configs = hfconfig.HFConfigs({"a/b": {"source": "s", "config": {"hidden_size": 8, "text_config": {"x": 1}}}})
        cfg = configs.get("a/b")
        self.assertEqual(cfg.hidden_size, 8)
        self.assertEqual(cfg.text_config.x, 1)  # sub-configs are configs, as HF builds them
        self.assertIsNone(cfg.torch_dtype)  # transformers' default for a key config.json leaves out
        with self.assertRaises(hfconfig.UnknownModelError) as e:
            configs.get("c/d")
        self.assertIn("does not appear to have a file named config.json", str(e.exception))
        self.assertIn("a/b", str(e.exception))


class PrepareTest(unittest.TestCase):
    def git(self, repo, *args):
        return subprocess.run(["git", "-C", repo, *args], check=True, capture_output=True, text=True).stdout.strip()

    def test_extracts_the_pinned_mcore(self):
        with tempfile.TemporaryDirectory() as tmp:
            mcore, mb = os.path.join(tmp, "mcore"), os.path.join(tmp, "mb")
            for r in (mcore, mb):
                os.makedirs(r)
                self.git(r, "init", "-q")
                self.git(r, "config", "user.email", "t@t")
                self.git(r, "config", "user.name", "t")
            os.makedirs(os.path.join(mcore, "megatron", "core"))
            write(os.path.join(mcore, "megatron", "core", "__init__.py"), "X = 1\n")
            self.git(mcore, "add", ".")
            self.git(mcore, "commit", "-q", "-m", "c")
            pin = self.git(mcore, "rev-parse", "HEAD")
            os.makedirs(os.path.join(mb, "src", "megatron", "bridge"))
            write(os.path.join(mb, "src", "megatron", "bridge", "__init__.py"), "Y = 2\n")
            self.git(mb, "add", ".")
            self.git(mb, "update-index", "--add", "--cacheinfo", f"160000,{pin},3rdparty/Megatron-LM")
            self.git(mb, "commit", "-q", "-m", "c")
            trees = prepare.prepare_trees(mb, "HEAD", mcore, os.path.join(tmp, "cache"))
            self.assertEqual(trees.mcore_commit, pin)
            self.assertTrue(os.path.exists(os.path.join(trees.mcore_root, "megatron", "core", "__init__.py")))
            self.assertTrue(os.path.exists(os.path.join(trees.mb_root, "src", "megatron", "bridge", "__init__.py")))
            with self.assertRaises(prepare.PrepareError):
                prepare.prepare_trees(mb, "no-such-tag", mcore, os.path.join(tmp, "cache"))


if __name__ == "__main__":
    unittest.main()
