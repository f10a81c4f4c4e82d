/* tests/fuzz/json-mutator.h — a structure-aware mutator for inputs that are JSON documents, one
 * per line (fuzz_ops's requests).
 *
 * libFuzzer's own mutations work on bytes: they rarely turn a valid request into another valid
 * request that differs in one place, which is where handlers go wrong (a `needs` list with a name
 * repeated eight times took the daemon down, and byte mutations did not find it in minutes). This
 * one parses a line, changes one node — repeats or drops an array element, drops an object key,
 * replaces a value by a copy of another node of the same request or by an edge value (0, -1,
 * 2^63-1, "", "/", a small task id, …) — and writes the line back; or it duplicates, drops or
 * swaps whole lines. Half of the time, or when no line parses, it leaves the input to libFuzzer's
 * mutations (LLVMFuzzerMutate), dictionary included.
 */
#ifndef DROVER_FUZZ_JSON_MUTATOR_H
#define DROVER_FUZZ_JSON_MUTATOR_H

#include <stddef.h>
#include <stdint.h>

/* Mutates data[0..size) in place (at most max_size bytes) from seed; returns the new size. For
 * LLVMFuzzerCustomMutator. */
size_t json_mutate(uint8_t *data, size_t size, size_t max_size, unsigned seed);

#endif
