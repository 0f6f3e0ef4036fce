"""KAITO inference configs: the ConfigMap a KAITO ``Workspace`` names in ``inference.config``.

Its ``data["inference_config.yaml"]`` (the key KAITO's webhook requires) is a YAML text whose
``vllm:`` mapping KAITO's vLLM runtime turns into command-line words: for each entry, in order,
``--KEY`` and then ``str(VALUE)`` of the value ``yaml.safe_load`` gave, appended to the server's
arguments and parsed by vLLM's OpenAI server parser (``make_arg_parser`` on a
``FlexibleArgumentParser``, ``parse_args``). ``str`` is Python's, so ``true`` arrives as the word
``True`` after the flag, an empty value as ``None``, and a mapping as ``{'a': 1}`` (not JSON).

Sources (kaito-project/kaito @056b828, v0.12.0): presets/workspace/inference/vllm/inference_api.py
(``KAITOArgumentParser.parse_args``, ``KaitoConfig.from_yaml``);
api/v1alpha1/inference_config_validation.go (the ``inference_config.yaml`` key).

A Workspace document carries no vLLM settings (its preset's defaults run unless it names such a
ConfigMap); the model is the preset's, which the file does not spell as a Hugging Face id.
"""

from __future__ import annotations

from typing import Any

from sits_doctor.frameworks import vllm as fw
from sits_doctor.loaders.vllm import plan_from_command
from sits_doctor.loaders.vllm_args import Token
from sits_doctor.plan import Plan, Provenance, Word
from sits_doctor.source import SourceDoc, join_pointer
from sits_doctor.source_yaml import TEMPLATE_MARK

CONFIG_KEY = "inference_config.yaml"
ENTRY = "python -m vllm.entrypoints.openai.api_server"  # the parser KAITO's runtime builds (make_arg_parser)


def is_kaito_config(data: Any) -> bool:
    """A ConfigMap with KAITO's inference config whose YAML names a ``vllm`` section."""
    cm = data.get("data") if isinstance(data, dict) and data.get("kind") == "ConfigMap" else None
    text = cm.get(CONFIG_KEY) if isinstance(cm, dict) else None
    return isinstance(text, str) and "vllm" in text


def is_workspace(data: Any) -> bool:
    return (isinstance(data, dict) and data.get("kind") == "Workspace"
            and str(data.get("apiVersion", "")).startswith("kaito.sh/"))


def plans(doc: SourceDoc) -> list[Plan]:
    from sits_doctor.source_yaml import parse_embedded

    pointer = join_pointer("/data", CONFIG_KEY)
    name = (doc.data.get("metadata") or {}).get("name", "?") if isinstance(doc.data.get("metadata"), dict) else "?"
    out = []
    for inner in parse_embedded(doc, pointer):
        section = inner.data.get("vllm") if isinstance(inner.data, dict) else None
        if not isinstance(section, dict):
            continue
        out.append(_plan(inner, section, f"KAITO ConfigMap/{name} {CONFIG_KEY}"))
    return out


def _plan(doc: SourceDoc, section: dict, label: str) -> Plan:
    def tok(text: str, ptr: str, key: bool) -> Token:
        templated = ptr in doc.templated or TEMPLATE_MARK in text
        # each word stands for the whole `key: value` entry: a fix edits the entry
        return Token(text, Provenance.at(doc, ptr, key=key), templated, Word(text, pointer=ptr), "helm")

    tokens: list[Token] = []
    for key, value in section.items():
        ptr = join_pointer("/vllm", key)
        tokens += [tok(f"--{key}", ptr, True), tok(str(value), ptr, False)]
    plan = plan_from_command(doc, tokens, label=label, anchor=Provenance.at(doc, "/vllm"), engine_args=ENTRY,
                             parser=fw.PARSER_API_SERVER)
    assert plan is not None  # engine_args always gives a plan
    plan.model_ref = None  # the model is the Workspace preset's, written as no positional word
    return plan


def why_not(docs: list[SourceDoc]) -> str:
    """Why a file with KAITO documents gave no plan."""
    if any(is_kaito_config(d.data) for d in docs):
        return f" (a KAITO ConfigMap whose {CONFIG_KEY} has no vllm: mapping)"
    return (" (a KAITO Workspace: its vLLM settings are in the ConfigMap its inference.config names, under "
            f"data.{CONFIG_KEY}; check that file)")
