"""Tables of the gridknobs call: per knob setting, each case it changes, the default's kernel ms
(two processes, first and last of the call), the knob's, and knob / mean(default) - 1; the noise
is default2 / default - 1 over all 120 cases. Usage: python3 analyze.py DIR (the call's gk/)."""
import json
import os
import statistics
import sys

d = sys.argv[1]


def load(name):
    with open(os.path.join(d, name + ".json")) as f:
        return {r["case"]: r for r in json.load(f)["records"]}


default, default2 = load("default"), load("default2")
noise = sorted(default2[k]["adjoint_ms"] / default[k]["adjoint_ms"] - 1 for k in default)
aten_noise = sorted(default2[k]["torch_ms"] / default[k]["torch_ms"] - 1 for k in default)
print("noise (default2 / default - 1, 120 cases): median %+.1f%%, min %+.1f%%, max %+.1f%%, "
      "|.| > 2%%: %d; ATen likewise median %+.1f%%, min %+.1f%%, max %+.1f%%" % (
          100 * statistics.median(noise), 100 * noise[0], 100 * noise[-1],
          sum(abs(x) > 0.02 for x in noise), 100 * statistics.median(aten_noise),
          100 * aten_noise[0], 100 * aten_noise[-1]))
print()
print("default (first process), kernel ms and x ATen, every case:")
print("%-42s %9s %9s %9s %7s" % ("case", "default", "default2", "ATen", "x ATen"))
for k, r in default.items():
    print("%-42s %9.4f %9.4f %9.4f %6.2fx" % (k, r["adjoint_ms"], default2[k]["adjoint_ms"],
                                              r["torch_ms"], r["ratio"]))
for name in ("reread0", "stream2", "unroll4", "rows0"):
    knob = load(name)
    changes = []
    print()
    print("== %s: %d cases" % (name, len(knob)))
    print("%-42s %9s %9s %9s %8s %9s" % ("case", "default", "default2", name, "change", "x ATen"))
    for k, r in knob.items():
        base = (default[k]["adjoint_ms"] + default2[k]["adjoint_ms"]) / 2
        change = r["adjoint_ms"] / base - 1
        changes.append(change)
        print("%-42s %9.4f %9.4f %9.4f %+7.1f%% %4.2f->%4.2f" % (
            k, default[k]["adjoint_ms"], default2[k]["adjoint_ms"], r["adjoint_ms"], 100 * change,
            default[k]["ratio"], r["ratio"]))
    changes.sort()
    print("%s: median %+.1f%%, best %+.1f%%, worst %+.1f%%, faster by > 2%%: %d, slower by > 2%%: %d"
          % (name, 100 * statistics.median(changes), 100 * changes[0], 100 * changes[-1],
             sum(c < -0.02 for c in changes), sum(c > 0.02 for c in changes)))
