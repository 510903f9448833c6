"""Result encoding for the Go side (engine.Result in engine/engine.go).
Pure Python (no torch): unit-tested in CI."""

import hashlib
import math


def summarise(ms):
    """Median and p10/p90 (nearest rank on the sorted values), as
    stepmodel.Summarise computes them (both are tested on
    stepmodel/testdata/summarise_cases.json)."""
    if not ms:
        return {"median_ms": 0.0, "p10_ms": 0.0, "p90_ms": 0.0, "n": 0}
    s = sorted(ms)
    n = len(s)

    def at(p):
        # Go's math.Round rounds half away from zero; Python's round() does not.
        return s[int(math.floor(p * (n - 1) + 0.5))]

    med = s[n // 2] if n % 2 else (s[n // 2 - 1] + s[n // 2]) / 2.0
    return {"median_ms": med, "p10_ms": at(0.10), "p90_ms": at(0.90), "n": n}


def classify_error(text):
    """The engine.Err* kind of a candidate's first exception."""
    t = text.lower()
    if "out of memory" in t or "outofmemory" in t:
        return "oom"
    if "capture" in t or ("graph" in t and ("invalidated" in t or "not permitted" in t)):
        return "capture"
    if "cuda" in t:
        return "cuda"
    return "crash"


def explain_capture(text):
    """Adds what a stream-capture invalidation usually means: CUDA reports
    only that capture broke, later calls that a previous error did."""
    if "StreamCaptureInvalidated" in text or "previous error during capture" in text:
        return text + " [the captured region made a call that is illegal during capture, such as a" \
                      " host synchronisation: dropless MoE copies its token counts to the host]"
    return text


def loss_drift(graphed, eager, moe):
    """Relative difference of a graphed run's loss from eager's at the same
    step, and the tolerance it is held to: dense steps are bit-identical
    from the same seed, MoE differs slightly (non-deterministic kernels)."""
    if graphed is None or eager is None:
        return None, None
    tol = 2e-2 if moe else 1e-3
    if not (math.isfinite(graphed) and math.isfinite(eager)):
        return float("inf"), tol
    return abs(graphed - eager) / max(abs(eager), 1e-6), tol


def result(candidate, device, steps, eager, **kw):
    """The engine.Result dict; every argument past `eager` is optional."""
    r = {
        "candidate": candidate,
        "source": "framework",
        "device": device,
        "step": summarise(steps),
        "eager": eager or summarise([]),
        "speedup": 0.0,
        "capture_ms": kw.get("capture_ms", 0.0),
        "warmup_ms": kw.get("warmup_ms", 0.0),
        "graphs": kw.get("graphs", 0),
        "nodes": 0,
        "memory": kw.get("memory") or {},
        "notes": kw.get("notes") or [],
        "wall_ms": kw.get("wall_ms", 0.0),
    }
    for k in ("scaling", "framework", "host_enqueue_ms", "eager_host_enqueue_ms", "loss", "eager_loss",
              "fwd_bwd_ms"):
        if kw.get(k) is not None:
            r[k] = kw[k]
    if kw.get("error"):
        r["error"] = kw["error"]
        r["error_kind"] = kw.get("error_kind") or classify_error(kw["error"])
    elif r["step"]["median_ms"] > 0 and r["eager"]["median_ms"] > 0:
        r["speedup"] = r["eager"]["median_ms"] / r["step"]["median_ms"]
    return r


EAGER_NOTE = "eager baseline: "


def median_run(runs):
    """The eager baseline from runs of it in separate processes: the run
    whose step median is the median of theirs (the lower one of an even
    count), so its figures, losses and raw times stay those of one run,
    with a note of every process's median and the wall time of them all.
    Eager steps are host-bound and noisy: on an H200 node dense-small's
    eager p10-p90 spanned 12-17% of its median within one process, and one
    configuration's median differed by 12-23% between processes started a
    minute apart, so one process is one sample of that spread.  When every
    run failed, the first."""
    ok = sorted((r for r in runs if not r.get("error") and r["step"]["median_ms"] > 0),
                key=lambda r: r["step"]["median_ms"])
    if not ok:
        return runs[0]
    mid = dict(ok[(len(ok) - 1) // 2])
    if len(runs) > 1:
        notes = list(mid.get("notes") or [])
        notes.append(EAGER_NOTE + "the median of %d processes (step medians %s ms)" % (
            len(ok), ", ".join("%.2f" % r["step"]["median_ms"] for r in ok)))
        if len(ok) < len(runs):
            notes.append(EAGER_NOTE + "%d of %d processes failed: %s" % (
                len(runs) - len(ok), len(runs), next(r["error"] for r in runs if r.get("error"))))
        mid["notes"] = notes
        mid["wall_ms"] = sum(r.get("wall_ms", 0.0) for r in runs)
    return mid


def pool_id(key):
    """A short name for the eager baseline of one slice (the worker's key
    of it), the same in every result compared with it."""
    return hashlib.sha1(key.encode()).hexdigest()[:12]


class EagerPool:
    """The search's eager baseline of one slice: every eager step its runs
    measured, scaled to the job. Megatron-Core's eager step is host-bound
    on small layers, and the host's speed drifts: on an H200 node the
    median of one slice's eager process ran from 912 to 1379 ms within a
    minute, and a search's three baseline processes at its start were 25%
    off the same slice's eager steps an hour later. Each result is given
    the pool as it stands, and the search compares every result with the
    fullest pool (the one with most steps, engine.Result.EagerPool)."""

    def __init__(self, ident):
        self.id = ident
        self.steps = []
        self.runs = []  # (label, median ms)

    def add(self, run, label):
        """Adds the eager steps a run measured (its eager_samples), unless
        it failed."""
        samples = run.get("eager_samples") or []
        if run.get("error") or not samples:
            return
        self.steps.extend(samples)
        self.runs.append((label, summarise(samples)["median_ms"]))

    def stats(self):
        return summarise(self.steps)

    def note(self):
        return EAGER_NOTE + "%d steps of %d runs pooled (each run's median: %s ms)" % (
            len(self.steps), len(self.runs), ", ".join("%s %.2f" % run for run in self.runs))

    def apply(self, run):
        """The run's result compared with the pool: its eager stats and
        speed-up, the pool's note in place of other eager-baseline notes;
        an eager run's step is the pool's."""
        r = dict(run)
        r.pop("eager_samples", None)
        if not self.steps:
            return r
        st = self.stats()
        r["eager"], r["eager_pool"] = st, self.id
        r["notes"] = [n for n in r.get("notes") or [] if not n.startswith(EAGER_NOTE)] + [self.note()]
        if r.get("error"):
            return r
        if (r.get("candidate") or {}).get("impl") == "none":
            r["step"], r["speedup"] = st, 1.0
        elif r["step"]["median_ms"] > 0:
            r["speedup"] = st["median_ms"] / r["step"]["median_ms"]
        return r
