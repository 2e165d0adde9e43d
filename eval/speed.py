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
