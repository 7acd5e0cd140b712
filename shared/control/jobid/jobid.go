// Package jobid makes job ids and knows their form, so that every part
// of the control plane checks an id the same way before it reads.
package jobid

import (
	crand "crypto/rand"
	"encoding/hex"
	"fmt"
	"regexp"
	"time"
)

// Pattern is the form of a job id (see New). Routes check ids against
// it before any read.
var Pattern = regexp.MustCompile(`^j[0-9a-f]{11}[0-9a-f]{10}$`)

// New returns a job id that sorts by creation time.
func New() string {
	var b [5]byte
	_, _ = crand.Read(b[:])
	return fmt.Sprintf("j%011x%s", time.Now().UnixMilli(), hex.EncodeToString(b[:]))
}
