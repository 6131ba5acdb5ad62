"""Chaos: faults as data, experiments as YAML schedules, evidence that each fault took effect.

The vocabulary itself is data and lives in the model layer (weeble/model: faults.py, selectors.py,
experiment.py), because a scenario embeds an experiment and the simulator sits below chaos.

- target.py     the Target protocol a fault acts on: the simulator's (broker/sim/target.py), or
                the live one (live.py: the orchestrator's Backend interface and the admin API)
- actions.py    one implementation per fault kind, written against a Target
- runner.py     the one executor: schedules an experiment's injections on a Target's clock and
                records each with its evidence (live: ChaosRunner; simulated: in_simulation)
- evidence.py   fault_begin / fault_end trace records (chaos.jsonl) and what they prove
- verdict.py    the verdict table of `weeble run`: each fault's evidence joined with the analytics
"""
