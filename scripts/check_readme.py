#!/usr/bin/python3
"""Checks that the outputs README.md and the documentation pages (docs/) show are what their
commands print (ctest -R readme).

Marking blocks. An HTML comment (invisible on GitHub) on the line just before a fenced block:

    <!-- readme-check: NAME commands -->          the block's lines are commands to run
    <!-- readme-check: NAME commands, in DIR -->  the same, where ./prog means DIR/prog
    <!-- readme-check: NAME output -->            lines the commands of NAME must print

Every NAME has one commands block and one output block, in either order.

Running the commands. Each non-empty line of a commands block (`# comments` removed; a line that
ends in a backslash goes on on the next) is split into words as the shell would (shlex) and run
without a shell, in a new empty temporary directory that the block's commands share, and must
exit with status 0. Words are first read as a reader at the repository root means them:
  - `cd DIR` runs nothing: ./prog in the later commands is DIR/prog (as `, in DIR` in the marker);
  - build/dev/... is in the build tree under test (--build-dir);
  - another relative path whose first component exists in the source tree, such as
    examples/h5ad/make_h5ad.py, is in the source tree (--source-dir);
  - a command `mpirun` is --mpirun with --oversubscribe (4 ranks on fewer cores) and, when run as
    root, --allow-run-as-root.
Pipes, redirections, `&&`, `;` and $variables are not supported: a block that uses them fails.

Checking the output. Every non-empty line of an output block must be a whole line of what the
commands printed (stdout and stderr together, trailing blanks ignored), in the block's order.
Timing lines are the exception, since their numbers change from run to run: a line with a number
followed by " s" or with a rate ("/s") is compared with every number in it, and in the printed
lines, replaced by "#"; so its words and units are checked, its numbers not. For example
`read 12000 rows, 9.7 MB in 0.038 s: 315070 rows/s, 255 MB/s` matches any printed
`read # rows, # MB in # s: # rows/s, # MB/s`.

A shown line that was not printed fails the check (exit status 1) with a message naming its file
and line; so do a command that fails, a malformed marker, a marker that is not just before a
fenced block, a NAME without both blocks in its file, and files none of which has a marked block.
Each file given to --readme is checked on its own; a NAME belongs to one file.

--catches-mismatch checks the checker instead: it copies the first file that has such a line with
one digit changed in the first shown line that has a digit and no timing (the last digit of its first number of two
digits or more), runs the check on the copy (that block only)
and passes only if the check fails and names exactly the changed line.

    /usr/bin/python3 scripts/check_readme.py --readme README.md docs/*/*.md --source-dir . --build-dir build/dev
"""

import argparse
import os
import re
import shlex
import subprocess
import sys
import tempfile
from pathlib import Path

MARKER = re.compile(r"^<!--\s*readme-check:\s*(?P<name>[\w.-]+)\s+(?P<kind>commands|output)"
                    r"(?:,\s*in\s+(?P<dir>\S+))?\s*-->\s*$")
FENCE = re.compile(r"^(```+|~~~+)")
TIMING = re.compile(r"\d s\b|/s\b")
NUMBER = re.compile(r"\d+(?:\.\d+)?")
COMMAND_TIMEOUT = 120  # seconds, per command


class ReadmeError(Exception):
    pass


def parse_blocks(readme, required=True):
    """{name: {kind: (marker line number, [(line number, text), ...], dir)}} from the marked blocks;
    a file without any is an error when REQUIRED."""
    lines = readme.read_text().splitlines()
    blocks = {}
    for i, line in enumerate(lines):
        if not line.lstrip().startswith("<!--") or "readme-check" not in line:
            continue
        where = f"{readme}:{i + 1}"
        match = MARKER.match(line.strip())
        if not match:
            raise ReadmeError(f"{where}: not a marker of the form '<!-- readme-check: NAME commands|output -->': "
                              f"{line.strip()}")
        if i + 1 >= len(lines) or not FENCE.match(lines[i + 1]):
            raise ReadmeError(f"{where}: the marker is not on the line just before a fenced block")
        fence = FENCE.match(lines[i + 1]).group(1)
        body = []
        for j in range(i + 2, len(lines)):
            if lines[j].strip() == fence:
                break
            body.append((j + 1, lines[j]))
        else:
            raise ReadmeError(f"{readme}:{i + 2}: the fenced block never ends")
        name, kind = match["name"], match["kind"]
        if kind == "output" and match["dir"]:
            raise ReadmeError(f"{where}: ', in DIR' belongs on a commands marker")
        if kind in blocks.setdefault(name, {}):
            raise ReadmeError(f"{where}: a second '{name} {kind}' block (the first is at "
                              f"{readme}:{blocks[name][kind][0]})")
        blocks[name][kind] = (i + 1, body, match["dir"])
    if not blocks and required:
        raise ReadmeError(f"{readme}: no block marked <!-- readme-check: NAME commands|output -->")
    for name, kinds in blocks.items():
        for kind in ("commands", "output"):
            if kind not in kinds:
                other = next(iter(kinds.values()))[0]
                raise ReadmeError(f"{readme}:{other}: '{name}' has no '{name} {kind}' block")
    return blocks


def commands_of(readme, body):
    """[(line number, words)] of a commands block, continuation lines joined."""
    commands, pending, first = [], "", None
    for number, text in body:
        if first is None:
            first = number
        if text.rstrip().endswith("\\"):
            pending += text.rstrip()[:-1] + " "
            continue
        line, pending = pending + text, ""
        try:
            words = shlex.split(line, comments=True)
        except ValueError as error:
            raise ReadmeError(f"{readme}:{first}: {error}: {line.strip()}")
        for word in words:
            if word in ("|", "||", "&&", ";", "&") or word[:1] in ("<", ">") or word.endswith((";", "&")) \
                    or "$" in word:
                raise ReadmeError(f"{readme}:{first}: '{word}': only plain commands are supported")
        if words:
            commands.append((first, words))
        first = None
    return commands


def resolve(word, args):
    if word.startswith("build/dev/") or word == "build/dev":
        return str(args.build_dir / word[len("build/dev/"):])
    if "/" in word and not word.startswith(("/", "-", "./", "../")):
        if (args.source_dir / word.split("/")[0]).exists():
            return str(args.source_dir / word)
    return word


def run_block(readme, name, block, args):
    """Runs the commands of one block; returns (their output, the README lines they came from)."""
    marker, body, directory = block
    program_dir = Path(resolve(directory, args)) if directory else None
    mpirun_flags = ["--oversubscribe"] + (["--allow-run-as-root"] if os.geteuid() == 0 else [])
    output = []
    with tempfile.TemporaryDirectory(prefix=f"readme-check-{name}-") as work:
        for number, words in commands_of(readme, body):
            if words[0] == "cd":
                if len(words) != 2:
                    raise ReadmeError(f"{readme}:{number}: cd takes one directory")
                program_dir = Path(resolve(words[1], args))
                continue
            command = [resolve(w, args) for w in words]
            if program_dir is not None:
                command = [str(program_dir / w[2:]) if w.startswith("./") else w for w in command]
            if command[0] == "mpirun":
                command = [args.mpirun] + mpirun_flags + command[1:]
            print(f"{readme}:{number}: {shlex.join(command)}", flush=True)
            try:
                done = subprocess.run(command, cwd=work, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                                      stdin=subprocess.DEVNULL, text=True, timeout=COMMAND_TIMEOUT)
            except (OSError, subprocess.TimeoutExpired) as error:
                raise ReadmeError(f"{readme}:{number}: the command did not run: {error}")
            print(done.stdout, end="", flush=True)
            if done.returncode != 0:
                raise ReadmeError(f"{readme}:{number}: the command exited with {done.returncode}")
            output.extend(done.stdout.splitlines())
    return [line.rstrip() for line in output], marker


def mask(line):
    return NUMBER.sub("#", line)


def check_output(readme, name, expected, printed, commands_at):
    """Messages for the shown lines that were not printed, in order."""
    failures, position = [], 0
    for number, text in expected:
        want = text.rstrip()
        if not want:
            continue
        timing = bool(TIMING.search(want))
        same = (lambda line: mask(line) == mask(want)) if timing else (lambda line: line == want)
        found = next((k for k in range(position, len(printed)) if same(printed[k])), None)
        if found is not None:
            position = found + 1
            continue
        earlier = any(same(line) for line in printed[:position])
        how = "printed before the line shown above it" if earlier else "not printed"
        if timing:
            how += " (a timing line: compared with its numbers masked, as " + mask(want) + ")"
        failures.append(f"{readme}:{number}: {how} by the '{name}' commands of {readme}:{commands_at}:\n    {want}")
    return failures


def marked_files(args):
    """[(file, its blocks)] of the files given that have marked blocks; one of them must."""
    files = [(readme, parse_blocks(readme, required=len(args.readme) == 1)) for readme in args.readme]
    files = [(readme, blocks) for readme, blocks in files if blocks]
    if not files:
        raise ReadmeError(f"{', '.join(map(str, args.readme))}: no block marked <!-- readme-check: NAME commands|output -->")
    return files


def check(args):
    files = marked_files(args)
    if args.only and not any(args.only in blocks for _, blocks in files):
        raise ReadmeError(f"{', '.join(map(str, args.readme))}: no block is named '{args.only}'")
    failures = []
    for readme, blocks in files:
        for name in [args.only] if args.only else list(blocks):
            if name not in blocks:
                continue
            printed, commands_at = run_block(readme, name, blocks[name]["commands"], args)
            _, expected, _ = blocks[name]["output"]
            found = check_output(readme, name, expected, printed, commands_at)
            failures += found
            shown = sum(1 for _, text in expected if text.strip())
            print(f"{readme}:{blocks[name]['output'][0]}: '{name}': "
                  f"{shown - len(found)} of {shown} shown lines printed", flush=True)
    return failures


def catches_mismatch(args):
    """Passes (returns 0) when the check of a copy with one changed digit fails on that line."""
    target = None
    for readme, blocks in marked_files(args):
        for name, kinds in blocks.items():
            for number, text in kinds["output"][1]:
                if re.search(r"\d", text) and not TIMING.search(text):
                    target = (readme, name, number, text)
                    break
            if target:
                break
        if target:
            break
    if not target:
        print(f"{', '.join(map(str, args.readme))}: no shown output line has a digit to change", file=sys.stderr)
        return 1
    readme, name, number, text = target
    # the last digit of the first number of two digits or more (9920 -> 9921), else the first digit
    digit = re.search(r"(?<=\d)\d(?!\d)", text) or re.search(r"\d", text)
    changed = text[:digit.start()] + str((int(digit.group()) + 1) % 10) + text[digit.end():]
    lines = readme.read_text().splitlines(keepends=True)
    lines[number - 1] = changed + "\n"
    with tempfile.TemporaryDirectory(prefix="readme-check-copy-") as copy_dir:
        copy = Path(copy_dir) / readme.name
        copy.write_text("".join(lines))
        print(f"{readme}:{number}: changed to\n    {changed}\nin {copy}; the check of '{name}' must fail there")
        done = subprocess.run([sys.executable, __file__, "--readme", str(copy), "--source-dir", str(args.source_dir),
                               "--build-dir", str(args.build_dir), "--mpirun", args.mpirun, "--only", name],
                              stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, timeout=600)
        print(done.stdout, end="")
        reported = re.findall(r"^FAIL: " + re.escape(str(copy)) + r":(\d+): (?:not printed|printed before)",
                              done.stdout, re.MULTILINE)
    if done.returncode == 1 and reported == [str(number)]:
        print(f"PASS: the check failed, naming the changed line {number} and no other")
        return 0
    print(f"FAIL: expected exit status 1 and a report of line {number} only; got exit status "
          f"{done.returncode} and reports of lines {reported}", file=sys.stderr)
    return 1


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--readme", type=Path, nargs="+", required=True,
                        help="README.md and the documentation pages whose marked blocks to check")
    parser.add_argument("--source-dir", type=Path, required=True, help="the repository root")
    parser.add_argument("--build-dir", type=Path, required=True, help="what build/dev means")
    parser.add_argument("--mpirun", default="mpirun", help="the mpirun to run (mpirun)")
    parser.add_argument("--only", help="check only the blocks of this NAME")
    parser.add_argument("--catches-mismatch", action="store_true",
                        help="check that a copy with one digit changed fails the check")
    args = parser.parse_args()
    args.source_dir, args.build_dir = args.source_dir.resolve(), args.build_dir.resolve()
    try:
        if args.catches_mismatch:
            return catches_mismatch(args)
        failures = check(args)
    except ReadmeError as error:
        print(f"FAIL: {error}", file=sys.stderr)
        return 1
    for failure in failures:
        print(f"FAIL: {failure}", file=sys.stderr)
    if failures:
        return 1
    print("PASS: every shown output line was printed by its commands")
    return 0


if __name__ == "__main__":
    sys.exit(main())
