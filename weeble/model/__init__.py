"""The model layer: what a run is, as data, below the simulator and the live orchestrator.

It imports `weeble.core` only (the simulator, the runtime, chaos and the orchestrator
build on it; DESIGN.md, "Parts and their boundaries").

- topology.py    broker trees and their builders (k-ary, random, chain, edges)
- scenario.py    the scenario YAML: topology, routing, timing, clients, faults, live settings
- selectors.py   which brokers and links a fault hits, resolved against the tree, seeded
- faults.py      the fault vocabulary: one model per fault kind, in a registry
- experiment.py  chaos experiments: YAML schedules of faults (at / after / every)
"""
