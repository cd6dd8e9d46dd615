"""trnfft's NKI kernels (NKI 0.6, ``nisa`` with ``dst``), one per file.

Complex data is split: an HBM array ``[2, B, n]`` float32 holds the real
plane (index 0) and the imaginary plane (index 1); the batch ``B`` is the
partition dim of every on-chip tile (tiles of up to 128 rows, the last one
ragged). Twiddles, chirps and DFT matrices are host tables computed in
float64 from angles reduced into ``[-pi, pi]`` and rounded once to float32
(:mod:`trnfft.algorithms`): the Scalar Engine's ``sin`` is valid only on
``[-pi, pi]`` and there is no ``cos`` activation.
"""
