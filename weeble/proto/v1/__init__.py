"""Generated protobuf/gRPC code for package weeble.v1 (see scripts/gen_proto.py)."""
