"""Weeble: self-stabilizing publish/subscribe broker networks, live and simulated."""

from __future__ import annotations


def _guard_compiled() -> None:
    """`scripts/compile.py` may have compiled the simulator's hot path with mypyc (extension
    modules beside their .py files, which Python imports first). If any of those sources changed
    since that build, load every one of them from its .py instead: stale machine code must not
    run, and the compiled modules only work together (all or none)."""
    import hashlib
    import json
    import sys
    import warnings
    from importlib.machinery import PathFinder
    from importlib.util import spec_from_file_location
    from pathlib import Path

    root = Path(__file__).resolve().parent.parent
    stamp = root / "weeble" / "_compiled.json"
    if not stamp.exists():
        return
    try:
        built = json.loads(stamp.read_text())
        modules: dict[str, str] = built["modules"]
        current = built.get("python") == sys.implementation.cache_tag
    except (OSError, ValueError, KeyError, TypeError):
        modules, current = {}, False

    def source(name: str) -> Path:
        path = root.joinpath(*name.split("."))
        return path / "__init__.py" if path.is_dir() else path.with_suffix(".py")

    stale = sorted(m for m, sha in modules.items()
                   if not source(m).exists()
                   or hashlib.sha256(source(m).read_bytes()).hexdigest() != sha)
    if current and not stale:
        return
    why = ", ".join(stale) if stale else "built for another Python"
    warnings.warn(f"weeble: the compiled modules are stale ({why}); running pure Python. "
                  "Rebuild with `python scripts/compile.py`, or remove them with `--clean`.",
                  stacklevel=2)

    class _Source(PathFinder):
        @classmethod
        def find_spec(cls, name, path=None, target=None):  # type: ignore[no-untyped-def]
            if name not in modules:
                return None
            file = source(name)
            locations = [str(file.parent)] if file.name == "__init__.py" else None
            return spec_from_file_location(name, file, submodule_search_locations=locations)

    sys.meta_path.insert(0, _Source)


_guard_compiled()
