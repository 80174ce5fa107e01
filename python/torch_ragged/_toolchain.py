"""Build-time check of the op library's link: it must share the process's libstdc++ with torch.

Some toolchains (a GCC configured to link its C++ runtime statically, or ``-static-libstdc++`` in
LDFLAGS) put a private copy of libstdc++ into the extension. torch uses the shared libstdc++, and two
copies in one process do not agree on iostream locale facets: the first ``stream << some_int64`` in
the extension (every error message with a number in it) jumps into the wrong facet and segfaults.
setup.py relinks against the shared library when this check finds a copy (standard library only:
setup.py loads this file before torch_ragged can be imported).
"""

import shutil
import subprocess

# Mangled-name prefixes of libstdc++'s own, non-template runtime (std::locale, std::ios_base and the
# codecvt facets): defined only inside libstdc++, never by code that merely uses it.
LIBSTDCXX_RUNTIME_PREFIXES = ("_ZNSt6locale", "_ZNSt8ios_base", "_ZNKSt7codecvtI", "_ZNSt7codecvtI")


def private_libstdcxx_symbols(library_path: str) -> list[str] | None:
    """libstdc++ runtime symbols the library defines itself (a private copy), or None without nm."""
    nm = shutil.which("nm")
    if nm is None:
        return None
    found = set()
    for table in ([], ["--dynamic"]):  # the full symbol table, and the dynamic one of a stripped library
        listing = subprocess.run([nm, "--defined-only", *table, library_path], capture_output=True, text=True)
        for line in listing.stdout.splitlines():
            name = line.rsplit(" ", 1)[-1]
            if name.startswith(LIBSTDCXX_RUNTIME_PREFIXES):
                found.add(name)
    return sorted(found)
