"""Reference tests for the losses (docs/method.md §1–2): naive float64 loops, gradcheck and the method's oracles.

The naive references below loop over questions i, positives k and candidates j with ``math``
on Python floats; they share no code with ``dpr_xrisk.losses``.
"""

from __future__ import annotations

import math

import pytest
import torch
import torch.nn.functional as F

from dpr_xrisk.errors import InputError
from dpr_xrisk.losses import (
    LOSSES,
    PAIRWISE,
    CandidateBatch,
    DPMLoss,
    InfoNCELoss,
    ListwiseLoss,
    dpm_log_terms,
    dpm_reverse_log_terms,
    listwise_log_terms,
    make_loss,
)

MARGIN = 0.7


# ---- random batches ------------------------------------------------------------------------


def random_batch(seed: int, B: int = 4, N: int = 11, k_max: int = 3, p_masked: float = 0.2,
                 dtype=torch.float64, requires_grad: bool = False, lone_last: bool = False) -> CandidateBatch:
    """Scores ~ N(0,1), 1..k_max positives per row (row 0 has k_max), some masked candidates,
    random log_q on negatives and an illegal value (+7) where log_q must not be read.
    lone_last: the last question has no negative at all."""
    g = torch.Generator().manual_seed(seed)
    scores = torch.randn(B, N, generator=g, dtype=dtype)  # (B, N)
    pos = torch.zeros(B, N, dtype=torch.bool)  # (B, N)
    for i in range(B):
        k = k_max if i == 0 else int(torch.randint(1, k_max + 1, (1,), generator=g))
        pos[i, torch.randperm(N, generator=g)[:k]] = True
    neg = (~pos) & (torch.rand(B, N, generator=g) >= p_masked)  # (B, N)
    if lone_last:
        neg[-1] = False
    log_q = -3 * torch.rand(B, N, generator=g, dtype=dtype)  # (B, N)
    log_q = torch.where(neg, log_q, torch.full_like(log_q, 7.0))
    if requires_grad:
        scores.requires_grad_(True)
        log_q.requires_grad_(True)
    return CandidateBatch(scores, pos, neg, log_q)


def as_lists(batch: CandidateBatch):
    return batch.scores.tolist(), batch.pos_mask.tolist(), batch.neg_mask.tolist(), batch.log_q.tolist()


# ---- naive references ----------------------------------------------------------------------


def naive_dpm_pairs(batch, tau, alpha):
    S, P, M, LQ = as_lists(batch)
    B, N = len(S), len(S[0])
    out = {}
    for i in range(B):
        for k in range(N):
            if not P[i][k]:
                continue
            total = math.exp(0.0)  # the positive k itself, ζ = 0
            for j in range(N):
                if M[i][j]:
                    zeta = -alpha * tau * LQ[i][j]
                    total += math.exp((S[i][j] + zeta - S[i][k]) / tau)
            out[(i, k)] = math.log(total)
    return out


def naive_reverse_pairs(batch, tau):
    S, P, M, _ = as_lists(batch)
    B, N = len(S), len(S[0])
    out = {}
    for i in range(B):
        for k in range(N):
            if not P[i][k]:
                continue
            total = 1.0
            for i2 in range(B):
                if M[i2][k]:
                    total += math.exp((S[i2][k] - S[i][k]) / tau)
            out[(i, k)] = math.log(total)
    return out


def naive_dpm(batch, tau, alpha, symmetric=False):
    fwd = naive_dpm_pairs(batch, tau, alpha)
    loss = tau * sum(fwd.values()) / len(fwd)
    if symmetric:
        bwd = naive_reverse_pairs(batch, tau)
        loss = (loss + tau * sum(bwd.values()) / len(bwd)) / 2
    return loss


def naive_infonce(batch, tau, symmetric=False):
    S, P, M, _ = as_lists(batch)
    B, N = len(S), len(S[0])
    fwd, bwd = [], []
    for i in range(B):
        for k in range(N):
            if not P[i][k]:
                continue
            num = math.exp(S[i][k] / tau)
            den = num + sum(math.exp(S[i][j] / tau) for j in range(N) if M[i][j])
            fwd.append(-math.log(num / den))
            den_t = num + sum(math.exp(S[i2][k] / tau) for i2 in range(B) if M[i2][k])
            bwd.append(-math.log(num / den_t))
    loss = sum(fwd) / len(fwd)
    return (loss + sum(bwd) / len(bwd)) / 2 if symmetric else loss


def naive_ell(name, d):
    if name == "linear":
        return d
    if name == "squared_hinge":
        return max(0.0, d + MARGIN) ** 2
    if name == "logistic":
        return math.log(1.0 + math.exp(d))
    raise AssertionError(name)


def naive_listwise_pairs(batch, tau, alpha, pairwise):
    S, P, M, LQ = as_lists(batch)
    B, N = len(S), len(S[0])
    out = {}
    for i in range(B):
        C = [j for j in range(N) if P[i][j] or M[i][j]]
        for k in range(N):
            if not P[i][k]:
                continue
            total = 0.0
            for j in C:
                zeta = 0.0 if P[i][j] else -alpha * tau * LQ[i][j]
                total += math.exp((naive_ell(pairwise, S[i][j] - S[i][k]) + zeta) / tau)
            out[(i, k)] = math.log(total / len(C))
    return out


def naive_listwise(batch, tau, alpha, pairwise):
    pairs = naive_listwise_pairs(batch, tau, alpha, pairwise)
    B = batch.scores.shape[0]
    per_q = []
    for i in range(B):
        terms = [v for (r, _), v in pairs.items() if r == i]
        per_q.append(tau * sum(terms) / len(terms))
    return sum(per_q) / B


def close(a, b):
    return torch.allclose(torch.as_tensor(a, dtype=torch.float64), torch.as_tensor(b, dtype=torch.float64),
                          rtol=1e-9, atol=1e-10)


# ---- against the naive loops -----------------------------------------------------------------


@pytest.mark.parametrize("seed", [0, 1, 2])
@pytest.mark.parametrize("tau", [0.1, 1.0])
@pytest.mark.parametrize("alpha", [0.0, 0.5, 1.0])
@pytest.mark.parametrize("symmetric", [False, True])
def test_dpm_matches_naive(seed, tau, alpha, symmetric):
    batch = random_batch(seed, lone_last=seed == 1)
    got = DPMLoss(tau=tau, zeta_scale=alpha, symmetric=symmetric)(batch)
    assert close(got, naive_dpm(batch, tau, alpha, symmetric))


@pytest.mark.parametrize("seed", [0, 1, 2])
@pytest.mark.parametrize("tau", [0.1, 1.0])
@pytest.mark.parametrize("alpha", [0.0, 0.5, 1.0])
@pytest.mark.parametrize("pairwise", sorted(PAIRWISE))
def test_listwise_matches_naive(seed, tau, alpha, pairwise):
    batch = random_batch(seed, lone_last=seed == 1)
    got = ListwiseLoss(tau=tau, zeta_scale=alpha, pairwise=pairwise, margin=MARGIN)(batch)
    assert close(got, naive_listwise(batch, tau, alpha, pairwise))


@pytest.mark.parametrize("seed", [0, 1])
@pytest.mark.parametrize("tau", [0.1, 1.0])
@pytest.mark.parametrize("symmetric", [False, True])
def test_infonce_matches_naive_and_dpm(seed, tau, symmetric):
    batch = random_batch(seed, lone_last=seed == 1)
    got = InfoNCELoss(tau=tau, symmetric=symmetric)(batch)
    assert close(got, naive_infonce(batch, tau, symmetric))
    assert close(got, DPMLoss(tau=tau, zeta_scale=0.0, symmetric=symmetric)(batch) / tau)


def check_terms(terms, naive_pairs, batch):
    """Slots hold the naive per-pair log ĝ, in column order, with padding zeroed."""
    P = batch.pos_mask
    for i in range(P.shape[0]):
        cols = P[i].nonzero().flatten().tolist()
        assert terms.cols[i, : len(cols)].tolist() == cols
        assert terms.valid[i].tolist() == [k < len(cols) for k in range(terms.valid.shape[1])]
        for slot, k in enumerate(cols):
            assert close(terms.log_g[i, slot], naive_pairs[(i, k)])
    assert bool((terms.log_g[~terms.valid] == 0).all())
    assert bool((terms.weight[~terms.valid] == 0).all())
    assert close(terms.weight.sum(), 1.0)


def test_per_pair_terms():
    batch = random_batch(3, B=5, k_max=3)
    tau, alpha = 0.2, 0.5
    dpm = dpm_log_terms(batch, tau, alpha)
    check_terms(dpm, naive_dpm_pairs(batch, tau, alpha), batch)
    assert torch.allclose(dpm.weight[dpm.valid], torch.full_like(dpm.weight[dpm.valid], 1 / int(dpm.valid.sum())))
    check_terms(dpm_reverse_log_terms(batch, tau), naive_reverse_pairs(batch, tau), batch)
    lw = listwise_log_terms(batch, tau, alpha, "logistic", MARGIN)
    check_terms(lw, naive_listwise_pairs(batch, tau, alpha, "logistic"), batch)
    k_i = batch.pos_mask.sum(1, keepdim=True).double()  # (B, 1)
    assert torch.allclose(lw.weight, lw.valid.double() / (k_i * 5))
    assert close(tau * lw.mean(), ListwiseLoss(tau, alpha, "logistic", MARGIN)(batch))
    assert close(tau * dpm.mean(), DPMLoss(tau, alpha)(batch))


# ---- gradients -------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "loss",
    [
        DPMLoss(tau=0.3, zeta_scale=1.0),
        DPMLoss(tau=0.3, zeta_scale=0.5, symmetric=True),
        InfoNCELoss(tau=0.5, symmetric=True),
        ListwiseLoss(tau=0.3, pairwise="linear"),
        ListwiseLoss(tau=0.3, zeta_scale=0.5, pairwise="squared_hinge", margin=MARGIN),
        ListwiseLoss(tau=0.3, pairwise="logistic"),
    ],
    ids=repr,
)
def test_gradcheck(loss):
    base = random_batch(5, B=3, N=7, k_max=2)

    def f(scores, log_q):
        return loss(CandidateBatch(scores, base.pos_mask, base.neg_mask, log_q))

    inputs = (base.scores.clone().requires_grad_(True), base.log_q.clone().requires_grad_(True))
    assert torch.autograd.gradcheck(f, inputs)


@pytest.mark.parametrize(
    "loss",
    [DPMLoss(tau=0.1), DPMLoss(tau=0.1, symmetric=True), InfoNCELoss(symmetric=True),
     *[ListwiseLoss(tau=0.1, pairwise=p) for p in sorted(PAIRWISE)]],
    ids=repr,
)
def test_masked_candidates_get_exactly_zero_gradient(loss):
    batch = random_batch(6, p_masked=0.4, requires_grad=True)
    log_q = batch.log_q.detach().clone()
    log_q[~batch.neg_mask] = float("nan")  # never read
    log_q.requires_grad_(True)
    batch = CandidateBatch(batch.scores, batch.pos_mask, batch.neg_mask, log_q)
    loss(batch).backward()
    masked = ~(batch.pos_mask | batch.neg_mask)  # (B, N)
    assert masked.any()
    assert bool((batch.scores.grad[masked] == 0).all())
    assert torch.isfinite(batch.scores.grad).all()
    if log_q.grad is not None:  # InfoNCE never reads log_q
        assert bool((log_q.grad[~batch.neg_mask] == 0).all())
        assert torch.isfinite(log_q.grad).all()


# ---- method oracles ----------------------------------------------------------------------------


def one_positive_batch(seed, B=6, N=10, masked=False):
    g = torch.Generator().manual_seed(seed)
    scores = torch.randn(B, N, generator=g, dtype=torch.float64)  # (B, N)
    target = torch.randint(0, N, (B,), generator=g)  # (B,)
    pos = F.one_hot(target, N).bool()  # (B, N)
    neg = ~pos
    if masked:
        neg &= torch.rand(B, N, generator=g) > 0.3
    return scores, target, pos, neg


@pytest.mark.parametrize("masked", [False, True])
def test_dpm_oracle_cross_entropy(masked):
    tau = 0.2
    scores, target, pos, neg = one_positive_batch(7, masked=masked)
    logits = torch.where(pos | neg, scores / tau, -math.inf)  # (B, N)
    expected = tau * F.cross_entropy(logits, target)
    batch = CandidateBatch(scores, pos, neg)  # log_q None: q ≡ 1
    assert close(DPMLoss(tau=tau)(batch), expected)
    assert close(DPMLoss(tau=tau)(CandidateBatch(scores, pos, neg, torch.zeros_like(scores))), expected)
    assert close(InfoNCELoss(tau=1.0)(batch), F.cross_entropy(torch.where(pos | neg, scores, -math.inf), target))


@pytest.mark.parametrize("masked", [False, True])
def test_listwise_oracle_cross_entropy(masked):
    tau = 0.2
    scores, target, pos, neg = one_positive_batch(8, masked=masked)
    logits = torch.where(pos | neg, scores / tau, -math.inf)  # (B, N)
    size = (pos | neg).sum(1).double()  # (B,) |C_i|
    expected = (tau * F.cross_entropy(logits, target, reduction="none") - tau * size.log()).mean()
    assert close(ListwiseLoss(tau=tau, pairwise="linear")(CandidateBatch(scores, pos, neg)), expected)


def test_listwise_several_positives_is_mean_of_single_positive_lists():
    """Each positive k scored against a list where the other positives stay (as certain candidates)."""
    batch = random_batch(9, B=4, k_max=3)
    tau, alpha = 0.3, 1.0
    loss = ListwiseLoss(tau=tau, zeta_scale=alpha, pairwise="squared_hinge", margin=MARGIN)
    per_q = []
    for i in range(4):
        s, p, m, lq = (t[i : i + 1] for t in (batch.scores, batch.pos_mask, batch.neg_mask, batch.log_q))
        terms = []
        for k in p[0].nonzero().flatten().tolist():
            p_k = torch.zeros_like(p)
            p_k[0, k] = True
            others = p & ~p_k  # other positives join the negatives with q = 1
            terms.append(loss(CandidateBatch(s, p_k, m | others, torch.where(others, 0.0, lq))))
        per_q.append(sum(terms) / len(terms))
    assert close(loss(batch), sum(per_q) / 4)


@pytest.mark.parametrize("make", [lambda a: DPMLoss(0.2, a), lambda a: DPMLoss(0.2, a, symmetric=True),
                                  lambda a: ListwiseLoss(0.2, a, "logistic")])
def test_zeta_scale_zero_removes_weights(make):
    batch = random_batch(10)
    certain = CandidateBatch(batch.scores, batch.pos_mask, batch.neg_mask, torch.zeros_like(batch.log_q))
    assert close(make(0.0)(batch), make(1.0)(certain))
    assert not close(make(1.0)(batch), make(1.0)(certain))  # the weights do matter when on


# ---- numerical stability ---------------------------------------------------------------------


ALL_LOSSES = [
    lambda tau: DPMLoss(tau),
    lambda tau: DPMLoss(tau, symmetric=True),
    lambda tau: InfoNCELoss(tau, symmetric=True),
    *[lambda tau, p=p: ListwiseLoss(tau, pairwise=p) for p in sorted(PAIRWISE)],
]


def embedding_batch(norm: float, dtype=torch.float32, B=8, D=16, h=3):
    """B questions, each with its positive and h hard negatives; row 0 has every negative masked."""
    g = torch.Generator().manual_seed(11)
    q = F.normalize(torch.randn(B, D, generator=g), dim=-1).mul(norm).to(dtype).requires_grad_(True)  # (B, D)
    p = F.normalize(torch.randn(B * (1 + h), D, generator=g), dim=-1).mul(norm).to(dtype)  # (N, D)
    p = p.requires_grad_(True)
    pos = torch.zeros(B, B * (1 + h), dtype=torch.bool)  # (B, N)
    pos[torch.arange(B), torch.arange(B) * (1 + h)] = True
    neg = ~pos
    neg[0] = False
    log_q = torch.log(torch.rand(B, B * (1 + h), generator=g).clamp_min(1e-3)).to(dtype)  # (B, N)
    return q, p, CandidateBatch.from_embeddings(q, p, pos, neg, log_q)


@pytest.mark.parametrize("make", ALL_LOSSES)
@pytest.mark.parametrize("norm,tau", [(1.0, 0.01), (10.0, 1.0), (10.0, 0.01)])
def test_finite_for_small_tau_and_large_scores(make, norm, tau):
    q, p, batch = embedding_batch(norm)
    assert batch.scores.abs().max() > 0.5 * norm**2  # cosine, or dot products of magnitude ~100
    loss = make(tau)(batch)
    loss.backward()
    assert loss.dtype == torch.float32 and torch.isfinite(loss)
    assert torch.isfinite(q.grad).all() and torch.isfinite(p.grad).all()
    assert q.grad.abs().sum() > 0


@pytest.mark.parametrize("make", ALL_LOSSES)
def test_bf16_autocast_upcasts(make):
    q, p, _ = embedding_batch(1.0)
    pos = torch.zeros(q.shape[0], p.shape[0], dtype=torch.bool)
    pos[torch.arange(q.shape[0]), torch.arange(q.shape[0]) * 4] = True
    with torch.autocast("cpu", dtype=torch.bfloat16):
        batch = CandidateBatch.from_embeddings(q, p, pos)
        assert batch.scores.dtype == torch.bfloat16
        loss = make(0.05)(batch)
    assert loss.dtype == torch.float32 and torch.isfinite(loss)
    loss.backward()
    assert torch.isfinite(q.grad.float()).all()


# ---- errors ------------------------------------------------------------------------------------


def test_bad_layout_raises_value_error():
    s = torch.randn(2, 3)
    pos = torch.tensor([[True, False, False], [False, True, False]])
    neg = ~pos
    CandidateBatch(s, pos, neg)  # fine
    with pytest.raises(ValueError, match="shape"):
        CandidateBatch(s, pos[:, :2], neg)
    with pytest.raises(ValueError, match="shape"):
        CandidateBatch(s, pos, neg, torch.zeros(3, 2))
    with pytest.raises(ValueError, match="positive"):
        CandidateBatch(s, torch.tensor([[True, False, False], [False, False, False]]), neg)
    with pytest.raises(ValueError, match="overlap"):
        CandidateBatch(s, pos, neg | pos)
    with pytest.raises(ValueError, match="log_q"):
        CandidateBatch(s, pos, neg, torch.full((2, 3), 0.5))
    with pytest.raises(ValueError, match="bool"):
        CandidateBatch(s, pos.long(), neg)
    with pytest.raises(ValueError, match=r"\(B, N\)"):
        CandidateBatch(s[0], pos[0], neg[0])
    # log_q > 0 where it is not read (positives, masked) is fine
    CandidateBatch(s, pos, neg & ~pos, torch.where(pos, 3.0, -1.0))


def test_unknown_names_and_bad_tau():
    with pytest.raises(InputError, match="dpm, infonce, listwise"):
        make_loss("nce")
    with pytest.raises(InputError, match="linear, logistic, squared_hinge"):
        ListwiseLoss(pairwise="hinge")
    for make in (DPMLoss, InfoNCELoss, ListwiseLoss):
        for tau in (0.0, -0.1, float("nan")):
            with pytest.raises(ValueError, match="tau"):
                make(tau=tau)
    with pytest.raises(ValueError, match="tau"):
        dpm_log_terms(random_batch(0), tau=0.0)
    with pytest.raises(ValueError, match="zeta_scale"):
        DPMLoss(zeta_scale=-1.0)


def test_make_loss_registry():
    assert set(LOSSES) == {"dpm", "listwise", "infonce"}
    loss = make_loss("listwise", tau=0.1, pairwise="logistic")
    assert isinstance(loss, ListwiseLoss) and loss.tau == 0.1 and loss.pairwise == "logistic"
    assert isinstance(make_loss("dpm", symmetric=True), DPMLoss)
    assert isinstance(make_loss("infonce"), InfoNCELoss)


# ---- self-normalised importance weights (zeta_normalize) --------------------------------------


def naive_snis_dpm(batch, tau, alpha):
    """Per (i, k): τ·log(e^{s_k/τ} + n_i · Σ_j w_j e^{s_j/τ} / Σ_j w_j) − s_k, w_j = q_j^{−α},
    written directly as the self-normalised estimate (no ζ), mean over pairs."""
    S, P, M, LQ = as_lists(batch)
    B, N = len(S), len(S[0])
    vals = []
    for i in range(B):
        negs = [j for j in range(N) if M[i][j]]
        w = [math.exp(-alpha * LQ[i][j]) for j in negs]
        for k in range(N):
            if not P[i][k]:
                continue
            z = math.exp(S[i][k] / tau)
            if negs:
                z += len(negs) * sum(wj * math.exp(S[i][j] / tau) for wj, j in zip(w, negs)) / sum(w)
            vals.append(tau * math.log(z) - S[i][k])
    return sum(vals) / len(vals)


@pytest.mark.parametrize("seed", [0, 1, 2])
@pytest.mark.parametrize("tau", [0.1, 1.0])
@pytest.mark.parametrize("alpha", [0.5, 1.0])
def test_dpm_self_normalised_weights_match_naive(seed, tau, alpha):
    batch = random_batch(seed, lone_last=seed == 2)
    got = DPMLoss(tau=tau, zeta_scale=alpha, zeta_normalize=True)(batch)
    assert close(got, naive_snis_dpm(batch, tau, alpha))


def test_self_normalised_weights_keep_ratios_and_drop_scale():
    batch = random_batch(3)
    loss = DPMLoss(tau=0.1, zeta_normalize=True)
    # multiplying every q by one constant (e.g. another corpus size N) changes nothing
    shifted = CandidateBatch(batch.scores, batch.pos_mask, batch.neg_mask, batch.log_q - 2.5)
    assert close(loss(batch), loss(shifted))
    # equal q on every negative is exactly the unweighted loss (ζ = 0)
    flat = CandidateBatch(batch.scores, batch.pos_mask, batch.neg_mask, torch.full_like(batch.log_q, -4.0))
    assert close(loss(flat), DPMLoss(tau=0.1, zeta_scale=0.0)(batch))
    # ... but unequal q still matter
    assert not close(loss(batch), DPMLoss(tau=0.1, zeta_scale=0.0)(batch))


def test_listwise_self_normalised_equals_unweighted_for_equal_q():
    batch = random_batch(4)
    flat = CandidateBatch(batch.scores, batch.pos_mask, batch.neg_mask, torch.full_like(batch.log_q, -6.0))
    for pw in PAIRWISE:
        a = ListwiseLoss(tau=0.2, pairwise=pw, margin=MARGIN, zeta_normalize=True)(flat)
        b = ListwiseLoss(tau=0.2, pairwise=pw, margin=MARGIN, zeta_scale=0.0)(batch)
        assert close(a, b)


def test_self_normalised_gradcheck():
    batch = random_batch(5, B=3, N=6, requires_grad=True)
    torch.autograd.gradcheck(
        lambda s, lq: DPMLoss(tau=0.3, zeta_normalize=True)(CandidateBatch(s, batch.pos_mask, batch.neg_mask, lq)),
        (batch.scores, batch.log_q))
