"""`weeble image build|push|save`: the broker image (also the in-cluster orchestrator's), built
offline, tagged by content and optionally by a release name, and handed to a cluster."""

from __future__ import annotations

import argparse
import sys
from typing import Any


def register(subparsers: Any) -> None:
    p: argparse.ArgumentParser = subparsers.add_parser(
        "image",
        help="build the broker image, push it to a registry or save it for kind/k3d/containerd",
        description="The broker image (Debian rootfs, built offline; it runs the brokers and the"
                    " in-cluster orchestrator). Its tag names its content"
                    " (weeble-broker:<hash>); --release also tags it weeble-broker:NAME, the"
                    " name the k8s/ overlays deploy (their `images:`).",
    )
    sub = p.add_subparsers(dest="action", required=True, metavar="ACTION")
    build = sub.add_parser("build", help="build the image if missing; print its tags")
    push = sub.add_parser("push", help="build if need be, push to a registry")
    push.add_argument("--registry", required=True, metavar="R",
                      help="host[:port][/path], e.g. localhost:5000 or ghcr.io/me")
    save = sub.add_parser("save", help="build if need be, write an image archive (kind load"
                                       " image-archive, k3d image import, ctr images import)")
    save.add_argument("file", help="the archive to write (a tar)")
    for q in (build, push, save):
        q.add_argument("--release", metavar="NAME",
                       help="also tag the image weeble-broker:NAME (the overlays deploy"
                            " weeble-broker:<weeble's version>)")
    p.set_defaults(handler=run)


def run(args: argparse.Namespace) -> int:
    from weeble.orchestrator.backends import image

    def say(message: str) -> None:
        print(message, file=sys.stderr)

    if args.action == "build":
        for tag in image.build(args.release, say):
            print(tag)
    elif args.action == "push":
        for ref in image.push(args.registry, args.release, say):
            print(f"pushed {ref}")
    else:
        tag = image.save(args.file, args.release, say)
        print(f"{args.file}: {tag}")
    return 0
