"""Reconfiguration (thesis Ch. 4): plans as data (`plan.py`), the elementary changes a broker
makes on request (`membership.py`: leaf add and remove, the strawman's link drop and add), and
the advanced coordinated link exchange (`exchange.py`, 4.4.2)."""
