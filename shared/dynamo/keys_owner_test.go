package dynamo

import (
	"strings"
	"testing"
)

// Owner-keyed partitions hold a fixed-size hash of the owner, so owners of
// any length (IAM principal ARNs reach 2,048 bytes) make short keys, and
// distinct owners distinct keys.
func TestOwnerKeysAreHashed(t *testing.T) {
	t.Parallel()
	long := "arn:aws:sts::123456789012:assumed-role/" + strings.Repeat("r", 64) + "/" + strings.Repeat("s", 1900)
	for name, pk := range map[string]func(string) string{
		"idempotency": func(o string) string { return idemPK(o, "key") },
		"job index":   ownerPK,
		"schedules":   schedulePK,
	} {
		a, b := pk(long), pk(long+"x")
		if len(a) > 64 || strings.Contains(a, "assumed-role") {
			t.Errorf("%s key %q holds the owner or is long", name, a)
		}
		if a == b {
			t.Errorf("%s keys of two owners collide: %q", name, a)
		}
	}
}
