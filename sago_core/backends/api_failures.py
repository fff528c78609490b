"""Typed failures of API calls: what went wrong, whether to retry, and how long to wait.

Every request ends as a validated answer or one of these reasons; a failure is never turned
into an empty answer. Messages carry the reason and HTTP status only, never a raw body (which
could echo a key or a prompt into logs).
"""

from __future__ import annotations

import email.utils
import time
from dataclasses import dataclass
from typing import Any

RETRIABLE = frozenset(
    {
        "rate_limited",
        "server_error",
        "timeout",
        "connection",
        "malformed",
        "error_body",
        "empty",
        "length",
    }
)
# Every other reason is permanent: auth, not_found, bad_request, context_window,
# content_filter, budget.


@dataclass(frozen=True)
class Failure:
    reason: str
    status: int | None = None
    retry_after: float | None = None

    @property
    def retriable(self) -> bool:
        return self.reason in RETRIABLE

    def describe(self) -> str:
        return self.reason if self.status is None else f"{self.reason} (HTTP {self.status})"


def retry_after_seconds(headers: Any) -> float | None:
    """Retry-After as seconds: a number, or an HTTP date (RFC 9110)."""
    if not headers:
        return None
    value = None
    for key in ("retry-after", "Retry-After"):
        try:
            value = headers.get(key)
        except AttributeError:
            return None
        if value:
            break
    if not value:
        return None
    try:
        return max(0.0, float(value))
    except ValueError:
        parsed = email.utils.parsedate_to_datetime(str(value))
        return max(0.0, parsed.timestamp() - time.time()) if parsed else None


# What Python's JSON decoder says about a body it cannot parse (a proxy's HTML page, a body
# cut short anywhere: "Expecting value", "Expecting ':' delimiter", ...), as LiteLLM passes
# it on (often inside an InternalServerError with status 500 for a 200 response).
_JSON_ERRORS = (
    "Expecting value",
    "Expecting ',' delimiter",
    "Expecting ':' delimiter",
    "Expecting property name",
    "Unterminated string",
    "Invalid control character",
    "Invalid \\escape",
    "Extra data",
    "JSONDecodeError",
)


def classify_exception(exc: BaseException) -> Failure:
    """Map a LiteLLM exception onto a typed failure (by class name: no import needed)."""
    names = {cls.__name__ for cls in type(exc).__mro__}
    status = getattr(exc, "status_code", None)
    message = str(exc)
    headers = getattr(exc, "litellm_response_headers", None)
    if headers is None:
        response = getattr(exc, "response", None)
        headers = getattr(response, "headers", None)
    if "RateLimitError" in names:
        return Failure("rate_limited", 429, retry_after_seconds(headers))
    if "Timeout" in names or "APITimeoutError" in names:
        return Failure("timeout", status)
    if "ContextWindowExceededError" in names:
        return Failure("context_window", status)
    if "ContentPolicyViolationError" in names:
        return Failure("content_filter", status)
    if "AuthenticationError" in names or "PermissionDeniedError" in names:
        return Failure("auth", status)
    if "NotFoundError" in names:
        return Failure("not_found", status)
    if any(marker in message for marker in _JSON_ERRORS):
        return Failure("malformed", status)
    if "Connection error" in message or "APIConnectionError" in names:
        return Failure("connection", status)
    if "BadRequestError" in names or "UnprocessableEntityError" in names:
        # A 200 whose body is an error object arrives as a 422 from LiteLLM.
        return Failure("error_body" if status == 422 else "bad_request", status)
    if (isinstance(status, int) and status >= 500) or "ServiceUnavailableError" in names:
        return Failure("server_error", status)
    return Failure("server_error", status)


def validate_response(response: Any, allow_length_cutoff: bool) -> tuple[str, str] | Failure:
    """(content, finish_reason) of a usable answer, or why it is not usable."""
    choices = getattr(response, "choices", None)
    if not choices:
        return Failure("error_body")
    choice = choices[0]
    message = getattr(choice, "message", None)
    content = getattr(message, "content", None)
    finish = getattr(choice, "finish_reason", None) or "stop"
    if finish == "content_filter":
        return Failure("content_filter")
    if not isinstance(content, str) or not content.strip():
        return Failure("empty")
    if finish == "length" and not allow_length_cutoff:
        return Failure("length")
    return content.strip(), finish
