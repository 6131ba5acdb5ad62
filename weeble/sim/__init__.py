"""Deterministic discrete-event simulation of a broker network (virtual time, one process).

`engine` drives the pure brokers, `workload` plays the clients, `trace` writes the records and
`run.simulate` ties them to a scenario.
"""
