"""Kubernetes resource quantities ("500m", "2Gi", "1e3") as exact integers."""

from __future__ import annotations

import math
import re
from decimal import Decimal, InvalidOperation
from functools import lru_cache

_BINARY = {"Ki": 2**10, "Mi": 2**20, "Gi": 2**30, "Ti": 2**40, "Pi": 2**50, "Ei": 2**60}
_DECIMAL = {
    "n": Decimal("1e-9"),
    "u": Decimal("1e-6"),
    "m": Decimal("1e-3"),
    "": Decimal(1),
    "k": Decimal("1e3"),
    "M": Decimal("1e6"),
    "G": Decimal("1e9"),
    "T": Decimal("1e12"),
    "P": Decimal("1e15"),
    "E": Decimal("1e18"),
}
_QUANTITY = re.compile(r"^([+-]?(?:\d+\.?\d*|\.\d+))(Ki|Mi|Gi|Ti|Pi|Ei|[eE][+-]?\d+|[numkMGTPE]?)$")


def parse_quantity(value: str | int | float) -> Decimal:
    """The exact value of a Kubernetes quantity; ValueError names the bad text."""
    if isinstance(value, bool):
        raise ValueError(f"not a quantity: {value!r}")
    if isinstance(value, int | float):
        return Decimal(str(value))
    match = _QUANTITY.match(str(value).strip())
    if not match:
        raise ValueError(f"not a quantity: {value!r}")
    number, suffix = match.groups()
    try:
        base = Decimal(number)
    except InvalidOperation as exc:  # pragma: no cover - the regex admits only numbers
        raise ValueError(f"not a quantity: {value!r}") from exc
    if suffix in _BINARY:
        return base * _BINARY[suffix]
    if suffix[:1] in ("e", "E"):
        return base * (Decimal(10) ** int(suffix[1:]))
    return base * _DECIMAL[suffix]


@lru_cache(maxsize=4096, typed=True)  # a cluster repeats a few quantities ("250m", "1Gi") many times
def resource_units(name: str, value: str | int | float) -> int:
    """A quantity in berth's integer unit for the resource: millicores for cpu, the plain value
    (bytes, counts) rounded up for everything else, as kube-scheduler counts them."""
    quantity = parse_quantity(value)
    if name == "cpu":
        return math.ceil(quantity * 1000)
    return math.ceil(quantity)


BYTES = ("memory", "ephemeral-storage")


def show_units(name: str, units: int) -> str:
    """berth's integer unit of a resource as kubectl writes a quantity: cpu in millicores ("500m", or
    "2" for whole CPUs), memory and storage in the largest binary unit that divides it ("512Mi")."""
    if name == "cpu":
        return str(units // 1000) if units % 1000 == 0 else f"{units}m"
    if name in BYTES or name.startswith("hugepages-"):
        for suffix, size in reversed(_BINARY.items()):
            if units and units % size == 0:
                return f"{units // size}{suffix}"
    return str(units)
