"""The check pipeline: paths → Plans → rules → a Report. The CLI and the Python API both call
:func:`check`; reporters render the Report it returns."""

from pathlib import Path
from typing import NamedTuple, Sequence

from sits_doctor.errors import InputError, Notice
from sits_doctor.facts import Facts
from sits_doctor.finding import Finding, Location, Severity
from sits_doctor.loaders import load_paths
from sits_doctor.modelref import ModelResolver
from sits_doctor.plan import Plan, Target
from sits_doctor.source import display_path
from sits_doctor.settings import ProjectSettings, clear_caches, find_config, find_config_for_file, load_settings
from sits_doctor.versions import parse_target, resolve, unknown_version_note


class CheckOptions(NamedTuple):
    """What ``check`` does; the fields are the ``sits-doctor check`` options, all optional:

    - ``select`` / ``extend_select`` / ``ignore``: rule codes or prefixes (``["SITS2"]``; a single
      string is one selector); ``select`` replaces the settings file's selection.
    - ``fail_on``: the lowest :class:`Severity` that fails (default: the settings file's, else
      warning).
    - ``targets``: ``["vllm==0.11.0", ...]``, the versions to judge against (one per framework).
    - ``model_config``: the served model's config.json (or its folder).
    - ``gpu``: ``NAME`` or ``NAMExN`` from the GPU catalog (``H100``, ``A100-40GBx2``);
      ``gpu_memory``: total bytes per GPU as the framework sees it (wins over the catalog).
    - ``config``: a settings file to use instead of discovery; ``isolated``: use none.
    - ``debug``: keep tracebacks of internal errors.
    - ``texts``: resolved path -> text to check instead of the file on disk (the fixer's rounds).
    - ``skip_unrecognized``: a named file that holds no config is skipped, not an error.
    - ``baseline`` / ``write_baseline``: baseline files (docs/ci.md).
    - ``runtime``: find what transformers runs for Hugging Face model configs by building them on
      the meta device with the installed transformers and torch (else from version tables).
    """

    select: Sequence[str] | None = None
    extend_select: Sequence[str] = ()
    ignore: Sequence[str] = ()
    fail_on: Severity | None = None
    targets: Sequence[str] = ()
    model_config: str | None = None
    gpu: str | None = None
    gpu_memory: float | None = None  # bytes per GPU
    config: str | None = None  # explicit settings file
    isolated: bool = False  # ignore settings files
    debug: bool = False
    texts: dict | None = None  # resolved Path -> text to check instead of the file (the fixer's rounds)
    skip_unrecognized: bool = False  # a named file that is not a config is skipped, not an error
    baseline: str | None = None  # drop the findings recorded in this baseline file
    write_baseline: str | None = None  # record the findings in this file
    runtime: bool = False  # build Hugging Face models with the installed transformers (imports torch)


class Context(NamedTuple):
    """What a rule knows besides the Plan."""

    target: Target
    gpu: str | None = None


class PlanSummary(NamedTuple):
    label: str
    framework: str
    kind: str
    file: str
    target: str
    model: str | None


class Report:
    """What a check found: findings, unusable inputs, notes, and what was checked."""

    def __init__(self, **given):
        self.findings: list[Finding] = []
        self.errors: list[InputError] = []
        self.notices: list[Notice] = []
        self.internal_errors: list[str] = []
        self.files_checked: list[str] = []
        self.skipped = 0
        self.skipped_files: list[tuple[str, str]] = []  # (path, why)
        self.suppressed = 0  # findings dropped by inline suppressions and .sits-doctor-ignore.toml
        self.baselined = 0  # findings dropped because the baseline records them
        self.plans: list[PlanSummary] = []
        self.deployments: list[Plan] = []  # the plans themselves, with their effective facts
        self.runtime: list[dict] = []  # check --runtime: what runs for each Hugging Face model config
        self.fail_on: Severity = Severity.WARNING  # --fail-on, or the settings found for the first path
        self.fail_on_by_plan: dict[str, Severity] = {}  # each file's own settings
        self.sources: dict[str, str] = {}  # display path -> the text checked (reporters quote its lines)
        for name, value in given.items():
            if name not in self.__dict__:
                raise TypeError(f"Report has no field {name!r}")
            setattr(self, name, value)

    def __repr__(self) -> str:
        return f"<Report: {len(self.findings)} findings, {len(self.errors)} errors, exit {self.exit_code}>"

    def threshold(self, finding: Finding) -> Severity:
        return self.fail_on_by_plan.get(finding.plan, self.fail_on)

    def fails(self, finding: Finding) -> bool:
        return finding.severity.rank >= self.threshold(finding).rank

    @property
    def failing(self) -> list[Finding]:
        return [f for f in self.findings if self.fails(f)]

    @property
    def exit_code(self) -> int:
        """3 internal error, 2 unusable input, 1 a finding fails the run, else 0."""
        if self.internal_errors:
            return 3
        if self.errors:
            return 2
        return 1 if self.failing else 0


def rule_modules():
    from sits_doctor.rules import RULES

    return RULES


def matches(code: str, selectors: Sequence[str]) -> bool:
    """Whether a rule code is selected (codes and prefixes, any case: ``sits205`` = ``SITS205``)."""
    return any(s.upper() == "ALL" or code.startswith(s.upper()) for s in selectors)


def check_selectors(selectors: Sequence[str], where: str, what: str, at: tuple[int, ...] = ()) -> None:
    codes = [m.RULE.code for m in rule_modules()]
    for s in selectors:
        if s.upper() != "ALL" and not any(c.startswith(s.upper()) for c in codes):
            raise InputError(where, f"unknown rule selector {s!r} in {what} (see `sits-doctor rules`)", *at)


class _Selection:
    """Which rules run for the files under one settings file, and against which versions.

    Command-line options win: a ``--select`` replaces the file's whole selection (its select,
    extend-select and ignore), as ruff's does; ``--target`` beats the file's ``target``.
    """

    def __init__(self, settings: ProjectSettings, opts: CheckOptions):
        where = display_path(Path(settings.source)) if settings.source else "<arguments>"
        from sits_doctor.settings import locate

        for name in ("select", "extend_select", "ignore"):
            key = name.replace("_", "-")
            check_selectors(getattr(settings, name) or (), where, key,
                            locate(settings.source, key) or locate(settings.source, name))
        for codes in settings.per_file_ignores.values():
            check_selectors(codes, where, "per-file-ignores", locate(settings.source, "per-file-ignores"))
        if opts.select:
            select, extend, ignore = list(opts.select), list(opts.extend_select), list(opts.ignore)
        else:
            select = settings.select or ["ALL"]
            extend = list(settings.extend_select) + list(opts.extend_select)
            ignore = list(settings.ignore) + list(opts.ignore)
        self.settings = settings
        self.codes = {
            m.RULE.code for m in rule_modules()
            if matches(m.RULE.code, select + extend) and not matches(m.RULE.code, ignore)
        }
        self.targets: dict[str, tuple[str, str]] = {}
        for spec in settings.target:
            try:
                framework, version = parse_target(spec)
            except ValueError as exc:
                raise InputError(where, f"target: {exc}", *locate(settings.source, "target")) from None
            self.targets[framework] = (version, f"target in {where}")


def check(paths: Sequence[str | Path] | str | Path, options: CheckOptions | None = None) -> Report:
    """Check config files and folders; the Python API behind ``sits-doctor check``."""
    if isinstance(paths, (str, Path)):
        paths = [paths]
    report = Report()
    try:
        opts = _as_lists(options or CheckOptions())
    except InputError as err:
        report.errors.append(err)
        return report
    clear_caches()
    try:
        for selectors, what in ((opts.select or (), "--select"), (opts.ignore, "--ignore"), (opts.extend_select, "--extend-select")):
            check_selectors(selectors, "<arguments>", what)
        requested = {}
        for spec in opts.targets:
            try:
                framework, version = parse_target(spec)
            except ValueError as exc:
                raise InputError("<arguments>", f"--target {exc}") from None
            if framework in requested and requested[framework][0] != version:
                raise InputError("<arguments>", f"--target {spec!r}: a second version for the same framework "
                                                f"(already {requested[framework][0]}); give one")
            requested[framework] = (version, "--target")
            note = unknown_version_note(framework, version)
            if note:
                report.notices.append(Notice("<arguments>", f"--target {spec}: {note}"))
        base_settings = _base_settings(paths, opts)
        gpu = gpu_spec(opts)
    except (InputError, ValueError) as err:
        report.errors.append(err if isinstance(err, InputError) else InputError("<arguments>", str(err)))
        return report
    report.fail_on = opts.fail_on or base_settings.fail_on or Severity.WARNING

    def exclude_for(folder: Path):
        if opts.isolated or opts.config:
            return base_settings.excluded
        found = find_config(folder)
        try:
            return (load_settings(found) if found else ProjectSettings()).excluded
        except InputError:
            return ProjectSettings().excluded  # the settings error is reported with the files' selection

    loaded = load_paths(paths, opts.texts, skip_unrecognized=opts.skip_unrecognized, exclude_for=exclude_for)
    report.errors += loaded.errors
    report.notices += loaded.notices
    report.files_checked = loaded.files_checked
    report.skipped = loaded.skipped
    report.skipped_files = loaded.skipped_files
    report.sources = loaded.sources

    resolvers: dict[str, ModelResolver] = {}
    selections: dict[str, _Selection] = {}
    gpus_by_name: dict[str, object] = {}  # settings files' gpu = "..." resolved once each
    no_gpu: dict[str, list[str]] = {}  # rule code -> deployments it could not judge without a GPU

    def codes_for(file: str) -> set[str]:
        try:
            selection = _selection_for(file, opts, base_settings, selections)
        except InputError:
            return set()
        return selection.codes - set(_ignored_codes(selection.settings.ignored_for(file)))
    for plan in loaded.plans:
        try:
            selection = _selection_for(plan.file, opts, base_settings, selections)
        except InputError as err:
            if all(str(e) != str(err) for e in report.errors):
                report.errors.append(err)
            continue
        settings = selection.settings
        model_config = opts.model_config or _relative_to(settings.model_config_path, settings.root)
        resolver = resolvers.setdefault(model_config or "", ModelResolver(model_config))
        plan = _prepare(plan, {**selection.targets, **requested}, resolver, report)
        plan_gpu = gpu
        if plan_gpu is None and not settings.gpu:
            plan_gpu = _manifest_gpu(plan)
        if plan_gpu is None and settings.gpu:
            try:
                plan_gpu = gpus_by_name.setdefault(settings.gpu, gpu_spec(CheckOptions(gpu=settings.gpu)))
            except InputError as err:
                from sits_doctor.settings import locate

                err = InputError(display_path(Path(settings.source)) if settings.source else plan.file,
                                 f"gpu: {err.message.removeprefix('--gpu ')}",
                                 *locate(settings.source, "gpu"))
                if err not in report.errors:
                    report.errors.append(err)
        plan.facts = effective(plan, plan_gpu, runtime=opts.runtime, report=report)
        if opts.runtime and plan.facts.runtime is not None:
            report.runtime.append(runtime_row(plan))
        report.errors += [e for e in _invalid_model(plan) if e not in report.errors]
        report.deployments.append(plan)
        report.plans.append(
            PlanSummary(plan.label, plan.framework, plan.kind, plan.file, str(plan.target),
                        plan.model.path if plan.model else plan.model_note)
        )
        report.fail_on_by_plan[plan.label] = opts.fail_on or settings.fail_on or Severity.WARNING
        ctx = Context(target=plan.target, gpu=opts.gpu)
        ignored = sorted(settings.ignored_for(plan.file))
        unchecked: list[_Unchecked] = []  # this deployment's "cannot check" infos, merged into one below
        for module in rule_modules():
            rule = module.RULE
            if rule.code not in selection.codes or plan.framework not in rule.frameworks:
                continue
            if matches(rule.code, ignored):
                continue
            try:
                missing = [n for n in rule.needs if n in plan.facts.missing]
                if "gpu" in missing:  # one notice for the run, not one info per deployment
                    no_gpu.setdefault(rule.code, []).append(plan.label)
                    continue
                if missing:
                    unchecked.extend(_cannot_check(module, plan, ctx, missing))
                    continue
                report.findings.extend(module.check(plan, ctx))
            except Exception as exc:  # a rule bug must not hide other results
                import traceback

                detail = traceback.format_exc() if opts.debug else repr(exc)
                report.internal_errors.append(f"{rule.code} crashed on {plan.label}: {detail}")
        report.findings.extend(_merge_unchecked(plan, unchecked))
    unchecked = {label for labels in no_gpu.values() for label in labels}
    if unchecked:  # one note for every rule that needs a GPU: they all want the same answer
        report.notices.append(Notice("<arguments>", (
            f"{', '.join(sorted(no_gpu))} did not check {len(unchecked)} deployment(s): no GPU is known; pass "
            "--gpu NAME[xN] (e.g. --gpu H100x2) or set gpu = \"NAME\" in .sits-doctor.toml")))
    unique = {(f.sort_key(), f.plan): f for f in report.findings}  # shared YAML anchors repeat
    report.findings = sorted(unique.values(), key=Finding.sort_key)
    for resolver in resolvers.values():
        report.errors += [e for e in resolver.errors if all(str(e) != str(r) for r in report.errors)]
    _suppress_and_baseline(report, loaded.sources, opts, codes_for, paths)
    return report


def _suppress_and_baseline(report: Report, sources: dict[str, str], opts: CheckOptions, codes_for,
                           paths: Sequence) -> None:
    """Inline / .sits-doctor-ignore.toml suppressions, then the baseline, then SITS900 for
    suppressions that did nothing (docs/ci.md: these are never baselined)."""
    result = None
    if _may_suppress(sources):
        from datetime import date

        from sits_doctor import suppressions

        result = suppressions.apply(report.findings, sources, date.today())
        report.errors += result.errors
        report.suppressed = len(result.suppressed)
        report.findings = result.kept
    if opts.write_baseline or opts.baseline:
        from sits_doctor import baseline

        docs_of = baseline.docs_reader()
        if opts.write_baseline:
            try:
                written = baseline.write_file(opts.write_baseline, report.findings, docs_of,
                                              [*map(str, paths), *report.files_checked])
            except InputError as err:
                report.errors.append(err)
            else:
                report.notices.append(Notice(opts.write_baseline, f"baseline written with {written} finding(s)"))
        if opts.baseline:
            try:
                recorded = baseline.load(opts.baseline)
            except InputError as err:
                report.errors.append(err)
            else:
                kept, matched, stale = recorded.filter(report.findings, Path(opts.baseline).resolve().parent, docs_of)
                report.findings, report.baselined = kept, matched
                for entry in stale:
                    k = entry.key
                    report.notices.append(Notice(
                        opts.baseline, f"stale baseline entry: {k.code} at {k.path} {k.pointer or '/'} "
                                       f"({entry.message}) matched nothing; remove it or write the baseline again"))
    from sits_doctor.rules.sits900_unused_suppression import RULE as UNUSED

    for p in result.problems if result is not None else ():
        if UNUSED.code in codes_for(p.file):
            report.findings.append(Finding(UNUSED.code, UNUSED.name, UNUSED.severity, p.message,
                                           Location(p.file, p.line, p.col, pointer=f"#L{p.line}")))
    report.findings.sort(key=Finding.sort_key)


IGNORE_FILE = ".sits-doctor-ignore.toml"  # sits_doctor.suppressions.IGNORE_FILE (kept in step by a test)


def _may_suppress(sources: dict[str, str]) -> bool:
    """Whether any suppression can apply: a file mentions sits-doctor, or an ignore file sits in
    a checked file's folder or above (importing the suppression machinery costs more than a
    one-file check)."""
    if any("sits-doctor" in text for text in sources.values()):
        return True
    import os

    seen: set[str] = set()
    for file in sources:
        folder = os.path.dirname(os.path.abspath(file))
        while folder not in seen:
            seen.add(folder)
            if os.path.isfile(os.path.join(folder, IGNORE_FILE)):
                return True
            parent = os.path.dirname(folder)
            if parent == folder:
                break
            folder = parent
    return False


def _ignored_codes(ignored) -> list[str]:
    return [m.RULE.code for m in rule_modules() if matches(m.RULE.code, sorted(ignored))]


class _Unchecked(NamedTuple):
    """A rule that lacks a fact it needs, and what it would have checked."""

    module: object
    at: object  # the rule's subject: where it would have reported
    what: str  # "max_model_len 16384"
    against: str  # "the model", "the GPU", "" (sizing only)
    why: str  # what is missing, as the facts say it


def _cannot_check(module, plan: Plan, ctx: Context, missing: list[str]) -> list[_Unchecked]:
    """What a rule that lacks a fact would have checked (the rule's ``subject``), or nothing when
    the deployment gives it nothing to check; :func:`_merge_unchecked` makes the info findings."""
    why = "; ".join(plan.facts.missing[n] for n in missing)
    subject = getattr(module, "subject", None)
    found = subject(plan, ctx) if subject is not None else (None, "this deployment")
    if found is None:
        return []
    at, what = found
    against = " and ".join("the model" if n == "model" else "the GPU" for n in missing if n != "sizing")
    return [_Unchecked(module, at, what, against, why)]


def _merge_unchecked(plan: Plan, found: list[_Unchecked]) -> list[Finding]:
    """One "cannot check" info per deployment and reason, not one per rule: the rules' subjects
    joined, at the first rule's place, under the first rule's code (the others named)."""
    groups: dict[str, list[_Unchecked]] = {}
    for u in found:
        groups.setdefault(u.why, []).append(u)
    merged = []
    for why, group in groups.items():
        first = group[0]
        againsts = {u.against for u in group}
        common = againsts.pop() if len(againsts) == 1 else ""
        subjects = [u.what if common else u.what + (f" against {u.against}" if u.against else "") for u in group]
        joined = subjects[0] if len(subjects) == 1 else ", ".join(subjects[:-1]) + " or " + subjects[-1]
        codes = "" if len(group) == 1 else f" ({', '.join(u.module.RULE.code for u in group)})"
        tail = f" against {common}" if common else ""
        # the head says what and why in one line; what each rule would have checked, and the rest
        # of the reason (what was looked for, what to pass), follow as evidence
        reason, _, rest = why.partition("; ")
        subject = joined if len(group) == 1 else "this deployment"
        evidence = ([] if len(group) == 1 else [f"not checked: {joined}"]) + ([f"why: {rest}"] if rest else [])
        merged.append(first.module.RULE.finding(plan, first.at, f"cannot check {subject}{tail}{codes}: {reason}",
                                                evidence=evidence, severity=Severity.INFO))
    return merged


def gpu_spec(opts: CheckOptions):
    """The GPU of ``--gpu`` / ``--gpu-memory`` (sits_doctor.facts.GpuSpec), or None."""
    if not opts.gpu and opts.gpu_memory is None:
        return None
    from sits_doctor.facts import GpuSpec
    from sits_doctor.memory import GIB

    name, count, note, memory, source, estimate = "GPU", 1, "", opts.gpu_memory, "--gpu-memory", False
    if opts.gpu:
        from sits_doctor.catalogs import gpus

        try:
            match = gpus.lookup(opts.gpu)
        except ValueError as exc:
            raise InputError("<arguments>", f"--gpu {exc}") from None
        name, count, note = match.gpu.name, match.count, match.note or ""
        if memory is None:
            mem = match.gpu.memory_bytes_effective()
            memory, source, estimate = float(mem.value), f"{match.gpu.name}: {mem.basis}", mem.estimate
    return GpuSpec(name=name, count=count, memory_gib=memory / GIB, source=source, note=note, estimate=estimate)


def _manifest_gpu(plan: Plan):
    """The GPU a Kubernetes manifest asks for: the ``nvidia.com/gpu.product`` or GKE
    ``cloud.google.com/gke-accelerator`` node label it selects, counted by its ``nvidia.com/gpu``
    limit (None when it names no known product)."""
    product = plan.hardware.get("gpu_product")
    if product is None or product.templated or not isinstance(product.value, str):
        return None
    from sits_doctor.catalogs import gpus
    from sits_doctor.facts import GpuSpec
    from sits_doctor.memory import GIB

    try:
        model, note = gpus.by_node_label(product.raw_key, product.value)
    except ValueError:
        return None
    count = plan.hardware.get("gpu_count")
    try:
        n = int(str(count.value)) if count is not None and not count.templated else 1
    except ValueError:
        n = 1
    mem = model.memory_bytes_effective()
    shown = product.raw if isinstance(product.raw, str) else product.value
    return GpuSpec(name=model.name, count=max(1, n), memory_gib=mem.value / GIB,
                   source=f"{product.raw_key} {shown!r} ({product.prov}); {model.name}"
                          f"{f' ({note})' if note else ''}: {mem.basis}",
                   estimate=mem.estimate)


def effective(plan: Plan, gpu=None, *, runtime: bool = False, report: Report | None = None) -> Facts:
    """The plan's effective facts at its target version (stage 2 of build → effective → rules).
    ``runtime``: build a Hugging Face model with the installed transformers to learn what runs."""
    from sits_doctor.frameworks import ortgenai, transformers, trtllm, vllm

    dims = transformers.model_dims(plan.model) if plan.model is not None else None
    missing = {}
    if dims is None and plan.framework in ("vllm", "trtllm"):
        missing["model"] = plan.model_note or "the served model's config.json was not found"
    builder = {"vllm": vllm.effective, "trtllm": trtllm.effective, "ortgenai": ortgenai.effective}.get(plan.framework)
    serving = builder(plan, plan.target, dims) if builder is not None else None
    if gpu is None:
        missing["gpu"] = "no GPU is known (pass --gpu NAME[xN])"
    if plan.framework == "vllm":
        unknown = vllm.sizing_unknown(plan)
        if unknown:
            missing["sizing"] = "; ".join(unknown)
    found = None
    if plan.framework == "hf" and plan.kind == "hf-config" and plan.model is not None:
        found = _runtime(plan, runtime, report)
    return Facts(model=dims, serving=serving, gpu=gpu, missing=missing, runtime=found)


def runtime_row(plan: Plan) -> dict:
    """One Hugging Face deployment's runtime facts, as plain data (reporters print it)."""
    rt = plan.facts.runtime

    def value(v):
        return None if v is None else v.value

    def source(v):
        return None if v is None else str(v.prov)

    return {
        "file": plan.file, "plan": plan.label, "model_class": rt.model_class, "how": rt.how,
        "attention": value(rt.attention), "attention_source": source(rt.attention),
        "supports_sdpa": value(rt.supports_sdpa), "rope": value(rt.rope), "rope_source": source(rt.rope),
        "rotary_modules": list(rt.rotary_modules), "cache": value(rt.cache), "quantizer": value(rt.quantizer),
        "custom_code": rt.custom_code, "native_over_remote": rt.native_over_remote,
    }


def _runtime(plan: Plan, introspect: bool, report: Report | None):
    """What transformers runs for the plan's model: built (``--runtime``, transformers installed)
    or from the version tables, saying which."""
    from sits_doctor.frameworks import transformers

    if introspect:
        from sits_doctor import runtime_hf

        installed = runtime_hf.available()
        if installed is not None and installed != plan.target.version:
            why = f"the target is transformers {plan.target.version} but {installed} is installed"
        elif installed is not None:
            try:
                return runtime_hf.introspect(plan.model)
            except Exception as exc:  # a config the installed transformers cannot build: say so, use the tables
                why = f"transformers {installed} could not build it ({type(exc).__name__}: {str(exc)[:160]})"
        else:
            why = "transformers or torch is not installed"
        if report is not None:
            report.notices.append(Notice(plan.file, f"--runtime: {why}; used the version tables"))
    return transformers.runtime_from_tables(plan.model, plan.target.version)


def _invalid_model(plan: Plan) -> list[InputError]:
    """The served model's config.json, when it states facts no framework can compute with."""
    from sits_doctor.frameworks import transformers

    if plan.model is None:
        return []
    return [InputError(s.prov.file or plan.model.path, f"invalid model config: {why}", s.prov.line, s.prov.col)
            for s, why in transformers.invalid_facts(plan.model)]


def _as_lists(opts: CheckOptions) -> CheckOptions:
    """The values the command line accepts, accepted here too: a string where a list is expected
    (``select="SITS204"``) is one item, not letters, and commas split it as ``--select A,B`` does;
    ``fail_on="warning"``; ``gpu_memory="79.19GiB"``. A value of the wrong kind is an InputError."""
    changes: dict = {}
    for name in ("select", "extend_select", "ignore", "targets"):
        value = getattr(opts, name)
        if isinstance(value, str):
            value = [value]
        if value is not None and name != "targets":
            value = [v.strip() for item in value for v in str(item).split(",") if v.strip()]
        changes[name] = value
    if isinstance(opts.fail_on, str):
        try:
            changes["fail_on"] = Severity(opts.fail_on.lower())
        except ValueError:
            raise InputError("<arguments>", f"fail_on {opts.fail_on!r}: expected error, warning or info") from None
    if isinstance(opts.gpu_memory, str):
        from sits_doctor.memory import parse_size

        try:
            changes["gpu_memory"] = parse_size(opts.gpu_memory)
        except ValueError as exc:
            raise InputError("<arguments>", f"gpu_memory {exc}") from None
    return opts._replace(**changes)


def _relative_to(path: str | None, root: Path | None) -> str | None:
    if path is None or root is None:
        return path
    return str(root / path)


def _base_settings(paths: Sequence[str | Path], opts: CheckOptions) -> ProjectSettings:
    if opts.isolated:
        return ProjectSettings()
    if opts.config:
        return load_settings(Path(opts.config))
    found = find_config(Path(paths[0]) if paths else Path.cwd())
    return load_settings(found) if found else ProjectSettings()


def _selection_for(file: str, opts: CheckOptions, base: ProjectSettings, cache: dict[str, _Selection]) -> _Selection:
    if opts.isolated or opts.config:
        settings = base
    else:
        found = find_config_for_file(file)
        settings = load_settings(found) if found else ProjectSettings()
    key = settings.source or ""
    if key not in cache:
        cache[key] = _Selection(settings, opts)
    return cache[key]


def _prepare(plan: Plan, requested: dict[str, tuple[str, str]], resolver: ModelResolver, report: Report) -> Plan:
    """Fill in the target version and the model's facts."""
    update: dict = {"target": resolve(plan, requested)}
    if plan.framework in ("vllm", "trtllm") and plan.model is None:
        try:
            model, note = resolver.resolve(plan)
        except InputError as err:
            report.errors.append(err)
            model, note = None, err.message
        update.update(model=model, model_note=note)
    return plan.copy(**update)
