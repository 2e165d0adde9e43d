"""The labelled questions ``tune-fusion`` chooses the hybrid's weight on: a dense and a BM25 run
of the same dev questions, their qrels and/or answers (with the passage texts the answers are
matched in), checked against each other and against the inputs the runs record.

It owns the reading, the refusals and the per-question scoring; the fusion and the choice of
alpha are :func:`dpr_xrisk.retrieval.search.tune_alpha`'s, the table and the files the CLI's.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from dpr_xrisk.errors import InputError


@dataclass
class LabelledRuns:
    """Two runs (``{qid: [(docid, score), ...]}``) and the labels they are scored by: ``labelled``
    the question ids scored; ``judged`` the qrels and/or ``questions`` with answers (then
    ``passages``, docid -> (title, text), the texts the answers are matched in)."""

    dense: dict
    sparse: dict
    labelled: list[str]
    judged: dict | None = None
    questions: list | None = None
    passages: dict | None = None
    matched: dict = field(default_factory=dict)  # answer matches, shared by every candidate scored

    @property
    def unlabelled(self) -> int:
        """How many questions of the runs have no label (they are not used)."""
        return len((self.dense.keys() | self.sparse.keys()) - set(self.labelled))

    def scorer(self, ks, qrels_ks):
        """``score(run) -> {metric: {qid: value}}`` over the labelled questions, as
        :func:`~dpr_xrisk.retrieval.search.tune_alpha` takes it."""
        from dpr_xrisk.retrieval.search import per_question_metrics

        def score(run):
            return per_question_metrics(run, self.labelled, qrels=self.judged, questions=self.questions,
                                        passages=self.passages, ks=ks, qrels_ks=qrels_ks, answer_cache=self.matched)

        return score


def metric_cutoffs(metric: str) -> tuple[list[int], list[int]]:
    """The cut-offs scored for ``metric`` (``topK`` or ``name@K``): (top-k accuracy ks, qrels
    ks), the usual ones and the one ``metric`` names."""
    from dpr_xrisk.evaluation.evaluate import check_ks

    cut = metric[3:] if metric.startswith("top") else metric.partition("@")[2]
    cut_k = [int(cut)] if cut.isdigit() else []
    if cut_k:
        check_ks(cut_k, "--metric's cut-off")
    ks = sorted({1, 5, 20, *(cut_k if metric.startswith("top") else [])})
    qks = sorted({10, *(cut_k if "@" in metric else [])})
    return ks, qks


def read_labelled_runs(dense: Path, sparse: Path, qrels: Path | None = None, answers: Path | None = None,
                       corpus: Path | None = None) -> LabelledRuns:
    """Read the two runs and the labels (``qrels`` and/or ``answers``), refusing runs retrieved
    for other questions or from another corpus than the labels', answers without any answer
    (every weight would score 0), qrels and answers of different questions, and labelled
    questions in neither run. ``passages`` is left for :func:`load_answer_passages`."""
    from dpr_xrisk.evaluation.evaluate import check_run_inputs, judged_questions, read_any_run
    from dpr_xrisk.io.questions import read_questions
    from dpr_xrisk.io.trec import read_qrels

    (d_run, d_records), (s_run, s_records) = read_any_run(dense), read_any_run(sparse)
    judged = read_qrels(qrels) if qrels is not None else None
    questions = read_questions(answers) if answers is not None else None
    for path, records in ((dense, d_records), (sparse, s_records)):  # the runs' own questions and corpus
        check_run_inputs(path, records, questions, answers, qrels, corpus)
    labelled = judged_questions(judged, qrels) if judged is not None else None
    if questions is not None:
        labelled = _answered_questions(questions, answers, labelled)
    missing = [q for q in labelled if q not in d_run and q not in s_run]
    if missing:
        raise InputError(f"{len(missing)} of {len(labelled)} labelled question(s) are in neither run, "
                         f"e.g. {missing[0]!r}: search the same questions the labels are for")
    return LabelledRuns(d_run, s_run, labelled, judged=judged, questions=questions)


def _answered_questions(questions, answers: Path, judged: list[str] | None) -> list[str]:
    """The ids of ``questions`` (read from ``answers``), each with an answer and, with qrels,
    the questions the qrels judge (``judged``)."""
    from dpr_xrisk.io.questions import check_unique_ids

    check_unique_ids(questions, answers)
    asked = [q.qid for q in questions]
    bare = [q.qid for q in questions if not any(a.strip() for a in q.answers)]
    if bare:
        raise InputError(f"{len(bare)} question(s) of --answers have no answer, e.g. {bare[0]!r}: "
                         "top-k accuracy would be 0 for every weight (tune on --qrels instead)", answers)
    if judged is not None and set(asked) != set(judged):
        raise InputError(f"--answers and --qrels label different questions ({len(asked)} vs {len(judged)}); "
                         "give the same questions to both, or only one of them")
    return asked


def load_answer_passages(runs: LabelledRuns, corpus: Path) -> None:
    """Fill ``runs.passages`` with the texts of every passage either run names, from ``corpus``;
    a passage missing from it is an error."""
    from dpr_xrisk.retrieval.search import load_passage_texts

    wanted = {d for run in (runs.dense, runs.sparse) for hits in run.values() for d, _ in hits}
    runs.passages = load_passage_texts(corpus, wanted)
    absent = wanted - runs.passages.keys()
    if absent:
        raise InputError(f"the runs name {len(absent)} passage(s) not in the corpus, e.g. {sorted(absent)[0]!r}", corpus)
