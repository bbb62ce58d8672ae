"""The error a command raises for a mistake in how it was called: printed as one line, exit code 2."""

from __future__ import annotations


class UsageError(Exception):
    """A mistake in how the command was called; printed as one line."""
