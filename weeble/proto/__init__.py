"""Wire contract: generated code for the versioned protobuf packages (weeble.v1)."""
