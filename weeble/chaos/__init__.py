"""Chaos: faults as data, experiments as YAML schedules, evidence that each fault took effect.

- faults.py     the vocabulary: one model per fault kind (spec §6.3 F1–F16 and more), a registry
- selectors.py  which brokers and links a fault hits, resolved against the tree, seeded
- experiment.py YAML schedules (at / after / every), validated with errors naming the field
- evidence.py   fault_begin / fault_end trace records (chaos.jsonl) and what they prove
- runner.py     applies an experiment to a live Testbed (admin API, backend controls)
- sim.py        applies the same experiment in the simulator, for replay from the seed
- verdict.py    the verdict table of `weeble run`: each fault's evidence joined with the analytics
"""
