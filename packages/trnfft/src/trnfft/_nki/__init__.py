"""trnfft's NKI lowerings, one module per public family; importing this package registers them all.

:mod:`.basic` (fft, ifft, fftn, ifftn, and the routing of one transform
length every transform shares), :mod:`.real` (rfft, irfft, hfft, ihfft,
rfftn, irfftn), :mod:`.stft` (stft, istft) and :mod:`.complex` (cmul,
cmatmul) hold the ``"nki"`` lowerings (which also serve ``"simulator"``) of
the Ops of the public modules of the same names. ``trnfft/__init__.py``
imports this package last, through :func:`trnsci.dispatch.load_lowerings`.
"""

from trnfft._nki import basic, complex, real, stft  # noqa: F401  (each registers its lowerings on import)
