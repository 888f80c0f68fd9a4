/*
 * noop-c-batch: noop-c with the optional ih_handle_batch export (ABI v1.4,
 * IH_HANDLE_BATCH), for BenchmarkBatch. noop-c itself stays without it, so
 * the other benchmarks' figures for C mean what they meant.
 */
#include "noop.c"

IH_HANDLE_BATCH(ih_handle)
