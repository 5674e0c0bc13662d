"""The examples in the public docstrings run and print what they say."""

import doctest

import kpca_denoise.core.vst
import kpca_denoise.pipeline


def test_pipeline_docstring_examples():
    result = doctest.testmod(kpca_denoise.pipeline, optionflags=doctest.ELLIPSIS)
    assert result.attempted >= 1 and result.failed == 0


def test_vst_docstring_examples():
    result = doctest.testmod(kpca_denoise.core.vst, optionflags=doctest.ELLIPSIS)
    assert result.attempted >= 1 and result.failed == 0
