"""`--junit FILE`: a run's verdict as JUnit XML, for CI systems (Jenkins, GitLab, GitHub
annotations) to show beside their tests.

One test suite per run (`weeble.<scenario>`), one test case per part the verdict judges:

- per run-level rule: `run` cases, the fault-free part ("before the first fault", or "the
  whole run"), and the timing model (R13: its violations outside faults, as output);
- per fault episode: `episode` cases, named "episode N (f1, f2)", with the episode's faults,
  whether each took effect, and both stabilization levels beside the bound as properties;
- per reconfiguration: `reconfiguration` cases, "r1 (exchange b1-b5 for b5-b7)".

The statuses are weeble.check.status's. A part that failed is a `<failure>` whose message is
the verdict's reason; a part with another status that is not a pass ("assumptions violated":
the run broke the timing model its bound assumes; "not judged": a fault never ended; "no checks
observed": no state-level check) is an `<error>` of that type, with the reason. The same
writer serves `weeble run`, `check`, `analyze` and `simulate`: each hands over the verdict of
weeble.check.verdict.judge, its fault rows and the reconfigurations (R15 rows).
"""

from __future__ import annotations

import xml.etree.ElementTree as ET
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from weeble.check.status import Status


def write_junit(path: str | Path, *, suite: str, verdict: Mapping[str, Any],
                faults: Sequence[Mapping[str, Any]],
                reconfigurations: Sequence[Mapping[str, Any]] = (),
                timing: Mapping[str, Any] | None = None,
                not_effective: Mapping[str, str] | None = None,
                properties: Mapping[str, Any] | None = None) -> Path:
    """Write the XML to `path`. `not_effective`: fault id -> why it did not take effect (the
    chaos runner's evidence, `weeble run`): its episode fails with that reason too."""
    root = junit_tree(suite=suite, verdict=verdict, faults=faults,
                      reconfigurations=reconfigurations, timing=timing,
                      not_effective=not_effective, properties=properties)
    ET.indent(root)
    out = Path(path)
    out.write_bytes(ET.tostring(root, encoding="utf-8", xml_declaration=True) + b"\n")
    return out


def junit_tree(*, suite: str, verdict: Mapping[str, Any], faults: Sequence[Mapping[str, Any]],
               reconfigurations: Sequence[Mapping[str, Any]] = (),
               timing: Mapping[str, Any] | None = None,
               not_effective: Mapping[str, str] | None = None,
               properties: Mapping[str, Any] | None = None) -> ET.Element:
    name = f"weeble.{suite}"
    cases: list[ET.Element] = []
    parts = list(verdict.get("parts") or [])
    by_episode: dict[int, list[Mapping[str, Any]]] = {}
    for f in faults:
        by_episode.setdefault(int(f["episode"]), []).append(f)
    failed_reconfigurations = {}
    for part in parts:
        if part.get("episode") is not None:
            continue
        if str(part["part"]).startswith("reconfiguration "):
            failed_reconfigurations[str(part["part"]).split()[1]] = part
            continue
        cases.append(_case(f"{name}.run", str(part["part"]), part["status"], part["reason"]))
    cases.append(_timing_case(f"{name}.run", timing))
    for part in parts:
        index = part.get("episode")
        if index is None:
            continue
        fs = by_episode.get(int(index), [])
        reasons = [part["reason"]] if part["status"] != Status.PASS else []
        status = part["status"]
        for f in fs:
            why = (not_effective or {}).get(str(f["fault_id"]))
            if why is not None:
                reasons.append(f"{f['fault_id']} did not take effect: {why}")
                status = Status.FAIL
        first = fs[0] if fs else {}
        props = {key: first[key] for key in (
            "service_time", "service_status", "state_time", "state_status", "bound", "lost",
            "duplicated", "reordered") if first.get(key) is not None}
        for f in fs:
            took = f.get("took_effect")
            props[f"fault {f['fault_id']}"] = (
                f"{f.get('type') or '?'} on {f.get('target')}, took effect: "
                f"{'unknown' if took is None else ('yes' if took else 'no')}")
        case = _case(f"{name}.episode", str(part["part"]), status, "; ".join(reasons), props)
        cases.append(case)
    for r in reconfigurations:
        part = failed_reconfigurations.get(str(r["rid"]))
        status = part["status"] if part is not None else (
            Status.FAIL if r.get("verdict") == Status.FAIL else Status.PASS)
        reason = part["reason"] if part is not None else str(r.get("reason") or "")
        cases.append(_case(f"{name}.reconfiguration", f"{r['rid']} ({r['op']})", status,
                           reason))

    failures = sum(1 for c in cases if c.find("failure") is not None)
    errors = sum(1 for c in cases if c.find("error") is not None)
    root = ET.Element("testsuites", name="weeble", tests=str(len(cases)),
                      failures=str(failures), errors=str(errors))
    element = ET.SubElement(root, "testsuite", name=name, tests=str(len(cases)),
                            failures=str(failures), errors=str(errors), skipped="0")
    props = ET.SubElement(element, "properties")
    for key, value in {"status": verdict.get("status"), "bound": verdict.get("bound"),
                       **(properties or {})}.items():
        ET.SubElement(props, "property", name=str(key), value=str(value))
    element.extend(cases)
    return root


def _case(classname: str, name: str, status: str, reason: str,
          properties: Mapping[str, Any] | None = None) -> ET.Element:
    case = ET.Element("testcase", classname=classname, name=name)
    if properties:  # first, as pytest writes them
        props = ET.SubElement(case, "properties")
        for key, value in properties.items():
            ET.SubElement(props, "property", name=key, value=str(value))
    if status == Status.FAIL:
        ET.SubElement(case, "failure", message=reason or "failed", type="fail").text = reason
    elif status != Status.PASS:  # not a pass, not a rule broken: could not be judged fully
        ET.SubElement(case, "error", message=reason or str(status),
                      type=str(status)).text = reason
    return case


def _timing_case(classname: str, timing: Mapping[str, Any] | None) -> ET.Element:
    """R13 as a case of its own: its violations decide no status here (the parts they overlap
    are judged "assumptions violated"); the case lists them."""
    case = ET.Element("testcase", classname=classname, name="timing model (R13)")
    count = int((timing or {}).get("violations") or 0)
    by_kind = (timing or {}).get("by_kind") or {}
    lines = [f"{k}: {v.get('violations', v) if isinstance(v, Mapping) else v}"
             for k, v in by_kind.items()]
    ET.SubElement(case, "system-out").text = (
        f"{count} violations of the timing model outside faults"
        + (": " + ", ".join(lines) if lines else ""))
    return case
