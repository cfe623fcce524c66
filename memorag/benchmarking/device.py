"""The benchmarks' device options (`--device`, `--dtype`, `--threads`, `--peak-size`, `--copy-mb`), and the clock and peak memory of that device.

Every benchmark (benchmarks/memorize.py, train.py, pipeline.py, decode.py) adds its device
options with `add_device_options` and turns them into a `BenchDevice`, so the names they
accept, the way they time and the peak memory they report are the same everywhere:

- time: host wall time between two device synchronizations (on CUDA, kernels run
  asynchronously, so a clock read without a synchronization measures launches only);
- peak memory: on CUDA `torch.cuda.max_memory_allocated` (tensors torch allocated, reset
  before each measured phase); on the CPU the process's peak resident set (VmHWM, reset
  through /proc/self/clear_refs where the kernel allows it).
"""

from __future__ import annotations

import argparse
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from memorag.runtime.placement import Placement, normalize_dtype, set_threads

SHORT_DTYPES = {"bfloat16": "bf16", "float16": "fp16", "float32": "fp32"}


def dtype_option(text: str) -> str:
    """An argparse type: bf16, fp16, fp32 (or their long names) -> the canonical torch name."""
    try:
        name = normalize_dtype(text)
    except ValueError as error:
        raise argparse.ArgumentTypeError(str(error)) from None
    if name == "auto":
        raise argparse.ArgumentTypeError("give the precision: bf16, fp16 or fp32")
    return name


def dtype_or_auto_option(text: str) -> str:
    """An argparse type: `dtype_option`'s names, or auto (the checkpoint's own precision)."""
    return "auto" if text.strip().lower() == "auto" else dtype_option(text)


def add_device_options(parser: argparse.ArgumentParser, dtype_default: str | list[str] = "bf16",
                       several_dtypes: bool = False) -> None:
    """`--device`, `--dtype` (one, or with `several_dtypes` a list; "auto" allowed only where it is the
    default: a script that loads a checkpoint), `--threads`, `--peak-size` and `--copy-mb`."""
    group = parser.add_argument_group("device and precision")
    group.add_argument("--device", default="cpu", help="cpu, cuda or cuda:N (default cpu)")
    kind = dtype_or_auto_option if dtype_default == "auto" else dtype_option
    default = [kind(d) for d in dtype_default] if several_dtypes else kind(dtype_default)
    group.add_argument("--dtype", type=kind, nargs="+" if several_dtypes else None, default=default,
                       metavar="DTYPE", help=f"bf16, fp16 or fp32 (default {dtype_default})")
    group.add_argument("--peak-size", type=int, default=None, metavar="N",
                       help="side of the square matmul timed for the GEMM peak (default 4096 on the CPU, 8192 on CUDA)")
    group.add_argument("--threads", type=int, default=None, metavar="N",
                       help="torch's CPU threads (default: its own, which follow OMP_NUM_THREADS)")
    group.add_argument("--copy-mb", type=int, default=None, metavar="MB",
                       help="MiB copied to time the memory bandwidth (default 256 on the CPU, 1024 on CUDA)")


@dataclass(frozen=True)
class BenchDevice:
    """A checked device (`Placement.resolve`: cuda without a GPU is refused) and how to time on it."""

    name: str

    @classmethod
    def from_args(cls, args: argparse.Namespace) -> BenchDevice:
        """The device the options name (refused if this machine lacks it), torch's threads set as asked."""
        set_threads(args.threads)
        return cls(Placement.resolve(args.device).device)

    @property
    def is_cuda(self) -> bool:
        return self.name.startswith("cuda")

    @property
    def torch_device(self):
        import torch

        return torch.device(self.name)

    def synchronize(self) -> None:
        if self.is_cuda:
            import torch

            torch.cuda.synchronize(self.torch_device)

    def seconds(self, run: Callable[[], Any]) -> tuple[float, Any]:
        """(wall seconds of `run()` with the device idle before and after, its result)."""
        self.synchronize()
        start = time.perf_counter()
        result = run()
        self.synchronize()
        return time.perf_counter() - start, result

    def profile(self, run: Callable[[], Any], row_limit: int = 18) -> str:
        """The top operators of one `run()` (torch.profiler): by self CPU time on the CPU; on CUDA the kernels
        too, by self device time (where a GPU step spends its time), then the same ops by self CPU time
        (launch and Python overheads)."""
        from torch.profiler import ProfilerActivity, profile

        activities = [ProfilerActivity.CPU, *([ProfilerActivity.CUDA] if self.is_cuda else [])]
        with profile(activities=activities) as prof:
            run()
            self.synchronize()
        averages = prof.key_averages()
        tables = [averages.table(sort_by="self_cpu_time_total", row_limit=row_limit)]
        if self.is_cuda:
            tables.insert(0, averages.table(sort_by="self_device_time_total", row_limit=row_limit))
        return "\n".join(tables)

    def reset_peak_memory(self) -> None:
        if self.is_cuda:
            import torch

            torch.cuda.reset_peak_memory_stats(self.torch_device)
            return
        try:
            Path("/proc/self/clear_refs").write_text("5")  # resets VmHWM to the current resident set
        except OSError:
            pass

    def peak_memory_mb(self) -> float:
        """Peak device memory since the last reset, MiB (see the module's docstring)."""
        if self.is_cuda:
            import torch

            return torch.cuda.max_memory_allocated(self.torch_device) / 2**20
        return peak_rss_mb()

    @property
    def peak_memory_kind(self) -> str:
        return "torch.cuda.max_memory_allocated" if self.is_cuda else "peak resident set (VmHWM)"

    def peaks(self, args: argparse.Namespace, dtype: str, shape, window: int, memory: int) -> dict[str, float]:
        """`memorag.benchmarking.roofline.measure_peaks` on this device, sized by `--peak-size` and `--copy-mb`."""
        from memorag.benchmarking.roofline import measure_peaks

        return measure_peaks(dtype, shape, window, memory, device=self.name, gemm_size=args.peak_size,
                             copy_mb=args.copy_mb)

    def record(self) -> dict:
        """What a benchmark's JSON says of the device (the CPU's record is `memorag.benchmarking.machine`'s)."""
        import torch

        record = {"device": self.name, "peak_memory": self.peak_memory_kind}
        if self.is_cuda:
            properties = torch.cuda.get_device_properties(self.torch_device)
            record.update(gpu=properties.name, gpu_memory_mb=properties.total_memory / 2**20,
                          cuda=torch.version.cuda, cudnn=torch.backends.cudnn.version())
        return record


def peak_rss_mb() -> float:
    """The process's peak resident set (VmHWM), MiB; NaN where /proc is missing."""
    try:
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) / 1024
    except OSError:
        pass
    return float("nan")


def short_dtype(name: str) -> str:
    """bfloat16 -> bf16 (the benchmarks' tables and JSON)."""
    return SHORT_DTYPES[dtype_option(name)]
