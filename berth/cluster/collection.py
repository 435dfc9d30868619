"""Python's cyclic garbage collector held off while a list is read.

Reading a list of 150,000 pods makes a few million long-lived objects (the view's records, label maps,
indexes). CPython starts a full collection each time the objects that survived the young generations
grow by a quarter of the old one, and each full collection walks every tracked object: 51 of them
during one list, 7.7 of the list's 18.5 s of CPU (bench/HISTORY.md, "A start without the collector").
Nothing a list makes is cyclic garbage (a page's decoded objects are freed by their reference counts
once converted), so the collector is held off while any list is read and started again, with one
collection of what accumulated meanwhile, when the last one ends.
"""

from __future__ import annotations

import gc
from collections.abc import Iterator
from contextlib import contextmanager

_held = 0  # lists being read now
_was_enabled = True  # the collector's state before the first of them


@contextmanager
def held_off() -> Iterator[None]:
    """No automatic collection while the block runs (or any other block under held_off does)."""
    global _held, _was_enabled
    if _held == 0:
        _was_enabled = gc.isenabled()
        gc.disable()
    _held += 1
    try:
        yield
    finally:
        _held -= 1
        if _held == 0 and _was_enabled:
            gc.enable()
            gc.collect()


def holding() -> bool:
    """A list is being read: the collector is held off."""
    return _held > 0
