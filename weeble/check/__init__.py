"""The one definition of correctness: a reference checker over histories (traces).

    rules.py        the rules R1-R15 in words (also in docs/trace-schema.md)
    deliveries.py   R1-R7: expected, missing, spurious, duplicate, phantom, FIFO
    state.py        R8-R9: legitimacy checks (simulator monitor, snapshot rounds)
    episodes.py     R10-R12: faults, episodes, service- and state-level stabilization
    timing.py       R13: the timing model (hop delays, refresh gaps, timers, paths)
    verdict.py      R14: pass, fail, or "assumptions violated"
    reconfig.py     R15: per reconfiguration (chapter 4), the overlay's checks; causal.py
    history.py      check_run(run_dir): all of it over a trace directory

It imports only weeble.core and weeble.trace. The PySpark jobs of weeble.analytics
compute the same at scale; a differential test keeps them equal.
"""
