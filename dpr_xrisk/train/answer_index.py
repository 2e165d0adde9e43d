"""The refresh's answer filter, computed once per run instead of once per (question, candidate)
pair at every refresh: which of the training questions' answers each corpus passage contains.

The rule is DPR's ``has_answer`` (:mod:`dpr_xrisk.evaluation.answers`, the one definition): an
answer matches when its DPR tokens occur contiguously in the passage's tokens; an answer with no
token matches every passage. Here every answer of the run's questions is tokenised once into a
trie of token sequences (built when training starts), and a passage is tokenised once per run, the
first time a refresh retrieves it: one walk of the trie from each of its tokens finds every
answer it contains, remembered by passage id. A refresh's check of a candidate is then a set
intersection -- the same removals as ``has_answer`` on every pair (tests/test_refresh.py compares
the two on random data and on a training run), without re-reading ~100 passages per question at
every refresh.

This module owns the matching structure only; which candidates are filtered and when is
``train/mining.py``. The corpus must not change during a run (passages are remembered by id).
"""

from __future__ import annotations

from typing import Iterable, Sequence

from dpr_xrisk.evaluation.answers import tokenize

_END = ""  # a trie node's key for the answers ending there (a DPR token is never empty)


class AnswerIndex:
    """Answers of a question set as a token trie, and the answers each passage contains."""

    def __init__(self, answer_lists: Iterable[Sequence[str]] = ()):
        self._trie: dict = {}
        self._ids: dict[tuple[str, ...], int] = {}  # an answer's tokens -> its id
        self._of: dict[tuple[str, ...], frozenset[int]] = {}  # a question's answers -> their ids
        self._always: set[int] = set()  # ids of answers without a token: in every passage
        self._contained: dict[str, frozenset[int]] = {}  # passage id -> ids of the answers it contains
        for answers in answer_lists:
            self.ids(answers)

    @classmethod
    def of_sets(cls, sets) -> "AnswerIndex":
        """The index of every question of the training sets (``TrainingSet.questions``)."""
        return cls(q.answers for s in sets for q in s.questions if q.answers)

    def __len__(self) -> int:
        return len(self._ids)

    def ids(self, answers: Sequence[str]) -> frozenset[int]:
        """The ids of a question's answers (registered when new: remembered passages are then
        forgotten, as they were not searched for it)."""
        key = tuple(answers)
        got = self._of.get(key)
        if got is None:
            got = self._of[key] = frozenset(self._add(a) for a in answers)
        return got

    def _add(self, answer: str) -> int:
        words = tuple(tokenize(answer))
        got = self._ids.get(words)
        if got is not None:
            return got
        i = self._ids[words] = len(self._ids)
        if not words:
            self._always.add(i)
            return i
        node = self._trie
        for w in words:
            node = node.setdefault(w, {})
        node.setdefault(_END, []).append(i)
        self._contained.clear()  # passages already walked did not look for this answer
        return i

    def contained(self, passage_id: str, text: str) -> frozenset[int]:
        """Ids of the registered answers ``text`` (the passage ``passage_id``'s) contains."""
        got = self._contained.get(passage_id)
        if got is None:
            got = self._contained[passage_id] = self._walk(tokenize(text))
        return got

    def _walk(self, words: list[str]) -> frozenset[int]:
        found: set[int] = set()
        trie, n = self._trie, len(words)
        for start in range(n):
            node = trie.get(words[start])
            j = start + 1
            while node is not None:
                end = node.get(_END)
                if end:
                    found.update(end)
                if j == n:
                    break
                node = node.get(words[j])
                j += 1
        return frozenset(found)

    def has_answer(self, passage_id: str, text: str, answer_ids: frozenset[int]) -> bool:
        """``has_answer(text, answers)`` for the answers of ``answer_ids`` (:meth:`ids`)."""
        if not answer_ids:
            return False
        if self._always and not answer_ids.isdisjoint(self._always):
            return True
        return not answer_ids.isdisjoint(self.contained(passage_id, text))
