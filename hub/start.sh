#!/usr/bin/env bash
# `make hub`: the hub's own venv (hub/.venv), configurable-http-proxy from npm (hub/node_modules), the Docker network
# the students' containers join, then JupyterHub in the foreground. Secrets are made by jupyterhub_config.py on first
# start, in $NMTKIT_HUB_STATE (0600), never here.
set -euo pipefail
cd "$(dirname "$0")"
DOCKER=${DOCKER:-docker}
NET=${NMTKIT_HUB_NETWORK:-nmtkit-hub}
if [ ! -x .venv/bin/jupyterhub ] || [ requirements.txt -nt .venv/.installed ]; then
  python3 -m venv .venv
  .venv/bin/pip install -q -r requirements.txt
  touch .venv/.installed
fi
[ -x node_modules/.bin/configurable-http-proxy ] || npm install --no-save --no-audit --no-fund configurable-http-proxy@5.3.0
"$DOCKER" network inspect "$NET" >/dev/null 2>&1 || "$DOCKER" network create --label nmtkit.hub=1 "$NET" >/dev/null
# the hub's API on the network's gateway (a network made with --subnet alone lists none: its first address is it)
NMTKIT_HUB_API_IP=$("$DOCKER" network inspect -f '{{(index .IPAM.Config 0).Gateway}}' "$NET")
if [ -z "$NMTKIT_HUB_API_IP" ]; then
  subnet=$("$DOCKER" network inspect -f '{{(index .IPAM.Config 0).Subnet}}' "$NET")
  NMTKIT_HUB_API_IP=$(python3 -c 'import ipaddress, sys; print(next(ipaddress.ip_network(sys.argv[1]).hosts()))' "$subnet")
fi
export NMTKIT_HUB_API_IP NMTKIT_HUB_NETWORK=$NET
scheme=$([ -n "${NMTKIT_HUB_SSL_CERT:-}" ] && echo https || echo http)
echo "[hub] serving the course at $scheme://${NMTKIT_HUB_IP:-127.0.0.1}:${NMTKIT_HUB_PORT:-8000}/ (hub API on $NMTKIT_HUB_API_IP)"
exec .venv/bin/jupyterhub -f jupyterhub_config.py
