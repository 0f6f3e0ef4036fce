"""Real public configs (tests/data/real/<family>/, each file's repository, path and commit in
that folder's MANIFEST.json): every file is read as what it is, checks without an internal error,
and keeps its findings (FINDINGS.snap beside the manifest; ``--update-snapshots`` rewrites it).

A file that runs a framework sits-doctor reads (vLLM, TensorRT-LLM, ORT GenAI, transformers) must
give at least one deployment of the kinds its format maps to, unless it is listed in NOT_READ with
the reason a user would accept; files that run another server sits-doctor recognises (SGLang,
Infinity, Ollama: sits_doctor.loaders.foreign) are read and said to be "not checked", never judged
by vLLM's rules; anything else must be refused with a sentence that says what it is.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from conftest import REPO
from sits_doctor.engine import CheckOptions, check

REAL = REPO / "tests" / "data" / "real"
READ_RUNS = {"vllm", "trtllm", "ortgenai", "hf"}
KINDS = {  # manifest format -> plan kinds a file of that format may give
    "kubeai-model": {"vllm-args"}, "kserve-inferenceservice": {"vllm-args"}, "kserve-servingruntime": {"vllm-args"},
    "kserve-llminferenceservice": {"vllm-args"}, "llm-d-values": {"vllm-args"}, "vllm-chart-values": {"vllm-args"},
    "production-stack-values": {"vllm-args"}, "k8s-workload": {"vllm-args", "trtllm-serve-args", "vllm-kwargs"},
    "compose": {"vllm-args", "trtllm-serve-args"}, "shell-script": {"vllm-args", "trtllm-serve-args"},
    "dockerfile": {"vllm-args", "trtllm-serve-args"}, "skypilot-task": {"vllm-args"}, "ray-serve-llm": {"vllm-kwargs"},
    "triton-pbtxt": {"triton-pbtxt"}, "trtllm-engine-config": {"trtllm-engine"},
    "trtllm-engine-config-pre08": {"trtllm-engine"}, "trtllm-llmapi-yaml": {"trtllm-llmapi"},
    "vllm-config-yaml": {"vllm-yaml"}, "ortgenai-config": {"ortgenai-config"}, "hf-config": {"hf-config", "ortgenai-config"},
}
# Files that run a framework we read but are refused, and why a user would accept it.
NOT_READ: dict[str, str] = {
    "k8s/k8s-workload/aws-trtllm-llama3-deployment.yaml":
        "runs Triton Inference Server: the TensorRT-LLM settings are in the model repository's config.pbtxt",
    "k8s/k8s-workload/gke-trtllm-triton-gemma-deployment.yaml":
        "runs Triton Inference Server: the TensorRT-LLM settings are in the model repository's config.pbtxt",
    "k8s/k8s-workload/lws-tensorrt-llm-triton-leaderworkerset.yaml":
        "runs a server.py that starts Triton: the TensorRT-LLM settings are in the model repository",
    "k8s/k8s-workload/gke-trtllm-gemma-2b-engine-prep-job.yaml":
        "a Job running a model-fetch script the file does not contain; it serves nothing",
    "k8s/k8s-workload/kuberay-rayservice-vllm-0.6.1-llama3-8b.yaml":
        "a RayService whose Serve application builds the vLLM engine in Python code, not from llm_configs",
    "k8s/k8s-workload/rhai-vllm-gaudi-hpu-deployment.yaml":
        "passes flags to an image (intel/redhat-ai-services) whose entrypoint the file does not show",
    "k8s/kserve-inferenceservice/rhai-vllm-kserve-chart-isvc-template.yaml":
        "a Helm chart template whose YAML only template logic builds ({{ \"{{\" }} escapes): check the rendered output",
    "k8s/llm-d-values/llmd-deployer-quickstart-pd-nixl.yaml":
        "llm-d-deployer values without extraArgs: the vLLM command is in a preset ConfigMap not in the file",
    "misc/triton-pbtxt/tensorrtllm_backend-v0.19-ensemble/config.pbtxt":
        "a Triton ensemble: its settings live in the tensorrt_llm model's config.pbtxt",
    "misc/triton-pbtxt/tensorrtllm_backend-v0.19-preprocessing/config.pbtxt":
        "the Python preprocessing model of the ensemble, not TensorRT-LLM",
    "misc/triton-pbtxt/tensorrtllm_backend-v0.19-tensorrt_llm/config.pbtxt":
        "the unfilled template: its backend is the placeholder ${triton_backend}",
}


def entries() -> list[tuple[str, dict]]:
    out = []
    for manifest in sorted(REAL.glob("*/MANIFEST.json")):
        family = manifest.parent.name
        for entry in json.loads(manifest.read_text()):
            out.append((f"{family}/{entry['file']}", entry))
    return out


ENTRIES = entries()


def test_the_corpus_is_big_and_sourced():
    assert len(ENTRIES) >= 60
    for name, entry in ENTRIES:
        assert (REAL / name).is_file(), name
        assert len(entry["commit"]) == 40 and entry["repo"].count("/") == 1 and entry["path"], name
        assert entry["format"] in KINDS, (name, entry["format"])


def _report(name: str):
    return check([REAL / name], CheckOptions(isolated=True))


@pytest.mark.parametrize("name,entry", ENTRIES, ids=[n for n, _ in ENTRIES])
def test_each_real_file_is_read_as_what_it_is(name, entry):
    report = _report(name)
    assert report.internal_errors == []
    kinds = {p.kind for p in report.deployments}
    if entry["runs"] in READ_RUNS and name not in NOT_READ:
        assert kinds and kinds <= KINDS[entry["format"]], (kinds, [e.message for e in report.errors])
    else:
        assert not kinds, f"{name} runs {entry['runs']} but gave {kinds}"
        unchecked = [n.message for n in report.notices if n.message.startswith("runs ") and "not checked" in n.message]
        if entry["runs"] == "sglang" or unchecked:  # another server, recognised: read, said to be unchecked
            assert unchecked and not report.errors, (name, [e.message for e in report.errors])
            return
        assert report.errors, name
        message = report.errors[0].message
        assert message.startswith("not a recognized config (") or "helm template" in message, message


def _lines(name: str) -> list[str]:
    report = _report(name)
    shown = [f"{f.location.line}:{f.location.col} {f.code} {f.severity.value} {f.message}" for f in report.findings]
    shown += [f"error {e.message}" for e in report.errors if not e.message.startswith("not a recognized config")]
    return [f"{name.split('/', 1)[1]}: {line}" for line in shown]


@pytest.mark.parametrize("family", sorted(p.parent.name for p in REAL.glob("*/MANIFEST.json")))
def test_findings_snapshot(family, update_snapshots):
    lines = [line for name, _ in ENTRIES if name.startswith(family + "/") for line in _lines(name)]
    text = "".join(line + "\n" for line in lines)
    snap = REAL / family / "FINDINGS.snap"
    if update_snapshots:
        snap.write_text(text, encoding="utf-8")
    assert text == snap.read_text(encoding="utf-8")
