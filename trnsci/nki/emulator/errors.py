"""The one exception type the emulator raises for NKI rule violations."""


class EmulatorError(ValueError):
    """A kernel broke an NKI rule (shape, buffer, capacity, dtype, tracing).

    Subclasses ``ValueError`` so generic callers that catch bad-argument
    errors also catch it.  Messages follow the wording of the Neuron compiler
    where one exists and always name the operation and the operand.
    """


def fail(op, message):
    """Raise an :class:`EmulatorError` prefixed with the operation name."""
    raise EmulatorError(f"{op}: {message}")


class NkiValidationError(EmulatorError):
    """A kernel broke a documented NKI 0.6 rule (exported as ``nisa.NkiValidationError``).

    The message starts with the instruction or view operation and names the
    operand, e.g. ``nisa.dma_copy: 'src' ...`` or ``indexing 'a_tile': ...``.
    """


def vfail(op, message):
    """Raise an :class:`NkiValidationError` prefixed with the operation name."""
    raise NkiValidationError(f"{op}: {message}")
