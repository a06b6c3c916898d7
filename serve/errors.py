"""Our exceptions, each carrying its HTTP status and OpenAI error type; mapped to JSON in one middleware."""

from __future__ import annotations


class ServeError(Exception):
    status = 400
    type = "invalid_request_error"
    code: str | None = None
    close_connection = False
    """Close the connection after the answer (the rest of the request cannot be read)."""

    def __init__(self, message: str, *, param: str | None = None, code: str | None = None):
        super().__init__(message)
        self.message = message
        self.param = param
        if code is not None:
            self.code = code

    def body(self) -> dict:
        return {"error": {"message": self.message, "type": self.type, "param": self.param, "code": self.code}}

    def headers(self) -> dict[str, str]:
        return {}


class BadRequest(ServeError):
    code = "invalid_request"


class InvalidJSON(ServeError):
    code = "invalid_json"


class UnsafeJSON(InvalidJSON):
    """Well-formed JSON we refuse: nested too deep, a number too long or not finite, a lone surrogate."""


class InvalidToolSchema(ServeError):
    code = "invalid_tool_schema"


class GrammarRefused(ServeError):
    """A forced call's grammar overran its time, memory or byte bound while it was built (and was stopped)."""

    status = 422
    code = "grammar_too_costly"


class ContextTooLong(ServeError):
    code = "context_length_exceeded"


class ModelNotFound(ServeError):
    status = 404
    code = "model_not_found"


class RequestTimeout(ServeError):
    """The body did not arrive within `serve.body_read_timeout_s`; the connection is closed after the answer."""

    status = 408
    code = "request_timeout"
    close_connection = True


class MisdirectedRequest(ServeError):
    """A `Host` this server does not answer to (`serve.allowed_hosts`): what DNS rebinding looks like."""

    status = 421
    code = "host_not_allowed"


class PayloadTooLarge(ServeError):
    status = 413
    code = "payload_too_large"


class UnsupportedMediaType(ServeError):
    status = 415
    code = "unsupported_media_type"


class TooManyRequests(ServeError):
    """Over the admission bound (README "Request limits"): refused at once, before any engine work."""

    status = 429
    type = "rate_limit_error"
    code = "server_busy"

    def __init__(self, message: str, retry_after: int = 1):
        super().__init__(message)
        self.retry_after = retry_after

    def headers(self) -> dict[str, str]:
        return {"Retry-After": str(self.retry_after)}


class Unauthorized(ServeError):
    status = 401
    type = "authentication_error"
    code = "invalid_api_key"


class Forbidden(ServeError):
    status = 403
    type = "permission_error"
    code = "forbidden"


class WeightsRejected(ServeError):
    status = 422
    code = "weights_rejected"


class NotSupported(ServeError):
    status = 501
    type = "server_error"
    code = "not_supported"


class EngineUnavailable(ServeError):
    status = 503
    type = "server_error"
    code = "engine_unavailable"

    def __init__(self, message: str, retry_after: int = 5):
        super().__init__(message)
        self.retry_after = retry_after

    def headers(self) -> dict[str, str]:
        return {"Retry-After": str(self.retry_after)}


class GrammarBuilderBusy(EngineUnavailable):
    """No grammar builder was free for this caller within the bound (its share in use, or all of them busy)."""

    code = "grammar_builder_busy"
