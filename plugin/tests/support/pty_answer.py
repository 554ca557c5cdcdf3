#!/usr/bin/env python3
"""Runs a command on a pseudo-terminal (its stdin, stdout and stderr) and answers its y/N
question as the test says.

Usage: pty_answer.py PROMPT -- COMMAND ARGS...

When PROMPT appears in the command's output, prints `PROMPTED` on this script's stdout and
reads one line from this script's stdin: `y` or `n` is typed on the terminal (with Enter),
`EOF` sends the terminal's end-of-file (Ctrl-D at the start of a line). At the end, prints
`OUTPUT` and everything the command wrote, and exits with the command's exit status.
"""

import os
import pty
import select
import signal
import sys
import time

# How long the whole command may take; a simulated migration takes seconds.
TIMEOUT_SECONDS = 240


def main():
    if len(sys.argv) < 4 or sys.argv[2] != "--":
        sys.stderr.write(__doc__)
        return 2
    prompt = sys.argv[1].encode()
    command = sys.argv[3:]
    pid, fd = pty.fork()
    if pid == 0:
        os.execvp(command[0], command)
    output = b""
    answered = False
    deadline = time.monotonic() + TIMEOUT_SECONDS
    while True:
        remaining = deadline - time.monotonic()
        ready, _, _ = select.select([fd], [], [], max(remaining, 0))
        if not ready:
            # The command hangs (a question that waits on): end it, and say so.
            os.kill(pid, signal.SIGKILL)
            os.waitpid(pid, 0)
            sys.stdout.write("OUTPUT\nTIMEOUT after %d seconds\n" % TIMEOUT_SECONDS)
            sys.stdout.write(output.decode(errors="replace"))
            return 124
        try:
            chunk = os.read(fd, 4096)
        except OSError:
            # EIO: the command closed the terminal (it exited).
            break
        if not chunk:
            break
        output += chunk
        if not answered and prompt in output:
            answered = True
            sys.stdout.write("PROMPTED\n")
            sys.stdout.flush()
            answer = sys.stdin.readline().strip()
            if answer == "EOF":
                os.write(fd, b"\x04")
            else:
                os.write(fd, answer.encode() + b"\r")
    _, status = os.waitpid(pid, 0)
    sys.stdout.write("OUTPUT\n")
    sys.stdout.write(output.decode(errors="replace"))
    sys.stdout.flush()
    if os.WIFEXITED(status):
        return os.WEXITSTATUS(status)
    return 128 + os.WTERMSIG(status)


if __name__ == "__main__":
    sys.exit(main())
