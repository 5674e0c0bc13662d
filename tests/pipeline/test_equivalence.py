"""The restructured code gives the pixels the recorded corpus holds
(``tests/pipeline/equivalence_corpus.py``; ``tests/pipeline/data/equivalence.npz`` was recorded before
the grouped core was split into its package).  Equal up to floating-point noise:
the same code gives outputs that differ by a few float32 units in the last place
between processes (BLAS and numba reductions split work by thread and cache state:
up to 6e-5 on 0..255 seen between two runs of unchanged code), so float outputs
agree to 1e-6 of their span and integer outputs as
:func:`helpers.assert_same_result` allows; any change of the method moves pixels by
orders of magnitude more."""

import numpy as np
import pytest

import equivalence_corpus as corpus
from helpers import assert_same_result

RECORDED = np.load(corpus.RECORD)
CASES = corpus.cases()


@pytest.mark.parametrize("name", sorted(CASES))
def test_pixels_as_recorded(name):
    got = corpus.run(name, CASES[name])
    want = {k[len(name) + 1:]: RECORDED[k] for k in RECORDED.files if k.startswith(name + "/")}
    assert want, f"case {name} has no recorded outputs; run python tests/pipeline/equivalence_corpus.py"
    assert sorted(got) == sorted(want)
    for key in want:
        a, d = got[key], want[key]
        if np.issubdtype(d.dtype, np.integer):
            assert_same_result(a, d)
        else:
            assert a.shape == d.shape and a.dtype == d.dtype, key
            span = float(np.abs(d).max(initial=1.0))
            err = float(np.abs(a.astype(np.float64) - d).max(initial=0.0))
            # 1e-5 of the span: the BLAS kernel OpenBLAS picks for the CPU (OPENBLAS_CORETYPE)
            # orders the Gram matrix's sums differently; grey_ranks moved 1.3e-6 of its span
            # between two kernels, any real change moves far more
            assert err <= 1e-5 * span, f"{key}: max difference {err:.3g} (span {span:.3g})"
