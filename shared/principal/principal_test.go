package principal

import "testing"

func TestOwner(t *testing.T) {
	t.Parallel()
	sso := "arn:aws:sts::123456789012:assumed-role/AWSReservedSSO_DataPlatformEngineers_0a1b2c3d4e5f6a7b/firstname.lastname@example-corp.com"
	cases := []struct {
		name, arn string
		mode      Mode
		want      string
	}{
		{"assumed role", "arn:aws:sts::123456789012:assumed-role/etl/alice", ModeRole, "arn:aws:iam::123456789012:role/etl"},
		{"another session of the role", "arn:aws:sts::123456789012:assumed-role/etl/i-0abc", ModeRole, "arn:aws:iam::123456789012:role/etl"},
		{"session name with slashes", "arn:aws:sts::123456789012:assumed-role/etl/a/b", ModeRole, "arn:aws:iam::123456789012:role/etl"},
		{"sso session", sso, ModeRole, "arn:aws:iam::123456789012:role/AWSReservedSSO_DataPlatformEngineers_0a1b2c3d4e5f6a7b"},
		{"other partition", "arn:aws-cn:sts::123456789012:assumed-role/etl/x", ModeRole, "arn:aws-cn:iam::123456789012:role/etl"},
		{"iam user", "arn:aws:iam::123456789012:user/ops/bob", ModeRole, "arn:aws:iam::123456789012:user/ops/bob"},
		{"root", "arn:aws:iam::123456789012:root", ModeRole, "arn:aws:iam::123456789012:root"},
		{"federated user", "arn:aws:sts::123456789012:federated-user/bob", ModeRole, "arn:aws:sts::123456789012:federated-user/bob"},
		{"malformed assumed role", "arn:aws:sts::123456789012:assumed-role/etl", ModeRole, "arn:aws:sts::123456789012:assumed-role/etl"},
		{"not an arn", "alice", ModeRole, "alice"},
		{"session mode keeps the session", "arn:aws:sts::123456789012:assumed-role/etl/alice", ModeSession, "arn:aws:sts::123456789012:assumed-role/etl/alice"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			if got := Owner(tc.arn, tc.mode); got != tc.want {
				t.Errorf("Owner(%q, %s) = %q, want %q", tc.arn, tc.mode, got, tc.want)
			}
		})
	}
}

func TestParseMode(t *testing.T) {
	t.Parallel()
	for in, want := range map[string]Mode{"": ModeRole, "role": ModeRole, " session ": ModeSession} {
		if got, err := ParseMode(in); err != nil || got != want {
			t.Errorf("ParseMode(%q) = %q, %v; want %q", in, got, err, want)
		}
	}
	if _, err := ParseMode("user"); err == nil {
		t.Error("ParseMode(\"user\"): want an error")
	}
}

// An owner's key is fixed: the state table's owner records and the data
// bucket's inputs areas are keyed by it, so changing it would orphan them.
func TestKey(t *testing.T) {
	t.Parallel()
	for owner, want := range map[string]string{
		"alice":                              "2bd806c97f0e00af1a1fc3328fa763a9",
		"arn:aws:iam::123456789012:role/etl": "9a04756c1abefe3a239a76d92f11fd87",
	} {
		if got := Key(owner); got != want {
			t.Errorf("Key(%q) = %s, want %s", owner, got, want)
		}
	}
}
