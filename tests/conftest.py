"""Spark's Python workers import this checkout, not another installed copy of the package.

Workers are separate processes started from the current directory, which the docs tests
change; without this they import whatever ``topology`` the interpreter finds installed.
"""

from __future__ import annotations

import os
from pathlib import Path

ROOT = str(Path(__file__).resolve().parent.parent)
os.environ["PYTHONPATH"] = os.pathsep.join(
    [ROOT, *[p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p and p != ROOT]])

import hypothesis_profiles  # noqa: E402,F401 - registers and loads the profile before any test
