"""The one thing pyproject.toml cannot say: the launch fast path's C extension.

It is optional: without a C compiler or Python's headers the install goes on and
launches take the same fast path in Python (runtime/dispatch.py), a few
microseconds slower.  `tileir.runtime.dispatch.use_native()` says which is in use.
"""
from setuptools import Extension, setup

setup(ext_modules=[Extension("tileir.runtime._fastlaunch",
                             ["python/tileir/runtime/_fastlaunch.c"],
                             depends=["python/tileir/runtime/_cuda_launch.h"],
                             extra_compile_args=["-O2", "-std=c11", "-Wall", "-Wextra",
                                                 "-Wno-missing-field-initializers",
                                                 "-Wno-cast-function-type"],
                             optional=True)])
