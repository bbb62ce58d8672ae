"""The hyperspectral estimators are scikit-learn estimators: they pass ``parametrize_with_checks``.

Two checks fail for any scikit-learn ``Pipeline`` (measured on ``Pipeline([StandardScaler, PCA, SVC])``
with scikit-learn 1.9): fitting a Pipeline fits the estimator objects held in its ``steps`` parameter in
place, which ``check_estimators_overwrite_params`` and ``check_dont_overwrite_parameters`` read as
"fit changed a parameter". They are expected to fail for ``hsi-pca-svm`` too, and only they are.
"""

from __future__ import annotations

from sklearn.utils.estimator_checks import parametrize_with_checks

from zoo.hyperspectral.pca import HyperspectralPCA
from zoo.hyperspectral.preprocessing import BandStandardizer, MinMaxNormalizer
from zoo.hyperspectral.svm import make_pca_svm

PIPELINE_FAILS = {
    "check_estimators_overwrite_params": "a Pipeline fits the estimators in its `steps` parameter in place",
    "check_dont_overwrite_parameters": "a Pipeline fits the estimators in its `steps` parameter in place",
}


def _expected_failures(estimator):
    return PIPELINE_FAILS if hasattr(estimator, "steps") else {}


@parametrize_with_checks([HyperspectralPCA(), BandStandardizer(), MinMaxNormalizer(), make_pca_svm()],
                         expected_failed_checks=_expected_failures)
def test_sklearn_compatible(estimator, check):
    check(estimator)
