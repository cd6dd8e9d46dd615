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
