"""Where each vLLM rank runs: the CPU cores or GPUs every data-parallel rank's engine starts with.

Runs without vLLM: the layout is decided before any engine starts.
"""

from __future__ import annotations

import os

import pytest

from pfr.errors import ModelError
from pfr.models.vllm.parallel import cpu_binding
from pfr.models.vllm.parallel import rank_envs as _rank_envs


def test_cores_are_split_into_contiguous_shares() -> None:
    assert cpu_binding(1, [0, 1]) == ["0,1"]
    assert cpu_binding(2, [1, 0]) == ["0", "1"]
    assert cpu_binding(2, range(8)) == ["0,1,2,3", "4,5,6,7"]
    assert cpu_binding(3, range(8)) == ["0,1", "2,3,4", "5,6,7"]  # every core used once
    assert cpu_binding(3, [0, 1]) == ["0", "1", "0"]  # more ranks than cores: cores shared in turn
    with pytest.raises(ModelError, match="no CPU"):
        cpu_binding(2, [])


def test_cpu_ranks_get_their_own_cores(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("VLLM_CPU_OMP_THREADS_BIND", raising=False)
    monkeypatch.setattr(os, "sched_getaffinity", lambda pid: {0, 1, 2, 3, 4, 5, 6, 7})
    assert _rank_envs(1, 1, True) == [{}]  # one worker: vLLM's own binding
    assert _rank_envs(1, 2, True) == [{"VLLM_CPU_OMP_THREADS_BIND": "0,1,2,3|4,5,6,7"}]  # pipeline/tensor ranks
    assert _rank_envs(2, 1, True) == [{"VLLM_CPU_OMP_THREADS_BIND": "0,1,2,3"},
                                      {"VLLM_CPU_OMP_THREADS_BIND": "4,5,6,7"}]  # fmt: skip
    assert _rank_envs(2, 2, True) == [{"VLLM_CPU_OMP_THREADS_BIND": "0,1|2,3"},
                                      {"VLLM_CPU_OMP_THREADS_BIND": "4,5|6,7"}]  # fmt: skip
    monkeypatch.setenv("VLLM_CPU_OMP_THREADS_BIND", "0-3|4-7")  # the user's binding wins
    assert _rank_envs(1, 2, True) == [{}]


def test_gpu_ranks_get_their_own_devices(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("CUDA_VISIBLE_DEVICES", raising=False)
    assert _rank_envs(1, 4, False) == [{}]
    assert _rank_envs(2, 2, False) == [{"CUDA_VISIBLE_DEVICES": "0,1"}, {"CUDA_VISIBLE_DEVICES": "2,3"}]
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "4,5,6")
    assert _rank_envs(3, 1, False) == [{"CUDA_VISIBLE_DEVICES": d} for d in ("4", "5", "6")]
    with pytest.raises(ModelError, match=r"data_parallel_size=2 × 2 devices per rank needs 4 devices"):
        _rank_envs(2, 2, False)
