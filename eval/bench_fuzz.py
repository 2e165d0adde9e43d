"""The fuzzed readers of tests/test_fuzz.py at depth (issue #15): every test with hypothesis's
``long`` profile (2,000 examples each, fresh random seed), cases tried and failures per test.

    python eval/bench_fuzz.py            # writes eval/results/bench_fuzz.json and a section of eval/RESULTS.md
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _common import EVAL, RESULTS, replace_section, machine  # noqa: E402

ROOT = EVAL.parent


def main() -> None:
    t0 = time.perf_counter()
    cmd = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "tests/test_fuzz.py",
           "--hypothesis-profile=long", "--hypothesis-show-statistics", "-rN"]
    proc = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True)
    out = proc.stdout + proc.stderr
    per_test: dict[str, dict] = {}
    current = None
    for line in out.splitlines():
        m = re.match(r"^tests/test_fuzz.py::(\S+):", line.strip())
        if m:
            current = per_test.setdefault(m.group(1), {"passing": 0, "failing": 0, "invalid": 0})
            continue
        m = re.search(r"(\d+) passing(?: examples?| test cases?)?, (\d+) failing(?: examples?| test cases?)?,? (?:and )?(\d+) invalid", line)
        if m and current is not None:
            current["passing"] += int(m.group(1))
            current["failing"] += int(m.group(2))
            current["invalid"] += int(m.group(3))
    summary = re.findall(r"(\d+) (passed|failed)", out)
    res = {"command": "python eval/bench_fuzz.py", "machine": machine(), "returncode": proc.returncode,
           "seconds": round(time.perf_counter() - t0, 1), "tests": per_test, "pytest": dict((k, int(v)) for v, k in summary)}
    RESULTS.mkdir(exist_ok=True)
    (RESULTS / "bench_fuzz.json").write_text(json.dumps(res, indent=2) + "\n")
    rows = "\n".join(f"| {name} | {s['passing']:,} | {s['invalid']:,} | {s['failing']} |" for name, s in per_test.items())
    tried = sum(s["passing"] + s["failing"] for s in per_test.values())
    fails = sum(s["failing"] for s in per_test.values())
    section = (f"## Fuzzed readers (issue #15)\n\nCommand: `python eval/bench_fuzz.py` (hypothesis profile `long`)  \n"
               f"Date: {res['machine']['date']}; {res['seconds']:.0f} s; pytest exit code {proc.returncode} "
               f"({res['pytest']}).\n\n{tried:,} cases run, {fails} failing.\n\n"
               "| test | cases passed | invalid (filtered) | failing |\n|---|---:|---:|---:|\n" + rows + "\n")
    print(section)
    if proc.returncode != 0:
        print(out[-4000:], file=sys.stderr)
    replace_section(EVAL / "RESULTS.md", "## Fuzzed readers (issue #15)", section)
    sys.exit(proc.returncode)


if __name__ == "__main__":
    main()
