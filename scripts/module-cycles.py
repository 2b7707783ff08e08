#!/usr/bin/env python3
"""Lists import cycles between sibling modules in every crate of the workspace.

For each module, its child modules are collapsed to their subtrees; child X depends on child Y when any
file under X names a path under Y (`use crate::...`, `super::...`, or an inline `crate::a::b`). A cycle
among the children of one module is a cycle in the layering of that crate. A module naming its own
ancestor (`use super::*` in a submodule) is not counted: that is how Rust nests modules.

    python3 scripts/module-cycles.py        # exit 1 and one line per cycle, or "no module cycles"
"""
import os
import re
import sys

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..")


def modules(src):
    """Maps module path tuples to file paths for one crate's src directory."""
    mods = {}
    for dirpath, _, files in os.walk(src):
        for f in files:
            if not f.endswith(".rs"):
                continue
            rel = os.path.relpath(os.path.join(dirpath, f), src)
            parts = rel[:-3].split(os.sep)
            if parts in (["lib"], ["main"]):
                parts = []
            elif parts[-1] == "mod":
                parts = parts[:-1]
            mods[tuple(parts)] = os.path.join(dirpath, f)
    return mods


def expand(tree):
    """Expands a use tree `a::{b, c::{d, e}}` into paths."""
    tree = re.sub(r"\s+", "", tree)
    out = []

    def walk(prefix, t):
        depth, start, items = 0, 0, []
        for i, ch in enumerate(t):
            if ch == "{":
                depth += 1
            elif ch == "}":
                depth -= 1
            elif ch == "," and depth == 0:
                items.append(t[start:i])
                start = i + 1
        items.append(t[start:])
        for it in items:
            if not it:
                continue
            if "{" in it:
                head, _, rest = it.partition("{")
                walk(prefix + head, rest[: rest.rfind("}")])
            else:
                out.append((prefix + it).split(" as ")[0])

    walk("", tree)
    return out


def strip_comments(text):
    text = re.sub(r"//[^\n]*", "", text)
    text = re.sub(r'"(\\.|[^"\\])*"', '""', text)
    return text


def deps(mod, text, known):
    """Module paths (tuples) that the file of module `mod` names."""
    paths = []
    for m in re.finditer(r"\buse\s+([^;]+);", text):
        paths += expand(m.group(1))
    paths += re.findall(r"\b(?:crate|super|self)(?:::\w+)+", text)
    found = set()
    for p in paths:
        segs = [s for s in p.split("::") if s]
        if not segs:
            continue
        if segs[0] == "crate":
            base, segs = [], segs[1:]
        elif segs[0] in ("super", "self"):
            base = list(mod)
            while segs and segs[0] in ("super", "self"):
                if segs[0] == "super":
                    base = base[:-1]
                segs = segs[1:]
        else:
            continue
        target = tuple(base)
        for s in segs:
            if target + (s,) in known:
                target = target + (s,)
            else:
                break
        found.add(target)
    return found


def cycles(graph):
    """Strongly connected components of more than one node (Tarjan)."""
    index, low, stack, on, out, n = {}, {}, [], set(), [], [0]

    def visit(v):
        index[v] = low[v] = n[0]
        n[0] += 1
        stack.append(v)
        on.add(v)
        for w in graph.get(v, ()):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                out.append(sorted(comp))

    for v in list(graph):
        if v not in index:
            visit(v)
    return out


def main():
    found = []
    crates = os.path.join(ROOT, "crates")
    for crate in sorted(os.listdir(crates)):
        src = os.path.join(crates, crate, "src")
        if not os.path.isdir(src):
            continue
        mods = modules(src)
        known = set(mods)
        edges = {}
        for mod, path in mods.items():
            with open(path, encoding="utf-8") as f:
                text = strip_comments(f.read())
            # `#[cfg(test)] mod tests` bodies are the module's own tests: they count as the module.
            for t in deps(mod, text, known):
                edges.setdefault(mod, set()).add(t)
        # For every parent, the graph among its children, each child standing for its subtree.
        parents = {m[:-1] for m in known if m}
        for parent in sorted(parents):
            kids = {m for m in known if len(m) == len(parent) + 1 and m[: len(parent)] == parent}
            graph = {}
            for src_mod, targets in edges.items():
                if src_mod[: len(parent)] != parent or len(src_mod) <= len(parent):
                    continue
                a = src_mod[: len(parent) + 1]
                for t in targets:
                    if t[: len(parent)] != parent or len(t) <= len(parent):
                        continue
                    b = t[: len(parent) + 1]
                    if a != b and a in kids and b in kids:
                        graph.setdefault(a, set()).add(b)
            for comp in cycles(graph):
                names = ", ".join("::".join(c) for c in comp)
                found.append(f"{crate}: cycle among {names}")
    for line in found:
        print(line)
    if not found:
        print("no module cycles")
    return 1 if found else 0


if __name__ == "__main__":
    sys.exit(main())
