"""Issue 26 "Truth on real configs": vLLM knowledge and hardware resolution, each case from a
small file like the public one it was found in."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

from sits_doctor import CheckOptions, check
from sits_doctor.catalogs import gpus
from sits_doctor.frameworks import vllm as fw

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tools"))
import gen_vllm_options as gen  # noqa: E402


def run(tmp_path, monkeypatch, name, text, select, targets=()):
    (tmp_path / name).write_text(text)
    monkeypatch.chdir(tmp_path)
    report = check([name], CheckOptions(targets=list(targets), isolated=True, select=select))
    assert not report.errors and not report.internal_errors, (report.errors, report.internal_errors)
    return report


# --- 1. the parser table knows 0.34.0, and NEWEST follows it --------------------------------

def test_newest_is_the_tables_newest_release():
    data = json.loads((ROOT / "sits_doctor/frameworks/data/vllm_options.json").read_text())
    assert fw.NEWEST == data["releases"][-1] == "0.34.0"
    from sits_doctor.versions import NEWEST_KNOWN
    assert NEWEST_KNOWN["vllm"] == fw.NEWEST


def test_what_moved_between_0_33_and_0_34():
    """Read off 0.34.0's own parser: new flags, and gpu_memory_utilization's default gone to None."""
    assert fw.lookup_flag("--enable-extensible-kv-cache", "0.34.0") is not None
    assert fw.lookup_flag("--enable-extensible-kv-cache", "0.33.0") is None
    assert fw.lookup_flag("--max-num-inflight-kv-loads", "0.34.0") is not None
    assert fw.lookup_flag("--gpu-memory-utilization", "0.34.0").segment["default"] is None
    assert fw.lookup_flag("--gpu-memory-utilization", "0.33.0").segment["default"] == 0.92
    assert fw.lookup_flag("--all2all-backend", "0.34.0").segment["deprecated"] is True


@pytest.mark.parametrize("version, extra, expected", [
    ("0.33.0", {}, 0.92), ("0.34.0", {}, 1.0), ("0.19.1", {}, 0.90),
    ("0.34.0", {"kv_cache_memory_bytes": 1 << 30}, 0.92), ("0.34.0", {"num_gpu_blocks_override": 100}, 0.92),
    ("0.34.0", {"enable_extensible_kv_cache": False}, 0.92), ("0.34.0", {"enable_extensible_kv_cache": True}, 1.0),
])
def test_utilization_default_follows_the_extensible_kv_cache(version, extra, expected):
    class P:
        def value(self, key, default=None):
            return extra.get(key, default)
    assert fw.utilization_default(version, P()) == expected


def test_unfold_fold_round_trips_the_committed_table():
    path = ROOT / "sits_doctor/frameworks/data/vllm_options.json"
    text = path.read_text()
    data = json.loads(text)
    assert gen.dump(gen.fold(gen.unfold(data), data["failed"])) == text


def test_fold_adds_a_release_as_its_own_segments():
    data = json.loads((ROOT / "sits_doctor/frameworks/data/vllm_options.json").read_text())
    per = gen.unfold(data)
    newest = per["0.34.0"]
    per["9.9.9"] = json.loads(json.dumps(newest))
    per["9.9.9"]["options"].pop("swap_space", None)
    per["9.9.9"]["options"].pop("max_loras")
    per["9.9.9"]["options"]["brand_new"] = {"flags": ["--brand-new"], "kind": "int"}
    out = gen.fold(per, data["failed"])
    assert out["releases"][-1] == "9.9.9"
    assert out["options"]["max_loras"][-1]["last"] == "0.34.0"
    assert out["options"]["brand_new"] == [{"first": "9.9.9", "last": "9.9.9", "flags": ["--brand-new"], "kind": "int"}]
    assert out["options"]["max_model_len"][-1]["last"] == "9.9.9"
    assert out["parser"][-1]["last"] == "9.9.9"


def test_update_writes_nothing_when_the_control_run_differs(tmp_path, monkeypatch):
    data = json.loads((ROOT / "sits_doctor/frameworks/data/vllm_options.json").read_text())
    out = tmp_path / "t.json"
    out.write_text(json.dumps(data))
    monkeypatch.setattr(gen, "download", lambda root, minimum, skip=frozenset(): {})
    monkeypatch.setattr(gen, "find_releases", lambda root: {"0.34.0": tmp_path, "9.9.9": tmp_path})
    results = {"0.34.0": {"error": "boom"}, "9.9.9": {"error": "boom"}}
    monkeypatch.setattr(gen, "_run_all", lambda versions, found, args: {v: results[v] for v in versions})
    args = type("A", (), {"out": out, "sdists": tmp_path, "min": "0.6.0"})()
    assert gen.update(args) == 1
    assert json.loads(out.read_text()) == data


# --- 2. GKE's accelerator label names the GPU ------------------------------------------------

GKE = """apiVersion: apps/v1
kind: Deployment
metadata: {{name: vllm}}
spec:
  template:
    spec:
      nodeSelector:
        cloud.google.com/gke-accelerator: {label}
      containers:
        - name: vllm
          image: vllm/vllm-openai:v0.11.0
          args: ["--model", "meta-llama/Llama-3.1-70B-Instruct", "--max-model-len", "32768"]
          resources:
            limits:
              nvidia.com/gpu: "1"
"""


@pytest.mark.parametrize("label, card", [
    ("nvidia-l4", "L4"), ("nvidia-tesla-t4", "T4"), ("nvidia-tesla-a100", "A100-SXM-40GB"),
    ("nvidia-a100-80gb", "A100-SXM-80GB"), ("nvidia-h100-80gb", "H100-SXM-80GB"),
    ("nvidia-h100-mega-80gb", "H100-SXM-80GB"), ("nvidia-h200-141gb", "H200-SXM-141GB"),
])
def test_gke_accelerator_label_sizes_the_memory_rules(tmp_path, monkeypatch, label, card):
    report = run(tmp_path, monkeypatch, "deploy.yaml", GKE.format(label=label), ["SITS001"])
    (f,) = [f for f in report.findings if f.code == "SITS001"]
    gpu = next(e for e in f.evidence if e.startswith("GPU: "))
    assert gpu.startswith(f"GPU: {card},") and f"cloud.google.com/gke-accelerator '{label}' (deploy.yaml:8:" in gpu


def test_gke_unknown_accelerator_is_no_gpu():
    with pytest.raises(gpus.UnknownGpu, match="did you mean 'nvidia-l4'"):
        gpus.by_gke_accelerator("nvidia-l44")
    assert gpus.by_node_label("nvidia.com/gpu.product", "NVIDIA-L4")[0].name == "L4"


def test_gpu_product_label_wins_over_gke_label(tmp_path, monkeypatch):
    text = GKE.format(label="nvidia-l4").replace(
        "      nodeSelector:\n", "      nodeSelector:\n        nvidia.com/gpu.product: NVIDIA-A100-SXM4-80GB\n")
    (f,) = run(tmp_path, monkeypatch, "deploy.yaml", text, ["SITS001"]).findings
    assert any(e.startswith("GPU: A100-SXM-80GB,") and "nvidia.com/gpu.product" in e for e in f.evidence)


def test_gke_label_in_required_node_affinity(tmp_path, monkeypatch):
    text = GKE.format(label="x").replace("""      nodeSelector:
        cloud.google.com/gke-accelerator: x
""", """      affinity:
        nodeAffinity:
          requiredDuringSchedulingIgnoredDuringExecution:
            nodeSelectorTerms:
              - matchExpressions:
                  - {key: cloud.google.com/gke-accelerator, operator: In, values: [nvidia-tesla-t4]}
""")
    (f,) = run(tmp_path, monkeypatch, "deploy.yaml", text, ["SITS001"]).findings
    assert any(e.startswith("GPU: T4,") for e in f.evidence)


# --- 6. accepted but without effect ----------------------------------------------------------

PRODUCTION_STACK = """servingEngineSpec:
  modelSpec:
    - name: "llama"
      repository: "vllm/vllm-openai"
      tag: "{tag}"
      modelURL: "meta-llama/Llama-3.1-8B-Instruct"
{lora}      vllmConfig:
        maxLoras: 4
        maxModelLen: 8192
"""


def test_production_stack_max_loras_without_enable_lora(tmp_path, monkeypatch):
    report = run(tmp_path, monkeypatch, "values.yaml", PRODUCTION_STACK.format(tag="v0.11.0", lora=""), ["SITS204"])
    (f,) = report.findings
    assert f.render().startswith("values.yaml:8:9: SITS204 [warning] --max_loras is accepted by vLLM 0.11.0 but has no effect")
    assert "--enable-lora" in f.message and "LoRAConfig" in " ".join(f.evidence)


def test_production_stack_max_loras_with_enable_lora(tmp_path, monkeypatch):
    text = PRODUCTION_STACK.format(tag="v0.11.0", lora="      enableLoRA: true\n")
    assert run(tmp_path, monkeypatch, "values.yaml", text, ["SITS204"]).findings == []


@pytest.mark.parametrize("version, expected", [
    ("0.10.2", None), ("0.11.0", "warning"), ("0.17.1", "warning"), ("0.18.0", "error"),
])
def test_swap_space_ignored_on_v1_only_releases(tmp_path, monkeypatch, version, expected):
    text = "model: ./m\nswap-space: 16\nserved-model-name: m\n"
    found = run(tmp_path, monkeypatch, "serve.yaml", text, ["SITS204"], [f"vllm=={version}"]).findings
    if expected is None:
        assert found == []
        return
    (f,) = found
    assert f.severity.value == expected
    if expected == "warning":
        assert "accepted by vLLM" in f.message and "has no effect" in f.message
        assert f.fixes and f.fixes[0].title.startswith("remove")


def test_ignored_table_bounds():
    assert fw.ignored_at("swap_space", "0.11.0") is not None
    assert fw.ignored_at("swap_space", "0.10.2") is None
    assert fw.ignored_at("swap_space", "0.18.0") is None
    assert fw.ignored_at("max_loras", "0.9.1") is None
    assert fw.ignored_at("max_loras", "0.34.0") is None  # no plan: cannot say --enable-lora is off
    # the table's last release with --swap-space is the last one the entry covers
    assert fw.flag_history("--swap-space")[-1][1] == fw.IGNORED["swap_space"].last


RAY = """applications:
  - name: llm
    import_path: ray.serve.llm:build_openai_app
    args:
      llm_configs:
        - model_loading_config:
            model_id: llama
            model_source: meta-llama/Llama-3.1-8B-Instruct
          engine_kwargs:
            max_model_len: 8192
            swap_space: 4
"""


def test_ray_serve_unknown_engine_kwarg_quotes_rays_error(tmp_path, monkeypatch):
    report = run(tmp_path, monkeypatch, "serve.yaml", RAY, ["SITS204"], ["vllm==0.25.1"])
    (f,) = report.findings
    assert f.message == "swap_space was removed in vLLM 0.18.0: Ray Serve LLM fails to start the deployment"
    assert f.evidence[0] == "Ray Serve LLM prints: ValueError: Unknown engine argument: swap_space"
    assert "unrecognized arguments" not in f.message


# --- 4. SkyPilot accelerator sets are sized for their smallest member -------------------------

SKY = """resources:
  accelerators: {acc}
envs:
  MODEL: meta-llama/Llama-3.1-8B-Instruct
run: |
  vllm serve $MODEL --max-model-len 131072
"""


@pytest.mark.parametrize("acc, card, listed", [
    ("{A10G:1, L4:1}", "L4", "A10G:1, L4:1"),
    ("{L40S: 1, A10G: 1}", "A10G", "L40S:1, A10G:1"),
    ("[A100-80GB:1, L4:1]", "L4", "A100-80GB:1, L4:1"),
])
def test_skypilot_any_of_set_sized_for_the_smallest(tmp_path, monkeypatch, acc, card, listed):
    (f,) = run(tmp_path, monkeypatch, "sky.yaml", SKY.format(acc=acc), ["SITS001"]).findings
    gpu = next(e for e in f.evidence if e.startswith("GPU: "))
    assert gpu.startswith(f"GPU: {card},")
    assert f"any of {listed}: sized for the one with the least memory, {card}" in gpu


def test_skypilot_set_with_an_unknown_member_names_no_gpu(tmp_path, monkeypatch):
    report = run(tmp_path, monkeypatch, "sky.yaml", SKY.format(acc="{A10G:1, Z9000:1}"), ["SITS001"])
    assert not [f for f in report.findings if f.code == "SITS001" and f.severity.value == "error"]


def test_smallest_of_a_set():
    assert gpus.smallest(["H100", "A10G", "L4"])[0] == 2
    assert gpus.smallest(["H100", "nope"]) is None
    assert gpus.smallest([]) is None


# --- 5. renamed Hub repositories resolve to the catalog's entry, and say so --------------------

@pytest.mark.parametrize("written, stored, says", [
    ("meta-llama/Meta-Llama-3.1-8B-Instruct", "meta-llama/Llama-3.1-8B-Instruct", "was renamed"),
    ("meta-llama/Meta-Llama-3.1-70B-Instruct", "meta-llama/Llama-3.1-70B-Instruct", "was renamed"),
    ("meta-llama/llama-3.1-8b", "meta-llama/Meta-Llama-3.1-8B", "is the Hugging Face Hub's current name of"),
])
def test_renamed_models_resolve(written, stored, says):
    from sits_doctor.catalogs import models

    assert models.lookup(written) is None
    entry, why = models.lookup_renamed(written)
    assert entry.hub_id == stored and says in why and written in why


def test_renames_never_shadow_an_exact_entry_or_guess():
    from sits_doctor.catalogs import models

    assert models.lookup_renamed("meta-llama/Meta-Llama-3-8B-Instruct") is None  # Llama 3 kept its name
    assert models.lookup_renamed("meta-llama/Meta-Llama-3.1-405B-Instruct") is None  # neither name in the catalog
    assert models.lookup_renamed(None) is None


def test_renamed_model_feeds_the_rules_with_the_rename_in_the_evidence(tmp_path, monkeypatch):
    text = "model: meta-llama/Meta-Llama-3.1-8B-Instruct\nmax-model-len: 262144\nserved-model-name: m\n"
    (f,) = run(tmp_path, monkeypatch, "serve.yaml", text, ["SITS202"]).findings
    assert "exceeds the 131072" in f.message
    assert any("meta-llama/Meta-Llama-3.1-8B-Instruct was renamed meta-llama/Llama-3.1-8B-Instruct" in e
               for e in f.evidence)


def test_cpu_offload_is_not_counted_on_the_gpu_so_memory_is_not_checked(tmp_path, monkeypatch):
    """A KubeAI catalog entry serving a 70B model on one GH200 with --cpu-offload-gb=60: the
    memory model does not follow the offload, so it says so instead of an out-of-memory error."""
    text = """apiVersion: kubeai.org/v1
kind: Model
metadata: {name: llama-70b-gh200}
spec:
  url: hf://meta-llama/Llama-3.1-70B-Instruct
  engine: VLLM
  args: ["--max-model-len=32768", "--cpu-offload-gb=60"]
  resourceProfile: nvidia-gpu-gh200:1
"""
    (f,) = run(tmp_path, monkeypatch, "m.yaml", text, ["SITS001"]).findings
    assert f.severity.value == "info" and "--cpu-offload-gb '60'" in f.message
    assert "memory model does not count" in f.message
    no_offload = text.replace(', "--cpu-offload-gb=60"', "")
    (f,) = run(tmp_path, monkeypatch, "m.yaml", no_offload, ["SITS001"]).findings
    assert f.severity.value == "error" and "GH200-96GB" in f.message


# --- 0.34: the KV-cache startup check's advice follows the extensible KV cache ------------------

def _pool(util, fixed=None):
    from sits_doctor.frameworks import vllm_memory

    gib = 1 << 30
    return vllm_memory.pool(version="0.34.0", memory_bytes=22 * gib, utilization=util, weights_bytes=15 * gib,
                            kv_bytes_per_token=128 * 1024, batched_tokens=2048, hidden=4096, intermediate=14336,
                            kv_cache_memory_bytes=fixed, vocab=128256, max_num_seqs=256)


def test_startup_message_at_0_34_names_the_extensible_kv_cache():
    from sits_doctor.frameworks import vllm_memory

    ok, why = vllm_memory.startup_check(131072, _pool(1.0), "0.34.0")
    assert ok is False and "The extensible KV cache already takes all device memory" in why
    assert why.endswith("Decreasing `max_model_len` also reduces what is needed.")
    ok, why = vllm_memory.startup_check(131072, _pool(0.9), "0.34.0")
    assert "within `gpu_memory_utilization`=0.9; increase it (with the extensible KV cache it defaults to 1.0)" in why
    ok, why = vllm_memory.startup_check(131072, _pool(0.9, fixed=2 << 30), "0.34.0")
    assert "Try increasing `gpu_memory_utilization` when initializing the engine (this flag also controls" in why
    ok, why = vllm_memory.startup_check(131072, _pool(0.9), "0.33.0")
    assert why.endswith("Try increasing `gpu_memory_utilization` or decreasing `max_model_len` when initializing the engine.")


def test_no_memory_message_at_0_34():
    from sits_doctor.frameworks import vllm_memory

    gib = 1 << 30
    p = vllm_memory.pool(version="0.34.0", memory_bytes=16 * gib, utilization=1.0, weights_bytes=15.5 * gib,
                         kv_bytes_per_token=128 * 1024, batched_tokens=2048, hidden=4096, intermediate=14336,
                         vocab=128256, max_num_seqs=256)
    ok, why = vllm_memory.startup_check(8192, p, "0.34.0")
    assert ok is False and why.startswith("No available memory for the cache blocks. The extensible KV cache")


@pytest.mark.parametrize("acc, expected", [
    ("8", {}),                      # a number names no card
    ("[1, 2]", {}),                 # list items that are not names
    ("{A100:8: 8}", {}),            # a count written twice
    ("[H100:8]", {"gpu_product": ("H100", "[H100:8]"), "gpu_count": ("8", "[H100:8]")}),  # one member: as written
    ("{L4: 1, A10G: 2}", {"gpu_product": ("L4", "any of L4:1, A10G:2: sized for the one with the least memory, L4"),
                          "gpu_count": ("1", "{L4: 1, A10G: 2}")}),
    ("[H100:2, A100:2]", {"gpu_product": ("A100", "any of H100:2, A100:2: sized for the one with the least memory, "
                                                   "A100 (A100-SXM-40GB)"), "gpu_count": ("2", "[H100:2, A100:2]")}),
])
def test_skypilot_accelerator_values_exactly(acc, expected):
    from sits_doctor.loaders import skypilot
    from sits_doctor.source_yaml import parse_yaml

    (doc,) = parse_yaml(SKY.format(acc=acc), "sky.yaml")
    (plan,) = skypilot.plans(doc)
    assert {k: v.value for k, v in plan.hardware.items()} == {k: v[0] for k, v in expected.items()}
    gpu = plan.hardware.get("gpu_product")
    if gpu is not None:
        said = expected["gpu_product"][1]
        if said.startswith("any of"):  # a set: the value says which member it was sized for
            assert gpu.raw == said
        else:  # one member: the value as parsed
            assert gpu.raw == ["H100:8"]


def test_kubeai_env_that_is_not_a_map_is_ignored():
    from sits_doctor.loaders import kubeai
    from sits_doctor.source_yaml import parse_yaml

    text = ("apiVersion: kubeai.org/v1\nkind: Model\nmetadata: {name: m}\nspec:\n  url: hf://org/m\n  engine: VLLM\n"
            "  env: [A, B]\n  resourceProfile: nvidia-gpu-l4:1\n")
    (doc,) = parse_yaml(text, "m.yaml")
    (plan,) = kubeai.plans(doc)
    assert plan.env == {} and plan.hardware["gpu_product"].value == "L4"


def test_catalog_model_repr():
    from sits_doctor.catalogs import models

    assert repr(models.lookup("meta-llama/Llama-3.1-8B-Instruct")) == "CatalogModel('meta-llama/Llama-3.1-8B-Instruct')"


# --- which parser reads the words is a fact the loader sets, not a display string ------------

KUBEAI = """apiVersion: kubeai.org/v1
kind: Model
metadata:
  name: m1
spec:
  url: hf://org/name
  engine: VLLM
  args:
{args}
"""


def test_kubeai_stray_word_is_absorbed_by_model_tag(tmp_path, monkeypatch):
    """KubeAI starts `python3 -m vllm.entrypoints.openai.api_server --model=...`: the api_server
    parser's optional model_tag (≥0.10.0) takes one stray word, so the server starts."""
    text = KUBEAI.format(args="    - --enable-prefix-caching\n    - 'True'")
    report = run(tmp_path, monkeypatch, "model.yaml", text, ["SITS201"], ["vllm==0.11.0"])
    (f,) = report.findings
    assert f.severity.name == "INFO" and "model_tag" in f.message, f.message


def test_vllm_serve_stray_word_is_still_an_error(tmp_path, monkeypatch):
    text = "vllm serve org/name --enable-prefix-caching True\n"
    report = run(tmp_path, monkeypatch, "serve.sh", text, ["SITS201"], ["vllm==0.11.0"])
    assert [f.severity.name for f in report.findings] == ["ERROR"]


@pytest.mark.parametrize("text", [
    KUBEAI.format(args="    - --max-modle-len=4096"),
    """sampleApplication:
  model:
    modelArtifactURI: hf://org/name
  decode:
    extraArgs: ["--max-modle-len", "4096"]
""",
])
def test_a_flag_no_release_has_is_reported_under_every_serve_parser(tmp_path, monkeypatch, text):
    """KubeAI and llm-d-deployer run vLLM's serve parser: a misspelt flag stops the server there
    as it does under `vllm serve` (these plans used to be skipped as 'another entrypoint')."""
    report = run(tmp_path, monkeypatch, "values.yaml", text, ["SITS204"], ["vllm==0.11.0"])
    (f,) = report.findings
    assert f.message.startswith("--max-modle-len is not an option of vLLM 0.11.0"), f.message
    assert f.severity.name == "ERROR"


def test_legacy_api_server_options_are_not_judged(tmp_path, monkeypatch):
    text = "python -m vllm.entrypoints.api_server --model org/name --max-modle-len 4096\n"
    report = run(tmp_path, monkeypatch, "serve.sh", text, ["SITS204"], ["vllm==0.11.0"])
    assert report.findings == []


def test_ray_serve_engine_kwarg_no_release_has(tmp_path, monkeypatch):
    report = run(tmp_path, monkeypatch, "serve.yaml", RAY.replace("swap_space: 4", "max_modle_len: 4"),
                 ["SITS204"], ["vllm==0.25.1"])
    (f,) = report.findings
    assert "Unknown engine argument: max_modle_len" in f.evidence[0], f.evidence


@pytest.mark.parametrize("name, text, pin", [
    ("serve.sh", "pip install vllm==0.5.3.post1\nvllm serve org/m --max-modle-len 4096\n", (1, 13)),
    ("compose.yaml", "services:\n  v:\n    image: vllm/vllm-openai:v0.5.4\n    command: --model org/m --max-modle-len 4\n",
     (3, 12)),
])
def test_a_pinned_release_before_the_tables_says_its_flags_were_not_checked(tmp_path, monkeypatch, name, text, pin):
    report = run(tmp_path, monkeypatch, name, text, ["SITS204", "SITS201"])
    (f,) = report.findings
    assert f.severity.name == "INFO" and f.message.startswith("flags not checked: vLLM 0.5."), f.message
    assert (f.location.line, f.location.col) == pin


def test_a_target_before_the_tables_is_said_once_for_the_run(tmp_path, monkeypatch):
    report = run(tmp_path, monkeypatch, "serve.sh", "vllm serve org/m --max-modle-len 4\n", ["SITS204"], ["vllm==0.5.0"])
    assert report.findings == []
    assert any("flags are not judged" in n.message for n in report.notices)


def test_templated_extensible_kv_cache_makes_the_pool_unknown(tmp_path, monkeypatch):
    """At 0.34 whether the extensible KV cache is on decides gpu_memory_utilization's default (1.0
    or 0.92): from a variable the file does not set, the memory rules say they cannot size it."""
    (tmp_path / "Chart.yaml").write_text("apiVersion: v2\nname: x\nversion: 0.1.0\n")
    (tmp_path / "templates").mkdir()
    text = """apiVersion: apps/v1
kind: Deployment
metadata: {name: v}
spec:
  template:
    spec:
      containers:
        - name: vllm
          image: vllm/vllm-openai:v0.34.0
          args:
            - --model
            - meta-llama/Llama-3.1-8B-Instruct
            - --max-model-len=131072
            - --enable-extensible-kv-cache={{ .Values.extensible }}
"""
    report = run(tmp_path, monkeypatch, "templates/dep.yaml", text, ["SITS001"])
    (plan,) = report.deployments
    assert plan.target.version == "0.34.0"
    assert "--enable-extensible-kv-cache is '{{…}}', a variable or template" in plan.facts.missing["sizing"]


def test_the_extensible_default_says_the_platform_was_assumed(tmp_path, monkeypatch):
    text = "vllm serve meta-llama/Llama-3.1-8B-Instruct --max-model-len 4096\n"
    (plan,) = run(tmp_path, monkeypatch, "serve.sh", text, ["SITS001"], ["vllm==0.34.0"]).deployments
    fraction = plan.facts.serving.memory_fraction
    assert fraction.value == 1.0 and "as on CUDA and ROCm (assumed)" in str(fraction.prov)


def test_a_flag_no_release_has_under_an_assumed_release_names_both_ways_out(tmp_path, monkeypatch):
    text = "vllm serve org/m --enable-frobnication\n"
    (f,) = run(tmp_path, monkeypatch, "serve.sh", text, ["SITS204"]).findings
    assert "pin it with --target vllm==VERSION" in f.fix_hint and f"vLLM {fw.NEWEST} or older" in f.fix_hint
    (g,) = run(tmp_path, monkeypatch, "serve.sh", text, ["SITS204"], ["vllm==0.20.0"]).findings
    assert g.fix_hint == "remove it, or check the spelling"
