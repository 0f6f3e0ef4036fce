"""The per-release table of `vllm serve` options made from vLLM's own argument parser.

sits_doctor/frameworks/data/vllm_options.json is written by tools/gen_vllm_options.py, which runs
each vLLM source release's real parser (heavy imports stubbed) and records every option action
plus a list of probes (argv snippets parsed by that release). These tests read the committed
file only: no network, no vLLM install. The facts asserted are what the parsers said; where that
differs from what was believed before (tests/data/vllm_flags.json, the research notes), the
difference is asserted explicitly and named in the test.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from packaging.version import Version

ROOT = Path(__file__).resolve().parent.parent
DATA = ROOT / "sits_doctor" / "frameworks" / "data" / "vllm_options.json"
OLD_SCAN = ROOT / "tests" / "data" / "vllm_flags.json"

KINDS = {"int", "float", "str", "bool", "json", "human_int", "list", "other"}
OPTION_KEYS = {"first", "last", "flags", "action", "type", "kind", "nargs", "choices", "default",
               "deprecated"}


@pytest.fixture(scope="module")
def data() -> dict:
    return json.loads(DATA.read_text(encoding="utf-8"))


@pytest.fixture(scope="module")
def releases(data) -> list[str]:
    return data["releases"]


def _index(releases):
    return {v: i for i, v in enumerate(releases)}


def covering(segments: list[dict], release: str, releases: list[str]) -> dict | None:
    """The segment whose [first, last] run of releases includes release, or None."""
    idx = _index(releases)
    for seg in segments:
        if idx[seg["first"]] <= idx[release] <= idx[seg["last"]]:
            return seg
    return None


def probe(data, argv: str, release: str) -> dict:
    seg = covering(data["probes"][argv], release, data["releases"])
    assert seg is not None, (argv, release)
    return seg


def flags_in(data, release: str) -> set[str]:
    out: set[str] = set()
    for segs in data["options"].values():
        seg = covering(segs, release, data["releases"])
        if seg is not None:
            out.update(seg["flags"])
    return out


def between(releases, lo: str | None = None, hi: str | None = None) -> list[str]:
    """Releases with lo <= v < hi."""
    return [v for v in releases
            if (lo is None or Version(v) >= Version(lo)) and (hi is None or Version(v) < Version(hi))]


# --- schema -----------------------------------------------------------------------------------

def test_top_level_schema(data):
    assert set(data) == {"generator", "releases", "failed", "parser", "options", "probes"}
    assert data["generator"] == "tools/gen_vllm_options.py"
    assert isinstance(data["failed"], dict)
    assert all(isinstance(k, str) and isinstance(v, str) and v for k, v in data["failed"].items())
    assert not set(data["failed"]) & set(data["releases"])
    assert DATA.stat().st_size < 1_500_000


def test_releases_sorted_unique_and_cover_the_required_ones(releases):
    assert releases == sorted(releases, key=Version)
    assert len(set(releases)) == len(releases)
    required = ["0.6.0", "0.6.3", "0.6.6.post1", "0.7.0", "0.7.3", "0.8.0", "0.8.2", "0.8.3", "0.8.4",
                "0.8.5", "0.9.0", "0.9.2", "0.10.0", "0.10.1", "0.10.2", "0.11.0", "0.11.1", "0.11.2",
                "0.12.0", "0.13.0", "0.14.0", "0.16.0", "0.17.0", "0.18.0", "0.19.0", "0.20.0", "0.33.0"]
    assert not [v for v in required if v not in releases]


def _check_segments(segments, releases, what):
    idx = _index(releases)
    assert segments, what
    prev_last = -1
    prev_body = None
    for seg in segments:
        assert seg["first"] in idx and seg["last"] in idx, (what, seg["first"], seg["last"])
        first, last = idx[seg["first"]], idx[seg["last"]]
        assert prev_last < first <= last, (what, seg["first"], seg["last"])
        body = {k: v for k, v in seg.items() if k not in ("first", "last")}
        # segments are maximal: two adjacent runs never carry the same entry
        assert not (first == prev_last + 1 and body == prev_body), (what, seg["first"])
        prev_last, prev_body = last, body


def test_parser_segments_cover_every_release_once(data, releases):
    _check_segments(data["parser"], releases, "parser")
    idx = _index(releases)
    covered = [i for seg in data["parser"] for i in range(idx[seg["first"]], idx[seg["last"]] + 1)]
    assert covered == list(range(len(releases)))
    for seg in data["parser"]:
        assert isinstance(seg["allow_abbrev"], bool)
        assert isinstance(seg["notes"], str) and seg["notes"]
        for key in ("underscore_to_dash", "config_file", "dotted_json", "dash_O"):
            assert isinstance(seg[key], bool), key


def test_option_segments(data, releases):
    assert len(data["options"]) > 300
    for dest, segs in data["options"].items():
        _check_segments(segs, releases, dest)
        for seg in segs:
            assert OPTION_KEYS <= set(seg), (dest, set(seg))
            assert seg["flags"] and all(f.startswith("-") for f in seg["flags"]), dest
            assert len(set(seg["flags"])) == len(seg["flags"]), dest
            assert seg["kind"] in KINDS, (dest, seg["kind"])
            assert isinstance(seg["action"], str) and seg["action"]
            assert seg["type"] is None or isinstance(seg["type"], str)
            assert seg["choices"] is None or all(isinstance(c, str) for c in seg["choices"])
            assert isinstance(seg["deprecated"], bool)
            if "@" in dest:
                assert seg["dest"] == dest.split("@")[0]
            else:
                assert "dest" not in seg
            _check_varies(seg, dest)


def _check_varies(seg, what):
    """An entry marked varies_between_runs lists the other outcomes seen; others carry neither."""
    if "varies_between_runs" in seg:
        assert seg["varies_between_runs"] is True, what
        alts = seg["alternatives"]
        assert alts and all(a is None or (isinstance(a, dict) and a) for a in alts), what
    else:
        assert "alternatives" not in seg, what


def test_probe_segments_cover_every_release(data, releases):
    assert len(data["probes"]) >= 20
    for argv, segs in data["probes"].items():
        _check_segments(segs, releases, argv)
        for v in releases:
            seg = covering(segs, v, releases)
            assert seg is not None, (argv, v)
            assert isinstance(seg["ok"], bool)
            if seg["ok"]:
                assert "error" not in seg
            else:
                assert isinstance(seg["error"], str) and seg["error"], (argv, v)
            _check_varies(seg, argv)


def test_the_required_probes_are_there(data):
    required = ["--disable-log-requests", "--enable-log-requests", "--max-model-len 8k",
                "--max-model-len 8192", "--compilation-config 3", "--compilation-config '{\"level\": 3}'",
                "-O3", "--enable-chunked-prefill", "--enable-chunked-prefill=false",
                "--no-enable-chunked-prefill", "--no-enable-prefix-caching", "--max-num-seq 8",
                "--max_model_len 4096", "--swap-space 4", "--kv-cache-dtype fp8",
                "--kv-cache-dtype bogus", "--block-size 24", "--gpu-memory-utilization 0.9", "-tp 2",
                "--tensor-parallel-size two"]
    assert not [p for p in required if p not in data["probes"]]


# --- what the parsers said ------------------------------------------------------------------

def test_disable_log_requests(data, releases):
    """The old scan called --disable-log-requests removed in 0.17. The parsers agree for
    0.17.0-0.32.0 (rejected), but 0.33.0 accepts it again: its EnableDisableAction generates
    --disable-X for --enable-log-requests (it sets enable_log_requests=False, the default)."""
    newest = releases[-1]
    for v in between(releases, hi="0.17.0"):
        assert probe(data, "--disable-log-requests", v)["ok"], v
    for v in between(releases, "0.17.0", "0.33.0"):
        p = probe(data, "--disable-log-requests", v)
        assert not p["ok"] and "unrecognized arguments" in p["error"], v
        assert "--disable-log-requests" not in flags_in(data, v), v
    for v in between(releases, "0.33.0"):
        p = probe(data, "--disable-log-requests", v)
        assert p["ok"] and p["dest"] == "enable_log_requests" and p["value"] is False, v
        seg = covering(data["options"]["enable_log_requests"], v, releases)
        assert seg["action"] == "EnableDisableAction"
        assert "--disable-log-requests" in seg["flags"]
        assert covering(data["options"].get("disable_log_requests", []), v, releases) is None
    assert probe(data, "--disable-log-requests", newest)["ok"]
    # --enable-log-requests exists from 0.10.1; in 0.10.1-0.16.0 both flags are real options
    assert not probe(data, "--enable-log-requests", "0.10.0")["ok"]
    for v in between(releases, "0.10.1"):
        assert probe(data, "--enable-log-requests", v)["ok"], v
    for v in between(releases, "0.10.1", "0.17.0"):
        seg = covering(data["options"]["disable_log_requests"], v, releases)
        assert seg["deprecated"], v


def test_max_model_len_human_readable_from_0_8_4(data, releases):
    for v in between(releases, hi="0.8.4"):
        p = probe(data, "--max-model-len 8k", v)
        assert not p["ok"] and "invalid int value: '8k'" in p["error"], v
    for v in between(releases, "0.8.4"):
        p = probe(data, "--max-model-len 8k", v)
        assert p["ok"] and p["value"] == 8000, v
        assert probe(data, "--max-model-len 8K", v)["value"] == 8192, v
    for v in releases:
        assert probe(data, "--max-model-len 8192", v)["value"] == 8192, v
    # "auto" / -1 from 0.14.0 (human_readable_int_or_auto)
    assert not probe(data, "--max-model-len auto", "0.13.0")["ok"]
    for v in between(releases, "0.14.0"):
        assert probe(data, "--max-model-len auto", v)["value"] == -1, v


def test_compilation_config_bare_level(data, releases):
    """Believed: `--compilation-config 3` rejected from 0.10 on. The parsers say: unknown option
    before 0.6.5, accepted 0.6.5-0.9.1, rejected (pydantic: "Input should be an object") from
    0.9.2 on, one release earlier than believed. `-O3` stays accepted everywhere from 0.6.5 (from
    0.12.0 it is --optimization-level)."""
    for v in between(releases, hi="0.6.5"):
        assert not probe(data, "--compilation-config 3", v)["ok"], v
    for v in between(releases, "0.6.5", "0.9.2"):
        assert probe(data, "--compilation-config 3", v)["ok"], v
    for v in between(releases, "0.9.2"):
        p = probe(data, "--compilation-config 3", v)
        assert not p["ok"] and "Input should be an object" in p["error"], v
    for v in between(releases, "0.6.5"):
        assert probe(data, "-O3", v)["ok"], v
    for v in between(releases, "0.12.0"):
        assert probe(data, "-O3", v)["dest"] == "optimization_level", v
    # the JSON form with "level" is refused once the field is gone (0.18.0)
    level = "--compilation-config '{\"level\": 3}'"
    for v in between(releases, "0.6.5", "0.18.0"):
        assert probe(data, level, v)["ok"], v
    for v in between(releases, "0.18.0"):
        p = probe(data, level, v)
        assert not p["ok"] and "level" in p["error"], v


def test_enable_chunked_prefill_false(data, releases):
    for v in between(releases, hi="0.8.5"):
        p = probe(data, "--enable-chunked-prefill=false", v)
        assert p["ok"] and p["value"] is False, v
        assert covering(data["options"]["enable_chunked_prefill"], v, releases)["action"] == "StoreBoolean"
        assert not probe(data, "--no-enable-chunked-prefill", v)["ok"], v
    for v in between(releases, "0.8.5"):
        p = probe(data, "--enable-chunked-prefill=false", v)
        assert not p["ok"] and "ignored explicit argument 'false'" in p["error"], v
        p = probe(data, "--no-enable-chunked-prefill", v)
        assert p["ok"] and p["value"] is False, v
    for v in releases:
        assert probe(data, "--enable-chunked-prefill", v)["value"] is True, v


def test_no_enable_prefix_caching_from_0_6_5(data, releases):
    for v in between(releases, hi="0.6.5"):
        assert not probe(data, "--no-enable-prefix-caching", v)["ok"], v
    for v in between(releases, "0.6.5"):
        p = probe(data, "--no-enable-prefix-caching", v)
        assert p["ok"] and p["value"] is False, v


@pytest.mark.parametrize(
    "flag, dest, first, last",
    [
        ("--swap-space", "swap_space", "0.6.0", "0.17.1"),
        ("--calculate-kv-scales", "calculate_kv_scales", "0.7.0", "0.27.1"),
        ("--max-seq-len-to-capture", "max_seq_len_to_capture", "0.6.0", "0.10.2"),
        ("--cuda-graph-sizes", "cuda_graph_sizes", "0.9.0", "0.12.0"),
    ],
)
def test_removed_options(data, releases, flag, dest, first, last):
    """--swap-space gone from 0.18, --calculate-kv-scales from 0.28, --max-seq-len-to-capture from
    0.11, --cuda-graph-sizes from 0.13: the parsers agree."""
    segs = data["options"][dest]
    assert segs[0]["first"] == first and segs[-1]["last"] == last
    for v in releases:
        present = Version(first) <= Version(v) <= Version(last)
        assert (flag in flags_in(data, v)) == present, (flag, v)
    probe_argv = {"--swap-space": "--swap-space 4", "--calculate-kv-scales": "--calculate-kv-scales",
                  "--max-seq-len-to-capture": "--max-seq-len-to-capture 8192",
                  "--cuda-graph-sizes": "--cuda-graph-sizes 8 16"}[flag]
    for v in releases:
        present = Version(first) <= Version(v) <= Version(last)
        p = probe(data, probe_argv, v)
        assert p["ok"] == present, (flag, v)
        if not present:
            assert "unrecognized arguments" in p["error"], (flag, v)


def test_abbreviations_follow_allow_abbrev(data, releases):
    """argparse prefix matching: `--max-num-seq 8` is --max-num-seqs wherever the serve parser
    has allow_abbrev (every release so far: none of them turns it off)."""
    for v in releases:
        abbrev = covering(data["parser"], v, releases)["allow_abbrev"]
        p = probe(data, "--max-num-seq 8", v)
        assert p["ok"] == abbrev, v
        if abbrev:
            assert p["dest"] == "max_num_seqs" and p["value"] == 8, v
    assert all(seg["allow_abbrev"] for seg in data["parser"])


def test_underscores_and_config_file(data, releases):
    for v in releases:
        parser = covering(data["parser"], v, releases)
        assert parser["underscore_to_dash"] and parser["config_file"], v
        p = probe(data, "--max_model_len 4096", v)
        assert p["ok"] and p["dest"] == "max_model_len" and p["value"] == 4096, v


def test_values_the_parsers_reject(data, releases):
    for v in releases:
        p = probe(data, "--tensor-parallel-size two", v)
        assert not p["ok"] and "invalid int value: 'two'" in p["error"], v
        assert probe(data, "-tp 2", v)["value"] == 2, v
        assert probe(data, "--gpu-memory-utilization 0.9", v)["value"] == 0.9, v
        assert probe(data, "--kv-cache-dtype fp8", v)["ok"], v
    # --kv-cache-dtype has choices up to 0.32.0; 0.33.0 types it `CacheDType | str`: no choices
    for v in between(releases, hi="0.33.0"):
        p = probe(data, "--kv-cache-dtype bogus", v)
        assert not p["ok"] and "invalid choice: 'bogus'" in p["error"], v
    for v in between(releases, "0.33.0"):
        assert probe(data, "--kv-cache-dtype bogus", v)["ok"], v
    # --block-size: a fixed list of choices up to 0.17.1, any int from 0.18.0
    for v in between(releases, hi="0.18.0"):
        p = probe(data, "--block-size 24", v)
        assert not p["ok"] and "invalid choice: 24" in p["error"], v
    for v in between(releases, "0.18.0"):
        assert probe(data, "--block-size 24", v)["value"] == 24, v


# --- the old source-text scan against the parser table ---------------------------------------

# (flag, release): why the regex scan of the source text and the parser disagree.
KNOWN_SCAN_DISAGREEMENTS = {
    ("--disable-log-requests", "0.33.0"): (
        "not in the source text, but generated by EnableDisableAction from --enable-log-requests"
    ),
}


def test_old_scan_agrees_where_it_saw_the_flag(data, releases):
    """tests/data/vllm_flags.json (tools/scan_vllm_flags.py) lists, per flag, the releases whose
    source contains it literally. For every release both cover, the parser table must have the
    flag exactly there, except the disagreements named in KNOWN_SCAN_DISAGREEMENTS, which must
    all still occur (so a stale entry or a new disagreement fails here)."""
    scan = json.loads(OLD_SCAN.read_text(encoding="utf-8"))
    both = [v for v in scan["scanned"] if v in set(releases)]
    assert len(both) >= 35
    flags = {v: flags_in(data, v) for v in both}
    disagreements = set()
    for flag, present in scan["present"].items():
        for v in both:
            if (v in present) != (flag in flags[v]):
                disagreements.add((flag, v))
    assert disagreements == set(KNOWN_SCAN_DISAGREEMENTS), sorted(disagreements)


def test_guided_decoding_backend_choices_vary_between_processes_in_0_8_5(data, releases):
    """0.8.5 builds --guided-decoding-backend's choices from one member of
    Union[Literal[V0 backends], Literal[V1 backends]] picked by iterating a set, so `vllm serve`
    gets the V0 or the V1 list depending on the process: "outlines" is sometimes refused."""
    seg = covering(data["options"]["guided_decoding_backend"], "0.8.5", releases)
    assert seg["varies_between_runs"] is True
    lists = [seg["choices"]] + [alt["choices"] for alt in seg["alternatives"]]
    assert sorted(map(tuple, lists)) == [("auto", "guidance", "lm-format-enforcer", "outlines", "xgrammar"),
                                         ("auto", "guidance", "xgrammar")]
    p = probe(data, "--guided-decoding-backend outlines", "0.8.5")
    assert p["varies_between_runs"] is True
    assert {p["ok"]} | {alt.get("ok", p["ok"]) for alt in p["alternatives"]} == {True, False}
    # everywhere else the parser table is the same in every process
    unstable = {(k, s["first"]) for k, segs in data["options"].items() for s in segs
                if s.get("varies_between_runs")}
    assert {k for k, _ in unstable} == {"guided_decoding_backend"}, unstable
