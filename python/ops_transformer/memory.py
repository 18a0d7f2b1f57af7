"""MemoryTracker: what a block of code allocated, from two honest sources.

- libot: the library's own exact per-category accounting (ot_mem_current / ot_mem_peak:
  every byte libot holds goes through ot_mem_alloc; its kernels' working memory is the
  "workspace" category). The peak of each category within the block is exact.
- torch CPU allocator: the profiler's memory events (profile_memory=True), every CPU
  tensor allocation and free inside the block, in time order; the peak is the highest
  running sum above the level at entry. Tensors of our ops are torch's (outputs, saved
  state), so they are counted here, not in libot's table.
Not tracked: memory neither allocates through those two (Python objects, oneDNN's and
OpenMP's own buffers, CUDA).

    tracker = MemoryTracker()
    with tracker.trace():
        loss = model(x).sum(); loss.backward()
    tracker.report()            # prints the table
    tracker.stats()             # the same numbers as a dict
"""
import contextlib
import sys

import torch

from . import _lib

CATEGORIES = ["params", "grads", "optim", "activations", "kvcache", "workspace", "other"]


def libot_memory():
    """{category: (current bytes, peak bytes)} from the library's accounting, now."""
    out = {}
    for c in range(len(CATEGORIES)):
        name = _lib.lib.ot_mem_category_name(c).decode()
        out[name] = (_lib.lib.ot_mem_current(c), _lib.lib.ot_mem_peak(c))
    return out


class MemoryTracker:
    def __init__(self, torch_cpu=True):
        """torch_cpu: also record torch's CPU allocations (runs the profiler during trace())."""
        self.torch_cpu = torch_cpu
        self._stats = None

    @contextlib.contextmanager
    def trace(self):
        """Records the block's allocations. Resets libot's per-category peaks at entry
        (ot_mem_reset_peak: peak := current) so the peaks reported are the block's."""
        start = {k: cur for k, (cur, _) in libot_memory().items()}
        _lib.lib.ot_mem_reset_peak()
        prof = None
        if self.torch_cpu:
            prof = torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CPU],
                                          profile_memory=True, record_shapes=False)
            prof.__enter__()
        try:
            yield self
        finally:
            if prof is not None:
                prof.__exit__(None, None, None)
            end = libot_memory()
            lib = {k: {"start": start[k], "end": end[k][0], "peak": end[k][1]} for k in end}
            self._stats = {"libot": lib, "torch_cpu": self._torch_stats(prof) if prof else None}

    @staticmethod
    def _torch_stats(prof):
        events = [e for e in prof.profiler.kineto_results.events()
                  if e.name() == "[memory]" and e.device_type() == torch.autograd.DeviceType.CPU]
        events.sort(key=lambda e: e.start_ns())
        run = peak = alloc = freed = n = 0
        for e in events:
            b = e.nbytes()
            run += b
            peak = max(peak, run)
            if b > 0:
                alloc += b
                n += 1
            else:
                freed -= b
        return {"allocated": alloc, "freed": freed, "net": alloc - freed, "peak": peak,
                "allocations": n}

    def stats(self):
        """{'libot': {category: {'start', 'end', 'peak'} bytes}, 'torch_cpu': {'allocated',
        'freed', 'net', 'peak' (above the level at entry), 'allocations'} or None}."""
        if self._stats is None:
            raise RuntimeError("MemoryTracker.stats(): nothing traced yet (use `with tracker.trace():`)")
        return self._stats

    def report(self, file=None):
        """Prints the table (MiB) to file (default stdout) and returns it as a string."""
        s = self.stats()
        mib = lambda b: f"{b / 1048576:12.2f}"
        lines = [f"{'libot':<14}{'start MiB':>12}{'end MiB':>12}{'peak MiB':>12}"]
        tot = [0, 0, 0]
        for k, v in s["libot"].items():
            lines.append(f"{k:<14}{mib(v['start'])}{mib(v['end'])}{mib(v['peak'])}")
            tot = [tot[0] + v["start"], tot[1] + v["end"], tot[2] + v["peak"]]
        lines.append(f"{'total':<14}{mib(tot[0])}{mib(tot[1])}{mib(tot[2])}  (peak: sum of category peaks)")
        t = s["torch_cpu"]
        if t is not None:
            lines.append(f"torch CPU allocator: {t['allocations']} allocations, {t['allocated'] / 1048576:.2f} "
                         f"MiB allocated, {t['freed'] / 1048576:.2f} MiB freed, net {t['net'] / 1048576:+.2f} "
                         f"MiB, peak {t['peak'] / 1048576:.2f} MiB above the start")
        text = "\n".join(lines)
        print(text, file=file or sys.stdout)
        return text
