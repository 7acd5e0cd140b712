package emulator

import (
	"errors"
	"flag"
)

// ErrShort is Start's error in a test binary run with -short: the unit
// tier (go test -short ./...) starts no emulator, so a test that needs one
// skips under -short (internal/testtier.SkipUnderShort), and a TestMain
// that starts one checks testtier.Short first.
var ErrShort = errors.New("emulator: not started under go test -short, the unit tier; skip the test with testtier.SkipUnderShort, or check testtier.Short in TestMain")

// underShort reports whether this is a test binary run with -short. It
// reads the testing package's flag rather than importing testing, which
// programs do not link: the flag exists only in test binaries. A TestMain
// may start an emulator before m.Run parses the flags; parsing them here
// is what m.Run would do, every flag being registered by then.
func underShort() bool {
	f := flag.Lookup("test.short")
	if f == nil {
		return false
	}
	if !flag.Parsed() {
		flag.Parse()
	}
	return f.Value.String() == "true"
}
