"""Run a command and print the peak of its process tree's memory, summed over the processes alive at each
moment (sampled every ``--every`` seconds, default 0.2, from /proc): PSS (shared pages split between the processes
that map them) and RSS. Reading a large process's ``smaps_rollup`` costs CPU time, so a long timed run samples
once a second (0.2 s took about 15% of a core beside a 1 GB process).

    python tree_memory.py python -m elmo pretrain --max-docs 12000 --epochs 1 ...
    python tree_memory.py --every 1 python ELMO.py
"""

import os
import subprocess
import sys
import time


def tree(root: int) -> list[int]:
    """``root`` and all its descendants."""
    children: dict[int, list[int]] = {}
    for name in os.listdir("/proc"):
        if name.isdigit():
            try:
                parent = int(open(f"/proc/{name}/stat").read().rsplit(")", 1)[1].split()[1])
            except (OSError, IndexError, ValueError):
                continue
            children.setdefault(parent, []).append(int(name))
    out, todo = [], [root]
    while todo:
        pid = todo.pop()
        out.append(pid)
        todo += children.get(pid, [])
    return out


def memory_mib(pid: int) -> tuple[float, float]:
    """``(PSS, RSS)`` of ``pid`` in MiB (0 once it has ended)."""
    found = {}
    try:
        for line in open(f"/proc/{pid}/smaps_rollup"):
            key, *value = line.split()
            if key in ("Rss:", "Pss:"):
                found[key] = int(value[0]) / 1024
    except OSError:
        pass
    return found.get("Pss:", 0.0), found.get("Rss:", 0.0)


if __name__ == "__main__":
    args, every = sys.argv[1:], 0.2
    if args[:1] == ["--every"]:
        every, args = float(args[1]), args[2:]
    proc = subprocess.Popen(args)
    peak_pss = peak_rss = 0.0
    processes = 0
    while proc.poll() is None:
        sizes = [memory_mib(pid) for pid in tree(proc.pid)]
        pss, rss = sum(s[0] for s in sizes), sum(s[1] for s in sizes)
        if pss > peak_pss:
            peak_pss, processes = pss, len(sizes)
        peak_rss = max(peak_rss, rss)
        time.sleep(every)
    print(f"PEAK summed PSS {peak_pss:.0f} MiB ({processes} procs), summed RSS {peak_rss:.0f} MiB, "
          f"rc {proc.returncode}", file=sys.stderr)
    sys.exit(proc.returncode)
