# Shared set-up of the reproduce_*.sh scripts (sourced, not run): the binary, the results
# folder, a scratch folder removed on exit, and merge() for joining JSON arrays.
bin=${TESSERA_BIN:-build/tessera}
out=docs/results
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
mkdir -p "$out"
merge() {  # merge OUTPUT INPUTS...: one JSON array of every input array's entries
  local dst=$1
  shift
  python3 -c 'import json,sys; print(json.dumps(sum((json.load(open(f)) for f in sys.argv[1:]), []), indent=1))' "$@" > "$dst"
}
