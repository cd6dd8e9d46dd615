"""Device residency: :func:`to_xla` / :func:`from_xla` (no-ops off Neuron)."""

from __future__ import annotations

from trnsci import nki as _nki
from trnsci import validate

__all__ = ["HAS_NKI", "to_xla", "from_xla"]

HAS_NKI: bool = bool(_nki.HAS_NKI)
"""True when AWS's NKI compiler (``neuronxcc``) is importable."""


def _xla_device():
    if not _nki.has_neuron_device():
        return None
    try:  # pragma: no cover - needs a NeuronCore
        import torch_xla.core.xla_model as xm

        return xm.xla_device()
    except ImportError:  # pragma: no cover
        return None


def to_xla(*tensors):
    """Move tensors to the NeuronCore's XLA device, once, for repeated use.

    Parameters
    ----------
    *tensors : tensors

    Returns
    -------
    tensor or tuple of tensors
        On a machine with a NeuronCore and ``torch_xla``: copies on the XLA
        device. Elsewhere the inputs themselves (a no-op). One input gives
        one tensor, several a tuple.

    Examples
    --------
    >>> import torch, trntensor
    >>> x = torch.ones(2)
    >>> trntensor.to_xla(x) is x
    True
    """
    ts = [validate.tensor(t, f"tensors[{k}]", "to_xla") for k, t in enumerate(tensors)]
    dev = _xla_device()
    if dev is not None:  # pragma: no cover - needs a NeuronCore
        ts = [t.to(dev) for t in ts]
    return ts[0] if len(ts) == 1 else tuple(ts)


def from_xla(*tensors, device="cpu"):
    """Bring tensors back from the XLA device (to ``device``, default CPU).

    Tensors already on a non-XLA device are returned unchanged.

    Examples
    --------
    >>> import torch, trntensor
    >>> x = torch.ones(2)
    >>> trntensor.from_xla(x) is x
    True
    """
    ts = [validate.tensor(t, f"tensors[{k}]", "from_xla") for k, t in enumerate(tensors)]
    ts = [t.to(device) if t.device.type == "xla" else t for t in ts]
    return ts[0] if len(ts) == 1 else tuple(ts)
