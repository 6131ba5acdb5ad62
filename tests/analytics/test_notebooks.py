"""The notebooks across runs, executed on runs this test makes (nbclient + ipykernel), and no
notebook committed with outputs."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from weeble.cli import main

ROOT = Path(__file__).resolve().parents[2]
NOTEBOOKS = ROOT / "analytics" / "notebooks"
RUN = Path(__file__).parent / "data" / "report-run.yaml"


def execute(name: str, env: dict[str, str]) -> list[dict]:
    import nbformat
    from nbclient import NotebookClient

    nb = nbformat.read(NOTEBOOKS / name, as_version=4)
    old = {k: os.environ.get(k) for k in env}
    os.environ.update(env)  # the kernel inherits this process's environment
    try:
        NotebookClient(nb, timeout=300, kernel_name="python3",
                       resources={"metadata": {"path": str(ROOT)}}).execute()
    finally:
        for k, v in old.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v
    outputs = [o for cell in nb.cells if cell.cell_type == "code" for o in cell.outputs]
    assert not [o for o in outputs if o.output_type == "error"], [
        o for o in outputs if o.output_type == "error"]
    return outputs


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """One scenario (two faults, three reconfigurations) with identity and with simple
    routing, and in the anti-entropy mode (which does not reshape its tree: without the
    reconfigurations)."""
    import yaml

    base = tmp_path_factory.mktemp("notebook-runs")
    scenario = yaml.safe_load(RUN.read_text())
    variants = {
        "identity": scenario,
        "simple": {**scenario, "routing": {"algorithm": "simple"}},
        "anti_entropy": {k: v for k, v in scenario.items() if k != "reconfigurations"},
    }
    made = {}
    for name, data in variants.items():
        path = base / f"{name}.yaml"
        path.write_text(yaml.safe_dump(data))
        made[name] = base / name
        args = ["simulate", str(path), "--out", str(made[name]), "--quiet"]
        assert main(args + (["--mode", "anti_entropy"] if name == "anti_entropy" else [])) == 0
    return made


def test_compare_runs_across_algorithms_and_modes(runs: dict[str, Path]) -> None:
    outputs = execute("compare_runs.ipynb",
                      {"WEEBLE_RUNS": os.pathsep.join(str(p) for p in runs.values())})
    images = [o for o in outputs if "image/png" in o.get("data", {})]
    assert len(images) == 3  # stabilization against the bound, overhead, loss per fault kind
    tables = [o["data"]["text/plain"] for o in outputs if "text/plain" in o.get("data", {})]
    assert any("identity (leasing, identity)" in t and "simple (leasing, simple)" in t
               and "anti_entropy (anti_entropy, identity)" in t for t in tables)


def test_a_reconfiguration_run(runs: dict[str, Path]) -> None:
    outputs = execute("reconfiguration_run.ipynb", {"WEEBLE_RUN": str(runs["identity"])})
    images = [o for o in outputs if "image/png" in o.get("data", {})]
    assert len(images) == 2
    tables = [o["data"]["text/plain"] for o in outputs if "text/plain" in o.get("data", {})]
    assert any("exchange b1-b5 for b5-b7" in t and "remove_leaf b12" in t for t in tables)


def test_no_notebook_is_committed_with_outputs() -> None:
    books = sorted(NOTEBOOKS.glob("*.ipynb"))
    assert {b.name for b in books} >= {"explore_run.ipynb", "compare_runs.ipynb",
                                        "reconfiguration_run.ipynb"}
    for book in books:
        for i, cell in enumerate(json.loads(book.read_text())["cells"]):
            if cell["cell_type"] == "code":
                assert cell["outputs"] == [] and cell["execution_count"] is None, (
                    f"{book.name}: cell {i} has outputs: clear them before committing")
