"""From paths to Plans: walk directories, read files safely, sniff each document by content and
hand it to the loader for its framework.

A file is recognized by what it holds, never by its name: a ``config.json`` is an HF model
config, a TensorRT-LLM engine config or an ORT GenAI config depending on its keys; a YAML file is
a vLLM ``--config`` file, a TensorRT-LLM LLM-API file, a Kubernetes manifest, a compose file or
production-stack Helm values. While walking a directory, files that hold none of these are
skipped and counted; a file named explicitly that holds none of them is an input error.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Iterable, Sequence

from sits_doctor.errors import InputError, Notice
from sits_doctor.frameworks import vllm as vllm_fw
from sits_doctor.loaders import compose, helm, hf, kubernetes, ortgenai, trtllm, vllm
from sits_doctor.loaders.filenames import is_dockerfile, is_script
from sits_doctor.plan import Plan
from sits_doctor.source import SourceDoc, display_path, parse_json, read_input, read_text
from sits_doctor.source_yaml import parse_yaml

_TEMPLATE_WORDS = {"yaml": "{{ }} template expressions", "pbtxt": "${...} placeholders of an unfilled template"}
CONFIG_SUFFIXES = frozenset({".json", ".yaml", ".yml", ".sh", ".bash", ".pbtxt", ".sbatch", ".slurm"})
SKIP_DIRS = frozenset({"node_modules", "__pycache__", "site-packages"})
# Files that sit beside model configs but are never deployment configs: not even opened.
NEVER_CONFIG = frozenset(
    """tokenizer.json tokenizer_config.json special_tokens_map.json vocab.json added_tokens.json
    preprocessor_config.json processor_config.json chat_template.json
    model.safetensors.index.json pytorch_model.bin.index.json""".split()
)
EXPECTED = (
    "a Hugging Face config.json, a vLLM serve --config YAML, a Kubernetes/compose/Helm/KubeAI/llm-d/"
    "SkyPilot/Ray Serve file running vLLM or trtllm-serve, a launch script or Dockerfile, a TensorRT-LLM "
    "engine config or LLM-API YAML, a Triton config.pbtxt, or an ORT GenAI genai_config.json"
)


class LoadResult:
    """What loading some paths gave: plans, and what could not be used or was skipped."""

    def __init__(self):
        self.plans: list[Plan] = []
        self.errors: list[InputError] = []
        self.notices: list[Notice] = []
        self.files_checked: list[str] = []
        self.skipped = 0
        self.skipped_files: list[tuple[str, str]] = []  # (display path, why)
        self.texts: dict[Path, str] = {}
        self.sources: dict[str, str] = {}  # display path -> text checked


def _default_excluded(path: Path) -> bool:
    return path.name.startswith(".") or path.name in SKIP_DIRS


def load_paths(paths: Sequence[str | Path], texts: dict[Path, str] | None = None, *,
               skip_unrecognized: bool = False, exclude_for=None) -> LoadResult:
    """Plans of every recognized config under ``paths``. ``texts`` maps resolved paths to text to
    use instead of what is on disk (the fixer re-checks its edits before writing them).
    ``skip_unrecognized``: a file named in ``paths`` that holds no recognized config is skipped
    as in a directory walk (pre-commit names every staged JSON/YAML file), not an error.
    ``exclude_for(folder)``: the predicate (path -> bool) a walk of ``folder`` leaves paths out by
    (the settings' ``exclude``); by default hidden files and folders and SKIP_DIRS."""
    result = LoadResult()
    result.texts = texts or {}
    seen: set[Path] = set()
    consumed: set[Path] = set()
    for given in paths:
        path = Path(given)
        if path.is_dir():
            excluded = exclude_for(path) if exclude_for is not None else _default_excluded
            for file, key in _walk(path, result, excluded):
                _load(file, False, result, seen, consumed, key)
        elif path.exists() or (result.texts and path.resolve() in result.texts):  # a file, or standard input named
            _load(path, not skip_unrecognized, result, seen, consumed)
        elif path.is_symlink():
            result.errors.append(InputError(str(given), "cannot read: a symbolic link to nothing (broken or a loop)"))
        else:
            result.errors.append(InputError(str(given), "no such file or directory"))
    return result


def _walk(root: Path, result: LoadResult, excluded=_default_excluded) -> Iterable[tuple[Path, Path | None]]:
    """(file, its resolved path or None when it must be resolved) of each candidate file. The walk
    does not follow symlinked folders, so a folder it reaches is the root's real path joined with
    the folder's path below the root: one resolve for the root, not one per file. A folder it
    cannot read (no permission, a path longer than the system allows) is an error, never a
    silent gap in what was checked."""
    real_root = os.path.realpath(root)

    def unreadable(exc: OSError) -> None:
        where = display_path(Path(exc.filename)) if exc.filename else display_path(root)
        result.errors.append(InputError(where, f"cannot read folder: {exc.strerror or exc}"))

    for dirpath, dirnames, filenames in os.walk(root, onerror=unreadable):
        dirnames[:] = sorted(d for d in dirnames if not excluded(Path(dirpath, d)))
        real_dir = os.path.join(real_root, os.path.relpath(dirpath, root))
        for name in sorted(filenames, key=lambda n: (not is_dockerfile(n), n)):  # a Dockerfile before the script it runs
            if excluded(Path(dirpath, name)):
                continue
            p = Path(dirpath, name)
            if (p.suffix.lower() in CONFIG_SUFFIXES or is_dockerfile(name)) and name not in NEVER_CONFIG:
                yield p, None if os.path.islink(p) else Path(os.path.normpath(os.path.join(real_dir, name)))
            else:
                result.skipped += 1
                why = "never a deployment config" if name in NEVER_CONFIG else "not a config, script or Dockerfile by its name"
                result.skipped_files.append((display_path(p), why))


def _load(path: Path, explicit: bool, result: LoadResult, seen: set[Path], consumed: set[Path],
          key: Path | None = None) -> None:
    if key is None:
        try:
            key = path.resolve()
        except (RuntimeError, OSError):  # a symlink loop: Python 3.11 raises RuntimeError
            result.errors.append(InputError(display_path(path), "cannot read: symbolic link loop"))
            return
    if key in seen or (not explicit and key in consumed):
        return
    seen.add(key)
    display = display_path(path)
    text = None
    try:
        text = result.texts[key] if key in result.texts else read_text(path, display)
        docs = parse_docs(text, path, display)
    except InputError as err:
        if explicit or not _tolerable_in_walk(path, err, text):
            result.errors.append(err)
        else:
            result.skipped += 1
            result.skipped_files.append((display, err.message))
            result.notices.append(Notice(display, f"skipped: {err.message}", err.line, err.col))
        return
    plans: list[Plan] = []
    try:
        for doc in docs:
            plans += _plans_of(doc, path, consumed, result)
    except InputError as err:
        result.errors.append(err)
        return
    if not plans:
        from sits_doctor.loaders.foreign import note, servers_in

        servers = servers_in(text or "")
        if servers:  # another inference server's deployment: read, and said to be unchecked
            result.files_checked.append(display)
            result.notices.append(Notice(display, note(servers)))
            return
        if explicit:
            what = _why_unrecognized(docs)
            result.errors.append(InputError(display, f"not a recognized config{what}; expected {EXPECTED}"))
        else:
            result.skipped += 1
            result.skipped_files.append((display, f"not a recognized config{_why_unrecognized(docs)}"))
        return
    result.files_checked.append(display)
    result.sources[display] = text
    result.plans += plans
    unchecked = sum(p.unchecked for p in plans)
    if unchecked:
        result.notices.append(Notice(
            display, f"{unchecked} command-line word(s) use variables the container's env does not set "
                     "(or sets from a secret or a field) and were not checked"))
    templated = sum(len(d.templated) for d in docs)
    if templated:
        result.notices.append(
            Notice(display, f"{templated} value(s) hold {_TEMPLATE_WORDS.get(docs[0].fmt, _TEMPLATE_WORDS['yaml'])} "
                            "and were not checked")
        )


def read_docs(path: Path, display: str) -> list[SourceDoc]:
    """Read and parse a file into its documents (JSON: one; YAML: one per ``---``)."""
    return parse_docs(read_text(path, display), path, display)


def parse_docs(text: str, path: Path, display: str) -> list[SourceDoc]:
    if not text.strip():
        raise InputError(display, "empty file")
    if is_dockerfile(path.name):
        return [_wrapper("script").parse_dockerfile(text, display)]
    if is_script(path.name, text):
        return [_wrapper("script").parse_script(text, display)]
    suffix = path.suffix.lower()
    if suffix == ".pbtxt":
        from sits_doctor.loaders import triton

        return [triton.parse_pbtxt(text, display)]
    is_json = suffix == ".json" or (suffix not in (".yaml", ".yml") and text.lstrip().startswith(("{", "[")))
    if is_json:
        return [parse_json(text, display)]
    return parse_yaml(text, display)


# Words a deployment config we read would contain; a broken file without any is not ours.
_CONFIG_MARKERS = vllm_fw.SNIFF_WORDS + (
    "servingEngineSpec", "pretrained_config", "build_config", "context_length", "genai", "architectures",
    "model_type", "kv_cache_config", "cuda_graph",
)
_CONFIG_NAMES = frozenset({"config.json", "genai_config.json", "generation_config.json", "hf_quant_config.json",
                           "quantize_config.json"})


def _tolerable_in_walk(path: Path, err: InputError, text: str | None) -> bool:
    """Problems that only mean "not one of our configs" when met while walking a directory: a
    size over the limit, an empty file, a Helm template, or a broken file that does not look like
    a deployment config at all (docs, other tools' settings). A broken file that does is an error."""
    if err.message == "empty file" or ("over the" in err.message and "limit" in err.message):
        return True
    if err.message.endswith("not a config file"):  # a FIFO, socket or device: never opened to read
        return True
    if path.name in _CONFIG_NAMES:
        return False
    if text is None:  # it could not be read as text (binary, not UTF-8): look at it leniently
        try:
            text = read_input(path, display_path(path)).decode("utf-8", errors="replace")
        except InputError:
            return False
    return "{{" in text or not any(marker in text for marker in _CONFIG_MARKERS)


# Wrappers read by modules imported only when a document has the key that marks them (imports are
# much of a one-file check): (key, module, its sniff function, its plans function), in order.
_WRAPPERS = (
    ("catalog", "kubeai", "is_kubeai_catalog", "catalog_plans"),
    ("modelArtifacts", "llmd", "is_llmd_values", "plans"),
    ("sampleApplication", "llmd", "is_deployer_values", "deployer_plans"),
    ("image", "vllm_chart", "is_vllm_chart_values", "plans"),
    ("applications", "ray_serve", "is_ray_serve_llm", "plans"),
    ("llm_configs", "ray_serve", "is_ray_serve_llm", "plans"),
    ("model_loading_config", "ray_serve", "is_ray_serve_llm", "plans"),
    ("run", "skypilot", "is_skypilot_task", "plans"),
)


def _is_kserve(data) -> bool:
    """KServe objects (InferenceService, ServingRuntime, LLMInferenceService): read before the
    generic Kubernetes loader, which would see only their plain containers."""
    return (isinstance(data, dict) and str(data.get("apiVersion", "")).startswith("serving.kserve.io/")
            and _wrapper("kserve").is_kserve(data))


def _wrapper(name: str):
    import importlib

    return importlib.import_module(f"sits_doctor.loaders.{name}")


def _plans_of(doc: SourceDoc, path: Path, consumed: set[Path], result: LoadResult) -> list[Plan]:
    data = doc.data
    if doc.fmt == "shell":
        return _wrapper("script").script_plans(doc)
    if doc.fmt == "dockerfile":
        return _wrapper("script").dockerfile_plans(doc) or _dockerfile_script(doc, path, consumed, result)
    if doc.fmt == "pbtxt":
        from sits_doctor.loaders import triton

        return triton.plans(doc)
    if doc.fmt == "json":
        if trtllm.is_engine_config(data):
            return [trtllm.plan_from_engine(doc)]
        if ortgenai.is_pipeline_v2(data):
            ortgenai.refuse_pipeline_v2(doc)
        if ortgenai.is_genai_config(data):
            return [ortgenai.plan_from_config(doc)]
        if hf.is_model_config(data):
            return [hf.plan_from_config(doc, _sidecars(path, consumed, result))]
        if hf.is_generation_config(data):
            return [hf.plan_from_sidecar(doc, "hf-generation-config")]
        if hf.is_quant_config(data) or (path.name == hf.AUTOGPTQ_NAME and hf.is_autogptq_config(data)):
            # (beside a config.json it is read with it: _sidecars)
            result.notices.append(Notice(doc.path, "a quantization config without a config.json beside it: what "
                                                   "a framework reads of the checkpoint's quantization is not checked"))
            return [hf.plan_from_sidecar(doc, "hf-quant-config")]
        if _is_kserve(data):
            return _wrapper("kserve").plans(doc)
        if kubernetes.is_kubernetes(data):  # kubectl get -o json, and manifests written as JSON
            return kubernetes.plans(doc)
        return []
    if not isinstance(data, dict):
        return []
    if str(data.get("apiVersion", "")).startswith("kubeai.org/") and _wrapper("kubeai").is_kubeai_model(data):
        return _wrapper("kubeai").plans(doc)
    if data.get("kind") == "RayService" and _wrapper("ray_serve").is_rayservice(data):
        return _wrapper("ray_serve").rayservice_plans(doc)
    if _is_kserve(data):
        return _wrapper("kserve").plans(doc)
    if data.get("kind") == "ConfigMap" and _wrapper("kaito").is_kaito_config(data):
        return _wrapper("kaito").plans(doc)
    if data.get("kind") == "ConfigMap" and _wrapper("trtllm_configmap").is_llmapi_configmap(data):
        return _wrapper("trtllm_configmap").plans(doc)  # an LLM-API file mounted as a ConfigMap (Dynamo recipes)
    if kubernetes.is_kubernetes(data):
        return kubernetes.plans(doc)
    if compose.is_compose(data):
        return compose.plans(doc)
    if helm.is_helm_values(data):
        return helm.plans(doc)
    for key, module, sniff, make in _WRAPPERS:
        if key in data and getattr(_wrapper(module), sniff)(data):
            return getattr(_wrapper(module), make)(doc)
    if trtllm.is_disagg_yaml(data):  # trtllm-serve disaggregated -c: one LLM-API plan per server section
        return _wrapper("trtllm_disagg").plans(doc)
    if trtllm.is_llmapi_yaml(data):
        return [trtllm.plan_from_llmapi(doc)]
    if vllm.is_vllm_yaml(data):
        return [vllm.plan_from_config_yaml(doc)]
    return []


def _dockerfile_script(doc: SourceDoc, path: Path, consumed: set[Path], result: LoadResult) -> list[Plan]:
    """Plans of the launch script beside a Dockerfile that its command runs, with the
    Dockerfile's ENV, FROM image, pin and arguments; the script is then not checked again."""
    script = _wrapper("script")
    found = script.launched_script(doc, str(path.parent))
    if found is None:
        return []
    file, args = found
    side = Path(file)
    display = display_path(side)
    try:
        key = side.resolve()
        text = result.texts[key] if key in result.texts else read_text(side, display)
        sdoc = script.parse_script(text, display)
    except (InputError, OSError, RuntimeError):
        return []
    env, image, pin = script.dockerfile_context(doc)
    plans = script.script_plans(sdoc, {**env, **script.script_args(args)}, image, pin)
    if plans:
        consumed.add(key)
        result.sources[display] = text
        for plan in plans:
            plan.label += f" (run by {doc.path})"
    return plans


def load_model_config(path: Path) -> tuple[SourceDoc, dict[str, SourceDoc], list[InputError]]:
    """A model's config.json and its sidecars, for a model named by a serve config.

    Raises InputError when config.json itself cannot be used; problems with the sidecars are
    returned, so the model's facts are still there."""
    (doc,) = read_docs(path, display_path(path))
    if not isinstance(doc.data, dict):
        raise InputError(doc.path, "model config is not a JSON object")
    result = LoadResult()
    sidecars = _sidecars(path, set(), result)
    return doc, sidecars, result.errors


def _sidecars(config_path: Path, consumed: set[Path], result: LoadResult) -> dict[str, SourceDoc]:
    out: dict[str, SourceDoc] = {}
    for name in hf.SIDECARS:
        side = config_path.with_name(name)
        if not side.is_file():
            continue
        consumed.add(side.resolve())
        text = result.texts.get(side.resolve())  # the fixer's text of an edited sidecar
        try:
            (doc,) = (read_docs(side, display_path(side)) if text is None
                      else parse_docs(text, side, display_path(side)))
        except InputError as err:
            result.errors.append(err)
            continue
        except ValueError:
            continue
        out[name] = doc
        result.sources.setdefault(doc.path, doc.text)  # findings in a sidecar quote its lines
    return out


def _why_unrecognized(docs: list[SourceDoc]) -> str:
    if docs and docs[0].fmt in ("shell", "dockerfile"):
        return _wrapper("script").why_not(docs[0])
    if docs and docs[0].fmt == "pbtxt":
        from sits_doctor.loaders import triton

        return f" ({triton.why_not(docs[0])})"
    if all(isinstance(d.data, dict) and not d.data for d in docs):
        return " (it is empty)"
    for d in docs:
        if not isinstance(d.data, dict):
            continue
        if _is_kserve(d.data):
            return _wrapper("kserve").why_not(d)
        if "sampleApplication" in d.data and _wrapper("llmd").is_deployer_values(d.data):
            return _wrapper("llmd").deployer_why_not(d)
        if d.data.get("kind") == "RayService":
            return (" (a RayService whose Serve application builds its engine in Python code: only ray.serve.llm"
                    " llm_configs in serveConfigV2 are read)")
        if str(d.data.get("apiVersion", "")).startswith("kubeai.org/") and _wrapper("kubeai").is_kubeai_model(d.data):
            return f" (a KubeAI Model whose engine is {d.data['spec'].get('engine')!r}, not VLLM)"
    if any(isinstance(d.data, dict) and d.data.get("kind") in ("ConfigMap", "Workspace") for d in docs):
        kaito = _wrapper("kaito")
        if any(kaito.is_kaito_config(d.data) or kaito.is_workspace(d.data) for d in docs):
            return kaito.why_not(docs)
    if any(kubernetes.is_kubernetes(d.data) for d in docs):
        if any("tritonserver" in d.text for d in docs):
            return (" (a Kubernetes manifest that runs Triton Inference Server: its TensorRT-LLM settings are in the"
                    " model repository's config.pbtxt files; check those)")
        return " (a Kubernetes manifest, but no container runs vLLM or trtllm-serve)"
    if any(compose.is_compose(d.data) for d in docs):
        return " (a compose file, but no service runs vLLM or trtllm-serve)"
    return _closest_format(docs)


def _closest_format(docs: list[SourceDoc]) -> str:
    """For a mapping none of the loaders took: the config kind whose option names it uses most."""
    from sits_doctor.frameworks.trtllm import LLMAPI_KEYS

    data = docs[0].data if len(docs) == 1 else None
    if not isinstance(data, dict) or not data:
        return ""
    keys = [str(k) for k in data]
    candidates = (
        ([k for k in keys if vllm.normalize_key(k).partition(".")[0] in vllm_fw.sniff_keys()],
         "vLLM --config file", "vLLM options"),
        ([k for k in keys if k in LLMAPI_KEYS], "TensorRT-LLM LLM-API YAML", "LLM-API fields"),
    )
    found, what, names = max(candidates, key=lambda c: len(c[0]))
    if not found:
        return ""
    total = len(keys)
    shown = ", ".join(found[:3]) + (", ..." if len(found) > 3 else "")
    return (f" (closest to a {what}: {len(found)} of its {total} top-level keys are {names} ({shown}), but such a "
            "file is mostly those, with one that only that framework has)")
