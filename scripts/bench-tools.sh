#!/usr/bin/env bash
# Installs what `pgcompress bench tunnel` needs: iproute2 (ip, tc), socat and OpenSSH's server and
# client (the peers it measures; scripts/setup.sh installs these too), and tpchgen-cli (the TPC-H
# data), a Rust crate compiled from crates.io into $PGCOMPRESS_TOOLS (default /opt/pgcompress-tools).
# Compiling it takes several minutes on a small machine, so scripts/setup.sh does not run this:
# `bench tunnel` runs it (its own copy, compiled into pgcompress) when something is missing.
# Idempotent: on a machine that has everything it only checks and returns.
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
if ((${#missing[@]})); then
    echo "bench-tools: installing ${missing[*]}" >&2
    if [ "$(id -u)" != 0 ]; then
        echo "bench-tools: need root to install ${missing[*]} (run: sudo bash scripts/bench-tools.sh)" >&2
        exit 1
    fi
    export DEBIAN_FRONTEND=noninteractive
    # As in setup.sh: openssh-server's postinst would start the system's sshd on port 22; the bench
    # starts its own. A policy-rc.d answering 101 keeps every service down while installing.
    if [[ " ${missing[*]} " == *" openssh-server "* && ! -e /usr/sbin/policy-rc.d ]]; then
        printf '#!/bin/sh\nexit 101\n' >/usr/sbin/policy-rc.d
        chmod 755 /usr/sbin/policy-rc.d
        trap 'rm -f /usr/sbin/policy-rc.d' EXIT
    fi
    apt-get update -qq
    apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi

have_tpchgen() {
    [ "$("$TOOLS/bin/tpchgen-cli" --version 2>/dev/null)" = "tpchgen-cli $TPCHGEN_VERSION" ]
}
if ! have_tpchgen; then
    echo "bench-tools: compiling tpchgen-cli $TPCHGEN_VERSION into $TOOLS (several minutes)" >&2
    if ! mkdir -p "$TOOLS" 2>/dev/null || [ ! -w "$TOOLS" ]; then
        echo "bench-tools: cannot write $TOOLS (run as root, or set PGCOMPRESS_TOOLS)" >&2
        exit 1
    fi
    cargo install --quiet --locked tpchgen-cli --version "$TPCHGEN_VERSION" --root "$TOOLS"
    have_tpchgen || { echo "bench-tools: tpchgen-cli did not install into $TOOLS" >&2; exit 1; }
fi
echo "bench-tools: ok (tpchgen-cli $TPCHGEN_VERSION in $TOOLS/bin, socat, OpenSSH, ip, tc)" >&2
