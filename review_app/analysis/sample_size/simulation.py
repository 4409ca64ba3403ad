"""Seeded simulations in worker processes: each simulation has its own seed, so results do not depend on the workers."""

from __future__ import annotations

import math
import multiprocessing
import os
import sys
import threading
import types
from collections.abc import Callable, Iterator
from concurrent.futures import Executor, ProcessPoolExecutor, as_completed
from concurrent.futures.process import BrokenProcessPool
from contextlib import contextmanager, suppress
from typing import Any

import numpy as np

Progress = Callable[[int, int], None]


def _rng(seed: int, index: int) -> np.random.Generator:
    return np.random.default_rng(np.random.SeedSequence(seed, spawn_key=(index,)))


def _run_chunk(function: Callable[..., float], params: dict[str, Any], seed: int, indices: list[int]) -> list[float]:
    """One worker job: simulations ``indices`` of a plan (module-level, so it pickles by name)."""
    return [function(_rng(seed, i), **params) for i in indices]


def default_workers() -> int:
    """Worker processes for simulations: one per core the process may use."""
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except AttributeError:  # pragma: no cover - not Linux
        return max(1, os.cpu_count() or 1)


_MAIN_SWAP = threading.Lock()


@contextmanager
def _without_main_script() -> Iterator[None]:
    """Start processes without making them re-run this process's ``__main__`` script.

    A forkserver child normally re-imports the parent's main script first; under Streamlit that is
    the app page (with no signed-in session), under a plain script its unguarded top level. The
    workers need only this package, so ``__main__`` is hidden for the moment the processes start.
    """
    with _MAIN_SWAP:
        real = sys.modules.get("__main__")
        sys.modules["__main__"] = types.ModuleType("__main__")
        try:
            yield
        finally:
            if real is not None:
                sys.modules["__main__"] = real


def _worker_start(barrier: Any) -> None:
    # Hold every worker until all have started, so each warm-up job below starts its own process.
    with suppress(threading.BrokenBarrierError):
        barrier.wait(timeout=60)


def _executor(workers: int) -> Executor | None:
    if workers <= 1:
        return None
    # forkserver, not fork: Streamlit and the CLI progress bar run threads, and forking a process
    # with threads can deadlock the child. The server preloads this package once, so each worker
    # starts without re-importing numpy/scipy/pandas.
    context = multiprocessing.get_context("forkserver")
    context.set_forkserver_preload([__package__])  # the package: every metric's simulation function
    barrier = context.Barrier(workers)
    pool = ProcessPoolExecutor(max_workers=workers, mp_context=context, initializer=_worker_start, initargs=(barrier,))
    with _without_main_script():
        warm_up = [pool.submit(os.getpid) for _ in range(workers)]
    try:
        for future in warm_up:
            future.result(timeout=120)
    except (BrokenProcessPool, TimeoutError):
        pool.shutdown(wait=False, cancel_futures=True)
        return None
    return pool


class _Simulator:
    """Runs batches of seeded simulations, in worker processes when ``workers > 1``, and counts them."""

    def __init__(self, seed: int, workers: int, progress: Progress | None, budget: int) -> None:
        self.seed, self.workers, self.progress, self.budget = int(seed), int(workers), progress, int(budget)
        self.used = 0
        self._pool: Executor | None = None

    def __enter__(self) -> _Simulator:
        self._pool = _executor(self.workers)
        return self

    def __exit__(self, *exc: object) -> None:
        if self._pool is not None:
            self._pool.shutdown(wait=True, cancel_futures=True)

    def run(self, function: Callable[..., float], params: dict[str, Any], n: int) -> np.ndarray:
        """``n`` simulations of ``function(rng, **params)``; results in simulation order."""
        indices = list(range(self.used, self.used + n))
        self.used += n
        self.budget = max(self.budget, self.used)
        if self._pool is not None:
            try:
                return self._run_in_pool(function, params, indices)
            except BrokenProcessPool:
                # Workers could not start (e.g. an unguarded __main__ script re-run by the forkserver):
                # run in this process instead. Every simulation has its own seed, so the results are
                # the same, only slower.
                self._pool.shutdown(wait=False, cancel_futures=True)
                self._pool = None
        out = []
        for k, index in enumerate(indices):
            out.append(function(_rng(self.seed, index), **params))
            if self.progress and (k % 10 == 9 or k == n - 1):
                self.progress(self.used - n + k + 1, self.budget)
        return np.asarray(out, dtype=float)

    def _run_in_pool(self, function: Callable[..., float], params: dict[str, Any], indices: list[int]) -> np.ndarray:
        n = len(indices)
        size = max(1, min(25, math.ceil(n / (4 * self.workers))))
        chunks = [indices[i : i + size] for i in range(0, n, size)]
        futures = {self._pool.submit(_run_chunk, function, params, self.seed, c): k for k, c in enumerate(chunks)}
        results: dict[int, list[float]] = {}
        done = self.used - n
        for future in as_completed(futures):
            results[futures[future]] = future.result()
            done += len(results[futures[future]])
            if self.progress:
                self.progress(done, self.budget)
        return np.asarray([v for k in range(len(chunks)) for v in results[k]], dtype=float)
