"""Turns scenario files into running systems: topologies, the scenario schema, backends."""
