"""The definition of correctness over a trace, in words: the rules R1-R15.

This text is part of docs/trace-schema.md; `weeble.check` implements it (deliveries.py: R1-R7,
state.py: R8-R9, episodes.py: R10-R12, timing.py: R13 and R13e, verdict.py: R14) and the
PySpark jobs of `weeble.analytics` compute the same. Each rule says what to compute from which
records, so a checker can be written from this text and the schema alone.
"""

from __future__ import annotations

TIMING_TOLERANCE = 0.010  # s: τ of R13, the measurement slack of the timing-model checks

RULES = f"""\
All times below are in seconds since the run's origin: `(t - t0) / 1e9`, where `t0` is the `t`
of the `run` record. The run ends at `end`: the `t` of its `run_end` record (the last one, if
several), or of its last record if there is none. The constants come from the `run` record:
**A** = d·δmax + ρ (activation), **D** = d·δmax (deactivation), **L** = 2π + d·δmax (crash
linger), **Δ** = `bound`. "At the same instant" is decided with a tolerance of 1e-9 s: an event
exactly on the edge of a window is inside it. Records of one file are in time order; records of
different files are merged by `t` (ties: any order, except that within one file the file order
holds).

**R1 Subscriptions.** A subscription is identified by (`client`, `sub_id`): an id is unique
per client only (two clients may use the same id, each for its own filter), and every rule
below that looks up a subscription by its id looks it up among its client's. It starts at a
`subscribe` record and ends at the first later `unsubscribe` or `crash` record of the same
(`client`, `sub_id`); a `crash` without `sub_id` ends every subscription of that client that has
started by then. A subscription that never ends lives forever. A `subscribe` or `refresh` of a
subscription that has started and not ended changes nothing; a `subscribe` after its end starts
a new subscription with the same id. An end record of a subscription that is not running is
ignored. Its `filter` is the one of its `subscribe` record; a filter that does not parse matches
nothing. A subscription *ended by a crash* is one whose end record is a `crash`.

**R2 Publications.** A publication is identified by (`publisher`, `seq`): its first `publish`
record gives its time t_p, its publishing `client` P and its `attributes`; later `publish`
records of the same pair are ignored. It is *judged* if t_p + D ≤ end.

**R3 Expected deliveries.** For a judged publication p and a client c ≠ P, the pair (p, c) is
*expected* if c has a subscription s whose filter matches the attributes of p (see "Filters")
with s.start ≤ t_p − A and s.end ≥ t_p + D. Why: a subscription needs d·δmax to reach every
broker, plus one refresh period ρ for a first copy that met a transiently wrong table; a
publication crosses at most d links, so it must still meet the subscription D after it was
published. A publisher never receives its own publication (the broker does not echo it), so
(p, P) is never expected.

**R4 Allowed deliveries.** A delivery of p to c at time t_d is *allowed* if c has a
subscription s matching p with s.start ≤ t_d ≤ s.end + D, or ≤ s.end + L if s ended by a crash
(the crashed client's lease lingers up to 2π).

**R5 Verdict per pair and per publication.** Deliveries are the `deliver` records, keyed by
(`publisher`, `seq`, `client`) (a record's `sub_id`, when it has one, is not used: a pair is
judged against all of the client's subscriptions, R3 and R4). Of all deliveries of one
published pair (p, c), the first is
*delivered* if (p, c) is expected, else *in a window* if it is allowed (R4, at its own time),
else *spurious*; every later one is a *duplicate*. An expected pair without any delivery record
is *missing*. A judged publication is *correct* if it has no missing pair, no spurious and no
duplicate delivery. Deliveries of a publication that is not judged are in a window or spurious
(none is expected).

**R6 Phantoms.** A delivery of a (`publisher`, `seq`) that was never published is a *phantom*
(e.g. an injected notification); each such record counts once; phantoms are neither spurious
nor duplicates, and no publication owns them.

**R7 Per-publisher FIFO.** For each (client, publisher), take the first delivery of each
published `seq` in delivery order (time, then trace order). A delivery whose `seq` is lower
than a `seq` of that publisher already delivered to that client is a *FIFO violation*.

**R8 Legitimacy checks.** The state is judged at *checks*, each a time and ok/not ok:
(a) every `legitimacy` record (the simulator's own check: time `t`, verdict `ok`); (b) every
complete snapshot *round*: the `snapshot` records with the same `round` (no `round`: the same
`t`), one per broker of the header's `topology.brokers` (a broker's last record in the round
counts), checked at the time of its latest record by R9. A round without a record of some
broker of the header, or with a broker the header does not list, is skipped: so after a broker
is removed from the tree (or while one is down, or once one has joined), no round of snapshots
is checked, and only the `legitimacy` records remain. With advertisements (the header's
`adverts`) no round is checked: which subscriptions a table must hold depends on the live
advertisements, which the trace does not record. A check is ok if its set of problems is
empty. `weeble check`, `weeble analyze` and the simulator's own `summary.json` (which checks
each round as it takes it, traced or not) use both kinds, so they count the same checks and
find the same state times.

**R9 Legitimate routing configuration.** At time t, a subscription (R1) is *required* if it has
started by t − D and not ended by t, and *allowed* if it has started by t and not ended before
t − L. The configuration of the snapshots is legitimate iff the routing tables hold, for every
required subscription, exactly the entries the routing algorithm of the header gives it in the
tree, and no entry that no allowed subscription explains (weeble computes this with
`weeble.core.legitimacy.check`: for each algorithm, the entries a legitimate table holds are
those its routing rule derives from the required subscriptions; see spec ch3 §6). Precisely:
(a) the tree is the one the snapshots show (each broker's `neighbors` and `parent` when it was
taken), not the header's: in a reconfigured run, the tree at that round. A subscription is *at*
the broker its `subscribe` record names (`broker`); it is on D's side of V (a neighbour D of
broker V) if its broker is reached from D without crossing V. A broker's entries are those of
all its `tables` (each entry a `filter`, a destination `dest`, a `sub_id`; `flag` is not
judged). An entry's `sub_id` is a subscription's *network id*: its client's id qualified with
the client by the broker it is attached to, `<client>/<sub_id>`, or the `sub_id` itself when it
already starts with `<client>/` (a client id holds no `/`), so no two clients' subscriptions
share one. (b) An entry towards a *local client* c (a destination that is not a neighbour) is
judged by the pair (network id, `filter`) against c's own subscriptions at that broker: each
entry must carry the network id and the filter of one of c's allowed subscriptions, else it is
spurious; each of c's required subscriptions needs an entry with its network id and its
filter, else it is missing, unless an entry with that id is spurious (holds a filter no
allowed subscription of that id has: a corrupted filter counts once). One id may stand for two
allowed subscriptions of c, one ended and one started after it with another filter. (c)
Entries towards a neighbour are judged by filter; simple routing by the pair (network id,
`filter`), as in (b) but over the subscriptions on D's side of every client together: two
clients' subscriptions with the same `sub_id` on one side need one entry each. Filters are
compared as sets of notifications (see "Filters"): two filters are
*the same* if they match the same notifications, f *covers* g if f matches every notification
g matches, and an entry is *covered by the union* of some filters if every notification it
matches is matched by one of them. (d) A merger record (which constituents a broker merged,
`mergers` in a snapshot) is not an entry and is not judged; the merger it forwarded is an
ordinary entry at the neighbour, judged by its filter. Nor are the loans (`loaned` in a
snapshot) judged: any value of them is legitimate, since a refresh of an entry ends its loan
and a loan only acts when its entry expires unrefreshed, which no required subscription's
entry does. (e) Under the periodic-rebuild wrapper
the union of the two tables is judged; with the coloured overlay, the tables of the colours
the root calls current and old, each against its colour's tree (the table being prepared is
not judged; the snapshot's `colours` gives c_cur and c_old, and per colour c, `trees[c]`
its `parent` and `children`: the tree of colour c; its table is `tables[c]`); with
advertisements, the subscription tables (where a subscription travels only towards the
advertisements that overlap it) and the advertisement tables (judged like subscription
tables, against the live advertisements) are judged by the simulator's own checks (R8a)
only, not in snapshot rounds (R8).

**R10 Faults and episodes.** A fault is all `fault_begin` and `fault_end` records with the same
`fault_id`; it begins at its earliest `fault_begin` and ends at its latest `fault_end` (no
`fault_end`: it never ends). A `fault_end` with `ok: false` ends the fault too: its action
failed (e.g. a restart that could not start the broker ends the crash it meant to end), the
reason is in `error`, and the fault's episode is judged from there like any other. Its target
is the `target` of its records, else their `links`, else the recording node, each name once.
It *took effect* as its records' `took_effect` say (true if any says true); when none says,
`weeble check` reports it unknown, and `weeble analyze` may infer it from evidence (a state
that changed, `crash` or `drop` records in its window).
Sort faults by begin. A fault belongs to the current episode if it
begins before the current episode ends + Δ (faults closer than Δ form one episode), or if the
current episode never ends; otherwise it starts a new episode. An episode begins when its first
fault begins and ends when its last-ending fault ends; it is *observed until* the next episode
begins, or the run's end.

**R11 Service-level stabilization of an episode** (measured from the episode's end E, the end
of its last fault): take the judged publications with E ≤ t_p and t_p + D ≤ the episode's
observed-until time, in time order. None: "no publications observed", no time. All correct:
0 s ("stable"). Publications at the same instant are one *moment*, correct only if all of
them are (the order files list them in does not matter). The last moment incorrect: "not
stabilized", no time. Otherwise the time is t_first − E, where t_first is the first moment
after the last incorrect one.
An episode that never ends: "fault never ended", no time.

**R12 State-level stabilization of an episode** (from E, as R11): take the checks (R8) with
E ≤ t < observed-until (the one exception to "on the edge is inside": a check at the very
instant the next episode begins may already see its fault, and belongs to it), except those
inside a reconfiguration's *state span* (R15: from its start to its end + D): there the
tables pass through states that R9 calls illegitimate by the reconfiguration's own doing (an
exchange locks its endpoints and moves routes while they are checked), and R15 judges a
reconfiguration by what it does to the service; such a check counts neither for nor against
the episode, which is unobserved there as between two checks. None: "no
checks observed". All ok: 0 s. Checks at the same instant
are one moment, as in R11. The last moment not ok: "not stabilized". Otherwise: the time of the
first moment after the last failing one, minus E. The checks sample the state: it became
legitimate after the last failing moment and by that first ok one, so the time is an upper
bound, and the last failing moment minus E (`state_last_failing`; none when no check failed)
a lower bound. Against Δ (R14) the state level is late only when a check failed after E + Δ:
a state that became legitimate between a failing check at or before E + Δ and the next check
kept Δ, though that check came after it.
A run without faults has no episode and no stabilization time.

**R13 The timing model.** The algorithms' bounds assume that a message crosses a link in
[δmin, δmax], that a client refreshes every ρ, and that a broker's timers fire on time. With
τ = {TIMING_TOLERANCE} s of measurement slack, the trace shows a *timing violation*:
(a) hop: a `send` and the `receive` with the same (`from`, `to`, `lseq`) (the latest send
before the receive) more than δmax + τ apart, or less than δmin − τ; the violation lasts from
the send to the receive (only records with an `lseq` are paired: the simulator writes none,
its links keep [δmin, δmax] by construction, so its traces have no hop violations); (b) refresh:
two consecutive `subscribe`/`refresh` records of a
running subscription more than ρ + τ apart; it lasts from the first to the second; (c) timer:
a `timer` record with `late` > τ; it lasts from `t − late` to `t`; (d) path: the first
`deliver` of a published pair (p, c) whose `t` minus t_p exceeds h·δmax + τ, h being the hops
between the publishing and the delivering broker in `topology`; it lasts from t_p to the
delivery. Each violation names
its broker (the receiver, the subscriber's broker, the timer's node, the delivering broker).
A violation that overlaps a fault (R10: from its begin to its end, or to the run's end if it
never ends) is that fault's doing and is not counted. The others are *grouped* by kind, broker
and bin ⌊begin / (Δ/10)⌋; a group spans from its earliest begin to its latest end.

**R13e The timing a part had.** Of some timing violations (R13): δ̂ = the largest of δmax,
every hop violation's delay and every path violation's delay divided by its h (whole when
h = 0); ρ̂ = the largest of ρ and every refresh violation's gap; π̂ = π + the largest timer
violation's lateness (a lease expires that much later). Δ̂ is Δ of the header's algorithm
with δmax, ρ, π replaced by δ̂, ρ̂, π̂ (a coloured overlay's `overlay_bound` stays as
recorded); there is *no bound* when the algorithm's precondition fails at them (π̂ > ρ̂ +
d·(δ̂ − δmin) for simple, identity, covering and merging; π̂ ≥ ρ̂ for flooding; π̂ > ρ̂ +
2·d·δ̂ under the wrapper).

**R14 Verdict.** The run *passes* if (a) among the publications with t_p < (begin of the first
episode) − D (all judged publications if there is none), none has a missing, spurious or
duplicate delivery and no FIFO violation (R7) happens before that time; and (b) every episode
stabilized (R11, and R12 where it has checks) within Δ (at the state level: no check failed
after E + Δ, see R12); and (c) no reconfiguration's verdict
(R15) is *fail*. A part (the fault-free prefix, an episode from its begin to its observed-until
time, or a failed reconfiguration from its start to its end) that fails while a group of timing
violations (R13) overlaps it is reported "assumptions violated" with the violations' figures
rather than as a failure of the algorithm, with these exceptions, which stay failures: a
prefix with a duplicate or a FIFO violation, and a failed reconfiguration (no delay explains
a duplicate or a reordering); and an episode that is late even at the timing it had. For an
episode, take the groups overlapping it: K = the latest end among those under which, each
alone, no bound holds (R13e), or E if none or if later; Δ̂ = R13e of the groups that end
after K (Δ itself when none do). The episode is late if there is a Δ̂ and a problem remains
against it counted from K: a service-level time with E + time > K + Δ̂, a state-level last
failing moment with E + `state_last_failing` > K + Δ̂ (R12), or "not stabilized"
although the episode was observed past K + Δ̂ (observed-until − D for the service level,
observed-until for the state level). Such an episode, or a prefix that fails anyway, fails;
the run then does not pass. An "assumptions violated" part does not pass either. Each
episode's row (`verdict.faults`) also shows what its faults cost, not judged (a fault may
lose): `lost`, `spurious` and `duplicated` are R5's missing, spurious and duplicate deliveries
of the judged publications with begin − D ≤ t_p < the next episode's begin − D (the last
episode: every later one), and `reordered` the FIFO violations (R7) delivered in that span.
It starts at begin − D because a publication made less than D before the first fault struck
may still be in flight (R3's D) and be lost to it; with the prefix of (a), which ends there,
these spans partition the run, so each loss is shown once. An episode
that never ends (R10), or that has no judged publication after its end (R11: "no publications
observed"; its state-level result alone does not make it stabilized), or whose only problems
are "not stabilized" (R11, R12) and "no publications observed" while the run observed it for
no longer than Δ after E (observed-until − D ≤ E + Δ for the service level, observed-until ≤
E + Δ for the state level: it may yet have kept its bound), is *not judged*: it is
reported on its own row, and the other parts keep their own verdicts. An episode that passes at
the service level
but had no state-level check (R12: "no checks observed") has the status *no checks observed*,
which is not a pass. The run's status is the first of fail, assumptions violated, not judged,
no checks observed that a part has, else pass; "Verdict statuses and exit codes" below gives
each its exit code.

**R15 Reconfigurations** (chapter 4). A reconfiguration is the `reconfiguration` records with
the same `rid`: it starts at its `started` record and ends at its `finished` one (none: pending
at the run's end, which then ends it). Its *window* holds the publications with
start − D ≤ t_p < end + D (those in flight when it started, and those that may still take its
old paths); its *state span* is from its start to its end + D (the legitimacy checks there see
its transient: R12 leaves them out of every episode, and no rule judges them). Per
reconfiguration: *lost* is the sum of R5's missing deliveries over the judged publications of
its window, *duplicated* their duplicate deliveries, *reordered* the FIFO
violations (R7) with delivery time in [start − D, end + 2D), plus, when the header's
`ordering` is `causal`, the causal violations in that span that are not FIFO violations (a
delivery of a notification that causally precedes one the client already received, n1 → n2
when one client (a `publish` record's `client`) published n1 before n2, or received n1 before
publishing n2, and → is transitive; only a notification's first delivery to a client counts —
unless the client had already received a later publication of n1's own publisher: R7 counted
it), so each reordering counts once. "In that span" is by *delivery* time, for FIFO and
causal violations alike; lost and duplicated are by *publication* time (the window above).
Its coordination messages are the `finished` record's `coordination`. It is *during faults*
if [start − D, end + 2D] overlaps a fault (R10) or the Δ after its end. Its *verdict*, on
the service over its window: if it lost, duplicated, spuriously delivered or reordered anything,
*during faults* when it is (the figures are shown; the fault's episode is judged by R14), else
*fail*; otherwise *pass* when
its outcome is `done`, *not done* when it was given up or is pending at the end. A fault record
with `rid` and `phase` was scheduled at that phase of that reconfiguration (`during`).
A timing violation (R13) inside the span
[start − D, end + 2D] of a reconfiguration is that reconfiguration's doing (an exchange holds
notifications back by design) and is not counted. When the header says `reconfigured`, the
path rule R13(d) takes h = d for every pair of brokers. The `overlay_legitimacy` records are
the overlay's own checks (not R8's): after each fault, among the checks from its end to the
next fault's begin (or the run's end), but for those in a reconfiguration's state span, the
overlay has stabilized at the first ok check after the last failing one (as R12), to be
compared with the header's `overlay_bound` ∆r. With a
coloured overlay (the header's `recolor_period` ξ), A, D, L and the legitimacy windows of R9
each grow by 2ξ: a (un)subscription goes into the tables of the colour
being prepared, which notifications use only from the recolor after next.
"""
