"""The trace schema: record kinds, their fields and types, the version and the run layout.

This module is the one definition of what a trace record is. Every writer of the project (the
simulator, live brokers, the client library and the live workload, the chaos runner, the
orchestrator) writes records of these kinds with exactly these field names; the reader
(`weeble.trace.reader`), the reference checker (`weeble.check`) and the PySpark jobs
(`weeble.analytics`) read them. `docs/trace-schema.md` is generated from this module and from
`weeble.trace.header` and `weeble.check.rules` (`python -m weeble.trace.doc`).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from enum import StrEnum

VERSION = 2  # 2: one name per field across all writers; a run header; `deliver` has sub_id


class Type(StrEnum):
    STR = "str"
    INT = "int"
    FLOAT = "float"  # an int is accepted where a float is expected (JSON does not tell them)
    BOOL = "bool"
    STR_LIST = "str_list"
    JSON = "json"  # any JSON value (object, array, ...)


@dataclass(frozen=True, slots=True)
class Kind:
    name: str
    doc: str
    writers: str  # who writes it: "sim", "live", "client", "chaos", "orchestrator", or several
    required: Mapping[str, Type] = field(default_factory=dict)
    optional: Mapping[str, Type] = field(default_factory=dict)

    @property
    def fields(self) -> dict[str, Type]:
        return {**self.required, **self.optional}


# Every record has these four fields.
HEADER: Mapping[str, Type] = {"v": Type.INT, "t": Type.INT, "node": Type.STR, "kind": Type.STR}
HEADER_DOC = {
    "v": f"schema version ({VERSION})",
    "t": "time in integer nanoseconds: virtual time from 0 in the simulator, wall clock (Unix "
         "epoch) live; the `run` record says which (`clock`)",
    "node": "the node whose action or observation this is: a broker id, a client id, or `sim`, "
            "`chaos`, `orchestrator` for records of the simulator, the chaos runner or the "
            "orchestrator",
    "kind": "one of the kinds below",
}

S, N, F, B, L, J = Type.STR, Type.INT, Type.FLOAT, Type.BOOL, Type.STR_LIST, Type.JSON

# The ids that join a link message with others.
MESSAGE_IDS: Mapping[str, Type] = {
    "msg": S, "nid": S, "publisher": S, "seq": N, "sub_id": S, "filter": S, "filter_sha256": S,
    "tag": N, "lseq": N, "rid": S, "rids": L}
# What a fault record says about the fault: see FIELD_DOC.
FAULT_FIELDS: Mapping[str, Type] = {
    "type": S, "target": S, "targets": L, "field": S, "broker": S, "client": S, "sub_id": S,
    "links": L, "value": J, "args": J, "probability": F, "delay_ms": F, "jitter_ms": F,
    "spec": S, "what": S, "planned_at": F, "planned_end": F, "took_effect": B, "evidence": J,
    "ok": B, "error": S, "before": J, "after": J, "ended_by": S, "msg": S, "nid": S,
    "publisher": S, "seq": N, "source": S, "peer": S, "rid": S, "phase": S}
# A broker's state, as core `Broker.snapshot()` returns it.
SNAPSHOT_FIELDS: Mapping[str, Type] = {
    "tables": J, "neighbors": L, "root": S, "parent": S, "algorithm": S, "hierarchical": B,
    "wrapper": B, "next_timer": F, "rebuild_bit": N, "mergers": J, "adverts": B,
    "adv_tables": J, "exchange": J, "overlay": S, "colours": J, "recolor": J,
    "colour_routing": J, "optimize": J, "mode": S, "anti_entropy": J, "detached": L,
    "loaned": J, "skip_ring": J}

KIND_LIST = [
    # ---- the run ----
    Kind("run", "the run's header: what ran, with which parameters (one per run, the first "
         "record of `run.jsonl`); see the header section", "sim, orchestrator",
         {"scenario": S, "algorithm": S, "hierarchical": B, "wrapper": B, "options": J,
          "pi": F, "rho": F, "delta_min": F, "delta_max": F, "d": N, "bound": F,
          "topology": J, "seed": N, "backend": S, "clock": S, "versions": J},
         {"duration": F, "snapshot_period": F, "check_period": F, "run_id": S, "adverts": B,
          "ordering": S, "overlay": S, "overlay_bound": F, "reconfigured": B,
          "recolor_period": F, "mode": S, "anti_entropy": J}),
    Kind("run_end", "the run's observation ended here (the brokers stop or the simulation "
         "ends): its time is the run's end (R2 judges publications by it)", "sim, orchestrator",
         {}, {"reason": S}),
    # ---- client requests and deliveries, as the broker saw them (service level) ----
    Kind("publish", "the broker accepted notification (publisher, seq) from its local client",
         "sim, live",
         {"client": S, "broker": S, "nid": S, "publisher": S, "seq": N, "attributes": J},
         {"published_at": F}),
    Kind("deliver", "the broker handed notification (publisher, seq) to its local client. "
         "Live, this is written when gRPC accepted the write of it onto the client's "
         "subscribe stream, the closest point a broker can observe: the bytes may still be "
         "in the transport's buffers (megabytes, for a client that reads nothing) and are "
         "lost if the client then cancels; `client_deliver` (client side) says it arrived",
         "sim, live",
         {"client": S, "broker": S, "nid": S, "publisher": S, "seq": N},
         {"sub_id": S, "published_at": F}),
    Kind("subscribe", "a client subscription starts: the broker's first request for this "
         "sub_id (a later one while it lives is a refresh)", "sim, live",
         {"client": S, "broker": S, "sub_id": S, "filter": S}, {"rpc": S}),
    Kind("refresh", "the client renewed its subscription (every ρ, SC-4)", "sim, live",
         # a long filter is clipped here (the subscribe record has it whole) with its digest
         {"client": S, "broker": S, "sub_id": S}, {"filter": S, "filter_sha256": S, "rpc": S}),
    Kind("unsubscribe", "the client ended its subscription", "sim, live",
         {"client": S, "broker": S, "sub_id": S}, {"filter": S}),
    Kind("crash", "the client went silent without unsubscribing (fault F12); without sub_id: "
         "all of its subscriptions. Written by the client side (the broker cannot see it)",
         "sim, client, chaos", {"client": S, "broker": S}, {"sub_id": S}),
    # ---- links (overhead, hop delays) ----
    Kind("send", "`from` (this node) sent a message to its neighbour `to`; `fate` (live): what "
         "the emulated link did with it. Live, a send record is written when the message "
         "enters the link's outgoing queue: a later `drop` record with the same `from`, `to` "
         "and `lseq` says it did not reach the peer after all, or may not have (reason "
         "in_flight, oversize, unacked, cut)", "sim, live", {"from": S, "to": S, "msg": S},
         {"fate": S, "bytes": N, **MESSAGE_IDS}),
    Kind("receive", "`to` (this node) received a message from its neighbour `from`",
         "sim, live", {"from": S, "to": S, "msg": S}, dict(MESSAGE_IDS)),
    Kind("drop", "a message from `from` to `to` was lost (link fault, cut link), or (reason "
         "unacked) written but never acknowledged by the peer before the session ended: its "
         "process may have died with it", "sim, live",
         {"from": S, "to": S}, {"reason": S, **MESSAGE_IDS}),
    # ---- faults ----
    Kind("fault_begin", "an injected fault starts", "sim, chaos, live",
         {"fault_id": S, "type": S}, dict(FAULT_FIELDS)),
    Kind("fault_end", "an injected fault ends; `ok`/`error`, `took_effect` and "
         "`evidence`/`before`/`after` say what it did", "sim, chaos, live",
         {"fault_id": S, "type": S}, dict(FAULT_FIELDS)),
    Kind("fault", "the broker core applied a state fault to its RAM: evidence of its effect",
         "sim, live", {"field": S}, {"fault_id": S, "layer": S, "args": J, "value": J,
                                     "before": J, "after": J}),
    # ---- state (state-level stabilization) ----
    Kind("snapshot", "a broker's state (core `Broker.snapshot()`); the snapshots of one "
         "`round` are taken at about the same time and form one global state",
         "sim, live", {"broker": S, "round": N, **{k: SNAPSHOT_FIELDS[k] for k in (
             "tables", "neighbors", "root", "algorithm", "hierarchical")}},
         {k: v for k, v in SNAPSHOT_FIELDS.items() if k not in (
             "tables", "neighbors", "root", "algorithm", "hierarchical")}),
    Kind("legitimacy", "the simulator's own legitimacy check of all brokers' tables (the "
         "state-level rule applied online, where snapshots of every broker would be too many)",
         "sim", {"ok": B, "problems": N}, {"sample": J, "required": N}),
    # ---- broker internals (core Trace effects) ----
    Kind("expire", "leased entries expired", "sim, live", {"count": N}, {"entries": J}),
    Kind("switch", "periodic-rebuild wrapper: rebuild table `tag`", "sim, live", {"tag": N}),
    Kind("garbage", "a message or request the broker ignored", "sim, live", {"why": S},
         {"from": S, "peer": S, "size": N, "why_sha256": S}),
    Kind("adv_expire", "leased advertisement entries expired", "sim, live", {"count": N},
         {"entries": J}),
    Kind("reconfig", "a phase of reconfiguration `rid` at this broker: the coordinated link "
         "exchange (thesis 4.4.2: request, lock, locked, lock_refused, lock_released, retry, "
         "failed, refused, begin, gray, released (Qnot), end, r_removed, a_released, "
         "unlocked, done); the 3-colour scheme at R (4.5: submitted, disseminated, activated, "
         "refused)",
         "sim, live", {"rid": S, "phase": S},
         {"path": L, "remove": L, "why": S, "attempt": N, "at": F, "link": L, "relayed": N,
          "count": N, "waited": F, "recolor_round": N}),
    Kind("reconfiguration", "the manager (the Reconfigurator: the simulator's, or the "
         "orchestrator's on a live testbed, node `reconfigure`) started or finished "
         "reconfiguration `rid`, operation `op`; the `finished` record says how it ended and "
         "how many coordination messages of each kind carried its rid (R15; live: counted "
         "from the brokers' `send` records when `trace.sends` is on)", "sim, orchestrator",
         {"rid": S, "op": S, "phase": S},
         {"outcome": S, "why": S, "path": L, "coordination": J}),
    Kind("optimize", "the tree optimizer at this broker (thesis ch. 5, layer `optimize`): "
         "`propose` (phase 1: the direct link to path[-1] pays; `estimate` is what its cost "
         "`cost` was compared with), `abort` (phase 2 at path[-1]: removing the new link itself "
         "costs least), `decide` (phase 2: exchange `remove` for the new link path[0]–path[-1], "
         "a link exchange with id `rid` starts), `dropped` (see `why`). `costs`: the consensus "
         "sums per cycle edge so far (edge t = path[t]–path[t+1], the last one the new link)",
         "sim, live", {"phase": S, "rid": S, "path": L},
         {"estimate": F, "cost": F, "heuristic": S, "costs": J, "remove": L, "why": S}),
    Kind("tree_cost", "the measure of the tree optimizer (the simulator's; live, the "
         "orchestrator's, from the brokers' `send` records, node `reconfigure`): what the "
         "notifications sent since `since` cost (eq. 5.2 on the sends: c of each link and p of "
         "each broker they crossed, p of the publisher's broker once; live with measured link "
         "costs, c as the brokers measured it), how many there were, the optimizer's own "
         "messages priced the same way (`overhead`), the link exchanges done so far, and the "
         "tree now", "sim, live",
         {"since": F, "cost": F, "notifications": N, "overhead": F, "exchanges": N,
          "heuristic": S, "tree": L}),
    Kind("ae_correct", "anti-entropy mode (seed 002, layer `anti_entropy`): the round "
         "`ae_round` of this broker's edge towards `to` found a difference, and this broker sent "
         "`to` corrections: `subscribe` items to hold for it (C1), `unsubscribe` items to drop "
         "(C2, exact rounds), and with `probe` its own sketch, so `to` drops what that sketch "
         "certainly lacks; `full`: an exact round (every K-th, or after a mismatch)", "sim, live",
         {"to": S, "ae_round": N, "subscribe": N, "unsubscribe": N, "probe": B, "full": B}),
    Kind("unwanted", "anti-entropy mode: notification `nid` arrived from `from` and this broker "
         "had nowhere to send it (no local subscriber, no other neighbour): impossible in a "
         "legal state; seed 002 §5 counts these in its overhead metric, and the adaptive timer "
         "waits for them", "sim, live", {"from": S, "nid": S}),
    Kind("ae_link", "anti-entropy mode: the driver reported the link to `neighbor` failed "
         "(`up` false) or back (`up` true); what the timer strategy `timer` (static, strawman, "
         "adaptive; seed 002 §5) does with it", "sim, live",
         {"neighbor": S, "up": B, "timer": S}),
    Kind("overlay_legitimacy", "the simulator's check of the overlay layer (a spanning tree, "
         "parents towards the root, no broker locked; the coloured overlay: spec ch4 §5.5)",
         "sim", {"ok": B, "problems": N}, {"sample": J}),
    Kind("leave", "this leaf broker leaves the overlay (RemoveLeaf, thesis 4.2)", "sim, live"),
    Kind("recolor", "3-colour scheme (thesis 4.5): this broker rotated its colours on a recolor "
         "from `from` (`root`: R's own period); its colours after it", "sim, live",
         {"from": S, "recolor_round": N, "color": N, "c_old": N, "c_cur": N, "c_new": N},
         {"moves": N}),
    Kind("rejoin", "3-colour scheme: no accepted recolor for ξ′ (`timeout`); the broker looks "
         "for a new parent (joinTree)", "sim, live", {"timeout": F}),
    Kind("join", "3-colour scheme: the joinTree walk ended at `parent`; the request `rid` goes "
         "to R", "sim, live", {"parent": S, "rid": S}),
    Kind("child_dropped", "3-colour scheme: child `peer` did not ACK the last recolor and is "
         "no longer a child (A12)", "sim, live", {"peer": S}),
    Kind("merger_invalid", "a merger no longer matches its constituents", "sim, live", {},
         {"merger_id": S, "filter": S, "dest": S, "constituents": L, "flag": N}),
    Kind("timer", "a broker timer fired `late` seconds after it was due (timing model)",
         "live", {"timer": S, "late": F}, {"due": F}),
    # ---- live runtime ----
    Kind("start", "broker process started (also after a restart)", "live", {},
         {"algorithm": S, "listen": S, "admin": S, "neighbors": L, "addresses": J,
          "snapshot_period": F}),
    Kind("stop", "broker process stopping", "live", {}, {"undrained": N, "counters": J}),
    Kind("trace_capped", "this node's trace file reached its cap (`max_bytes`, the broker's "
         "tuning.trace_max_bytes) after `written` bytes: no later record of this node is in "
         "it (the broker counts them, `trace_dropped` in its stop record's counters); a "
         "checker cannot judge what depends on this node after `t`", "live", {},
         {"max_bytes": N, "written": N}),
    Kind("link_up", "the link to neighbour `peer` is established", "sim, live", {"peer": S},
         {"dialer": B}),
    Kind("link_down", "the link to neighbour `peer` was lost", "sim, live", {"peer": S},
         {"why": S}),
    Kind("link_shape", "the emulation parameters of the link to `peer` changed", "live",
         {"peer": S}, {"delay_ms": F, "jitter_ms": F, "loss": F, "duplicate": F,
                       "rate_bps": F, "corrupt": F}),
    Kind("link_cut", "the link to `peer` was cut by the admin API: until `link_heal`, this "
         "node drops every message both ways, with a `drop` record (reason cut) for each: the "
         "ones it had queued for `peer`, what it sends, and what arrives from `peer` (that "
         "record, from `peer` to this node, pairs with `peer`'s `send` by lseq)", "live",
         {"peer": S}),
    Kind("link_open", "a link to `peer` was opened at run time from the address book: a "
         "neighbour the overlay gained, or an out-of-band channel of a link exchange", "live",
         {"peer": S}, {"address": S}),
    Kind("link_close", "a link opened at run time (or one the overlay lost) was closed: not a "
         "neighbour, not on a locked cycle, nothing queued, idle", "live", {"peer": S},
         {"why": S}),
    Kind("peers", "the orchestrator updated this broker's address book (admin SetPeers)",
         "live", {"peers": L}),
    Kind("manage", "a management event from the orchestrator (admin Manage): a step of a "
         "reconfiguration this broker takes part in", "live", {"event": S}, {"args": J}),
    Kind("link_heal", "the link to `peer` was healed by the admin API", "live", {"peer": S}),
    Kind("error", "the runtime caught an error", "live", {"error": S},
         {"event": S, "effect": S}),
    Kind("undeliverable", "a delivery for a local client that the broker let go without "
         "writing it to a stream (`reason`): no_stream (none open), stream_full (its queue "
         "was full), oversize (larger than the client accepts), unencodable, write_failed "
         "(the write in flight when the stream broke), stream_ended (still queued when the "
         "stream ended)", "live",
         {"client": S, "nid": S, "publisher": S, "seq": N},
         {"reason": S, "sub_id": S, "detail": S, "detail_sha256": S}),
    # ---- the client side (live client library and workload) ----
    Kind("client_start", "a client started, attached to `broker`", "client", {},
         {"broker": S, "address": S}),
    Kind("client_publish", "the broker acknowledged a publication of this client", "client",
         {"publisher": S, "seq": N}, {"nid": S, "published_at": F}),
    Kind("client_deliver", "a notification arrived at this client", "client",
         {"client": S, "publisher": S, "seq": N}, {"sub_id": S, "nid": S, "published_at": F}),
    Kind("client_subscribe", "this client asked for a subscription", "client",
         {"client": S, "sub_id": S, "broker": S}, {"filter": S}),
    Kind("client_unsubscribe", "this client asked to end a subscription", "client",
         {"client": S, "sub_id": S, "broker": S}),
    Kind("client_error", "a request of this client failed", "client", {"error": S},
         {"op": S, "sub_id": S, "client": S}),
]
KINDS: Mapping[str, Kind] = {k.name: k for k in KIND_LIST}

# What each field means wherever it appears (one meaning per name).
FIELD_DOC: Mapping[str, str] = {
    "anti_entropy": "the anti-entropy mode's ROM (core `rom.AntiEntropy`: sketch, bits per "
                    "element m/n, hashes k, full_every K, timer, period T, ...); in a snapshot, "
                    "its per-edge rounds and counters",
    "mode": "how routing tables are kept correct: leasing (the default, left out of the "
            "header), anti_entropy (seed 002) or skip_ring (seed 003)",
    "bytes": "the message's size on the link: its encoded envelope (weeble.v1.Envelope), in "
             "bytes (the simulator: the size the same message has live)",
    "full": "an exact round: the items themselves instead of a sketch",
    "neighbor": "the neighbour a link report is about",
    "up": "the link works again (true) or failed (false)",
    "subscribe": "how many items a correction told the receiver to hold (C1)",
    "probe": "a correction carried the sender's sketch (the receiver drops what it lacks)",
    "unsubscribe": "how many items a correction told the receiver to drop (C2)",
    "ae_round": "the round number of one directed edge (its observer's count)",
    "skip_ring": "mode skip_ring: in the header {interval, supervisor_interval}; in a "
                 "snapshot, the broker's topics (see \"State legitimacy in mode skip_ring\")",
    "detached": "anti-entropy mode: neighbours whose link this broker believes failed",
    "detail": "what went wrong with an undeliverable delivery (an error text, clipped)",
    "max_bytes": "the size cap of this node's trace file, in bytes",
    "written": "bytes of this node's trace file when it reached its cap",
    "filter_sha256": "SHA-256 of a filter clipped in this record (its subscribe has it whole)",
    "why_sha256": "SHA-256 of a `why` clipped in this record",
    "detail_sha256": "SHA-256 of a `detail` clipped in this record",
    "client": "a client id (the one that published, is delivered to, subscribes, crashed)",
    "broker": "the broker id the client is attached to (snapshot: the broker whose state it is)",
    "nid": "notification id, `<publisher>#<seq>`",
    "publisher": "the publisher name the notification carries",
    "seq": "the publisher's sequence number, 1, 2, ... per publisher",
    "attributes": "the notification's attributes, a JSON object (numbers: int or float; "
                  "`class: 3` and `class: 3.0` are the same value to a filter)",
    "published_at": "the publication time in seconds, on the clock of `t`",
    "sub_id": "subscription id (unique per client; a client may hold several)",
    "filter": "the subscription's filter in its text form (weeble filter syntax)",
    "rpc": "the client API call that carried it",
    "from": "the sending broker of a link message",
    "to": "the receiving broker of a link message",
    "peer": "the neighbour at the other end of this node's link",
    "msg": "link message type: notify, sub, unsub, switch, ...",
    "lseq": "per-link sequence number of the message (live; restarts at 1 with the process)",
    "tag": "routing-table tag (periodic-rebuild wrapper) of a message or switch",
    "fate": "what the emulated link did with a sent message: queued (entered the outgoing "
            "queue; traces before issue 12 said sent), duplicated, corrupted (queued twice, "
            "garbled), lost, overflow, cut (dropped at once)",
    "reason": "why (a drop: lost, overflow, cut, in_flight, oversize, unacked, unencodable; "
              "live, a drop without lseq never entered the link's queue; an "
              "undeliverable delivery: no_stream, stream_full, oversize, unencodable, "
              "write_failed, stream_ended; the end of a run)",
    "fault_id": "the fault's id, the same in its fault_begin, fault_end and fault records",
    "type": "the fault's kind in the chaos vocabulary (corrupt, clock, crash, cut, drop, ...)",
    "target": "what the fault hit, as text: broker ids, client ids or links `a-b`, "
              "comma-separated (the list is `targets`)",
    "targets": "what the fault hit, as a list",
    "field": "the RAM field a state fault set (core corruption target, e.g. entry.filter)",
    "layer": "the broker layer whose RAM a state fault set (overlay, routing, exchange, ...)",
    "rid": "reconfiguration id (one link exchange, on every broker of its cycle); on a fault "
           "record: the reconfiguration it was scheduled in (`during`)",
    "phase": "the reconfiguration phase this record marks; on a fault record: the phase of "
             "`rid` it was scheduled at",
    "path": "the reconfiguration cycle as its initiator numbers it, B1 … Bn",
    "remove": "the link r = [Br1, Br2] a link exchange removes",
    "attempt": "the initiator's lock attempt, 1, 2, ...",
    "at": "when the initiator retries, seconds on the clock of `t`",
    "link": "a link [a, b] a reconfiguration added or removed",
    "relayed": "routing entries an r-endpoint relayed to its a-endpoint at begin",
    "waited": "seconds the notifications released from Qnot waited there, summed",
    "links": "the links a link fault hit, each `a-b`",
    "value": "the value a state fault wrote",
    "args": "arguments of a state fault (e.g. the table index)",
    "probability": "probability of a link fault per message",
    "delay_ms": "added one-way delay in ms",
    "jitter_ms": "delay jitter in ms",
    "spec": "the fault as written in the experiment",
    "what": "the fault in words",
    "planned_at": "planned start, seconds from the experiment's start",
    "planned_end": "planned end, seconds from the experiment's start",
    "took_effect": "whether the system shows that the fault changed something",
    "evidence": "what the system reported before/after the fault (JSON)",
    "ok": "fault_end: whether the action succeeded; legitimacy: whether the check passed",
    "error": "an error message",
    "before": "state before a state fault",
    "after": "state after a state fault",
    "ended_by": "fault_end: the fault (heal, restart) that ended this one",
    "source": "who carried the fault out on this node (`admin`: the broker's admin API)",
    "round": "snapshot round: snapshots with the same round are one global state",
    "recolor_round": "3-colour scheme: the number of R's recolor (R counts them; for the trace "
                     "only)",
    "color": "3-colour scheme: the colour a recolor carries (0, 1, 2)",
    "c_old": "the colour of the previous tree", "c_cur": "the colour of the current tree",
    "c_new": "the colour of the tree being prepared", "moves": "reconfiguration moves carried",
    "timeout": "ξ′, s",
    "outcome": "how a reconfiguration ended: done, failed (see `why`) or pending at the end",
    "coordination": "coordination messages sent for a reconfiguration, by message kind (lock, "
                    "begin, separator, end, unlock, relayed, reroute, bye; the 3-colour "
                    "scheme: the recolors and requests that carried it)",
    "reconfigured": "the tree changes during the run (reconfigurations, the 3-colour scheme): "
                    "`topology` is the first tree, and the path rule R13(d) takes d hops",
    "recolor_period": "ξ, the root's recolor period of the coloured overlay, s: A, D, L and the "
                      "legitimacy windows each grow by 2ξ (R15)",
    "ordering": "the notification order reconfigurations keep: none, fifo or causal",
    "heuristic": "the tree optimizer: ci (Cost and Interest), mst (l-MST), mit (l-MIT), none",
    "estimate": "optimizer phase 1: the cost the proposer estimates for the tree path "
                "(eq. 5.11 for ci; the dearest link for mst; the first hop's common traffic "
                "for mit)",
    "cost": "optimizer: the cost of the proposed link; tree_cost: the window's cost",
    "costs": "optimizer phase 2: per cycle edge, the sum of cost_R(e, B) over the cycle's "
             "brokers so far (eq. 5.13)",
    "since": "tree_cost: the start of the window, s",
    "notifications": "tree_cost: notifications sent in the window",
    "overhead": "tree_cost: the optimizer's broadcasts and requests of the window, priced "
                "like notifications",
    "exchanges": "tree_cost: link exchanges the optimizer completed so far",
    "tree": "tree_cost: the tree's links, each `a-b`",
    "optimize": "the tree optimizer's state: cache size, environment, proposals, exchanges",
    "overlay_bound": "∆r = 4ξ + h(2δmax − δmin) of the coloured overlay (Eq. 4.3), s",
    "overlay": "the broker's overlay layer: static or coloured",
    "colours": "3-colour scheme: c_old, c_cur, c_new, joining, and per colour the parent and "
               "the children",
    "recolor": "3-colour scheme: ACK flags, R's pending requests, the join walk",
    "colour_routing": "3-colour scheme: sizes of what routing holds back (E4, FIFO, causal)",
    "tables": "routing tables: a list (one per tag) of lists of entries "
              "{filter, dest, sub_id, flag, ...}",
    "neighbors": "the broker's neighbours", "root": "the root broker's id",
    "parent": "the neighbour towards the root (null at the root)",
    "algorithm": "routing algorithm", "hierarchical": "hierarchical (vs peer-to-peer) routing",
    "wrapper": "periodic-rebuild wrapper in use", "next_timer": "the broker's next timer time",
    "rebuild_bit": "the wrapper's current table bit", "mergers": "merger records",
    "loaned": "per table, the {dest, filter} pairs re-sent on their own account (by a dissolved "
              "merger, after a new advertisement under leasing, or to hand a neighbour's "
              "renewal over to the next holder) that their destination has "
              "not refreshed since (left out when there are none)",
    "adverts": "advertisements route the subscriptions (thesis §3.4.2)",
    "adv_tables": "advertisement routing tables, like `tables`",
    "exchange": "the broker's link-exchange state: lock, cycle pointers, colour, queue sizes",
    "problems": "number of legitimacy problems found", "sample": "a few of the problems",
    "required": "number of subscriptions the check required",
    "count": "number of entries", "entries": "the entries",
    "why": "why it was ignored, or why a link went down", "size": "bytes",
    "merger_id": "merger id", "dest": "destination of an entry", "constituents": "sub ids",
    "flag": "entry flag",
    "timer": "the timer's name", "late": "seconds between the due time and the firing",
    "due": "the time the timer was due, in seconds on the clock of `t`",
    "listen": "the address the broker listens on", "admin": "its admin address",
    "addresses": "its neighbours' addresses", "snapshot_period": "seconds between snapshots",
    "undrained": "messages not sent at the stop", "counters": "the process's counters",
    "dialer": "whether this node dialed the link", "loss": "loss probability",
    "duplicate": "duplication probability", "rate_bps": "rate limit", "corrupt":
    "corruption probability",
    "event": "the event being handled", "effect": "the effect being carried out",
    "address": "the broker address the client uses (link_open: the address dialled)",
    "op": "the failed request", "peers": "the brokers whose addresses the book now has",
    "rids": "the reconfigurations a recolor message carries (3-colour scheme)",
    # run header
    "scenario": "the scenario's name", "options": "the core's Options (JSON object)",
    "pi": "π, s", "rho": "ρ, s", "delta_min": "δmin, s", "delta_max": "δmax, s",
    "d": "d, the tree's diameter in hops (as configured)", "bound": "Δ, s",
    "topology": "the broker tree", "seed": "the run's seed",
    "backend": "sim, local, mininet, docker or kubernetes", "clock": "virtual or wall",
    "versions": "software versions", "duration": "planned duration of the run, s",
    "check_period": "seconds between the simulator's legitimacy checks",
    "run_id": "the live run's id",
}


def all_fields() -> dict[str, Type]:
    """Every field of every kind with its one type: a field name has one type across kinds."""
    columns: dict[str, Type] = dict(HEADER)
    for kind in KIND_LIST:
        for name, typ in kind.fields.items():
            known = columns.setdefault(name, typ)
            if known is not typ:
                raise AssertionError(f"field {name!r} of {kind.name!r} is {typ}, elsewhere {known}")
    return columns


# ---- the run directory ------------------------------------------------------------------------

TRACE_DIR = "trace"  # RUN/trace/*.jsonl: one file per node, the same in the simulator and live
RUN_FILE = "run.jsonl"  # RUN/trace/run.jsonl: the `run` header record, and `run_end`
ANALYSIS_DIR = "analysis"  # RUN/analysis/: written by `weeble analyze`
SUMMARY_FILE = "summary.json"  # RUN/summary.json: the simulator's or live run's summary
