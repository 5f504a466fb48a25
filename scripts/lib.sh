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
