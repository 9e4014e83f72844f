"""optc's cache folder, as the Go side defines it (ort/install.CacheDir):
$OPTC_CACHE, else ${XDG_CACHE_HOME:-~/.cache}/optc. The one copy the
Python generators (scripts/zoo/gen.py, scripts/lm/train.py) share."""

import os


def cache_dir():
    d = os.environ.get("OPTC_CACHE")
    if d:
        return d
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return os.path.join(base, "optc")
