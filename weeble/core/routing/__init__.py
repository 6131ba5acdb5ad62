"""Routing (thesis Ch. 3): one strategy per algorithm (`strategy.py`, `merging.py`), the two
schemes that keep tables self-stabilizing around any strategy (`leasing.py`, `rebuild.py`), and
the layer that routes notifications and owns the control planes (`layer.py`)."""
