"""Throughput against sentence-transformers, and the deep fuzz run: the experiments
``encode``, ``train-speed``, ``gpu`` and ``fuzz`` (eval/experiments/).

- ``encode``: passages/s of ``DualEncoder.encode_passages`` (the path of ``dpr-xrisk encode``) vs
  ``SentenceTransformer.encode`` on the same model (MiniLM), max length 256, batch 64, first N
  passages of wikipedia-100k, fp32 and bf16 autocast; a warm-up call each, then repetitions
  interleaved (the order alternating); every wall and CPU time is recorded.
- ``train-speed`` / ``gpu``: questions/s of one optimiser step, our InfoNCE step (shared tower:
  the MNRL loss) and its cached-gradient version vs sentence-transformers'
  MultipleNegativesRankingLoss and CachedMultipleNegativesRankingLoss, on synthetic texts; ``gpu``
  also the encode comparison, on CUDA (a batch that does not fit is reported as out of memory).
- ``train-speed`` also times a ``--recipe recommended``-shaped step at precision ``auto`` against
  fp32, interleaved (``recipe_*``), and the refresh's answer filter before and after the answer
  index (``filter_*``), and the refresh's share of a whole recipe training loop (``loop_*``; 0 = off,
  eval/gpu_check.sh sets it on a GPU).
- ``fuzz``: tests/test_fuzz.py with hypothesis's ``long`` profile; cases and failures per test.

This module owns the timing; every number is of the toolkit's own code paths.
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

from eval import harness
from eval.harness import RESULTS, ROOT, WIKI, WORK


def append(path: Path, record: dict) -> Path:
    """Append ``record`` to the JSON list at ``path`` (the speed results keep every measurement)."""
    runs = json.loads(path.read_text()) if path.exists() else []
    runs = runs if isinstance(runs, list) else [runs]
    runs.append(record)
    harness.replace_text(path, json.dumps(runs, indent=2) + "\n")
    return path


def texts(n: int, words: int, seed: int) -> list[str]:
    rng = np.random.default_rng(seed)
    vocab = "the of and to in a is that for it as was with be by on not he this are or his from at which".split() + \
        [f"word{i}" for i in range(2000)]
    return [" ".join(vocab[i] for i in rng.integers(0, len(vocab), size=words)) for _ in range(n)]


def tiny_model(out: Path) -> Path:
    """A 2-layer random BERT with a WordPiece vocab of the synthetic texts (offline), as a
    sentence-transformers folder (mean pooling, normalised) so both sides load it."""
    import torch

    if (out / "modules.json").exists():
        return out
    from tokenizers import Tokenizer, models, normalizers, pre_tokenizers, processors
    from transformers import BertConfig, BertModel, BertTokenizerFast

    out.mkdir(parents=True, exist_ok=True)
    words = sorted({w for t in texts(200, 100, 0) + texts(50, 12, 1) for w in t.split()})
    vocab = {t: i for i, t in enumerate(["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"] + words)}
    tok = Tokenizer(models.WordPiece(vocab, unk_token="[UNK]"))
    tok.normalizer = normalizers.BertNormalizer(lowercase=True)
    tok.pre_tokenizer = pre_tokenizers.BertPreTokenizer()
    tok.post_processor = processors.TemplateProcessing(single="[CLS] $A [SEP]", pair="[CLS] $A [SEP] $B:1 [SEP]:1",
                                                       special_tokens=[("[CLS]", 2), ("[SEP]", 3)])
    BertTokenizerFast(tokenizer_object=tok, unk_token="[UNK]", pad_token="[PAD]", cls_token="[CLS]", sep_token="[SEP]",
                      mask_token="[MASK]").save_pretrained(out)
    torch.manual_seed(0)
    BertModel(BertConfig(vocab_size=len(vocab), hidden_size=32, num_hidden_layers=2, num_attention_heads=2,
                         intermediate_size=64)).save_pretrained(out)
    (out / "modules.json").write_text(json.dumps([
        {"idx": 0, "name": "0", "path": "", "type": "sentence_transformers.models.Transformer"},
        {"idx": 1, "name": "1", "path": "1_Pooling", "type": "sentence_transformers.models.Pooling"},
        {"idx": 2, "name": "2", "path": "2_Normalize", "type": "sentence_transformers.models.Normalize"}]))
    (out / "1_Pooling").mkdir(exist_ok=True)
    (out / "1_Pooling" / "config.json").write_text(json.dumps({"word_embedding_dimension": 32, "pooling_mode_mean_tokens": True}))
    (out / "2_Normalize").mkdir(exist_ok=True)
    (out / "sentence_bert_config.json").write_text(json.dumps({"max_seq_length": 128}))
    return out


def model_dir(params: dict, work: Path) -> str:
    if params["tiny"]:
        return str(tiny_model(work / "tiny-model"))
    from dpr_xrisk.retrieval.encoder import resolve_model_path

    return str(resolve_model_path("minilm"))


def _sync(device) -> None:
    import torch

    if device.type == "cuda":
        torch.cuda.synchronize(device)


def _timed(fn, device, repeat: int) -> float:
    fn()  # warm-up
    _sync(device)
    t0 = time.perf_counter()
    for _ in range(repeat):
        fn()
    _sync(device)
    return (time.perf_counter() - t0) / repeat


# ---- encode -------------------------------------------------------------------------------------
def encode_interleaved(params: dict) -> dict:
    """The CPU encode comparison on Wikipedia passages (``tiny``: synthetic texts, a tiny model)."""
    import itertools

    import torch
    from sentence_transformers import SentenceTransformer

    from dpr_xrisk.io.passages import read_passages
    from dpr_xrisk.retrieval.encoder import DualEncoder

    torch.set_num_threads(params["threads"])
    n, bs, max_len = params["n"], params["batch_size"], params["max_length"]
    if params["tiny"]:
        titles, bodies = [""] * n, texts(n, 100, 0)
    else:
        psgs = list(itertools.islice(read_passages(WIKI), n))
        titles, bodies = [p.title for p in psgs], [p.text for p in psgs]
    joined = [f"{t} {x}" if t else x for t, x in zip(titles, bodies)]
    mdir = model_dir(params, params["_work"])
    ours = DualEncoder.load(mdir, title="join", passage_max_length=max_len)
    st = SentenceTransformer(mdir, device="cpu")
    st.max_seq_length = max_len
    size = {"fp32": n, "bf16": min(params["n_bf16"], n)}

    def run_ours(prec, k=None):
        k = k or size[prec]
        return ours.encode_passages(titles[:k], bodies[:k], batch_size=bs, bf16=prec == "bf16")

    def run_st(prec, k=None):
        k = k or size[prec]
        with torch.inference_mode(), torch.autocast("cpu", dtype=torch.bfloat16, enabled=prec == "bf16"):
            return st.encode(joined[:k], batch_size=bs, convert_to_numpy=True, show_progress_bar=False)

    fns = {"ours": run_ours, "st": run_st}
    for prec in size:  # warm-up
        for fn in fns.values():
            fn(prec, 8)
    emb, wall, cpu = {}, {}, {}
    for rep in range(params["reps"]):
        for prec in size:
            for name in (["ours", "st"] if rep % 2 == 0 else ["st", "ours"]):
                t0, c0 = time.perf_counter(), time.process_time()
                emb[(name, prec)] = fns[name](prec)
                wall.setdefault(f"{name}_{prec}", []).append(time.perf_counter() - t0)
                cpu.setdefault(f"{name}_{prec}", []).append(time.process_time() - c0)
    summary = {}
    for prec in size:
        o, s = (size[prec] / float(np.median(wall[f"{k}_{prec}"])) for k in ("ours", "st"))
        paired = [ts / to for to, ts in zip(wall[f"ours_{prec}"], wall[f"st_{prec}"])]
        summary[prec] = {"passages": size[prec], "ours_psg_s": o, "st_psg_s": s, "ratio_of_medians": o / s,
                         "median_of_paired_ratios": float(np.median(paired)),
                         "cpu_time_ratio": float(np.median(cpu[f"st_{prec}"]) / np.median(cpu[f"ours_{prec}"])),
                         "max_abs_diff": float(np.abs(emb[("ours", prec)] - emb[("st", prec)]).max())}
        print(f"{prec}: ours {o:.1f} psg/s, ST {s:.1f} psg/s, ours/ST {o / s:.3f}", flush=True)
    return {"args": {k: params[k] for k in ("n", "n_bf16", "batch_size", "reps", "threads")},
            "threads": torch.get_num_threads(), "raw_seconds": wall, "raw_cpu_seconds": cpu, "summary": summary}


def encode_on(model, device, precision: str, n: int, batch: int, max_len: int) -> dict:
    """The GPU encode comparison (synthetic 100-word passages)."""
    import torch
    from sentence_transformers import SentenceTransformer

    from dpr_xrisk.retrieval.encoder import DualEncoder

    passages = texts(n, 100, 0)
    ours = DualEncoder.load(model, title="join", passage_max_length=max_len).to(device).eval()
    st = SentenceTransformer(str(model), device=str(device))
    st.max_seq_length = max_len
    dtype = {"bf16": torch.bfloat16, "fp16": torch.float16}.get(precision)

    def run_ours():
        if precision == "fp16":
            with torch.autocast(device.type, dtype=torch.float16):
                ours.encode_passages([""] * n, passages, batch_size=batch)
        else:
            ours.encode_passages([""] * n, passages, batch_size=batch, bf16=precision == "bf16")

    def run_st():
        with torch.autocast(device.type, dtype=dtype or torch.float32, enabled=dtype is not None):
            st.encode(passages, batch_size=batch, convert_to_numpy=True)

    a, b = _timed(run_ours, device, 2), _timed(run_st, device, 2)
    return {"passages": n, "batch": batch, "max_length": max_len, "precision": precision,
            "ours_psg_per_s": round(n / a, 1), "st_psg_per_s": round(n / b, 1), "ratio": round(b / a, 3)}


# ---- one training step ----------------------------------------------------------------------------
def train_step(model, device, precision: str, batch: int, chunk: int, q_len: int, p_len: int, repeat: int) -> dict:
    """Questions/s of one optimiser step: ours (InfoNCE, shared tower; plain and cached gradients)
    vs sentence-transformers' MNRL and CachedMNRL, on the same synthetic batch."""
    import torch
    from sentence_transformers import SentenceTransformer
    try:  # sentence-transformers >= 6 / older
        from sentence_transformers.sentence_transformer.losses import (CachedMultipleNegativesRankingLoss,
                                                                       MultipleNegativesRankingLoss)
    except ImportError:
        from sentence_transformers.losses import CachedMultipleNegativesRankingLoss, MultipleNegativesRankingLoss

    from dpr_xrisk.losses import make_loss
    from dpr_xrisk.retrieval.encoder import DualEncoder
    from dpr_xrisk.train.batch import Batch
    from dpr_xrisk.train.trainer import cached_step_loss, step_loss

    qs, ps = texts(batch, 12, 1), texts(batch, 100, 2)
    dtype = {"bf16": torch.bfloat16, "fp16": torch.float16}.get(precision)
    out = {"batch": batch, "precision": precision, "chunk": chunk, "query_length": q_len, "passage_length": p_len}
    enc = DualEncoder.load(model, shared=True, title="join", query_max_length=q_len, passage_max_length=p_len)
    enc = enc.to(device).train()
    opt = torch.optim.AdamW(enc.parameters(), lr=1e-6)
    eye = torch.eye(batch, dtype=torch.bool, device=device)
    b = Batch(q_inputs={k: v.to(device) for k, v in enc.tokenize_queries(qs).items()},
              p_inputs={k: v.to(device) for k, v in enc.tokenize_passages([""] * batch, ps).items()},
              pos_mask=eye, neg_mask=~eye, log_q=torch.zeros(batch, batch, device=device),
              rows=torch.arange(batch, device=device), slot_ids=torch.zeros(batch, 1, dtype=torch.long, device=device),
              num_hard=0)
    loss_fn = make_loss("infonce", tau=0.05)  # = MNRL's scale 20 on cosine

    def ours(cached: bool):
        def step():
            opt.zero_grad(set_to_none=True)
            if cached:
                cached_step_loss(enc, loss_fn, b, precision, 0, 0, None, chunk)
            else:
                loss, _ = step_loss(enc, loss_fn, b, precision)
                loss.backward()
            opt.step()
        return step

    st = SentenceTransformer(str(model), device=str(device))
    st.max_seq_length = p_len
    st_opt = torch.optim.AdamW(st.parameters(), lr=1e-6)
    prep = getattr(st, "preprocess", None) or st.tokenize  # sentence-transformers >= 6 / older

    def features(xs):
        return {k: v.to(device) if torch.is_tensor(v) else v for k, v in prep(xs).items()}

    fq, fp = features(qs), features(ps)

    def theirs(loss):
        def step():
            st_opt.zero_grad(set_to_none=True)
            with torch.autocast(device.type, dtype=dtype or torch.float32, enabled=dtype is not None):
                value = loss([dict(fq), dict(fp)], None)
            value.backward()
            st_opt.step()
        return step

    for name, fn in (("ours", ours(False)), ("ours_cached", ours(True)),
                     ("st_mnrl", theirs(MultipleNegativesRankingLoss(st))),
                     ("st_cached_mnrl", theirs(CachedMultipleNegativesRankingLoss(st, mini_batch_size=chunk)))):
        try:
            out[f"{name}_q_per_s"] = round(batch / _timed(fn, device, repeat), 2)
        except torch.OutOfMemoryError:
            out[f"{name}_q_per_s"] = "out of memory"
            if device.type == "cuda":
                torch.cuda.empty_cache()
    for mine, ref in (("ours", "st_mnrl"), ("ours_cached", "st_cached_mnrl")):
        a, r = out.get(f"{mine}_q_per_s"), out.get(f"{ref}_q_per_s")
        out[f"{mine}_vs_{ref}"] = round(a / r, 3) if isinstance(a, float) and isinstance(r, float) else None
    return out


# ---- precision auto vs fp32, and the refresh's answer filter ------------------------------------
def recipe_steps(mdir, device, params: dict) -> dict:
    """Seconds of one ``--recipe recommended``-shaped optimiser step (two towers, DPM at tau 0.02,
    AdamW, dropout ``recipe_dropout``; ``recipe_batch`` questions with one positive and ``recipe_hard_negatives`` hard
    negatives each; passages ``recipe_passage_length`` word pieces) at each precision of
    ``recipe_precisions`` (``auto`` resolved on ``device``, as training resolves it): one warm-up
    step each, then ``recipe_repeat`` rounds, each running every precision once, the order
    alternating, so a machine shared with other jobs slows both alike. Ratios of medians."""
    import torch

    from dpr_xrisk.losses import make_loss
    from dpr_xrisk.retrieval.encoder import DualEncoder
    from dpr_xrisk.runtime.device import resolve_precision
    from dpr_xrisk.train.batch import Batch
    from dpr_xrisk.train.setup import set_dropout
    from dpr_xrisk.train.step import step_loss

    B, h = params["recipe_batch"], params["recipe_hard_negatives"]
    N = B * (1 + h)  # each question's positive, then the hard negatives
    enc = DualEncoder.load(mdir, query_max_length=params["query_length"],
                           passage_max_length=params["recipe_passage_length"]).to(device).train()
    set_dropout(enc, params["recipe_dropout"])  # as training sets it (train/setup.py)
    opt = torch.optim.AdamW(list(dict.fromkeys(enc.parameters())), lr=1e-6)
    pos = torch.zeros(B, N, dtype=torch.bool)  # (B, N)
    pos[torch.arange(B), torch.arange(B)] = True
    b = Batch(q_inputs={k: v.to(device) for k, v in enc.tokenize_queries(texts(B, 12, 1)).items()},
              p_inputs={k: v.to(device) for k, v in enc.tokenize_passages([""] * N, texts(N, 100, 2)).items()},
              pos_mask=pos.to(device), neg_mask=(~pos).to(device), log_q=torch.full((B, N), -8.0, device=device),
              rows=torch.arange(B, device=device), slot_ids=torch.zeros(B, 1, dtype=torch.long, device=device),
              num_hard=h)
    loss_fn = make_loss("dpm", tau=0.02, zeta_scale=1.0)
    names = list(params["recipe_precisions"])
    resolved = {n: resolve_precision(n, device) for n in names}

    def step(precision):
        _sync(device)
        t0, c0 = time.perf_counter(), time.process_time()
        opt.zero_grad(set_to_none=True)
        loss, _ = step_loss(enc, loss_fn, b, precision)
        loss.backward()
        opt.step()
        _sync(device)
        return time.perf_counter() - t0, time.process_time() - c0

    for n in names:
        step(resolved[n])  # warm-up (first-call allocations, kernel selection)
    wall: dict = {n: [] for n in names}
    cpu: dict = {n: [] for n in names}
    for r in range(params["recipe_repeat"]):
        for n in (names if r % 2 == 0 else names[::-1]):
            w, c = step(resolved[n])
            wall[n].append(round(w, 3))
            cpu[n].append(round(c, 3))
    med = {n: float(np.median(wall[n])) for n in names}
    out = {"batch": B, "hard_negatives": h, "dropout": params["recipe_dropout"], "passage_length": params["recipe_passage_length"],
           "query_length": params["query_length"], "resolved": resolved, "step_s": wall, "cpu_s": cpu,
           "median_step_s": {n: round(v, 3) for n, v in med.items()}}
    if len(names) == 2:  # the first precision's speed-up over the second (fp32 / auto)
        out["speedup"] = round(med[names[1]] / med[names[0]], 3)
        out["cpu_speedup"] = round(float(np.median(cpu[names[1]])) / float(np.median(cpu[names[0]])), 3)
    return out


def filter_timing(params: dict) -> dict:
    """The refresh's answer filter before and after the answer index, on synthetic data of a
    refresh's shape: ``filter_questions`` questions (one to three answers of one to three words,
    cut from corpus passages) x ``filter_candidates`` candidates from ``filter_corpus`` passages of
    100 words of the bundled sample's vocabulary. ``has_answer`` on every pair (its token cache
    emptied first, as a run starts) against :class:`AnswerIndex` (built once, then two refreshes:
    the second reuses the passages the first tokenised), interleaved over ``filter_repeat``
    rounds; both must remove the same pairs."""
    from dpr_xrisk.evaluation import answers as A
    from dpr_xrisk.io.passages import read_passages
    from dpr_xrisk.train.answer_index import AnswerIndex

    rng = np.random.default_rng(0)
    vocab = sorted({w for p in read_passages(ROOT / "data" / "sample" / "passages.tsv") for w in p.text.split()})
    C, Q, K = params["filter_corpus"], params["filter_questions"], params["filter_candidates"]
    corpus = {f"p{i}": " ".join(rng.choice(vocab, size=100)) for i in range(C)}
    keys = list(corpus)
    questions = []
    for _ in range(Q):
        ans = []
        for _ in range(int(rng.integers(1, 4))):
            words = corpus[keys[int(rng.integers(C))]].split()
            a = int(rng.integers(0, len(words) - 3))
            ans.append(" ".join(words[a : a + int(rng.integers(1, 4))]))
        questions.append((ans, [keys[int(j)] for j in rng.choice(C, size=K, replace=False)]))

    def before():
        return {(i, d) for i, (ans, cands) in enumerate(questions) for d in cands if A.has_answer(corpus[d], ans)}

    def after(index):
        found = set()
        for i, (ans, cands) in enumerate(questions):
            ids = index.ids(ans)
            found.update((i, d) for d in cands if index.has_answer(d, corpus[d], ids))
        return found

    rows = []
    for r in range(params["filter_repeat"]):
        rec = {}
        for side in (("before", "after") if r % 2 == 0 else ("after", "before")):
            if side == "before":
                A._tokens.cache_clear()
                t0 = time.perf_counter()
                first = before()
                t1 = time.perf_counter()
                again = before()
                rec.update(before_first_s=round(t1 - t0, 4), before_next_s=round(time.perf_counter() - t1, 4))
            else:
                t0 = time.perf_counter()
                index = AnswerIndex(ans for ans, _ in questions)
                t1 = time.perf_counter()
                first = after(index)
                t2 = time.perf_counter()
                again = after(index)
                rec.update(build_s=round(t1 - t0, 4), after_first_s=round(t2 - t1, 4),
                           after_next_s=round(time.perf_counter() - t2, 4))
            rec[side] = first
            assert first == again
        assert rec.pop("before") == rec.pop("after"), "the answer index removed other pairs than has_answer"
        rec["removed_pairs"] = len(first)
        rows.append(rec)
    med = {k: float(np.median([x[k] for x in rows])) for k in rows[0] if k.endswith("_s")}
    return {"questions": Q, "candidates": K, "corpus": C, "rounds": rows,
            "median_s": {k: round(v, 4) for k, v in med.items()},
            "speedup_first": round(med["before_first_s"] / max(med["build_s"] + med["after_first_s"], 1e-4), 1),
            "speedup_next": round(med["before_next_s"] / max(med["after_next_s"], 1e-4), 1)}


def loop_share(mdir, device, params: dict, work: Path) -> dict:
    """The refresh's share of a ``--recipe recommended`` training loop (precision auto): ``dpr-xrisk
    train`` on ``loop_questions`` synthetic questions (12 words of their positive, one answer word
    of it) over a corpus of ``loop_corpus`` synthetic 100-word passages, to the end; from its logs
    the loop's seconds, the refreshes' seconds and share, and each refresh's median parts."""
    import shutil

    Q, C = params["loop_questions"], params["loop_corpus"]
    d = work / f"loop-{Q}-{C}"
    shutil.rmtree(d, ignore_errors=True)
    d.mkdir(parents=True)
    rng = np.random.default_rng(0)
    bodies = texts(C, 100, 3)
    with open(d / "corpus.tsv", "w", encoding="utf-8") as f:
        f.write("id\ttext\ttitle\n")
        f.writelines(f"p{i}\t{t}\t\n" for i, t in enumerate(bodies))
    rows = []
    for i in rng.choice(C, size=Q, replace=False):
        words = bodies[int(i)].split()
        a = int(rng.integers(0, len(words) - 12))
        rows.append({"question": " ".join(words[a : a + 12]), "answers": [words[a + 6]],
                     "positive_ctxs": [{"passage_id": f"p{int(i)}", "title": "", "text": bodies[int(i)]}],
                     "negative_ctxs": [], "hard_negative_ctxs": []})
    (d / "train.json").write_text(json.dumps(rows))
    harness.cli(["train", "--recipe", "recommended", "--model", mdir, "--train", d / "train.json", "--corpus",
                 d / "corpus.tsv", "--device", str(device), "--precision", "auto", "--threads", params["threads"],
                 "--out", d / "run"], d / "log.txt")
    log = [json.loads(x) for x in (d / "run" / "train_log.jsonl").read_text().splitlines()]
    end = next(r for r in log if r.get("event") == "end")
    refreshes = [json.loads(x) for x in (d / "run" / "refresh_log.jsonl").read_text().splitlines()]
    parts = ("tokens_s", "cast_s", "quantize_s", "encode_s", "index_s", "search_s", "filter_s", "seconds")
    config = json.loads((d / "run" / "config.json").read_text())
    steps = [r["seconds"] for r in log if "loss" in r]
    return {"questions": Q, "corpus": C, "steps": end["steps"], "seconds": end["seconds"],
            "refresh_seconds": end["refresh_seconds"], "refresh_share": end["refresh_share"],
            "refreshes": len(refreshes), "precision": config["precision"],
            "refresh_quantize": config["refresh_quantize"], "median_step_s": round(float(np.median(steps)), 4),
            "median_refresh": {k: round(float(np.median([r[k] for r in refreshes if k in r])), 3)
                               for k in parts if any(k in r for r in refreshes)}}


# ---- fuzz -------------------------------------------------------------------------------------------
def fuzz(params: dict) -> dict:
    t0 = time.perf_counter()
    cmd = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "tests/test_fuzz.py",
           f"--hypothesis-profile={params['profile']}", "--hypothesis-show-statistics", "-rN"]
    proc = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True)
    out = proc.stdout + proc.stderr
    per_test: dict[str, dict] = {}
    current = None
    for line in out.splitlines():
        m = re.match(r"^tests/test_fuzz.py::(\S+):", line.strip())
        if m:
            current = per_test.setdefault(m.group(1), {"passing": 0, "failing": 0, "invalid": 0})
            continue
        m = re.search(r"(\d+) passing(?: examples?| test cases?)?, (\d+) failing(?: examples?| test cases?)?,? "
                      r"(?:and )?(\d+) invalid", line)
        if m and current is not None:
            for key, value in zip(("passing", "failing", "invalid"), m.groups()):
                current[key] += int(value)
    if proc.returncode != 0:
        print(out[-4000:], file=sys.stderr)
    return {"returncode": proc.returncode, "seconds": round(time.perf_counter() - t0, 1), "tests": per_test,
            "pytest": {k: int(v) for v, k in re.findall(r"(\d+) (passed|failed)", out)}}


# ---- the runner ---------------------------------------------------------------------------------------
def run(exp, params: dict, systems: list[str], seeds: list[int], work: Path | None, command: str) -> Path:
    import torch

    rec = {"experiment": exp.name, "protocol": exp.protocol, "command": command, "machine": harness.machine()}
    what = exp.raw["measure"]
    base = work or WORK / f"{exp.name}-tiny"
    params = {**params, "_work": base}
    if what == "encode":
        rec.update(encode_interleaved(params))
    elif what == "fuzz":
        rec.update(fuzz(params))
    else:  # train-step on the CPU, or the GPU check (encode + train-step on CUDA)
        if params["device"] != "cpu" and not params["tiny"]:
            if not torch.cuda.is_available():
                raise SystemExit(f"error: {exp.name} needs CUDA (--tiny checks it on a CPU)")
            torch.backends.cuda.matmul.allow_tf32 = True
        device = torch.device(params["device"] if not params["tiny"] else "cpu")
        if device.type == "cpu":
            torch.set_num_threads(params["threads"])
        mdir = model_dir(params, base)
        rec["device"] = torch.cuda.get_device_name(0) if device.type == "cuda" else "cpu"
        rec["encode"], rec["train"] = [], []
        if params.get("recipe_repeat"):
            rec["recipe_step"] = recipe_steps(mdir, device, params)
            print({k: v for k, v in rec["recipe_step"].items() if k not in ("step_s", "cpu_s")}, flush=True)
        if params.get("loop_questions"):
            rec["loop"] = loop_share(mdir, device, params, base)
            print(rec["loop"], flush=True)
        if params.get("filter_repeat"):
            rec["refresh_filter"] = filter_timing(params)
            print({k: v for k, v in rec["refresh_filter"].items() if k != "rounds"}, flush=True)
        for precision in params["precisions"]:
            if params.get("encode_passages"):
                rec["encode"].append(encode_on(mdir, device, precision, params["encode_passages"],
                                               params["encode_batch"], params["max_length"]))
                print(rec["encode"][-1], flush=True)
            for batch in params["batches"]:
                rec["train"].append(train_step(mdir, device, precision, batch, params["chunk"], params["query_length"],
                                               params["passage_length"], params["repeat"]))
                print(rec["train"][-1], flush=True)
    rec["params"] = {k: v for k, v in params.items() if k != "_work"}
    res = base / exp.raw["results"] if params["tiny"] or work else RESULTS / exp.raw["results"]
    res.parent.mkdir(parents=True, exist_ok=True)
    append(res, rec)
    if what == "fuzz" and rec["returncode"] != 0:
        raise SystemExit(rec["returncode"])
    return res
