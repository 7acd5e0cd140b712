package main

import (
	"os"
	"testing"

	"github.com/batchwork/batchwork/internal/testtier"
)

// Every test here reaches the CDK through jsii, which starts Node.js:
// a synth, or a token check while reading the context.
func TestMain(m *testing.M) {
	if testtier.Short() {
		os.Exit(testtier.RunNone(m, "the CDK (a Node.js process)"))
	}
	os.Exit(m.Run())
}
