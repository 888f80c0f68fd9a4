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
//   - a SIGKILL, an OOM kill or a power cut loses at most the writes of
//     the last FlushInterval (plus the one flush in progress); what it
//     loses is whole keys' latest values, never a torn value, and the file
//     stays consistent (bbolt commits are atomic), so the next start reads
//     the state as of the last completed flush.
//
// A file that cannot be used never stops the host: a corrupt file is moved
// aside (to <path>.corrupt-<time>) and a fresh one started; a file that
// cannot be opened (permissions, a missing directory, locked by another
// process) leaves the store in memory only. Both are logged at error level
// with the path and what to do, and every plugin starts empty.
package state
