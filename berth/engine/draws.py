"""A decision's random draws as an array: `n` calls of `rng.random()` in one go.

random.Random and numpy's MT19937 are the same Mersenne Twister and make a double from two 32-bit
outputs the same way, so the state is handed to numpy, the draws are made there, and the state is
handed back: the values, and every draw after them, are those of the Python loop.

The state is written and read in place, through the bit generator's documented ctypes interface
(`MT19937.ctypes.state_address`, numpy's struct of 624 words and a position): numpy's own
`set_state`/`get_state` cost about 130 us for the pair, more than the hand-over in place. Each thread's
generator is checked once against the Python loop before it is used; if numpy ever laid its state
out otherwise, the draws would be made by the loop, as below ARRAY_FROM.
"""

from __future__ import annotations

import ctypes
import random
import threading
from itertools import repeat, starmap

import numpy as np

# Below this many draws calling rng.random from C (starmap) costs less than handing the state over
# twice (measured: the hand-over both ways about 110 us; a draw about 0.08 us through starmap, 0.01 in
# numpy).
ARRAY_FROM = 1500
_WORDS = 624  # the Mersenne Twister's state: 624 32-bit words, and the position in them
_local = threading.local()  # one numpy generator per thread, its state overwritten for every use


class _State(ctypes.Structure):
    _fields_ = [("key", ctypes.c_uint32 * _WORDS), ("pos", ctypes.c_int)]


class _Twister:
    """A numpy MT19937 whose state is read and written in place."""

    def __init__(self) -> None:
        self.bits = np.random.MT19937(0)
        self.generator = np.random.Generator(self.bits)
        self.state = _State.from_address(self.bits.ctypes.state_address)
        self.key = np.ctypeslib.as_array(self.state.key)
        self.works = self._matches_the_loop()

    def draws(self, rng: random.Random, n: int) -> np.ndarray:
        version, internal, gauss = rng.getstate()
        self.key[:] = internal[:-1]
        self.state.pos = internal[-1]
        values = self.generator.random(n)
        rng.setstate((version, (*self.key.tolist(), self.state.pos), gauss))
        return values

    def _matches_the_loop(self) -> bool:
        loop, batch = random.Random(20_240_601), random.Random(20_240_601)
        loop.random()
        batch.random()
        expected = [loop.random() for _ in range(700)]  # past one regeneration of the state
        try:
            drawn = self.draws(batch, 700).tolist()
        except (ValueError, TypeError, OverflowError):
            return False
        return drawn == expected and batch.getstate() == loop.getstate()


def _twister() -> _Twister:
    twister = getattr(_local, "twister", None)
    if twister is None:
        twister = _local.twister = _Twister()
    return twister


def random_draws(rng: random.Random, n: int) -> np.ndarray:
    """[rng.random() for _ in range(n)] as a float64 array, leaving `rng` as that loop would."""
    if n >= ARRAY_FROM and type(rng) is random.Random:
        twister = _twister()
        if twister.works:
            return twister.draws(rng, n)
    return np.fromiter(starmap(rng.random, repeat((), n)), np.float64, n)
