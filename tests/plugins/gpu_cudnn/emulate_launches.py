#!/usr/bin/env python3
"""emulate_launches.py — rewrites the kernel launches of a .cu file for cuda_emulation.h:
`name<<<grid, block, 0, stream>>>(args)` becomes `cuda_emulation::launch(grid, block, name, args)`.
Fails when a launch does not have that shape, so a new launch form is noticed, not miscompiled.
Usage: emulate_launches.py IN.cu OUT"""
import re
import sys

src = open(sys.argv[1]).read()
launch = re.compile(r"(\w+)<<<(.*?)>>>\(", re.S)
count = 0


def rewrite(m):
    global count
    parts = [p.strip() for p in m.group(2).split(",")]
    if len(parts) != 4 or parts[2] != "0" or parts[3] != "stream":
        sys.exit(f"emulate_launches: unexpected launch {m.group(0)!r}")
    count += 1
    return f"cuda_emulation::launch({parts[0]}, {parts[1]}, {m.group(1)}, "


out = launch.sub(rewrite, src)
if count == 0 or "<<<" in out:
    sys.exit("emulate_launches: no launch found, or one left unrewritten")
open(sys.argv[2], "w").write(f"// generated from {sys.argv[1]} by emulate_launches.py\n" + out)
