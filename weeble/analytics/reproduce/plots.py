"""What the figures of `weeble reproduce` share (matplotlib, no display); each experiment draws
its own (`figures`).

The model is drawn as lines, evaluated densely (it is exact and cheap); every other column
("simulation", later) is drawn as markers at the grid points it evaluated, in the colour of the
curve it measures.
"""

from __future__ import annotations

from pathlib import Path


def pyplot():  # type: ignore[no-untyped-def]
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def save(fig, path: Path, caption: str) -> tuple[Path, str]:  # type: ignore[no-untyped-def]
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    pyplot().close(fig)
    return path, caption
