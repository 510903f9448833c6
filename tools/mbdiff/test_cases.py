"""Unit tests of the differential harness's pure parts (no MB needed): run by ./test.sh."""
import os
import tempfile
import unittest

import cases

INDEX = """# Megatron-Bridge recipe dump for cgtune, written by tools/mbrecipes/dump.py; do not edit.
mb_commit: 067f987df03b8355b03192d88d70f1709fedf51a
recipes:
- function: llama3_8b_pretrain_8gpu_h100_bf16_config
  file: src/megatron/bridge/perf_recipes/llama/h100/llama3.py
  model: llama3_8b
  gpu: h100
  num_gpus: 8
  precision: bf16
  variant: ''
  accepted: true
  selected: true
  dump: llama3_8b_pretrain_8gpu_h100_bf16_config.yaml
  hf_configs:
  - model: meta-llama/Meta-Llama-3-8B
    source: https://huggingface.co/meta-llama/Meta-Llama-3-8B/blob/main/config.json
- function: llama3_8b_pretrain_8gpu_h100_fp8cs_config
  file: src/megatron/bridge/perf_recipes/llama/h100/llama3.py
  model: llama3_8b
  gpu: h100
  num_gpus: 8
  precision: fp8cs
  variant: ''
  accepted: true
- function: qwen3_30b_a3b_pretrain_8gpu_b200_bf16_config
  file: src/megatron/bridge/perf_recipes/qwen/b200/qwen3_moe.py
  model: qwen3_30b_a3b
  gpu: b200
  num_gpus: 8
  precision: bf16
  variant: ''
  accepted: true
  selected: true
"""


class IndexTest(unittest.TestCase):
    def test_selected_layouts_with_their_family(self):
        self.assertEqual(cases.read_index(INDEX), [
            ("llama3_8b", "h100", "llama", "src/megatron/bridge/perf_recipes/llama/h100/llama3.py", "llama3_8b_pretrain_8gpu_h100_bf16_config"),
            ("qwen3_30b_a3b", "b200", "qwen", "src/megatron/bridge/perf_recipes/qwen/b200/qwen3_moe.py", "qwen3_30b_a3b_pretrain_8gpu_b200_bf16_config"),
        ])

    def test_a_selected_entry_without_a_perf_recipe_file_is_an_error(self):
        text = "recipes:\n- function: f_config\n  model: m\n  gpu: h100\n  file: elsewhere.py\n  selected: true\n"
        with self.assertRaisesRegex(ValueError, "f_config"):
            cases.read_index(text)

    def test_the_recorded_dump_parses(self):
        path = os.path.join(cases.HERE, "..", "..", "presets", "testdata", "mbrecipes", "index.yaml")
        with open(path, encoding="utf-8") as f:
            layouts = cases.read_index(f.read())
        self.assertGreater(len(layouts), 10)
        self.assertEqual(len(layouts), len({(m, g) for m, g, *_ in layouts}))  # one layout per model and GPU type


class ValueTest(unittest.TestCase):
    def test_set_text_round_trips_through_hydra_value(self):
        for v in (True, False, None, 3, 0.1, 1.0, "alltoall", ["attn", "moe_router"], [], [0, 1, 1]):
            self.assertEqual(cases.hydra_value(cases.set_text(v)), v, v)

    def test_values_without_a_set_spelling(self):
        self.assertIsNone(cases.set_text({"a": 1}))
        self.assertIsNone(cases.set_text(["a,b"]))

    def test_enum_members_are_written_by_name(self):
        class Scope:
            def __init__(self, name):
                self.name = name

        self.assertEqual(cases.set_text([Scope("attn"), Scope("mlp")]), "[attn,mlp]")


def info(moe=True, comm_overlap=True, impl="transformer_engine", settable=None):
    keys = set(cases.load_keys()) | {"te_version"}
    return {"moe": moe, "comm_overlap": comm_overlap, "impl": impl, "settable": keys if settable is None else settable}


class GridTest(unittest.TestCase):
    def test_dense_models_get_no_moe_scopes_but_the_router_one(self):
        for impl, scopes in cases.graph_settings(info(moe=False)):
            moe_scopes = [s for s in scopes or [] if s.startswith("moe")]
            self.assertIn(moe_scopes, ([], ["moe_router"]), (impl, scopes))

    def test_warmup_zero_only_where_the_harness_reaches_the_verdict(self):
        for toggle, impl, scopes, warmup, _ in cases.make_cases(info()):
            if warmup == 0:
                self.assertIn(impl, ("none", "local", "full_iteration"), (toggle, impl, scopes))

    def test_a_toggle_that_sets_a_missing_field_is_left_out(self):
        full = {name for name, _ in cases.toggles(info())}
        self.assertIn("rank_capacity", full)
        settable = set(cases.load_keys()) - {"model.moe_expert_rank_capacity_factor"}
        names = {name for name, _ in cases.toggles(info(settable=settable))}
        self.assertNotIn("rank_capacity", names)
        self.assertNotIn("rank_capacity_fuser", names)
        self.assertIn("droppad", names)

    def test_local_per_layer_graphs_only_where_the_release_takes_them(self):
        def local_layer(i):
            return {(impl, tuple(scopes or ())) for _, impl, scopes, _, sets in cases.make_cases(i) if sets and impl == "local"}

        self.assertEqual(local_layer(info()), {("local", ("full_iteration",))})
        self.assertEqual(local_layer(dict(info(), local_per_layer=True)), {("local", ("full_iteration",)), ("local", ()), ("local", ("attn",))})

    def test_ep_overlap_is_set_where_mb_reads_it(self):
        with_co = dict(cases.toggles(info(comm_overlap=True)))["ep_overlap"]
        without = dict(cases.toggles(info(comm_overlap=False)))["ep_overlap"]
        self.assertEqual(list(with_co), ["comm_overlap.overlap_moe_expert_parallel_comm"])
        self.assertEqual(list(without), ["model.overlap_moe_expert_parallel_comm"])

    def test_every_toggle_key_is_a_recorded_key(self):
        keys = set(cases.load_keys()) | {"te_version"}
        for name, sets in cases.toggles(info()):
            self.assertLessEqual(set(sets), keys, name)


def case(**kw):
    c = {"model": "m", "gpu": "h100", "mbridge": "0.6", "impl": None, "scopes": None, "warmup": 3, "set": {}, "base": {"k": "1"},
         "accept": True, "message": "", "raised_by": ""}
    c.update(kw)
    return c


class CorpusTest(unittest.TestCase):
    def test_repeats_across_gpu_types_are_dropped(self):
        cs = [case(gpu="h100"), case(gpu="b200"), case(gpu="b200", base={"k": "2"}), case(gpu="gb200", warmup=0)]
        self.assertEqual([c["gpu"] for c in cases.unique_cases(cs)], ["h100", "b200", "gb200"])

    def test_written_corpus_reads_back_and_is_reproducible(self):
        cs = [case(), case(accept=False, message="no", raised_by="f.py:g")]
        with tempfile.TemporaryDirectory() as d:
            a, b = os.path.join(d, "a.jsonl.gz"), os.path.join(d, "b.jsonl.gz")
            cases.write_corpus(a, cs)
            cases.write_corpus(b, cs)
            self.assertEqual(cases.read_corpus(a), cs)
            with open(a, "rb") as fa, open(b, "rb") as fb:
                self.assertEqual(fa.read(), fb.read())
            self.assertEqual(sorted(os.listdir(d)), ["a.jsonl.gz", "b.jsonl.gz"])  # no temporary file left

    def test_summary_counts_rejections_by_where_and_message(self):
        cs = [case(), case(accept=False, message="no", raised_by="f.py:g"), case(accept=False, message="no", raised_by="f.py:g"),
              case(accept=False, message="other", raised_by="h.py:i")]
        lines = cases.summary(cs).splitlines()
        self.assertEqual(lines[0], "4 cases, 1 accepted, 3 rejected")
        self.assertEqual(lines[1].split(), ["2", "f.py:g:", "no"])
        self.assertEqual(lines[2].split(), ["1", "h.py:i:", "other"])


if __name__ == "__main__":
    unittest.main()
