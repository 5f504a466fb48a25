# Helpers sourced by the scripts in this folder.

# require VAR...: stop with one message naming every unset variable.
require() {
  local name missing=()
  for name in "$@"; do [[ -n "${!name:-}" ]] || missing+=("$name"); done
  if (( ${#missing[@]} )); then
    echo "error: set the environment variable(s) ${missing[*]} (see the top of $0)" >&2
    exit 2
  fi
}

# optional VAR --flag: append --flag "$VAR" to the array `flags` when VAR is set.
optional() {
  if [[ -n "${!1:-}" ]]; then flags+=("$2" "${!1}"); fi
}

# submit ARG...: exec `python -m trainer.submit "${flags[@]}" -- ARG...` from the repository.
# The trainer arguments may start with a `--` of their own (`train-cloud-gpu.sh -- --epochs 3`,
# the form `trainer.submit` uses): that one is a separator, not an argument for the trainer.
submit() {
  if [[ "${1:-}" == -- ]]; then shift; fi
  local root
  root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
  PYTHONPATH="$root${PYTHONPATH:+:$PYTHONPATH}" exec "${PYTHON:-python3}" -m trainer.submit "${flags[@]}" -- "$@"
}
