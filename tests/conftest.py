"""Test-wide settings."""

from hypothesis import settings

# No per-example deadline anywhere: property tests assert behaviour, not speed (speed is the
# benchmarks' job), and CI machines are shared, so a slow example is not a failing one.
settings.register_profile("weeble", deadline=None)
settings.load_profile("weeble")
