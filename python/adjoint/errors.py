"""The exceptions of the Python binding.

Every failure the library reports (an adjoint_status other than ADJOINT_OK) becomes an
AdjointError carrying the status and the library's own message (adjoint_last_error()). Bad
arguments, whether the binding or the library finds them, raise InvalidArgumentError, which is
also a ValueError so that callers written against ATen (which raises ValueError/RuntimeError)
can catch it the usual way.
"""

# Values of the C enum adjoint_status (include/adjoint/adjoint_c.h).
STATUS_NAMES = {
    0: "ADJOINT_OK",
    1: "ADJOINT_ERROR_INVALID_ARGUMENT",
    2: "ADJOINT_ERROR_INVALID_PROGRAM",
    3: "ADJOINT_ERROR_COMPILE_FAILED",
    4: "ADJOINT_ERROR_CUDA",
    5: "ADJOINT_ERROR_NOT_AVAILABLE",
    6: "ADJOINT_ERROR_INTERNAL",
}
STATUS_INVALID_ARGUMENT = 1


class AdjointError(RuntimeError):
    """A call into libadjoint failed; `status` is the adjoint_status, str() the message."""

    def __init__(self, message, status=None):
        super().__init__(message)
        self.status = status

    @property
    def status_name(self):
        """The adjoint_status enumerator's name, e.g. 'ADJOINT_ERROR_COMPILE_FAILED'."""
        return STATUS_NAMES.get(self.status, "unknown status %r" % (self.status,))


class InvalidArgumentError(AdjointError, ValueError):
    """An argument was wrong (ADJOINT_ERROR_INVALID_ARGUMENT, or found by the binding)."""

    def __init__(self, message, status=STATUS_INVALID_ARGUMENT):
        super().__init__(message, status)


def error_for_status(status, message):
    """The exception to raise for a failed call: InvalidArgumentError for bad arguments."""
    if status == STATUS_INVALID_ARGUMENT:
        return InvalidArgumentError(message, status)
    return AdjointError(message, status)
