"""sentence-transformers' own ONNX backend, timed for eval/bench_quantize.py in a separate Python
(its ONNX export needs optimum-onnx, which pins transformers 4.x; the project runs transformers 5).

Started as ``PYTHON _st_onnx_worker.py MODEL_DIR PASSAGES.json THREADS MODE [BATCH]`` (MODE: fp32 | qint8);
exports MiniLM with ``backend="onnx"`` (qint8: ``export_dynamic_quantized_onnx_model(...,
"avx512_vnni")``, ST's recipe for x86 CPUs with VNNI) into a copy of MODEL_DIR, then answers
each line "run" on stdin with the seconds one ``encode`` of all passages took (batch BATCH, 64 by default, max
length 256) and, for "dump PATH", saves the embeddings there.
"""

import json
import shutil
import sys
import tempfile
import time

import numpy as np
import torch


def main() -> None:
    model_dir, passages, threads, mode = sys.argv[1], sys.argv[2], int(sys.argv[3]), sys.argv[4]
    batch = int(sys.argv[5]) if len(sys.argv) > 5 else 64
    torch.set_num_threads(threads)
    from sentence_transformers import SentenceTransformer

    work = tempfile.mkdtemp()
    local = shutil.copytree(model_dir, f"{work}/model")
    st = SentenceTransformer(local, device="cpu", backend="onnx", model_kwargs={"provider": "CPUExecutionProvider"})
    if mode == "qint8":
        from sentence_transformers import export_dynamic_quantized_onnx_model

        export_dynamic_quantized_onnx_model(st, "avx512_vnni", local)
        st = SentenceTransformer(local, device="cpu", backend="onnx",
                                 model_kwargs={"file_name": "onnx/model_qint8_avx512_vnni.onnx",
                                               "provider": "CPUExecutionProvider"})
    st.max_seq_length = 256
    texts = json.loads(open(passages).read())
    st.encode(texts[:32], batch_size=64)  # warm-up
    print("ready", flush=True)
    emb = None
    for line in sys.stdin:
        cmd = line.split()
        if cmd[0] == "run":
            t0 = time.perf_counter()
            emb = st.encode(texts, batch_size=batch, convert_to_numpy=True)
            print(f"{time.perf_counter() - t0:.4f}", flush=True)
        elif cmd[0] == "dump":
            np.save(cmd[1], emb)
            print("ok", flush=True)
    shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
