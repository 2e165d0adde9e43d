"""Tests of the moving-average (FCCO) estimator, docs/method.md §4: the γ = 1 oracle on gradients, a naive
float64 u-space reference over random sequences, state round trips, log-space stability and errors.

The naive reference keeps u (not log u) in a Python dict and shares no code with ``fcco.py``; it
takes ĝ from the loss modules' log-terms, which test_losses.py checks against naive loops.
"""

from __future__ import annotations

import math

import pytest
import torch

from dpr_xrisk.losses import (
    PAIRWISE,
    CandidateBatch,
    DPMLoss,
    FCCOLoss,
    InfoNCELoss,
    ListwiseLoss,
    dpm_reverse_log_terms,
    scheduled_gamma,
)

BASES = [
    *[DPMLoss(tau=0.3, zeta_scale=a, symmetric=s) for a in (0.0, 1.0) for s in (False, True)],
    *[ListwiseLoss(tau=0.3, zeta_scale=a, pairwise=p, margin=0.7) for a in (0.0, 1.0) for p in sorted(PAIRWISE)],
]


def random_batch(seed: int, B: int = 4, N: int = 10, k_max: int = 3, scale: float = 1.0,
                 dtype=torch.float64) -> CandidateBatch:
    """Scores ~ scale·N(0,1) (requires grad), 1..k_max positives per row (row 0 has k_max), ~20%
    masked candidates, random log_q on negatives."""
    g = torch.Generator().manual_seed(seed)
    scores = (scale * torch.randn(B, N, generator=g, dtype=dtype)).requires_grad_(True)  # (B, N)
    pos = torch.zeros(B, N, dtype=torch.bool)  # (B, N)
    for i in range(B):
        k = k_max if i == 0 else int(torch.randint(1, k_max + 1, (1,), generator=g))
        pos[i, torch.randperm(N, generator=g)[:k]] = True
    neg = (~pos) & (torch.rand(B, N, generator=g) >= 0.2)  # (B, N)
    log_q = torch.where(neg, -3 * torch.rand(B, N, generator=g, dtype=dtype), 0.0)  # (B, N)
    return CandidateBatch(scores, pos, neg, log_q)


def fresh(batch: CandidateBatch) -> CandidateBatch:
    """The same batch with new leaf scores (so .grad starts empty)."""
    return CandidateBatch(batch.scores.detach().clone().requires_grad_(True), batch.pos_mask, batch.neg_mask,
                          batch.log_q)


def grad_of(loss: torch.Tensor, x: torch.Tensor) -> torch.Tensor:
    return torch.autograd.grad(loss, x)[0]


# ---- the method's oracle: γ = 1 is the plain mini-batch gradient -------------------------------------


@pytest.mark.parametrize("base", BASES, ids=repr)
def test_gamma_one_reproduces_plain_gradient(base):
    fcco = FCCOLoss(base, num_questions=6, max_positives=3, gamma=0.5)
    # step 1 at γ = 0.5 leaves a non-trivial state for the γ = 1 steps to ignore
    fcco(random_batch(0), torch.tensor([0, 1, 2, 3]))
    for seed, q_idx in [(1, [2, 3, 4, 5]), (2, [5, 0, 3, 1])]:
        batch = random_batch(seed)
        out = fcco(batch, torch.tensor(q_idx), gamma=1.0)
        b2 = fresh(batch)
        plain = base(b2)
        assert torch.allclose(grad_of(out.surrogate, batch.scores), grad_of(plain, b2.scores), rtol=1e-6, atol=1e-12)
        assert torch.allclose(out.value, plain.detach(), rtol=1e-6, atol=1e-12)
        assert not out.value.requires_grad


@pytest.mark.parametrize("base", [DPMLoss(tau=0.1, symmetric=True), ListwiseLoss(tau=0.1, pairwise="squared_hinge")],
                         ids=repr)
def test_gamma_one_reproduces_plain_gradient_wrt_embeddings(base):
    g = torch.Generator().manual_seed(7)
    B, N, D = 4, 9, 5
    pos = torch.zeros(B, N, dtype=torch.bool)
    pos[0, [0, 4]] = pos[1, 1] = pos[2, [2, 5, 8]] = pos[3, 3] = True
    fcco = FCCOLoss(base, num_questions=4, max_positives=3, gamma=0.3)
    for step in range(3):
        q = torch.randn(B, D, generator=g, dtype=torch.float64, requires_grad=True)  # (B, D)
        p = torch.randn(N, D, generator=g, dtype=torch.float64, requires_grad=True)  # (N, D)
        gamma = 0.3 if step == 0 else 1.0
        out = fcco(CandidateBatch.from_embeddings(q, p, pos), torch.arange(B), gamma=gamma)
        got = torch.autograd.grad(out.surrogate, (q, p))
        want = torch.autograd.grad(base(CandidateBatch.from_embeddings(q, p, pos)), (q, p))
        if step:
            for a, b in zip(got, want):
                assert torch.allclose(a, b, rtol=1e-6, atol=1e-12)


# ---- against a naive float64 u-space reference --------------------------------------------------


def naive_step(u: dict, batch, base, q_idx, slot_ids, gamma):
    """One FCCO step with u in plain floats: returns (value, per-valid-pair u_new list) and updates u
    (duplicates within the batch: the mean of their u_new)."""
    terms = FCCOLoss(base, 1, 8).log_terms(batch)  # only for ĝ and w
    g_hat, w = terms.log_g.detach().exp().tolist(), terms.weight.tolist()
    new_u, value, pending = [], 0.0, {}
    for i in range(len(q_idx)):
        for k in range(terms.valid.shape[1]):
            if not terms.valid[i, k]:
                continue
            key = (q_idx[i], slot_ids[i][k])
            un = (1 - gamma) * u[key] + gamma * g_hat[i][k] if key in u else g_hat[i][k]
            new_u.append(un)
            value += base.tau * w[i][k] * math.log(un)
            pending.setdefault(key, []).append(un)
    for key, vals in pending.items():
        u[key] = sum(vals) / len(vals)
    return value, new_u


@pytest.mark.parametrize("base", [DPMLoss(tau=0.2), DPMLoss(tau=0.2, symmetric=True),
                                  ListwiseLoss(tau=0.2, pairwise="logistic")], ids=repr)
def test_log_space_update_matches_naive_sequence(base):
    rng = torch.Generator().manual_seed(11)
    n_q, n_s = 7, 4
    fcco = FCCOLoss(base, num_questions=n_q, max_positives=n_s, gamma=0.6)
    u: dict = {}
    for step in range(12):
        batch = random_batch(100 + step, B=5, scale=2.0)
        q_idx = torch.randint(0, n_q, (5,), generator=rng)  # (B,) duplicates likely
        K = int(batch.num_positives.max())
        slot_ids = torch.stack([torch.randperm(n_s, generator=rng)[:K] for _ in range(5)])  # (B, K)
        gamma = [0.6, 0.25, 1.0, 0.9][step % 4]
        out = fcco(batch, q_idx, slot_ids, gamma=gamma)
        value, new_u = naive_step(u, batch, base, q_idx.tolist(), slot_ids.tolist(), gamma)
        # naive surrogate: τ Σ w ĝ/u with u a constant, i.e. τ Σ w exp(log ĝ)/u
        b2 = fresh(batch)
        terms = fcco.log_terms(b2)
        surrogate = base.tau * (terms.weight[terms.valid] * terms.log_g[terms.valid].exp()
                                / torch.tensor(new_u, dtype=torch.float64)).sum()
        if getattr(base, "symmetric", False):
            rev = base.tau * dpm_reverse_log_terms(b2, base.tau).mean()
            surrogate, value = (surrogate + rev) / 2, (value + float(rev.detach())) / 2
        assert math.isclose(float(out.value), value, rel_tol=1e-5, abs_tol=1e-6)
        assert torch.allclose(grad_of(out.surrogate, batch.scores), grad_of(surrogate, b2.scores), rtol=1e-5, atol=1e-8)
    want_seen = torch.zeros(n_q, n_s, dtype=torch.bool)
    want_v = torch.zeros(n_q, n_s)
    for (i, k), val in u.items():
        want_seen[i, k], want_v[i, k] = True, math.log(val)
    assert torch.equal(fcco.seen, want_seen)
    assert torch.allclose(fcco.v, want_v, rtol=1e-5, atol=1e-5)
    assert fcco.v.dtype == torch.float32


def test_moving_average_of_a_fixed_g_converges():
    base, gamma = DPMLoss(tau=0.5), 0.3
    fcco = FCCOLoss(base, num_questions=4, max_positives=3, gamma=gamma)
    q_idx = torch.arange(4)
    fcco(random_batch(1, scale=3.0), q_idx)  # a different start: u0 ≠ ĝ
    batch = random_batch(2)
    terms = fcco.log_terms(batch)
    g_hat = terms.log_g.detach()[terms.valid].exp()  # (P,)
    rows = q_idx[:, None].expand_as(terms.valid)[terms.valid]
    cols = torch.arange(terms.valid.shape[1]).expand_as(terms.valid)[terms.valid]
    valid_start = fcco.seen[rows, cols]  # slots that row 0..3 had in the first batch too
    u0 = fcco.v[rows, cols].double().exp()
    for n in range(1, 81):
        fcco(batch, q_idx)
        u = fcco.v[rows, cols].double().exp()
        if n == 5:  # geometric: u_n − ĝ = (1−γ)^n (u0 − ĝ) where a start existed
            want = torch.where(valid_start, g_hat + (1 - gamma) ** n * (u0 - g_hat), g_hat)
            assert torch.allclose(u, want, rtol=1e-5)
    assert bool(valid_start.any()) and not torch.allclose(u0[valid_start], g_hat[valid_start], rtol=1e-2)
    assert torch.allclose(u, g_hat, rtol=1e-5)


def test_duplicate_question_in_one_batch_is_averaged_and_deterministic():
    base = DPMLoss(tau=0.3)
    batch = random_batch(3, k_max=1)
    q_idx = torch.tensor([2, 2, 2, 0])
    results = []
    for _ in range(2):
        fcco = FCCOLoss(base, num_questions=3, max_positives=1, gamma=0.5)
        fcco(random_batch(4, k_max=1), torch.tensor([2, 1, 0, 1]))
        v_old = fcco.v.clone()
        out = fcco(batch, q_idx)
        results.append(fcco.v.clone())
    assert torch.equal(results[0], results[1])
    g_hat = fcco.log_terms(batch).log_g.detach()[:3, 0].exp()  # (3,)
    u_new = 0.5 * v_old[2, 0].double().exp() + 0.5 * g_hat
    assert torch.allclose(fcco.v[2, 0].double().exp(), u_new.mean(), rtol=1e-6)
    # γ = 1 keeps the plain gradient even with duplicates (each occurrence uses its own ĝ)
    out = fcco(batch, q_idx, gamma=1.0)
    assert torch.allclose(grad_of(out.surrogate, batch.scores), grad_of(base(b2 := fresh(batch)), b2.scores))


# ---- state: buffers, round trips, untouched rows -----------------------------------------------


def test_buffers_registered_and_unvisited_rows_untouched():
    fcco = FCCOLoss(ListwiseLoss(tau=0.2), num_questions=8, max_positives=4)
    assert {n for n, _ in fcco.named_buffers()} == {"v", "seen"} == set(fcco.state_dict())
    batch = random_batch(5)  # row 0 has 3 positives, others 1..3
    fcco(batch, torch.tensor([6, 1, 3, 4]))
    want = torch.zeros(8, 4, dtype=torch.bool)
    for i, q in enumerate([6, 1, 3, 4]):
        want[q, : int(batch.num_positives[i])] = True
    assert torch.equal(fcco.seen, want)
    assert bool((fcco.v[~want] == 0).all()) and bool((fcco.v[want] != 0).all())
    assert fcco.stats()["seen_fraction"] == pytest.approx(int(want.sum()) / 32)
    assert fcco.to("meta").v.device.type == "meta"  # buffers move with .to()


def test_update_false_leaves_state_untouched():
    fcco = FCCOLoss(DPMLoss(tau=0.2), num_questions=5, max_positives=3, gamma=0.4)
    fcco(random_batch(0), torch.tensor([0, 1, 2, 3]))
    before = {k: v.clone() for k, v in fcco.state_dict().items()}
    batch = random_batch(1)
    dry = fcco(batch, torch.tensor([1, 2, 3, 4]), update=False)
    assert all(torch.equal(before[k], v) for k, v in fcco.state_dict().items())
    wet = fcco(b2 := fresh(batch), torch.tensor([1, 2, 3, 4]))
    assert torch.equal(dry.value, wet.value)
    assert torch.equal(grad_of(dry.surrogate, batch.scores), grad_of(wet.surrogate, b2.scores))
    assert not torch.equal(before["v"], fcco.v)


def test_state_dict_round_trip(tmp_path):
    from safetensors.torch import load_file, save_file

    def make():
        return FCCOLoss(ListwiseLoss(tau=0.2, pairwise="squared_hinge"), num_questions=6, max_positives=3, gamma=0.5)

    a = make()
    for s in range(4):
        a(random_batch(s), torch.tensor([s % 6, (s + 1) % 6, (s + 3) % 6, 5]))
    save_file({k: v.contiguous() for k, v in a.state_dict().items()}, str(tmp_path / "loss.safetensors"))
    b = make()
    b.load_state_dict(load_file(str(tmp_path / "loss.safetensors")))
    assert b.v.dtype == torch.float32 and b.seen.dtype == torch.bool
    batch = random_batch(9)
    q_idx = torch.tensor([0, 2, 4, 5])
    out_a, out_b = a(batch, q_idx), b(b2 := fresh(batch), q_idx)
    assert torch.equal(out_a.value, out_b.value)
    assert torch.equal(grad_of(out_a.surrogate, batch.scores), grad_of(out_b.surrogate, b2.scores))
    assert torch.equal(a.v, b.v) and torch.equal(a.seen, b.seen)
    # and a fresh module (no state) would differ: the test can fail
    assert not torch.equal(make()(fresh(batch), q_idx).value, out_a.value)


def test_symmetric_reverse_half_stays_mini_batch():
    sym, fwd = DPMLoss(tau=0.2, symmetric=True), DPMLoss(tau=0.2)
    f_sym = FCCOLoss(sym, num_questions=5, max_positives=3, gamma=0.4)
    f_fwd = FCCOLoss(fwd, num_questions=5, max_positives=3, gamma=0.4)
    for s in range(3):
        batch = random_batch(20 + s)
        q_idx = torch.tensor([s, s + 1, 4, 0])
        o_sym = f_sym(batch, q_idx)
        o_fwd = f_fwd(b2 := fresh(batch), q_idx)
        rev = 0.2 * dpm_reverse_log_terms(b3 := fresh(batch), 0.2).mean()
        want = (grad_of(o_fwd.surrogate, b2.scores) + grad_of(rev, b3.scores)) / 2
        assert torch.allclose(grad_of(o_sym.surrogate, batch.scores), want, rtol=1e-6)
        assert torch.allclose(o_sym.value, (o_fwd.value + rev.detach()) / 2)
    assert torch.equal(f_sym.v, f_fwd.v)  # the reverse half does not touch the state


# ---- numerics ------------------------------------------------------------------------------------


@pytest.mark.parametrize("base", [DPMLoss(tau=0.01), ListwiseLoss(tau=0.01, pairwise="squared_hinge")], ids=repr)
def test_log_space_survives_small_tau_and_shifting_scores(base):
    """LibAUC's bug: a moving average stabilised by one batch's max, never rescaled. Here log ĝ
    jumps by thousands between steps (τ = 0.01, score spreads of 50 then 0.5) and shifts by ±50."""
    fcco = FCCOLoss(base, num_questions=4, max_positives=3, gamma=0.5)
    q_idx = torch.arange(4)
    logs = []
    for scale, shift in [(50.0, 50.0), (0.5, -50.0), (50.0, -50.0), (1.0, 0.0)]:
        b = random_batch(31, scale=scale, dtype=torch.float32)
        batch = CandidateBatch((b.scores.detach() + shift).requires_grad_(True), b.pos_mask, b.neg_mask, b.log_q)
        old_v, old_seen = fcco.v.clone(), fcco.seen.clone()
        out = fcco(batch, q_idx)
        grad = grad_of(out.surrogate, batch.scores)
        assert torch.isfinite(out.value) and torch.isfinite(grad).all() and torch.isfinite(fcco.v).all()
        terms = fcco.log_terms(batch)
        for i, k in terms.valid.nonzero().tolist():  # log-space reference with Python math
            lg = float(terms.log_g[i, k].detach())
            want = lg
            if old_seen[i, k]:
                a, c = math.log(0.5) + float(old_v[i, k]), math.log(0.5) + lg
                want = max(a, c) + math.log1p(math.exp(-abs(a - c)))
            assert math.isclose(float(fcco.v[i, k]), want, rel_tol=1e-5, abs_tol=1e-3)
        logs.append(float(fcco.v.abs().max()))
    assert max(logs) > 1000  # the test really exercised huge log ĝ


def test_cosine_scores_small_tau_and_bf16_autocast():
    g = torch.Generator().manual_seed(3)
    q = torch.nn.functional.normalize(torch.randn(6, 16, generator=g), dim=1).requires_grad_(True)
    p = torch.nn.functional.normalize(torch.randn(12, 16, generator=g), dim=1).requires_grad_(True)
    pos = torch.zeros(6, 12, dtype=torch.bool)
    pos[torch.arange(6), 2 * torch.arange(6)] = True
    fcco = FCCOLoss(DPMLoss(tau=0.01, symmetric=True), num_questions=6, max_positives=1)
    for autocast in (False, True):
        with torch.autocast("cpu", dtype=torch.bfloat16, enabled=autocast):
            batch = CandidateBatch.from_embeddings(q, p, pos)
            out = fcco(batch, torch.arange(6))
        assert batch.scores.dtype == (torch.bfloat16 if autocast else torch.float32)
        assert out.surrogate.dtype == torch.float32 and fcco.v.dtype == torch.float32
        out.surrogate.backward()
        assert torch.isfinite(out.value) and torch.isfinite(q.grad).all() and torch.isfinite(p.grad).all()


# ---- schedule, stats, errors ---------------------------------------------------------------------


def test_gamma_schedule():
    assert scheduled_gamma(5, 0.9) == 0.9
    assert scheduled_gamma(3, 0.2, "constant", warmup_steps=4) == 1.0
    assert scheduled_gamma(4, 0.2, "constant", warmup_steps=4) == 0.2
    cos = [scheduled_gamma(t, 0.2, "cosine", warmup_steps=2, decay_steps=10) for t in range(15)]
    assert cos[:3] == [1.0, 1.0, 1.0] and cos[12:] == [0.2, 0.2, 0.2]
    assert cos[7] == pytest.approx(0.6) and all(a >= b for a, b in zip(cos, cos[1:]))
    fcco = FCCOLoss(DPMLoss(), 3, 1, gamma=0.2, gamma_schedule="cosine", gamma_decay_steps=10)
    assert fcco.gamma_at(5) == pytest.approx(0.6)
    batch = random_batch(0, B=3, k_max=1)
    fcco(batch, torch.arange(3), step=0)  # first visit
    with pytest.raises(ValueError, match="step"):
        fcco(batch, torch.arange(3))  # a scheduled γ must be given


def test_stats():
    fcco = FCCOLoss(DPMLoss(tau=0.2), num_questions=4, max_positives=3, gamma=0.5)
    assert math.isnan(fcco.stats()["weight_mean"]) and fcco.stats()["seen_fraction"] == 0
    fcco(random_batch(0), torch.arange(4), gamma=1.0)
    st = fcco.stats()
    assert st["weight_mean"] == pytest.approx(1.0) and st["weight_std"] == pytest.approx(0.0, abs=1e-12)
    assert st["v_mean"] == pytest.approx(float(fcco.v[fcco.seen].mean()))
    fcco(random_batch(1), torch.arange(4))
    assert fcco.stats()["weight_std"] > 0


def test_bad_inputs_raise_clear_errors():
    fcco = FCCOLoss(DPMLoss(), num_questions=4, max_positives=2)
    batch = random_batch(0, k_max=2)
    for bad in ([0, 1, 2, 4], [-1, 0, 1, 2]):
        with pytest.raises(ValueError, match="question_idx out of range"):
            fcco(batch, torch.tensor(bad))
    with pytest.raises(ValueError, match="shape"):
        fcco(batch, torch.tensor([0, 1, 2]))
    with pytest.raises(ValueError, match="integer"):
        fcco(batch, torch.tensor([0.0, 1.0, 2.0, 3.0]))
    with pytest.raises(ValueError, match="slot_ids out of range"):
        fcco(batch, torch.arange(4), torch.full((4, 2), 2))
    with pytest.raises(ValueError, match="max_positives"):
        fcco(random_batch(0, k_max=3), torch.arange(4))
    for g in (0.0, -0.1, 1.5, float("nan")):
        with pytest.raises(ValueError, match="gamma"):
            FCCOLoss(DPMLoss(), 4, 2, gamma=g)
        with pytest.raises(ValueError, match="gamma"):
            fcco(batch, torch.arange(4), gamma=g)
    assert not bool(fcco.seen.any())  # nothing was written by a rejected call
    with pytest.raises(ValueError, match="gamma schedule"):
        FCCOLoss(DPMLoss(), 4, 2, gamma_schedule="linear")
    with pytest.raises(ValueError, match="gamma_decay_steps"):
        FCCOLoss(DPMLoss(), 4, 2, gamma_schedule="cosine")
    with pytest.raises(TypeError, match="DPMLoss or a ListwiseLoss"):
        FCCOLoss(InfoNCELoss(), 4, 2)


def test_probe_exact_loss_matches_a_naive_loop(tiny_model_dir):
    """The probe's brute-force loss, with the negatives training may sample (positives by id and
    text, and answer-bearing passages, excluded), against a plain float64 Python loop; and its
    τ·v and gap from the estimator rows that were seen."""
    import numpy as np

    from conftest import SAMPLE
    from dpr_xrisk.evaluation.answers import has_answer
    from dpr_xrisk.retrieval.encoder import DualEncoder
    from dpr_xrisk.retrieval.search import load_passage_texts
    from dpr_xrisk.train.config import TrainConfig
    from dpr_xrisk.train.data import PassageStore, load_training_set, text_key
    from dpr_xrisk.train.trainer import build_loss, probe_estimator

    train_file, corpus = str(SAMPLE / "biencoder-train.json"), str(SAMPLE / "passages.tsv")
    enc = DualEncoder.load(tiny_model_dir, pooling="mean", normalize=True, passage_max_length=64)
    store = PassageStore()
    s = load_training_set(train_file, store)
    tau = 0.05
    passages = load_passage_texts(corpus)
    keys = list(passages)
    p = enc.encode_passages([passages[k][0] for k in keys], [passages[k][1] for k in keys])
    q = enc.encode_queries([x.text for x in s.questions[:6]])
    excluded_answers = 0
    for filter_answers in (True, False):
        cfg = TrainConfig(train=(train_file,), corpus=corpus, estimator="fcco", loss="dpm", tau=tau,
                          filter_answers=filter_answers)
        loss_fn = build_loss(cfg, tau, [s], 10, 10)
        loss_fn.seen[[0, 2, 4], 0] = True
        loss_fn.v[[0, 2, 4], 0] = torch.tensor([1.0, 2.0, 3.0])
        out = probe_estimator(enc, loss_fn, cfg, [s], store, [0], [(0, r) for r in range(6)], passages)
        exact = []
        for r in range(6):
            question = s.questions[r]
            s_k = float(np.float64(q[r]) @ np.float64(p[keys.index(question.positives[0])]))
            pos_tk = {text_key(*passages[x]) for x in question.positives}
            terms = [0.0]
            for j, x in enumerate(keys):
                if x in question.positives or text_key(*passages[x]) in pos_tk:
                    continue
                if filter_answers and has_answer(passages[x][1], question.answers):
                    excluded_answers += 1
                    continue
                terms.append((float(np.float64(q[r]) @ np.float64(p[j])) - s_k) / tau)
            m = max(terms)
            exact.append(tau * (m + math.log(sum(math.exp(t - m) for t in terms))))
        assert out["probe_exact_loss"] == pytest.approx(sum(exact) / 6, rel=1e-5)
        assert out["probe_seen"] == 3
        assert out["probe_tau_v"] == pytest.approx(tau * 2.0)
        assert out["probe_gap"] == pytest.approx(sum(tau * v - exact[i] for i, v in ((0, 1), (2, 2), (4, 3))) / 3,
                                                 rel=1e-5)
    assert excluded_answers > 0  # the answer filter really removed candidates
