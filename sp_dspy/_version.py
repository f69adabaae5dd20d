"""The package version, below every module (the umbrella ``sp_dspy`` and the CLI read it from here)."""

__version__ = "0.1.0"
