"""Tests of the NCCL probe's arithmetic (no torch, no GPU): run by ./test.sh."""

import contextlib
import io
import os
import sys
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import nccl_probe as p  # noqa: E402


class BusBandwidth(unittest.TestCase):
    def test_factors_follow_nccl_tests(self):
        # nccl-tests doc/PERFORMANCE.md: all-reduce 2(n-1)/n, all-gather,
        # reduce-scatter and all-to-all (n-1)/n, send/recv 1.
        self.assertAlmostEqual(p.bus_factor("all_reduce", 2), 1.0)
        self.assertAlmostEqual(p.bus_factor("all_reduce", 8), 1.75)
        for op in ("all_gather", "reduce_scatter", "all_to_all"):
            self.assertAlmostEqual(p.bus_factor(op, 2), 0.5)
            self.assertAlmostEqual(p.bus_factor(op, 8), 0.875)
        self.assertEqual(p.bus_factor("send_recv", 8), 1.0)
        self.assertEqual(p.bus_factor("all_reduce", 1), 0.0)

    def test_unknown_op_and_bad_counts(self):
        with self.assertRaises(ValueError):
            p.bus_factor("broadcast", 2)
        with self.assertRaises(ValueError):
            p.bus_factor("all_reduce", 0)
        with self.assertRaises(ValueError):
            p.alg_gbps(1 << 20, 0)

    def test_bandwidths(self):
        # 256 MiB all-reduced over 8 ranks in 1 ms: algbw 268.4 GB/s, busbw x1.75.
        nbytes = 256 << 20
        self.assertAlmostEqual(p.alg_gbps(nbytes, 1e-3), nbytes / 1e6, places=6)
        self.assertAlmostEqual(p.bus_gbps("all_reduce", 8, nbytes, 1e-3), nbytes / 1e6 * 1.75, places=6)
        self.assertAlmostEqual(p.bus_gbps("all_gather", 2, nbytes, 2e-3), nbytes / 2e6 * 0.5, places=6)

    def test_summary_takes_bandwidth_at_largest_and_latency_at_smallest(self):
        times = {1 << 20: 20e-6, 1 << 10: 8e-6, 256 << 20: 1.2e-3}
        s = p.summarize("reduce_scatter", 4, times)
        self.assertEqual([pt["bytes"] for pt in s["points"]], [1 << 10, 1 << 20, 256 << 20])
        self.assertAlmostEqual(s["latency_us"], 8.0)
        self.assertAlmostEqual(s["busbw_gbps"], (256 << 20) / 1.2e-3 / 1e9 * 0.75)
        self.assertAlmostEqual(s["points"][1]["time_us"], 20.0)
        with self.assertRaises(ValueError):
            p.summarize("all_reduce", 2, {})


class Sizes(unittest.TestCase):
    def test_elements_split_evenly(self):
        for n in (2, 3, 4, 6, 8):
            for size in (1, 1000, 1 << 10, 1 << 20):
                c = p.elements(size, n)
                self.assertEqual(c % n, 0)
                self.assertGreaterEqual(c, n)
                self.assertLessEqual(c * p.ELEMENT_BYTES, max(size, n * p.ELEMENT_BYTES))

    def test_parse_sizes(self):
        self.assertEqual(p.parse_sizes("1K,256M, 1024"), [1024, 256 << 20])
        self.assertEqual(p.parse_sizes("2g"), [2 << 30])
        for bad in ("", "0", "-5", "1X", "K"):
            with self.assertRaises(ValueError):
                p.parse_sizes(bad)

    def test_iterations_fall_with_size(self):
        its = [p.iterations(s) for s in p.DEFAULT_SIZES]
        self.assertEqual(its, sorted(its, reverse=True))
        self.assertGreater(its[0], its[-1])


class Arguments(unittest.TestCase):
    def test_needs_two_distinct_gpus(self):
        for bad in (["--gpus", "0"], ["--gpus", "0,0"], ["--gpus", "a,b"], ["--gpus", "0,1", "--sizes", "0"]):
            with self.assertRaises(SystemExit), contextlib.redirect_stderr(io.StringIO()):
                p.parse_args(bad)
        a = p.parse_args(["--gpus", "2,3", "--sizes", "1K,1M"])
        self.assertEqual(a.gpus, [2, 3])
        self.assertEqual(a.sizes, [1 << 10, 1 << 20])

    def test_port_retry_only_on_address_in_use(self):
        self.assertTrue(p.retry_port(p.RankError("rank 0: [Errno 98] Address already in use")))
        self.assertTrue(p.retry_port(p.RankError("EADDRINUSE")))
        self.assertFalse(p.retry_port(p.RankError("rank 1: NCCL error: unhandled cuda error")))


class NCCLVersion(unittest.TestCase):
    def test_formats(self):
        class Fake:
            class cuda:
                class nccl:
                    v = None

                    @staticmethod
                    def version():
                        return Fake.cuda.nccl.v

        Fake.cuda.nccl.v = (2, 27, 3)
        self.assertEqual(p.nccl_version(Fake), "2.27.3")
        Fake.cuda.nccl.v = 21805
        self.assertEqual(p.nccl_version(Fake), "2.18.5")
        Fake.cuda.nccl.v = 2708
        self.assertEqual(p.nccl_version(Fake), "2.7.8")


if __name__ == "__main__":
    unittest.main()
