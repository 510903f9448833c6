"""The framework's own whole-model runs a verdict is checked against:
picks a preset's cases from bench/memory/cases.json (the job's optimizer,
no extra environment), sets their measured steps, and writes them as a
cases file for bench/memory/peaks.py.

  python3 bench/verdict/reference.py PRESET STEPS OUT.json [MODE...]

MODE: none, local, full_iteration (default: every mode the preset has).
"""

import json
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))


def cases_for(preset, steps, all_cases, modes=()):
    out = []
    for c in all_cases:
        if modes and c["mode"] not in modes:
            continue
        if c["name"] == preset and c.get("optimizer", "job") == "job" and not c.get("env"):
            out.append(dict(c, steps=steps))
    return out


def main(argv):
    preset, steps, out = argv[1], int(argv[2]), argv[3]
    with open(os.path.join(HERE, "..", "memory", "cases.json")) as f:
        cases = cases_for(preset, steps, json.load(f), argv[4:])
    if not cases:
        sys.exit("no whole-model cases named %r in bench/memory/cases.json" % preset)
    with open(out, "w") as f:
        json.dump(cases, f)


if __name__ == "__main__":
    main(sys.argv)
