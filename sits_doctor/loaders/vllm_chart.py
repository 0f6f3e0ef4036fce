"""Values of vLLM's own example Helm chart (examples/online_serving/chart-helm in
https://github.com/vllm-project/vllm): ``image.repository`` / ``image.tag`` name the image and
``image.command`` is the whole server command (``["vllm", "serve", "/data/", ...]``); the
container's GPUs are ``resources.limits."nvidia.com/gpu"``.
"""

from __future__ import annotations

from typing import Any

from sits_doctor.loaders import kubernetes
from sits_doctor.loaders.commands import words
from sits_doctor.loaders.vllm import plan_from_command
from sits_doctor.plan import Plan, Provenance, Setting, Site
from sits_doctor.source import SourceDoc


def is_vllm_chart_values(data: Any) -> bool:
    image = data.get("image") if isinstance(data, dict) else None
    return (isinstance(image, dict) and isinstance(image.get("command"), list) and "apiVersion" not in data
            and any("vllm" in str(x) for x in [image.get("repository", ""), *image["command"][:3]]))


def plans(doc: SourceDoc) -> list[Plan]:
    image = doc.data["image"]
    tokens = words(doc, [("/image/command", image["command"])])
    shown = f"{image.get('repository', '')}:{image.get('tag', 'latest')}"
    ptr = "/image/tag" if "tag" in image else "/image/repository" if "repository" in image else "/image"
    image_setting = Setting(key="image", raw_key="image", value=shown, raw=shown, prov=Provenance.at(doc, ptr),
                            templated=ptr in doc.templated, site=Site("mapping", doc, ptr))
    plan = plan_from_command(doc, tokens, label="vLLM chart image.command", anchor=Provenance.at(doc, "/image/command"),
                             image=image_setting, entrypoint_kept=False)
    if plan is None:
        return []
    plan.hardware = kubernetes.gpu_request(doc, doc.data, "")
    return [plan]
