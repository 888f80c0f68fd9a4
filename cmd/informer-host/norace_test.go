//go:build !race

package main

// raceDetector is true in a binary built with -race, whose shadow memory
// lies outside the Go runtime's accounting and grows with the heap.
const raceDetector = false
