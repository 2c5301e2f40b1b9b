# Sourced by the benchmarks: a throwaway PostgreSQL cluster on a Unix socket in a new directory, with the benchmarks'
# settings (fsync and synchronous commit off, 256 MB of shared buffers).
#
#   cluster_init PREFIX        sets PGBIN (the newest /usr/lib/postgresql/*/bin), WORK (a new /tmp/PREFIX-XXXXXX) and
#                              RUNAS (runuser -u postgres when run as root: PostgreSQL refuses to run as root)
#   cluster_start PORT [OPTS]  initdb and start it in $WORK/data (log: $WORK/pg.log), OPTS added to the server's options;
#                              when it does not start, prints the end of the log and returns 1
#   cluster_stop               stop it at once

cluster_init() {
  PGBIN=$(dirname "$(ls -d /usr/lib/postgresql/*/bin/initdb | sort -V | tail -1)")
  WORK=$(mktemp -d "/tmp/$1-XXXXXX")
  chmod 755 "$WORK"
  RUNAS=()
  if [ "$(id -u)" = 0 ]; then RUNAS=(runuser -u postgres --); chown postgres "$WORK"; fi
}

cluster_start() {
  local port=$1
  shift
  "${RUNAS[@]}" "$PGBIN/initdb" -D "$WORK/data" -U bugle --auth=trust -E UTF8 --no-sync >/dev/null
  # The log says why a start failed, and the caller's cleanup deletes it: print its end first.
  if ! "${RUNAS[@]}" "$PGBIN/pg_ctl" -D "$WORK/data" -l "$WORK/pg.log" -w \
    -o "-k $WORK -p $port -c listen_addresses='' -c fsync=off -c synchronous_commit=off -c shared_buffers=256MB $*" start >/dev/null; then
    echo "PostgreSQL did not start; the end of its log:" >&2
    tail -n 20 "$WORK/pg.log" >&2 2>/dev/null || true
    return 1
  fi
}

cluster_stop() {
  "${RUNAS[@]}" "$PGBIN/pg_ctl" -D "$WORK/data" stop -m immediate >/dev/null 2>&1 || true
}
