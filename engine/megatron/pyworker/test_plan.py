"""Unit tests of the worker's pure parts (no torch): run by ./test.sh."""
import json
import os
import unittest

import optim
import plan
import results

G3_FIELDS = {"cuda_graph_impl", "cuda_graph_modules", "cuda_graph_scope", "cuda_graph_warmup_steps", "num_layers",
             "num_attention_heads", "num_query_groups", "ffn_hidden_size", "num_moe_experts", "moe_router_topk",
             "moe_expert_capacity_factor", "moe_pad_expert_input_to_capacity", "tensor_model_parallel_size",
             "expert_model_parallel_size", "sequence_parallel", "moe_ffn_hidden_size", "moe_layer_freq"}
G2_FIELDS = (G3_FIELDS - {"cuda_graph_modules"})
# The summary cases shared with the Go test of stepmodel.Summarise.
SUMMARY_CASES = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "..", "stepmodel", "testdata",
                             "summarise_cases.json")


def spec(tp=1, pp=1, cp=1, ep=1, num_gpus=1, gbs=4, mbs=1, layers=8, moe=None, dropless=None, hybrid=""):
    arch = {"layers": layers, "hidden": 2048, "ffn_hidden": 8192, "heads": 16, "kv_groups": 4, "head_dim": 128,
            "vocab": 32000}
    if moe:
        arch["moe"] = moe
    if hybrid:
        arch["hybrid_pattern"] = hybrid
    opts = {} if dropless is None else {"dropless": dropless}
    return {"model": {"name": "m", "arch": arch},
            "layout": {"num_gpus": num_gpus, "tp": tp, "pp": pp, "cp": cp, "ep": ep, "gbs": gbs, "mbs": mbs,
                       "seq": 4096}, "options": opts}


class CandidateTest(unittest.TestCase):
    def test_rejects_what_megatron_would_not_take(self):
        for bad in ({"impl": "banana"}, {"impl": "local", "scopes": ["everything"]},
                    {"impl": "local", "warmup": -7}, {"impl": "local", "warmup": True},
                    {"impl": "transformer_engine", "scopes": ["full_iteration"]},
                    {"impl": "local", "scopes": ["full_iteration", "attn"]}, {"impl": "local", "scopes": ["attn", "attn"]}, "x"):
            with self.assertRaises(plan.CandidateError, msg=bad):
                plan.validate_candidate(bad)

    def test_none_drops_scopes(self):
        self.assertEqual(plan.validate_candidate({"impl": "none", "scopes": ["attn"], "warmup": 2})["scopes"], [])


class GraphConfigTest(unittest.TestCase):
    def cfg(self, impl, scopes, fields):
        return plan.graph_config(plan.validate_candidate({"impl": impl, "scopes": scopes, "warmup": 2}), fields)

    def test_g3_core(self):
        self.assertEqual(self.cfg("local", ["full_iteration"], G3_FIELDS),
                         {"cuda_graph_impl": "full_iteration", "cuda_graph_modules": [], "cuda_graph_warmup_steps": 2})
        self.assertEqual(self.cfg("local", ["attn"], G3_FIELDS)["cuda_graph_modules"], ["attn"])
        self.assertEqual(self.cfg("transformer_engine", [], G3_FIELDS)["cuda_graph_impl"], "transformer_engine")
        self.assertEqual(self.cfg("none", [], G3_FIELDS)["cuda_graph_impl"], "none")

    def test_g2_core(self):
        c = self.cfg("local", ["full_iteration"], G2_FIELDS)
        self.assertEqual((c["cuda_graph_impl"], c["cuda_graph_scope"]), ("local", ["full_iteration"]))
        self.assertNotIn("cuda_graph_modules", self.cfg("transformer_engine", ["attn", "mlp"], G2_FIELDS))

    def test_modes(self):
        v = plan.validate_candidate
        self.assertEqual(plan.graph_mode(v({"impl": "local", "scopes": ["full_iteration"]})), "full_iteration")
        self.assertEqual(plan.graph_mode(v({"impl": "local", "scopes": ["attn"]})), "local")
        self.assertEqual(plan.graph_mode(v({"impl": "none"})), "none")


class MedianRunTest(unittest.TestCase):
    def run_of(self, med, loss, error=None):
        r = results.result({"impl": "none", "scopes": [], "warmup": 0}, {}, [med * 0.99, med, med * 1.01], None,
                           wall_ms=1000.0, loss=loss, error=error)
        return r

    def test_keeps_the_median_process_whole(self):
        runs = [self.run_of(196.3, 2.1), self.run_of(173.5, 2.2), self.run_of(180.0, 2.3)]
        r = results.median_run(runs)
        self.assertEqual(r["step"]["median_ms"], 180.0)
        self.assertEqual(r["loss"], 2.3)  # the same run's loss, not another's
        self.assertEqual(r["wall_ms"], 3000.0)
        self.assertIn("median of 3 processes (step medians 173.50, 180.00, 196.30 ms)", r["notes"][-1])
        self.assertEqual(runs[2]["notes"], [])  # the run itself is not changed

    def test_even_count_takes_the_lower_and_failures_are_said(self):
        runs = [self.run_of(0, None, error="CUDA out of memory"), self.run_of(120.0, 1.0), self.run_of(110.0, 1.0)]
        r = results.median_run(runs)
        self.assertEqual(r["step"]["median_ms"], 110.0)
        self.assertIn("1 of 3 processes failed: CUDA out of memory", r["notes"][-1])

    def test_all_failed_is_the_first_failure(self):
        runs = [self.run_of(0, None, error="first"), self.run_of(0, None, error="second")]
        self.assertEqual(results.median_run(runs)["error"], "first")

    def test_one_run_is_unchanged(self):
        run = self.run_of(100.0, 1.0)
        self.assertEqual(results.median_run([run]), run)


class RankEnvTest(unittest.TestCase):
    def test_one_omp_thread_unless_the_user_chose(self):
        env = {}
        self.assertEqual(plan.apply_rank_env(env), {"OMP_NUM_THREADS": "1"})
        self.assertEqual(env["OMP_NUM_THREADS"], "1")
        env = {"OMP_NUM_THREADS": "8"}
        self.assertEqual(plan.apply_rank_env(env), {})
        self.assertEqual(env["OMP_NUM_THREADS"], "8")


class ManualGCTest(unittest.TestCase):
    def test_collects_like_bridge_train_loop(self):
        # iteration % interval == 0: the first step, then every interval.
        self.assertEqual(plan.manual_gc_steps(12), [0])
        self.assertEqual(plan.manual_gc_steps(7, interval=3), [0, 3, 6])
        self.assertEqual(plan.manual_gc_steps(250), [0, 100, 200])
        self.assertEqual(plan.manual_gc_steps(5, interval=0), [])


class ShapesTest(unittest.TestCase):
    def test_per_rank_division(self):
        moe = {"experts": 128, "top_k": 8, "ffn_hidden": 768}
        s = plan.rank_shapes(spec(tp=2, pp=2, ep=4, num_gpus=16, gbs=32, layers=48, moe=moe))
        self.assertEqual((s["heads"], s["kv_groups"], s["ffn_hidden"]), (8, 2, 4096))
        self.assertEqual((s["stage_layers"], s["layers_built"]), (24, 8))
        self.assertEqual(s["microbatches"], 8)  # 32 / (1 x DP 4)
        self.assertEqual((s["moe"]["experts"], s["moe"]["topk"]), (32, 8))
        self.assertTrue(s["moe"]["dropless"])
        self.assertEqual(s["modelled"], ["TP 2", "EP 4", "PP 2", "DP 4"])

    def test_topk_capped_by_local_experts(self):
        s = plan.rank_shapes(spec(ep=16, num_gpus=16, moe={"experts": 32, "top_k": 8, "ffn_hidden": 384}))
        self.assertEqual((s["moe"]["experts"], s["moe"]["topk"]), (2, 2))

    def test_world_size_runs_tp_then_ep(self):
        s = plan.rank_shapes(spec(tp=2, num_gpus=2), world=2)
        self.assertEqual((s["tp_run"], s["ep_run"], s["heads"]), (2, 1, 8))
        self.assertEqual(s["modelled"], [])
        kw = plan.config_kwargs(s, plan.validate_candidate({"impl": "none"}), G3_FIELDS, te=False)
        self.assertEqual((kw["num_attention_heads"], kw["tensor_model_parallel_size"]), (16, 2))
        self.assertFalse(kw["sequence_parallel"])  # torch norms of the local spec refuse it
        s = plan.rank_shapes(spec(ep=4, num_gpus=4, moe={"experts": 32, "top_k": 8, "ffn_hidden": 384}), world=2)
        self.assertEqual((s["tp_run"], s["ep_run"], s["moe"]["experts"]), (1, 2, 8))
        kw = plan.config_kwargs(s, plan.validate_candidate({"impl": "none"}), G3_FIELDS, te=False)
        self.assertEqual((kw["num_moe_experts"], kw["expert_model_parallel_size"]), (16, 2))
        self.assertEqual(s["modelled"], ["EP 4 (2 run)", "DP 4"])

    def test_drop_and_pad(self):
        s = plan.rank_shapes(spec(moe={"experts": 8, "top_k": 2, "ffn_hidden": 512}, dropless=False))
        kw = plan.config_kwargs(s, plan.validate_candidate({"impl": "none"}), G3_FIELDS, te=False)
        self.assertEqual((kw["moe_expert_capacity_factor"], kw["moe_pad_expert_input_to_capacity"]), (1.0, True))

    def test_unsupported_and_bad_specs(self):
        with self.assertRaises(plan.SpecError):
            plan.rank_shapes(spec(hybrid="M*M*"))
        # The newer models' layers: GPTModel's standard layers would build
        # something else and measure it as them.
        for field, value in (("experimental_attention_variant", "gated_delta_net"), ("attention_output_gate", True),
                             ("hyper_connections", {"num_residual_streams": 4})):
            s = spec()
            s["model"]["arch"][field] = value
            with self.assertRaises(plan.SpecError):
                plan.rank_shapes(s)
        with self.assertRaises(plan.SpecError):
            plan.rank_shapes(spec(moe={"experts": 8, "top_k": 2, "ffn_hidden": 512, "moe_latent_size": 128}))
        with self.assertRaises(plan.SpecError):
            plan.rank_shapes(spec(tp=3, num_gpus=3))  # 16 heads over TP 3
        with self.assertRaises(plan.SpecError):
            plan.rank_shapes({"model": {"arch": {"layers": -1}}, "layout": {"seq": 1}})

    def test_scaling_says_what_was_scaled(self):
        s = plan.rank_shapes(spec(layers=48, gbs=64), max_layers=4, max_microbatches=4)
        fb, opt, text = plan.scaling(s)
        self.assertEqual((fb, opt), (12 * 16, 12))
        self.assertIn("built 4 of the stage's 48 layers", text)
        self.assertIn("not measured: all of it scaled with them", text)
        self.assertEqual(plan.scaling(plan.rank_shapes(spec()))[2], "")

    def test_only_the_layers_part_scales_with_the_layers(self):
        # 4 of 8 layers, the layers 60% of forward-backward: 0.4 + 0.6 x 2.
        s = plan.rank_shapes(spec(layers=8, gbs=4), max_layers=4, max_microbatches=4)
        fb, _, text = plan.scaling(s, None, 0.6)
        self.assertAlmostEqual(fb, 1.6)
        self.assertIn("the layers took 60% of forward-backward", text)
        # Micro-batches scale all of it: 8 of 16 run.
        s = plan.rank_shapes(spec(layers=8, gbs=16), max_layers=4, max_microbatches=8)
        self.assertAlmostEqual(plan.scaling(s, None, 0.6)[0], 1.6 * 2)
        # The whole stage built: nothing to scale, whatever the share.
        self.assertEqual(plan.scaling(plan.rank_shapes(spec()), None, 0.3)[0], 1.0)

    def test_layer_share_from_the_decoders_windows(self):
        marks = [("fs", 1.0), ("fe", 3.0), ("bs", 5.0), ("fs", 6.0), ("be", 9.0), ("fe", 7.5)]
        self.assertEqual(plan.pair_windows(marks), [(1.0, 3.0), (5.0, 9.0), (6.0, 7.5)])
        self.assertAlmostEqual(plan.layer_share([2.0, 4.0, 1.5], 10.0), 0.75)
        self.assertIsNone(plan.layer_share([], 10.0))
        self.assertIsNone(plan.layer_share([1.0], 0.0))
        self.assertEqual(plan.layer_share([8.0, 4.0], 10.0), 1.0)  # clock skew never gives more than all


class EagerPoolTest(unittest.TestCase):
    def run_of(self, impl, steps, samples=None, error=None):
        r = results.result({"impl": impl, "scopes": [], "warmup": 1}, {}, steps, results.summarise([100.0]),
                           notes=["eager baseline: the median of 3 processes", "python gc: manual"], error=error)
        if samples is not None:
            r["eager_samples"] = samples
        return r

    def test_every_run_is_compared_with_all_eager_steps_so_far(self):
        pool = results.EagerPool(results.pool_id("key"))
        pool.add(self.run_of("none", [120.0, 121.0, 119.0], [120.0, 121.0, 119.0]), "eager")
        pool.add(self.run_of("none", [0], [1.0], error="CUDA out of memory"), "eager")  # a failure adds nothing
        graphed = self.run_of("local", [40.0, 40.0, 40.0], [150.0, 160.0])
        pool.add(graphed, "full_iteration")
        r = pool.apply(graphed)
        self.assertEqual(r["eager"]["n"], 5)
        self.assertEqual(r["eager"]["median_ms"], 121.0)
        self.assertAlmostEqual(r["speedup"], 121.0 / 40.0)
        self.assertEqual(r["eager_pool"], pool.id)
        self.assertNotIn("eager_samples", r)
        self.assertEqual(r["notes"][0], "python gc: manual")
        self.assertIn("5 steps of 2 runs pooled (each run's median: eager 120.00, full_iteration 155.00 ms)", r["notes"][-1])
        self.assertIn("eager_samples", graphed)  # the run itself is not changed

    def test_an_eager_run_is_the_pool(self):
        pool = results.EagerPool("p")
        run = self.run_of("none", [90.0, 91.0, 92.0], [90.0, 91.0, 92.0])
        pool.add(self.run_of("none", [200.0], [200.0]), "eager")
        pool.add(run, "eager")
        r = pool.apply(run)
        self.assertEqual((r["step"], r["speedup"]), (pool.stats(), 1.0))
        self.assertEqual(r["step"]["median_ms"], 91.5)

    def test_an_empty_pool_changes_nothing_but_the_samples(self):
        r = results.EagerPool("p").apply(self.run_of("local", [40.0], [1.0]))
        self.assertEqual((r["eager"]["median_ms"], r.get("eager_pool")), (100.0, None))
        self.assertNotIn("eager_samples", r)


class OptimizerTest(unittest.TestCase):
    def test_the_job_optimizer_or_a_labelled_stand_in(self):
        self.assertEqual(optim.choose(True, True), optim.TE)
        self.assertEqual(optim.choose(False, True), optim.APEX)
        self.assertEqual(optim.choose(False, False), optim.STAND_IN)
        self.assertIn("standing in", optim.STAND_IN)

    def test_the_shard_of_the_distributed_optimizer(self):
        # 64 GPUs, TP 2 PP 2 CP 2 EP 8: dense state over DP x CP = 8 x 2,
        # experts over 64 / (ETP 1 x EP 8 x PP 2) = 4.
        s = plan.rank_shapes(spec(tp=2, pp=2, cp=2, ep=8, num_gpus=64, gbs=64, layers=8,
                                  moe={"experts": 64, "top_k": 8, "ffn_hidden": 1024}))
        self.assertEqual((s["dense_shard"], s["expert_shard"]), (16, 4))
        self.assertAlmostEqual(plan.optimizer_factor(s, 300, 100), (300 / 16 + 100 / 4) / 400)
        s["distributed_optimizer"] = False
        self.assertEqual(plan.optimizer_factor(s, 300, 100), 1.0)

    def test_the_parameters_outside_the_layers_are_not_scaled(self):
        # 4 of 8 layers built: 240 dense parameters in the layers, 160 in
        # the embedding and output layer; the job's stage holds 160 + 480.
        s = plan.rank_shapes(spec(layers=8, gbs=4), max_layers=4)
        s["dense_shard"] = 1
        self.assertAlmostEqual(plan.optimizer_factor(s, 400, 0, 240), (160 + 480) / 400.0)
        self.assertAlmostEqual(plan.optimizer_factor(s, 400, 0), 2.0)  # unsplit: all of it a layer's
        s["dense_shard"] = 4
        self.assertAlmostEqual(plan.optimizer_factor(s, 400, 0, 240), (160 + 480) / 4 / 400.0)

    def test_layout_turns_the_distributed_optimizer_off(self):
        sp = spec()
        sp["layout"]["no_distributed_optimizer"] = True
        sp["layout"]["grad_reduce_in_fp32"] = True
        s = plan.rank_shapes(sp)
        self.assertEqual((s["distributed_optimizer"], s["grad_reduce_in_fp32"]), (False, True))
        self.assertTrue(plan.rank_shapes(spec())["distributed_optimizer"])

    def test_precision_aware_optimizer_as_the_harness_turns_it_on(self):
        # The perf harness turns it on for bf16 runs; the recipe's own flag
        # anywhere; outside the harness a bf16 run keeps the recipe's.
        self.assertTrue(plan.rank_shapes(spec())["precision_aware_optimizer"])
        for layout, want in (({"precision": "fp8cs"}, False), ({"precision": "fp8cs", "precision_aware_optimizer": True}, True),
                             ({"outside_harness": True}, False), ({"precision": "bf16", "outside_harness": True,
                                                                  "precision_aware_optimizer": True}, True)):
            sp = spec()
            sp["layout"].update(layout)
            self.assertEqual(plan.rank_shapes(sp)["precision_aware_optimizer"], want, layout)

    def test_precision_aware_optimizer_config(self):
        fields = {"use_precision_aware_optimizer", "fp8_recipe"}
        s = {"precision_aware_optimizer": True, "notes": []}
        # As Megatron-Bridge configures it: its mixed-precision fp8_recipe
        # default copied onto the optimizer config.
        self.assertEqual(optim.precision_aware_kwargs(s, fields, True, have_te=True),
                         {"use_precision_aware_optimizer": True, "fp8_recipe": "tensorwise"})
        self.assertEqual(s["notes"], [])
        # Without Transformer Engine's FusedAdam it is left off, and said.
        self.assertEqual(optim.precision_aware_kwargs(s, fields, True, have_te=False), {})
        self.assertEqual(s["notes"], [optim.PRECISION_AWARE_NEEDS_TE])
        self.assertEqual(optim.precision_aware_kwargs({"precision_aware_optimizer": False}, fields, True, have_te=True), {})

    def test_scaling_takes_the_optimizer_factor(self):
        s = plan.rank_shapes(spec(layers=48, gbs=64), max_layers=4, max_microbatches=4)
        fb, opt, text = plan.scaling(s, 3.0)
        self.assertEqual((fb, opt), (12 * 16, 3))
        self.assertIn("optimizer does 3 times the slice's work", text)


class GraphMemoryTest(unittest.TestCase):
    def test_what_capturing_adds_over_eager(self):
        self.assertEqual(plan.graph_memory({"impl": "local"}, 41544, 39394), 2150)
        self.assertEqual(plan.graph_memory({"impl": "local"}, 39000, 39394), 0)  # never negative
        self.assertEqual(plan.graph_memory({"impl": "none"}, 41544, 39394), 0)
        self.assertEqual(plan.graph_memory({"impl": "local"}, 41544, None), 0)


class ResultsTest(unittest.TestCase):
    def test_summarise_matches_go(self):
        # The cases stepmodel.Summarise is tested on too (stepmodel/stats_test.go).
        with open(SUMMARY_CASES) as f:
            cases = json.load(f)["cases"]
        self.assertGreaterEqual(len(cases), 8)
        for c in cases:
            with self.subTest(c["name"]):
                got = results.summarise(c["ms"])
                self.assertEqual(got["n"], c["want"]["n"])
                for k in ("median_ms", "p10_ms", "p90_ms"):
                    self.assertAlmostEqual(got[k], c["want"][k], delta=1e-9, msg="%s of %s" % (k, c["ms"]))

    def test_drift(self):
        d, tol = results.loss_drift(2.0, 2.0, moe=False)
        self.assertEqual(d, 0.0)
        d, tol = results.loss_drift(2.1, 2.0, moe=True)
        self.assertGreater(d, tol)
        self.assertEqual(results.loss_drift(float("nan"), 2.0, False)[0], float("inf"))

    def test_result_speedup_and_errors(self):
        r = results.result({"impl": "local"}, {}, [50.0, 50.0], results.summarise([100.0]))
        self.assertAlmostEqual(r["speedup"], 2.0)
        self.assertEqual(r["source"], "framework")
        r = results.result({"impl": "local"}, {}, [], None, error="torch.OutOfMemoryError: CUDA out of memory")
        self.assertEqual((r["error_kind"], r["speedup"]), ("oom", 0.0))
        self.assertEqual(results.classify_error("cudaErrorStreamCaptureInvalidated: operation not permitted when stream is capturing"), "capture")
        self.assertIn("host synchronisation", results.explain_capture("x cudaErrorStreamCaptureInvalidated y"))


class RelayTest(unittest.TestCase):
    def test_relay_passes_samples_and_keeps_the_last_result(self):
        import worker

        got = []
        lines = ['{"type": "sample", "n": 1}\n', "not json\n", '{"type": "result", "r": 1}\n',
                 '{"type": "sample", "n": 2}\n', '{"type": "result", "r": 2}\n']
        final = worker.relay(lines, got.append)
        self.assertEqual([m["n"] for m in got], [1, 2])
        self.assertEqual(final["r"], 2)
        self.assertIsNone(worker.relay([], got.append))



class LayerCallTimesTest(unittest.TestCase):
    def test_first_layer_and_the_median_of_the_rest(self):
        # decoder at 10.000 s; layers called at +0.2, +0.9, +1.3, +1.8, +2.1 ms
        calls = [10.0002, 10.0009, 10.0013, 10.0018, 10.0021]
        got = plan.layer_call_times(10.0, calls)
        self.assertAlmostEqual(got["to_first_layer"], 0.2, places=6)
        self.assertAlmostEqual(got["first_layer"], 0.7, places=6)
        self.assertAlmostEqual(got["layer_call"], 0.4, places=6)  # median of 0.4, 0.5, 0.3

    def test_figures_need_their_layers(self):
        self.assertEqual(plan.layer_call_times(None, []), {})
        self.assertEqual(set(plan.layer_call_times(1.0, [1.001])), {"to_first_layer"})
        self.assertEqual(set(plan.layer_call_times(None, [1.0, 1.001])), {"first_layer"})
        self.assertEqual(set(plan.layer_call_times(1.0, [1.0, 1.001, 1.002])), set(plan.LAYER_CALL_FIGURES))


if __name__ == "__main__":
    unittest.main()
