# The wheel as installed (scripts/wheel.sh made it portable): its binaries need nothing from the machine but
# what every manylinux system has, each library it bundles carries its license, and the `tern` console script
# runs the CLI it ships.
import os
import pathlib
import re
import subprocess
import sys

import pytest

import tern
from conftest import REPO

PACKAGE = pathlib.Path(tern.__file__).resolve().parent
BUNDLED = PACKAGE.parent / "tern_runtime.libs"
# What a manylinux system provides (auditwheel's policies: glibc's libraries, libgcc_s, libstdc++, zlib);
# auditwheel bundles the rest.
SYSTEM_LIBRARIES = re.compile(r"^(linux-vdso|ld-linux-x86-64|libc|libm|libpthread|libdl|librt|libgcc_s|libstdc\+\+|libz)\.so")

pytestmark = pytest.mark.skipif(os.environ.get("TERN_LIBRARY") is not None or not BUNDLED.is_dir(),
                                reason="not the wheel scripts/wheel.sh makes (TERN_LIBRARY set, or no tern_runtime.libs)")


def bundled_stem(library):
    """libprotobuf for auditwheel's tern_runtime.libs/libprotobuf-92983d5d.so.32.0.12 (stem-hash.so.N)."""
    return re.match(r"(.+)-[0-9a-f]{8}\.so", library.name).group(1)


def binaries():
    return [PACKAGE / "libtern.so", PACKAGE / "bin" / "tern"] + sorted(BUNDLED.iterdir())


def test_the_binaries_need_only_what_every_manylinux_system_has():
    for binary in binaries():
        out = subprocess.run(["ldd", str(binary)], capture_output=True, text=True, check=True).stdout
        for line in out.splitlines():
            name = line.split()[0]
            assert "not found" not in line, f"{binary.name}: {line.strip()}"
            where = line.split("=>")[1].split("(")[0].strip() if "=>" in line else ""
            inside = bool(where) and pathlib.Path(where).resolve().parent == BUNDLED.resolve()
            assert inside or SYSTEM_LIBRARIES.match(pathlib.Path(name).name), f"{binary.name} takes {name} from {where}"


def test_each_bundled_library_carries_its_license():
    assert sorted(BUNDLED.iterdir()), "auditwheel bundled nothing"
    for library in BUNDLED.iterdir():
        notice = PACKAGE / "licenses" / f"{bundled_stem(library)}.txt"
        assert notice.is_file() and "Copyright" in notice.read_text(errors="replace"), f"no license for {library.name}"


def test_the_console_script_runs_the_shipped_cli():
    script = pathlib.Path(sys.executable).parent / "tern"
    version = subprocess.run([str(script), "--version"], capture_output=True, text=True, check=True).stdout
    assert version.startswith("tern " + tern.__version__)
    model = REPO / "models" / "default"
    if not model.is_dir():
        pytest.skip(f"{model} not found (scripts/get-models.sh)")
    run = ["generate", "--model", str(model), "--prompt", "Once upon a time", "--max-new-tokens", "12", "--greedy"]
    shipped = subprocess.run([str(script)] + run, capture_output=True, text=True, check=True).stdout
    built = REPO / "build" / "tern"
    if built.is_file():  # the same tokens as the checkout's own build of the CLI
        assert shipped == subprocess.run([str(built)] + run, capture_output=True, text=True, check=True).stdout
    assert len(shipped.strip()) > len("Once upon a time")


def test_it_runs_where_the_debian_libraries_it_bundles_are_absent(tmp_path):
    # Each system library the wheel bundles a copy of is hidden (/dev/null bound over it in a mount namespace of
    # its own), as on a machine without those Debian packages: the CLI and the Python chat example still run.
    system_dir = pathlib.Path("/usr/lib/x86_64-linux-gnu")
    hidden = []
    for library in BUNDLED.iterdir():
        hidden += [str(p) for p in system_dir.glob(bundled_stem(library) + ".so*") if p.is_file() and not p.is_symlink()]
    if not hidden:
        pytest.skip(f"none of the bundled libraries is installed in {system_dir}: nothing to hide")
    probe = subprocess.run(["unshare", "-m", "--propagation", "private", "true"], capture_output=True)
    if probe.returncode != 0:
        pytest.skip(f"cannot make a mount namespace here (unshare: {probe.stderr.decode().strip()})")
    chat = REPO / "examples" / "python" / "chat.py"
    model = REPO / "models" / "default"
    if not model.is_dir():
        pytest.skip(f"{model} not found (scripts/get-models.sh)")
    script = tmp_path / "hidden.sh"
    script.write_text("set -e\n" + "".join(f"mount --bind /dev/null {p}\n" for p in hidden) +
                      f"! ldd {BUNDLED.parent / 'tern' / 'bin' / 'tern'} | grep -q 'not found'\n"
                      f"{pathlib.Path(sys.executable).parent / 'tern'} --version\n"
                      f"echo 'Hello' | {sys.executable} {chat} --model {model} --max-new-tokens 8\n")
    out = subprocess.run(["unshare", "-m", "--propagation", "private", "sh", str(script)], capture_output=True, text=True)
    assert out.returncode == 0, out.stderr
    assert out.stdout.startswith("tern " + tern.__version__) and "> " in out.stdout
