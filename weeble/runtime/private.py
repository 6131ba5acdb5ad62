"""Files that hold secrets (admin, link and client tokens; private keys): written whole and
readable by the owner only (0600), in directories only the owner may enter (0700).

The mode is set when the file is created, never by a chmod afterwards, so there is no moment
in which another user could open it; a temporary file and a rename make the write atomic."""

from __future__ import annotations

import os
from pathlib import Path

FILE_MODE = 0o600
DIR_MODE = 0o700


def private_dir(path: Path | str) -> Path:
    """Create `path` (and missing parents) and make it 0700."""
    path = Path(path)
    path.mkdir(mode=DIR_MODE, parents=True, exist_ok=True)
    path.chmod(DIR_MODE)  # mkdir's mode is masked by the umask, and an existing dir keeps its own
    return path


def write_private(path: Path | str, data: str | bytes) -> Path:
    """Write `data` to `path` atomically, mode 0600 from the start."""
    path = Path(path)
    raw = data.encode() if isinstance(data, str) else data
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, FILE_MODE)
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(raw)
        os.chmod(tmp, FILE_MODE)  # an existing tmp file keeps its mode through O_CREAT
        os.replace(tmp, path)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
    return path
