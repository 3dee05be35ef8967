"""Finds the compiled launch path, adjoint._fastlaunch (python/ext/fastlaunch.c), or reports its
absence, in which case programs launch through ctypes (program.py).

Where it is looked for, in order: inside the package (where `pip install .` puts it), then
beside $ADJOINT_LIBRARY (a build or a stage elsewhere: the CMake build writes the extension
beside libadjoint), then build/lib/ of the checkout this package lives in.
ADJOINT_FASTLAUNCH=0 turns it off (the ctypes path then runs everywhere);
ADJOINT_FASTLAUNCH=<path of a _fastlaunch*.so> loads that build instead.
"""

import glob
import importlib.machinery
import importlib.util
import os
import sys

_UNSET = object()
_module = _UNSET
reason = None  # why the extension is not used, when it is not


def _load_from(path):
    name = __package__ + "._fastlaunch"
    loader = importlib.machinery.ExtensionFileLoader(name, path)
    spec = importlib.util.spec_from_file_location(name, path, loader=loader)
    module = importlib.util.module_from_spec(spec)
    loader.exec_module(module)
    sys.modules[name] = module
    return module


def _find():
    global reason
    reason = None
    setting = os.environ.get("ADJOINT_FASTLAUNCH", "")
    if setting == "0":
        reason = "ADJOINT_FASTLAUNCH=0"
        return None
    if setting not in ("", "1"):
        try:
            return _load_from(setting)
        except ImportError as error:
            reason = "ADJOINT_FASTLAUNCH=%s: %s" % (setting, error)
            return None
    try:
        from . import _fastlaunch
        return _fastlaunch
    except ImportError as error:
        reason = "not in the package (%s)" % error
    for directory in _build_lib_directories():
        for path in sorted(glob.glob(os.path.join(directory, "_fastlaunch*.so"))):
            try:
                loaded = _load_from(path)
                reason = None
                return loaded
            except ImportError as error:
                reason = "cannot load %s: %s" % (path, error)
    return None


def _build_lib_directories():
    """The build directories searched after the package, in order: the one of $ADJOINT_LIBRARY
    (which _capi loads first), then build/lib of this checkout. Without the first, a build
    staged elsewhere (scripts/gpu-check --stage) would launch through ctypes unnoticed."""
    directories = []
    library = os.environ.get("ADJOINT_LIBRARY", "")
    if library:
        directories.append(os.path.dirname(os.path.abspath(library)))
    here = os.path.dirname(os.path.abspath(__file__))
    checkout = os.path.normpath(os.path.join(here, "..", "..", "build", "lib"))
    if checkout not in directories:
        directories.append(checkout)
    return directories


def module():
    """The adjoint._fastlaunch module, or None (then `reason` says why)."""
    global _module
    if _module is _UNSET:
        _module = _find()
    return _module


def set_enabled(enabled):
    """Turns the compiled path on (where it is found) or off for Programs prepared from now on;
    for tests and comparisons. Returns whether it is now in use."""
    global _module, reason
    _module = _UNSET
    if not enabled:
        _module, reason = None, "turned off by set_enabled(False)"
        return False
    return module() is not None
