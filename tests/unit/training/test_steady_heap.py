"""The C heap kept steady (elmo.runtime.device.steady_heap): ``ELMO.py``'s process and each direction's fix glibc's
thresholds; it does nothing where the C library has no ``mallopt``."""

from __future__ import annotations

import sys
from types import SimpleNamespace

import pytest

from elmo.pipelines import pretraining
from elmo.runtime import device


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="glibc's mallopt")
def test_steady_heap_sets_glibc_s_thresholds_on_linux():
    assert device.steady_heap() is True


def cannot_load(name):
    raise OSError(f"{name}: cannot open shared object file")


@pytest.mark.parametrize("library, load", [(None, None), ("libc.so.6", lambda name: SimpleNamespace()),
                                           ("libc.so.6", cannot_load)],
                         ids=["no C library", "no mallopt in it", "it cannot be loaded"])
def test_steady_heap_is_a_no_op_without_mallopt(monkeypatch, library, load):
    monkeypatch.setattr(device.ctypes.util, "find_library", lambda name: library)
    if load is not None:
        monkeypatch.setattr(device.ctypes, "CDLL", load)
    assert device.steady_heap() is False


class Called(Exception):
    pass


def raise_called():
    raise Called


def test_elmo_py_and_each_direction_s_process_keep_the_heap_steady(monkeypatch, tmp_path):
    monkeypatch.setattr(pretraining, "steady_heap", raise_called)
    with pytest.raises(Called):
        pretraining.pretrain(pretraining.PretrainArgs(data_dir=str(tmp_path), models_dir=str(tmp_path / "m"),
                                                      results_dir=str(tmp_path / "r"), images_dir=str(tmp_path / "i")))
    with pytest.raises(Called):
        pretraining.train_direction(SimpleNamespace(config=pretraining.PretrainArgs(), lm=None))
