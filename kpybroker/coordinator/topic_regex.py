"""Regular-expression subscriptions of consumer groups, in Kafka's syntax and words.

Kafka evaluates a member's ``SubscribedTopicRegex`` on the broker with
RE2/J; kpybroker uses RE2 itself (``google-re2``), so a pattern means the
same on both: full-match semantics, no look-around or back-references.
A pattern RE2 refuses is INVALID_REGULAR_EXPRESSION with Kafka's message,
whose description is RE2/J's (RE2's texts mapped to it).
"""

from __future__ import annotations

import functools
from typing import Any

from kpybroker.protocol.errors import ErrorCode, KafkaError

# RE2's error texts and RE2/J's descriptions of the same errors.
RE2J_DESCRIPTIONS = {
    "missing )": "missing closing )",
    "missing ]": "missing closing ]",
    "unexpected )": "unexpected )",
    "bad repetition operator": "invalid nested repetition operator",
    "no argument for repetition operator": "missing argument to repetition operator",
    "invalid repetition size": "invalid repeat count",
    "invalid named capture group": "invalid named capture",
    "duplicate capture group name": "duplicate capture group name",
    "trailing \\": "trailing backslash at end of expression",
    "invalid escape sequence": "invalid escape sequence",
    "invalid character class": "invalid character class",
    "invalid character class range": "invalid character class range",
    "invalid perl operator": "invalid or unsupported Perl syntax",
    "invalid UTF-8": "invalid UTF-8",
}


@functools.lru_cache(maxsize=1024)
def compile_topic_regex(pattern: str) -> Any:
    """The compiled pattern (``fullmatch`` tells whether a topic name matches it)."""
    import re2  # only groups with regex subscriptions need it

    options = re2.Options()
    options.log_errors = False  # refused patterns are answered, not logged by RE2
    try:
        return re2.compile(pattern, options)
    except re2.error as exc:
        raw = exc.args[0] if exc.args else b""
        text = raw.decode("utf-8", "replace") if isinstance(raw, bytes) else str(raw)
        code = text.split(": ", 1)[0]
        description = RE2J_DESCRIPTIONS.get(code, code)
        raise KafkaError(
            ErrorCode.INVALID_REGULAR_EXPRESSION,
            f"SubscribedTopicRegex `{pattern}` is not a valid regular expression: {description}.",
        ) from None
