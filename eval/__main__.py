"""``python -m eval``: run an experiment, regenerate the results page, compare two systems.

    python -m eval run <experiment> [--systems ...] [--seeds ...] [--tiny] [--set key=value ...] [--work DIR]
    python -m eval report [<experiment>]
    python -m eval paired --runs DIR base other [...] [--seed S] [--keep]
    python -m eval lengths [--train eval/work/full/train.json]
    python -m eval list
"""

from __future__ import annotations

import argparse
import importlib
import sys
from pathlib import Path

from eval import harness


def run(args) -> None:
    exp = harness.load_experiment(args.experiment)
    params = harness.params_of(exp, harness.parse_sets(args.set), args.tiny)
    systems = args.systems or exp.default()
    unknown = [s for s in systems if s not in exp.systems]
    if unknown:
        raise SystemExit(f"error: {exp.name}: unknown system(s) {unknown}; valid: {', '.join(exp.systems)}")
    seeds = args.seeds if args.seeds is not None else exp.seeds
    command = "python -m eval " + " ".join(args.argv)
    runner = importlib.import_module(f"eval.{exp.runner}")
    try:
        out = runner.run(exp, params, systems, seeds, args.work, command)
    except harness.RunMismatch as e:
        print(f"error: {e.msg}", file=sys.stderr)
        raise
    print(f"results: {out}", flush=True)
    if out.is_relative_to(harness.RESULTS):
        from eval import report

        report.write()


def main(argv: list[str] | None = None) -> None:
    argv = list(sys.argv[1:] if argv is None else argv)
    ap = argparse.ArgumentParser(prog="python -m eval", description=__doc__.split("\n\n")[0])
    sub = ap.add_subparsers(dest="command", required=True)
    r = sub.add_parser("run", help="run an experiment of eval/experiments/ (finished runs are reused)")
    r.add_argument("experiment")
    r.add_argument("--systems", nargs="+", default=None, help="default: the experiment's default_systems, else every one not retired")
    r.add_argument("--seeds", type=int, nargs="+", default=None, help="default: the experiment's seeds")
    r.add_argument("--tiny", action="store_true", help="the whole pipeline on a toy slice (its own work folder)")
    r.add_argument("--set", action="append", default=[], metavar="KEY=VALUE",
                   help="override a parameter of the experiment ([params] of its file); repeatable")
    r.add_argument("--work", type=Path, default=None, help="work folder (default: the experiment's under eval/work)")
    rep = sub.add_parser("report", help="regenerate docs/results.md from the stored JSON in eval/results/")
    rep.add_argument("experiment", nargs="?", default=None, help="also print this experiment's section")
    sub.add_parser("paired", help="paired comparison of systems (python -m eval paired --help)", add_help=False)
    ln = sub.add_parser("lengths", help="training positives' lengths vs the training cut-off (SQuAD split)")
    ln.add_argument("--train", type=Path, default=harness.WORK / "full" / "train.json")
    ln.add_argument("--out", type=Path, default=harness.RESULTS / "stats_lengths.json")
    sub.add_parser("list", help="the experiments and their systems")
    if argv[:1] == ["paired"]:
        from eval import paired

        paired.main(argv[1:])
        return
    args = ap.parse_args(argv)
    args.argv = argv
    if args.command == "run":
        run(args)
    elif args.command == "report":
        from eval import report

        text = report.write()
        if args.experiment:
            print(report.section(args.experiment, text))
    elif args.command == "lengths":
        from eval import squad

        squad.lengths(args.train, args.out)
    elif args.command == "list":
        for name in harness.experiments():
            exp = harness.load_experiment(name)
            print(f"{name} ({exp.protocol}): {exp.title}\n  systems: {', '.join(exp.current())}")
            if exp.default() != exp.current():
                print(f"  run by default: {', '.join(exp.default())}")


if __name__ == "__main__":
    main()
