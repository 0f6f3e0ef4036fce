"""The Plan: one normalized view of one deployment, every value carrying its provenance.

Loaders build Plans; rules only read them. A :class:`Setting` is one option as the framework will
see it (normalized key, parsed value) plus where it came from: a file position, a framework
default, or a derivation. A Plan's ``anchor`` is the mapping (or argument list) where an option
that is missing would have to be added, so findings about missing keys point there.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from sits_doctor.source import SourceDoc

Framework = Literal["hf", "vllm", "trtllm", "ortgenai"]
FRAMEWORK_NAMES: dict[str, str] = {
    "hf": "transformers",
    "vllm": "vLLM",
    "trtllm": "TensorRT-LLM",
    "ortgenai": "ONNX Runtime GenAI",
}


class Provenance(BaseModel):
    """Where a value came from."""

    model_config = ConfigDict(frozen=True)

    kind: Literal["file", "default", "derived"] = "file"
    file: str | None = None
    pointer: str = ""
    doc: int = 0
    line: int = 1
    col: int = 1
    note: str | None = None  # "default of vLLM 0.33.0", "derived: min(...)"

    def __str__(self) -> str:
        if self.kind == "file":
            return f"{self.file}:{self.line}:{self.col}"
        return self.note or self.kind

    @classmethod
    def at(cls, doc: SourceDoc, pointer: str, *, key: bool = True) -> "Provenance":
        """Provenance of ``pointer`` in ``doc``: the key's position when there is one."""
        pos = doc.pos(pointer)
        if key and pos.key_line is not None:
            line, col = pos.key_line, pos.key_col or 1
        else:
            line, col = pos.line, pos.col
        return cls(file=doc.path, pointer=pointer, doc=doc.index, line=line, col=col)


class Setting(BaseModel):
    """One option as the framework sees it."""

    model_config = ConfigDict(frozen=True)

    key: str  # normalized: "max_model_len", "compilation_config.cudagraph_mode"
    raw_key: str  # as written: "--max-model-len", "max-model-len", "maxModelLen"
    value: Any = None  # parsed the way the framework parses it
    raw: Any = None  # as written
    prov: Provenance
    templated: bool = False  # came from a Helm {{ }} or a shell $VAR: value unknown


class Target(BaseModel):
    """The framework version rules judge against, and how it was chosen."""

    model_config = ConfigDict(frozen=True)

    framework: Framework
    version: str
    source: str  # "--target", "image tag vllm/vllm-openai:v0.8.5 (k8s.yaml:20:16)", ...

    def __str__(self) -> str:
        return f"{FRAMEWORK_NAMES[self.framework]} {self.version} ({self.source})"


class ModelFacts(BaseModel):
    """A Hugging Face model config (config.json) as a rule needs it."""

    model_config = ConfigDict(arbitrary_types_allowed=True)

    path: str
    data: dict[str, Any]
    text_pointer: str = ""  # "" or "/text_config" (transformers' get_text_config())
    doc: SourceDoc | None = Field(default=None, exclude=True, repr=False)
    generation: SourceDoc | None = Field(default=None, exclude=True, repr=False)
    quant: SourceDoc | None = Field(default=None, exclude=True, repr=False)
    overrides: dict[str, "Setting"] = Field(default_factory=dict)  # vLLM hf_overrides

    @property
    def text(self) -> dict[str, Any]:
        if self.text_pointer:
            return self.data.get(self.text_pointer.strip("/"), {}) or {}
        return self.data

    def fact(self, key: str) -> Setting | None:
        """A key of the text config, with its position in config.json (or in the override)."""
        if key in self.overrides:
            return self.overrides[key]
        text = self.text
        if key not in text:
            return None
        pointer = f"{self.text_pointer}/{key}"
        prov = Provenance.at(self.doc, pointer) if self.doc else Provenance(file=self.path, pointer=pointer)
        return Setting(key=key, raw_key=key, value=text[key], raw=text[key], prov=prov)


class Plan(BaseModel):
    """One deployment as a framework will run it."""

    model_config = ConfigDict(arbitrary_types_allowed=True)

    framework: Framework
    kind: str  # hf-config, vllm-yaml, vllm-args, trtllm-engine, trtllm-llmapi, ortgenai-config
    label: str
    file: str
    anchor: Provenance
    settings: dict[str, Setting] = Field(default_factory=dict)
    env: dict[str, Setting] = Field(default_factory=dict)
    image: Setting | None = None
    model_ref: Setting | None = None
    model: ModelFacts | None = None
    model_note: str | None = None  # why ``model`` could not be resolved
    target: Target | None = None
    doc: SourceDoc | None = Field(default=None, exclude=True, repr=False)

    def get(self, key: str) -> Setting | None:
        return self.settings.get(key)

    def value(self, key: str, default: Any = None) -> Any:
        """The parsed value of an option that is set and known (not templated), else ``default``."""
        s = self.settings.get(key)
        if s is None or s.templated:
            return default
        return s.value
