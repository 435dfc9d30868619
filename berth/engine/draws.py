"""A decision's random draws as an array: `n` calls of `rng.random()` in one go.

random.Random and numpy's MT19937 are the same Mersenne Twister and make a double from two 32-bit
outputs the same way, so the state is handed to numpy, the draws are made there, and the state is
handed back: the values, and every draw after them, are those of the Python loop.

The state is written and read in place, through the bit generator's documented ctypes interface
(`MT19937.ctypes.state_address`, numpy's struct of 624 words and a position): numpy's own
`set_state`/`get_state` cost about 130 us for the pair, more than the hand-over in place. Each thread's
generator is checked once against the Python loop before it is used; if numpy ever laid its state
out otherwise, the draws would be made by the loop, as below ARRAY_FROM.

A decision's own generator (`Seeded`) goes further: random.Random(seed) seeds itself from the
seed's 32-bit words by init_by_array, as numpy's legacy seeding does, so a decision whose first use
of its random numbers is a batch (the random scorer) has numpy seed the twister from the seed and
hands no state over at all; a random.Random in the state those draws left is made only if something
asks for one afterwards (a tie to break).
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
        self.legacy = np.random.RandomState(self.bits)  # seeds the same bits as random.Random does
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

    def seeded_draws(self, seeded: Seeded, n: int) -> np.ndarray:
        """`n` draws of a Seeded that has not made its random.Random: from the seed, or on from where
        its last batch left the state."""
        if seeded._key is None:
            self.legacy.seed(_words(seeded.seed))
        else:
            self.key[:] = seeded._key
            self.state.pos = seeded._pos
        values = self.generator.random(n)
        seeded._key, seeded._pos = self.key.copy(), self.state.pos
        return values

    def _matches_the_loop(self) -> bool:
        loop, batch = random.Random(20_240_601), random.Random(20_240_601)
        loop.random()
        batch.random()
        expected = [loop.random() for _ in range(700)]  # past one regeneration of the state
        try:
            drawn = self.draws(batch, 700).tolist()
            if drawn != expected or batch.getstate() != loop.getstate():
                return False
            seed = 2**40 + 20_240_601  # two words
            loop, seeded = random.Random(seed), Seeded(seed)
            expected = [loop.random() for _ in range(1400)]
            drawn = self.seeded_draws(seeded, 700).tolist() + self.seeded_draws(seeded, 700).tolist()
            return drawn == expected and seeded.rng.getstate() == loop.getstate()
        except (ValueError, TypeError, OverflowError):
            return False


def _words(seed: int) -> list[int]:
    """The 32-bit words random.Random seeds itself from for an int seed, lowest first."""
    n, words = abs(seed), []
    while True:
        words.append(n & 0xFFFFFFFF)
        n >>= 32
        if not n:
            return words


class Seeded:
    """A decision's random numbers: exactly those of random.Random(seed), drawn in batches by numpy
    straight from the seed while nothing has asked for the random.Random itself."""

    __slots__ = ("_key", "_pos", "_rng", "seed")

    def __init__(self, seed: int) -> None:
        self.seed = seed
        self._rng: random.Random | None = None
        self._key: np.ndarray | None = None  # the twister's state after the batches drawn so far
        self._pos = 0

    @property
    def rng(self) -> random.Random:
        """The generator, in the state the draws so far left it (made when first asked for)."""
        if self._rng is None:
            if self._key is None:
                self._rng = random.Random(self.seed)
            else:
                self._rng = random.Random()
                self._rng.setstate((random.Random.VERSION, (*self._key.tolist(), self._pos), None))
        return self._rng

    def random(self, n: int) -> np.ndarray:
        """[rng.random() for _ in range(n)] as a float64 array, leaving the generator as that loop
        would."""
        if self._rng is None and n >= ARRAY_FROM and type(self.seed) is int:
            twister = _twister()
            if twister.works:
                return twister.seeded_draws(self, n)
        return random_draws(self.rng, n)


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
