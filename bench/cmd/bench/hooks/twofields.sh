#!/usr/bin/env bash
# The shell-operator peer of bench/plugins/twofields with record on: for
# every ConfigMap event in $BENCH_NAMESPACE it reads metadata.labels.app
# and data.seq (jq, as a shell-operator hook does) and appends a latency
# record "t:name:seq:entered" to $BENCH_RECORDS, the format of
# bench/plugins/internal/rec. shell-operator hands a hook every event
# queued since its last run at once (its queue compaction), so one run
# records several events, all entered when the run began. The first run,
# Synchronization, appends "sync": the harness's sign that the hook is
# bound. Each copy of the hook has a queue of its own, named after its
# file: shell-operator combines only consecutive tasks of one hook, so
# copies sharing the main queue would interleave and run once per event
# each.
set -euo pipefail
if [[ ${1:-} == --config ]]; then
	cat <<CONFIG
configVersion: v1
kubernetes:
- name: cms
  apiVersion: v1
  kind: ConfigMap
  executeHookOnEvent: [Added, Modified, Deleted]
  queue: $(basename "$0" .sh)
  namespace:
    nameSelector:
      matchNames: [$BENCH_NAMESPACE]
CONFIG
	exit 0
fi
entered=${EPOCHREALTIME/./}000 # µs since the epoch, as ns
jq -r --arg t "$entered" '.[]
	| if .type == "Synchronization" then "sync"
	  elif .type == "Event" then
	    [.object.metadata.labels.app, .object.data.seq] as $f
	    | ({"Added": "a", "Modified": "u", "Deleted": "d"}[.watchEvent]) + ":" + .object.metadata.name + ":" + ($f[1] // "") + ":" + $t
	  else empty end' "$BINDING_CONTEXT_PATH" >>"$BENCH_RECORDS"
