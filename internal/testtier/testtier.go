// Package testtier sorts tests into tiers. `go test -short ./...` is the
// unit tier: it starts no emulator (moto, DynamoDB Local, LocalStack), no
// Java or Node.js process and no CDK synth. `go test ./...` (make test)
// runs everything.
//
// A test that needs more than the unit tier calls SkipUnderShort. A
// package whose TestMain starts what its tests share (the emulator) checks
// Short first and, under -short, starts nothing and runs no test
// (RunNone): tests added to such a package are tiered without doing
// anything. The emulator launcher (internal/emulator) refuses to start
// under -short, so a test that forgets fails rather than slowing the unit
// tier.
package testtier

import (
	"flag"
	"fmt"
	"os"
	"testing"
)

// SkipUnderShort skips tb under -short; why says what the test needs
// beyond the unit tier ("the AWS emulator", "a CDK synth").
func SkipUnderShort(tb testing.TB, why string) {
	tb.Helper()
	if testing.Short() {
		tb.Skipf("skipped under -short (the unit tier): needs %s", why)
	}
}

// Short reports whether this is the unit tier. Unlike testing.Short it
// may be called in TestMain before m.Run, which is where the flags are
// otherwise parsed.
func Short() bool {
	if !flag.Parsed() {
		flag.Parse()
	}
	return testing.Short()
}

// RunNone runs none of m's tests, for a TestMain under -short whose tests
// all need what it would have started; why says what that is. It returns
// m.Run's exit code, so `go test` reports the package as passing with
// "[no tests to run]".
func RunNone(m *testing.M, why string) int {
	fmt.Fprintf(os.Stderr, "skipped under -short (the unit tier): every test here needs %s\n", why)
	if err := flag.Set("test.skip", "."); err != nil {
		fmt.Fprintln(os.Stderr, "testtier:", err)
		return 1
	}
	return m.Run()
}
