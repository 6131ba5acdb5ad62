"""The schema of a simulated run's summary.json, as data: docs/trace-schema.md prints it
(weeble.check.doc) and tests/sim/test_summary_schema.py holds every summary the simulator writes
to it (a field added, renamed or dropped without this table fails the test).

Nested objects whose keys are data (message kinds, the scenario's routing section) list no
keys; the others list every key they have.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True, slots=True, kw_only=True)
class Field:
    name: str
    type: str
    meaning: str
    keys: tuple[str, ...] = ()  # an object's (or a list's rows') keys, when they are fixed


SUMMARY_VERSION = 2  # weeble.sim.run writes it (a test holds the two equal)

_EPISODE = ("index", "begin", "end", "observed_until", "faults", "service_time",
            "service_status", "state_time", "state_status", "state_last_failing",
            "service_measured_from", "state_measured_from")

SUMMARY: tuple[Field, ...] = (
    Field(name="v", type="int", meaning=f"the summary's version ({SUMMARY_VERSION})"),
    Field(name="scenario", type="str", meaning="the scenario's name"),
    Field(name="seed", type="int", meaning="the scenario's seed"),
    Field(name="duration", type="float", meaning="simulated seconds"),
    Field(name="topology", type="object", meaning="the tree: counts, its diameter and root",
          keys=("brokers", "links", "diameter", "root", "leaves")),
    Field(name="routing", type="object", meaning="the scenario's `routing` section"),
    Field(name="params", type="object", meaning="the timing constants and the delay model",
          keys=("pi", "rho", "delta_min", "delta_max", "d", "delay")),
    Field(name="bound", type="float", meaning="Δ, as the header's `bound`"),
    Field(name="messages", type="object", meaning="inter-broker messages sent, by kind, with "
          "`total` and `per_second`"),
    Field(name="link_faults", type="object", meaning="messages the link faults dropped, "
          "duplicated, or that arrived on a link that no longer exists",
          keys=("dropped", "duplicated", "stray")),
    Field(name="clients", type="object", meaning="the clients' actions",
          keys=("subscriptions", "refreshes", "unsubscriptions", "crashes", "publications",
                "live_at_end")),
    Field(name="deliveries", type="object", meaning="R1-R7: the counts of the rules (as "
          "`weeble check`'s `deliveries`); `late` and `unfinished` are publications the run "
          "ended before they could be judged",
          keys=("publications", "judged", "correct", "expected", "delivered", "missing",
                "window", "spurious", "duplicate", "phantom", "fifo", "deliveries", "late",
                "unfinished")),
    Field(name="legitimacy", type="object", meaning="R8-R9 over the checks of R8, both kinds (as "
          "`weeble check`'s `legitimacy`)",
          keys=("checks", "legitimate", "illegitimate", "first_illegitimate",
                "last_illegitimate", "sample_problems")),
    Field(name="faults", type="list", meaning="the injected faults, with the evidence that "
          "each took effect",
          keys=("id", "kind", "what", "at", "began", "end", "ended", "targets", "took_effect",
                "error", "skipped")),
    Field(name="episodes", type="list", meaning="R10-R12, one row per episode", keys=_EPISODE),
    Field(name="stabilization", type="object|null", meaning="the worst episode's service- and "
          "state-level times (null: no fault)", keys=("episodes", "service", "state")),
    Field(name="timing", type="object", meaning="R13: the timing violations, grouped",
          keys=("violations", "by_kind", "by_broker", "groups", "measured", "worst",
                "tolerance")),
    Field(name="verdict", type="object", meaning="R14: `status` (see \"Verdict statuses and "
          "exit codes\"), `pass` (status is pass), the parts and one row per fault",
          keys=("status", "pass", "reasons", "bound", "parts", "faults", "before_first_fault",
                "stabilization_measured_from")),
    Field(name="verdict.parts", type="list", meaning="the fault-free prefix, each episode, "
          "each failed reconfiguration: its span and status (an episode's also `episode` and, "
          "when retimed, `timing`)", keys=("part", "begin", "end", "status", "reason")),
    Field(name="verdict.faults", type="list", meaning="per fault: its episode's times, "
          "ratios to Δ, status and losses (R14: from its begin − D to the next episode's "
          "begin − D)",
          keys=("fault_id", "type", "target", "begin", "end", "took_effect", "episode",
                "episode_end", "service_time", "service_status", "state_time",
                "state_status", "bound", "ratio", "state_ratio", "status", "pass", "lost",
                "spurious", "duplicated", "reordered", "measured_from")),
    Field(name="performance", type="object", meaning="wall-clock figures: the only part that "
          "is not a function of the scenario"),
    Field(name="reconfigurations", type="list", meaning="R15, one row per operation"),
    Field(name="overlay", type="object|null", meaning="the overlay's own checks (with "
          "reconfigurations or the coloured overlay)"),
    Field(name="steady", type="object|null", meaning="the scenario's `measure` window"),
    Field(name="optimizer", type="object|null", meaning="the tree optimizer's decisions and "
          "cost series (chapter 5)"),
)


def document() -> str:
    """The schema as the contract prints it."""
    rows = []
    for f in SUMMARY:
        keys = ", ".join(f"`{k}`" for k in f.keys) if f.keys else ""
        rows.append(f"| `{f.name}` | {f.type} | {f.meaning} | {keys} |")
    return "\n".join(["| field | type | meaning | keys |", "|---|---|---|---|", *rows])
