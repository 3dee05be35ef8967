"""Host survey (no GPU): for each knob setting, which cases of bench/bench_grid_sampler_knobs.py
get other kernels than the default, comparing each kernel's CUDA source from `adjoint cuda`
with comment lines removed (a comment changes no instruction). Writes <dir>/<setting>.txt, the
case keys that setting changes (the device call times only those under the knob), and prints
which kernels changed.

    python3 survey.py build/bin/adjoint OUTDIR 'name:VAR=value[,VAR=value]' ...
"""
import hashlib
import os
import subprocess
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "..",
                                "bench"))
from bench_grid_sampler_knobs import case_keys, parse  # noqa: E402


def kernels(cli, key, env):
    input_size, grid_size, mode, padding, dtype_name = parse(key)
    spec = ["grid_sampler_%dd_backward" % len(grid_size), "dtype=" + dtype_name,
            "input_size=" + ",".join(map(str, input_size)),
            "output_size=" + ",".join(map(str, grid_size)), "interpolation_mode=" + mode,
            "padding_mode=" + padding]
    full = dict(os.environ)
    full.update(env)
    text = subprocess.run([cli, "cuda"] + spec, env=full, capture_output=True, text=True,
                          check=True).stdout
    out = {}
    for part in text.split("// ===== kernel ")[1:]:
        name = part.split(":")[0].split("_backward_", 1)[-1]
        body = "\n".join(l for l in part.split("\n")[1:] if not l.strip().startswith("//"))
        out[name] = hashlib.sha1(body.encode()).hexdigest()[:12]
    return out


def main():
    cli, outdir = sys.argv[1], sys.argv[2]
    os.makedirs(outdir, exist_ok=True)
    keys = case_keys()
    base = {key: kernels(cli, key, {}) for key in keys}
    with open(os.path.join(outdir, "all.txt"), "w") as f:
        f.write("\n".join(keys) + "\n")
    for setting in sys.argv[3:]:
        name, assignments = setting.split(":", 1)
        env = dict(a.split("=", 1) for a in assignments.split(","))
        changed = []
        for key in keys:
            k = kernels(cli, key, env)
            diff = sorted(n for n in set(k) | set(base[key]) if k.get(n) != base[key].get(n))
            if diff:
                changed.append(key)
                print("%-8s %-42s %s" % (name, key, " ".join(diff)))
        with open(os.path.join(outdir, name + ".txt"), "w") as f:
            f.write("".join(k + "\n" for k in changed))
        print("== %s (%s): %d of %d cases get other kernels" % (name, assignments, len(changed),
                                                               len(keys)))


if __name__ == "__main__":
    main()
