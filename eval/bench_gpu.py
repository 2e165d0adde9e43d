"""Throughput on an accelerator, ours vs sentence-transformers, side by side in one process
(issue #16 item 6; run by eval/gpu_check.sh on a lent GPU):

- encode: passages/s of ``DualEncoder.encode_passages`` vs ``SentenceTransformer.encode``, same
  model (MiniLM), max length, batch and precision;
- train: questions/s of one optimiser step, our InfoNCE step (shared tower, the MNRL loss) and
  its cached-gradient version vs sentence-transformers' MultipleNegativesRankingLoss and
  CachedMultipleNegativesRankingLoss, at batch 32, 256 and 1,024 (a batch that does not fit
  is reported as out of memory).

    python eval/bench_gpu.py                  # on CUDA: eval/RESULTS-gpu.md + eval/results/bench_gpu.json
    python eval/bench_gpu.py --dry-run        # every step on the CPU, tiny model, tiny sizes (results under eval/work/)
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

import numpy as np
import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _common import EVAL, RESULTS, WORK, machine  # noqa: E402


def texts(n: int, words: int, seed: int) -> list[str]:
    rng = np.random.default_rng(seed)
    vocab = "the of and to in a is that for it as was with be by on not he this are or his from at which".split() + \
        [f"word{i}" for i in range(2000)]
    return [" ".join(vocab[i] for i in rng.integers(0, len(vocab), size=words)) for _ in range(n)]


def sync(device):
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def timed(fn, device, repeat: int = 3) -> float:
    fn()  # warm-up
    sync(device)
    t0 = time.perf_counter()
    for _ in range(repeat):
        fn()
    sync(device)
    return (time.perf_counter() - t0) / repeat


def bench_encode(model_dir, device, precision: str, n: int, batch: int, max_len: int) -> dict:
    from sentence_transformers import SentenceTransformer

    from dpr_xrisk.retrieval.encoder import DualEncoder

    passages = texts(n, 100, 0)
    ours = DualEncoder.load(model_dir, title="join", passage_max_length=max_len).to(device).eval()
    st = SentenceTransformer(str(model_dir), device=str(device))
    st.max_seq_length = max_len
    bf16 = precision == "bf16"
    dtype = {"bf16": torch.bfloat16, "fp16": torch.float16}.get(precision)

    def run_ours():
        if precision == "fp16":
            with torch.autocast(device.type, dtype=torch.float16):
                ours.encode_passages([""] * n, passages, batch_size=batch)
        else:
            ours.encode_passages([""] * n, passages, batch_size=batch, bf16=bf16)

    def run_st():
        with torch.autocast(device.type, dtype=dtype or torch.float32, enabled=dtype is not None):
            st.encode(passages, batch_size=batch, convert_to_numpy=True)

    a, b = timed(run_ours, device, 2), timed(run_st, device, 2)
    return {"passages": n, "batch": batch, "max_length": max_len, "precision": precision,
            "ours_psg_per_s": round(n / a, 1), "st_psg_per_s": round(n / b, 1), "ratio": round(b / a, 3)}


def bench_train(model_dir, device, precision: str, batch: int, chunk: int, q_len: int, p_len: int) -> dict:
    from sentence_transformers import SentenceTransformer
    from sentence_transformers.losses import CachedMultipleNegativesRankingLoss, MultipleNegativesRankingLoss

    from dpr_xrisk.retrieval.encoder import DualEncoder
    from dpr_xrisk.losses import make_loss
    from dpr_xrisk.train.batch import Batch
    from dpr_xrisk.train.trainer import cached_step_loss, step_loss

    qs, ps = texts(batch, 12, 1), texts(batch, 100, 2)
    dtype = {"bf16": torch.bfloat16, "fp16": torch.float16}.get(precision)
    out = {"batch": batch, "precision": precision, "chunk": chunk}

    enc = DualEncoder.load(model_dir, shared=True, title="join", query_max_length=q_len, passage_max_length=p_len)
    enc = enc.to(device).train()
    opt = torch.optim.AdamW(enc.parameters(), lr=1e-6)
    b = Batch(q_inputs={k: v.to(device) for k, v in enc.tokenize_queries(qs).items()},
              p_inputs={k: v.to(device) for k, v in enc.tokenize_passages([""] * batch, ps).items()},
              pos_mask=torch.eye(batch, dtype=torch.bool, device=device), neg_mask=~torch.eye(batch, dtype=torch.bool, device=device),
              log_q=torch.zeros(batch, batch, device=device), rows=torch.arange(batch, device=device),
              slot_ids=torch.zeros(batch, 1, dtype=torch.long, device=device), num_hard=0)
    loss_fn = make_loss("infonce", tau=0.05)

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

    st = SentenceTransformer(str(model_dir), device=str(device))
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
            out[f"{name}_q_per_s"] = round(batch / timed(fn, device, 2), 2)
        except torch.OutOfMemoryError:
            out[f"{name}_q_per_s"] = "out of memory"
            if device.type == "cuda":
                torch.cuda.empty_cache()
    for mine, ref in (("ours", "st_mnrl"), ("ours_cached", "st_cached_mnrl")):
        a, r = out.get(f"{mine}_q_per_s"), out.get(f"{ref}_q_per_s")
        out[f"{mine}_vs_{ref}"] = round(a / r, 3) if isinstance(a, float) and isinstance(r, float) else None
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--dry-run", action="store_true", help="CPU, tiny model, tiny sizes: checks every step")
    ap.add_argument("--model", default=None, help="model folder (default: the packaged MiniLM; --dry-run: a tiny random BERT)")
    args = ap.parse_args()
    if args.dry_run:
        device, precisions = torch.device("cpu"), ["fp32"]
        model = args.model or str(tiny_model(WORK / "gpu-dry" / "tiny"))
        enc_cfg, batches, chunk = dict(n=64, batch=16, max_len=64), [8, 16], 4
        md, js = WORK / "gpu-dry" / "RESULTS-gpu.md", WORK / "gpu-dry" / "bench_gpu.json"
    else:
        if not torch.cuda.is_available():
            sys.exit("bench_gpu.py needs CUDA (use --dry-run to check it on a CPU)")
        from dpr_xrisk.retrieval.encoder import resolve_model_path

        device, precisions = torch.device("cuda:0"), ["bf16", "fp16"]
        model = args.model or str(resolve_model_path("minilm"))
        enc_cfg, batches, chunk = dict(n=20_000, batch=256, max_len=256), [32, 256, 1024], 64
        md, js = EVAL / "RESULTS-gpu.md", RESULTS / "bench_gpu.json"
    torch.backends.cuda.matmul.allow_tf32 = True
    res = {"command": "python eval/bench_gpu.py" + (" --dry-run" if args.dry_run else ""), "machine": machine(),
           "device": torch.cuda.get_device_name(0) if device.type == "cuda" else "cpu", "encode": [], "train": []}
    for precision in precisions:
        res["encode"].append(bench_encode(model, device, precision, **enc_cfg))
        print(res["encode"][-1], flush=True)
        for batch in batches:
            res["train"].append(bench_train(model, device, precision, batch, chunk, 32, 128))
            print(res["train"][-1], flush=True)
    js.parent.mkdir(parents=True, exist_ok=True)
    js.write_text(json.dumps(res, indent=2) + "\n")
    lines = [f"# Throughput on {res['device']}: ours vs sentence-transformers (issue #16)", "",
             f"Command: `{res['command']}`  ", f"Date: {res['machine']['date']}", "",
             "| precision | passages | batch | max length | ours psg/s | ST psg/s | ours / ST |", "|---|---:|---:|---:|---:|---:|---:|"]
    lines += [f"| {e['precision']} | {e['passages']:,} | {e['batch']} | {e['max_length']} | {e['ours_psg_per_s']} | "
              f"{e['st_psg_per_s']} | {e['ratio']} |" for e in res["encode"]]
    lines += ["", "Training step, questions/s (one in-batch positive each; question 32 / passage 128 tokens):", "",
              "| precision | batch | ours | ST MNRL | ours / ST | ours cached | ST cached MNRL | ours cached / ST cached |",
              "|---|---:|---:|---:|---:|---:|---:|---:|"]
    lines += [f"| {t['precision']} | {t['batch']} | {t['ours_q_per_s']} | {t['st_mnrl_q_per_s']} | {t['ours_vs_st_mnrl']} | "
              f"{t['ours_cached_q_per_s']} | {t['st_cached_mnrl_q_per_s']} | {t['ours_cached_vs_st_cached_mnrl']} |"
              for t in res["train"]]
    md.write_text("\n".join(lines) + "\n")
    print("\n".join(lines))


def tiny_model(out: Path) -> Path:
    """A 2-layer random BERT with a WordPiece vocab of the synthetic texts (offline), as a
    sentence-transformers folder (mean pooling, normalised) so both sides load it."""
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


if __name__ == "__main__":
    main()
