"""llm-d modelservice Helm values: ``decode`` / ``prefill`` roles whose ``containers`` run vLLM.

How the chart turns a container into a command (templates/_helpers.tpl of
https://github.com/llm-d-incubation/llm-d-modelservice, read at commit 6ab49a0):
``modelCommand: vllmServe`` → ``vllm serve <model> --port P [--tensor-parallel-size T]
[--data-parallel-size D] [--data-parallel-size-local L] --served-model-name N`` + ``args``;
``imageDefault`` → the image's entrypoint with ``--model <model> ...`` + ``args``; ``custom`` (the
default) → the container's own ``command`` and ``args``. The model comes from
``modelArtifacts.uri`` (``hf://org/name``); each pod gets ``parallelism.tensor`` ×
``parallelism.dataLocal`` GPUs; ``acceleratorTypes`` (labelKey / labelValues) becomes a node
affinity on that label.
"""

from __future__ import annotations

from typing import Any

from sits_doctor.frameworks import vllm as fw
from sits_doctor.loaders import kubernetes
from sits_doctor.loaders.commands import image_setting, words
from sits_doctor.loaders.vllm import plan_from_command
from sits_doctor.plan import Plan, Provenance, Setting, Site
from sits_doctor.source import SourceDoc, join_pointer

ROLES = ("decode", "prefill")
DEPLOYER = "llm-d-deployer sampleApplication extraArgs"  # the preset ConfigMap's vllm serve command + extraArgs
GENERATED = {"vllmServe": ("llm-d modelCommand vllmServe (vllm serve)", fw.PARSER_SERVE),
             "imageDefault": ("llm-d modelCommand imageDefault (image entrypoint)", fw.PARSER_IMAGE)}


def is_llmd_values(data: Any) -> bool:
    return isinstance(data, dict) and isinstance(data.get("modelArtifacts"), dict) and any(
        isinstance(data.get(r), dict) and isinstance(data[r].get("containers"), list) for r in ROLES)


def plans(doc: SourceDoc) -> list[Plan]:
    out = []
    for role in ROLES:
        spec = doc.data.get(role)
        if not isinstance(spec, dict) or spec.get("create") is False or not isinstance(spec.get("containers"), list):
            continue
        for i, container in enumerate(spec["containers"]):
            if not isinstance(container, dict):
                continue
            pointer = f"/{role}/containers/{i}"
            label = f"llm-d {role} container {container.get('name', 'vllm')}"
            how = GENERATED.get(container.get("modelCommand", "custom"))
            plan = (kubernetes.container_plan(doc, container, pointer, label) if how is None
                    else _generated(doc, role, spec, container, pointer, label, how))
            if plan is not None:
                plan.hardware = _hardware(doc, role, spec) or plan.hardware
                out.append(plan)
    return out


def _generated(doc: SourceDoc, role: str, spec: dict, container: dict, pointer: str, label: str,
               how: tuple[str, str]) -> Plan | None:
    args_ptr = join_pointer(pointer, "args")
    tokens = words(doc, [(args_ptr, container["args"])] if isinstance(container.get("args"), list) else [])
    env = kubernetes.env_list(doc, container.get("env"), join_pointer(pointer, "env"))
    image = image_setting(doc, container.get("image"), join_pointer(pointer, "image"))
    plan = plan_from_command(doc, tokens, label=label, anchor=Provenance.at(doc, pointer, key=False),
                             image=image, env=env, engine_args=how[0], parser=how[1])
    if plan is None:  # pragma: no cover - engine_args always gives a plan
        return None
    uri = doc.data["modelArtifacts"].get("uri")
    if plan.model_ref is None and isinstance(uri, str):
        scheme, sep, rest = uri.partition("://")
        ptr = "/modelArtifacts/uri"
        plan.model_ref = Setting(key=fw.MODEL, raw_key="uri", value=rest if scheme == "hf" else uri, raw=uri,
                                 prov=Provenance.at(doc, ptr), templated=scheme != "hf" or ptr in doc.templated,
                                 site=Site("mapping", doc, ptr))
    tensor = (spec.get("parallelism") or {}).get("tensor") if isinstance(spec.get("parallelism"), dict) else None
    if fw.TENSOR_PARALLEL not in plan.settings and isinstance(tensor, int) and tensor > 1:
        ptr = f"/{role}/parallelism/tensor"
        plan.settings[fw.TENSOR_PARALLEL] = Setting(
            key=fw.TENSOR_PARALLEL, raw_key="parallelism.tensor", value=tensor, raw=tensor,
            prov=Provenance.at(doc, ptr), templated=ptr in doc.templated, site=Site("mapping", doc, ptr))
    return plan


def _hardware(doc: SourceDoc, role: str, spec: dict) -> dict[str, Setting]:
    out: dict[str, Setting] = {}
    parallelism = spec.get("parallelism") if isinstance(spec.get("parallelism"), dict) else {}
    tensor, local = parallelism.get("tensor", 1), parallelism.get("dataLocal", 1)
    if isinstance(tensor, int) and isinstance(local, int) and "tensor" in parallelism:
        ptr = f"/{role}/parallelism/tensor"
        out["gpu_count"] = Setting(key="gpu_count", raw_key="parallelism", value=str(tensor * local),
                                   raw=tensor, prov=Provenance.at(doc, ptr), site=Site("mapping", doc, ptr))
    types = spec.get("acceleratorTypes")
    if isinstance(types, dict) and types.get("labelKey") == kubernetes.GPU_PRODUCT_LABEL:
        values = types.get("labelValues")
        if isinstance(values, list) and len(values) == 1 and isinstance(values[0], str):
            ptr = f"/{role}/acceleratorTypes/labelValues/0"
            out["gpu_product"] = Setting(key="gpu_product", raw_key=kubernetes.GPU_PRODUCT_LABEL, value=values[0],
                                         raw=values[0], prov=Provenance.at(doc, ptr), site=Site("mapping", doc, ptr))
    return out


# --- llm-d-deployer (the installer before the modelservice chart) -------------------------------
# Its quickstart values name a preset ConfigMap that holds the `vllm serve` command; a role's
# ``extraArgs`` are appended to it, the model is ``sampleApplication.model.modelArtifactURI``
# (https://github.com/llm-d/llm-d-deployer charts/llm-d/values.yaml and templates/sample-application/).

def is_deployer_values(data: Any) -> bool:
    app = data.get("sampleApplication") if isinstance(data, dict) else None
    return isinstance(app, dict) and isinstance(app.get("model"), dict)


def deployer_plans(doc: SourceDoc) -> list[Plan]:
    app = doc.data["sampleApplication"]
    out = []
    for role in ("prefill", "decode"):
        spec = app.get(role)
        if not isinstance(spec, dict) or not isinstance(spec.get("extraArgs"), list):
            continue
        pointer = f"/sampleApplication/{role}"
        tokens = words(doc, [(join_pointer(pointer, "extraArgs"), spec["extraArgs"])])
        plan = plan_from_command(doc, tokens, label=f"llm-d-deployer {role}", anchor=Provenance.at(doc, pointer),
                                 engine_args=DEPLOYER, parser=fw.PARSER_SERVE)
        if plan is None:  # pragma: no cover - engine_args always gives a plan
            continue
        uri = app["model"].get("modelArtifactURI")
        if plan.model_ref is None and isinstance(uri, str):
            scheme, _, rest = uri.partition("://")
            ptr = "/sampleApplication/model/modelArtifactURI"
            plan.model_ref = Setting(key=fw.MODEL, raw_key="modelArtifactURI", value=rest if scheme == "hf" else uri,
                                     raw=uri, prov=Provenance.at(doc, ptr), site=Site("mapping", doc, ptr),
                                     templated=scheme != "hf" or ptr in doc.templated)
        resources = app.get("resources")
        if isinstance(resources, dict):
            plan.hardware = kubernetes.gpu_request(doc, app, "/sampleApplication")
        out.append(plan)
    return out


def deployer_why_not(doc: SourceDoc) -> str:
    preset = doc.data["sampleApplication"].get("baseConfigMapRefName", "?")
    return (f" (llm-d-deployer values without extraArgs: the vLLM command is in the preset ConfigMap {preset!r},"
            " which this file does not contain)")
