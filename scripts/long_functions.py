#!/usr/bin/env python3
"""long_functions.py — lists the C++ functions under host/ (or the given folders) longer than a
limit (80 lines by default), for the project's rule: no function in host/ over 80 lines without a
reason written beside it.

A function's length is counted from the first line of its signature to its closing brace. A
function may stand over the limit when the comment block just above it (or its signature) holds a
line `long-function: REASON`; it is then listed apart, with its reason, and does not fail.

How it reads C++: a brace-matching parse, not a compiler. Comments, string and character literals
are blanked first; each `{` is classed by the text before it (since the last `;`, `{` or `}`): a
function body when that text ends in a parameter list `)` (with const, noexcept, override, a
trailing return type or a constructor's initializer list after it) and does not start with a
control keyword (if, for, while, switch, catch). Only outermost function bodies are counted, so a
lambda is part of the function it is in; a class's member functions defined in the class body are
counted each on their own. Macros that hide braces, or a lambda at namespace scope, can fool it:
it is a dev tool to find long functions, not a proof that there are none.

Usage: scripts/long_functions.py [--max-lines 80] [PATH...]   (default PATH: host)
Exit status: 1 when a function without a reason is over the limit, 0 otherwise.
"""
import argparse
import pathlib
import re
import sys

CONTROL = re.compile(r"^\s*(?:else\s+)?(?:if|for|while|switch|catch|do|try|else)\b")
# What may stand after a parameter list's ')' and before the body's '{'.
AFTER_PARAMS = re.compile(
    r"\)\s*(?:const|noexcept(?:\s*\([^()]*\))?|override|final|mutable|&|&&|\s)*"
    r"(?:->\s*[\w:<>,\s*&]+)?\s*$")
REASON = re.compile(r"long-function:\s*(\S.*)")


def blank_comments_and_strings(text):
    """The text with comments, string and character literals replaced by spaces (newlines kept),
    so that braces inside them do not count; line numbers stay as they are."""
    out = []
    i, n = 0, len(text)
    while i < n:
        c = text[i]
        if text.startswith("//", i):
            j = text.find("\n", i)
            j = n if j < 0 else j
            out.append(" " * (j - i))
            i = j
        elif text.startswith("/*", i):
            j = text.find("*/", i + 2)
            j = n if j < 0 else j + 2
            out.append(re.sub(r"[^\n]", " ", text[i:j]))
            i = j
        elif text.startswith('R"', i) and (i == 0 or not (text[i - 1].isalnum() or text[i - 1] == "_")):
            m = re.match(r'R"([^()\\\s]{0,16})\(', text[i:])
            if not m:
                out.append(c)
                i += 1
                continue
            end = text.find(")" + m.group(1) + '"', i)
            j = n if end < 0 else end + len(m.group(1)) + 2
            out.append(re.sub(r"[^\n]", " ", text[i:j]))
            i = j
        elif c in "\"'":
            # A digit separator (1'000) is not a character literal.
            if c == "'" and i > 0 and text[i - 1].isalnum() and i + 1 < n and text[i + 1].isalnum():
                out.append(" ")
                i += 1
                continue
            j = i + 1
            while j < n and text[j] != c and text[j] != "\n":
                j += 2 if text[j] == "\\" else 1
            j = min(j + 1, n)
            out.append(c + " " * (j - i - 2) + c if j - i >= 2 else " " * (j - i))
            i = j
        elif c == "#" and (i == 0 or text[i - 1] == "\n"):
            # A preprocessor line (and its continuations) is not C++ the parse can class.
            j = i
            while True:
                k = text.find("\n", j)
                if k < 0:
                    k = n
                    break
                if text[k - 1] != "\\":
                    break
                j = k + 1
            out.append(re.sub(r"[^\n]", " ", text[i:k]))
            i = k
        else:
            out.append(c)
            i += 1
    return "".join(out)


def is_function_head(head):
    """Whether the text before a '{' makes it a function body."""
    flat = re.sub(r"^(?:public|private|protected)\s*:(?!:)\s*", "", " ".join(head.split()))
    if not flat or CONTROL.match(flat):
        return False
    if re.match(r"^(?:\w+\s+)*(?:namespace|class|struct|union|enum)\b", flat) and "(" not in flat:
        return False
    if AFTER_PARAMS.search(flat):
        # `x = f(a) {` does not occur; `auto f = [..](..) {` is a lambda at namespace scope.
        return not re.search(r"(?:^|[^=!<>])=\s*[^=]", flat.split("(")[0])
    # A constructor's initializer list, complete: `) : a_(x), b_{y} {`.
    return re.search(r"\)\s*:\s*[\w:]+\s*[({]", flat) is not None and flat.endswith((")", "}"))


def functions(path):
    """(name, first line, last line, reason or None) of each outermost function body in `path`."""
    raw = path.read_text(errors="replace")
    text = blank_comments_and_strings(raw)
    raw_lines = raw.split("\n")
    stack = []  # per open '{': (is it (inside) a function body?, its start, its head's start)
    head_start = 0  # where the text before the next '{' begins
    closed_head_start = 0  # the head's start of the block that closed last
    found = []
    for i, c in enumerate(text):
        if c in ";":
            head_start = i + 1
        elif c == "{":
            inside = any(kind for kind, _, _ in stack)
            if re.fullmatch(r"\s*(?:,.*)?", text[head_start:i], re.S):
                # After a brace initializer (`b_{y} {`, `{1}, {2}`): the head goes on before it.
                head_start = closed_head_start
            head = text[head_start:i]
            is_fn = not inside and is_function_head(head)
            start = i
            if is_fn:
                # The signature's first line: skip the blank text and an access label before it.
                label = re.match(r"\s*(?:(?:public|private|protected)\s*:(?!:))?\s*", head)
                start = head_start + label.end()
            stack.append((is_fn or inside, start if is_fn else None, head_start))
            head_start = i + 1
        elif c == "}":
            if stack:
                inside, start, closed_head_start = stack.pop()
                if start is not None:
                    first = text.count("\n", 0, start) + 1
                    last = text.count("\n", 0, i) + 1
                    head = " ".join(text[start:text.index("{", start)].split())
                    name = re.sub(r"\s*\(.*", "", head).split(" ")[-1] or head[:40]
                    found.append((name, first, last, reason_for(raw_lines, first, last)))
            head_start = i + 1
    return found


def reason_for(lines, first, last):
    """A `long-function:` reason in the comment block just above line `first` or on the lines of
    the signature (up to the body's first line)."""
    k = first - 2  # 0-based index of the line above the signature
    while k >= 0 and lines[k].strip().startswith("//"):
        m = REASON.search(lines[k])
        if m:
            return m.group(1).strip()
        k -= 1
    for line in lines[first - 1:min(last, first + 5)]:
        m = REASON.search(line)
        if m:
            return m.group(1).strip()
        if "{" in line:
            break
    return None


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--max-lines", type=int, default=80)
    parser.add_argument("paths", nargs="*", default=["host"])
    args = parser.parse_args()
    files = []
    for p in map(pathlib.Path, args.paths):
        if p.is_dir():
            files += sorted(f for f in p.rglob("*") if f.suffix in (".cpp", ".h", ".cc", ".hpp", ".cu"))
        elif p.exists():
            files.append(p)
        else:
            print(f"long_functions: {p}: no such file or folder", file=sys.stderr)
            return 2
    over, excused = [], []
    for f in files:
        for name, first, last, reason in functions(f):
            length = last - first + 1
            if length > args.max_lines:
                (excused if reason else over).append((length, f"{f}:{first}", name, reason))
    for length, where, name, _ in sorted(over, reverse=True):
        print(f"{length:5d}  {where}  {name}")
    for length, where, name, reason in sorted(excused, reverse=True):
        print(f"{length:5d}  {where}  {name}  (long-function: {reason})")
    print(f"{len(over)} function(s) over {args.max_lines} lines without a reason, "
          f"{len(excused)} with one, in {len(files)} file(s)")
    return 1 if over else 0


if __name__ == "__main__":
    sys.exit(main())
