#!/usr/bin/env python3
"""The installed package, tested from outside the checkout.

    check_package.py layout LIBADJOINT [FASTLAUNCH]
                                         the layout `pip install .` produces (adjoint/ with
                                         lib/libadjoint.so and, where built, the compiled
                                         launch path inside), assembled in a temporary
                                         directory: import + version() from another directory
                                         with no ADJOINT_LIBRARY, then the CPU tests against it
    check_package.py pip                 `pip install .` into a temporary target (needs
                                         scikit-build-core; exit 77, a skip, without it), then
                                         the same checks on what it installed
"""

import glob
import os
import shutil
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
SKIP = 77


def check(site):
    """Imports adjoint from `site` (cwd elsewhere, no ADJOINT_LIBRARY) and runs the CPU tests."""
    env = {k: v for k, v in os.environ.items() if k != "ADJOINT_LIBRARY"}
    env["PYTHONPATH"] = site
    with tempfile.TemporaryDirectory() as elsewhere:
        out = subprocess.run([sys.executable, "-c", "import adjoint, adjoint._fast as f; "
                              "print(adjoint.version()); m = f.module(); "
                              "print(m.__file__ if m else 'none'); "
                              "print(adjoint.library_path())"], cwd=elsewhere, env=env,
                             capture_output=True, text=True)
    print(out.stdout + out.stderr)
    if out.returncode != 0:
        return 1
    library = out.stdout.split()[-1]
    if not library.startswith(os.path.join(site, "adjoint")):
        print("FAIL: loaded %s, not the package's own library" % library)
        return 1
    extension = out.stdout.split()[-2]
    if glob.glob(os.path.join(site, "adjoint", "_fastlaunch*")):
        if not extension.startswith(os.path.join(site, "adjoint")):
            print("FAIL: the compiled launch path came from %s, not the package" % extension)
            return 1
        env["ADJOINT_EXPECT_FASTLAUNCH"] = "1"
    env["ADJOINT_PYTHON_PATH"] = site  # tests/python/fakes.py imports adjoint from here
    env["ADJOINT_LIBRARY"] = library
    return subprocess.run([sys.executable, "-m", "unittest", "discover", "-s",
                           os.path.join(ROOT, "tests", "python"), "-p", "test_*.py"],
                          env=env).returncode


def main():
    mode = sys.argv[1] if len(sys.argv) > 1 else "layout"
    with tempfile.TemporaryDirectory() as site:
        if mode == "layout":
            package = os.path.join(site, "adjoint")
            shutil.copytree(os.path.join(ROOT, "python", "adjoint"), package,
                            ignore=shutil.ignore_patterns("__pycache__"))
            os.makedirs(os.path.join(package, "lib"))
            shutil.copy2(sys.argv[2], os.path.join(package, "lib", "libadjoint.so"))
            if len(sys.argv) > 3:
                shutil.copy2(sys.argv[3], package)
        elif mode == "pip":
            try:
                import scikit_build_core  # noqa: F401
            except ImportError:
                print("SKIP: scikit-build-core is not installed (pip install scikit-build-core)")
                return SKIP
            result = subprocess.run([sys.executable, "-m", "pip", "install", "--no-deps",
                                     "--no-build-isolation", "--target", site, ROOT])
            if result.returncode != 0:
                return result.returncode
        else:
            print(__doc__)
            return 2
        return check(site)


if __name__ == "__main__":
    sys.exit(main())
