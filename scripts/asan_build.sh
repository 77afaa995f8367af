# Sourced by the scripts/asan_*.sh checks: asan_build SOURCE.c NAME builds an AddressSanitizer and
# UBSan copy of one of the engine's C extensions as $TMP/NAME (a temporary directory removed on
# exit), for "$PY" (default .venv/bin/python); asan_python then runs Python with the sanitizer loaded.
PY=${PY:-.venv/bin/python}
TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT

asan_build() {
  local inc suffix
  inc=$("$PY" -c 'import sysconfig; print(sysconfig.get_paths()["include"])')
  suffix=$("$PY" -c 'import sysconfig; print(sysconfig.get_config_var("EXT_SUFFIX"))')
  gcc -shared -fPIC -O1 -g -fsanitize=address,undefined -fno-sanitize-recover=undefined -fno-omit-frame-pointer \
    -I"$inc" "$1" -o "$TMP/$2$suffix"
}

asan_python() {
  LD_PRELOAD=$(gcc -print-file-name=libasan.so) ASAN_OPTIONS=detect_leaks=0 "$PY" "$@"
}
