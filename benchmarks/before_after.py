"""The same live benchmark on the code before a change and on this tree, taking turns.

    python benchmarks/before_after.py live_latency --pairs 3 -- --rates 1000 --repeat 3
    python benchmarks/before_after.py live_throughput --pairs 3 -- --count 30000 --repeat 3
    python benchmarks/before_after.py live_latency --ref <commit> ...

`--ref` (default: b17abc5, the last commit before issue 12's hardening) is checked out into a
temporary git worktree; the benchmark script runs there (its brokers import that tree's code)
and here, one after the other, `--pairs` times, alternating which goes first so that a drift
in the machine's load hits both alike. Each run's final table is read back; printed: every
run's figures, the median of each figure over the runs of each tree, and after/before. The
issue-12 target: normal throughput and latency within 10 % of before.

Figures read: live_latency: the broker rows' end-to-end p50 and p99 through 1 and 3 brokers
and the raw gRPC p50 through 3 relays (the same run's load gauge); live_throughput: each
(brokers, batch) row's broker n/s, broker/raw and the brokers' CPU µs per notification (the
figure that depends least on the load), and when the run measures traced chains too (its
default), their n/s, traced/untraced and CPU µs per notification.
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
DEFAULT_REF = "b17abc5"  # Merge h-speed: the commit before b92c114, issue 12's first
FIGURES = {
    "live_latency": [("e2e p50 x1", "broker"), ("e2e p99 x1", "broker"),
                     ("e2e p50 x3", "broker"), ("e2e p99 x3", "broker"),
                     ("e2e p50 x3", "raw grpc")],
    "live_throughput": [("broker n/s", None), ("broker/raw", None), ("broker cpu µs/n", None),
                        ("traced n/s", None), ("traced/untraced", None),
                        ("traced cpu µs/n", None)],
}


def read_table(out: str) -> list[dict[str, str]]:
    """The last table a benchmark printed (benchmarks/_live.py `table`: right-aligned columns
    joined by two spaces), as rows of column -> text."""
    lines = out.splitlines()
    start = max(i for i, line in enumerate(lines)
                if line.strip() and ("system" in line.split() or "brokers" in line.split())
                and not line.startswith(("latency", "throughput")))
    header = lines[start]
    names: list[tuple[str, int, int]] = []  # (column, start, end)
    pos = 0
    for name in [c for c in header.split("  ") if c.strip()]:
        name = name.strip()
        end = header.index(name, pos) + len(name)
        names.append((name, pos, end))
        pos = end
    rows = []
    for line in lines[start + 1:]:
        if not line.strip() or line.startswith("target"):
            break
        rows.append({name: line[a:b].strip() for name, a, b in names})
    return rows


def number(text: str) -> float:
    return float(text.replace(",", "").rstrip("%")) if text not in ("-", "") else float("nan")


def figures(bench: str, out: str) -> dict[str, float]:
    found: dict[str, float] = {}
    for row in read_table(out):
        for column, system in FIGURES[bench]:
            if column not in row:  # a figure this run does not measure (--trace, --skip-raw)
                continue
            if system is None:  # throughput: one row per (brokers, batch)
                found[f"{column} ({row['brokers']} brokers, batch {row['batch']})"] = \
                    number(row[column])
            elif row.get("system") == system:  # latency: one row per (rate, publisher, system)
                publisher = row.get("publisher", "one")  # before stop 36: one per request
                label = system if publisher == "library" else f"{system} ({publisher})"
                found[f"{label} {column} at {row['rate/s']}/s"] = number(row[column])
    return found


def copy_build(tree: Path, source: Path = ROOT) -> None:
    """The compiled build of checkout `source` (untracked: the extensions and their stamp) into
    `tree`, so that the code before runs compiled too when its compiled sources are those of
    the build; otherwise `weeble` finds the stamp stale there and runs pure Python (said on
    stderr). A change to the compiled modules needs a build of the code before: another
    checkout's (`--before-build`)."""
    stamp = source / "weeble" / "_compiled.json"
    if not stamp.exists():
        return
    for path in [stamp, *source.glob("*.so"), *(source / "weeble").rglob("*.so")]:
        target = tree / path.relative_to(source)
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(path, target)
    done = subprocess.run([sys.executable, "-c", "import weeble; print(weeble.BUILD)"],
                          cwd=tree, env={**os.environ, "PYTHONPATH": str(tree)},
                          capture_output=True, text=True, check=False)
    print(f"before: {done.stdout.strip() or done.stderr.strip()[-300:]}", file=sys.stderr,
          flush=True)


def run(tree: Path, bench: str, args: list[str]) -> dict[str, float]:
    env = {**os.environ, "PYTHONPATH": str(tree)}
    done = subprocess.run([sys.executable, str(tree / "benchmarks" / f"{bench}.py"), *args],
                          cwd=tree, env=env, capture_output=True, text=True, check=False)
    if done.returncode != 0:
        raise SystemExit(f"{bench} in {tree} failed ({done.returncode}):\n{done.stderr[-3000:]}")
    for line in done.stdout.splitlines():  # the run's caption: rounds and load average
        if line.startswith(("latency", "throughput")):
            print("  " + line, file=sys.stderr, flush=True)
    return figures(bench, done.stdout)


def _each(xs: list[float]) -> str:
    return ", ".join(f"{x:,.2f}" if abs(x) < 100 else f"{x:,.0f}" for x in xs)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("bench", choices=sorted(FIGURES))
    parser.add_argument("--ref", default=DEFAULT_REF, help="the code before (a git commit)")
    parser.add_argument("--pairs", type=int, default=3)
    parser.add_argument("--before-build", type=Path, default=ROOT, metavar="CHECKOUT",
                        help="the checkout whose compiled build the code before gets (default:"
                             " this one; another when this change alters compiled modules)")
    argv = sys.argv[1:]
    cut = argv.index("--") if "--" in argv else len(argv)
    a = parser.parse_args(argv[:cut])  # after `--`: the benchmark's own arguments
    bench_args = argv[cut + 1:]
    before_dir = Path(tempfile.mkdtemp(prefix="weeble-before-"))
    subprocess.run(["git", "-C", str(ROOT), "worktree", "add", "--detach", str(before_dir),
                    a.ref], check=True, capture_output=True)
    copy_build(before_dir, a.before_build)
    results: dict[str, list[dict[str, float]]] = {"before": [], "after": []}
    try:
        for i in range(a.pairs):
            order = [("before", before_dir), ("after", ROOT)]
            for label, tree in order if i % 2 == 0 else order[::-1]:
                print(f"pair {i + 1}/{a.pairs}: {label} ({a.ref if label == 'before' else 'HEAD'})",
                      file=sys.stderr, flush=True)
                results[label].append(run(tree, a.bench, bench_args))
    finally:
        subprocess.run(["git", "-C", str(ROOT), "worktree", "remove", "--force",
                        str(before_dir)], check=False, capture_output=True)
    keys = list(results["after"][0])
    print(f"{a.bench} {' '.join(bench_args)}: {a.pairs} runs each, alternating; load average"
          f" {os.getloadavg()[0]:.1f} at the end ({os.cpu_count()} cores)")
    width = max(len(k) for k in keys)
    print(f"{'figure':<{width}}  {'before (each run)':>30}  {'after (each run)':>30}  "
          f"{'median before':>13}  {'median after':>12}  after/before")
    for k in keys:
        b = [r.get(k, float("nan")) for r in results["before"]]
        f = [r.get(k, float("nan")) for r in results["after"]]
        mb, mf = statistics.median(b), statistics.median(f)
        print(f"{k:<{width}}  {_each(b):>30}  {_each(f):>30}  {mb:>13,.2f}  {mf:>12,.2f}  "
              f"{mf / mb if mb else float('nan'):.2f}")


if __name__ == "__main__":
    main()
