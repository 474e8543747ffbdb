"""The `tern` command of the wheel: runs the CLI built beside libtern.so (tern/bin/tern) with this process's
arguments, replacing the Python process, so signals, exit status and the terminal are the CLI's own."""
import os
import sys


def main():
    cli = os.path.join(os.path.dirname(os.path.abspath(__file__)), "bin", "tern")
    if not os.access(cli, os.X_OK):
        sys.exit(f"tern: the CLI is missing from this installation ({cli}); reinstall the tern-runtime wheel")
    os.execv(cli, [cli] + sys.argv[1:])


if __name__ == "__main__":
    main()
