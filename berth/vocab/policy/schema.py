"""The PlacementPolicy as users write it: pydantic models of `spec.selector` and `spec.policy`.

The policy tree is Drove's: `type` plus that type's fields, COMPOSITE nesting policies. Unknown fields
are refused. `policy_errors` and `selector_errors` turn pydantic's errors into one line per problem,
each naming its field path (`spec.policy.policies[1].max: must be between 1 and 64`).
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, TypeAdapter, ValidationError, field_validator
from pydantic_core import ErrorDetails

from berth.cluster.topology import MAX_KEY, key_problem

ANY = "ANY"
ONE_PER_HOST = "ONE_PER_HOST"
MAX_N_PER_HOST = "MAX_N_PER_HOST"
MATCH_TAG = "MATCH_TAG"
NO_TAG = "NO_TAG"
COMPOSITE = "COMPOSITE"
RULE_BASED = "RULE_BASED"
TYPES = (ANY, ONE_PER_HOST, MAX_N_PER_HOST, MATCH_TAG, NO_TAG, COMPOSITE, RULE_BASED)

MAX_PER_HOST_LIMIT = 64
MAX_TAG_LENGTH = 253
# A policy tree is small: these bound what one object can cost the scheduler per node.
MAX_DEPTH = 8
MAX_POLICIES = 128
MAX_CHILDREN = 32
# Label selector sizes (the CRD carries the same bounds, which keep its validation rules cheap).
MAX_MATCH_LABELS = 64
MAX_EXPRESSIONS = 32
MAX_VALUES = 64
# The CEL rule's own limits are checked by berth.vocab.policy.cel; this bounds the raw text.
MAX_RULE_CHARS = 4096

API_VERSION = "berth.dev/v1alpha1"
KIND = "PlacementPolicy"


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True, strict=True)


class AnyPolicy(_Strict):
    """Any node without tags besides its hostname."""

    type: Literal["ANY"]


def _topology_key(value: str | None) -> str | None:
    if value is not None and (problem := key_problem(value)):
        raise ValueError(problem)
    return value


class OnePerHostPolicy(_Strict):
    """At most one pod of the same namespace, app name and version per node (per domain of
    `topologyKey`, a node label, when given)."""

    type: Literal["ONE_PER_HOST"]
    topologyKey: str | None = Field(default=None, max_length=MAX_KEY)

    _key = field_validator("topologyKey")(_topology_key)


class MaxNPerHostPolicy(_Strict):
    """At most `max` pods of the same namespace, app name and version per node (per domain of
    `topologyKey`, a node label, when given)."""

    type: Literal["MAX_N_PER_HOST"]
    max: int = Field(ge=1, le=MAX_PER_HOST_LIMIT)
    topologyKey: str | None = Field(default=None, max_length=MAX_KEY)

    _key = field_validator("topologyKey")(_topology_key)


class MatchTagPolicy(_Strict):
    """Only nodes carrying `tag` (the hostname counts)."""

    type: Literal["MATCH_TAG"]
    tag: str = Field(min_length=1, max_length=MAX_TAG_LENGTH)


class NoTagPolicy(_Strict):
    """Only nodes without tags besides their hostname."""

    type: Literal["NO_TAG"]


class CompositePolicy(_Strict):
    """`policies` combined with AND (every one) or OR (at least one); AND when absent or null."""

    type: Literal["COMPOSITE"]
    policies: list[Policy] = Field(min_length=1, max_length=MAX_CHILDREN)
    combiner: Literal["AND", "OR"] | None = None


class RuleBasedPolicy(_Strict):
    """A CEL expression over the candidate node, the pod and the session; true keeps the node."""

    type: Literal["RULE_BASED"]
    rule: str = Field(min_length=1, max_length=MAX_RULE_CHARS)


Policy = Annotated[
    AnyPolicy
    | OnePerHostPolicy
    | MaxNPerHostPolicy
    | MatchTagPolicy
    | NoTagPolicy
    | CompositePolicy
    | RuleBasedPolicy,
    Field(discriminator="type"),
]
CompositePolicy.model_rebuild()


SET_OPERATORS = ("In", "NotIn")
EXISTENCE_OPERATORS = ("Exists", "DoesNotExist")


class Requirement(_Strict):
    """One matchExpressions entry of a label selector."""

    key: str = Field(min_length=1, max_length=317)
    operator: Literal["In", "NotIn", "Exists", "DoesNotExist"]
    values: list[str] | None = Field(default=None, max_length=MAX_VALUES, validate_default=True)

    @field_validator("values")
    @classmethod
    def _values_fit_operator(cls, values: list[str] | None, info: Any) -> list[str] | None:
        operator = info.data.get("operator")
        if operator in SET_OPERATORS and not values:
            raise ValueError(f"must list at least one value for operator {operator}")
        if operator in EXISTENCE_OPERATORS and values:
            raise ValueError(f"must be empty for operator {operator}")
        return values


class LabelSelector(_Strict):
    """A standard Kubernetes label selector: every matchLabels pair and every expression holds."""

    matchLabels: dict[str, str] | None = Field(default=None, max_length=MAX_MATCH_LABELS)
    matchExpressions: list[Requirement] | None = Field(default=None, max_length=MAX_EXPRESSIONS)


_POLICY: TypeAdapter[Policy] = TypeAdapter(Policy)
_SELECTOR: TypeAdapter[LabelSelector] = TypeAdapter(LabelSelector)

_MESSAGES = {
    "missing": "is required",
    "string_type": "must be a string",
    "int_type": "must be an integer",
    "list_type": "must be a list",
    "dict_type": "must be an object",
    "model_type": "must be an object",
    "model_attributes_type": "must be an object",
    "bool_type": "must be a boolean",
}

# The fields each type takes besides `type`, for the "unknown field" message.
FIELDS = {
    ANY: (),
    ONE_PER_HOST: ("topologyKey",),
    MAX_N_PER_HOST: ("max", "topologyKey"),
    MATCH_TAG: ("tag",),
    NO_TAG: (),
    COMPOSITE: ("policies", "combiner"),
    RULE_BASED: ("rule",),
}


def _unknown(tag: str | None) -> str:
    if tag is None:
        return "is not a known field"
    fields = FIELDS[tag]
    takes = f"it takes {', '.join(fields)}" if fields else "it takes no fields besides type"
    return f"is not a field of {tag} ({takes})"


def _message(error: ErrorDetails, field: str, tag: str | None) -> tuple[str, str]:
    """(field path, message) for one pydantic error."""
    kind = error["type"]
    ctx = error.get("ctx") or {}
    if kind == "union_tag_invalid":
        found = ctx.get("tag")
        hint = (
            " (LOCAL is for Drove's local services: it has no meaning for pods)" if found == "LOCAL" else ""
        )
        return f"{field}.type", f"must be one of {', '.join(TYPES)}, found {found!r}{hint}"
    if kind == "union_tag_not_found":
        return f"{field}.type", f"is required (one of {', '.join(TYPES)})"
    if kind == "extra_forbidden":
        return field, _unknown(tag)
    if kind in ("greater_than_equal", "less_than_equal") and field.endswith(".max"):
        return field, f"must be between 1 and {MAX_PER_HOST_LIMIT}"
    if kind == "string_too_short":
        return field, "must be a non-empty string"
    if kind == "string_too_long":
        return field, f"must be at most {ctx.get('max_length')} characters"
    if kind == "too_short":
        return field, "must list at least one item"
    if kind == "too_long":
        return field, f"must hold at most {ctx.get('max_length')} items"
    if kind == "literal_error":
        return field, f"must be {ctx.get('expected')}"
    if kind == "value_error":
        return field, str(ctx.get("error", error["msg"]))
    if kind in _MESSAGES:
        return field, _MESSAGES[kind]
    return field, error["msg"][:1].lower() + error["msg"][1:]


def _path(prefix: str, loc: tuple[Any, ...], *, tagged: bool) -> tuple[str, str | None]:
    """pydantic's location as a field path, without the union tags it inserts (`MAX_N_PER_HOST`),
    and the last such tag (the type of the policy the field belongs to)."""
    out = prefix
    expect_tag = tagged
    tag = None
    for part in loc:
        if expect_tag and part in TYPES:
            expect_tag = False
            tag = part
            continue
        if isinstance(part, int):
            out += f"[{part}]"
            expect_tag = tagged
            continue
        out += f".{part}" if out else str(part)
        expect_tag = False
    return out, tag


def _translate(exc: ValidationError, prefix: str, *, tagged: bool) -> list[str]:
    problems = []
    for error in exc.errors():
        path, tag = _path(prefix, error["loc"], tagged=tagged)
        field, message = _message(error, path, tag)
        problems.append(f"{field}: {message}")
    return list(dict.fromkeys(problems))


def _shape_problem(value: Any, prefix: str) -> str | None:
    """Depth and size of the tree, checked before pydantic recurses into it."""
    stack = [(value, 1)]
    seen = 0
    while stack:
        item, depth = stack.pop()
        if not isinstance(item, dict):
            continue
        seen += 1
        if depth > MAX_DEPTH:
            return f"{prefix}: COMPOSITE policies nest deeper than {MAX_DEPTH} levels"
        if seen > MAX_POLICIES:
            return f"{prefix}: the tree holds more than {MAX_POLICIES} policies"
        children = item.get("policies")
        if isinstance(children, list):
            stack.extend((child, depth + 1) for child in children)
    return None


def shape_ok(value: Any) -> bool:
    """The tree is within the depth and size limits (safe to walk recursively)."""
    return _shape_problem(value, "") is None


def parse_policy(value: Any, prefix: str = "spec.policy") -> tuple[Policy | None, list[str]]:
    """The validated policy tree, or None and every problem with its field path."""
    if value is None:
        return None, [f"{prefix}: is required"]
    shape = _shape_problem(value, prefix)
    if shape:
        return None, [shape]
    try:
        return _POLICY.validate_python(value), []
    except ValidationError as exc:
        return None, _translate(exc, prefix, tagged=True)


def parse_selector(value: Any, prefix: str = "spec.selector") -> tuple[LabelSelector | None, list[str]]:
    """The validated label selector (None when absent), and every problem with its field path."""
    if value is None:
        return None, []
    try:
        return _SELECTOR.validate_python(value), []
    except ValidationError as exc:
        return None, _translate(exc, prefix, tagged=False)
