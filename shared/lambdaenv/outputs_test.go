package lambdaenv

import (
	"strings"
	"testing"
)

func TestOutputBucketsFromEnv(t *testing.T) {
	for _, n := range EnvNames {
		t.Setenv(n, "x/"+n)
	}
	cases := []struct {
		value   string
		want    []string
		wantErr string
	}{
		{value: "", want: nil},
		{value: "corp-results, corp-results,lake.example.com", want: []string{"corp-results", "lake.example.com"}},
		{value: "corp-results,Bad_Name", wantErr: `"Bad_Name"`},
	}
	for _, c := range cases {
		t.Run(c.value, func(t *testing.T) {
			t.Setenv(EnvOutputBuckets, c.value)
			got, err := FromEnv()
			if c.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), EnvOutputBuckets) || !strings.Contains(err.Error(), c.wantErr) {
					t.Fatalf("FromEnv: %v, want an error naming %s and %s", err, EnvOutputBuckets, c.wantErr)
				}
				return
			}
			if err != nil || strings.Join(got.OutputBuckets, ",") != strings.Join(c.want, ",") {
				t.Fatalf("FromEnv: %v, %v; want output buckets %v", got.OutputBuckets, err, c.want)
			}
		})
	}
}
