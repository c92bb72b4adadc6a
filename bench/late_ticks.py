#!/usr/bin/env python3
# bench/late_ticks.py TRACE TID PERIOD_US - why rbpeek's ticks start late,
# from a tracefs text dump (trace_clock mono) with the events that
# bench/late_ticks.sh enables.  For every sleep of thread TID on its tick
# timer (hrtimer_start function=hrtimer_wakeup by TID), it measures
#   timer delay: the timer interrupt's expiry handler - the programmed expiry
#   switch delay: TID switched in - the timer's expiry handler
# and sorts the wake-ups that took more than half a period into:
#   host    the interrupt came late and the guest shows nothing on that CPU
#           in between (the vCPU was not running, or halted and not woken
#           in time: the hypervisor's doing, steal time)
#   guest   the interrupt came late behind other guest interrupt work
#           (another IRQ handler, softirq, IPI) on that CPU
#   sched   the interrupt came on time but TID ran late (waited for the CPU)
import re
import sys
from collections import Counter

path, tid, period_us = sys.argv[1], int(sys.argv[2]), float(sys.argv[3])
LINE = re.compile(r"^\s*(.+?)-(\d+)\s+\[(\d+)\]\s+\S+\s+([\d.]+): (\w+): (.*)$")
half_ns = period_us * 1000 / 2

events = []
for line in open(path, errors="replace"):
    m = LINE.match(line)
    if m:
        comm, pid, cpu, ts, name, rest = m.groups()
        events.append((round(float(ts) * 1e9), int(cpu), int(pid), name, rest))

starts = {}      # hrtimer pointer -> programmed expiry (ns)
pending = None   # [expiry, fired, cpu, index of the expiry event]
waits = []       # (total, timer delay, switch delay, class)
for i, (ts, cpu, pid, name, rest) in enumerate(events):
    if name == "hrtimer_start" and pid == tid and "function=hrtimer_wakeup" in rest:
        ptr = re.search(r"hrtimer=(\w+)", rest).group(1)
        starts[ptr] = int(re.search(r"softexpires=(\d+)", rest).group(1))
    elif name == "hrtimer_expire_entry" and "function=hrtimer_wakeup" in rest:
        ptr = re.search(r"hrtimer=(\w+)", rest).group(1)
        if ptr in starts:
            fired = int(re.search(r"now=(\d+)", rest).group(1))
            pending = [starts.pop(ptr), fired, cpu, i]
    elif name == "sched_switch" and pending and f"next_pid={tid} " in rest + " ":
        expiry, fired, tcpu, j = pending
        pending = None
        total, tdelay, sdelay = ts - expiry, fired - expiry, ts - fired
        if total <= half_ns:
            waits.append((total, tdelay, sdelay, None))
            continue
        if tdelay < total / 2:
            cls = "sched"
        else:
            # guest activity on that CPU between the expiry and the handler
            k, busy = j - 1, set()
            while k >= 0 and events[k][0] >= expiry:
                if events[k][1] == tcpu and events[k][3] not in ("cpu_idle", "hrtimer_start"):
                    busy.add(events[k][3])
                k -= 1
            cls = "guest" if busy & {"irq_handler_entry", "softirq_entry", "call_function_single_entry",
                                     "irq_work_entry", "reschedule_entry"} else "host"
        waits.append((total, tdelay, sdelay, cls))

if not waits:
    sys.exit("no wake-up of thread %d found in %s" % (tid, path))
n = len(waits)
late = [w for w in waits if w[3]]
def pct(vals, q):
    vals = sorted(vals)
    return vals[min(len(vals) - 1, int(q * len(vals)))] / 1000
print("wake-ups from the tick timer: %d; over half a period (%.0f us): %d (%.2f%%)"
      % (n, half_ns / 1000, len(late), 100.0 * len(late) / n))
print("wake-up latency (us): median %.1f, p90 %.1f, p99 %.1f; timer delay median %.1f, switch delay median %.1f"
      % (pct([w[0] for w in waits], .5), pct([w[0] for w in waits], .9), pct([w[0] for w in waits], .99),
         pct([w[1] for w in waits], .5), pct([w[2] for w in waits], .5)))
for cls, c in Counter(w[3] for w in late).most_common():
    sel = [w for w in late if w[3] == cls]
    print("  %-5s %5d (%.2f%% of wake-ups), median %.0f us late (timer %.0f, switch %.0f)"
          % (cls, c, 100.0 * c / n, pct([w[0] for w in sel], .5), pct([w[1] for w in sel], .5),
             pct([w[2] for w in sel], .5)))
