package control

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestParseOwnerLimits(t *testing.T) {
	const etl = "arn:aws:iam::123456789012:role/etl"
	cases := []struct {
		name    string
		in      string
		want    OwnerLimits
		wantErr string // the error names this entry
	}{
		{name: "empty", in: "", want: OwnerLimits{}},
		{name: "only separators", in: " , \n", want: OwnerLimits{}},
		{name: "default", in: "*=200", want: OwnerLimits{Default: 200}},
		{name: "default and overrides", in: "*=200,alice=50," + etl + "=10",
			want: OwnerLimits{Default: 200, Owners: map[string]int{"alice": 50, etl: 10}}},
		{name: "whitespace separates too", in: "*=5\n  alice=1\tbob=0",
			want: OwnerLimits{Default: 5, Owners: map[string]int{"alice": 1, "bob": 0}}},
		// IAM names may contain '=': the entry splits at its last one.
		{name: "owner with =", in: "arn:aws:sts::1:assumed-role/r/a=b=3",
			want: OwnerLimits{Owners: map[string]int{"arn:aws:sts::1:assumed-role/r/a=b": 3}}},
		{name: "at the cap", in: "*=1000", want: OwnerLimits{Default: 1000}},
		{name: "no =", in: "*=2,alice", wantErr: `"alice"`},
		{name: "no owner", in: "=3", wantErr: `"=3"`},
		{name: "no limit", in: "alice=", wantErr: `"alice="`},
		{name: "not a number", in: "*=2,alice=lots", wantErr: `"alice=lots"`},
		{name: "negative", in: "alice=-1", wantErr: `"alice=-1"`},
		{name: "over the cap", in: "*=1001", wantErr: `"*=1001"`},
		{name: "owner twice", in: "alice=1,alice=2", wantErr: `"alice=2"`},
		{name: "default twice", in: "*=1 *=2", wantErr: `"*=2"`},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got, err := ParseOwnerLimits(c.in)
			if c.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), "entry "+c.wantErr) {
					t.Fatalf("ParseOwnerLimits(%q) = %+v, %v; want an error naming entry %s", c.in, got, err, c.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatalf("ParseOwnerLimits(%q): %v", c.in, err)
			}
			if diff := cmp.Diff(c.want, got); diff != "" {
				t.Fatalf("ParseOwnerLimits(%q) (-want +got):\n%s", c.in, diff)
			}
			// The canonical form parses back to the same limits.
			again, err := ParseOwnerLimits(got.String())
			if err != nil || !cmp.Equal(got.Default, again.Default) || got.For("alice") != again.For("alice") || got.For(etl) != again.For(etl) {
				t.Fatalf("round trip of %q through %q: %+v, %v", c.in, got.String(), again, err)
			}
		})
	}
}

func TestOwnerLimitsFor(t *testing.T) {
	l := OwnerLimits{Default: 200, Owners: map[string]int{"alice": 50, "bob": 0}}
	for owner, want := range map[string]int{"alice": 50, "bob": 0, "carol": 200} {
		if got := l.For(owner); got != want {
			t.Errorf("For(%q) = %d, want %d", owner, got, want)
		}
	}
	if !l.Any() || (OwnerLimits{Owners: map[string]int{"bob": 0}}).Any() || (OwnerLimits{}).Any() {
		t.Error("Any: want true only when some limit is positive")
	}
}
