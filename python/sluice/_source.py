"""The protocol of sources written in Python."""

from __future__ import annotations

from typing import Any


class Source:
    """Base class for a source written in Python.

    Subclasses set ``shape`` (spatial, numpy order, 1 to 3 axes), ``dtype`` (anything
    ``numpy.dtype`` takes) and optionally ``channels`` (1 to 4), and implement ``read``.
    Any object with these members works as well; deriving from ``Source`` only adds the version
    bookkeeping below.

    ``read(index)`` gets a tuple of slices (one per spatial axis) and returns an array-like of
    exactly that shape (plus a last axis of ``channels`` when there are several). It is called
    from the renderer's thread with the GIL held only around the call.

    ``version()`` grows on every change and ``changes_since(version)`` says what changed
    after ``version``: ``None`` (nothing), ``"all"``, or a list of indices. Call
    ``mark_dirty(index)`` after changing data to have the renderer upload it.
    """

    shape: tuple[int, ...]
    dtype: Any
    channels: int = 1

    def __init__(self) -> None:
        self._version = 0
        self._changes: list[tuple[int, Any]] = []

    def read(self, index: tuple[slice, ...]) -> Any:  # pragma: no cover - abstract
        raise NotImplementedError

    def version(self) -> int:
        return getattr(self, "_version", 0)

    def changes_since(self, version: int) -> Any:
        if version >= self.version():
            return None
        changes = getattr(self, "_changes", [])
        # Versions are consecutive: the log covers every change after `version` when its
        # oldest entry is at most one past it.
        if not changes or changes[0][0] > version + 1:
            return "all"
        regions = [index for v, index in changes if v > version]
        if any(index is None for index in regions):
            return "all"
        return regions

    def mark_dirty(self, index: Any = None) -> int:
        """Reports a change of ``index`` (a tuple of slices), or of everything (``None``)."""
        if not hasattr(self, "_version"):
            Source.__init__(self)
        self._version += 1
        self._changes.append((self._version, index))
        del self._changes[:-256]
        return self._version
