"""Root-only harnesses that live beside bench/, outside the package (run from the repo root: python -m tools.X)."""
