"""Scripted stdio children for the `mcp-layers wrap` tests (standard library only).

stdio_scripted.py echo COPY    # stdin to stdout byte for byte, and a copy into COPY
stdio_scripted.py partial      # writes half a line, then waits for stdin's EOF
stdio_scripted.py term         # prints its process group; exits 5 on SIGTERM
"""

import os
import signal
import sys
import time


def echo(copy: str) -> None:
    with open(copy, "wb", buffering=0) as f:
        while data := os.read(0, 1 << 16):
            f.write(data)
            view = memoryview(data)
            while view:
                view = view[os.write(1, view) :]


def partial() -> None:
    os.write(1, b'{"jsonrpc":"2.0","id":1,')
    while os.read(0, 1 << 16):
        pass


def term() -> None:
    def on_term(_signum: int, _frame: object) -> None:
        os.write(1, b"got SIGTERM\n")
        os._exit(5)

    signal.signal(signal.SIGTERM, on_term)
    os.write(1, f"pgid {os.getpgid(0)}\n".encode())
    time.sleep(60)


if __name__ == "__main__":
    mode = sys.argv[1]
    if mode == "echo":
        echo(sys.argv[2])
    elif mode == "partial":
        partial()
    else:
        term()
