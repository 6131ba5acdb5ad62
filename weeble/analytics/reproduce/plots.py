"""Figures of `weeble reproduce` (matplotlib, no display).

The model is drawn as lines, evaluated densely (it is exact and cheap); every other column
("simulation", later) is drawn as markers at the grid points it evaluated, in the colour of the
curve it measures.
"""

from __future__ import annotations

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
