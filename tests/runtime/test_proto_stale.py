"""The committed generated code in weeble/proto/v1 must match proto/weeble/v1/*.proto."""

from __future__ import annotations

import importlib
import re
import subprocess
import sys
from importlib import metadata
from pathlib import Path

from google.protobuf import descriptor_pb2

ROOT = Path(__file__).resolve().parents[2]
COMMITTED = ROOT / "weeble" / "proto" / "v1"
_TOOLS = re.compile(r"with grpcio-tools (\S+) ")


def _regenerate(out: Path) -> None:
    subprocess.run([sys.executable, str(ROOT / "scripts" / "gen_proto.py"), "--out", str(out)],
                   check=True, cwd=ROOT, capture_output=True)


def test_descriptors_match_protos(tmp_path: Path) -> None:
    """Version-independent: the schema compiled into the committed code is the .proto's."""
    out = tmp_path / "fds.bin"
    protos = sorted(p.relative_to(ROOT / "proto") for p in (ROOT / "proto").rglob("*.proto"))
    subprocess.run([sys.executable, "-m", "grpc_tools.protoc", f"-I{ROOT / 'proto'}",
                    f"--descriptor_set_out={out}", *map(str, protos)], check=True)
    fresh = descriptor_pb2.FileDescriptorSet.FromString(out.read_bytes())
    assert fresh.file, "no .proto files found"
    for file in fresh.file:
        module = importlib.import_module(
            "weeble.proto.v1." + Path(file.name).stem + "_pb2"
        )
        committed = descriptor_pb2.FileDescriptorProto.FromString(module.DESCRIPTOR.serialized_pb)
        _strip_json_names(file)  # the Python generator leaves out the derived json_name
        assert committed == file, (
            f"weeble/proto/v1 is stale for {file.name}: run python scripts/gen_proto.py"
        )


def _strip_json_names(file: descriptor_pb2.FileDescriptorProto) -> None:
    def strip(message: descriptor_pb2.DescriptorProto) -> None:
        for f in message.field:
            f.ClearField("json_name")
        for nested in message.nested_type:
            strip(nested)

    for message in file.message_type:
        strip(message)


def test_generated_files_are_current(tmp_path: Path) -> None:
    """Byte for byte, when the installed grpcio-tools is the one that generated the files."""
    _regenerate(tmp_path)
    fresh = {p.name: p.read_text() for p in tmp_path.iterdir() if p.is_file()}
    committed = {p.name: p.read_text() for p in COMMITTED.iterdir() if p.is_file()}
    assert sorted(fresh) == sorted(committed), "generated file set differs: rerun gen_proto.py"
    header = _TOOLS.search(committed["link_pb2.py"])
    assert header is not None, "generated files lack the gen_proto.py header"
    if header.group(1) != metadata.version("grpcio-tools"):
        # another protoc lays the files out differently; the descriptor test above still holds
        return
    stale = sorted(name for name in fresh if fresh[name] != committed[name])
    assert not stale, f"stale generated code {stale}: run python scripts/gen_proto.py"
