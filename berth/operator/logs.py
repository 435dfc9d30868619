"""The operator's log: a user's manifest refused at admission is the webhook working, not a failure.

kopf logs every AdmissionError a validating handler raises as `ERROR ... Webhook 'id' failed
permanently: ...`, which trips log-based alerting each time someone applies a bad manifest. berth logs
those at INFO instead, naming the object and the rule that refused it; real handler failures stay
errors.
"""

from __future__ import annotations

import logging
import re

# kopf's text for a webhook handler that raised a PermanentError (AdmissionError is one).
_REFUSED = re.compile(r"^Webhook '(?P<id>[^']+)' failed permanently: (?P<why>.*)$", re.DOTALL)


class AdmissionRefusals(logging.Filter):
    """Demotes kopf's record of an admission refusal to INFO, with the object and the rule."""

    def filter(self, record: logging.LogRecord) -> bool:
        if record.levelno != logging.ERROR:
            return True
        found = _REFUSED.match(record.getMessage())
        if found is None:
            return True
        ref = getattr(record, "k8s_ref", None) or {}
        kind = ref.get("kind") or "object"
        name = "/".join(p for p in (ref.get("namespace"), ref.get("name")) if p) or "(unnamed)"
        record.levelno, record.levelname = logging.INFO, logging.getLevelName(logging.INFO)
        record.msg = f"refused {kind} {name} at admission (webhook {found['id']}): {found['why']}"
        record.args = None
        return True


def quiet_refusals() -> None:
    """Install the filter on kopf's per-object logger (where its handler outcomes are logged)."""
    logging.getLogger("kopf.objects").addFilter(AdmissionRefusals())
