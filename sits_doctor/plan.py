"""The Plan: one normalized view of one deployment, every value carrying its provenance.

Loaders build Plans; rules only read them. A :class:`Setting` is one option as the framework will
see it (normalized key, parsed value) plus where it came from (:class:`Provenance`: a file
position, a framework default, or a derivation) and how it was written (:class:`Site`: a mapping
entry, command-line words in a list or in a shell string, a Helm value, an environment variable),
which is what a fix needs to edit it. A Plan's ``anchor`` is the mapping (or argument list) where
an option that is missing would have to be added, so findings about missing keys point there.

The small values are named tuples and the containers plain classes: they are built by our own
loaders, not validated from user input, and building pydantic models at import would cost more
than a whole one-file check (``dataclasses`` alone imports ``inspect``: several milliseconds of
every run, bench/results/cli_speed.md).
"""

from typing import Any, Literal, NamedTuple

from sits_doctor.source import SourceDoc

Framework = Literal["hf", "vllm", "trtllm", "ortgenai"]
FRAMEWORK_NAMES: dict[str, str] = {
    "hf": "transformers",
    "vllm": "vLLM",
    "trtllm": "TensorRT-LLM",
    "ortgenai": "ONNX Runtime GenAI",
}
SiteKind = Literal["mapping", "argv", "shell", "helm", "env"]


class Provenance(NamedTuple):
    """Where a value came from."""

    kind: Literal["file", "default", "derived"] = "file"
    file: str | None = None
    pointer: str = ""
    doc_index: int = 0  # which document of a multi-document YAML file
    line: int = 1
    col: int = 1
    note: str | None = None  # "default of vLLM 0.33.0 (vllm/engine/arg_utils.py)", "derived: min(...)"

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
        return cls(file=doc.path, pointer=pointer, doc_index=doc.index, line=line, col=col)

    @classmethod
    def default(cls, note: str) -> "Provenance":
        return cls(kind="default", note=note)

    @classmethod
    def derived(cls, note: str) -> "Provenance":
        return cls(kind="derived", note=note)


class Word(NamedTuple):
    """One command-line word as written: its text after shell quoting is removed, and where its
    characters sit in the file (``start``/``end``: offsets of the word *as written*, quotes
    included; -1 when the word cannot be located exactly, e.g. inside a folded YAML scalar)."""

    text: str
    start: int = -1
    end: int = -1
    pointer: str = ""  # the list item (argv) or the scalar (shell string) holding it
    quote: str = ""  # the quote character the word is written in, if it is quoted as a whole


class Site(NamedTuple):
    """How a setting is written, for edits.

    - ``mapping``: a key in a YAML/JSON mapping (``pointer`` is the entry; the key and value
      spans are in ``doc.positions[pointer]``).
    - ``argv``: command-line words that are items of a list (``args: ["--a", "1"]``).
    - ``shell``: command-line words inside one shell string (``sh -c "vllm serve ..."``).
    - ``helm``: a Helm value the chart turns into a flag (edited like a mapping entry).
    - ``env``: an environment variable entry.
    For argv/shell, ``words`` are the option's words (the flag, then its values) and ``inline``
    says the value is in the flag word (``--flag=value``).
    """

    kind: SiteKind
    doc: SourceDoc | None = None
    pointer: str = ""
    words: tuple[Word, ...] = ()
    inline: bool = False


class Setting(NamedTuple):
    """One option as the framework sees it."""

    key: str  # normalized: "max_model_len", "compilation_config.cudagraph_mode"
    raw_key: str  # as written: "--max-model-len", "max-model-len", "maxModelLen"
    value: Any = None  # parsed the way the framework parses it
    raw: Any = None  # as written
    prov: Provenance = Provenance()
    templated: bool = False  # came from a Helm {{ }} or a shell $VAR: value unknown
    site: Site | None = None  # how it is written (None: a default or a derivation)

    def with_(self, **changes: Any) -> "Setting":
        return self._replace(**changes)

    @property
    def shown(self) -> str:
        """``raw`` as a message shows it: a Helm action inside a word (``--x={{ .Values.x }}``,
        masked while the file is parsed) as ``{{…}}``, not as its mask."""
        import re

        from sits_doctor.source_yaml import TEMPLATE_MARK

        return re.sub(TEMPLATE_MARK + "_*", "{{…}}", str(self.raw))


class Target(NamedTuple):
    """The framework version rules judge against, and how it was chosen."""

    framework: Framework
    version: str
    source: str  # "--target", "image tag vllm/vllm-openai:v0.8.5 (k8s.yaml:20:16)", ...
    assumed: bool = False  # nothing pinned the version: the newest one sits-doctor knows is assumed

    def __str__(self) -> str:
        return f"{FRAMEWORK_NAMES[self.framework]} {self.version} ({self.source})"

    @property
    def name(self) -> str:
        """How a message names it: "vLLM 0.11.0", or "vLLM 0.33.0 (assumed)" when nothing pins it."""
        return f"{FRAMEWORK_NAMES[self.framework]} {self.version}" + (" (assumed)" if self.assumed else "")


class ModelFacts:
    """A Hugging Face model config (config.json) as written; rules read :class:`Facts` built
    from it (sits_doctor.frameworks.transformers.model_dims). Not changed after it is built:
    :meth:`with_overrides` makes a new one."""

    def __init__(self, path: str, data: dict[str, Any], text_pointer: str = "", doc: SourceDoc | None = None,
                 generation: SourceDoc | None = None, quant: SourceDoc | None = None,
                 overrides: dict[str, "Setting"] | None = None, stored_weights: tuple[int, str] | None = None,
                 autogptq: SourceDoc | None = None):
        self.path = path
        self.data = data
        self.text_pointer = text_pointer  # "" or "/text_config" (transformers' get_text_config())
        self.doc = doc
        self.generation = generation
        self.quant = quant
        self.overrides = {} if overrides is None else overrides  # vLLM hf_overrides
        self.stored_weights = stored_weights  # (bytes, file): model.safetensors.index.json's metadata.total_size
        self.autogptq = autogptq  # quantize_config.json beside config.json (AutoGPTQ's recipe)

    def __repr__(self) -> str:
        return f"ModelFacts({self.path!r})"

    def with_overrides(self, found: dict[str, "Setting"]) -> "ModelFacts":
        return ModelFacts(self.path, self.data, self.text_pointer, self.doc, self.generation, self.quant,
                          {**self.overrides, **found}, self.stored_weights, self.autogptq)

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
        site = Site("mapping", self.doc, pointer) if self.doc else None
        return Setting(key=key, raw_key=key, value=text[key], raw=text[key], prov=prov, site=site)


class Plan:
    """One deployment as a framework will run it."""

    def __init__(self, framework: Framework, kind: str, label: str, file: str, anchor: Provenance,
                 settings: dict[str, Setting] | None = None, env: dict[str, Setting] | None = None,
                 image: Setting | None = None, model_ref: Setting | None = None, model: ModelFacts | None = None,
                 model_note: str | None = None, target: Target | None = None, doc: SourceDoc | None = None,
                 facts: Any = None, args_site: Site | None = None, entry: str = "", parser: str = "", unchecked: int = 0, positional: int = 0,
                 hardware: dict[str, Setting] | None = None):
        self.framework = framework
        self.kind = kind  # hf-config, vllm-yaml, vllm-args, trtllm-engine, trtllm-llmapi, ortgenai-config
        self.label = label
        self.file = file
        self.anchor = anchor
        self.settings = {} if settings is None else settings
        self.env = {} if env is None else env
        self.image = image
        self.model_ref = model_ref
        self.model = model
        self.model_note = model_note  # why ``model`` could not be resolved
        self.target = target
        self.doc = doc
        self.facts = facts  # sits_doctor.facts.Facts, filled by the engine
        self.args_site = args_site  # where new command-line options would be added (argv/shell)
        self.entry = entry  # how the framework is started, as shown: "vllm serve", "python -m ...", "vllm serve --config"
        self.parser = parser  # which of the framework's parsers reads the words (vLLM: frameworks.vllm.PARSER_*)
        self.positional = positional  # command-line words that are no option and no option's value
        self.unchecked = unchecked  # command-line words that name variables the container does not set
        self.hardware = {} if hardware is None else hardware  # "gpu_count", "gpu_product" as a manifest states them
        self.pin: Setting | None = None  # the framework version a `pip install vllm==X` in the file installs
        # where the framework's image comes from when the file names none (an operator's own setting)
        self.image_note = ""
        # why the server ignores words its parser does not know instead of refusing to start
        # (KServe's huggingfaceserver: parse_known_args); "" when unknown words are a startup failure
        self.lenient = ""

    def __repr__(self) -> str:
        return f"Plan({self.framework!r}, {self.kind!r}, {self.label!r})"

    def get(self, key: str) -> Setting | None:
        return self.settings.get(key)

    def value(self, key: str, default: Any = None) -> Any:
        """The parsed value of an option that is set and known (not templated), else ``default``."""
        s = self.settings.get(key)
        if s is None or s.templated:
            return default
        return s.value

    def copy(self, **changes: Any) -> "Plan":
        """A shallow copy with some attributes changed."""
        new = object.__new__(Plan)
        new.__dict__.update(self.__dict__)
        for name, value in changes.items():
            if name not in new.__dict__:
                raise TypeError(f"Plan has no attribute {name!r}")
            setattr(new, name, value)
        return new
