"""bench/profile_kernels.py --summarize: the table it writes from ncu's raw page (no GPU needed)."""

from __future__ import annotations

import csv
import json
from pathlib import Path

from load_script import load_script



def _mod():
    return load_script("bench/profile_kernels.py", "bench_profile")


def _raw(path: Path, unit: str, rows: list[dict]) -> None:
    """An ncu raw page as --csv writes it: names, then units, then one row per kernel."""
    names = ["ID", "Kernel Name", "gpu__time_duration.sum", "launch__registers_per_thread",
             "sm__inst_executed_pipe_xu.avg.pct_of_peak_sustained_active",
             "sm__pipe_tensor_cycles_active.avg.pct_of_peak_sustained_active",
             "sm__inst_executed_pipe_lsu.avg.pct_of_peak_sustained_active",
             "smsp__average_warps_issue_stalled_barrier_per_issue_active.ratio",
             "smsp__average_warps_issue_stalled_long_scoreboard_per_issue_active.ratio"]
    units = ["", "", unit, "register/thread", "%", "%", "%", "inst", "inst"]
    with path.open("w", newline="") as fh:
        w = csv.writer(fh)
        w.writerow(names)
        w.writerow(units)
        for r in rows:
            w.writerow([r.get(n, "") for n in names])


def test_summary_converts_durations_and_orders_pipes_and_stalls(tmp_path):
    m = _mod()
    raw = tmp_path / "profile.csv"
    _raw(raw, "ms", [
        {"ID": "0", "Kernel Name": "_causal_trim_fwd", "gpu__time_duration.sum": "1.159136",
         "launch__registers_per_thread": "209",
         "sm__inst_executed_pipe_xu.avg.pct_of_peak_sustained_active": "27.8",
         "sm__pipe_tensor_cycles_active.avg.pct_of_peak_sustained_active": "52.1",
         "sm__inst_executed_pipe_lsu.avg.pct_of_peak_sustained_active": "13.45",
         "smsp__average_warps_issue_stalled_barrier_per_issue_active.ratio": "0.90",
         "smsp__average_warps_issue_stalled_long_scoreboard_per_issue_active.ratio": "3.06"},
        {"ID": "1", "Kernel Name": "_merge_splits", "gpu__time_duration.sum": "0.006688",
         "launch__registers_per_thread": "220"},
    ])
    text = m.summarize(raw, ["case a", "case b"])
    lines = text.splitlines()
    first, second = lines[2], lines[3]
    assert first.startswith("| 0 | _causal_trim_fwd | 1159 |")  # ms -> µs
    assert second.startswith("| 1 | _merge_splits | 6.7 |")
    # pipes by utilisation, largest first; stalls likewise
    assert first.index("tensor (cycles) 52") < first.index("xu 28") < first.index("lsu 13")
    assert first.index("long_scoreboard 3.06") < first.index("barrier 0.90")
    assert "| – |" in second  # a metric the row lacks
    assert lines[-2:] == ["1. case a", "2. case b"]


def test_summary_reads_nanoseconds_and_both_case_file_forms(tmp_path):
    m = _mod()
    raw = tmp_path / "profile.csv"
    _raw(raw, "nsecond", [{"ID": "0", "Kernel Name": "k", "gpu__time_duration.sum": "13,472"}])
    assert m.summarize(raw).splitlines()[2].startswith("| 0 | k | 13.5 |")
    assert m._cases(["x", "y"]) == ["x", "y"]  # 2026-12-02's file
    assert m._cases({"cases": ["x"], "autotuned": {}}) == ["x"]
    (tmp_path / "profile-cases.json").write_text(json.dumps({"cases": ["only case"], "autotuned": {}}))
    assert m.main(["--summarize", str(raw)]) == 0
