"""Known facts about TensorRT-LLM's LLM-API options, checked against the data that
``tools/gen_trtllm_options.py`` derived from the releases' ``llm_args.py``
(``sits_doctor/frameworks/data/trtllm_options.json``).

Where the source disagrees with what was believed, the test asserts the source:
``KvCacheConfig.free_gpu_memory_fraction`` has no Python default in 1.0.0 and 1.1.0 (``None``; the
0.9 is the C++ executor's default, which the field's description states as "Default is 90%");
1.2.0 moved the 0.9 into the Python field.
Releases the data does not cover (listed under ``missing`` with the reason) are skipped, not
assumed.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from packaging.version import Version

DATA = Path(__file__).resolve().parent.parent / "sits_doctor" / "frameworks" / "data" / "trtllm_options.json"
OPTIONS = json.loads(DATA.read_text(encoding="utf-8"))
RELEASES = OPTIONS["releases"]
ONE_X = [r for r in RELEASES if Version(r) >= Version("1.0")]
PRE_1_0 = [r for r in RELEASES if Version("0.19") <= Version(r) < Version("1.0")]
PRE_1_0_KEYS = ["use_cuda_graph", "cuda_graph_batch_sizes", "cuda_graph_max_batch_size",
                "cuda_graph_padding_enabled", "kv_cache_dtype", "mixed_sampler", "autotuner_enabled",
                "pytorch_backend_config"]


def cls(name: str, release: str) -> dict | None:
    """The class as the release defines it, or None."""
    v = Version(release)
    for seg in OPTIONS["classes"].get(name, []):
        if Version(seg["first"]) <= v <= Version(seg["last"]):
            return seg
    return None


def root(backend: str, release: str) -> str:
    v = Version(release)
    (seg,) = [s for s in OPTIONS["roots"][backend] if Version(s["first"]) <= v <= Version(s["last"])]
    return seg["class"]


def test_shape():
    assert OPTIONS["generator"] == "tools/gen_trtllm_options.py"
    assert RELEASES == sorted(RELEASES, key=Version)
    assert set(OPTIONS["how"]) == set(RELEASES) and set(OPTIONS["how"].values()) <= {"import", "ast"}
    for name, segs in OPTIONS["classes"].items():
        for seg in segs:
            assert seg["first"] in RELEASES and seg["last"] in RELEASES, name
            assert seg["extra"] in ("forbid", "ignore", "allow"), name
            for fname, f in seg["fields"].items():
                assert {"type", "default", "alias", "deprecated"} <= set(f), (name, fname)
    for key, held in OPTIONS["field_class"].items():
        owner = key.split(".")[0]
        names = held if isinstance(held, list) else [held]
        if names and isinstance(names[0], dict):
            names = [c for s in names for c in (s["class"] if isinstance(s["class"], list) else [s["class"]])]
        assert owner in OPTIONS["classes"] and all(n in OPTIONS["classes"] for n in names), key


@pytest.mark.parametrize("release", ONE_X)
def test_1x_pytorch_root_forbids_unknown_keys(release):
    name = root("pytorch", release)
    assert name == "TorchLlmArgs"
    assert cls(name, release)["extra"] == "forbid"
    assert cls(root("tensorrt", release), release)["extra"] == "forbid"


@pytest.mark.parametrize("release", ONE_X)
def test_1x_cuda_graph_config_replaces_use_cuda_graph(release):
    fields = cls("TorchLlmArgs", release)["fields"]
    assert "cuda_graph_config" in fields
    assert OPTIONS["field_class"]["TorchLlmArgs.cuda_graph_config"] == "CudaGraphConfig"
    for key in PRE_1_0_KEYS:
        assert key not in fields, f"{key} is still a TorchLlmArgs field in {release}"


@pytest.mark.parametrize("release", ONE_X)
def test_1x_kv_cache_config(release):
    kv = cls("KvCacheConfig", release)
    assert kv["extra"] == "forbid"
    assert "dtype" in kv["fields"] and kv["fields"]["dtype"]["default"] == "auto"
    # The source's truth: no Python default (None) before 1.2, TensorRT-LLM's C++ side applies 0.9;
    # 1.2.0 declares the 0.9 on the field itself.
    expected = 0.9 if Version(release) >= Version("1.2") else None
    assert kv["fields"]["free_gpu_memory_fraction"]["default"] == expected
    assert kv["fields"]["free_gpu_memory_fraction"]["type"] == "Optional[float]"


@pytest.mark.parametrize("release", ONE_X)
def test_1x_cuda_graph_config_defaults(release):
    fields = cls("CudaGraphConfig", release)["fields"]
    assert fields["enable_padding"]["default"] is False
    assert fields["max_batch_size"]["default"] == 0
    assert fields["batch_sizes"]["default"] is None
    torch = cls("TorchLlmArgs", release)["fields"]
    assert torch["cuda_graph_config"].get("default_factory") == "CudaGraphConfig"  # on unless set to null


@pytest.mark.parametrize("release", PRE_1_0 or [pytest.param("0.19.0", marks=pytest.mark.skip(
    reason="0.19-0.21 are not in the data: " + OPTIONS.get("missing", {}).get("0.19.0", "not read")))])
def test_pre_1_0_use_cuda_graph(release):
    fields = cls(root("pytorch", release), release)["fields"]
    assert "use_cuda_graph" in fields
    assert fields["use_cuda_graph"]["default"] is False


def test_missing_releases_say_why():
    for release, reason in OPTIONS.get("missing", {}).items():
        assert release not in RELEASES and reason


def fields(name: str, release: str) -> set[str]:
    seg = cls(name, release)
    assert seg is not None, f"{name} missing in {release}"
    return set(seg["fields"])


@pytest.mark.skipif("1.2.0" not in RELEASES, reason="1.2.0 is not in the data")
def test_1_2_0_read_from_the_release_docs():
    torch = cls("TorchLlmArgs", "1.2.0")
    assert torch["extra"] == "forbid"
    assert {"cuda_graph_config", "kv_cache_config", "moe_config", "nvfp4_gemm_config",
            "sparse_attention_config", "sampler_type", "ray_placement_config"} <= set(torch["fields"])
    # Removed in 1.2.0: the dummy build_config (TensorRT backend only now) and the 1.0 sampler flags.
    assert not {"build_config", "enable_mixed_sampler", "enable_trtllm_sampler"} & set(torch["fields"])
    assert "build_config" in fields("TrtLlmArgs", "1.2.0")
    assert not {"auto_parallel", "auto_parallel_world_size"} & fields("TrtLlmArgs", "1.2.0")
    assert torch["fields"]["max_num_tokens"]["default"] == 8192
    kv = fields("KvCacheConfig", "1.2.0")
    assert {"free_gpu_memory_fraction", "enable_block_reuse", "tokens_per_block", "max_gpu_total_bytes",
            "mamba_ssm_cache_dtype"} <= kv
    assert cls("KvCacheConfig", "1.2.0")["extra"] == "forbid"
    # speculative_model_dir became speculative_model, still accepted under the old name.
    spec = cls("EagleDecodingConfig", "1.2.0")["fields"]
    assert "speculative_model_dir" not in spec
    assert spec["speculative_model"]["validation_alias"] == ["speculative_model", "speculative_model_dir"]
    assert "SaveHiddenStatesDecodingConfig" in OPTIONS["classes"]
    assert cls("CacheTransceiverConfig", "1.2.0")["fields"]["backend"]["type"] == \
        "Optional[Literal['DEFAULT', 'UCX', 'NIXL', 'MOONCAKE', 'MPI']]"


@pytest.mark.skipif("1.1.0" not in RELEASES, reason="1.1.0 is not in the data")
def test_1_1_0_between_1_0_and_1_2():
    torch = fields("TorchLlmArgs", "1.1.0")
    assert {"sampler_type", "kv_connector_config", "batch_wait_timeout_ms", "build_config"} <= torch
    assert not {"enable_mixed_sampler", "enable_trtllm_sampler", "nvfp4_gemm_config"} & torch
    assert {"auto_parallel", "auto_parallel_world_size"} <= fields("TrtLlmArgs", "1.1.0")
    assert "speculative_model_dir" in fields("DecodingBaseConfig", "1.1.0")
    assert "is_auto_heuristic" not in fields("NGramDecodingConfig", "1.1.0")
    assert "tokens_per_block" in fields("KvCacheConfig", "1.1.0")
    assert cls("TorchLlmArgs", "1.1.0")["fields"]["max_num_tokens"]["default"] is None
