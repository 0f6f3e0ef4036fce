"""Finding a served model's config.json offline: never downloads.

A serve config names a model (``meta-llama/Llama-3.1-8B-Instruct`` or a path). It is resolved
from ``--model-config PATH``, then a local path (relative to the config file, then to the working
directory), then the local Hugging Face cache through huggingface_hub's cache API, then the
bundled catalog of popular models (sits_doctor/catalogs/models.json). vLLM's
``hf_overrides`` are applied on top, each overridden key pointing at the override.
"""

from __future__ import annotations

import os
from functools import lru_cache
from pathlib import Path
from typing import Any

from sits_doctor.errors import InputError
from sits_doctor.frameworks import vllm as fw
from sits_doctor.plan import ModelFacts, Plan, Setting


class ModelResolver:
    def __init__(self, model_config: str | None = None):
        self.model_config = model_config
        self._cache: dict[Path, ModelFacts] = {}
        self._local: dict[tuple[str, str], Path | None] = {}  # (folder, name) -> its config.json, per run
        self._keys: dict[Path, Path] = {}  # path -> resolved path, per run
        self.errors: list[InputError] = []  # problems with models' sidecar files, for the report

    def resolve(self, plan: Plan) -> tuple[ModelFacts | None, str | None]:
        """The model's facts, or None and a sentence saying why not."""
        if plan.model is not None:
            return plan.model, None
        if self.model_config:
            path = Path(self.model_config)
            facts = self._load(path / "config.json" if path.is_dir() else path)
            return self._with_overrides(facts, plan), None
        ref = plan.model_ref
        if ref is None:
            return None, "the config names no model"
        if ref.templated:
            return None, f"the model name comes from a template or variable ({ref.shown})"
        name = str(ref.value)
        for base in (os.path.dirname(plan.file) or ".", os.getcwd()):
            if (base, name) not in self._local:  # the configs of a folder often name one model
                self._local[base, name] = _local_config(Path(base), name)
            found = self._local[base, name]
            if found is not None:
                return self._with_overrides(self._load(found), plan), None
        cached = _from_hf_cache(name, plan.value(fw.REVISION))
        if cached is not None:
            return self._with_overrides(self._load(cached), plan), None
        bundled = self._from_catalog(name)
        if bundled is not None:
            return self._with_overrides(bundled, plan), None
        return None, (
            f"model {name!r} was not found locally; it is not a local path, its config.json is not in the local "
            "Hugging Face cache and it is not in the bundled model catalog: pass --model-config PATH (nothing is "
            "downloaded)"
        )

    def _from_catalog(self, name: str) -> ModelFacts | None:
        """The bundled catalog's copy of a popular model's config.json (the last resort: a local
        copy or the cache always wins). Its path names the catalog and the model's config URL."""
        if name.count("/") != 1:
            return None
        from sits_doctor.catalogs import models

        entry, renamed = models.lookup(name), None
        if entry is None:
            found = models.lookup_renamed(name)  # a name the Hub renamed (Meta-Llama-3.1-* -> Llama-3.1-*)
            if found is None:
                return None
            entry, renamed = found
        import json

        from sits_doctor.loaders.hf import model_facts
        from sits_doctor.source import parse_json

        where = f"{entry.hub_url}; {renamed}" if renamed else entry.hub_url
        doc = parse_json(json.dumps(entry.config, indent=1), f"<model catalog: {where}>")
        return model_facts(doc)

    def _load(self, path: Path) -> ModelFacts:
        from sits_doctor.loaders import load_model_config
        from sits_doctor.loaders.hf import model_facts

        key = self._keys.get(path)
        if key is None:
            key = self._keys[path] = path.resolve()
        if key not in self._cache:
            if not path.is_file():
                raise InputError(str(path), "model config not found")
            doc, sidecars, errors = load_model_config(path)
            self.errors += errors
            self._cache[key] = model_facts(doc, sidecars)
        return self._cache[key]

    @staticmethod
    def _with_overrides(facts: ModelFacts, plan: Plan) -> ModelFacts:
        """Apply ``hf_overrides`` (a mapping, a JSON string, or ``--hf-overrides.key=value``)."""
        found: dict[str, Setting] = {}
        for key, setting in plan.settings.items():
            name = key.removeprefix(fw.HF_OVERRIDES + ".")
            if name != key and "." not in name and not setting.templated:
                found[name] = setting.with_(key=name)
        if not found:
            return facts
        return facts.with_overrides(found)


def _local_config(base: Path, name: str) -> Path | None:
    """``name`` as a model folder (with a config.json) or a .json file under ``base``. A name no
    file system accepts (too long, a NUL byte, a symlink loop) is not a local path."""
    try:
        candidate = (base / name).expanduser()
        if candidate.is_dir() and (candidate / "config.json").is_file():
            return candidate / "config.json"
        if candidate.is_file() and candidate.suffix == ".json":
            return candidate
    except (OSError, ValueError, RuntimeError):
        return None
    return None


def _cache_dirs() -> list[Path]:
    """Where huggingface_hub keeps its cache (HF_HUB_CACHE, HF_HOME/hub, XDG/~/.cache)."""
    env = os.environ
    names = ("HF_HUB_CACHE", "HUGGINGFACE_HUB_CACHE", "HF_HOME", "XDG_CACHE_HOME", "HOME")
    return _cache_dirs_for(tuple(env.get(n) for n in names))


@lru_cache(maxsize=8)
def _cache_dirs_for(values: tuple[str | None, ...]) -> list[Path]:  # asked once per plan: keep per environment
    hub_cache, old_hub_cache, hf_home, xdg, _home = values
    dirs = [hub_cache, old_hub_cache]
    if hf_home:
        dirs.append(str(Path(hf_home) / "hub"))
    xdg = xdg or str(Path.home() / ".cache")
    dirs.append(str(Path(xdg) / "huggingface" / "hub"))
    return [Path(d).expanduser() for d in dirs if d]


def _from_hf_cache(repo_id: str, revision: Any) -> Path | None:
    if repo_id.count("/") != 1 or repo_id.startswith((".", "/", "~")):
        return None
    # Importing huggingface_hub costs more than a whole check; ask it only if the repo's cache
    # folder exists in one of the places it would look.
    folder = "models--" + repo_id.replace("/", "--")
    try:
        if not any((d / folder).is_dir() for d in _cache_dirs()):
            return None
    except (OSError, ValueError):  # a "repo id" no file system accepts (too long, a NUL byte)
        return None
    try:
        from huggingface_hub import try_to_load_from_cache
    except ImportError:  # pragma: no cover - a base dependency
        return None
    try:
        found = try_to_load_from_cache(repo_id, "config.json", revision=revision if isinstance(revision, str) else None)
    except Exception:  # invalid repo id and the like: the model is simply not resolvable
        return None
    return Path(found) if isinstance(found, str) else None
