"""A ``trtllm-serve disaggregated -c`` config file to one LLM-API Plan per server section.

What each section's workers are given (sits_doctor.frameworks.trtllm_disagg): the top-level keys
that are not the disaggregated server's own, then the section's keys over them, less
``num_instances``/``urls``/``router``. Every Setting keeps the position it was written at (a
top-level key shared by both sections points at the top-level line).
"""

from __future__ import annotations

from sits_doctor.frameworks import trtllm_disagg as fw
from sits_doctor.loaders.flatten import flatten
from sits_doctor.plan import Plan, Provenance
from sits_doctor.source import SourceDoc, join_pointer

KIND = "trtllm-llmapi"  # each section is judged as the LLM-API options its workers get


def plans(doc: SourceDoc) -> list[Plan]:
    data = doc.data
    shared = {k: data[k] for k in fw.inherited(data)}
    out = []
    for section in fw.SECTIONS:
        node = data.get(section)
        if not isinstance(node, dict):
            continue
        pointer = join_pointer("", section)
        settings = flatten(doc, shared)
        own = {k: v for k, v in node.items() if k not in fw.SECTION_KEYS}
        for key in own:  # the section's value replaces the inherited one (the reader insists they match)
            for name in [n for n in settings if n == key or n.startswith(f"{key}.")]:
                del settings[name]
        settings.update(flatten(doc, own, pointer))
        out.append(Plan(
            framework="trtllm",
            kind=KIND,
            label=f"TensorRT-LLM disaggregated serving config {doc.path} ({section})",
            file=doc.path,
            anchor=Provenance.at(doc, pointer, key=True),
            settings=settings,
            model_ref=settings.get("model"),
            doc=doc,
            entry=fw.WORKER_ENTRY,
        ))
    return out


def reported_elsewhere(plan: Plan, at: Provenance) -> bool:
    """Whether a finding at ``at`` belongs to another section's plan: a top-level key both
    sections inherit is reported once, with the first section written."""
    if plan.entry != fw.WORKER_ENTRY or plan.doc is None:
        return False
    section = plan.anchor.pointer
    if at.pointer.startswith(section + "/"):
        return False
    first = next((s for s in fw.SECTIONS if isinstance(plan.doc.data.get(s), dict)), None)
    return section != join_pointer("", first or "")


def workers(plan: Plan, at: Provenance) -> str | None:
    """Which workers a setting at ``at`` reaches ("context_servers", or both sections for a
    top-level key); None for a plan that is not a section of a disaggregated config."""
    if plan.entry != fw.WORKER_ENTRY or plan.doc is None:
        return None
    section = plan.anchor.pointer.lstrip("/")
    if at.pointer.startswith(f"/{section}/"):
        return section
    return " and ".join(s for s in fw.SECTIONS if isinstance(plan.doc.data.get(s), dict))
