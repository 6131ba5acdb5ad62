"""Chaos: faults as data, experiments as YAML schedules, evidence that each fault took effect.

The vocabulary itself is data and lives in the model layer (weeble/model: faults.py, selectors.py,
experiment.py), because a scenario embeds an experiment and the simulator sits below chaos.

- evidence.py   fault_begin / fault_end trace records (chaos.jsonl) and what they prove
- runner.py     applies an experiment to a live Testbed (admin API, backend controls)
- sim.py        applies the same experiment in the simulator, for replay from the seed
- verdict.py    the verdict table of `weeble run`: each fault's evidence joined with the analytics
"""
