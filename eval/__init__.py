"""The benchmark harness of dpr_xrisk: one runner for every experiment, experiments as data.

    python -m eval run <experiment> [--systems ...] [--seeds ...] [--tiny] [--set key=value ...]
    python -m eval report [<experiment>]          # docs/results.md from the stored JSON in eval/results/
    python -m eval paired --runs DIR base other   # per-question differences, 95 % bootstrap intervals

An experiment is a TOML file under ``eval/experiments/`` (its protocol tag, parameters, seeds and
systems, each system with every setting it depends on); the Python here is what every experiment
shares, written once:

- ``harness``: environment capture, the ``dpr-xrisk`` command runner, experiment loading and the
  resolution of a system's training config, run folders (reuse, resume, refusal on mismatch);
- ``paired``: per-question ranks and paired bootstrap statistics;
- ``report``: docs/results.md and its figures from eval/results/*.json;
- ``squad``, ``nq``: the two retrieval-quality protocols (data, training, evaluation);
- ``speed``: encode and training-step throughput against sentence-transformers (CPU or GPU),
  and the deep fuzz run of tests/test_fuzz.py;
- ``_st_mnrl.py``: the sentence-transformers MNRL fine-tune, run as a subprocess (its bytes are
  part of the nq protocol's run settings: an edit makes its runs another run).

This package owns no retrieval code: every model is trained, encoded, searched and scored by the
``dpr-xrisk`` command line, so a benchmark measures what a user runs. Inputs come from
``../shared/data`` (or ``DPR_XRISK_SHARED_DATA``); everything derived from them goes to
``eval/work/`` (git-ignored) and is never committed.
"""
