"""Resource use while a benchmark runs: a sampler process reading psutil (and NVML for GPUs).

The sampler wakes every `interval` seconds (10 ms by default) and reads the resident set of
the watched process and all its children (a server started by the benchmark counts; the
sampler itself does not) and their CPU time; GPU memory and utilisation come from NVML when
the nvidia-ml-py package and a driver with a device are there. No GPU is reported as such
(`gpu_note`), never as zeros. The timeline is kept so a report can draw resource use over
time, with phase marks.

It is a separate process, not a thread: a thread must take the GIL for every psutil read,
and behind a busy Python main thread each of those waits up to the 5 ms switch interval
(measured: 137 ms gaps between samples instead of 10 ms).
"""

from __future__ import annotations

import contextlib
import multiprocessing
import os
import time
from dataclasses import dataclass
from multiprocessing.connection import Connection

import psutil

from regress.core.errors import pip_install


@dataclass(frozen=True)
class Sample:
    """One reading of the sampler."""

    t: float
    """Seconds since the sampler started."""
    rss_bytes: int
    """Resident set of the process and its children."""
    cpu_percent: float
    """CPU time used since the previous sample over the wall time between them (100 = one
    core busy)."""
    gpu_memory_bytes: int | None = None
    gpu_util_percent: float | None = None


@dataclass(frozen=True)
class GpuUsage:
    """NVML's view of the devices during the run (all devices summed / averaged)."""

    devices: tuple[str, ...]
    peak_memory_bytes: int
    mean_util_percent: float


@dataclass(frozen=True)
class Resources:
    """What a benchmark used, from the sampler's readings."""

    interval_s: float
    """Requested sampling interval."""
    mean_interval_s: float
    """Achieved mean gap between samples."""
    max_gap_s: float
    """Largest gap between two samples (a peak shorter than it may be missed)."""
    start_rss_bytes: int
    peak_rss_bytes: int
    cpu_percent_mean: float
    """CPU time over wall time for the whole run (100 = one core)."""
    cpu_count: int
    gpu: GpuUsage | None
    gpu_note: str
    """Why there is no GPU figure ('no GPU: ...'), or the devices seen."""
    phases: tuple[tuple[str, float], ...]
    """(label, seconds since start) marks: load, pp512, tg128, requests, ..."""
    timeline: tuple[Sample, ...]


def _cpu_seconds(procs: list[psutil.Process]) -> float:
    total = 0.0
    for p in procs:
        with contextlib.suppress(psutil.Error):  # a child that just ended
            times = p.cpu_times()
            total += times.user + times.system
    return total


def _rss(procs: list[psutil.Process]) -> int:
    total = 0
    for p in procs:
        with contextlib.suppress(psutil.Error):
            total += p.memory_info().rss
    return total


class _Nvml:
    """NVML handles, or the reason there are none."""

    def __init__(self) -> None:
        self.handles: list[object] = []
        self.names: tuple[str, ...] = ()
        try:
            import pynvml  # nvidia-ml-py
        except ImportError:
            self.note = f"no GPU: nvidia-ml-py is not installed ({pip_install('bench')})"
            return
        self._nvml = pynvml
        try:
            pynvml.nvmlInit()
        except pynvml.NVMLError as exc:
            self.note = f"no GPU: NVML unavailable ({exc})"
            return
        count = pynvml.nvmlDeviceGetCount()
        self.handles = [pynvml.nvmlDeviceGetHandleByIndex(i) for i in range(count)]
        self.names = tuple(str(pynvml.nvmlDeviceGetName(h)) for h in self.handles)
        self.note = ", ".join(self.names) if count else "no GPU: NVML sees no device"

    def read(self) -> tuple[int | None, float | None]:
        if not self.handles:
            return None, None
        nvml = self._nvml
        memory = sum(int(nvml.nvmlDeviceGetMemoryInfo(h).used) for h in self.handles)
        util = sum(float(nvml.nvmlDeviceGetUtilizationRates(h).gpu) for h in self.handles)
        return memory, util / len(self.handles)


def _sample(pid: int, interval_s: float, conn: Connection) -> None:
    """The sampler process: read on a fixed time grid until told to stop, then send all."""
    target, me, nvml = psutil.Process(pid), os.getpid(), _Nvml()
    samples: list[Sample] = []
    last_t, last_cpu = 0.0, 0.0

    def read() -> None:
        nonlocal last_t, last_cpu
        try:
            procs = [target, *(c for c in target.children(recursive=True) if c.pid != me)]
        except psutil.Error:  # the watched process ended: its last figures stand
            procs = [target]
        now = time.monotonic()
        cpu = _cpu_seconds(procs)
        percent = 100.0 * (cpu - last_cpu) / (now - last_t) if samples else 0.0
        samples.append(Sample(now, _rss(procs), percent, *nvml.read()))
        last_t, last_cpu = now, cpu

    read()
    conn.send("ready")
    t0, tick = samples[0].t, 1
    # A fixed grid, not `interval` after each read, so a read's own cost adds no drift.
    while not conn.poll(max(0.0, t0 + tick * interval_s - time.monotonic())):
        read()
        tick = max(tick + 1, int((last_t - t0) / interval_s) + 1)
    read()
    conn.send((samples, nvml.names, nvml.note, bool(nvml.handles)))


class ResourceSampler:
    """Samples a process tree (this process by default; a server's with `pid`) from a
    separate process; use as a context manager. `max_gap_s` in the result says how well it
    kept to the interval."""

    def __init__(self, interval_s: float = 0.01, pid: int | None = None) -> None:
        self.interval_s = interval_s
        self._pid = psutil.Process(pid).pid  # NoSuchProcess now rather than in the sampler
        self._phases: list[tuple[str, float]] = []
        self._conn, child = multiprocessing.Pipe()
        # spawn: a forked copy of a process running llama.cpp's threads is not safe.
        context = multiprocessing.get_context("spawn")
        self._process = context.Process(
            target=_sample, args=(self._pid, interval_s, child), daemon=True
        )
        self._result: tuple[list[Sample], tuple[str, ...], str, bool] | None = None

    def __enter__(self) -> ResourceSampler:
        self._process.start()
        self._conn.recv()  # the first sample is taken: loading is measured from its start
        return self

    def __exit__(self, *exc: object) -> None:
        self._conn.send("stop")
        self._result = self._conn.recv()
        self._process.join()

    def mark(self, label: str) -> None:
        """Note that phase `label` starts now (shown on the timeline)."""
        self._phases.append((label, time.monotonic()))

    def result(self) -> Resources:
        """The summary of what was sampled (call after the `with` block)."""
        assert self._result is not None, "result() before the sampler stopped"
        raw, names, note, has_gpu = self._result
        t0 = raw[0].t
        samples = [Sample(s.t - t0, s.rss_bytes, s.cpu_percent, s.gpu_memory_bytes,
                          s.gpu_util_percent) for s in raw]  # fmt: skip
        times = [s.t for s in samples]
        gaps = [b - a for a, b in zip(times, times[1:], strict=False)] or [0.0]
        wall = times[-1] if times[-1] > 0 else 1.0
        cpu_mean = sum(s.cpu_percent * g for s, g in zip(samples[1:], gaps, strict=False)) / wall
        gpu = None
        if has_gpu:
            gpu = GpuUsage(
                devices=names,
                peak_memory_bytes=max(s.gpu_memory_bytes or 0 for s in samples),
                mean_util_percent=sum(s.gpu_util_percent or 0.0 for s in samples) / len(samples),
            )
        return Resources(
            interval_s=self.interval_s,
            mean_interval_s=sum(gaps) / len(gaps),
            max_gap_s=max(gaps),
            start_rss_bytes=samples[0].rss_bytes,
            peak_rss_bytes=max(s.rss_bytes for s in samples),
            cpu_percent_mean=cpu_mean,
            cpu_count=psutil.cpu_count() or 1,
            gpu=gpu,
            gpu_note=note,
            phases=tuple((label, t - t0) for label, t in self._phases),
            timeline=tuple(samples),
        )
