"""ONNX Runtime GenAI ``genai_config.json`` (shape: shared/research/trtllm-ortgenai-facts.md §5)."""

from __future__ import annotations

from typing import Any

from sits_doctor.errors import InputError
from sits_doctor.loaders.flatten import flatten
from sits_doctor.plan import Plan, Provenance
from sits_doctor.source import SourceDoc

V2_ISSUE = "https://github.com/microsoft/onnxruntime-genai/issues/2114"  # the "version": 2 proposal


def is_genai_config(data: Any) -> bool:
    if not isinstance(data, dict):
        return False
    model = data.get("model")
    if not isinstance(model, dict):
        return False
    return "decoder" in model or "context_length" in model or isinstance(data.get("search"), dict)


def is_pipeline_v2(data: Any) -> bool:
    """A ``"version": 2`` (or later) config in the pipeline form: a top-level ``pipeline`` section."""
    if not isinstance(data, dict):
        return False
    version = data.get("version")
    return (isinstance(version, int) and not isinstance(version, bool) and version >= 2
            and isinstance(data.get("pipeline"), (dict, list)))


def refuse_pipeline_v2(doc: SourceDoc) -> None:
    """Raise the error that says which releases load a pipeline-form config (none, so far)."""
    from sits_doctor.frameworks.ortgenai_releases import (PIPELINE_V2_PROBE, parser_message, probe_accepted_by,
                                                          probe_error, releases)

    known = releases()
    loading = probe_accepted_by(PIPELINE_V2_PROBE)
    where = Provenance.at(doc, "/version")
    form = f'a "version": {doc.data["version"]} ORT GenAI pipeline config (the form proposed in {V2_ISSUE})'
    if loading:
        said = f"of the releases from {known[0]} to {known[-1]}, only {', '.join(loading)} load it"
    else:
        said = (f"no ORT GenAI release from {known[0]} to {known[-1]} loads it ({known[-1]}: "
                f"{parser_message(probe_error(PIPELINE_V2_PROBE, known[-1]))})")
    raise InputError(doc.path, f"{form}: {said}; sits-doctor reads the version 1 form "
                               "(model / search sections)", where.line, where.col)


def plan_from_config(doc: SourceDoc) -> Plan:
    return Plan(
        framework="ortgenai",
        kind="ortgenai-config",
        label=f"ORT GenAI config {doc.path}",
        file=doc.path,
        anchor=Provenance.at(doc, "", key=False),
        settings=flatten(doc, doc.data),
        doc=doc,
    )
