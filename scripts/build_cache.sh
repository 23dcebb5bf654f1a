# Builds kept per machine, outside any clone, so a fresh clone on the same machine (CI's clean
# clone) copies them instead of building again. Source it from the repository root.
#
#   build_cache_key TEXT...          a key for the inputs named by TEXT (16 hex digits)
#   build_cache_get NAME DEST        copies cache entry NAME into DEST after checking every
#                                    file against the entry's SHA256SUMS; 1 when there is no
#                                    such entry, or it fails the check (then it is removed)
#   build_cache_put NAME SRC FILE... keeps FILEs (paths relative to SRC) as entry NAME
#
# An entry's name holds the key of everything its files were built from (sources, flags,
# toolchain versions), so a changed input misses the cache and builds anew. Entries are
# written to a scratch folder and renamed into place, so a reader never sees half of one.
# AGENT_PY_BUILD_CACHE=0 turns the cache off (every build happens in the clone).
BUILD_CACHE=${AGENT_PY_BUILD_CACHE_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/agent_py}

build_cache_key() { printf '%s\n' "$@" | sha256sum | cut -c1-16; }

build_cache_get() {
  local entry=$BUILD_CACHE/$1 dest=$2
  [ "${AGENT_PY_BUILD_CACHE:-1}" != 0 ] && [ -f "$entry/SHA256SUMS" ] || return 1
  if ! (cd "$entry" && sha256sum --check --quiet --strict SHA256SUMS >/dev/null 2>&1); then
    echo "the build cache's $1 fails its checksums: removed, building anew" >&2
    rm -rf "$entry"
    return 1
  fi
  local file
  while read -r _ file; do
    mkdir -p "$dest/$(dirname "$file")"
    cp "$entry/$file" "$dest/$file"
  done <"$entry/SHA256SUMS"
}

build_cache_put() {
  [ "${AGENT_PY_BUILD_CACHE:-1}" != 0 ] || return 0
  local name=$1 src=$2 file
  shift 2
  local entry=$BUILD_CACHE/$name
  [ -f "$entry/SHA256SUMS" ] && return 0
  rm -rf "$entry" # a leftover without checksums (entries appear whole, with theirs)
  mkdir -p "$BUILD_CACHE"
  local tmp
  tmp=$(mktemp -d "$BUILD_CACHE/.$name.XXXXXX")
  for file in "$@"; do
    mkdir -p "$tmp/$(dirname "$file")"
    cp "$src/$file" "$tmp/$file"
  done
  (cd "$tmp" && sha256sum -- "$@" >SHA256SUMS)
  mv -T "$tmp" "$entry" 2>/dev/null || rm -rf "$tmp" # another clone put it first
}
