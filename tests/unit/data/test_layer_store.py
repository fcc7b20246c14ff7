"""Layer stores (elmo.data.layer_store): memory and disk give the same padded batches; errors name the problem."""

from __future__ import annotations

import os

import numpy as np
import pytest
import torch

from elmo.data.corpus import EncodedCorpus
from elmo.data.layer_store import DiskLayerStore, MemoryLayerStore
from elmo.errors import ElmoError


@pytest.mark.cpu_features
@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16])
def test_disk_and_memory_stores_gather_the_same_padded_rows(dtype, tmp_path):
    rng = np.random.default_rng(0)
    corpus = EncodedCorpus([rng.integers(4, 20, size=n).tolist() for n in (3, 1, 5, 2)])
    rows = torch.randn(corpus.num_tokens, 2, 6).to(dtype)
    memory = MemoryLayerStore(corpus.num_tokens, (2, 6), dtype)
    disk = DiskLayerStore(corpus.num_tokens, (2, 6), dtype, str(tmp_path))
    for i in (2, 0, 3, 1):  # documents written out of order, as compute_layers's length-sorted batches do
        start, n = int(corpus.offsets[i]), int(corpus.lengths[i])
        memory.write(start, rows[start:start + n])
        disk.write(start, rows[start:start + n].float())  # cast to the store's dtype on the way in
    assert os.listdir(tmp_path) == []  # an anonymous file: nothing to clean up after a kill
    index = np.array([3, 0, 2])
    got = {kind: EncodedCorpus([[1] * n for n in corpus.lengths]).attach_layers(store).collate(index)["layers"]
           for kind, store in (("memory", memory), ("disk", disk))}
    assert got["disk"].dtype == dtype and got["disk"].shape == (2, 3, 5, 6)  # (L, B, T, D)
    assert torch.equal(got["disk"], got["memory"])
    for b, i in enumerate(index):
        start, n = int(corpus.offsets[i]), int(corpus.lengths[i])
        assert torch.equal(got["disk"][:, b, :n], rows[start:start + n].transpose(0, 1))
        assert not got["disk"][:, b, n:].any()  # padding is zero
    disk.close()


def test_store_errors(tmp_path, monkeypatch):
    import elmo.data.layer_store as layer_store

    with pytest.raises(ElmoError, match="float16 or bfloat16"):
        DiskLayerStore(4, (2, 3), torch.float32, str(tmp_path))
    store = DiskLayerStore(4, (2, 3), torch.float16, str(tmp_path))
    with pytest.raises(ElmoError, match="cannot write"):
        store.write(3, torch.zeros(2, 2, 3))  # past the end
    with pytest.raises(ElmoError, match="cannot write"):
        store.write(0, torch.zeros(1, 3, 3))  # another row shape
    with pytest.raises(ElmoError, match="attach_layers"):
        EncodedCorpus([[5, 6]]).attach_layers(store)  # 2 tokens, 4 rows
    monkeypatch.setattr(layer_store, "disk_free", lambda where: 10)
    with pytest.raises(ElmoError, match=r"do not fit .*TMPDIR"):
        DiskLayerStore(4, (2, 3), torch.float16, str(tmp_path))
    monkeypatch.undo()
    with pytest.raises(ElmoError, match="cannot create a temporary file"):
        DiskLayerStore(4, (2, 3), torch.float16, str(tmp_path / "missing"))
