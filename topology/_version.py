"""The version of the ``suppress-topology`` distribution, in one place.

``pyproject.toml`` reads it (``[tool.setuptools.dynamic]``) and ``topology.__version__``
re-exports it; keep it a plain string literal so the build can read it without importing.
"""

__version__ = "0.2.0"
