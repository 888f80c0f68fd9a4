// Package state is the host's per-plugin key-value store: what a plugin
// keeps across its own traps, restarts and hot reloads, and, with a path,
// across host restarts.
//
// A Store holds one Bucket per plugin, keyed by the plugin's module file
// name. The host owns the Store, not the plugin instance: an instance that
// traps, or a new version of the module that replaces it, finds the
// bucket as the previous one left it. The host drops a bucket when the
// module file is removed (unless configured to keep it).
//
// Every key has a version, a positive number that changes on every write
// of the key and is never reused within a bucket (not even after the key
// is deleted and written again), so compare-and-swap (Set and Delete with
// an expected version) cannot be fooled by an A-B-A sequence.
//
// A bucket has a quota of bytes (the sum of its keys' and values' lengths)
// and of keys. A write that would take the bucket past either fails with
// an error wrapping ErrQuota; deletes always succeed, as do writes that do
// not grow the bucket, so a plugin whose quota was lowered below what it
// holds can still shrink.
//
// # Persistence
//
// With Options.Path, the store is also kept in a bbolt file. Reads are
// always served from memory. Writes change memory at once and are written
// to the file in batches: one bbolt transaction, fsync'd, every
// FlushInterval (default 1s) and on Close. So:
//   - a graceful stop (SIGTERM: the host stops its plugins, then closes
//     the store) loses nothing;
//   - a SIGKILL or an OOM kill loses at most the writes of the last
//     FlushInterval (plus the one flush in progress); what it loses is
//     whole keys' latest values, never a torn value, and the file stays
//     consistent (bbolt commits are atomic), so the next start reads the
//     state as of the last completed flush. A power cut loses the same,
//     unless it tears the flush's last write (its meta page): then the
//     file is corrupt (below).
//
// # Versions across crashes
//
// A bucket never hands out a version above its reservation, a number in
// the file's index that is fsync'd before any version up to it is handed
// out. The flusher renews each reservation reserveAhead (65536) versions
// ahead in its batches, and the open renews them all in one commit; a Set
// waits for an fsync of its own only when its bucket uses up half of its
// reservation within one flush interval. A reopened bucket starts above
// its reservation, so a version handed out before a crash is never handed
// out again, flushed or not (a crash skips the unused rest of a
// reservation: versions have gaps, never repeats). If the file cannot
// take a reservation (a full disk), Set fails rather than hand out a
// version a crash could repeat. A dropped bucket keeps its reservation in
// the index, so one of the same name starts above it too.
//
// # Checked files
//
// bbolt trusts its pages, and has no checksums on data pages: a corrupt
// file can make it panic, fault on its mapping or recurse without end (all
// fatal to the process, at every start), or load wrong values silently.
// So Open reads the file with ordinary reads, under bbolt's lock, and
// checks all of it before bbolt may open it (verify.go): the meta pages'
// checksums (both: bbolt would fall back silently to the older commit if
// the newer were damaged), every page's id, type and bounds, every page
// reached once (no cycles), key order, every page in use or free. Each
// value is stored in a record with a CRC32C of its plugin, key, version
// and value, and an index in the file's meta bucket holds each plugin's
// number of keys and the sum of its records' checksums, so a value
// changed, moved, lost or come back is found too (record.go). The open
// itself runs with faults turned into panics and recovered, for a file
// changed since it was checked.
//
// A file that fails any check, and an empty file (which bbolt would
// silently start afresh), is corrupt: it is moved aside (to
// <path>.corrupt-<time>) under the lock, reported (an error log with the
// reason and where the file went, Options.OnCorrupt, CorruptFiles), and a
// fresh file started: every plugin starts with empty state. A file that
// cannot be opened (permissions, a missing directory, not a regular file,
// locked by another process) is left alone and the store runs in memory
// only, logged at error level with the path and what to do. Neither stops
// the host.
//
// Files written before records had checksums (format 0) load as they are
// and are rewritten in the current format in the open's commit; a host
// older than the current format does not read a file rewritten so. Open
// reads the whole file into memory once, to check it.
//
// Rule of direction: state imports nothing of informer-host; host and
// host/replay import it (the engine does too, for now, and should not: it
// is to reach state through the host).
package state
