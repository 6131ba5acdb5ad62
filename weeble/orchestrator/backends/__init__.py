"""Backends beyond the local one: Mininet hosts, Docker containers, Kubernetes pods.

Each is imported only when a run asks for it (`weeble.orchestrator.backend.backend_class`),
since each needs its own library (Debian's mininet, the docker SDK, the kubernetes client).
"""
