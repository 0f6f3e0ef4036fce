"""Decode split-K merge layouts and split counts at batch 8 and 16 against SDPA, under CUDA graphs.

    python bench/decode_merge_sweep.py          # on a CUDA GPU; prints one JSON line per timing

Queries [B, 32, 1, 128] over keys/values [B, 8, k, 128] bf16 (GQA 32/8), k = 8192 and 32768,
B = 8 and 16. For each merge option (default, ``merge_cols``/``merge_warps`` 32/1, 64/2, 32/2,
``mode="fused"``) and split count (automatic, 2, 8): the median of
``triton.testing.do_bench_cudagraph`` (100 ms of replays) and the largest absolute difference
from SDPA's output; then SDPA itself. The run of 2026-12-02 on the lent H200 is
bench/results/decode-sweep-h200-2026-12-02.log (it set the separate merge's default layout,
``kernels.attention._merge_layout``). In that run the default row ("opt": null) was the merge
of whole rows on 4 warps at both batch sizes, the default before that run.
"""
import json
import sys
from pathlib import Path

import torch
from triton.testing import do_bench_cudagraph

try:  # an installed sits-doctor, else the checkout (the GPU machine runs from a copy)
    from sits_doctor.kernels import attention
except ImportError:  # pragma: no cover
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
    from kernels import attention  # type: ignore[no-redef]


OPTIONS = [None, {"merge_cols": 32, "merge_warps": 1}, {"merge_cols": 64, "merge_warps": 2},
           {"merge_cols": 32, "merge_warps": 2}, {"mode": "fused"}]


def main() -> None:
    dev = "cuda"
    sdpa = torch.nn.functional.scaled_dot_product_attention
    for sk in (8192, 32768):
        for b in (8, 16):
            q = torch.randn(b, 32, 1, 128, device=dev, dtype=torch.bfloat16)
            k, v = (torch.randn(b, 8, sk, 128, device=dev, dtype=torch.bfloat16) for _ in range(2))
            ref = sdpa(q, k, v, enable_gqa=True)
            for opt in OPTIONS:
                for splits in (None, 2, 8):
                    def fn(opt=opt, splits=splits):
                        return attention._attention(q, k, v, decode=opt or {}, num_splits=splits)
                    err = float((fn().float() - ref.float()).abs().max())
                    t = do_bench_cudagraph(fn, rep=100, return_mode="median")
                    print(json.dumps({"b": b, "sk": sk, "opt": opt, "splits": splits, "ms": t, "maxerr": err}), flush=True)
            t = do_bench_cudagraph(lambda: sdpa(q, k, v, enable_gqa=True), rep=100, return_mode="median")
            print(json.dumps({"b": b, "sk": sk, "opt": "SDPA", "ms": t}), flush=True)


if __name__ == "__main__":
    main()
