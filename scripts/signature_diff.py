"""Where our `T.*` names take other arguments than the public TileLang's: parameter names, positions, defaults.

surface.py says which names are missing; this says, for the names both have, where a call written for
the public TileLang would bind differently here. The public wheel runs in its own Python 3.12
interpreter with public_codegen.py's stand-in torch; nothing of it is imported into ours.

    python scripts/signature_diff.py [--module tilelang.language] [--json out.json]

Printed per name (only where they differ):
- `missing p`: a parameter the public signature has and ours does not accept (no **kwargs to take it);
- `position i: public p, ours q`: the i-th positional parameter differs (a positional call binds otherwise);
- `default p: public X, ours Y`: both have p, with different defaults (compared as their repr).
Names whose public object is not a plain function or class (TVM FFI objects, modules) are skipped.
"""
from __future__ import annotations

import argparse
import inspect
import json
import os
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from public_codegen import public_env, public_python, stand_in  # noqa: E402

_DUMP = r'''
import importlib, inspect, json, sys
mod = importlib.import_module(sys.argv[1])
print(json.dumps(SIGS(mod)))
'''

_SIGS = r'''
def SIGS(mod):
    import inspect
    out = {}
    for name in sorted(dir(mod)):
        if name.startswith("_"):
            continue
        try:
            obj = getattr(mod, name)
        except Exception:
            continue
        if inspect.ismodule(obj) or not callable(obj):
            continue
        if not (inspect.isfunction(obj) or inspect.isclass(obj) or inspect.ismethod(obj)):
            continue
        try:
            sig = inspect.signature(obj)
        except (TypeError, ValueError):
            continue
        out[name] = [(p.name, p.kind.name, None if p.default is p.empty else repr(p.default))
                     for p in sig.parameters.values()]
    return out
'''


def signatures(module: str) -> dict:
    """Our module's signatures, in this process."""
    import importlib
    ns: dict = {}
    exec(_SIGS, ns)
    return ns["SIGS"](importlib.import_module(module))


def public_signatures(module: str) -> dict | None:
    py = public_python("signature_diff")
    if py is None:
        return None
    with tempfile.TemporaryDirectory() as d:
        stand_in(d)
        r = subprocess.run([py, "-c", _SIGS + _DUMP, module], env=public_env(d), capture_output=True, text=True,
                           cwd=d)  # not ours: `-c` puts the working folder first on the path
    if r.returncode:
        print(r.stderr[-3000:], file=sys.stderr)
        return None
    return json.loads(r.stdout.strip().splitlines()[-1])


def compare(public: list, ours: list) -> list[str]:
    """What a call written against `public` would find different in `ours` (see the module docstring)."""
    out = []
    ours_by = {p[0]: p for p in ours}
    var_kw = any(k == "VAR_KEYWORD" for _, k, _ in ours)
    var_pos = any(k == "VAR_POSITIONAL" for _, k, _ in ours)
    positional = ("POSITIONAL_ONLY", "POSITIONAL_OR_KEYWORD")
    pub_pos = [p[0] for p in public if p[1] in positional]
    our_pos = [p[0] for p in ours if p[1] in positional]
    for name, kind, default in public:
        if kind in ("VAR_POSITIONAL", "VAR_KEYWORD"):
            continue
        mine = ours_by.get(name)
        if mine is None:
            if not (var_kw and kind != "POSITIONAL_ONLY") and not (var_pos and kind == "POSITIONAL_ONLY"):
                out.append(f"missing {name}")
            continue
        if default is not None and mine[2] is not None and default != mine[2]:
            out.append(f"default {name}: public {default}, ours {mine[2]}")
    if not var_pos:
        for i, name in enumerate(pub_pos):
            if i < len(our_pos) and our_pos[i] != name:
                out.append(f"position {i}: public {name}, ours {our_pos[i]}")
                break
    return out


def main(argv: list) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--module", default="tilelang.language")
    ap.add_argument("--json", default=None)
    args = ap.parse_args(argv)
    public = public_signatures(args.module)
    if public is None:
        return 2
    sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    ours = signatures(args.module)
    diffs = {n: compare(public[n], ours[n]) for n in sorted(public) if n in ours}
    diffs = {n: d for n, d in diffs.items() if d}
    for n, d in diffs.items():
        print(f"{n}: " + "; ".join(d))
    import importlib
    have = set(dir(importlib.import_module(args.module)))  # a name ours defines as a non-function (a DType) is here
    missing = sorted(set(public) - have)
    print(f"{len(diffs)} of {len(set(public) & set(ours))} shared callables differ "
          f"({len(missing)} public callables not here: {' '.join(missing)})")
    if args.json:
        with open(args.json, "w") as f:
            json.dump(diffs, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
