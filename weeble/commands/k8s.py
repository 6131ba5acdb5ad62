"""`weeble k8s secrets|render`: what a deployment on Kubernetes needs that is not committed: the
Secret of its tokens (fresh per deployment), and overlays of any size rendered from a
scenario."""

from __future__ import annotations

import argparse
import os
from pathlib import Path
from typing import Any


def register(subparsers: Any) -> None:
    p: argparse.ArgumentParser = subparsers.add_parser(
        "k8s",
        help="Kubernetes: write a deployment's Secret, render an overlay from a scenario",
        description="Kubernetes helpers (docs/guide/kubernetes.md). `secrets` writes the"
                    " Secret broker-tokens with fresh random tokens for one namespace (mode"
                    " 0600; apply it, never commit it). `render` writes a kustomize overlay"
                    " of a scenario's brokers over k8s/base.",
    )
    sub = p.add_subparsers(dest="action", required=True, metavar="ACTION")
    secrets = sub.add_parser("secrets", help="write a Secret of fresh tokens for a namespace")
    secrets.add_argument("--namespace", "-n", required=True,
                         help="the namespace of the deployment (e.g. weeble-small)")
    secrets.add_argument("--out", "-o", required=True, metavar="FILE",
                         help="the manifest to write (refuses to overwrite without --force)")
    secrets.add_argument("--force", action="store_true", help="overwrite FILE")
    render = sub.add_parser("render", help="write a kustomize overlay for a scenario")
    render.add_argument("scenario", help="scenario YAML file")
    render.add_argument("--name", required=True,
                        help="the overlay's name (namespace weeble-NAME, instance NAME)")
    render.add_argument("--out", "-o", required=True, metavar="DIR",
                        help="the overlay folder to write (beside k8s/base: its resources"
                             " name ../../base)")
    render.add_argument("--base", default="../../base", metavar="PATH",
                        help="the base, relative to DIR (default: ../../base)")
    p.set_defaults(handler=run)


def run(args: argparse.Namespace) -> int:
    from weeble.commands import UsageError
    from weeble.orchestrator.backends import kubernetes as k8s

    if args.action == "secrets":
        out = Path(args.out)
        if out.exists() and not args.force:
            raise UsageError(f"{out}: exists (--force to overwrite: the running brokers keep"
                             " the tokens they started with)")
        text = k8s.secret_manifest(args.namespace, k8s.fresh_tokens())
        out.parent.mkdir(parents=True, exist_ok=True)
        fd = os.open(out, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        with os.fdopen(fd, "w") as f:
            f.write(text)
        os.chmod(out, 0o600)
        print(f"{out}: Secret {k8s.TOKENS} for namespace {args.namespace} (fresh tokens;"
              " do not commit it): kubectl apply -f " + str(out))
        return 0
    from weeble.model.scenario import load_scenario

    scenario = load_scenario(args.scenario)
    files = k8s.render_overlay(scenario, args.name, base=args.base)
    folder = Path(args.out)
    folder.mkdir(parents=True, exist_ok=True)
    for name, text in files.items():
        (folder / name).write_text(text)
    print(f"{folder}: overlay {args.name} ({len(files)} files): kubectl apply -k {folder}")
    return 0
