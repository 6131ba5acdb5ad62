"""Weeble: self-stabilizing publish/subscribe broker networks, live and simulated."""

from __future__ import annotations


def _guard_compiled() -> str:
    """`scripts/compile.py` compiles the simulator's hot path with mypyc (extension modules
    beside their .py files, which Python imports first). Unless that build is current (see
    `weeble/_build.py`: every compiled source unchanged since, this Python, nothing missing;
    then its shared library is made importable from any working directory), or when
    WEEBLE_COMPILE=0 asks for pure Python, every weeble module that has an extension is
    loaded from its .py instead: stale machine code never runs, and the compiled modules run
    all together or not at all. A build that is not current is reported once per process tree
    (a warning; the processes it starts stay quiet), and `bash scripts/setup.sh` rebuilds it."""
    import os
    import sys
    import warnings
    from importlib.machinery import PathFinder
    from importlib.util import spec_from_file_location
    from pathlib import Path

    from weeble import _build

    root = Path(__file__).resolve().parent.parent
    build = _build.inspect(root)
    if build is None:
        return "pure Python (no compiled build: python scripts/compile.py)"
    if build.problem is None and os.environ.get("WEEBLE_COMPILE") != "0":
        library = _build.extension(root, _build.SHARED_LIBRARY)

        class _Library(PathFinder):
            @classmethod
            def find_spec(cls, name, path=None, target=None):  # type: ignore[no-untyped-def]
                if name != _build.SHARED_LIBRARY:
                    return None
                return spec_from_file_location(name, library)

        sys.meta_path.insert(0, _Library)
        return build.describe()
    if build.problem is not None and not os.environ.get("WEEBLE_BUILD_REPORTED"):
        os.environ["WEEBLE_BUILD_REPORTED"] = "1"  # inherited: child processes stay quiet
        warnings.warn(f"weeble: running pure Python, the compiled build is not used "
                      f"({build.problem}). Rebuild with `python scripts/compile.py` (or "
                      "`bash scripts/setup.sh`), or remove it with `--clean`.", stacklevel=2)

    class _Source(PathFinder):
        @classmethod
        def find_spec(cls, name, path=None, target=None):  # type: ignore[no-untyped-def]
            if not name.startswith("weeble.") or not _build.extension(root, name).exists():
                return None
            file = _build.source(root, name)
            if not file.exists():
                return None
            locations = [str(file.parent)] if file.name == "__init__.py" else None
            return spec_from_file_location(name, file, submodule_search_locations=locations)

    sys.meta_path.insert(0, _Source)
    return "pure Python (WEEBLE_COMPILE=0)" if build.problem is None else build.describe()


# What this process runs: "compiled (mypyc, N modules)", or "pure Python (why)".
BUILD = _guard_compiled()
