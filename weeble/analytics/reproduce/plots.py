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
