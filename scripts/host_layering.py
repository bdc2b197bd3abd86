#!/usr/bin/env python3
"""host_layering.py — checks the layering of host/ (or the given root): the folders' include
graph must have no circle. Folder A depends on folder B when a file of A includes "B/...", as the
host's headers are included from the host/ root ("core/graph.h"). A circle (core includes
distributed and distributed includes core; or a longer chain back to its start) means neither
folder can be read, built or tested without the other, whatever the libraries' link order says:
host/CMakeLists.txt draws the intended order.

Each circle is printed with one include line per edge (FILE:LINE: #include "..."), so that the
fix is visible: move the file that closes the circle up (into a folder of its own), or the
include down.

How it reads C++: the `#include "folder/file"` lines at the start of a line, nothing else;
includes in <> (the SDK, libraries) and of files of the same folder are not edges.

Usage: scripts/host_layering.py [ROOT]   (default ROOT: host)
Exit status: 1 when the include graph has a circle, 0 otherwise.
"""
import pathlib
import re
import sys

INCLUDE = re.compile(r'^\s*#\s*include\s+"([A-Za-z0-9_]+)/[^"]+"')
SOURCES = (".h", ".hpp", ".cpp", ".cc")


def edges(root):
    """{folder: {other folder: (file, line number, line)}} over the folders of `root`: the first
    include of each pair, in file order."""
    folders = {p.name for p in root.iterdir() if p.is_dir()}
    graph = {f: {} for f in sorted(folders)}
    for folder in sorted(folders):
        for path in sorted((root / folder).rglob("*")):
            if path.suffix not in SOURCES or not path.is_file():
                continue
            for number, line in enumerate(path.read_text(errors="replace").splitlines(), 1):
                m = INCLUDE.match(line)
                if m and m.group(1) in folders and m.group(1) != folder:
                    graph[folder].setdefault(m.group(1), (path, number, line.strip()))
    return graph


def circles(graph):
    """Each elementary circle once, as a list of folders [a, b, ..., a], found by a depth-first
    search from every folder that keeps to folders after it in name order (so that a circle is
    reported from its smallest folder only)."""
    found = []

    def walk(start, path):
        for nxt in sorted(graph[path[-1]]):
            if nxt == start:
                found.append(path + [start])
            elif nxt > start and nxt not in path:
                walk(start, path + [nxt])

    for start in sorted(graph):
        walk(start, [start])
    return found


def main(argv):
    root = pathlib.Path(argv[1] if len(argv) > 1 else "host")
    graph = edges(root)
    found = circles(graph)
    for circle in found:
        print("circle: " + " -> ".join(circle))
        for a, b in zip(circle, circle[1:]):
            path, number, line = graph[a][b]
            print(f"  {path}:{number}: {line}")
    pairs = sum(len(v) for v in graph.values())
    print(f"{len(found)} circle(s) among {len(graph)} folders ({pairs} folder dependencies)")
    return 1 if found else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
