"""Which framework version a rule judges against, and where that choice came from.

Order (DESIGN.md "Versions"): ``--target vllm==0.11`` (or ``target`` in the config file), then
the version a file states (a container image tag, a TensorRT-LLM engine's ``version``), then the
installed package, then the newest version the rules know.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from functools import lru_cache

from packaging.version import InvalidVersion, Version

from sits_doctor.plan import Framework, Plan, Target

from sits_doctor.frameworks import ortgenai as _oga
from sits_doctor.frameworks import transformers as _tf
from sits_doctor.frameworks import trtllm as _trt
from sits_doctor.frameworks import vllm as _vllm

# Newest releases the knowledge modules cover.
class _NewestKnown(Mapping):
    """Each framework's newest release the rules know, from that framework module's own data
    (read when first asked)."""

    _MODULES = {"vllm": _vllm, "trtllm": _trt, "ortgenai": _oga, "hf": _tf}

    def __getitem__(self, framework: str) -> str:
        return self._MODULES[framework].NEWEST

    def __iter__(self):
        return iter(self._MODULES)

    def __len__(self) -> int:
        return len(self._MODULES)


NEWEST_KNOWN: Mapping[str, str] = _NewestKnown()
PACKAGES: dict[str, str] = {"vllm": "vllm", "trtllm": "tensorrt_llm", "ortgenai": "onnxruntime-genai", "hf": "transformers"}
ALIASES: dict[str, str] = {
    "vllm": "vllm",
    "trtllm": "trtllm", "tensorrt-llm": "trtllm", "tensorrt_llm": "trtllm",
    "ortgenai": "ortgenai", "onnxruntime-genai": "ortgenai", "onnxruntime_genai": "ortgenai", "ort-genai": "ortgenai",
    "transformers": "hf", "hf": "hf",
}
_TAG = re.compile(r"^v?(\d+\.\d+(?:\.\d+)*(?:[.-]?post\d+|[.-]?rc\d+)?)")


@lru_cache(maxsize=4096)
def V(text: str) -> Version:
    """A parsed version (cached: rules compare the same few versions many times per file)."""
    return Version(text)


def parse_target(spec: str) -> tuple[str, str]:
    """``vllm==0.11`` → (``vllm``, ``0.11``); raises ValueError with a readable message."""
    name, sep, version = spec.partition("==")
    framework = ALIASES.get(name.strip().lower())
    if not sep or framework is None:
        known = ", ".join(sorted(set(ALIASES)))
        raise ValueError(f"{spec!r}: expected NAME==VERSION with NAME one of {known}")
    try:
        Version(version.strip())
    except InvalidVersion:
        raise ValueError(f"{spec!r}: {version!r} is not a version") from None
    return framework, version.strip()


_DEFAULT_EXPANSION = re.compile(r"^\$\{(?P<name>[A-Za-z_][A-Za-z0-9_]*):?[-=](?P<default>[^${}\s]+)\}$")


def image_default(image: str) -> tuple[str, str] | None:
    """(variable, default) of an image written as one ``${VAR:-default}`` (compose
    interpolation, a shell default): the image that runs where the variable is not set."""
    m = _DEFAULT_EXPANSION.match(image.strip())
    return (m["name"], m["default"]) if m else None


def rehosted_official(image: str) -> bool:
    """An image whose path ends in one of vLLM's own image names under another registry path
    (``registry.example.com/mirror/vllm/vllm-openai:v0.9.2``): a mirror of that image."""
    ref = image.split("@", 1)[0]
    repo = ref.rsplit(":", 1)[0] if ":" in ref.rsplit("/", 1)[-1] else ref
    parts = repo.split("/")
    return (len(parts) > 2 and not _vllm.is_official_image(repo)
            and any("/".join(parts[-2:]) == official for official in _vllm.OFFICIAL_IMAGES))


def version_from_image(image: str) -> tuple[str, str] | None:
    """(framework, version) from an image reference like ``vllm/vllm-openai:v0.8.5`` (or a
    mirror of it whose path ends in ``vllm/vllm-openai``)."""
    ref = image.split("@", 1)[0]
    name, _, tag = ref.rpartition(":") if ":" in ref.rsplit("/", 1)[-1] else (ref, "", "")
    last = name.rsplit("/", 1)[-1]
    m = _TAG.match(tag)
    if not m:
        return None
    m = _TAG.match(_pep440(m.group(1)))
    if "vllm" in last:  # only vLLM's own images are tagged with the vLLM version
        return ("vllm", m.group(1)) if _vllm.is_official_image(name) or rehosted_official(name) else None
    if "tensorrt-llm" in name or "tensorrt_llm" in name or "trtllm" in last:
        return "trtllm", m.group(1)
    return None


def _pep440(text: str) -> str:
    """``0.5.3post1`` → ``0.5.3.post1``: the version as PEP 440 normalises it (pip installs that);
    every text :data:`_TAG` matches is a valid version."""
    return str(Version(text))


IMPORT_NAMES: dict[str, str] = {"vllm": "vllm", "trtllm": "tensorrt_llm", "ortgenai": "onnxruntime_genai", "hf": "transformers"}


def unknown_version_note(framework: str, version: str) -> str | None:
    """What to say when a requested version is outside what the rules know (newer than the
    newest release they cover, or older than the oldest one in the framework's parser data)."""
    if framework == "ortgenai":  # judged by the release's own parser (frameworks/ortgenai_releases.py)
        from sits_doctor.frameworks.ortgenai_releases import judged_as

        return judged_as(version).note
    newest = NEWEST_KNOWN[framework]
    if framework == "trtllm" and V(version) > V(newest):  # SITS204 says per file what it did not check
        return (f"newer than {newest}, the newest release the rules know; its options are not judged as errors "
                "(each file says what was not checked)")
    if V(version) > V(newest):
        return (f"newer than {newest}, the newest release the rules know; options are judged as "
                f"{newest} accepts them")
    if framework == "vllm":
        from sits_doctor.frameworks.vllm import parser_table

        first = parser_table()[0][0]
        if V(version) < V(first):
            return f"older than {first}, the oldest release whose parser the rules know; flags are not judged"
    return None


@lru_cache(maxsize=None)
def installed(framework: str) -> str | None:
    """The installed version of the framework's package, if any. A package that cannot be
    imported from here is not asked for (importlib.metadata costs more than a whole check)."""
    from importlib.util import find_spec

    if find_spec(IMPORT_NAMES[framework]) is None:
        return None
    from importlib import metadata

    try:
        return metadata.version(PACKAGES[framework])
    except metadata.PackageNotFoundError:
        return None


INSTALLED_SOURCE = "installed package"  # Target.source when the installed framework decides (a prefix)


def resolve(plan: Plan, requested: dict[str, tuple[str, str]]) -> Target:
    """``requested`` maps a framework to (version, where it was requested)."""
    framework: Framework = plan.framework
    if framework in requested:
        version, source = requested[framework]
        return Target(framework=framework, version=version, source=source)
    if plan.image is not None:
        written = str(plan.image.value)
        default = image_default(written) if isinstance(plan.image.value, str) else None
        image = default[1] if default else None if plan.image.templated else written
        found = version_from_image(image) if image else None
        if found and found[0] == framework:
            how = f"image {image} ({plan.image.prov})"
            if default:
                how = (f"image {image}, the default of {written} ({plan.image.prov}): {default[0]} is not set in the "
                       "file, so this is the image unless it is set where the file is run")
            if rehosted_official(image):
                how += f"; a mirror of vLLM's own {'/'.join(image.split('@')[0].split('/')[-2:])}, taken as that release"
            return Target(framework=framework, version=found[1], source=how)
    if plan.pin is not None and not plan.pin.templated and plan.pin.key == framework:
        return Target(framework=framework, version=str(plan.pin.value), source=f"{plan.pin.raw} ({plan.pin.prov})")
    if plan.kind == "trtllm-engine":
        stated = plan.value("version")
        if isinstance(stated, str) and _TAG.match(stated):
            return Target(framework=framework, version=_TAG.match(stated).group(1), source=f"engine config version ({plan.get('version').prov})")
    found_installed = installed(framework)
    if found_installed:
        return Target(framework=framework, version=found_installed, source=INSTALLED_SOURCE)
    why = "nothing pins the version" + (f" ({plan.image_note})" if plan.image is None and plan.image_note else "")
    if plan.image is not None and plan.image.templated:
        why = f"the image comes from a template or a variable ({plan.image.prov})"
    elif plan.image is not None and framework == "vllm" and "vllm" in str(plan.image.raw).split("@")[0].rsplit("/", 1)[-1] \
            and not _vllm.is_official_image(str(plan.image.raw).split("@")[0].rsplit(":", 1)[0]):
        why = (f"image {plan.image.raw} ({plan.image.prov}) is not one of vLLM's own images, so its tag is not "
               "taken for a vLLM version")
    elif plan.image is not None:
        why = f"image {plan.image.raw} ({plan.image.prov}) pins no version"
    key = "transformers" if framework == "hf" else framework
    return Target(framework=framework, version=NEWEST_KNOWN[framework], assumed=True,
                  source=f"newest version the rules know, assumed: {why}; pin it with --target {key}==VERSION")
