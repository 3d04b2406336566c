#!/usr/bin/env bash
# dmlgpu's portable wheel, dist/dmlgpu-<version>-<python>-manylinux_2_27_x86_64.manylinux_2_28_x86_64.whl:
# installs on any x86-64 Linux with glibc 2.28 or newer and a Vulkan loader (tagged manylinux_2_27
# as well, since its modules ask for no glibc symbol newer than 2.27: docs/guide/install-wheel.md).
# Built, tagged, checked with `auditwheel show` and smoke-tested in a fresh venv by bootstrap.sh's
# wheel job, for the Python that runs bootstrap.sh (python3 on PATH).
exec "$(dirname "$0")/bootstrap.sh" wheel "$@"
