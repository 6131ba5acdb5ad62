"""Figures of `weeble reproduce` (matplotlib, no display).

The model is drawn as lines, evaluated densely (it is exact and cheap); every other column
("simulation", later) is drawn as markers at the grid points it evaluated, in the colour of the
curve it measures.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Sequence
from pathlib import Path

from weeble.analytics.reproduce.framework import Results


def _pyplot():  # type: ignore[no-untyped-def]
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def ch3_figures(results: Results, *, out: Path, columns: Sequence[str]) -> list[tuple[Path, str]]:
    """Fig. 3.2 (bs and bc against N_s) and Fig. 3.3 (the same, y-axis 1/40 of 3.2's)."""
    from weeble.analytics.reproduce import ch3

    plt = _pyplot()
    ns = [i * 1000.0 for i in range(int(ch3.X_MAX / 1000) + 1)]
    others = [c for c in columns if c != "model"]
    markers = ("o", "s", "^", "D")
    # (label, quantity, scenario whose model values give the curve)
    curves = [(f"bs, {ch3.scenario_name(omega=w)}", "saved_leaf", (w, 600.0, 60.0))
              for w in ch3.OMEGAS]
    curves += [(f"bc, {ch3.scenario_name(mu_inv=life, rho=rho)}", "b_c", (1000.0, life, rho))
               for life, rho in ch3.PAIRS]
    crossings = []
    for scenario in ch3.SCENARIOS:
        n = ch3.break_even(scenario, "b_leaf")(results, "model")
        if n is not None and n <= ch3.X_MAX:
            crossings.append((n, ch3.model(omega=scenario[0], mu_inv=scenario[1],
                                           rho=scenario[2], n=n).b_c))
    written = []
    for name, top, caption in (
        ("fig3_2", 125_000.0, "Fig. 3.2: notification bandwidth saved by filtering (bs, leaf "
                              "publishers) and control traffic (bc) against the number of "
                              "subscriptions"),
        ("fig3_3", 3_000.0, "Fig. 3.3: the same, y-axis 1/40 of Fig. 3.2; dots: the 8 "
                            "break-even points (bs = bc)"),
    ):
        fig, ax = plt.subplots(figsize=(8, 5))
        for i, (label, quantity, scenario) in enumerate(curves):
            color = f"C{i}"
            ys = [getattr(ch3.model(omega=scenario[0], mu_inv=scenario[1], rho=scenario[2],
                                    n=n), quantity) for n in ns]
            ax.plot(ns, ys, color=color, label=f"{label} (model)",
                    linestyle="-" if quantity == "b_c" else "--")
            # bc does not depend on ω: its simulated points may come from any ω
            where = ch3._where(scenario)
            if quantity == "b_c":
                del where["omega"]
            for j, column in enumerate(others):
                pts = [(n, v) for n, v in results.curve(column, quantity, x="n", where=where)
                       if n <= ch3.X_MAX]
                if pts:
                    ax.plot([p[0] for p in pts], [p[1] for p in pts], linestyle="none",
                            marker=markers[j % len(markers)], color=color, markersize=4,
                            label=f"{label} ({column})")
        if name == "fig3_3":
            ax.plot([c[0] for c in crossings], [c[1] for c in crossings], "k.", markersize=8,
                    label="break-even (model)")
        ax.set_xlim(0, ch3.X_MAX)
        ax.set_ylim(0, top)
        ax.set_xlabel("number of subscriptions N_s")
        ax.set_ylabel("messages per second")
        ax.grid(alpha=0.3)
        ax.legend(fontsize=7, loc="upper right")
        ax.set_title(caption.split(":")[0] + " (m = 3, k = 5, z = 1000)")
        fig.tight_layout()
        path = out / f"{name}.png"
        fig.savefig(path, dpi=120)
        plt.close(fig)
        written.append((path, caption))
    return written


def ch5_figures(results: Results, *, out: Path, columns: Sequence[str]) -> list[tuple[Path, str]]:
    """Figs. 5.8 and 5.9 (cost per notification over time, median over the topologies, one
    panel per load) and the final cost / static tree per heuristic (one box per heuristic and
    load, the thesis's "about half" as a line)."""
    import math
    import statistics

    from weeble.analytics.reproduce.ch5 import HEURISTICS, LOADS, NAMES, TICK

    plt = _pyplot()
    written = []
    for column in columns:
        points = [p for p in results.points if results.value(column, p, "ci.ratio") is not None]
        if not points:
            continue
        fig, axes = plt.subplots(1, 2, figsize=(12, 4), squeeze=False)
        for ax, (load, label) in zip(axes[0], enumerate(LOADS), strict=True):
            mine = [p for p in points if p["load"] == load]
            if not mine:
                continue
            steps = 0
            while results.value(column, mine[0], f"series_t.{steps}") is not None:
                steps += 1
            ts = [results.value(column, mine[0], f"series_t.{i}") for i in range(steps)]
            for h in HEURISTICS:
                med = []
                for i in range(steps):
                    vs = [results.value(column, p, f"{h}.series.{i}") for p in mine]
                    vs = [v for v in vs if v is not None and not math.isnan(v)]
                    med.append(statistics.median(vs) if vs else math.nan)
                ax.plot([t / TICK / 1000 for t in ts], med, label=NAMES[h])  # type: ignore[operator]
            ax.set_title(f"experiment {3 + load}: {label} load ({len(mine)} "
                         f"topolog{'y' if len(mine) == 1 else 'ies'})")
            ax.set_xlabel("time (1000 ticks = 10 s)")
            ax.set_ylabel("cost per notification (median)")
            ax.grid(alpha=0.3)
            ax.legend()
        fig.tight_layout()
        path = out / "ch5_cost_over_time.png"
        fig.savefig(path, dpi=120)
        plt.close(fig)
        written.append((path, "Figs. 5.8 and 5.9: cost per notification over time (10 s "
                              "windows), median over the topologies, per heuristic"))
        fig, ax = plt.subplots(figsize=(7, 4))
        data, labels = [], []
        for load, label in enumerate(LOADS):
            for h in ("ci", "mst", "mit"):
                vs = [results.value(column, p, f"{h}.ratio") for p in points if p["load"] == load]
                data.append([v for v in vs if v is not None])
                labels.append(f"{NAMES[h]}\n{label}")
        ax.boxplot(data)
        ax.set_xticks(range(1, len(labels) + 1), labels, fontsize=8)
        ax.axhline(0.5, color="grey", linestyle="--", label="thesis: CI ≈ half (exp. 3)")
        ax.axhline(1.0, color="black", linewidth=0.8, label="random static tree")
        ax.set_ylabel("final cost / random static tree")
        ax.legend(fontsize=8)
        ax.grid(alpha=0.3, axis="y")
        fig.tight_layout()
        path = out / "ch5_final_cost.png"
        fig.savefig(path, dpi=120)
        plt.close(fig)
        written.append((path, "Final cost (last 30 s) as a fraction of the random static tree's, "
                              "per topology: experiments 3 and 4"))
    return written


def ch4_figures(out: Path, *, control: dict[str, dict[int, float]],
                loss: dict[str, dict[int, float]],
                wait: dict[str, dict[int, float]]) -> list[tuple[Path, str]]:
    """Figs. 4.14–4.16 against the reconfiguration cycle length: control messages (advanced and
    strawman), the strawman's lost and duplicated notifications, the mean wait in Qnot."""
    plt = _pyplot()
    written = []
    for name, series, ylabel, caption in (
        ("fig4_14_control_messages.png", control, "control messages per exchange",
         "Fig. 4.14: control messages per exchange, coordinated (FIFO) and strawman"),
        ("fig4_15_strawman_loss.png", loss, "notifications per exchange (strawman)",
         "Fig. 4.15: notifications the strawman lost and duplicated per exchange"),
        ("fig4_16_qnot_wait.png", {k: {c: 1000 * v for c, v in pts.items()}
                                   for k, pts in wait.items()},
         "mean wait in Qnot (ms)", "Fig. 4.16: mean time a notification waits in Qnot"),
    ):
        fig, ax = plt.subplots(figsize=(5, 3.5))
        for label, pts in series.items():
            ax.plot(list(pts), list(pts.values()), marker="o", label=label)
        ax.set_xlabel("reconfiguration cycle length (brokers)")
        ax.set_ylabel(ylabel)
        ax.grid(alpha=0.3)
        ax.legend()
        fig.tight_layout()
        path = out / name
        fig.savefig(path, dpi=120)
        plt.close(fig)
        written.append((path, caption))
    return written


def _save(fig, path: Path, caption: str) -> tuple[Path, str]:  # type: ignore[no-untyped-def]
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    _pyplot().close(fig)
    return path, caption


def skipring_figures(results: Results, *, out: Path,
                     supervisor_period: float) -> list[tuple[Path, str]]:
    """Seed 003: SR(n)'s degrees and diameter against n (definition as lines, the members'
    stored edges as markers); the per-interval load against n; convergence against its bound."""
    from weeble.analytics.reproduce import skipring as sr

    plt = _pyplot()
    written = []
    joins = sorted((int(p["n"]), p) for p in results.points if int(p["part"]) == sr.JOIN)
    if joins:
        ns = [n for n, _ in joins]
        fig, ax = plt.subplots(figsize=(7, 4.5))
        for i, (q, label) in enumerate((("degree_max", "maximum degree"),
                                        ("diameter", "diameter"),
                                        ("degree_mean", "average degree"))):
            model = [results.value("model", p, q) for _, p in joins]
            ax.plot(ns, model, color=f"C{i}", label=f"{label} (SR(n) by definition)")
            sim = [(n, results.value("simulation", p, q)) for n, p in joins]
            sim = [(n, v) for n, v in sim if v is not None]
            ax.plot([n for n, _ in sim], [v for _, v in sim], "o", color=f"C{i}",
                    label=f"{label} (stored after n joins)")
        ax.plot(ns, [2 * sr.log2_ceil(n) - 1 for n in ns], "k:", label="2⌈log₂ n⌉ − 1")
        ax.plot(ns, [sr.log2_ceil(n) for n in ns], "k--", linewidth=0.8, label="⌈log₂ n⌉")
        ax.set_xscale("log", base=2)
        ax.set_xlabel("subscribers n")
        ax.set_ylabel("edges per node / hops")
        ax.grid(alpha=0.3)
        ax.legend(fontsize=7)
        ax.set_title("SR(n): degree and diameter against n")
        written.append(_save(fig, out / "seed003_degree_diameter_vs_n.png",
                             "SR(n): maximum and average degree and diameter against n (lines: "
                             "the definition; markers: the members' stored edges after n "
                             "joins from nothing)"))
    loads = sorted((int(p["n"]), p) for p in results.points if int(p["part"]) == sr.LOAD)
    loads = [(n, p) for n, p in loads if results.value("simulation", p, "sent_max") is not None]
    if loads:
        ns = [n for n, _ in loads]
        fig, ax = plt.subplots(figsize=(7, 4.5))
        for i, (q, label) in enumerate((("sent_max", "sent, busiest member"),
                                        ("sent_mean", "sent, mean member"),
                                        ("recv_max", "received, busiest member"),
                                        ("recv_mean", "received, mean member"),
                                        ("sup_in", "received by the supervisor"))):
            ax.plot(ns, [results.value("simulation", p, q) for _, p in loads], "o-",
                    color=f"C{i}", label=label)
        ax.axhline(0.75 + 0.5, color="C4", linestyle=":", label="0.75 + q (supervisor, [R])")
        ax.set_xscale("log", base=2)
        ax.set_xlabel("subscribers n")
        ax.set_ylabel("messages per member interval")
        ax.grid(alpha=0.3)
        ax.legend(fontsize=7)
        ax.set_title(f"legitimate SR(n): load per interval (supervisor Timeout "
                     f"{supervisor_period:g} interval)")
        written.append(_save(fig, out / f"seed003_load_vs_n_supervisor{supervisor_period:g}.png",
                             "Messages per member interval in a legitimate SR(n) against n: "
                             "sent stays constant, the supervisor's requests stay flat, what "
                             "labels 0 and 1 receive grows by about 2 per doubling"))
    conv = [(int(p["n"]), results.value("simulation", p, "took")) for p in results.points
            if int(p["part"]) == sr.CORRUPTED]
    conv = [(n, v) for n, v in conv if v is not None]
    if conv:
        ns = sorted({n for n, _ in conv})
        fig, ax = plt.subplots(figsize=(7, 4.5))
        ok = [(n, v) for n, v in conv if v >= 0]
        ax.plot([n for n, _ in ok], [v for _, v in ok], "o", label="runs (per seed)")
        grid = [2 ** e for e in range(int(math.log2(ns[0])), int(math.log2(ns[-1])) + 1)]
        ax.plot(grid, [sr.corruption_bound(n) for n in grid], "k--",
                label="2n supervisor Timeouts + ⌈log₂ n⌉ [R]")
        ax.set_xscale("log", base=2)
        ax.set_xlabel("subscribers n")
        ax.set_ylabel("member intervals to legitimacy")
        ax.grid(alpha=0.3)
        ax.legend(fontsize=7)
        ax.set_title(f"convergence from a corrupted state (supervisor Timeout "
                     f"{supervisor_period:g})")
        written.append(_save(fig, out / f"seed003_convergence_vs_n_supervisor"
                                        f"{supervisor_period:g}.png",
                             "Member intervals from a corrupted state (labels, edges, "
                             "database, junk messages) to legitimacy against n, with the "
                             "reconstructed bound"))
    ratio = [p for p in results.points if int(p["part"]) == sr.TIMER_RATIO
             and results.value("simulation", p, "took") is not None]
    if ratio:
        n = int(ratio[0]["n"])
        fig, ax = plt.subplots(figsize=(7, 4.5))
        for check, label in ((0, "the paper's rules"), (1, "with the plausibility check")):
            pts = [(period, sr.ratio_took(results, "simulation", period, check))
                   for period in sr.SUPERVISOR_PERIODS]
            pts = [(x, y) for x, y in pts if y is not None]
            ax.plot([x for x, _ in pts], [y for _, y in pts], "o-", label=label)
        ax.set_xscale("log", base=2)
        ax.set_xlabel("supervisor Timeout (member intervals)")
        ax.set_ylabel("member intervals to legitimacy (median)")
        ax.grid(alpha=0.3)
        ax.legend(fontsize=7)
        ax.set_title(f"convergence from a corrupted state against the timer ratio, n = {n}")
        written.append(_save(fig, out / f"seed003_convergence_vs_supervisor_timeout_n{n}.png",
                             "Member intervals from a corrupted state to legitimacy against the "
                             f"supervisor's Timeout (n = {n}), with and without the local "
                             "plausibility check (spec seed23 §A.13-5)"))
    return written


def sketches_figures(results: Results, *, out: Path, brokers: int) -> list[tuple[Path, str]]:
    """Seed 002: the equality test's false-positive rate against |A−B| (Theorem 3 repaired and
    as printed, as lines; Monte Carlo as markers: Fig. 1 of the paper, lost in extraction); the
    §5 overhead per timer strategy and load (Figs. 2 and 3); convergence on paths and stars."""
    from weeble.analytics.reproduce import sketches as sk
    from weeble.core.sketch.bloom import (
        equality_false_positive_bound,
        printed_equality_false_positive_bound,
    )

    plt = _pyplot()
    written = []
    blooms = [p for p in results.points if int(p["part"]) == sk.BLOOM]
    if blooms:
        fig, ax = plt.subplots(figsize=(7, 4.5))
        ds = list(range(1, 7))
        for i, m_per_n in enumerate(sorted({p["m_per_n"] for p in blooms})):
            kw = {"m": int(m_per_n * sk.ELEMENTS), "k": 2, "size_b": sk.ELEMENTS,
                  "b_minus_a": 0}
            ax.plot(ds, [equality_false_positive_bound(size_a=sk.ELEMENTS + d, a_minus_b=d, **kw)
                         for d in ds], color=f"C{i}", label=f"m/n = {m_per_n:g}, k = 2: "
                                                             "Theorem 3 repaired")
            if m_per_n == 4:
                ax.plot(ds, [printed_equality_false_positive_bound(
                    size_a=sk.ELEMENTS + d, a_minus_b=d, **kw) for d in ds], color=f"C{i}",
                    linestyle=":", label=f"m/n = {m_per_n:g}: as printed (α without '1 −')")
            pts = [(p["diff"], results.value("simulation", p, "p"),
                    results.value("simulation", p, "stderr")) for p in blooms
                   if p["m_per_n"] == m_per_n and p["k"] == 2]
            pts = [(d, v, e or 0.0) for d, v, e in pts if v]
            if pts:
                ax.errorbar([d for d, _, _ in pts], [v for _, v, _ in pts],
                            yerr=[e for _, _, e in pts], fmt="o", color=f"C{i}",
                            label=f"m/n = {m_per_n:g}: Monte Carlo (core's filters, mmh3)")
        ax.set_yscale("log")
        ax.set_xlabel("|A − B| (elements in one set only)")
        ax.set_ylabel("P[B(A) = B(B)]")
        ax.grid(alpha=0.3, which="both")
        ax.legend(fontsize=7)
        ax.set_title("equality false positives, |B| = 1000, k = 2")
        written.append(_save(fig, out / "seed002_false_positive_vs_difference_k2.png",
                             "The Bloom equality test's false-positive rate against |A−B| for "
                             "m/n = 4, 8, 16 and k = 2 (the paper's lost Fig. 1): Theorem 3 "
                             "repaired and as printed, and Monte Carlo"))
    names = list(sk.STRATEGIES)
    bars = {load: [sk.overhead(results, "simulation", li, si) for si in range(len(names))]
            for li, load in enumerate(sk.LOADS)}
    if any(v is not None for vs in bars.values() for v in vs):
        fig, axes = plt.subplots(1, 2, figsize=(10, 4))
        for ax, (load, vals) in zip(axes, bars.items(), strict=True):
            ax.bar(names, [v or 0.0 for v in vals], color=[f"C{i}" for i in range(len(names))])
            ax.set_title(f"{load} load: a publication every {sk.LOADS[load]:g} s per broker")
            ax.set_ylabel("overhead (hops of (un)subscriptions + unwanted events)")
            ax.tick_params(axis="x", labelsize=8)
            ax.grid(alpha=0.3, axis="y")
        fig.suptitle(f"§5: reconfiguration overhead of one transient link failure, by timer "
                     f"({brokers} brokers)")
        written.append(_save(fig, out / f"seed002_overhead_by_timer_n{brokers}.png",
                             "Reconfiguration overhead of one link failure per timer strategy, "
                             "heavy and light load (the paper's Figs. 2 and 3)"))
    conv = [p for p in results.points if int(p["part"]) == sk.CONVERGE
            and results.value("simulation", p, "took") is not None]
    if conv:
        fig, ax = plt.subplots(figsize=(7, 4.5))
        marks = {0: ("o", "faults anywhere (client entries, clock: leases repair them)"),
                 1: ("x", "faults in the broker-to-broker entries F")}
        for (shape, name), faults in itertools.product(enumerate(sk.SHAPES), marks):
            pts = [(results.value("simulation", p, "diameter"),
                    results.value("simulation", p, "took")) for p in conv
                   if int(p["shape"]) == shape and int(p["faults"]) == faults]
            pts = [(d, t) for d, t in pts if d is not None and t is not None and t >= 0]
            if pts:
                ax.plot([d for d, _ in pts], [t for _, t in pts], marks[faults][0],
                        color=f"C{shape}", label=f"{name}s, {marks[faults][1]}")
        bounds = {results.value("simulation", p, "diameter"): results.value("simulation", p,
                                                                             "bound")
                  for p in conv}
        bounds = {d: b for d, b in bounds.items() if d is not None and b is not None}
        if bounds:
            ds = sorted(bounds)
            ax.plot(ds, [bounds[d] for d in ds], "k--", label="the mode's Δ")
        ax.set_xlabel("tree diameter (hops)")
        ax.set_ylabel("s (= rounds of 1 s) to legitimacy")
        ax.grid(alpha=0.3)
        ax.legend(fontsize=7)
        ax.set_title("convergence after 3 table faults per broker (Theorem 2)")
        written.append(_save(fig, out / "seed002_convergence_vs_diameter.png",
                             "Time to legitimacy after 3 random table faults per broker, on "
                             "paths and stars, against the diameter, with the mode's Δ"))
    return written
