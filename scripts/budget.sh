#!/usr/bin/env bash
# The time budget of `make test-all` from a fresh clone on CI's machine kind (2 cores): each tier's seconds (a file of
# tier<TAB>seconds<TAB>exit status lines, written by scripts/test-all.sh; set-up's by .ci/run) against its budget. The
# budgets sum to 60 minutes (the arm64 tier's 15 with them), 20 under CI's 80; a tier over its budget is named in one
# line at the end: a warning, never a failure (hosts of one kind differ 2-3x). Measured tables: bench/README.md, "The
# CI budget".
set -uo pipefail
declare -A budget=(["set-up"]=360 ["make test"]=600 [long]=660 [heavy]=1080 [arm64]=900)
order=("set-up" "make test" long heavy arm64)
file=${1:-.test-logs/tiers.tsv}
[ -f "$file" ] || { echo "[budget] no timings in $file"; exit 0; }
declare -A took rcs
while IFS=$'\t' read -r name seconds rc; do took[$name]=$seconds; rcs[$name]=$rc; done < "$file"
total=0 limit=0 over=()
printf '[budget] %-10s %8s %8s  %s\n' tier seconds budget exit
for name in "${order[@]}"; do
  limit=$(( limit + ${budget[$name]} ))
  [ -n "${took[$name]:-}" ] || { printf '[budget] %-10s %8s %8s\n' "$name" - "${budget[$name]}"; continue; }
  total=$(( total + ${took[$name]} ))
  printf '[budget] %-10s %8s %8s  %s\n' "$name" "${took[$name]}" "${budget[$name]}" "${rcs[$name]}"
  [ "${took[$name]}" -le "${budget[$name]}" ] || over+=("$name (${took[$name]} s of ${budget[$name]})")
done
printf '[budget] %-10s %8s %8s\n' total "$total" "$limit"
if [ ${#over[@]} -gt 0 ]; then
  echo "[budget] WARNING: over budget: ${over[*]}"
fi
exit 0
