"""The wire codec: the core's messages and values <-> the weeble.v1 protobuf (weeble/proto).

It sits below both drivers, so they never import each other: the live runtime sends and parses
these bytes, and the simulator records what a message would cost on a link (`wire.wire_size`,
the `bytes` of its `send` records) by the same encoding. It imports the core and the generated
protobuf only.
"""
