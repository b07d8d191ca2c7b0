"""FIXED FILE (protected). `import cpu_extension` loads the library ./compile.sh built from kernels/."""
import os as _os

from cuda_agent.languages.cpp.extension import install_extension_module as _install

_lib = _os.path.join(_os.path.dirname(_os.path.abspath(__file__)), "build", "cpu_extension.so")
_install(__name__, _lib)
