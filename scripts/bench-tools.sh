#!/usr/bin/env bash
# Installs what `pgcompress-bench tunnel` needs: iproute2 (ip, tc), socat and OpenSSH's server and
# client (the peers it measures), and tpchgen-cli (the TPC-H data) into $PGCOMPRESS_TOOLS (default
# /opt/pgcompress-tools). scripts/setup.sh runs it, and `bench tunnel` runs its own copy (compiled into
# pgcompress) when something is missing. Idempotent: on a machine that has everything it only checks.
#
# tpchgen-cli is the Rust crate's own binary as its maintainers publish it on PyPI (a manylinux wheel,
# installed with pip into a venv at $PGCOMPRESS_TOOLS: seconds); where pip has no wheel for the
# platform it is compiled from crates.io with cargo install (minutes). Both write the same CSV.
#
#   bash scripts/bench-tools.sh
set -euo pipefail

TOOLS=${PGCOMPRESS_TOOLS:-/opt/pgcompress-tools}
TPCHGEN_VERSION=4.0.0

missing=()
command -v ip >/dev/null 2>&1 && command -v tc >/dev/null 2>&1 || missing+=(iproute2)
command -v socat >/dev/null 2>&1 || missing+=(socat)
[ -x /usr/sbin/sshd ] || missing+=(openssh-server)
command -v ssh >/dev/null 2>&1 && command -v ssh-keygen >/dev/null 2>&1 || missing+=(openssh-client)
python3 -c 'import ensurepip, venv' >/dev/null 2>&1 || missing+=(python3 python3-venv)
if ((${#missing[@]})); then
    echo "bench-tools: installing ${missing[*]}" >&2
    if [ "$(id -u)" != 0 ]; then
        echo "bench-tools: need root to install ${missing[*]} (run: sudo bash scripts/bench-tools.sh)" >&2
        exit 1
    fi
    export DEBIAN_FRONTEND=noninteractive
    # openssh-server's postinst would start the system's sshd on port 22; the bench starts its own,
    # with its own config, keys and port. A policy-rc.d answering 101 keeps every service down while installing.
    if [[ " ${missing[*]} " == *" openssh-server "* && ! -e /usr/sbin/policy-rc.d ]]; then
        printf '#!/bin/sh\nexit 101\n' >/usr/sbin/policy-rc.d
        chmod 755 /usr/sbin/policy-rc.d
        trap 'rm -f /usr/sbin/policy-rc.d' EXIT
    fi
    # setup.sh runs this after its own `apt-get update`, and says so: the lists are fetched once.
    [ -n "${PGCOMPRESS_APT_UPDATED:-}" ] || apt-get update -qq
    apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi

have_tpchgen() {
    [ "$("$TOOLS/bin/tpchgen-cli" --version 2>/dev/null)" = "tpchgen-cli $TPCHGEN_VERSION" ]
}
if ! have_tpchgen; then
    if ! mkdir -p "$TOOLS" 2>/dev/null || [ ! -w "$TOOLS" ]; then
        echo "bench-tools: cannot write $TOOLS (run as root, or set PGCOMPRESS_TOOLS)" >&2
        exit 1
    fi
    echo "bench-tools: installing tpchgen-cli $TPCHGEN_VERSION into $TOOLS from PyPI" >&2
    if ! { python3 -m venv "$TOOLS" &&
        "$TOOLS/bin/pip" install -q --disable-pip-version-check --only-binary :all: \
            "tpchgen-cli==$TPCHGEN_VERSION"; }; then
        echo "bench-tools: no tpchgen-cli wheel here; compiling it from crates.io (several minutes)" >&2
        cargo install --quiet --locked tpchgen-cli --version "$TPCHGEN_VERSION" --root "$TOOLS" --force
    fi
    have_tpchgen || { echo "bench-tools: tpchgen-cli did not install into $TOOLS" >&2; exit 1; }
fi
echo "bench-tools: ok (tpchgen-cli $TPCHGEN_VERSION in $TOOLS/bin, socat, OpenSSH, ip, tc)" >&2
