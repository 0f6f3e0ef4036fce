"""Project settings: ``.sits-doctor.toml`` or ``[tool.sits-doctor]`` in ``pyproject.toml``.

Like ruff, the closest config file above each checked file wins (no merging); command-line
options override it. Keys (kebab-case): ``select``, ``extend-select``, ``ignore``, ``fail-on``,
``target`` (list of ``NAME==VERSION``), ``per-file-ignores`` (glob → codes, globs relative to the
config file's folder), ``model-config``, ``gpu`` (``NAME[xN]`` from the GPU catalog: the GPU the
deployments under this folder run on), ``exclude`` (globs of files and folders a directory walk
leaves out, replacing the default: hidden ones, ``node_modules``, ``__pycache__``,
``site-packages``) and ``extend-exclude`` (added to it). A glob without ``/`` matches a file or
folder name anywhere below; one with ``/`` matches the path from the settings file's folder.
Files named on the command line are always checked.
"""

import fnmatch
import os
from functools import lru_cache
from pathlib import Path

from types import MappingProxyType
from typing import Mapping, NamedTuple, Sequence

from sits_doctor.errors import InputError
from sits_doctor.finding import Severity
from sits_doctor.source import LineIndex, display_path, read_input, read_text

CONFIG_NAMES = (".sits-doctor.toml", "pyproject.toml")


class ProjectSettings(NamedTuple):
    """The settings that apply to a file (all defaults when no settings file is found)."""

    select: list[str] | None = None
    extend_select: Sequence[str] = ()
    ignore: Sequence[str] = ()
    fail_on: Severity | None = None
    target: Sequence[str] = ()
    per_file_ignores: Mapping[str, Sequence[str]] = MappingProxyType({})
    model_config_path: str | None = None
    gpu: str | None = None
    exclude: Sequence[str] | None = None  # None: DEFAULT_EXCLUDE
    extend_exclude: Sequence[str] = ()
    root: Path | None = None  # folder of the config file
    source: str | None = None  # the config file itself

    def ignored_for(self, file: str) -> set[str]:
        """Codes/prefixes ignored for ``file`` by ``per-file-ignores``."""
        if not self.per_file_ignores:
            return set()
        path = Path(file).resolve()
        try:
            rel = path.relative_to(self.root.resolve()).as_posix() if self.root else path.as_posix()
        except ValueError:
            rel = path.as_posix()
        out: set[str] = set()
        for pattern, codes in self.per_file_ignores.items():
            if fnmatch.fnmatch(rel, pattern) or fnmatch.fnmatch(path.name, pattern):
                out.update(codes)
        return out


    def excluded(self, path: Path) -> bool:
        """Whether a directory walk leaves ``path`` (a file or folder; a folder's contents go with it) out."""
        patterns = [*(DEFAULT_EXCLUDE if self.exclude is None else self.exclude), *self.extend_exclude]
        rel = None
        for pattern in patterns:
            bare = pattern.strip("/")
            if "/" not in bare:
                if fnmatch.fnmatchcase(path.name, bare):
                    return True
                continue
            if rel is None:
                try:
                    rel = path.resolve().relative_to((self.root or Path.cwd()).resolve()).as_posix()
                except ValueError:
                    rel = ""
            if rel and fnmatch.fnmatchcase(rel, bare):
                return True
        return False


DEFAULT_EXCLUDE = (".*", "node_modules", "__pycache__", "site-packages")  # hidden files and folders, installed packages


def find_config(start: Path) -> Path | None:
    """The closest ``.sits-doctor.toml`` or ``pyproject.toml`` with ``[tool.sits-doctor]``."""
    return _find_from(str(start if start.is_dir() else start.parent))


def find_config_for_file(file: str) -> Path | None:
    """:func:`find_config` for a path known to be a file (no stat)."""
    return _find_from(os.path.dirname(file) or ".")


@lru_cache(maxsize=None)
def _find_from(folder: str) -> Path | None:  # a directory's files share one resolve()
    return _find_in(Path(folder).resolve())


@lru_cache(maxsize=None)
def _find_in(folder: Path) -> Path | None:
    for name in CONFIG_NAMES:
        candidate = folder / name
        if candidate.is_file():
            if name == "pyproject.toml":
                try:
                    if b"[tool.sits-doctor" not in read_input(candidate, display_path(candidate), what=SETTINGS_FILE):
                        continue
                except InputError:  # unreadable (too big, swapped for a FIFO): load_settings says why
                    pass
            return candidate
    return None if folder.parent == folder else _find_in(folder.parent)


SETTINGS_FILE = "a settings file"


@lru_cache(maxsize=None)
def load_settings(path: Path) -> ProjectSettings:
    """The settings a file holds; an unusable file (unreadable, invalid or too deeply nested
    TOML, a key of the wrong type) is an InputError at the line and column of the problem."""
    from sits_doctor.source_toml import parse_toml

    shown = display_path(path)
    text = read_text(path, shown, what=SETTINGS_FILE)
    data = parse_toml(text, shown)
    start = 0
    if path.name == "pyproject.toml":
        tool = data.get("tool", {})
        if not isinstance(tool, dict):
            raise InputError(shown, f"'tool' must be a table, not {_toml_type(tool)}", *(_key_at(text, "tool") or ()))
        data = tool.get("sits-doctor", {})
        start = max(text.find("[tool.sits-doctor]"), 0)
    if not isinstance(data, dict):
        raise InputError(shown, f"invalid sits-doctor settings: [tool.sits-doctor] must be a table, not {_toml_type(data)}",
                         *(_key_at(text, "sits-doctor") or ()))
    from pydantic import ValidationError

    try:
        model = _schema().model_validate(data)
    except ValidationError as exc:
        errors = exc.errors()
        problems = "; ".join(f"{'.'.join(str(p) for p in e['loc']) or 'settings'}: {e['msg']}" for e in errors)
        where = _key_at(text, str(errors[0]["loc"][0]), start) if errors and errors[0]["loc"] else None
        raise InputError(shown, f"invalid sits-doctor settings: {problems}", *(where or ())) from None
    values = {name: getattr(model, name) for name in type(model).model_fields}
    return ProjectSettings(**values)._replace(root=path.parent, source=str(path))


def locate(source: str | None, key: str) -> tuple[int, ...]:
    """``(line, col)`` where a settings file writes ``key`` (in pyproject.toml, inside its
    [tool.sits-doctor] table), or ``()``: for errors found after the file was loaded (an unknown
    rule selector, target or GPU)."""
    if not source:
        return ()
    try:
        text = read_text(Path(source), display_path(Path(source)), what=SETTINGS_FILE)
    except InputError:
        return ()
    start = max(text.find("[tool.sits-doctor]"), 0) if Path(source).name == "pyproject.toml" else 0
    return _key_at(text, key, start) or ()


def _toml_type(value) -> str:
    """What a TOML value is, in TOML's words."""
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, (int, float)):
        return "a number"
    if isinstance(value, str):
        return "a string"
    if isinstance(value, list):
        return "an array"
    return "a date or time" if not isinstance(value, dict) else "a table"


def _key_at(text: str, key: str, start: int = 0) -> tuple[int, int] | None:
    """Line and column where a settings key is written (``key =``, bare or quoted, at the start of
    a line or inside an inline table, from ``start``: in pyproject.toml, the [tool.sits-doctor]
    table, not another tool's key of the same name)."""
    import re

    m = re.compile(rf"(?:^|[{{,])[ \t]*(\"?{re.escape(key)}\"?)[ \t]*=", re.MULTILINE).search(text, start)
    return LineIndex(text).linecol(m.start(1)) if m else None


@lru_cache(maxsize=None)
def _schema():
    """The pydantic model that validates a settings file (built only when one is found: building
    it costs more than checking a file)."""
    from pydantic import BaseModel, ConfigDict, Field

    class SettingsFile(BaseModel):
        model_config = ConfigDict(extra="forbid", populate_by_name=True,
                                  alias_generator=lambda s: s.replace("_", "-"))

        select: list[str] | None = None
        extend_select: list[str] = Field(default_factory=list)
        ignore: list[str] = Field(default_factory=list)
        fail_on: Severity | None = None
        target: list[str] = Field(default_factory=list)
        per_file_ignores: dict[str, list[str]] = Field(default_factory=dict)
        model_config_path: str | None = Field(default=None, alias="model-config")
        gpu: str | None = None
        exclude: list[str] | None = None
        extend_exclude: list[str] = Field(default_factory=list)

    return SettingsFile


def clear_caches() -> None:
    """Forget discovered and parsed settings files (each check() sees the files as they are now)."""
    _find_from.cache_clear()
    _find_in.cache_clear()
    load_settings.cache_clear()
