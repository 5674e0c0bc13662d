"""The errors of reading and writing: each message says what is wrong and the fix."""

from __future__ import annotations


class InputError(ValueError):
    """A file or folder that cannot be used, with the reason and the fix."""


class OutputExistsError(InputError):
    """An output file already exists and replacing it was not asked for."""
