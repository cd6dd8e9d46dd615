"""Exceptions the emulator raises for NKI rule violations.

``NkiValidationError`` is the name NKI 0.6 uses (``nki.isa.NkiValidationError``,
"raised when hardware constraints are violated").  The emulator's class also
subclasses ``ValueError`` so that generic callers catching bad-argument errors
catch it.  ``EmulatorError`` is kept as an alias for older imports.
"""


class NkiValidationError(ValueError):
    """A kernel broke an NKI rule (shape, buffer, capacity, dtype, engine, tracing).

    Messages start with the instruction (``nisa.tensor_tensor: ...``) and name
    the operand.
    """


EmulatorError = NkiValidationError


class RemovedAPIError(NkiValidationError, AttributeError):
    """An API the current NKI release removed; the message names the replacement.

    Also an ``AttributeError`` so that ``hasattr(nl, "arange")`` is False.
    """


class NotEmulatedError(NkiValidationError, NotImplementedError):
    """An instruction NKI 0.6 has but the emulator cannot run (yet)."""


def fail(op, message):
    """Raise a :class:`NkiValidationError` prefixed with the instruction name."""
    raise NkiValidationError(f"{op}: {message}")


vfail = fail  # the access-pattern layer's name for the same thing
