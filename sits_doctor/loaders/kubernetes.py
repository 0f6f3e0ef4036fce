"""vLLM command lines inside Kubernetes objects (Deployment, StatefulSet, LeaderWorkerSet, ...).

Containers are found wherever a ``containers:`` list of named containers sits, so workload kinds
we never heard of (KServe, RayService, RayCluster, LeaderWorkerSet's leader and worker
templates) work too. A KubeRay RayJob's ``spec.entrypoint`` shell command is read too, in the head
container's image. A shell with ``-c`` in ``command`` and the script in ``args`` (``["/bin/bash",
"-lc", "--"]``) is read as the shell reads it.
"""

from __future__ import annotations

from typing import Any, Iterator

from sits_doctor.catalogs.gpus import GKE_ACCELERATOR_LABEL  # GKE's node label (nvidia-l4, nvidia-tesla-a100)
from sits_doctor.loaders.commands import image_setting, words
from sits_doctor.loaders.vllm import plan_from_command
from sits_doctor.plan import Plan, Provenance, Setting, Site
from sits_doctor.source import SourceDoc, join_pointer


def is_kubernetes(data: Any) -> bool:
    return isinstance(data, dict) and "apiVersion" in data and "kind" in data


def plans(doc: SourceDoc) -> list[Plan]:
    data = doc.data
    name = (data.get("metadata") or {}).get("name", "?") if isinstance(data.get("metadata"), dict) else "?"
    out = []
    for pointer, container in containers(data, ""):
        label = f"{data.get('kind')}/{name} container {container.get('name', '?')}"
        plan = container_plan(doc, container, pointer, label)
        if plan is not None:
            out.append(plan)
    spec = data.get("spec") if isinstance(data.get("spec"), dict) else {}
    if data.get("kind") == "RayJob" and isinstance(spec.get("entrypoint"), str):
        out += _rayjob_entrypoint(doc, spec, name)
    return out


def _rayjob_entrypoint(doc: SourceDoc, spec: dict, name: str) -> list[Plan]:
    """A KubeRay RayJob's ``spec.entrypoint``: a shell command run in the cluster's head pod
    (ray-operator/apis/ray/v1/rayjob_types.go, ``Entrypoint``); ``vllm serve`` there runs in the
    head container's image."""
    head = next((c for p, c in containers(spec.get("rayClusterSpec"), "/spec/rayClusterSpec")
                 if "/headGroupSpec/" in p), None)
    image = env = None
    if head is not None:
        head_pointer = next(p for p, c in containers(spec.get("rayClusterSpec"), "/spec/rayClusterSpec") if c is head)
        image = image_setting(doc, head.get("image"), join_pointer(head_pointer, "image"))
        env = env_list(doc, head.get("env"), join_pointer(head_pointer, "env"))
    tokens = words(doc, [("/spec/entrypoint", spec["entrypoint"])])
    plan = plan_from_command(doc, tokens, label=f"RayJob/{name} entrypoint", anchor=Provenance.at(doc, "/spec/entrypoint"),
                             image=image, env=env, entrypoint_kept=False)
    return [plan] if plan is not None else []


def containers(node: Any, pointer: str) -> Iterator[tuple[str, dict]]:
    if isinstance(node, dict):
        for key, value in node.items():
            child = join_pointer(pointer, key)
            if key in ("containers", "initContainers") and isinstance(value, list):
                for i, c in enumerate(value):
                    if isinstance(c, dict) and ("image" in c or "command" in c or "args" in c):
                        yield join_pointer(child, i), c
            else:
                yield from containers(value, child)
    elif isinstance(node, list):
        for i, value in enumerate(node):
            yield from containers(value, join_pointer(pointer, i))


def container_plan(doc: SourceDoc, container: dict, pointer: str, label: str) -> Plan | None:
    """The vLLM Plan of one container (``command`` + ``args``, ``image``, ``env``), if it runs vLLM."""
    tokens = words(doc, [(join_pointer(pointer, f), container[f]) for f in ("command", "args") if f in container])
    image = image_setting(doc, container.get("image"), join_pointer(pointer, "image"))
    env = env_list(doc, container.get("env"), join_pointer(pointer, "env"))
    anchor = Provenance.at(doc, pointer, key=False)
    plan = plan_from_command(doc, tokens, label=label, anchor=anchor, image=image, env=env,
                             entrypoint_kept=not container.get("command"))
    if plan is None:
        plan = _trtllm_serve(doc, tokens, label=label, anchor=anchor, env=env, image=image)
    if plan is not None:
        plan.hardware = gpu_request(doc, container, pointer)
    return plan


GPU_RESOURCE = "nvidia.com/gpu"  # the NVIDIA device plugin's resource name
GPU_PRODUCT_LABEL = "nvidia.com/gpu.product"  # GPU feature discovery's node label
GPU_LABELS = (GPU_PRODUCT_LABEL, GKE_ACCELERATOR_LABEL)  # the first a pod selects names its GPU


def gpu_request(doc: SourceDoc, container: dict, pointer: str) -> dict[str, Setting]:
    """What the manifest says about the GPUs: ``gpu_count`` from the container's
    ``resources.limits`` (else ``requests``) ``nvidia.com/gpu``, ``gpu_product`` from the pod's
    ``nodeSelector`` (or a required node-affinity term) on ``nvidia.com/gpu.product``, else on
    GKE's ``cloud.google.com/gke-accelerator``."""
    out: dict[str, Setting] = {}
    resources = container.get("resources") if isinstance(container.get("resources"), dict) else {}
    for section in ("limits", "requests"):
        values = resources.get(section)
        if isinstance(values, dict) and GPU_RESOURCE in values:
            ptr = join_pointer(join_pointer(join_pointer(pointer, "resources"), section), GPU_RESOURCE)
            out["gpu_count"] = _setting(doc, ptr, GPU_RESOURCE, values[GPU_RESOURCE])
            break
    pod_pointer = pointer.rsplit("/", 2)[0]  # .../spec/containers/0 -> .../spec
    pod = _at(doc.data, pod_pointer)
    if isinstance(pod, dict):
        selector = pod.get("nodeSelector")
        for label in GPU_LABELS:
            if isinstance(selector, dict) and isinstance(selector.get(label), str):
                ptr = join_pointer(join_pointer(pod_pointer, "nodeSelector"), label)
                out["gpu_product"] = _setting(doc, ptr, label, selector[label])
                break
            found = _affinity_product(pod, pod_pointer, label)
            if found is not None:
                out["gpu_product"] = _setting(doc, found[0], label, found[1])
                break
    return out


def _affinity_product(pod: dict, pod_pointer: str, label: str = GPU_PRODUCT_LABEL) -> tuple[str, str] | None:
    terms = (((pod.get("affinity") or {}).get("nodeAffinity") or {})
             .get("requiredDuringSchedulingIgnoredDuringExecution") or {}).get("nodeSelectorTerms")
    if not isinstance(terms, list):
        return None
    base = f"{pod_pointer}/affinity/nodeAffinity/requiredDuringSchedulingIgnoredDuringExecution/nodeSelectorTerms"
    for i, term in enumerate(terms):
        exprs = term.get("matchExpressions") if isinstance(term, dict) else None
        for j, e in enumerate(exprs if isinstance(exprs, list) else []):
            if (isinstance(e, dict) and e.get("key") == label and e.get("operator") == "In"
                    and isinstance(e.get("values"), list) and len(e["values"]) == 1 and isinstance(e["values"][0], str)):
                return f"{base}/{i}/matchExpressions/{j}/values/0", e["values"][0]
    return None


def _at(data: Any, pointer: str) -> Any:
    node = data
    for part in [p for p in pointer.split("/") if p]:
        part = part.replace("~1", "/").replace("~0", "~")
        if isinstance(node, dict):
            node = node.get(part)
        elif isinstance(node, list) and part.isdigit() and int(part) < len(node):
            node = node[int(part)]
        else:
            return None
    return node


def _setting(doc: SourceDoc, pointer: str, key: str, value: Any) -> Setting:
    return Setting(key=key, raw_key=key, value=value, raw=value, prov=Provenance.at(doc, pointer),
                   templated=pointer in doc.templated, site=Site("mapping", doc, pointer))


def env_list(doc: SourceDoc, env: Any, pointer: str) -> dict[str, Setting]:
    """A container's ``env:`` list (``name``/``value``; ``valueFrom`` counts as unknown)."""
    out: dict[str, Setting] = {}
    if not isinstance(env, list):
        return out
    for i, item in enumerate(env):
        if not isinstance(item, dict) or not isinstance(item.get("name"), str):
            continue
        ptr = join_pointer(pointer, i)
        has_value = "value" in item
        value_ptr = join_pointer(ptr, "value") if has_value else ptr
        value = item.get("value")
        out[item["name"]] = Setting(
            key=item["name"], raw_key=item["name"], value=None if value is None else str(value),
            raw=value, prov=Provenance.at(doc, join_pointer(ptr, "name"), key=False),
            templated=not has_value or value_ptr in doc.templated,
            site=Site("env", doc, ptr),
        )
    return out


def _trtllm_serve(doc, tokens, **kwargs):
    """A ``trtllm-serve`` command among the words (sits_doctor.loaders.trtllm_serve), if any."""
    try:
        from sits_doctor.loaders import trtllm_serve
    except ImportError:  # pragma: no cover - a partial checkout
        return None
    return trtllm_serve.plan_from_tokens(doc, tokens, **kwargs)
