"""bench/kernels.py --render: kernels.md from a saved kernels.json, targets computed from its rows."""

from __future__ import annotations

import json

import pytest

pytest.importorskip("triton")
pytest.importorskip("torch")

from load_script import load_script  # noqa: E402



def _bench():
    return load_script("bench/kernels.py", "bench_kernels")


def _report(rows):
    return {"env": {"gpu": "G", "date": "d", "nvidia_smi": "s", "torch": "t", "cuda": "c", "cudnn": 1,
                    "triton": "x", "python": "p", "git": "g"},
            "ceilings": {"copy_TBps": 4.0, "gemm_bf16_TFLOPs": 600.0}, "rows": rows,
            "stages_s": {"attention timing": "skipped: time budget"}}


def test_targets_from_rows_and_missing_ones_said():
    bench = _bench()
    case = "causal prefill B=4 H=32 D=256 S=4096"
    dec = "decode B=1 Hq=32 Hk=8 D=128 k=8192 (CUDA graph)"
    rows = [{"case": case, "impl": "causal_trim (ours)", "ms": 2.0, "TFLOPs": 300.0},
            {"case": case, "impl": "SDPA cuDNN", "ms": 1.5, "TFLOPs": 400.0},
            {"case": dec, "impl": "causal_trim (ours)", "ms": 0.010, "TBps": 3.0},
            {"case": dec, "impl": "SDPA default (gqa)", "ms": 0.011, "TBps": 2.7}]
    text = bench.render(_report(rows))
    assert "- causal_trim vs SDPA cuDNN, D=256 S=4096: 0.75× (target ≥1.0×): NOT met" in text
    assert "- decode B=1 k=8192 vs SDPA default (gqa), CUDA graph: 1.10× (target ≥1.0×): met" in text
    assert "- causal_trim vs SDPA cuDNN, D=64 S=4096: not measured" in text
    assert "'attention timing': 'skipped: time budget'" in text
    assert "| cuda graph |" in text and "| stream |" in text  # decode rows read as graph-timed


def test_render_writes_md_beside_the_json(tmp_path, monkeypatch, capsys):
    bench = _bench()
    src = tmp_path / "kernels-x.json"
    src.write_text(json.dumps(_report([])))
    monkeypatch.setattr("sys.argv", ["kernels.py", "--render", str(src)])
    bench.main()
    assert (tmp_path / "kernels-x.md").read_text().startswith("# Kernel benchmark on G")
    assert "Device self-checks: none recorded" in capsys.readouterr().out


def test_norm_quant_rows_rendered_with_their_targets():
    """The full run's norm_quant rows: a table row per implementation and target lines computed
    from them (peer time over ours, stream / graph); a report without them says so."""
    bench = _bench()
    case = "M=1 K=4096 bf16 int8 +residual"
    rows = [{"case": case, "impl": "ours (fused)", "ms": 0.010, "graph_ms": 0.004, "graph_TBps": 0.01, "host_us": 9.0},
            {"case": case, "impl": "unfused: compiled norm + act_quant", "ms": 0.020, "graph_ms": 0.0058,
             "graph_TBps": 0.007, "host_us": 30.0},
            {"case": case, "impl": "torch.compile fused", "ms": 0.012, "graph_ms": 0.0036, "graph_TBps": 0.01,
             "host_us": 20.0}]
    text = bench.render({**_report([]), "norm_quant": rows})
    assert f"| {case} | ours (fused) | 0.0100 | 0.0040 | 0.01 | 9.0 |" in text
    assert f"- {case} vs unfused: compiled norm + act_quant: 2.00× / 1.45× (≥1.5×): NOT met" in text
    assert f"- {case} vs torch.compile fused: 1.20× / 0.90× (≥1.0×): NOT met" in text
    assert "Fused RMSNorm + quantization: not measured in this run." in bench.render(_report([]))


def test_norm_quant_report_is_named_after_the_gpu_and_the_run_date(tmp_path):
    nq = load_script("bench/norm_quant.py", "bench_norm_quant")
    assert nq.report_stem({"gpu": "NVIDIA H200", "date": "2026-12-02 13:41 UTC"}) == "norm-quant-h200-2026-12-02"
    assert nq.report_stem({"gpu": "NVIDIA GeForce RTX 4090", "date": "2027-01-05 00:00 UTC"}) == \
        "norm-quant-geforce-rtx-4090-2027-01-05"
    assert nq.report_stem({"gpu": "NVIDIA", "date": "2027-01-05 00:00 UTC"}) == "norm-quant-gpu-2027-01-05"
