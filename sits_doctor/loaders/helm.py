"""vLLM production-stack Helm values (``servingEngineSpec.modelSpec[]``) as vLLM command lines.

The chart's ``deployment-vllm-multi.yaml`` turns each modelSpec into
``vllm serve <modelURL> --host 0.0.0.0 --port <port>`` plus one flag per ``vllmConfig`` key and the
``extraArgs`` verbatim (vllm-project/production-stack helm/templates/deployment-vllm-multi.yaml
@f1f9822). This module rebuilds that argument list, each word pointing at the values.yaml line it
came from, so the same vLLM rules judge it.
"""

from __future__ import annotations

from typing import Any

from sits_doctor.frameworks import vllm as fw
from sits_doctor.loaders.commands import item_token
from sits_doctor.loaders.kubernetes import env_list
from sits_doctor.loaders.vllm import plan_from_command
from sits_doctor.loaders.vllm_args import Token
from sits_doctor.plan import Plan, Provenance, Setting, Site, Word
from sits_doctor.source import SourceDoc, join_pointer
from sits_doctor.source_yaml import TEMPLATE_MARK

def is_helm_values(data: Any) -> bool:
    spec = data.get("servingEngineSpec") if isinstance(data, dict) else None
    return isinstance(spec, dict) and isinstance(spec.get("modelSpec"), list)


def plans(doc: SourceDoc) -> list[Plan]:
    out = []
    base = "/servingEngineSpec/modelSpec"
    for i, spec in enumerate(doc.data["servingEngineSpec"]["modelSpec"]):
        if not isinstance(spec, dict) or spec.get("enabled", True) is False:
            continue
        pointer = join_pointer(base, i)
        plan = _model_plan(doc, spec, pointer)
        if plan is not None:
            out.append(plan)
    return out


def _model_plan(doc: SourceDoc, spec: dict, pointer: str) -> Plan | None:
    def tok(text: Any, ptr: str, key: bool = False, site: str = "helm") -> Token:
        prov = Provenance.at(doc, ptr, key=key)
        word = Word(str(text), pointer=ptr)
        return Token(str(text), prov, ptr in doc.templated or TEMPLATE_MARK in str(text), word, site)

    anchor_tok = tok("serve", pointer)
    tokens = [Token("vllm", anchor_tok.prov), anchor_tok]
    if "modelURL" in spec:
        tokens.append(tok(spec["modelURL"], join_pointer(pointer, "modelURL")))
    for helm_key, name in fw.HELM_SPEC_FLAGS.items():
        if spec.get(helm_key):
            tokens.append(tok(fw.flag_of(name), join_pointer(pointer, helm_key), key=True))
    cfg = spec.get("vllmConfig")
    cfg_ptr = join_pointer(pointer, "vllmConfig")
    if isinstance(cfg, dict) and cfg:
        for helm_key, name in fw.HELM_BOOL_KEYS.items():
            ptr = join_pointer(cfg_ptr, helm_key)
            # the chart writes --no-enable-prefix-caching unless the value says true
            if helm_key in cfg or helm_key == fw.HELM_ALWAYS_WRITTEN:
                on = bool(cfg.get(helm_key))
                flag = fw.flag_of(name) if on else "--no-" + fw.flag_of(name)[2:]
                tokens.append(tok(flag, ptr if helm_key in cfg else cfg_ptr, key=True))
        for helm_key, option in fw.HELM_FLAGS.items():
            if helm_key in cfg:
                ptr = join_pointer(cfg_ptr, helm_key)
                flag = fw.flag_of(option.name, dashed=option.name not in fw.HELM_UNDERSCORE)
                tokens += [tok(flag, ptr, key=True), tok(cfg[helm_key], ptr)]
        extra = cfg.get("extraArgs")
        if isinstance(extra, list):
            extra_ptr = join_pointer(cfg_ptr, "extraArgs")
            tokens += [item_token(doc, str(a), join_pointer(extra_ptr, j)) for j, a in enumerate(extra)]
    image = None
    if "repository" in spec:
        ref = f"{spec['repository']}:{spec.get('tag', 'latest')}"
        ptr = join_pointer(pointer, "tag" if "tag" in spec else "repository")
        image = Setting(key="image", raw_key="repository", value=ref, raw=ref,
                        prov=Provenance.at(doc, ptr, key=False), templated=TEMPLATE_MARK in ref,
                        site=Site("mapping", doc, ptr))
    env = env_list(doc, spec.get("env"), join_pointer(pointer, "env"))
    label = f"helm modelSpec {spec.get('name', '?')}"
    return plan_from_command(
        doc, tokens, label=label, anchor=Provenance.at(doc, cfg_ptr if isinstance(cfg, dict) else pointer, key=False),
        image=image, env=env,
    )
