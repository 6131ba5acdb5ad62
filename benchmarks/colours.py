"""The 3-colour scheme (thesis 4.5) in simulation: stabilization, activation delay, traffic.

    python -m benchmarks.colours            # the full tables (a few minutes)
    python -m benchmarks.colours --quick    # fewer seeds and sizes

Prints three tables:
1. stabilization of the overlay (spec ch4 §5.5) after a partition (a cut link, counted from the
   heal; a corrupted parent pointer, counted from the fault) and after corrupted colour
   variables, against the tree height and ξ, next to ∆r = 4ξ + h(2δmax − δmin) (Eq. 4.3, with
   h the tree's height: the bound of a tree that does not degenerate);
2. time from a reconfiguration request (a link exchange submitted at a random time) to its
   activation at R, against 2ξ (one round to wait for, one to disseminate, one to activate);
3. recolor control traffic (RECmsg + ACK) per broker per ξ and per second, and its share of the
   control traffic (the subscriptions are forwarded once per colour and round, so both grow
   with the rounds, not with ρ), against ξ.
Medians and maxima over seeds; every run is deterministic by its seed.
"""

from __future__ import annotations

import argparse
import random
import statistics
from collections.abc import Callable

from weeble.core.events import Corrupt
from weeble.core.messages import Recolor, RecolorAck, Sub
from weeble.core.reconfig.plan import Tree, random_exchange
from weeble.core.rom import Algorithm, Colours, Params
from weeble.model.topology import Topology, chain, kary_tree
from weeble.sim.reconfigure import Reconfigurator
from weeble.sim.simulation import Simulation

DMIN, DMAX, RHO = 0.005, 0.02, 0.4


def _net(topo: Topology, xi: float, seed: int) -> tuple[Simulation, Colours, Params]:
    h = topo.height("b0")
    params = Params(pi=1.0, rho=RHO, delta_min=DMIN, delta_max=DMAX, d=2 * h)
    colours = Colours(xi=xi, height=h)
    colours.validate(params)
    net = Simulation(topo, algorithm=Algorithm.IDENTITY, params=params, colours=colours,
                     seed=seed, root="b0")
    for i, b in enumerate(topo.brokers):
        net.subscribe(0.0, f"s{i}", b, "class == 1")
    return net, colours, params


def _legit_after(net: Simulation, t0: float, until: float) -> float:
    since = None
    while net.now < until:
        net.run(net.now + 0.01)
        if net.overlay_legitimacy():
            since = None
        elif since is None:
            since = net.now
    return float("nan") if since is None else since - t0


def _trees(quick: bool) -> list[tuple[str, Topology]]:
    out = [("binary, h=2", kary_tree(2, 2)), ("binary, h=3", kary_tree(2, 3)),
           ("chain, h=6", chain(7))]
    if not quick:
        out += [("binary, h=4", kary_tree(2, 4)), ("chain, h=12", chain(13))]
    return out


def _fault(kind: str) -> Callable[[Simulation, str, str, float], float]:
    def apply(net: Simulation, victim: str, parent: str, t: float) -> float:
        o = net.brokers[victim].ram.overlay
        if kind == "cut":
            net.engine.set_link_fault(victim, parent, drop=1.0)
            net.run(t + 1.5)
            net.engine.set_link_fault(victim, parent, drop=0.0)
            return net.now
        if kind == "parent":
            net.engine.inject(t, victim, Corrupt("colour.parent", "ghost", {"colour": o.c_new}))
            return t
        rng = random.Random(victim)
        for name in ("c_old", "c_cur", "c_new"):
            net.engine.inject(t, victim, Corrupt(f"colour.{name}", rng.randrange(3)))
        return t

    return apply


def stabilization(seeds: int, quick: bool) -> None:
    print("1. overlay stabilization (s): median / max over seeds, against ∆r")
    print(f"{'tree':14} {'xi':>4} {'fault':>8} {'median':>7} {'max':>7} {'∆r':>6}  max/∆r")
    for name, topo in _trees(quick):
        for xi in ((1.0,) if quick else (1.0, 2.0)):
            for kind in ("cut", "parent", "colours"):
                took = []
                for seed in range(seeds):
                    net, colours, params = _net(topo, xi, seed)
                    parents = topo.parent_map("b0")
                    victim = random.Random(seed).choice(topo.brokers[1:])
                    net.run(4 * xi + 0.3)
                    t0 = _fault(kind)(net, victim, parents[victim] or "b0", net.now)
                    took.append(_legit_after(net, t0, t0 + 3 * colours.bound(params)))
                bound = colours.bound(params)
                print(f"{name:14} {xi:4.1f} {kind:>8} {statistics.median(took):7.2f} "
                      f"{max(took):7.2f} {bound:6.2f}  {max(took) / bound:.2f}")


def activation(seeds: int, quick: bool) -> None:
    print("\n2. reconfiguration request -> active at R (s), link exchanges at random times")
    print(f"{'xi':>4} {'n':>4} {'min':>6} {'median':>7} {'max':>6}  max/(2ξ)")
    for xi in ((0.8, 1.6) if quick else (0.8, 1.6, 3.2)):
        took = []
        for seed in range(seeds):
            topo = kary_tree(2, 3)
            net, _, _ = _net(topo, xi, seed)
            rng = random.Random(seed)
            tree = Tree.of(topo.links, topo.brokers)
            reconf = Reconfigurator(net, tree, colours=True)
            net.run(4 * xi)
            for _ in range(4):  # one at a time, each at a random phase of R's period
                record = reconf.start(net.now + rng.uniform(0, xi), random_exchange(tree, rng))
                while record.finished is None:
                    net.run(net.now + 0.1)
                took.append(record.finished - record.requested)
                tree = reconf.tree
        print(f"{xi:4.1f} {len(took):4d} {min(took):6.2f} {statistics.median(took):7.2f} "
              f"{max(took):6.2f}  {max(took) / (2 * xi):.2f}")


def traffic(seeds: int, quick: bool) -> None:
    print("\n3. recolor traffic per broker per ξ, and next to the subscription traffic")
    print(f"{'tree':14} {'xi':>4} {'recolor+ack':>12} {'per b per ξ':>12} {'per b per s':>12} "
          f"{'subs':>8}  share")
    for name, topo in _trees(quick)[:3]:
        for xi in (0.8, 1.6, 3.2):
            net, _, _ = _net(topo, xi, 0)
            duration = 20 * xi
            net.run(duration)
            recolor = net.engine.sent[Recolor] + net.engine.sent[RecolorAck]
            subs = net.engine.sent[Sub]
            per = recolor / len(topo.brokers) / (duration / xi)
            print(f"{name:14} {xi:4.1f} {recolor:12d} {per:12.2f} {per / xi:12.2f} {subs:8d}  "
                  f"{recolor / (recolor + subs):.2f}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--seeds", type=int, default=None)
    args = parser.parse_args()
    seeds = args.seeds or (3 if args.quick else 8)
    stabilization(seeds, args.quick)
    activation(seeds, args.quick)
    traffic(seeds, args.quick)


if __name__ == "__main__":
    main()
