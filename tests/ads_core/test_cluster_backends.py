"""K-Means backends by name or class path: a user's class is loaded and used; bad names and plug-ins fail clearly."""

from __future__ import annotations

import sys
import textwrap
import uuid
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest

from ads_core.common.registry import UnknownBackendError
from ads_core.config.build import ClusterConfig
from ads_core.stages.cluster import kmeans
from ads_core.stages.cluster.fit import cluster_embeddings

PLUGIN = '''
import numpy as np

from ads_core.stages.cluster.kmeans import KMeansResult, SklearnKMeans

CALLS = []


class RecordingKMeans:
    """Runs scikit-learn's Lloyd, records each call and reports its own name."""

    name = "recording"

    def fit(self, x, init, max_iter, tol):
        CALLS.append((x.shape, init.shape, max_iter, tol))
        res = SklearnKMeans().fit(x, init, max_iter, tol)
        return KMeansResult(res.centroids, res.labels, res.inertia, res.iterations, self.name)


class BadShapeKMeans:
    name = "bad"

    def fit(self, x, init, max_iter, tol):
        return KMeansResult(init, np.zeros(len(x) - 1, np.int32), 0.0, 1, self.name)
'''


@pytest.fixture()
def plugin(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[str]:
    """A throwaway module on sys.path holding user backends; returns its module name."""
    name = f"user_kmeans_{uuid.uuid4().hex[:8]}"
    (tmp_path / f"{name}.py").write_text(textwrap.dedent(PLUGIN))
    monkeypatch.syspath_prepend(str(tmp_path))
    yield name
    sys.modules.pop(name, None)


def _blobs() -> np.ndarray:
    rng = np.random.default_rng(3)
    centres = rng.standard_normal((4, 12)) * 5
    return (centres[rng.integers(0, 4, 200)] + rng.standard_normal((200, 12)) * 0.2).astype(np.float32)


def test_a_class_path_backend_is_loaded_and_used(plugin):
    x = _blobs()
    cfg = ClusterConfig(num_clusters=4, pca_dim=8, backend=f"{plugin}:RecordingKMeans", max_iter=37)
    got = cluster_embeddings(x, cfg)
    calls = sys.modules[plugin].CALLS
    assert calls == [((200, 8), (4, 8), 37, cfg.tol)]  # called once, on the PCA features, with our init and knobs
    assert got.backend == "recording"
    ref = cluster_embeddings(x, cfg.model_copy(update={"backend": "sklearn"}))
    np.testing.assert_array_equal(got.labels, ref.labels)


def test_a_dotted_class_path_works_too(plugin):
    backend = kmeans.get_backend(f"{plugin}.RecordingKMeans")
    assert type(backend).__name__ == "RecordingKMeans"


def test_an_unknown_name_lists_the_choices():
    with pytest.raises(UnknownBackendError) as err:
        cluster_embeddings(_blobs(), ClusterConfig(num_clusters=4, backend="fiass"))
    message = str(err.value)
    assert "'fiass'" in message
    for choice in ("auto", "faiss", "sklearn", "cuml", "class path"):
        assert choice in message


def test_an_unimportable_class_path_names_it():
    with pytest.raises(UnknownBackendError, match=r"no_such_pkg_x\.mod:KMeans.*cannot be imported"):
        kmeans.get_backend("no_such_pkg_x.mod:KMeans")


def test_a_plugin_with_wrong_output_fails_clearly(plugin):
    with pytest.raises(ValueError, match=r"'bad' returned labels of shape \(199,\)"):
        cluster_embeddings(_blobs(), ClusterConfig(num_clusters=4, backend=f"{plugin}:BadShapeKMeans"))


def test_cuml_is_registered_but_never_imported_on_cpu():
    assert kmeans.KMEANS_BACKENDS.names() == ["faiss", "sklearn", "cuml"]
    if "cuml" in kmeans.available_backends():
        pytest.skip("this machine has cuML and a GPU")
    kmeans.available_backends()
    kmeans.get_backend("auto", dim=16)
    assert "cuml" not in sys.modules
    with pytest.raises(ValueError, match="'cuml' is not available here"):
        kmeans.get_backend("cuml")


def test_auto_keeps_the_cpu_choice(monkeypatch):
    monkeypatch.setattr(kmeans, "available_backends", lambda: ["faiss", "sklearn"])
    assert kmeans.auto_backend(128) == "sklearn" and kmeans.auto_backend(256) == "sklearn"
    assert kmeans.auto_backend(257) == "faiss" and kmeans.auto_backend(None) == "faiss"
    monkeypatch.setattr(kmeans, "available_backends", lambda: ["sklearn"])
    assert kmeans.auto_backend(1024) == "sklearn"
    monkeypatch.setattr(kmeans, "available_backends", lambda: ["faiss", "sklearn", "cuml"])
    assert kmeans.auto_backend(16) == "cuml"
