"""``sits_doctor.check_model``: the rules ``sits-doctor check`` runs, on a transformers model that is
already built in this process instead of on a config file.

The live model stands in for the files: ``model.config`` for config.json (with the
``architectures`` and ``dtype`` that ``save_pretrained`` would write for it) and
``model.generation_config`` for generation_config.json. What the model runs (attention
implementation, rotary placement, generate()'s cache, quantizer, dtype, device) is read off its
modules by :func:`sits_doctor.runtime_hf.live`, the reader ``check --runtime`` uses on a model it
builds on the meta device. The target version is the installed transformers.

There is no file, so findings point at ``<model LlamaForCausalLM>`` with line 0 (no position) and
a JSON Pointer (``/generation_config/max_length``); values they cite are named as attributes
(``model.generation_config.max_length``), and every fix is shown, never applied.

Imports torch and transformers (only when called): ``import sits_doctor`` stays light.
"""

from __future__ import annotations

import json
import re

from sits_doctor.engine import Context, PlanSummary, Report, gpu_spec
from sits_doctor.errors import InputError, Notice
from sits_doctor.finding import Finding, Fix, Location, Safety

from sits_doctor.runtime_hf import GENERATION  # generation_config's keys sit under it in a finding's pointer


def check_model(model, gpu=None, workload=None) -> Report:
    """Check a live transformers model (an instantiated ``PreTrainedModel``) with the rules
    ``sits-doctor check`` runs on its config files.

    - ``gpu``: ``NAME`` or ``NAMExN`` from the GPU catalog (``"H100"``, ``"A100-40GBx2"``), as
      the CLI's ``--gpu``; or a :class:`~sits_doctor.facts.GpuSpec`. Without it the rules that
      size memory (SITS001) do not run, and a notice says so.
    - ``workload``: reserved for request-shape profiles, which do not exist yet: only ``None``
      is accepted (anything else raises ValueError).

    A model wrapped by ``torch.compile`` or PEFT is checked through the model inside. Returns the
    :class:`~sits_doctor.engine.Report` the CLI renders (``report.runtime`` holds what
    the model runs). Raises TypeError when ``model`` is not a transformers ``PreTrainedModel``,
    ValueError for an unknown GPU or a workload.
    """
    if workload is not None:
        raise ValueError(f"workload={workload!r}: workloads are not supported yet; check_model accepts only "
                         "workload=None for now")
    from transformers import PreTrainedModel

    model = _unwrapped(model)
    if not isinstance(model, PreTrainedModel):
        raise TypeError(f"check_model needs a transformers PreTrainedModel (from from_pretrained or from_config), "
                        f"not {type(model).__module__}.{type(model).__qualname__}")
    spec = _gpu(gpu)

    from sits_doctor import runtime_hf
    from sits_doctor.engine import _cannot_check, _invalid_model, _merge_unchecked, effective, rule_modules, runtime_row
    from sits_doctor.versions import unknown_version_note

    live = _LiveDocs(model)
    plan = live.plan()
    report = Report()
    note = unknown_version_note("hf", plan.target.version)
    if note:
        report.notices.append(Notice(live.name, f"transformers {plan.target.version}: {note}"))
    plan.facts = effective(plan, spec)._replace(runtime=runtime_hf.live(model))
    report.deployments.append(plan)
    report.plans.append(PlanSummary(plan.label, plan.framework, plan.kind, live.name, str(plan.target), live.name))
    report.runtime.append({**runtime_row(plan), **_extra_row(plan.facts.runtime)})
    report.errors += [InputError(live.name, e.message) for e in _invalid_model(plan)]
    ctx = Context(target=plan.target, gpu=gpu if isinstance(gpu, str) else spec.name if spec is not None else None)
    found: list[Finding] = []
    no_gpu = []
    for module in rule_modules():
        rule = module.RULE
        if plan.framework not in rule.frameworks:
            continue
        try:
            missing = [n for n in rule.needs if n in plan.facts.missing]
            if "gpu" in missing:
                no_gpu.append(rule.code)
                continue
            if missing:
                found.extend(_merge_unchecked(plan, _cannot_check(module, plan, ctx, missing)))
                continue
            found.extend(module.check(plan, ctx))
        except Exception as exc:  # a rule bug must not hide other results
            report.internal_errors.append(f"{rule.code} crashed on {plan.label}: {exc!r}")
    if no_gpu:
        report.notices.append(Notice(live.name, f"{', '.join(no_gpu)} did not check the model: no GPU is known; "
                                                "pass gpu=\"NAME[xN]\" (e.g. gpu=\"H100x2\")"))
    unique = {(f.sort_key(), f.plan): f for f in map(live.relocate, found)}
    report.findings = sorted(unique.values(), key=Finding.sort_key)
    return report


def _unwrapped(model):
    """The transformers model inside the wrappers it is usually served in: ``torch.compile``'s
    ``OptimizedModule`` (``_orig_mod``) and PEFT's ``PeftModel`` (``get_base_model()``)."""
    for _ in range(4):  # a compiled PEFT model: two layers of wrapping
        inner = getattr(model, "_orig_mod", None)
        if inner is None and callable(getattr(model, "get_base_model", None)):
            inner = model.get_base_model()
        if inner is None or inner is model:
            return model
        model = inner
    return model


def _gpu(gpu):
    from sits_doctor.engine import CheckOptions
    from sits_doctor.facts import GpuSpec

    if gpu is None or isinstance(gpu, GpuSpec):
        return gpu
    if not isinstance(gpu, str):
        raise TypeError(f"gpu must be a catalog name such as 'H100' or 'H100x2' (or a GpuSpec), not {type(gpu).__name__}")
    try:
        return gpu_spec(CheckOptions(gpu=gpu))
    except InputError as err:
        raise ValueError(f"gpu={gpu!r}: {err.message.removeprefix('--gpu ')}") from None


def _extra_row(runtime) -> dict:
    """The live facts ``check --runtime``'s rows do not carry."""
    return {name: (None if getattr(runtime, name) is None else getattr(runtime, name).value)
            for name in ("dtype", "device")}


class _LiveDocs:
    """The live model's config and generation config as positioned JSON documents (what the
    loaders make of config.json and generation_config.json), and the way back from their
    positions to the model's attributes."""

    def __init__(self, model):
        import transformers

        self.model = model
        self.cls = type(model).__name__
        self.name = f"<model {self.cls}>"
        self.version = transformers.__version__
        config = json.loads(model.config.to_json_string(use_diff=False))
        if not config.get("architectures"):  # save_pretrained writes the class it saves
            config["architectures"] = [self.cls]
        dtype_key = next((k for k in ("dtype", "torch_dtype") if k in config), "dtype")
        config[dtype_key] = str(model.dtype).removeprefix("torch.")  # save_pretrained writes the weights' dtype
        generation = getattr(model, GENERATION, None)
        gen = {}
        if generation is not None:  # unset fields (None) are left out, as a generation_config.json leaves them
            gen = {k: v for k, v in json.loads(generation.to_json_string(use_diff=False)).items() if v is not None}
        from sits_doctor.source import parse_json

        self.config_doc = parse_json(json.dumps(config, indent=2), self.name)
        self.gen_doc = parse_json(json.dumps(gen, indent=2), f"<model {self.cls} {GENERATION}>")
        self._where = {doc.path: (doc, self._positions(doc)) for doc in (self.config_doc, self.gen_doc)}

    def plan(self):
        from sits_doctor.loaders.hf import plan_from_config
        from sits_doctor.plan import Target

        plan = plan_from_config(self.config_doc, {"generation_config.json": self.gen_doc})
        plan.label = f"live model {self.cls}"
        plan.entry = "sits_doctor.check_model"
        plan.target = Target("hf", self.version, "installed package: the live model's transformers")
        return plan

    @staticmethod
    def _positions(doc) -> dict[tuple[int, int], str]:
        found = {}
        for pointer, pos in doc.positions.items():
            found.setdefault((pos.line, pos.col), pointer)
            if pos.key_line is not None:
                found[(pos.key_line, pos.key_col or 1)] = pointer
        return found

    def _pointer(self, path: str, pointer: str) -> str:
        """The pointer in the finding's terms: generation_config's keys under /generation_config."""
        return f"/{GENERATION}{pointer}" if path == self.gen_doc.path else pointer

    def attribute(self, pointer: str) -> str:
        """``/generation_config/max_length`` -> ``model.generation_config.max_length``."""
        tokens = [t.replace("~1", "/").replace("~0", "~") for t in pointer.split("/")[1:]]
        if tokens and tokens[0] == GENERATION:
            head, rest, obj = f"model.{GENERATION}", tokens[1:], getattr(self.model, GENERATION, None)
        else:
            head, rest, obj = "model.config", tokens, self.model.config
        for t in rest:  # a sub-config is an attribute, a dict (rope_parameters) or list is indexed
            if isinstance(obj, (dict, list)) or obj is None or not t.isidentifier() or not hasattr(obj, t):
                key = int(t) if t.isdigit() and not (isinstance(obj, dict) and t in obj) else t
                head += f"[{key!r}]"
                obj = obj[key] if isinstance(obj, (dict, list)) and _has(obj, key) else None
            else:
                head += f".{t}"
                obj = getattr(obj, t)
        return head

    def _text(self, text: str | None) -> str | None:
        """``<model X>:12:3`` (a place in the stand-in documents) -> the model attribute it holds."""
        if not text:
            return text
        for path, (doc, where) in self._where.items():
            if path not in text:
                continue

            def named(m, doc=doc, where=where):
                pointer = where.get((int(m.group(1)), int(m.group(2))))
                return self.name if pointer is None else self.attribute(self._pointer(doc.path, pointer))

            text = re.sub(re.escape(path) + r":(\d+):(\d+)", named, text)
        return text

    def relocate(self, finding: Finding) -> Finding:
        """The finding about the live model: at ``<model X>`` with no line, values named as the
        model's attributes, fixes shown as advice (nothing to edit)."""
        loc = finding.location
        pointer = self._pointer(loc.file, loc.pointer) if loc.file in self._where else loc.pointer
        where = self.attribute(pointer) if pointer else "the model"
        fixes = tuple(Fix(f.title, self.name, (), Safety.DISPLAY,
                          f"a live model has no file to edit: make the change on {where} (or in the files it is "
                          "loaded from)") for f in finding.fixes)
        return finding._replace(
            location=Location(self.name, 0, 0, pointer),
            message=self._text(finding.message),
            evidence=tuple(self._text(e) for e in finding.evidence),
            fix_hint=self._text(finding.fix_hint),
            fixes=fixes,
        )


def _has(container, key) -> bool:
    if isinstance(container, dict):
        return key in container
    return isinstance(key, int) and 0 <= key < len(container)
