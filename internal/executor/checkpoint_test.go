package executor

import (
	"bytes"
	"errors"
	"testing"

	"github.com/batchwork/batchwork/shared/domain"
)

// A checkpoint's arguments are checked before anything is written.
func TestCheckpointArgs(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name         string
		offset, prev int64
		state        int
		want         string
	}{
		{"fine", 10, 5, 100, ""},
		{"same offset", 5, 5, 0, ""},
		{"negative", -1, 0, 0, "offset -1 is negative"},
		{"backward", 4, 5, 0, "offset 4 is behind the last checkpoint's 5"},
		{"state too large", 10, 0, domain.MaxCheckpointState + 1, "over the 65536-byte limit"},
	} {
		err := domain.CheckArgs(tc.offset, tc.prev, make([]byte, tc.state))
		switch {
		case tc.want == "" && err != nil:
			t.Errorf("%s: %v", tc.name, err)
		case tc.want != "" && (!errors.Is(err, domain.ErrCheckpoint) || !bytes.Contains([]byte(err.Error()), []byte(tc.want))):
			t.Errorf("%s: %v, want a refused checkpoint saying %q", tc.name, err, tc.want)
		}
	}
}
