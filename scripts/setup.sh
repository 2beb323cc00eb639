#!/usr/bin/env bash
# Install what qkv needs on Debian: a C compiler, CMake, OpenBLAS (OpenMP build) and OpenMP, and
# clang with its sanitizer and libFuzzer runtimes (libclang-rt-dev: only recommended by clang's
# packages, which --no-install-recommends leaves out) for `make test-asan` and `make fuzz`.
# Idempotent: installs only what is missing. Needs root (or sudo) when something is missing.
#   scripts/setup.sh            build dependencies
#   scripts/setup.sh --torch    also python3-torch + numpy (only to regenerate test fixtures)
#   scripts/setup.sh --profile  also perf and valgrind (bench/profile.sh)
#   scripts/setup.sh --bible    also diatheke, the SWORD Bible reader that exports the Bible
#                               modules for `scripts/fetch_data.sh bible` (the modules themselves
#                               are downloaded and unpacked there, not installed)
#   scripts/setup.sh --apertium also apertium-eng-spa (with apertium, lttoolbox,
#                               apertium-lex-tools), the rule-based English -> Spanish reference
#                               system of scripts/mt_baselines.sh
set -eu
want=(build-essential cmake libopenblas-openmp-dev clang libclang-rt-dev libomp-dev)
for opt in "$@"; do
    case "$opt" in
    --torch) want+=(python3-torch python3-numpy) ;;
    --profile) want+=(linux-perf valgrind) ;;
    --bible) want+=(diatheke) ;;
    --apertium) want+=(apertium-eng-spa) ;;
    *) echo "setup: unknown option '$opt' (--torch, --profile, --bible, --apertium)" >&2; exit 2 ;;
    esac
done
missing=()
for p in "${want[@]}"; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -eq 0 ]; then
    exit 0
fi
echo "setup: installing ${missing[*]}"
SUDO=""
if [ "$(id -u)" -ne 0 ]; then SUDO=sudo; fi
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -qq
$SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
