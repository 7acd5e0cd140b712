// Package testdouble holds the in-memory doubles of the ports the control
// plane and the executors use: Store (the control plane's store port),
// Blob (S3, as both the control plane's and the executor's blob ports
// see it), Queue (SQS), Clock, and the fault hooks and journal that tests
// drive them with. One double per port, shared by every package's tests,
// so that a fix to what a fake models reaches every test that relies on
// it.
//
// Only tests import this package: it must never be linked into a
// shipped binary (internal/faultenv's TestShippedBinariesCarryNoTestMachinery
// checks that).
package testdouble
