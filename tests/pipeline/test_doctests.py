"""The examples in the public docstrings run and print what they say."""

import doctest

import pytest

import kpca_denoise.api
import kpca_denoise.core.grouped.options
import kpca_denoise.core.vst
import kpca_denoise.estimator
import kpca_denoise.params
import kpca_denoise.pipeline


@pytest.mark.parametrize("module", [kpca_denoise.api, kpca_denoise.pipeline, kpca_denoise.params,
                                    kpca_denoise.estimator, kpca_denoise.core.vst,
                                    kpca_denoise.core.grouped.options],
                         ids=lambda m: m.__name__)
def test_docstring_examples(module):
    result = doctest.testmod(module, optionflags=doctest.ELLIPSIS)
    assert result.attempted >= 1 and result.failed == 0
