# Shared steps of the cold-prepare A/B scripts (cold_processes_ab.sh, cold_malloc_ab.sh), sourced
# by them: adjoint_jit_bench --cold-prepare-only per op under the settings the caller exported
# in ADJOINT_BENCH_COLD_SETTINGS, and the byte-for-byte comparison of two disk caches.

# cold_prepare_per_op BUILD_DIR OUT_DIR OP:TIMEOUT_S...: for each op, its cold prepares into
# OUT_DIR/cold-OP.json (stderr in cold-OP.err) within TIMEOUT_S seconds; prints "OP rc=N".
cold_prepare_per_op() {
  local build=$1 out=$2 case op
  shift 2
  for case in "$@"; do
    op=${case%%:*}
    timeout "${case##*:}" "$build/bin/adjoint_jit_bench" --cold-prepare-only "$op" \
      >"$out/cold-$op.json" 2>"$out/cold-$op.err"
    echo "$op rc=$?"
  done
}

# same_entries DIR OTHER_DIR: per file of disk-cache directory DIR, "same" when OTHER_DIR holds
# the same bytes under its name, else "DIFFERENT NAME"; counted (uniq -c).
same_entries() {
  local f
  for f in "$1"/*; do
    cmp -s "$f" "$2/$(basename "$f")" && echo "same" || echo "DIFFERENT $(basename "$f")"
  done | sort | uniq -c
}
