"""`berth.dev/tags`: the tags a pod carries, as the cluster model reads them for every pod (the tag
rules that look at them are berth.vocab.tag_affinity)."""

from __future__ import annotations

from functools import lru_cache

from berth import annotations as ann
from berth.json_annotation import AnnotationProblem, load_json, show


def parse_tags(raw: str) -> frozenset[str]:
    """The tags of `berth.dev/tags`, or AnnotationProblem."""
    value = load_json(raw, expect=list, shape="a JSON list of tags")
    if len(value) > ann.MAX_TAGS:
        raise AnnotationProblem(f"at most {ann.MAX_TAGS} tags are allowed, found {len(value)}")
    for tag in value:
        if not isinstance(tag, str) or not tag:
            raise AnnotationProblem(f"tags should be non-empty strings, found {show(tag)}")
        if len(tag) > ann.MAX_TAG_LENGTH:
            raise AnnotationProblem(f"a tag is longer than {ann.MAX_TAG_LENGTH} characters")
    return frozenset(value)


@lru_cache(maxsize=8192)  # neighbours repeat a few tag lists: one frozenset each
def read_neighbour_tags(raw: str | None) -> frozenset[str]:
    """A placed pod's tags, read leniently: a malformed annotation on a neighbour is no tags (its own
    admission refuses it; another pod's decision must not fail for it)."""
    if not raw:
        return frozenset()
    try:
        return parse_tags(raw)
    except AnnotationProblem:
        return frozenset()
