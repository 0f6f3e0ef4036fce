"""KServe objects (``apiVersion: serving.kserve.io/*``) that run vLLM.

- **InferenceService** ``spec.predictor.model`` (or the older ``spec.predictor.huggingface``):
  with ``modelFormat: huggingface`` the runtime is KServe's Hugging Face server, whose own flags
  (``--model_id``, ``--backend``, ``--http_port``, ...) are taken out and whose other words are
  vLLM engine arguments when the vLLM backend runs (``--backend=vllm``, or ``auto``, the default);
  ``--backend=huggingface`` runs transformers: no plan. With ``modelFormat: vLLM`` the ``args``
  follow the vLLM runtime's ``python -m vllm.entrypoints.openai.api_server`` command.
- **ServingRuntime / ClusterServingRuntime**: each container that runs ``huggingfaceserver``
  (``python -m huggingfaceserver``, or its image's entrypoint) as above.
- **LLMInferenceService**: the controller runs ``vllm serve /mnt/models`` in the pod's ``main``
  container, with ``spec.parallelism``, then ``$VLLM_ADDITIONAL_ARGS`` (a shell string), then the
  container's ``args``; ``spec.prefill`` is a second pool of the same kind.

Any other container (``containers:`` of a predictor, a runtime, a worker spec) is what its own
command says, as the Kubernetes loader reads it (:func:`kubernetes.container_plan`); this module
returns those plans too, so the Kubernetes loader must not read a KServe document again. What
KServe does, by release, and the sources: :mod:`sits_doctor.frameworks.kserve`.

Not read: the ServingRuntime an InferenceService names (its ``modelFormat`` decides what runs,
and the runtime's own words are not merged in); the words of an LLMInferenceService ``worker``
(the same server, headless: the leader's words are judged once); the preset's own flags
(``--port``, ``--served-model-name``, TLS). Under huggingfaceserver an unknown vLLM flag, a
vLLM-only flag spelled with underscores, or a dotted ``--x.y`` flag is ignored rather than refused
(``parse_known_args``): the plan says so (``lenient``), and keeps the last two under
``vllm.UNREAD`` keys so that no rule takes them for options in effect.
"""

from __future__ import annotations

from typing import Any, Iterator

from sits_doctor.frameworks import kserve as fw
from sits_doctor.frameworks import vllm as vllm_fw
from sits_doctor.loaders import kubernetes
from sits_doctor.loaders.commands import SHELLS, image_setting, split_shell, words
from sits_doctor.loaders.vllm import plan_from_command
from sits_doctor.loaders.vllm_args import Token, site_of
from sits_doctor.plan import Plan, Provenance, Setting, Site
from sits_doctor.source import SourceDoc, join_pointer

API_GROUP = "serving.kserve.io/"
RUNTIME_KINDS = ("ServingRuntime", "ClusterServingRuntime")
KINDS = frozenset({"InferenceService", "LLMInferenceService", *RUNTIME_KINDS})
HF_ENTRY = "KServe huggingfaceserver (vLLM backend)"
# The vLLM runtime (config/runtimes/kserve-vllmserver.yaml) and the LLMInferenceService presets run
# vLLM's own serve parser: named as such, so that SITS204 judges unknown flags as it does there.
VLLM_RUNTIME_ENTRY = "python -m vllm.entrypoints.openai.api_server"
LLMISVC_ENTRY = "vllm serve"


def is_kserve(data: Any) -> bool:
    return (isinstance(data, dict) and str(data.get("apiVersion", "")).startswith(API_GROUP)
            and isinstance(data.get("kind"), str) and data.get("kind") in KINDS)  # a mapping is no kind (unhashable)


def plans(doc: SourceDoc) -> list[Plan]:
    """Every vLLM Plan of a KServe object: the ones KServe's own servers make, then the
    containers that say themselves what they run."""
    data = doc.data
    kind, name = data["kind"], _name(data)
    spec = data.get("spec") if isinstance(data.get("spec"), dict) else {}
    claimed: set[str] = set()  # containers (or model specs) read here, not as plain containers
    if kind == "InferenceService":
        out = _isvc_plans(doc, spec, f"InferenceService/{name}", claimed)
    elif kind == "LLMInferenceService":
        out = _llmisvc_plans(doc, spec, f"LLMInferenceService/{name}", claimed)
    else:
        out = _runtime_plans(doc, f"{kind}/{name}", claimed)
    for pointer, container in kubernetes.containers(data, ""):
        if pointer in claimed:
            continue
        label = f"{kind}/{name} container {container.get('name', '?')}"
        plan = kubernetes.container_plan(doc, container, pointer, label)
        if plan is not None:
            out.append(plan)
    return out


def why_not(doc: SourceDoc) -> str:
    """Why a KServe object gave no vLLM plan (for "not a recognized config")."""
    data = doc.data
    kind = data.get("kind")
    spec = data.get("spec") if isinstance(data.get("spec"), dict) else {}
    if kind == "InferenceService":
        found = _predictor_model(spec)
        if found is not None:
            pointer, model, fmt = found
            if _is_hf(model, fmt):
                backend = _backend(words(doc, _command_fields(model, pointer)))
                return (f" (a KServe InferenceService whose Hugging Face server uses the {backend} backend,"
                        " not vLLM)")
            if fmt:
                return f" (a KServe InferenceService whose predictor serves modelFormat {fmt!r}, not vLLM)"
        return " (a KServe InferenceService whose predictor does not run vLLM)"
    if kind in RUNTIME_KINDS:
        for pointer, container in kubernetes.containers(data, ""):
            tokens = words(doc, _command_fields(container, pointer))
            if _hf_args(tokens, container) is not None:
                return (f" (a KServe {kind} whose Hugging Face server uses the {_backend(tokens)} backend,"
                        " not vLLM)")
    return f" (a KServe {kind}, but none of its containers runs vLLM)"


# --- InferenceService ---------------------------------------------------------------------------

def _isvc_plans(doc: SourceDoc, spec: dict, label: str, claimed: set[str]) -> list[Plan]:
    found = _predictor_model(spec)
    if found is None:
        return []
    pointer, model, fmt = found
    claimed.add(pointer)
    predictor_pointer = pointer.rsplit("/", 1)[0]
    label = f"{label} predictor"
    tokens = words(doc, _command_fields(model, pointer))
    env = kubernetes.env_list(doc, model.get("env"), join_pointer(pointer, "env"))
    image = image_setting(doc, model.get("image"), join_pointer(pointer, "image"))
    if _is_hf(model, fmt):
        plan = _hf_plan(doc, tokens, label=label, anchor=Provenance.at(doc, pointer), env=env, image=image)
    elif fmt == "vllm" or "vllm" in str(model.get("runtime", "")).lower():
        plan = plan_from_command(doc, tokens, label=label, anchor=Provenance.at(doc, pointer), env=env, image=image,
                                 engine_args=VLLM_RUNTIME_ENTRY, parser=vllm_fw.PARSER_API_SERVER)
    else:
        return []
    if plan is None:
        return []
    if plan.args_site is None:
        plan.args_site = _args_site(doc, tokens, pointer)
    if plan.model_ref is None or _is_hf(model, fmt):
        plan.model_ref = _model_ref(doc, tokens, model, pointer)
    plan.hardware = kubernetes.gpu_request(doc, model, pointer)
    if "gpu_product" not in plan.hardware:  # the predictor is the pod: its nodeSelector
        pod = kubernetes.gpu_request(doc, {}, join_pointer(join_pointer(predictor_pointer, "containers"), 0))
        plan.hardware.update({k: v for k, v in pod.items() if k == "gpu_product"})
    if _is_hf(model, fmt):
        _device_count_tp(plan)
    return [plan]


def _predictor_model(spec: dict) -> tuple[str, dict, str] | None:
    """(pointer, model spec, its modelFormat name lower-cased) of the predictor."""
    predictor = spec.get("predictor")
    if not isinstance(predictor, dict):
        return None
    model = predictor.get("model")
    if isinstance(model, dict):
        fmt = model.get("modelFormat")
        name = fmt.get("name") if isinstance(fmt, dict) else None
        return "/spec/predictor/model", model, str(name or "").lower()
    if isinstance(predictor.get("huggingface"), dict):  # the pre-0.11 spelling of the Hugging Face runtime
        return "/spec/predictor/huggingface", predictor["huggingface"], "huggingface"
    return None


def _is_hf(model: dict, fmt: str) -> bool:
    return fmt == "huggingface" or fw.HF_MODULE in str(model.get("runtime", "")).lower()


def _model_ref(doc: SourceDoc, tokens: list[Token], model: dict, pointer: str) -> Setting | None:
    """``--model_id``, else ``storageUri``: ``hf://org/name`` names the repository; other schemes
    name storage the file does not show."""
    found = _flag_words(tokens, fw.MODEL_ID_FLAG)
    if found is not None:
        value, used = found
        if value is not None:
            return Setting(key=vllm_fw.MODEL, raw_key=fw.MODEL_ID_FLAG, value=value.text, raw=value.text,
                           prov=used[0].prov, templated=any(t.templated for t in used), site=site_of(doc, used))
    uri = model.get("storageUri")
    if isinstance(uri, str):
        return _uri_setting(doc, uri, join_pointer(pointer, "storageUri"))
    return None


def _uri_setting(doc: SourceDoc, uri: str, pointer: str) -> Setting:
    scheme, sep, rest = uri.partition("://")
    value = rest if sep and scheme == "hf" else uri
    return Setting(key=vllm_fw.MODEL, raw_key=pointer.rsplit("/", 1)[-1], value=value, raw=uri,
                   prov=Provenance.at(doc, pointer), templated=bool(sep and scheme != "hf") or pointer in doc.templated,
                   site=Site("mapping", doc, pointer))


# --- the Hugging Face server -------------------------------------------------------------------

def _hf_plan(doc: SourceDoc, tokens: list[Token], *, label: str, anchor: Provenance,
             env: dict[str, Setting], image: Setting | None) -> Plan | None:
    """The vLLM Plan of huggingfaceserver's arguments ``tokens``, or None when its backend is not
    vLLM. KServe's own flags are dropped (:func:`kserve_words`)."""
    if _backend(tokens) not in fw.VLLM_BACKENDS:
        return None
    vllm_tokens, _ = kserve_words(tokens)
    plan = plan_from_command(doc, vllm_tokens, label=label, anchor=anchor, image=image, env=env,
                             engine_args=HF_ENTRY, parser=vllm_fw.PARSER_API_SERVER)
    if plan is None:  # pragma: no cover - engine_args always gives a plan
        return None
    plan.lenient = fw.LENIENT
    for key, setting in list(plan.settings.items()):
        written = setting.site.words[0].text.partition("=")[0] if setting.site and setting.site.words else ""
        if fw.FEEDS_VLLM.get(written, written) != written:  # written --max_length=N, read as --max_model_len=N
            plan.settings[key] = setting.with_(raw_key=written)
        elif fw.needs_flexible_parse(written):  # never reaches vLLM as the option: no rule may read it
            del plan.settings[key]
            plan.settings[vllm_fw.UNREAD + key] = setting.with_(key=vllm_fw.UNREAD + key)
    plan.model_ref = None  # a positional word is not the model here (the caller sets it)
    return plan


def kserve_words(tokens: list[Token]) -> tuple[list[Token], list[Token]]:
    """(vLLM's words, KServe's own words) of huggingfaceserver's arguments. KServe's flags are
    taken out with their value word; ``--max_length`` (KServe's spelling of vLLM's
    ``max_model_len``) is read as ``--max_model_len``."""
    keep: list[Token] = []
    own: list[Token] = []
    i = 0
    while i < len(tokens):
        tok = tokens[i]
        name, eq, rest = tok.text.partition("=")
        if name in fw.OWN_FLAGS:
            own.append(tok)
            if not eq and name not in fw.STORE_TRUE and i + 1 < len(tokens) and _is_value(tokens[i + 1]):
                i += 1
                own.append(tokens[i])
        elif name in fw.FEEDS_VLLM and fw.FEEDS_VLLM[name] != name:
            keep.append(tok._replace(text=fw.FEEDS_VLLM[name] + eq + rest))
        else:
            keep.append(tok)
        i += 1
    return keep, own


def _is_value(tok: Token) -> bool:
    return not tok.operator and not (tok.text.startswith("-") and len(tok.text) > 1)


def _backend(tokens: list[Token]) -> str:
    """The backend the words choose (argparse: the last ``--backend`` wins); ``auto`` by default."""
    backend = fw.DEFAULT_BACKEND
    for i, tok in enumerate(tokens):
        name, eq, value = tok.text.partition("=")
        if name != fw.BACKEND_FLAG:
            continue
        if not eq:
            value = tokens[i + 1].text if i + 1 < len(tokens) and _is_value(tokens[i + 1]) else ""
            templated = i + 1 < len(tokens) and tokens[i + 1].templated
        else:
            templated = tok.templated
        backend = "vllm" if templated else value  # a value the file does not show: vLLM may run
    return backend


def _flag_words(tokens: list[Token], flag: str) -> tuple[Token | None, list[Token]] | None:
    """(value word, words) of the last ``flag`` among ``tokens``; a ``--flag=value`` word is its
    own value (returned as a token of the value's text)."""
    found = None
    for i, tok in enumerate(tokens):
        name, eq, value = tok.text.partition("=")
        if name != flag:
            continue
        if eq:
            found = (tok._replace(text=value), [tok])
        elif i + 1 < len(tokens) and _is_value(tokens[i + 1]):
            found = (tokens[i + 1], [tok, tokens[i + 1]])
        else:
            found = (None, [tok])
    return found


def _hf_args(tokens: list[Token], container: dict) -> list[Token] | None:
    """The words after ``python -m huggingfaceserver`` up to a shell operator, or all the words
    when the container keeps the huggingfaceserver image's entrypoint; None if it runs no
    huggingfaceserver."""
    texts = [t.text for t in tokens]
    for i, text in enumerate(texts):
        if text == "-m" and i + 1 < len(texts) and texts[i + 1] == fw.HF_MODULE:
            out = []
            for t in tokens[i + 2:]:
                if t.operator:
                    break
                out.append(t)
            return out
    image = str(container.get("image", "")).rsplit("/", 1)[-1]
    if not container.get("command") and image.startswith(fw.HF_IMAGE) and not any(
            t.text in SHELLS or t.operator for t in tokens):
        return list(tokens)
    return None


def _device_count_tp(plan: Plan) -> None:
    """huggingfaceserver runs vLLM at a tensor-parallel size of the pod's GPU count."""
    count = plan.hardware.get("gpu_count")
    if count is None or count.templated or fw.DEVICE_COUNT_OPTION in plan.settings:
        return
    try:
        n = int(str(count.value))
    except ValueError:
        return
    if n > 0:
        plan.settings[fw.DEVICE_COUNT_OPTION] = Setting(
            key=fw.DEVICE_COUNT_OPTION, raw_key=count.raw_key, value=n, raw=count.raw,
            prov=Provenance.derived(f"{fw.DEVICE_COUNT_NOTE}: {count.raw_key} {n} ({count.prov})"))


# --- ServingRuntime / ClusterServingRuntime ------------------------------------------------------

def _runtime_plans(doc: SourceDoc, label: str, claimed: set[str]) -> list[Plan]:
    out = []
    for pointer, container in kubernetes.containers(doc.data, ""):
        tokens = words(doc, _command_fields(container, pointer))
        args = _hf_args(tokens, container)
        if args is None:
            continue
        claimed.add(pointer)
        env = kubernetes.env_list(doc, container.get("env"), join_pointer(pointer, "env"))
        image = image_setting(doc, container.get("image"), join_pointer(pointer, "image"))
        plan = _hf_plan(doc, args, label=f"{label} container {container.get('name', '?')}",
                        anchor=Provenance.at(doc, pointer, key=False), env=env, image=image)
        if plan is None:
            continue
        plan.model_ref = _model_ref(doc, args, {}, pointer)
        if plan.args_site is None:  # after the last word of the command, or nowhere
            plan.args_site = _args_site(doc, tokens, pointer)
        plan.hardware = kubernetes.gpu_request(doc, container, pointer)
        _device_count_tp(plan)
        out.append(plan)
    return out


# --- LLMInferenceService -----------------------------------------------------------------------

def _llmisvc_plans(doc: SourceDoc, spec: dict, label: str, claimed: set[str]) -> list[Plan]:
    out = [_pool_plan(doc, spec, "/spec", f"{label} main", spec, claimed)]
    prefill = spec.get("prefill")
    if isinstance(prefill, dict):
        out.append(_pool_plan(doc, prefill, "/spec/prefill", f"{label} prefill", spec, claimed))
    return [p for p in out if p is not None]


def _pool_plan(doc: SourceDoc, pool: dict, pointer: str, label: str, spec: dict, claimed: set[str]) -> Plan | None:
    """The ``vllm serve`` of one pool (the main one at ``/spec``, or ``/spec/prefill``): the
    ``main`` container of its ``template`` (merged over the preset's), and its ``parallelism``."""
    template = pool.get("template") if isinstance(pool.get("template"), dict) else {}
    template_pointer = join_pointer(pointer, "template")
    container, container_pointer = _main_container(template, template_pointer)
    worker = pool.get("worker")
    if isinstance(worker, dict):  # the worker pods run the same server, headless: judged once, here
        main, main_pointer = _main_container(worker, join_pointer(pointer, "worker"))
        if main_pointer is not None and not main.get("command"):
            claimed.add(main_pointer)
    if container is not None and container.get("command"):
        return None  # its own command: read as a plain container
    if container_pointer is not None:
        claimed.add(container_pointer)
    container = container or {}
    env = kubernetes.env_list(doc, container.get("env"), join_pointer(container_pointer or template_pointer, "env"))
    tokens: list[Token] = []
    extra = env.get(fw.ADDITIONAL_ARGS_ENV)
    if extra is not None and not extra.templated and container_pointer is not None:
        value_pointer = join_pointer(extra.site.pointer, "value")
        tokens += split_shell(doc, str(extra.raw), value_pointer)
    args = container.get("args")
    arg_tokens: list[Token] = []
    if container_pointer is not None and isinstance(args, list):  # $@: after the variable's words
        arg_tokens = words(doc, [(join_pointer(container_pointer, "args"), args)])
    tokens += arg_tokens
    image = image_setting(doc, container.get("image"), join_pointer(container_pointer or template_pointer, "image"))
    anchor = Provenance.at(doc, container_pointer or pointer, key=False)
    plan = plan_from_command(doc, tokens, label=label, anchor=anchor, image=image, env=env, engine_args=LLMISVC_ENTRY,
                             parser=vllm_fw.PARSER_SERVE)
    if plan is None:  # pragma: no cover - engine_args always gives a plan
        return None
    if arg_tokens:
        plan.args_site = site_of(doc, arg_tokens)
    elif tokens:
        plan.args_site = site_of(doc, tokens)
    else:  # nowhere to add a flag: a fix that would add one is shown, not applied
        plan.args_site = Site("argv", doc, container_pointer or template_pointer, ())
    model = spec.get("model")
    uri = model.get("uri") if isinstance(model, dict) else None
    plan.model_ref = _uri_setting(doc, uri, "/spec/model/uri") if isinstance(uri, str) else None
    _parallelism(doc, plan, pool, pointer)
    if container_pointer is not None:
        plan.hardware = kubernetes.gpu_request(doc, container, container_pointer)
    return plan


def _main_container(template: dict, pointer: str) -> tuple[dict | None, str | None]:
    containers = template.get("containers")
    if isinstance(containers, list):
        for i, c in enumerate(containers):
            if isinstance(c, dict) and c.get("name") == fw.LLMISVC_MAIN_CONTAINER:
                return c, join_pointer(join_pointer(pointer, "containers"), i)
    return None, None


def _parallelism(doc: SourceDoc, plan: Plan, pool: dict, pointer: str) -> None:
    """Options the presets write from ``parallelism`` (before the object's own words, which win).
    Data and expert parallelism are written by the data-parallel presets (with ``worker``)."""
    parallelism = pool.get("parallelism")
    if not isinstance(parallelism, dict):
        return
    multi_node = isinstance(pool.get("worker"), dict)
    for field, key in fw.LLMISVC_PARALLELISM:
        if field not in parallelism or key in plan.settings or (field not in fw.SINGLE_NODE_PARALLELISM
                                                                 and not multi_node):
            continue
        value = parallelism[field]
        if field in fw.BOOL_PARALLELISM and value is not True:
            continue
        ptr = join_pointer(join_pointer(pointer, "parallelism"), field)
        plan.settings[key] = Setting(key=key, raw_key=field, value=value, raw=value, prov=Provenance.at(doc, ptr),
                                     templated=ptr in doc.templated, site=Site("mapping", doc, ptr))


# --- shared ---------------------------------------------------------------------------------

def _command_fields(container: dict, pointer: str) -> list[tuple[str, Any]]:
    return [(join_pointer(pointer, f), container[f]) for f in ("command", "args") if f in container]


def _args_site(doc: SourceDoc, tokens: list[Token], pointer: str) -> Site:
    """Where a new flag goes when no vLLM word is written: after the last word (KServe's own
    included), or nowhere (a fix that adds a flag is then shown, not applied)."""
    if tokens:
        return site_of(doc, tokens[-1:])
    return Site("argv", doc, pointer, ())


def _name(data: dict) -> str:
    meta = data.get("metadata")
    return str(meta.get("name", "?")) if isinstance(meta, dict) else "?"
