"""The long fuzz run: the generators and harness of tests/test_fuzz.py, many more inputs.

    python bench/fuzz.py --inputs 100000 --seed 1 --out bench/results/fuzz.md
    python bench/fuzz.py --sweep-numbers    # every number of every fixture, each word, two GPUs

A third of the inputs are generated documents shaped like real configs, a third mutated files
from fixtures/, a third fixtures whose numbers are replaced by typos, words, NaN, infinities and
huge ints (all drawn by hypothesis, generate phase only, in chunks with seeds derived from
--seed). Each input is checked with a GPU or without one (``--gpu``, or ``gpu = ...`` in a
settings file beside it; the number mutations always with one), so the memory rules run. Every input goes through check, every output format, a dry-run fix and fix --apply
in-process; one in --cli-every also through the real command (in-process) in every format,
with -o, and fix with and without --apply. Workers run in parallel (--jobs, default: the CPU
count), each with its own workspace and a memory limit (--memory-limit-mib).

Every distinct failure (what broke, where: the crash's file:line or the message's first line, at
which stage) is kept with its smallest input, minimized by deleting lines and then bytes while
the same failure remains, and saved under bench/results/fuzz-cases/. The report records the
inputs tried by kind, the time, the machine, the git commit and the failures.
"""

from __future__ import annotations

import argparse
import json
import multiprocessing as mp
import os
import platform
import re
import resource
import subprocess
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO / "tests"))

import test_fuzz as F  # noqa: E402  (the generators and the harness)

_HARNESS: F.Harness | None = None
_ENV = None


def _harness() -> F.Harness:
    global _HARNESS, _ENV
    if _HARNESS is None:
        tmp = Path(tempfile.mkdtemp(prefix="sits-fuzz-"))
        _ENV = F.hermetic_env(tmp)
        _ENV.__enter__()
        _HARNESS = F.Harness(tmp / "ws")
    return _HARNESS


def _limit_memory(mib: int) -> None:
    if mib > 0:
        resource.setrlimit(resource.RLIMIT_AS, (mib * 2**20, resource.RLIM_INFINITY))


def run_chunk(job: tuple[str, int, int, int]) -> dict:
    """Run ``n`` inputs of one kind; return the counts and, per failure signature, the smallest input."""
    from hypothesis import HealthCheck, Phase, given, seed, settings

    kind, chunk_seed, n, cli_every = job
    harness = _harness()
    strategy = {"generated": F.generated_cases, "mutated": F.mutated_cases, "numbers": F.number_cases}[kind]()
    counts: Counter = Counter()
    found: dict = {}
    slowest = [0.0, ""]

    @seed(chunk_seed)
    @settings(max_examples=n, database=None, deadline=None, phases=[Phase.generate],
              suppress_health_check=list(HealthCheck))
    @given(strategy)
    def one(case: F.Case) -> None:
        counts[case.kind] += 1
        counts[f"gpu:{case.gpu or 'none given'}"] += 1
        cli = cli_every > 0 and counts["total"] % cli_every == 0
        counts["total"] += 1
        counts["cli"] += cli
        failures = harness.run(case, cli=cli)
        if harness.slowest[0] > slowest[0]:
            slowest[:] = [harness.slowest[0], f"{harness.slowest[1]} on {case.describe()}"]
        harness.slowest = (0.0, "")
        for f in failures:
            counts["failing inputs"] += 0
            key = f.signature
            if key not in found or len(case.data) < len(found[key][1].data):
                found[key] = (f, case, cli)
        counts["failing inputs"] += bool(failures)

    one()
    return {"kind": kind, "counts": counts, "found": found, "slowest": slowest,
            "maxrss_mib": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss // 1024}


def _still_fails(harness: F.Harness, case: F.Case, key, cli: bool) -> bool:
    return any(f.signature == key for f in harness.run(case, cli=cli))


def minimize(case: F.Case, key, cli: bool, budget: int = 150) -> F.Case:
    """Delete lines, then byte spans, while the failure with signature ``key`` remains."""
    from dataclasses import replace

    harness = _harness()
    tries = 0

    def ok(data: bytes) -> bool:
        nonlocal tries
        tries += 1
        return _still_fails(harness, replace(case, data=data), key, cli)

    data = case.data
    for unit in ("lines", "bytes"):
        parts = data.split(b"\n") if unit == "lines" else [bytes([b]) for b in data]
        joiner = b"\n" if unit == "lines" else b""
        size = max(len(parts) // 2, 1)
        while size >= 1 and tries < budget:
            i, shrunk = 0, False
            while i < len(parts) and tries < budget:
                trial = parts[:i] + parts[i + size:]
                if trial and ok(joiner.join(trial)):
                    parts, shrunk = trial, True
                else:
                    i += size
            if not shrunk:
                size //= 2
        data = joiner.join(parts)
    if case.sidecars and _still_fails(harness, replace(case, data=data, sidecars=()), key, cli):
        case = replace(case, sidecars=())
    return replace(case, data=data)


def _machine() -> str:
    from machine import cpu_name

    return f"{cpu_name()}, {os.cpu_count()} cores, Python {platform.python_version()} ({platform.system()} {platform.release()})"


def _commit() -> str:
    if os.environ.get("FUZZ_GIT_COMMIT"):  # a copy of the tree without .git (another machine)
        return os.environ["FUZZ_GIT_COMMIT"]
    try:
        rev = subprocess.run(["git", "rev-parse", "HEAD"], cwd=REPO, capture_output=True, text=True, check=True).stdout.strip()
        dirty = subprocess.run(["git", "status", "--porcelain", "--", "sits_doctor", "rules", "fixes"], cwd=REPO,
                               capture_output=True, text=True).stdout.strip()
        return rev + (" (with uncommitted changes under sits_doctor/ rules/ fixes/)" if dirty else "")
    except (OSError, subprocess.CalledProcessError):
        return "unknown"


def _slug(key) -> str:
    what, where, stage = key
    return re.sub(r"[^A-Za-z0-9]+", "-", f"{stage}-{what}-{where}").strip("-")[:90]


def sweep_numbers(gpus: tuple[str, ...] = ("H100", "L4")) -> int:
    """Every number of every fixture the number mutations change, replaced by each word for its
    place, checked with each GPU in ``gpus`` (check only, in-process): the internal errors by
    crash site. Deterministic; prints one line per site and returns how many runs had one."""
    from sits_doctor.engine import CheckOptions, check

    harness = _harness()
    sites: Counter = Counter()
    first: dict = {}
    runs = broken = 0
    for path in F.NUMBER_FIXTURES:
        rel = path.relative_to(F.FIXTURES)
        name = "/".join(rel.parts[1:]) if rel.parts[0] == "hf" else rel.name
        data = path.read_bytes()
        spans = [m.span() for m in F.NUMBER.finditer(data)]
        for start, end in spans:
            for word in F.number_words(data, start, end, path.suffix == ".json"):
                case = F.Case(f"num:{rel}", name, data[:start] + word + data[end:])
                target = harness.ws.prepare(case)
                old = os.getcwd()
                os.chdir(harness.ws.root)
                try:
                    for gpu in gpus:
                        runs += 1
                        try:
                            errors = check([os.path.relpath(target, harness.ws.root)],
                                           CheckOptions(isolated=True, debug=True, gpu=gpu)).internal_errors
                        except Exception:  # noqa: BLE001 - what escapes is a finding too
                            import traceback

                            errors = [traceback.format_exc()]
                        broken += bool(errors)
                        for err in errors:
                            key = (F._crash_site(err), err.strip().splitlines()[-1].split(":")[0])
                            sites[key] += 1
                            first.setdefault(key, f"{rel}: {data[start:end].decode()} -> {word[:20].decode()} (--gpu {gpu})")
                finally:
                    os.chdir(old)
    print(f"{runs} runs, {broken} with an internal error, {len(sites)} crash site(s)")
    for (site, exc), n in sites.most_common():
        print(f"  {n:6}  {site}  {exc}  e.g. {first[(site, exc)]}")
    return broken


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--inputs", type=int, default=100_000)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--out", default=str(REPO / "bench/results/fuzz.md"))
    ap.add_argument("--jobs", type=int, default=os.cpu_count() or 1)
    ap.add_argument("--chunk", type=int, default=500)
    ap.add_argument("--cli-every", type=int, default=100, help="every Nth input also through the real command (0: never)")
    ap.add_argument("--memory-limit-mib", type=int, default=3072)
    ap.add_argument("--max-minutes", type=float, default=0, help="stop starting chunks after this long (0: no limit)")
    ap.add_argument("--sweep-numbers", action="store_true",
                    help="instead: every number of every fixture by every word, with --gpu H100 and L4 (check only)")
    args = ap.parse_args(argv)
    if args.sweep_numbers:
        _limit_memory(args.memory_limit_mib)
        return 1 if sweep_numbers() else 0

    out = Path(args.out)
    cases_dir = out.parent / "fuzz-cases"
    n_chunks = max(1, -(-args.inputs // args.chunk))
    jobs = []
    for i in range(n_chunks):
        n = min(args.chunk, args.inputs - i * args.chunk)
        jobs.append((("generated", "mutated", "numbers")[i % 3], args.seed * 1_000_003 + i, n, args.cli_every))
    print(f"fuzz: {args.inputs} inputs in {n_chunks} chunks on {args.jobs} worker(s), seed {args.seed}", flush=True)

    counts: Counter = Counter()
    found: dict = {}
    slowest = [0.0, ""]
    maxrss = 0
    start = time.time()
    stopped_early = False
    ctx = mp.get_context("fork")
    with ctx.Pool(args.jobs, initializer=_limit_memory, initargs=(args.memory_limit_mib,), maxtasksperchild=20) as pool:
        pending = iter(jobs)
        results = []
        for job in [next(pending, None) for _ in range(args.jobs * 2)]:
            if job:
                results.append(pool.apply_async(run_chunk, (job,)))
        done = 0
        while results:
            r = results.pop(0).get()
            done += 1
            counts.update(r["counts"])
            maxrss = max(maxrss, r["maxrss_mib"])
            if r["slowest"][0] > slowest[0]:
                slowest = r["slowest"]
            for key, (f, case, cli) in r["found"].items():
                if key not in found or len(case.data) < len(found[key][1].data):
                    found[key] = (f, case, cli, found.get(key, (None, None, None, 0))[3] + 1)
                else:
                    found[key] = (*found[key][:3], found[key][3] + 1)
            elapsed = time.time() - start
            rate = counts["total"] / elapsed if elapsed else 0
            print(f"  {counts['total']:>7} inputs  {elapsed:7.0f} s  {rate:6.1f}/s  failing inputs {counts['failing inputs']}"
                  f"  distinct failures {len(found)}", flush=True)
            if args.max_minutes and elapsed > args.max_minutes * 60:
                stopped_early = True
            job = None if stopped_early else next(pending, None)
            if job:
                results.append(pool.apply_async(run_chunk, (job,)))
    elapsed = time.time() - start
    stopped_early = stopped_early and counts["total"] < args.inputs

    print(f"minimizing {len(found)} failure(s)...", flush=True)
    _limit_memory(args.memory_limit_mib)
    saved = []
    for key, (f, case, cli, chunks) in sorted(found.items(), key=lambda kv: kv[0]):
        small = minimize(case, key, cli)
        cases_dir.mkdir(parents=True, exist_ok=True)
        slug = _slug(key)
        ext = Path(small.name).suffix or ".txt"
        (cases_dir / f"{slug}{ext}").write_bytes(small.data)
        meta = {"signature": list(key), "stage": f.stage, "what": f.what, "message": f.message, "where": f.where,
                "file_name": small.name, "kind": small.kind, "targets": list(small.targets), "gpu": small.gpu,
                "unsafe": small.unsafe,
                "symlink": small.symlink, "cli": cli, "sidecars": {n: d.decode("utf-8", "replace") for n, d in small.sidecars},
                "original_size": len(case.data), "minimized_size": len(small.data)}
        (cases_dir / f"{slug}.json").write_text(json.dumps(meta, indent=2, ensure_ascii=False) + "\n")
        saved.append((key, f, small, case, cli, chunks, f"{slug}{ext}"))

    lines = [
        "# Fuzz run", "",
        "`python bench/fuzz.py " + " ".join(argv if argv is not None else sys.argv[1:]) + "`"
        f" (chunks of {args.chunk}, {args.jobs} worker(s), every {args.cli_every}th input also through the CLI)", "",
        "| | |", "|---|---|",
        f"| inputs tried | {counts['total']}" + (" (stopped early: --max-minutes)" if stopped_early else "") + " |",
        f"| of which also through the real command | {counts['cli']} |",
        f"| time | {elapsed:.0f} s ({counts['total'] / elapsed:.1f} inputs/s) |",
        f"| slowest single operation (check / fix / one CLI run) | {slowest[0]:.2f} s: {slowest[1]} |",
        f"| peak RSS of a worker | {maxrss} MiB (limit {args.memory_limit_mib} MiB) |",
        f"| inputs that broke the invariant | {counts['failing inputs']} |",
        f"| distinct failures | {len(found)} |",
        f"| machine | {_machine()} |",
        f"| git commit | {_commit()} |",
        "", "## Inputs by kind", "", "| kind | inputs |", "|---|---|",
    ]
    for k in sorted(k for k in counts if k.startswith(("gen:", "mut:")) and k.startswith("gen:")):
        lines.append(f"| {k} | {counts[k]} |")
    for prefix, what in (("mut:", "mutated fixtures"), ("num:", "fixtures with numbers replaced, a GPU known")):
        n = sum(v for k, v in counts.items() if k.startswith(prefix))
        lines.append(f"| {prefix} ({what}, {sum(1 for k in counts if k.startswith(prefix))} files) | {n} |")
    lines += ["", "## Inputs by GPU", "", "| GPU (--gpu NAME, or settings:NAME for gpu = NAME in .sits-doctor.toml) | inputs |",
              "|---|---|"]
    for k in sorted(k for k in counts if k.startswith("gpu:")):
        lines.append(f"| {k[4:]} | {counts[k]} |")
    lines += ["", "## Failures", ""]
    if not saved:
        lines.append("None: every input held the invariant.")
    for key, f, small, case, cli, chunks, fname in saved:
        lines += [
            f"### {f.what} at {f.where or f.stage}", "",
            f"- stage: `{f.stage}`" + (" (found through the CLI)" if cli else ""),
            f"- first line: `{f.message[:240]}`",
            f"- crash site: `{f.where or 'n/a'}`",
            f"- seen in {chunks} chunk(s); input kind `{small.kind}`, file name `{small.name}`"
            + (f", targets {list(small.targets)}" if small.targets else "") + (", --unsafe-fixes" if small.unsafe else "")
            + (", through a symlink" if small.symlink else ""),
            f"- reproducer: `fuzz-cases/{fname}` ({len(small.data)} bytes, minimized from {len(case.data)}); metadata in `fuzz-cases/{Path(fname).stem}.json`",
            "",
        ]
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text("\n".join(lines) + "\n")
    print(f"wrote {out} ({len(saved)} distinct failure(s))", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
