"""No include cycles between the folders of src/ (docs/design.md, "Layers").

Each folder of src/ is one node (src/proxy/*.c and *.h are "proxy"), each
file directly in src/ one node of its own ("hub", "config"); a quoted
#include of another node's header is an edge.  A cycle - proxy includes
server/, server/ includes proxy/ - means two layers that cannot be
understood, tested or replaced apart, and fails the check, naming the
includes that close it.

    /usr/bin/python3 scripts/check_layers.py [SRC_DIR]

Before it looks at the tree it checks itself on a small made-up tree with a
cycle, so that a checker that can no longer fail does not pass quietly.
Last line: "RESULT: N passed, M failed" (scripts/run-tests.sh adds it up).
"""

import os
import re
import sys
import tempfile

INCLUDE = re.compile(r'^\s*#\s*include\s+"([^"]+)"')


def node_of(src, relpath):
    """The node a file of src belongs to: its folder, or its stem at the top."""
    parts = relpath.split("/")
    if len(parts) > 1:
        return parts[0]
    return os.path.splitext(parts[0])[0]


def target_of(src, inc):
    """The node an include names, or None for a header outside src/."""
    if not os.path.isfile(os.path.join(src, inc)):
        return None  # a system or generated header (version.h)
    return node_of(src, inc)


def edges_of(src):
    """{(from, to): "file:line: #include ..."} for includes across nodes."""
    edges = {}
    for dirpath, _, files in os.walk(src):
        for f in sorted(files):
            if not f.endswith((".c", ".h")):
                continue
            path = os.path.join(dirpath, f)
            rel = os.path.relpath(path, src)
            here = node_of(src, rel)
            with open(path, encoding="utf-8", errors="replace") as fh:
                for n, line in enumerate(fh, 1):
                    m = INCLUDE.match(line)
                    if not m:
                        continue
                    there = target_of(src, m.group(1))
                    if there and there != here and (here, there) not in edges:
                        edges[(here, there)] = "%s:%d: %s" % (rel, n, line.strip())
    return edges


def cycles(edges):
    """The strongly connected components with more than one node (Tarjan)."""
    graph = {}
    for a, b in edges:
        graph.setdefault(a, []).append(b)
        graph.setdefault(b, [])
    index, low, stack, on_stack, out = {}, {}, [], set(), []

    def visit(v):
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in graph[v]:
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                out.append(sorted(comp))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return out


def report(src):
    """Lines describing each cycle of src (empty when there is none)."""
    edges = edges_of(src)
    lines = []
    for comp in cycles(edges):
        lines.append("include cycle between %s:" % ", ".join(comp))
        for (a, b), where in sorted(edges.items()):
            if a in comp and b in comp:
                lines.append("    %s -> %s   %s" % (a, b, where))
    return lines


def self_check():
    """A made-up tree with a cycle must be reported."""
    with tempfile.TemporaryDirectory() as d:
        files = {"a/x.c": '#include "b/y.h"\n', "b/y.h": "", "b/y.c": '#include "a/x.h"\n',
                 "a/x.h": "", "c/z.c": '#include "a/x.h"\n#include "top.h"\n', "top.h": ""}
        for rel, text in files.items():
            os.makedirs(os.path.dirname(os.path.join(d, rel)), exist_ok=True)
            with open(os.path.join(d, rel), "w") as f:
                f.write(text)
        lines = report(d)
        return bool(lines) and lines[0] == "include cycle between a, b:"


def main():
    src = sys.argv[1] if len(sys.argv) > 1 else os.path.join(
        os.path.dirname(os.path.abspath(__file__)), "..", "src")
    passed = failed = 0
    if self_check():
        passed += 1
        print("ok    the checker finds a cycle in a made-up tree")
    else:
        failed += 1
        print("FAIL  the checker misses a cycle in a made-up tree")
    lines = report(src)
    if lines:
        failed += 1
        print("FAIL  folders of %s include each other:" % src)
        for line in lines:
            print("    " + line)
    else:
        passed += 1
        print("ok    no include cycle between the folders of src/")
    print("RESULT: %d passed, %d failed" % (passed, failed))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
