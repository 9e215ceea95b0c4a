"""The gateway's one error tree.

Every failure a client can see is a `GatewayError` carrying the HTTP status and the
fields of an OpenAI error body. Foreign exceptions (litellm, redis) are translated
into these where they enter, in the adapters; the HTTP edge turns them into
responses in one place.
"""

from __future__ import annotations

from collections.abc import Mapping

__all__ = [
    "GatewayError",
    "InvalidRequest",
    "ModelNotFound",
    "NotFound",
    "PayloadTooLarge",
    "ContextLengthExceeded",
    "UpstreamError",
    "UpstreamAuthError",
    "UpstreamPermissionDenied",
    "UpstreamRateLimited",
    "UpstreamTimeout",
    "UpstreamServerError",
    "UpstreamUnavailable",
    "UpstreamBadRequest",
    "StoreUnavailable",
    "Unauthorized",
    "Forbidden",
    "RateLimited",
    "ConfigError",
]


class GatewayError(Exception):
    """A failure with an OpenAI-shaped description."""

    status: int = 500
    type: str = "server_error"
    code: str | None = None

    def __init__(
        self,
        message: str,
        *,
        param: str | None = None,
        code: str | None = None,
        headers: Mapping[str, str] | None = None,
    ) -> None:
        super().__init__(message)
        self.message = message
        self.param = param
        if code is not None:
            self.code = code
        self.headers: dict[str, str] = dict(headers or {})

    def body(self) -> dict[str, dict[str, str | None]]:
        return {
            "error": {
                "message": self.message,
                "type": self.type,
                "param": self.param,
                "code": self.code,
            }
        }


class InvalidRequest(GatewayError):
    status = 400
    type = "invalid_request_error"


class ModelNotFound(GatewayError):
    status = 404
    type = "invalid_request_error"
    code = "model_not_found"


class NotFound(GatewayError):
    status = 404
    type = "invalid_request_error"
    code = "not_found"


class PayloadTooLarge(GatewayError):
    status = 413
    type = "invalid_request_error"
    code = "request_too_large"


class ContextLengthExceeded(GatewayError):
    status = 400
    type = "invalid_request_error"
    code = "context_length_exceeded"


class UpstreamError(GatewayError):
    """The upstream model failed in a way that is not the client's fault."""

    status = 502
    type = "upstream_error"
    code = "upstream_error"


class UpstreamAuthError(UpstreamError):
    status = 401
    type = "authentication_error"
    code = "invalid_api_key"


class UpstreamPermissionDenied(UpstreamError):
    status = 403
    type = "permission_error"
    code = "permission_denied"


class UpstreamRateLimited(UpstreamError):
    status = 429
    type = "rate_limit_error"
    code = "rate_limit_exceeded"


class UpstreamTimeout(UpstreamError):
    status = 504
    type = "timeout_error"
    code = "upstream_timeout"


class UpstreamUnavailable(UpstreamError):
    status = 502
    type = "upstream_error"
    code = "upstream_unavailable"


class UpstreamServerError(UpstreamUnavailable):
    """The upstream answered with a server error (HTTP 5xx) for this request, as a server does that cannot parse
    the tool call its model wrote; the same for the client as any unavailable upstream."""


class UpstreamBadRequest(UpstreamError):
    """The upstream rejected the request as malformed (a parameter it does not take)."""

    status = 400
    type = "invalid_request_error"
    code = "upstream_bad_request"


class StoreUnavailable(GatewayError):
    status = 503
    type = "server_error"
    code = "store_unavailable"


class Unauthorized(GatewayError):
    """No key, or a key the gateway does not know (OpenAI's shape for a bad key)."""

    status = 401
    type = "invalid_request_error"
    code = "invalid_api_key"


class Forbidden(GatewayError):
    """A known key asking for what it may not have (a model outside its list, another tenant's metrics)."""

    status = 403
    type = "permission_error"
    code = "permission_denied"


class RateLimited(GatewayError):
    """A key over its own requests-per-minute limit (not the upstream's)."""

    status = 429
    type = "rate_limit_error"
    code = "rate_limit_exceeded"


class ConfigError(Exception):
    """The configuration file is unusable; the message names the offending key."""
